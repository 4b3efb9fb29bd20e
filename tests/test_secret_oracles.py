"""Searching, filtering and cutting never work on a secret's characters: a search runs on
the redacted text (a yes/no answer must not rebuild a key that reads as [redacted]), text is
cut only after the tripwire masked it, and text arriving in pieces (a command's output, a
model's stream) is redacted across the pieces. Real tools, real processes, real store."""

from __future__ import annotations

import base64
import sys
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.memory import MemoryService
from app.core.providers._http import error_from_status
from app.core.store import Store
from tests.test_fs_sandbox import FsEnv, make_env
from tools.fs.manifest import SearchFiles
from tools.fs.ops import search_files
from tools.memory.actions import memory_search
from tools.memory.manifest import SearchMemory
from tools.redact import MIN_SECRET_LENGTH, REDACTED, TRIPWIRE, Redactor, StreamRedactor, shorten
from tools.shell.process import Background, run
from tools.spec import ToolContext

#: A cut piece of a secret this long (or longer) counts as a leak.
PIECE = 8


def make_secret() -> str:
    return f"sk-{uuid.uuid4().hex}/+{uuid.uuid4().hex[:6]}"


def pieces_of(secret: str, text: str) -> list[str]:
    """Every PIECE-long run of `secret`'s characters that `text` shows."""
    return sorted(
        {secret[i : i + PIECE] for i in range(len(secret) - PIECE + 1)}
        & {text[i : i + PIECE] for i in range(len(text) - PIECE + 1)}
    )


@pytest.fixture
def secret() -> Iterator[str]:
    """A secret the process-wide tripwire knows for this test only."""
    value = make_secret()
    TRIPWIRE.remember([value])
    yield value
    TRIPWIRE.forget(value)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FsEnv:
    return make_env(tmp_path, monkeypatch)


# ---- search is not an oracle ------------------------------------------------------------


def test_a_regex_search_cannot_tell_the_characters_of_a_secret(env: FsEnv, secret: str) -> None:
    (env.root / ".env").write_text(f"OPENAI_KEY={secret}\nplain=value\n")
    ctx = env.ctx()
    for guess in (secret[:4], secret[:10], secret[3:12]):
        for regex in (False, True):
            args = SearchFiles(content=guess, regex=regex, include_hidden=True)
            assert search_files(args, ctx).data["results"] == []
    # a prefix search letter by letter gets the same answer for every letter
    answers = {
        len(search_files(SearchFiles(content=f"KEY=sk-{c}", include_hidden=True), ctx).data[
            "results"
        ])
        for c in "0123456789abcdef"
    }
    assert answers == {0}
    # what the model can find is what fs_read_file shows
    found = search_files(SearchFiles(content="KEY=[redacted]", include_hidden=True), ctx)
    assert [(h["line"], h["text"]) for h in found.data["results"]] == [
        (1, f"OPENAI_KEY={REDACTED}")
    ]


def test_search_matches_encoded_secrets_as_redacted_and_keeps_line_numbers(
    env: FsEnv, secret: str
) -> None:
    basic = base64.b64encode(f"alice:{secret}".encode()).decode()
    pem_like = f"-----BEGIN-----\n{secret}\n-----END-----"
    TRIPWIRE.remember([pem_like])
    try:
        (env.root / "notes.txt").write_text(
            f"{pem_like}\nAuthorization: Basic {basic}\n"
            f"url=https://x.example/?k={urllib.parse.quote(secret, safe='')}\nlast line\n"
        )
        ctx = env.ctx()
        b64_guess = base64.b64encode(secret.encode()).decode()[:12]
        for guess in (b64_guess, urllib.parse.quote(secret, safe="")[:14], "BEGIN"):
            assert search_files(SearchFiles(content=guess), ctx).data["results"] == []
        hits = search_files(SearchFiles(content="last line"), ctx).data["results"]
        assert [h["line"] for h in hits] == [6]  # the masked key kept its three lines
    finally:
        TRIPWIRE.forget(pem_like)


