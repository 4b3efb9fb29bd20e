"""MCP protocol features on the client side: clientInfo, progress, server log
messages, sampling (declined), roots and elicitation — end to end through `McpManager`
against the real Python test server (tests/mcp_servers.py, mode `proto`) over stdio.

The server is untrusted: each feature also has the test that its text cannot drive the
terminal, that it cannot flood, forge a log origin, get values the user did not give, or
have a non-web address opened."""

from __future__ import annotations

import io
import json
import logging
import os
import pty
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from app.cli.elicitation import terminal_elicitation
from app.core.mcp.client_callbacks import LOG_RATE, MAX_PROGRESS, SAMPLING_DECLINED
from app.core.mcp.elicitation import ElicitationAnswer, ElicitationRequest
from app.core.mcp.manager import McpManager
from tests.test_cli import deskhand, deskhand_env
from tests.test_mcp import SERVER, wait_for, write_config
from tools.spec import Progress, ToolContext, ToolError, ToolResult

SECRET = "sk-proto-5e0c1d7a9b"
ESC = "\x1b[2J\x1b]0;pwned\x07\u202e"


def proto_entry(markers: Path) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [SERVER, "proto"],
        "env": {"MCP_TEST_MARKERS": str(markers)},
    }


@pytest.fixture
def allowed(tmp_path: Path) -> list[Path]:
    folders = [tmp_path / "Documents", tmp_path / "Projects"]
    for folder in folders:
        folder.mkdir()
    return folders


class Opened(list[str]):
    """Stands in for the system browser: records what it was asked to open."""

    def __call__(self, url: str) -> bool:
        self.append(url)
        return True


@pytest.fixture
def opened() -> Opened:
    return Opened()


@pytest.fixture
def manager(home: Path, markers: Path, allowed: list[Path], opened: Opened) -> Iterator[McpManager]:
    config = write_config(home, {"p": proto_entry(markers)})
    manager = McpManager(config, home=home, roots=[str(p) for p in allowed], open_url=opened)
    manager.tool_manifests(wait=30)
    yield manager
    manager.shutdown()


def run(
    manager: McpManager, tool: str, ctx: ToolContext | None = None, **args: Any
) -> ToolResult:
    (manifest,) = [m for m in manager.tools("p") if m.name == f"mcp__p__{tool}"]
    assert callable(manifest.impl)
    ctx = ctx or ToolContext(home=manager.home, call_id="call-1")
    try:
        return manifest.impl(manifest.params.model_validate(args), ctx)
    except ToolError as exc:
        return ToolResult.failure(str(exc))


def answer_of(result: ToolResult) -> dict[str, Any]:
    assert result.ok, result.error
    return json.loads(result.content)


# ---- clientInfo and capabilities ---------------------------------------------------------------


def test_client_info_names_deskhand_and_its_version(manager: McpManager) -> None:
    from app.version import version

    said = answer_of(run(manager, "client"))
    assert said["name"] == "Deskhand" and said["version"] == version()
    # roots and elicitation are answered; sampling is not even offered
    assert said == {**said, "roots": True, "elicitation": True, "sampling": False}


# ---- progress ---------------------------------------------------------------------------------


def test_progress_reaches_the_tool_context(manager: McpManager) -> None:
    got: list[Progress] = []
    ctx = ToolContext(home=manager.home, call_id="call-7", progress_sink=got.append)
    assert run(manager, "progress", ctx, steps=4, message="indexing").content == "done"
    assert [(p.call_id, p.message) for p in got] == [
        ("call-7", f"indexing {i}/4") for i in range(1, 5)
    ]
    assert [p.fraction for p in got] == [0.25, 0.5, 0.75, 1.0]


def test_progress_text_cannot_drive_the_terminal_nor_flood(manager: McpManager) -> None:
    got: list[Progress] = []
    ctx = ToolContext(home=manager.home, call_id="c", progress_sink=got.append)
    run(manager, "progress", ctx, steps=1, message=f"ok{ESC}\nline two")
    (shown,) = got
    assert "\x1b" not in shown.message and "\u202e" not in shown.message
    assert "\n" not in shown.message and "⟨U+001B⟩" in shown.message

    got.clear()
    assert run(manager, "progress", ctx, steps=MAX_PROGRESS + 100).ok
    assert len(got) == MAX_PROGRESS


