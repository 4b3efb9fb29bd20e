"""Attacks on `deskhand ask`'s early first request (app.core.ask_early): what it sends must
never be more than the loaded app would send, and a damaged or hostile recipe must never
crash, hang or redirect it.

Same set-up as tests/test_ask_early.py: the CLI as a real subprocess, the scripted model
server over real HTTP, the key in a plain-file keyring."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from app.core import ask_early
from tests.fakellm import ScriptedLLM, text
from tests.test_ask_early import (
    ACCOUNT,
    KEY,
    REPO,
    _begin_in_subprocess,
    _env,
    _make_home,
    _sends_early,
    _user_texts,
)

TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
MEMORY = "my bank PIN is 4711"


def _ask(home: Path, prompt: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "--home", str(home), "ask", prompt],
        capture_output=True,
        text=True,
        env=_env(home),
        cwd=REPO,
        timeout=timeout,
    )


def _recipe(home: Path) -> dict:
    return json.loads((home / ask_early.RECIPE_FILE).read_text("utf-8"))


def _write_recipe(home: Path, recipe: dict | str) -> None:
    raw = recipe if isinstance(recipe, str) else json.dumps(recipe)
    (home / ask_early.RECIPE_FILE).write_text(raw, "utf-8")


# ---- (2) a prompt the agent would have redacted ---------------------------------------


def test_a_prompt_holding_a_literal_mcp_json_token_never_goes_out_early(
    llm: ScriptedLLM, tmp_path: Path
):
    """mcp.json's literal tokens are known secrets once the MCP manager has read it (the
    loaded path reads it before the turn when a server has no cached tool list), but the
    early path only asks the secret store."""
    home = _make_home(tmp_path, llm)
    server = {"command": str(tmp_path / "no-such-server"), "env": {"GITHUB_TOKEN": TOKEN}}
    (home / "mcp.json").write_text(json.dumps({"mcpServers": {"gh": server}}), "utf-8")
    llm.add(text("one"))
    first = _ask(home, "hello")
    assert first.returncode == 0, first.stderr
    assert (home / ask_early.RECIPE_FILE).exists()

    llm.add(text("two"))
    llm.add(text("three"))
    proc = _ask(home, f"look up my repos with {TOKEN}")
    assert proc.returncode == 0, proc.stderr
    loaded = llm.requests[-1].body
    assert TOKEN not in json.dumps(loaded)  # the loaded app redacts it...
    leaked = [r for r in llm.requests[1:] if TOKEN in json.dumps(r.body)]
    assert leaked == []  # ...so the early request must not carry it either


# ---- (3) stale content ------------------------------------------------------------------


def test_a_memory_the_user_deleted_never_goes_out_early(llm: ScriptedLLM, tmp_path: Path):
    """The fingerprint and "no memories" are checked when the ask begins, the recipe is
    what the agent built later: a memory saved meanwhile (the window, another ask) is kept
    in the recipe, and goes out after the user deleted it."""
    home = _make_home(tmp_path, llm)
    adder = tmp_path / "adds_a_memory.py"  # stands for the window saving a memory meanwhile
    adder.write_text(
        "import sqlite3, sys\n"
        "db = sqlite3.connect(sys.argv[1])\n"
        "with db:\n"
        "    db.execute('INSERT INTO memories (kind, content, created_at, updated_at)'\n"
        "               \" VALUES ('fact', ?, 0, 0)\", (sys.argv[2],))\n"
        "sys.exit(1)\n",
        "utf-8",
    )
    entry = {"command": sys.executable, "args": [str(adder), str(home / "deskhand.db"), MEMORY]}
    (home / "mcp.json").write_text(json.dumps({"mcpServers": {"late": entry}}), "utf-8")
    llm.add(text("one"))
    first = _ask(home, "hello")
    assert first.returncode == 0, first.stderr
    assert MEMORY in json.dumps(llm.requests[0].body)  # the memory came in time

    db = sqlite3.connect(home / "deskhand.db")
    with db:
        db.execute("DELETE FROM memories")  # the user forgets it
    db.close()
    _begin_in_subprocess(home, "a new question")
    sent_after = [r.body for r in llm.requests[1:]]
    assert all(MEMORY not in json.dumps(body) for body in sent_after)


# ---- (1) where the prompt goes ----------------------------------------------------------


def test_a_recipe_cannot_send_the_prompt_to_another_server(llm: ScriptedLLM, tmp_path: Path):
    """Without a key the recipe's URL is not checked at all: a rewritten recipe sends
    every prompt to a server of its choosing (once per rewrite, unseen: the answer still
    comes from the right server)."""
    home = _make_home(tmp_path, llm)
    llm.add(text("one"))
    assert _ask(home, "hello").returncode == 0
    honest = _recipe(home)
    with ScriptedLLM() as other:
        _write_recipe(home, honest | {"url": f"{other.openai_base_url}/chat/completions"})
        _begin_in_subprocess(home, "my private question")
        assert other.requests == []


# ---- (6) a damaged or hostile recipe ----------------------------------------------------


def _honest_home(llm: ScriptedLLM, tmp_path: Path, *, key: str | None = None) -> Path:
    home = _make_home(tmp_path, llm, key=key)
    llm.add(text("one"))
    first = _ask(home, "hello")
    assert first.returncode == 0, first.stderr
    return home


def _answers_despite(home: Path, llm: ScriptedLLM, timeout: float = 60) -> None:
    llm.add(text("answer"))
    llm.add(text("answer"))
    proc = _ask(home, "still there?", timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "answer"


def test_a_deeply_nested_recipe_does_not_crash_ask(llm: ScriptedLLM, tmp_path: Path):
    home = _honest_home(llm, tmp_path)
    _write_recipe(home, "[" * 100_000)  # json raises RecursionError, not ValueError
    _answers_despite(home, llm)


def test_a_recipe_with_an_unusable_url_does_not_crash_ask(llm: ScriptedLLM, tmp_path: Path):
    home = _honest_home(llm, tmp_path)
    honest = _recipe(home)
    _write_recipe(home, honest | {"url": honest["url"].replace("/chat", "\t/chat")})
    _answers_despite(home, llm)


def test_a_recipe_with_a_header_httpx_cannot_encode_does_not_crash_ask(
    llm: ScriptedLLM, tmp_path: Path
):
    home = _honest_home(llm, tmp_path)
    honest = _recipe(home)
    _write_recipe(home, honest | {"headers": honest["headers"] | {"X-Note": "caf\u00e9 \u2603"}})
    _answers_despite(home, llm)


def test_a_recipe_file_that_is_a_fifo_does_not_hang_ask(llm: ScriptedLLM, tmp_path: Path):
    home = _honest_home(llm, tmp_path)
    (home / ask_early.RECIPE_FILE).unlink()
    os.mkfifo(home / ask_early.RECIPE_FILE)  # opening it for reading waits for a writer
    try:
        _answers_despite(home, llm, timeout=20)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError("`deskhand ask` hung on a FIFO in place of its recipe") from exc


# ---- defended: kept as checks ---------------------------------------------------------


def test_a_keyring_that_cannot_be_read_sends_nothing_early(llm: ScriptedLLM, tmp_path: Path):
    home = _honest_home(llm, tmp_path, key=KEY)
    assert _sends_early(home)
    keyring = home / "keyring.json"
    keyring.unlink()
    keyring.mkdir()  # reading it fails, as a locked keyring does
    assert not _sends_early(home)
    assert all(KEY not in str(r.headers) for r in llm.requests[2:])


def test_a_recipe_asking_for_a_key_where_the_account_has_none_sends_nothing(
    llm: ScriptedLLM, tmp_path: Path
):
    home = _honest_home(llm, tmp_path)
    honest = _recipe(home)
    assert honest["key_source"] is None  # a keyless account's recipe names no key
    base = llm.openai_base_url
    _write_recipe(
        home,
        honest
        | {
            "key_source": [ACCOUNT, base, base],
            "headers": honest["headers"] | {"Authorization": f"Bearer {ask_early.KEY_MARK}"},
        },
    )
    assert not _sends_early(home)


def test_the_early_request_carries_only_the_new_prompt(llm: ScriptedLLM, tmp_path: Path):
    home = _honest_home(llm, tmp_path)
    assert _sends_early(home, "second question")
    assert _user_texts(llm.requests[-1].body) == ["second question"]
    assert "hello" not in json.dumps(llm.requests[-1].body)


def test_a_recipe_with_a_nan_timeout_does_not_crash_ask(llm: ScriptedLLM, tmp_path: Path):
    home = _honest_home(llm, tmp_path)
    _write_recipe(home, _recipe(home) | {"timeout": [float("nan"), float("nan")]})
    _answers_despite(home, llm)