def test_a_file_name_holding_a_secret_matches_only_as_redacted(env: FsEnv, secret: str) -> None:
    name = secret.replace("/", "_").replace("+", "_")
    TRIPWIRE.remember([name])
    try:
        (env.root / f"{name}.txt").write_text("x")
        ctx = env.ctx()
        assert search_files(SearchFiles(pattern=f"{name[:9]}*"), ctx).data["results"] == []
        assert len(search_files(SearchFiles(pattern="[[]redacted]*"), ctx).data["results"]) == 1
    finally:
        TRIPWIRE.forget(name)


def test_search_snippets_are_cut_after_redacting(env: FsEnv, secret: str) -> None:
    padding = "x" * 185  # the 200-character snippet would end inside the key
    (env.root / "long.txt").write_text(f"needle {padding}{secret} tail\n")
    [hit] = search_files(SearchFiles(content="needle"), env.ctx()).data["results"]
    assert pieces_of(secret, hit["text"]) == []
    assert len(hit["text"]) <= 200


def test_memory_search_does_not_match_inside_a_secret(tmp_path: Path, secret: str) -> None:
    store = Store(tmp_path / "deskhand.db")
    try:
        memory = MemoryService(store)
        memory.remember(f"the staging key is {secret.replace('/', ' ')}", "fact")
        memory.remember("the staging server is at 10.0.0.7", "fact")
        TRIPWIRE.remember([secret.replace("/", " ")])
        ctx = ToolContext(home=tmp_path, services={"memory": memory})
        word = secret.split("/")[0]  # sk-<hex>: FTS finds it, prefix by prefix
        for query in (word[:6], word[3:10], word):
            assert memory_search(SearchMemory(query=query), ctx).data["memories"] == []
        found = memory_search(SearchMemory(query="staging"), ctx).data["memories"]
        assert len(found) == 2  # ordinary words still find the note with the key
    finally:
        TRIPWIRE.forget(secret.replace("/", " "))
        store.close()


# ---- cut after redacting ------------------------------------------------------------------


def test_shorten_redacts_first_and_never_splits_the_marker(secret: str) -> None:
    text = "a" * 50 + secret + "b" * 50
    for limit in range(30, 120, 7):
        for end in (False, True):
            cut = shorten(text, limit, end=end)
            assert pieces_of(secret, cut) == []
            assert len(cut) <= limit
            assert "[" not in cut.replace(REDACTED, "")  # the marker whole or not at all
    assert shorten(text, 1000) == "a" * 50 + REDACTED + "b" * 50
    assert shorten("plain text", 5) == "plai…"
    assert shorten("plain text", 5, end=True, mark="") == " text"


def test_a_stream_redacts_a_secret_split_across_chunks_in_every_encoding(secret: str) -> None:
    redactor = Redactor([secret])
    forms = {
        "raw": (secret, secret),
        "base64": (base64.b64encode(secret.encode()).decode(),) * 2,
        # only the part made of the secret's bits ("alice:" stays readable)
        "basic": (b64 := base64.b64encode(f"alice:{secret}".encode()).decode(), b64[8:-4]),
        "url": (urllib.parse.quote(secret, safe=""),) * 2,
    }
    for name, (form, secret_part) in forms.items():
        text = f"before {form} after"
        final = redactor.text(text)
        for size in (1, 2, 3, 5, 8):
            stream = StreamRedactor(redactor)
            shown = ""
            for i in range(0, len(text), size):
                shown += stream.feed(text[i : i + size])
                # at no moment do four characters of the secret (or its encoding) show
                runs = {secret_part[j : j + 4] for j in range(len(secret_part) - 3)}
                assert not any(run in shown for run in runs), (name, size, shown)
            shown += stream.flush()
            assert shown.endswith(f"{REDACTED} after") and shown.startswith("before ")
            assert len(shown) - len(final) < MIN_SECRET_LENGTH, (shown, final)


def test_a_stream_holds_back_only_what_could_begin_a_secret() -> None:
    stream = StreamRedactor(Redactor(["zq-known-secret-value"]))
    assert stream.feed("Hello there, ") == "Hello there, "
    assert stream.feed("how can I help?") == "how can I help?"
    assert stream.feed(" zq-kn") == " "  # could be the start of the secret: held
    assert stream.feed("ight") == "zq-knight"
    # fewer characters than any secret are shown; if the secret goes on, the rest is masked
    assert stream.feed(" ans zq-") == " ans zq-"
    assert stream.feed("known-secret-value!") == f"{REDACTED}!"
    assert stream.flush() == ""