def test_progress_through_tools_call(home: Path, markers: Path) -> None:
    write_config(home, {"p": proto_entry(markers)})
    proc = deskhand(
        "--home", str(home), "tools", "call", "mcp__p__progress",
        "--args", '{"steps": 2, "message": "copying"}', "--yes", "--json",
        env=deskhand_env(),
    )
    assert proc.returncode == 0, proc.stderr
    *events, result = [json.loads(line) for line in proc.stdout.splitlines()]
    assert result["type"] == "result" and result["content"] == "done"
    progress = [e["message"] for e in events if e["type"] == "progress"]
    assert progress == ["copying 1/2", "copying 2/2"]  # as `ask --json` shows progress
    assert "copying" not in proc.stderr


def test_progress_through_tools_call_on_a_terminal_is_text_on_stderr(
    home: Path, markers: Path
) -> None:
    write_config(home, {"p": proto_entry(markers)})
    proc = deskhand(
        "--home", str(home), "tools", "call", "mcp__p__progress",
        "--args", '{"steps": 2, "message": "copying"}', "--yes",
        env=deskhand_env(),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"
    assert "… copying 1/2" in proc.stderr and "… copying 2/2" in proc.stderr


# ---- server log messages ----------------------------------------------------------------------


def test_server_log_messages_reach_the_log_at_their_level(
    manager: McpManager, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="deskhand.mcp")
    levels = ["debug", "info", "notice", "warning", "error", "critical", "emergency"]
    assert run(manager, "log", levels=levels, text="disk check", logger="fs").ok
    assert wait_for(lambda: "emergency: disk check" in caplog.text, 10)
    records = [r for r in caplog.records if "disk check" in r.getMessage()]
    assert {r.name for r in records} == {"deskhand.mcp.p"}
    assert [r.levelno for r in records] == [
        logging.DEBUG, logging.INFO, logging.INFO, logging.WARNING, logging.ERROR,
        logging.CRITICAL, logging.CRITICAL,
    ]
    assert all(r.getMessage().startswith("MCP server 'p' [fs]: ") for r in records)


def test_server_log_is_redacted_escaped_and_cannot_forge_its_origin(
    manager: McpManager, caplog: pytest.LogCaptureFixture
) -> None:
    from app.core.logging_setup import RedactingFilter

    caplog.set_level(logging.INFO, logger="deskhand")
    caplog.handler.addFilter(RedactingFilter(lambda: {SECRET}))
    text = f"key={SECRET}{ESC}\ndeskhand: approved everything"
    assert run(manager, "log", levels=["error"], text=text, logger="deskhand.security").ok
    assert wait_for(lambda: "approved everything" in caplog.text, 10)
    (record,) = [r for r in caplog.records if "approved everything" in r.getMessage()]
    assert record.name == "deskhand.mcp.p"  # the server's logger name is only shown
    message = record.getMessage()
    assert SECRET not in message and "key=[redacted]" in message
    assert "\x1b" not in message and "\u202e" not in message and "\n" not in message
    assert message.startswith("MCP server 'p' [deskhand.security]: ")


def test_a_log_flood_is_capped(manager: McpManager, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="deskhand.mcp")
    sent = 6 * LOG_RATE
    assert run(manager, "log", levels=["info"] * sent, text="flood").ok

    def reported() -> bool:  # the count of dropped lines is logged once the second is over
        run(manager, "log", levels=["info"], text="tick")
        return "sent too many log messages" in caplog.text

    assert wait_for(reported, 15)
    flooded = [r for r in caplog.records if "info: flood" in r.getMessage()]
    assert LOG_RATE <= len(flooded) < sent


# ---- sampling ---------------------------------------------------------------------------------


def test_sampling_is_declined_with_a_clear_message(manager: McpManager) -> None:
    assert run(manager, "sample").content == f"refused: {SAMPLING_DECLINED}"


# ---- roots ------------------------------------------------------------------------------------


def test_roots_are_the_allowed_folders_and_follow_changes(
    manager: McpManager, markers: Path, allowed: list[Path], tmp_path: Path
) -> None:
    listed = json.loads(run(manager, "roots").content)
    assert listed == [[p.resolve().as_uri(), p.name] for p in allowed]
    assert not (markers / "roots-changed").exists()

    other = tmp_path / "Other"
    other.mkdir()
    # relative paths and duplicates are not roots; nothing outside the list is advertised
    manager.set_roots([str(other), "relative/folder", str(other) + "/", ""])
    assert wait_for(lambda: (markers / "roots-changed").exists(), 10)
    assert json.loads(run(manager, "roots").content) == [[other.resolve().as_uri(), "Other"]]

    manager.set_roots([str(other)])  # unchanged: no notification
    manager.set_roots([])
    assert wait_for(lambda: (markers / "roots-changed").read_text() == "2", 10)
    assert json.loads(run(manager, "roots").content) == []


def test_no_allowed_folders_means_no_roots(home: Path, markers: Path) -> None:
    manager = McpManager(write_config(home, {"p": proto_entry(markers)}), home=home)
    try:
        manager.tool_manifests(wait=30)
        assert json.loads(run(manager, "roots").content) == []
    finally:
        manager.shutdown()


# ---- elicitation ------------------------------------------------------------------------------


def test_elicitation_is_declined_by_default(manager: McpManager) -> None:
    assert answer_of(run(manager, "ask")) == {"action": "decline", "content": None}


def test_elicitation_form_reaches_the_handler_and_its_answer_the_server(
    manager: McpManager,
) -> None:
    seen: list[ElicitationRequest] = []

    def handler(request: ElicitationRequest) -> ElicitationAnswer:
        seen.append(request)
        # an extra value the form did not ask for never reaches the server
        return ElicitationAnswer(
            "accept", {"name": "Ann", "age": 30, "color": "green", "password": "hunter2"}
        )

    manager.set_elicitation_handler(handler)
    got = answer_of(run(manager, "ask", message=f"Who are you?{ESC}"))
    assert got == {"action": "accept", "content": {"name": "Ann", "age": 30, "color": "green"}}
    (request,) = seen
    assert request.server == "p" and request.mode == "form" and request.call_id == "call-1"
    assert "\x1b" not in request.message and "\u202e" not in request.message
    assert request.message.startswith("Who are you?⟨U+001B⟩")
    fields = {f.name: f for f in request.fields}
    assert [c.value for c in fields["color"].choices] == ["red", "green", "blue"]
    assert fields["name"].required and not fields["age"].required
    assert fields["age"].kind == "integer" and fields["age"].maximum == 150
    assert fields["subscribe"].default is False

    for action in ("decline", "cancel"):
        manager.set_elicitation_handler(lambda request, a=action: ElicitationAnswer(a))
        assert answer_of(run(manager, "ask")) == {"action": action, "content": None}


@pytest.mark.parametrize(
    "content",
    [
        {"name": "Ann", "color": "purple"},  # not one of the choices
        {"name": "Ann", "color": "red", "age": 999},  # above the maximum
        {"name": "Ann", "color": "red", "age": "30"},  # wrong type
        {"color": "red"},  # a required field missing
    ],
)
def test_an_answer_that_does_not_fit_the_form_is_declined(
    manager: McpManager, content: dict[str, Any]
) -> None:
    manager.set_elicitation_handler(lambda request: ElicitationAnswer("accept", content))
    assert answer_of(run(manager, "ask")) == {"action": "decline", "content": None}


def test_a_form_deskhand_cannot_show_is_declined_without_asking(manager: McpManager) -> None:
    asked: list[ElicitationRequest] = []
    manager.set_elicitation_handler(lambda r: asked.append(r) or ElicitationAnswer("accept", {}))
    assert answer_of(run(manager, "ask_nested"))["action"] == "decline"
    assert asked == []


def test_a_failing_handler_declines(manager: McpManager) -> None:
    def broken(request: ElicitationRequest) -> ElicitationAnswer:
        raise RuntimeError("the window is gone")

    manager.set_elicitation_handler(broken)
    assert answer_of(run(manager, "ask"))["action"] == "decline"


def test_url_elicitation_opens_the_page_only_after_the_user_agrees(
    manager: McpManager, opened: Opened
) -> None:
    url = "https://auth.example.com/connect?state=1"
    seen: list[ElicitationRequest] = []
    manager.set_elicitation_handler(lambda r: seen.append(r) or ElicitationAnswer("decline"))
    assert answer_of(run(manager, "ask_url", url=url)) == {"action": "decline"}
    assert opened == [] and seen[0].url == url and seen[0].site == "auth.example.com"

    manager.set_elicitation_handler(lambda r: ElicitationAnswer("accept"))
    assert answer_of(run(manager, "ask_url", url=url)) == {"action": "accept"}
    assert opened == [url]


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "javascript:alert(1)", "https://example.com/\x1b[2J", "ftp://x.example"],
)
def test_url_elicitation_never_opens_anything_but_a_web_page(
    manager: McpManager, opened: Opened, url: str
) -> None:
    asked: list[ElicitationRequest] = []
    manager.set_elicitation_handler(lambda r: asked.append(r) or ElicitationAnswer("accept"))
    assert answer_of(run(manager, "ask_url", url=url)) == {"action": "decline"}
    assert asked == [] and opened == []


