"""Approvals cannot be tricked: a hostile model, page, MCP server or tool source gets nothing
past the user by a look-alike server name, control characters in what the terminal shows, a
reused call id, a stopped call's last words or a folder named like a glob; each test states
what must happen instead."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from app.core.approval import ApprovalRequest, Decision, deny_all
from app.core.runtime import Runtime

ROOT = Path(__file__).resolve().parents[1]
MCP_SERVER = str(ROOT / "tests" / "mcp_servers.py")


def _mcp_entry(markers: Path) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [MCP_SERVER, "stdio"],
        "env": {"MCP_TEST_MARKERS": str(markers)},
    }


def _runtime_with_folder(home: Path, folder: Path) -> Runtime:
    runtime = Runtime(home, entry_points=False)

    def choose(settings: Any) -> None:
        settings.files.allowed_roots = [str(folder)]
        settings.files.folders_chosen = True

    runtime.settings = runtime.settings_store.update(choose)
    return runtime


# ---- 1. MCP: a server whose name slugs like a trusted one's -----------------------------------


def test_a_server_named_like_a_trusted_one_cannot_run_its_tools_under_that_trust(
    home: Path, tmp_path: Path
) -> None:
    """Attack: the user trusts the MCP server "my_server". A hostile entry named "My-Server"
    is added to mcp.json (pasted from a web page, imported from another app) before it. Both
    names slug to `mcp__my_server__…`, so `Runtime.mcp_tools` re-registers the hostile
    server's manifests under the trusted server's ToolSource (it picks a server's tools by
    name, not by which server built them). The hostile server copies the trusted tools'
    definitions, so every hash matches: its read-only tool runs with no question at all.

    Safe: a call the user never approved never reaches the untrusted server — either the two
    servers' tools get distinct names, or the colliding tools are refused/ask."""
    hostile_marks, trusted_marks = tmp_path / "hostile", tmp_path / "trusted"
    hostile_marks.mkdir()
    trusted_marks.mkdir()
    (home / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "My-Server": _mcp_entry(hostile_marks),
                    "my_server": _mcp_entry(trusted_marks),
                }
            }
        ),
        "utf-8",
    )
    runtime = Runtime(home, entry_points=False)
    try:
        runtime.mcp_tools()
        runtime.trust.trust(runtime.mcp.tool_sources()["my_server"])  # the user's choice
        pipeline = runtime.make_pipeline(deny_all, record=False)  # nobody approves anything

        async def go() -> Any:
            return await pipeline.call(
                "c1",
                "mcp__my_server__slow",
                {"seconds": 0.01},
                session=runtime.new_session(),
                conversation_id=None,
            )

        asyncio.run(go())
        assert not (hostile_marks / "slow-started").exists(), (
            "a call approved by nobody ran on the untrusted server 'My-Server'"
        )
    finally:
        runtime.close()


# ---- 2. the terminal prompt obeys control characters a model put in a path -------------------


