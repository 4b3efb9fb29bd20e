"""One tripwire at every exit: the same known secrets — raw, split across stream chunks,
base64 (alone and inside `Basic user:secret`) and URL-encoded — are pushed through every
way text leaves Deskhand, and none comes out readable.

The exits: the model request (real HTTP to the scripted model server), the stdout and
stderr of `deskhand ask`, its `--json` events, the database, the log file, and in the
window the agent events, the view model's items while the answer streams, and the text
"Copy" puts on the clipboard. The secrets enter as a file a tool reads, as the user's own
prompt, and as the model's streamed answer and reasoning (a hostile model echoing them)."""

from __future__ import annotations

import base64
import json
import logging
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.core.paths import db_path
from app.core.secrets import SecretStore, secret_key
from tests.fakellm import ScriptedLLM, error, raw_openai, tool_calls
from tests.fixtures_keyring import MemoryKeyring
from tests.fixtures_runtime import HOME
from tools.redact import REDACTED, TRIPWIRE

#: A run of this many characters of a secret (or of one of its encodings) is a leak.
PIECE = 10


def forms(secret: str) -> dict[str, str]:
    """The secret as a tool, a page or a hostile model would write it."""
    return {
        "raw": secret,
        "base64": base64.b64encode(secret.encode()).decode(),
        "basic": base64.b64encode(f"alice:{secret}".encode()).decode(),
        "url": urllib.parse.quote(secret, safe=""),
    }


def _secret_part(name: str, text: str) -> str:
    """The part of an encoded form made of the secret's bits only (not `alice:`'s, nor
    the padding's)."""
    return {"basic": text[8:-4], "base64": text[:-4]}.get(name, text)


def readable(secret: str, text: str) -> list[str]:
    """Every PIECE-long run of the secret, or of one of its encodings, that `text` shows."""
    runs = {text[i : i + PIECE] for i in range(len(text) - PIECE + 1)}
    found = []
    for name, form in forms(secret).items():
        part = _secret_part(name, form)
        found += [f"{name}:{part[i:i + PIECE]}" for i in range(len(part) - PIECE + 1)
                  if part[i : i + PIECE] in runs]
    return sorted(set(found))


def assert_unreadable(secrets: list[str], **exits: str) -> None:
    for where, text in exits.items():
        for secret in secrets:
            assert readable(secret, text) == [], f"a secret shows in {where}"


@pytest.fixture
def secrets(tmp_path: Path) -> Iterator[list[str]]:
    """Two secrets in the SecretStore (so the process-wide tripwire knows them), forgotten
    after the test."""
    store = SecretStore(backend=MemoryKeyring(), home=tmp_path / "store-home")
    values = [f"sk-{uuid.uuid4().hex}/+{uuid.uuid4().hex[:6]}", f"pw {uuid.uuid4().hex[:20]}&="]
    for n, value in enumerate(values):
        store.set(secret_key("provider", f"acct{n}", "api_key"), value)
    yield values
    for value in values:
        TRIPWIRE.forget(value)


def payload(secrets: list[str]) -> str:
    """Every form of every secret, one per line."""
    return "\n".join(f"{name}: {form}" for s in secrets for name, form in forms(s).items())