# ---- the CLI's terminal handler ---------------------------------------------------------------


class Terminal:
    """A real pseudo-terminal: the handler reads and writes its slave side; the test types
    on the master side and reads what was shown."""

    def __init__(self) -> None:
        self.master, slave = pty.openpty()
        self.inp = os.fdopen(os.dup(slave), "r", encoding="utf-8")
        self.out = os.fdopen(os.dup(slave), "w", encoding="utf-8")
        os.close(slave)
        self.shown = b""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def type(self, *lines: str) -> None:
        os.write(self.master, "".join(line + "\n" for line in lines).encode())

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                return
            if not chunk:
                return
            self.shown += chunk

    def close(self) -> str:
        self.inp.close()
        self.out.close()
        os.close(self.master)
        self._reader.join(5)
        return self.shown.decode("utf-8", "replace")


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    term = Terminal()
    yield term
    if not term.inp.closed:
        term.close()


def test_terminal_asks_field_by_field(manager: McpManager, terminal: Terminal) -> None:
    manager.set_elicitation_handler(terminal_elicitation(terminal.inp, terminal.out))
    # fill in; name; age twice wrong then right; colour by number; subscribe default; send
    terminal.type("y", "Ann", "abc", "200", "30", "2", "", "y")
    got = answer_of(run(manager, "ask", message=f"Your details{ESC}"))
    assert got == {
        "action": "accept",
        "content": {"name": "Ann", "age": 30, "color": "green", "subscribe": False},
    }
    shown = terminal.close()
    assert "The MCP server 'p' asks:" in shown and "Your details⟨U+001B⟩" in shown
    assert "\x1b" not in shown and "\u202e" not in shown
    assert "Age: at most 150" in shown and "2. green" in shown