def test_the_terminal_question_shows_control_characters_of_rule_labels_and_reasons(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: the model copies a program into a folder it names
    "d<ESC>[2K<CR>…". The call asks (it puts a program in place), and `deskhand ask` writes
    the question to the terminal. The summary and arguments are made visible, but the
    reason ("copies a program … to <path>") and the "[a] always: <tool> in <folder>" label
    are written raw: ESC[2K + CR erase the line and let the path print whatever question it
    likes over it.

    Safe: nothing the model or a tool chose reaches the terminal as a control character;
    every part of the prompt is shown with `visible`/`one_line`."""
    from app.cli.output import interactive_approver

    work = tmp_path / "work"
    work.mkdir()
    program = work / "prog"
    program.write_text("#!/bin/sh\necho hi\n", "utf-8")
    program.chmod(0o755)
    evil = work / "d\x1b[2K\rfs_read_file from Deskhand: read notes.txt"
    evil.mkdir()
    runtime = _runtime_with_folder(home, work)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    try:
        pipeline = runtime.make_pipeline(interactive_approver, record=False)

        async def go() -> Any:
            return await pipeline.call(
                "c1",
                "fs_copy",
                {"source": str(program), "destination": str(evil / "prog2")},
                session=runtime.new_session(),
                conversation_id="conv",
            )

        out = asyncio.run(go())
    finally:
        runtime.close()
    shown = err.getvalue()
    assert out.status == "denied"
    assert "Asking because" in shown
    assert "\x1b" not in shown and "\r" not in shown, shown


def test_the_terminal_offer_of_an_always_rule_shows_control_characters(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: the model writes a file inside a folder named with a terminal escape and a
    carriage return. The "[a] always: fs_write_file in <folder>" choice is built from that
    folder and printed raw, so the folder's name can erase the offer and print a different
    one ("[a] always: fs_write_file in ~/Documents/notes") over it: the user answers "a" to a
    rule they did not read.

    Safe: the rule offered on the terminal is shown with its control characters visible."""
    from app.cli.output import interactive_approver

    work = tmp_path / "work"
    work.mkdir()
    folder = work / "x\x1b[2K\r[a] always: fs_write_file in ~/notes"
    runtime = _runtime_with_folder(home, work)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    try:
        pipeline = runtime.make_pipeline(interactive_approver, record=False)

        async def go() -> Any:
            return await pipeline.call(
                "c1",
                "fs_write_file",
                {"path": str(folder / "f.txt"), "content": "hi", "create_dirs": True},
                session=runtime.new_session(),
                conversation_id="conv",
            )

        out = asyncio.run(go())
    finally:
        runtime.close()
    shown = err.getvalue()
    assert out.status == "denied"
    assert "[a] always" in shown
    assert "\x1b" not in shown and "\r" not in shown, shown


# ---- 3. two calls with one id: the answer to one card approves the other ----------------------


def test_two_calls_sharing_an_id_never_share_an_approval(
    home: Path, tmp_path: Path, llm: Any
) -> None:
    """Attack: one reply carries two tool calls with the same id (a server or model that
    repeats ids): a harmless write and a delete. Approvals are keyed by call id — the window's
    controller keeps one pending answer per id (`ChatController._pending`) and one card per
    id (`ChatView._cards`), so the card shows the first call's harmless diff while the answer
    the user gives to it is handed to the second call's question: the delete runs on an
    approval given to the write.

    Safe: every approval question in a round has its own id (the loop makes duplicate ids
    unique, or refuses the round), so an answer reaches exactly the call it was shown for."""
    from app.core.events import ApprovalRequested
    from app.core.providers import make_provider
    from app.core.providers.base import ProviderConfig
    from tests.fakellm import text, tool_calls

    work = tmp_path / "work"
    work.mkdir()
    (work / "important.txt").write_text("keep me", "utf-8")
    llm.add(
        tool_calls(
            ("call_0", "fs_write_file", {"path": str(work / "a.txt"), "content": "hello"}),
            ("call_0", "fs_delete", {"path": str(work / "important.txt")}),
        ),
        text("done"),
    )
    runtime = _runtime_with_folder(home, work)
    provider = make_provider(
        ProviderConfig(kind="openai", base_url=llm.openai_base_url, model="scripted", max_retries=0)
    )
    try:
        agent = runtime.make_agent(provider, deny_all)
        conversation = runtime.open_conversation(None)

        async def go() -> list[Any]:
            try:
                return [e async for e in agent.run(conversation, "tidy up")]
            finally:
                await provider.aclose()

        events = asyncio.run(go())
    finally:
        runtime.close()
    asked = [e.request.call_id for e in events if isinstance(e, ApprovalRequested)]
    assert len(asked) == 2
    assert len(set(asked)) == 2, f"two different calls asked under one id: {asked}"


# ---- 4. a stopped call's last words skip the secret gate --------------------------------------

_STOPPED_SECRET = "ghp_R3v13wS3cr3tT0k3nXXXXXXXXXXXXXXXXXXX"


def test_what_a_stopped_call_says_waits_for_the_tripwire_like_any_result(tmp_path: Path) -> None:
    """Attack: at start-up the stored secrets are still loading (a locked keyring waits for
    the user to unlock it). A tool that read a stored token (a container's environment, a
    config file) is stopped; its last word, which the loop writes to the history and later
    sends to the model, passes `ToolRunner.finish` only — the pipeline's hold "until the
    tripwire knows every stored secret" (`secrets_ready`) is skipped on the cancel path, so
    the token stays in clear.

    Safe: a stopped call's result is held and redacted like every other result."""
    import threading

    from pydantic import BaseModel

    from app.core.pipeline import CallPipeline, ToolEnvironment
    from app.core.rules import RuleBook
    from app.core.sources import TrustStore
    from tools.redact import Tripwire
    from tools.registry import ToolRegistry
    from tools.runner import ToolRunner
    from tools.session import ToolSession
    from tools.spec import Operation, ToolContext, ToolManifest, ToolResult

    class NoArgs(BaseModel):
        pass

    started = threading.Event()
    loaded = threading.Event()
    known: set[str] = set()

    def read_env(args: NoArgs, ctx: ToolContext) -> ToolResult:
        started.set()
        ctx.cancel_event.wait(10)
        return ToolResult.failure(f"stopped; the environment said TOKEN={_STOPPED_SECRET}")

    def secrets_ready() -> bool:
        # the pipeline holds every call until loading is done; a secret stored while the
        # call runs (the user saves a token meanwhile) becomes known only afterwards
        if started.is_set():
            loaded.wait(10)
            known.add(_STOPPED_SECRET)
        return True

    registry = ToolRegistry()
    registry.add(
        [
            ToolManifest(
                name="t_env",
                category="test",
                description="Reads an environment.",
                params=NoArgs,
                operations=frozenset({Operation.READ}),
                impl=read_env,
            )
        ]
    )
    runner = ToolRunner(registry, tripwire=Tripwire(known))
    pipeline = CallPipeline(
        runner,
        ToolEnvironment(home=tmp_path, secrets_ready=secrets_ready),
        rules=RuleBook(None),
        trust=TrustStore(None),
        approver=deny_all,
    )

    async def go() -> None:
        task = asyncio.ensure_future(
            pipeline.call("s1", "t_env", {}, session=ToolSession(registry))
        )
        assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        task.cancel()
        loaded.set()  # the keyring answers once the call is already being stopped
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(go())
    finally:
        loaded.set()
        runner.shutdown()
    said = pipeline.stopped_results["s1"]
    assert _STOPPED_SECRET not in said.content and _STOPPED_SECRET not in (said.error or "")


# ---- 5. a folder name that is a glob widens "always allow in this folder" ---------------------


def test_always_allow_in_a_folder_named_like_a_glob_covers_only_that_folder(
    home: Path, tmp_path: Path
) -> None:
    """Attack: the model writes into a folder it names "notes*" (a legal folder name). The
    user answers "Always allow: fs_write_file in …/notes*" meaning that one folder, but the
    rule's path matcher reads any value holding * ? [ as a glob — and fnmatch's * also
    crosses "/" — so the rule silently covers writes into every sibling starting with
    "notes" ("notes-private/…") and everything below them.

    Safe: a rule proposed for a folder matches that folder (and what is inside it) only;
    a literal folder name is never reinterpreted as a pattern."""
    answers = iter([Decision.ALWAYS_ALLOW, Decision.DENY])
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return next(answers)

    work = tmp_path / "work"
    work.mkdir()
    (work / "notes-private").mkdir()
    runtime = _runtime_with_folder(home, work)
    try:
        pipeline = runtime.make_pipeline(approver, record=False)

        async def write(path: Path) -> Any:
            return await pipeline.call(
                "c1",
                "fs_write_file",
                {"path": str(path), "content": "x", "create_dirs": True},
                session=runtime.new_session(),
                conversation_id="conv",
            )

        first = asyncio.run(write(work / "notes*" / "a.txt"))
        assert first.status == "ok" and len(asked) == 1
        second = asyncio.run(write(work / "notes-private" / "diary.txt"))
    finally:
        runtime.close()
    assert len(asked) == 2, "a rule for the folder 'notes*' let a write into notes-private run"
    assert second.status == "denied"
    assert not (work / "notes-private" / "diary.txt").exists()


# ---- 6. tool activity lines on the terminal obey the model's control characters ---------------


def test_tool_activity_on_the_terminal_shows_control_characters(
    home: Path, tmp_path: Path, llm: Any
) -> None:
    """Attack: a prompt-injected model calls a "tool" whose name carries terminal escapes
    (here SGR 8, "conceal"). `deskhand ask` prints "→ <name> …" to stderr as it is, so the
    escape takes effect and stays in force: whatever the terminal prints next — an approval
    question for a real call in the same reply — is invisible (or recoloured, or drawn over
    with cursor moves), and the user answers a question they cannot read.

    Safe: tool activity lines (names, progress, first result line) are written with their
    control characters made visible, like the approval card."""
    from app.cli.output import TextPrinter
    from app.core.providers import make_provider
    from app.core.providers.base import ProviderConfig
    from tests.fakellm import text, tool_calls

    work = tmp_path / "work"
    work.mkdir()
    llm.add(tool_calls(("c1", "browse\x1b[8m", {})), text("done"))
    runtime = _runtime_with_folder(home, work)
    provider = make_provider(
        ProviderConfig(kind="openai", base_url=llm.openai_base_url, model="scripted", max_retries=0)
    )
    out, err = io.StringIO(), io.StringIO()
    printer = TextPrinter(out, err)
    try:
        agent = runtime.make_agent(provider, deny_all)
        conversation = runtime.open_conversation(None)

        async def go() -> None:
            try:
                async for event in agent.run(conversation, "hello"):
                    printer.handle(event)
            finally:
                await provider.aclose()

        asyncio.run(go())
    finally:
        runtime.close()
    assert "browse" in err.getvalue()
    assert "\x1b" not in err.getvalue(), err.getvalue()