def chunks(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def hostile_turns(secrets: list[str], creds: Path, work: Path) -> list[Any]:
    """The model reads the file, tries to search its way to the key (a yes/no oracle),
    then streams every form of every secret — split into 3-character chunks — in its
    reasoning, its answer and the text before its tool calls."""
    search = {"path": str(work), "content": secrets[0][:6], "include_hidden": True}
    first = tool_calls(
        ("c1", "fs_read_file", {"path": str(creds)}),
        ("c2", "fs_search", search),
        text_before="Let me look. " + payload(secrets),
        chunk_size=3,
    )
    frame = {"id": "x", "object": "chat.completion.chunk", "model": "scripted"}

    def delta(part: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**frame, "choices": [{"index": 0, "delta": part, "finish_reason": finish}]}

    thinking = [delta({"reasoning_content": c}) for c in chunks("Hmm " + payload(secrets))]
    answer = [delta({"content": c}) for c in chunks("Here you go:\n" + payload(secrets))]
    second = raw_openai(delta({"role": "assistant", "content": ""}), *thinking, *answer,
                        delta({}, "stop"))
    return [first, second]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(
        json.dumps({"files": {"allowed_roots": [str(work)], "folders_chosen": True}})
    )
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(work)
    return {"work": work, "home": home}


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in saved:
        root.addHandler(handler)
    root.setLevel(level)


def stored_bytes(home: Path) -> str:
    """The database with its write-ahead log, as text (FTS tables included)."""
    parts = [p.read_bytes() for p in home.glob(db_path(home).name + "*") if p.is_file()]
    return b"".join(parts).decode("latin-1")


@pytest.mark.parametrize("mode", ["text", "json"])
def test_no_exit_of_deskhand_ask_shows_a_known_secret(
    mode: str,
    llm: ScriptedLLM,
    world: dict[str, Path],
    secrets: list[str],
    capsys: pytest.CaptureFixture[str],
    restore_logging: None,
) -> None:
    creds = world["work"] / ".env"
    creds.write_text(
        f"OPENAI_KEY={secrets[0]}\nAuthorization: Basic {forms(secrets[0])['basic']}\n"
        f"callback=https://x.example/?pw={forms(secrets[1])['url']}\n{payload(secrets)}\n"
    )
    llm.add(*hostile_turns(secrets, creds, world["work"]))
    argv = ["--home", str(world["home"]), "ask", f"use {secrets[0]} and {secrets[1]}",
            "--base-url", llm.openai_base_url, "--model", "scripted", "--yes"]
    code = main(argv + (["--json"] if mode == "json" else []))
    out, err = capsys.readouterr()
    assert code == 0, err
    # the logs: what the run wrote, and the secrets pushed through the logger it set up
    log = logging.getLogger("deskhand.exits")
    for secret in secrets:
        for form in forms(secret).values():
            log.warning("echo %s", form)
    for handler in logging.getLogger().handlers:
        handler.flush()
    log_text = (world["home"] / "logs" / "deskhand.log").read_text("utf-8")
    requests = json.dumps([r.body for r in llm.requests], ensure_ascii=False)

    assert_unreadable(
        secrets, stdout=out, stderr=err, requests=requests, database=stored_bytes(world["home"]),
        log=log_text,
    )
    # the exits still carry what is not secret, with the secrets marked
    assert len(llm.requests) == 2 and REDACTED in requests
    assert log_text.count(REDACTED) >= 8
    if mode == "text":
        assert "Here you go:" in out and out.count(REDACTED) >= 16
    else:
        events = [json.loads(line) for line in out.splitlines()]
        streamed = "".join(e["delta"] for e in events if e["type"] == "text")
        thought = "".join(e["delta"] for e in events if e["type"] == "reasoning")
        assert "Here you go:" in streamed and streamed.count(REDACTED) >= 16
        assert thought.count(REDACTED) >= 8
        search = next(e for e in events if e["type"] == "tool_result" and e["id"] == "c2")
        assert "\n0 matching lines under" in search["content"]  # no yes/no about the key


# ---- the window ------------------------------------------------------------------------------


@pytest.mark.gui
def test_no_exit_of_the_window_shows_a_known_secret(
    make_runtime: Any, llm: ScriptedLLM, tmp_path: Path, secrets: list[str], qtbot: Any,
    qloop: Any,
) -> None:
    from app.ui.chat.model import ChatItem
    from app.ui.main_window import MainWindow
    from tests.controller_harness import record
    from tests.fixtures_qt import wait_until

    work = tmp_path / "win-work"
    work.mkdir()
    creds = work / "creds.txt"
    creds.write_text(payload(secrets) + "\n")
    runtime = make_runtime(roots=[work])
    window = MainWindow(runtime)
    qtbot.addWidget(window)
    window.resize(1000, 760)
    window.show()
    try:
        seen = record(window.controller)
        model = window.chat_view.chat_model
        bubbles: list[str] = []  # every state of every row while the turn runs

        def snapshot(*_: Any) -> None:
            bubbles.extend(_texts(item) for item in model.items)

        model.dataChanged.connect(snapshot)
        model.rowsInserted.connect(snapshot)
        llm.add(*hostile_turns(secrets, creds, work))

        async def body() -> None:
            window.controller.send(f"here is my key {secrets[0]}", None)
            await wait_until(lambda: not window.controller.busy, what="the turn")

        qloop.run_until_complete(body())
        items: list[ChatItem] = list(model.items)
        copied = [window.chat_view.shown_text(item) for item in items]
        events = json.dumps([repr(e) for e in seen.events()], ensure_ascii=False)
        conversation = window.controller.conversation_id
        stored = json.dumps(
            [m.content for m in runtime.store.load_messages(conversation)], ensure_ascii=False
        )
        assert_unreadable(
            secrets,
            events=events,
            view_model="\n".join(bubbles + [_texts(i) for i in items]),
            clipboard="\n".join(copied),
            store=stored,
            requests=json.dumps([r.body for r in llm.requests], ensure_ascii=False),
        )
        assert any(REDACTED in text for text in copied)
        assert any(REDACTED in str(getattr(i, "result", "")) for i in items)  # the file's card
        assert REDACTED in "\n".join(bubbles)
    finally:
        window.stop_background_work()


def _texts(item: Any) -> str:
    """Everything a row of the view model can show or copy."""
    parts = [item.plain_text(), item.markdown()]
    parts += [str(getattr(item, name, "") or "") for name in
              ("text", "arguments", "result", "error", "progress", "summary")]
    return "\n".join(parts)


# ---- the database: an error marker is stored text like a message ---------------------------

#: Known to the tripwire from the environment (§5.9), but not the scripted account's key.
OTHER_KEY = "sk-ant-api03-marker17-Zq8vXk2LmN4pR7sT9uW1yA3bC5dE"


def test_an_error_marker_is_stored_with_known_secrets_redacted(
    make_runtime: Any, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch, qloop: Any
) -> None:
    from app.ui.controller import ChatController
    from tests.controller_harness import send

    monkeypatch.setenv("ANTHROPIC_API_KEY", OTHER_KEY)
    rt = make_runtime(roots=[HOME])
    llm.add(error(400, message=f"upstream refused key {OTHER_KEY}"))
    controller = ChatController(rt)
    try:
        qloop.run_until_complete(send(controller, "Hello"))
        assert controller.conversation_id is not None
        markers = rt.store.list_markers(controller.conversation_id)
        assert [m.kind for m in markers] == ["error"]
        assert rt.tripwire.text(OTHER_KEY) != OTHER_KEY  # the tripwire knows it
        assert OTHER_KEY not in markers[0].text, "the marker stored a known secret as it came"
    finally:
        rt.close()