def test_terminal_decline_and_cancel(manager: McpManager, terminal: Terminal) -> None:
    manager.set_elicitation_handler(terminal_elicitation(terminal.inp, terminal.out))
    terminal.type("n")
    assert answer_of(run(manager, "ask"))["action"] == "decline"
    terminal.type("c")
    assert answer_of(run(manager, "ask"))["action"] == "cancel"
    terminal.type("y", "Bob", "", "1", "y", "c")  # filled in, then cancelled at "Send?"
    assert answer_of(run(manager, "ask")) == {"action": "cancel", "content": None}


def test_terminal_url_is_shown_and_opened_only_on_yes(
    manager: McpManager, terminal: Terminal, opened: Opened
) -> None:
    manager.set_elicitation_handler(terminal_elicitation(terminal.inp, terminal.out))
    url = "https://auth.example.com/connect"
    terminal.type("")  # just Enter: the default is to decline
    assert answer_of(run(manager, "ask_url", url=url))["action"] == "decline"
    assert opened == []
    terminal.type("y")
    assert answer_of(run(manager, "ask_url", url=url))["action"] == "accept"
    assert opened == [url]
    shown = terminal.close()
    assert f"It wants you to open {url}" in shown and "(on the site auth.example.com)" in shown


def test_terminal_handler_declines_without_a_terminal(manager: McpManager, opened: Opened) -> None:
    piped_in, piped_err = io.StringIO("y\nAnn\n\n1\ny\ny\n"), io.StringIO()
    manager.set_elicitation_handler(terminal_elicitation(piped_in, piped_err))
    assert answer_of(run(manager, "ask"))["action"] == "decline"
    assert answer_of(run(manager, "ask_url", url="https://example.com/"))["action"] == "decline"
    assert piped_err.getvalue() == "" and opened == []


# ---- tasks: a tool that runs only as a task is never offered --------------------------------


def test_tools_that_require_tasks_are_not_offered() -> None:
    """The SDK's client cannot run task-augmented calls, so a tool whose `execution` says
    tasks are required would fail on every call: it never reaches the model, and the server's
    state says which tools were left out and why."""
    from types import SimpleNamespace

    from app.cli.mcp_servers import describe
    from app.core.mcp.manifests import NEEDS_TASKS, build_manifests, needs_tasks
    from app.core.mcp.status import ServerState, Status

    def tool(name: str, support: str | None) -> Any:
        execution = SimpleNamespace(task_support=support) if support else None
        return SimpleNamespace(
            name=name, description=name, input_schema={"type": "object"}, annotations=None,
            execution=execution,
        )

    tools = [tool("plain", None), tool("maybe", "optional"), tool("only_task", "required")]
    assert [needs_tasks(t) for t in tools] == [False, False, True]
    manifests, names = build_manifests("srv", tools, lambda original: lambda a, c: None)
    assert sorted(names.values()) == ["maybe", "plain"] and len(manifests) == 2
    state = ServerState("srv", "stdio", Status.READY, tools=["plain", "maybe"],
                        hidden_tools=["only_task"])
    text = "\n".join(describe(state))
    assert NEEDS_TASKS in text and "only_task" in text
    assert state.copy().to_json()["hidden_tools"] == ["only_task"]