# ---- commands: progress, capped output and background reads ------------------------------

needs_posix = pytest.mark.skipif(sys.platform == "win32", reason="a POSIX shell")


@needs_posix
def test_shell_progress_never_shows_part_of_a_secret(
    tmp_path: Path, secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tools.shell.tools as shell_tools

    monkeypatch.setattr(shell_tools, "PROGRESS_EVERY", 0.0)  # every chunk reports
    seen: list[str] = []
    ctx = ToolContext(home=tmp_path, progress_sink=lambda p: seen.append(p.message))
    ctx.secret_values = lambda: [secret]
    on_output = shell_tools._streamer(ctx)
    line = "y" * 590 + secret + "\n"  # the 600-character tail would start inside the key
    for i in range(0, len(line), 7):
        on_output(line[i : i + 7])
    assert len(seen) > 10
    for message in seen:
        assert pieces_of(secret, message) == [], message


@needs_posix
def test_capped_command_output_masks_a_secret_across_the_cut(tmp_path: Path, secret: str) -> None:
    redactor = Redactor([secret])
    script = f"printf '%s' '{'h' * 40}{secret}{'m' * 5000}{secret}{'t' * 40}'"
    for limit in (100, 120, 140):
        done = run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin"},
            timeout=30,
            cancel=threading.Event(),
            max_output=limit,
            redactor=redactor,
        )
        assert done.truncated
        assert pieces_of(secret, done.output) == [], done.output
        assert done.output.count(REDACTED) == 2


@needs_posix
def test_a_background_read_that_lost_its_start_shows_no_end_of_a_secret(
    tmp_path: Path, secret: str
) -> None:
    processes = Background()
    try:
        ident = processes.start(
            ["bash", "-c", f"printf '%s' '{secret}{'z' * 300}'; sleep 30"],
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin"},
            label="t",
        )
        job = processes._job(ident)
        with job.changed:
            assert job.changed.wait_for(lambda: len(job.unread) >= len(secret) + 300, 10)
        # only the newest bytes are read: the text starts in the middle of the key
        text = processes.read(ident, 300 + len(secret) // 2, Redactor([secret]))
        assert "left out" in text
        assert pieces_of(secret, text) == [], text
    finally:
        processes.stop_all(0.5)


# ---- a server's error text -----------------------------------------------------------------


def test_a_server_error_echoing_a_key_is_cut_only_after_masking(secret: str) -> None:
    body = ('{"error": {"message": "' + "e" * 280 + f" key {secret} is invalid" + '"}}').encode()
    error = error_from_status(400, {}, body, url="http://127.0.0.1:1/v1", secret=None)
    assert pieces_of(secret, str(error)) == [], str(error)



# ---- the browser: waiting for a text or an address ----------------------------------------


def test_waiting_for_page_text_or_an_address_cannot_probe_a_secret(
    browser: Any, site: Any, secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tests.fixtures_browser as pages

    key_page = f"<!doctype html><title>Keys</title><p>API key: {secret}</p>".encode()
    monkeypatch.setitem(pages.PAGES, "/keys", key_page)
    token = urllib.parse.quote(secret, safe="")
    assert browser.call("browser_navigate", url=site.url(f"/keys?token={token}")).ok
    for probe in (secret[:8], secret[:4] + secret[4:9]):
        waited = browser.call("browser_wait", text=probe, timeout_seconds=1)
        assert not waited.ok and "Gave up" in waited.error
    waited = browser.call("browser_wait", url_contains=f"token={token[:6]}", timeout_seconds=1)
    assert not waited.ok and "Gave up" in waited.error
    # what the page shows around the key is still found
    assert browser.call("browser_wait", text="API key:", timeout_seconds=5).ok
    assert browser.call("browser_wait", url_contains="token=", timeout_seconds=5).ok
