"""`deskhand ask`: what its request to the model may carry, and what it loads before it.

The CLI runs as a real subprocess against the scripted model server over real HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakellm import ScriptedLLM, text

REPO = Path(__file__).resolve().parents[1]
GH_TOKEN = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"
_CLIENT = {"clientId": "c", "clientSecret": "cs-77aa88bb", "issuer": "https://auth.example"}


def _make_home(tmp_path: Path, llm: ScriptedLLM) -> Path:
    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    account = {"id": "acct01", "kind": "openai", "label": "t", "base_url": llm.openai_base_url}
    settings = {
        "providers": [account | {"model": "m"}],
        "active_provider": "acct01",
        "files": {"allowed_roots": [str(home / "work")], "folders_chosen": True},
    }
    (home / "settings.json").write_text(json.dumps(settings), "utf-8")
    return home


def _ask(home: Path, prompt: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("DESKHAND_HOME", None)
    env["PYTHON_KEYRING_BACKEND"] = "bench.file_keyring.FileKeyring"
    env["DESKHAND_BENCH_KEYRING"] = str(home / "keyring.json")
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "--home", str(home), "ask", prompt],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("entry", "secret"),
    [
        ({"args": [f"--token={GH_TOKEN}"]}, GH_TOKEN),
        ({"env": {"GITHUB_TOKEN": GH_TOKEN}}, GH_TOKEN),
        ({"env": {"DB_PASSWORD": "pw4711!"}}, "pw4711!"),
        ({"env": {"DATABASE_URL": "postgres://bob:Sup3rS3cretPw@db/x"}}, "Sup3rS3cretPw"),
        ({"url": "https://mcp.example/?api_key=Zx9Qw8Er7Ty6Ui5"}, "Zx9Qw8Er7Ty6Ui5"),
        ({"url": "https://mcp.example/", "auth": _CLIENT}, "cs-77aa88bb"),
    ],
    ids=["token-argument", "env-token", "short-password", "url-password", "url-query-key",
         "client-secret"],
)  # fmt: skip
def test_a_secret_part_of_mcp_json_in_the_prompt_never_reaches_the_model(
    llm: ScriptedLLM, tmp_path: Path, entry: dict[str, Any], secret: str
):
    """The tripwire knows the secret *parts* of mcp.json (a `--token=` value, a URL's
    password, a short password under a credential name) before the first request."""
    home = _make_home(tmp_path, llm)
    server = {"command": str(tmp_path / "no-such-server")} | entry
    if "url" in entry:
        server.pop("command")
    (home / "mcp.json").write_text(json.dumps({"mcpServers": {"srv": server}}), "utf-8")
    llm.add(text("checked"))
    proc = _ask(home, f"is {secret} right?")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "checked"
    assert llm.requests, "the model was asked"
    assert [r for r in llm.requests if secret in json.dumps(r.body)] == []


def test_the_prompt_is_redacted_only_once_every_stored_secret_is_known(make_runtime, llm):
    """A secret still loading (a locked keyring the user is unlocking) when the turn begins
    must not reach the history or the model in the user's own message."""
    from app.core.approval import deny_all
    from app.core.providers import make_provider
    from app.core.secrets import remember_secret

    secret = "tok-" + "late7loading8secret9value"
    runtime = make_runtime()
    llm.add(text("ok"))
    provider = make_provider(runtime.provider_config())
    agent = runtime.make_agent(provider, deny_all)

    def secrets_ready() -> bool:
        remember_secret(secret)  # the keyring answers now
        return True

    agent.pipeline.env.secrets_ready = secrets_ready
    conversation = runtime.open_conversation(None)

    async def go() -> None:
        try:
            [_ async for _ in agent.run(conversation, f"my token is {secret}")]
        finally:
            await provider.aclose()

    asyncio.run(go())
    stored = [m.content for m in runtime.store.load_messages(conversation.id)]
    assert not any(secret in content for content in stored)
    assert secret not in json.dumps(llm.requests[-1].body)


def test_ask_does_not_wait_for_the_file_tools_places(llm: ScriptedLLM, tmp_path: Path):
    """Resolving the protected places (~30 ms) is the window's first-keystroke work; `ask`'s
    first request must not wait for it (the first file call makes them)."""
    from app.cli.ask import load_for_ask
    from tools.fs import protected

    protected._cached.cache_clear()
    runtime = load_for_ask(_make_home(tmp_path, llm))
    try:
        assert protected._cached.cache_info().currsize == 0
        runtime.warm_file_places()  # what the window's first keystroke does
        assert protected._cached.cache_info().currsize == 1
    finally:
        runtime.close()


def test_ask_knows_every_stored_secret_before_it_builds_the_turn(
    llm: ScriptedLLM, tmp_path: Path, keyring_env: dict[str, str]
):
    """`ask` reads the stored secrets after its imports, not beside them: once its runtime
    is loaded, every stored value is known to the tripwire (no turn waits on a thread)."""
    from app.cli.ask import load_for_ask
    from app.core.secrets import SecretStore, known_secret_values, secret_key

    home = _make_home(tmp_path, llm)
    value = "sk-" + "stored4before5the6turn7"
    SecretStore(mode="system", home=home).set(secret_key("provider", "acct01", "api_key"), value)
    runtime = load_for_ask(home)
    try:
        assert runtime.secrets.loaded
        assert runtime.secrets.load_error is None
        assert value in known_secret_values()
    finally:
        runtime.close()


def test_the_collector_pauses_while_ask_starts_and_runs_again_for_the_turn():
    """Start-up's objects are frozen when the turn begins (full collections never walk them
    again) and collection resumes; a collector the caller had turned off stays off."""
    import gc

    from app.cli.collector import StartUpPause

    gc.enable()  # as in a fresh process (the tests' own fixture turns it off)
    frozen = gc.get_freeze_count()
    try:
        with StartUpPause() as pause:
            assert not gc.isenabled()
            kept = [[] for _ in range(50)]
            pause.over()
            assert gc.isenabled()
            assert gc.get_freeze_count() >= frozen + len(kept)
        assert gc.isenabled()
        with StartUpPause():
            assert not gc.isenabled()
        assert gc.isenabled(), "a start that ends early (an error) resumes collection too"
        gc.disable()
        with StartUpPause() as pause:
            pause.over()
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.disable()


def test_ask_leaves_the_collector_running_after_its_turn(llm: ScriptedLLM, tmp_path: Path):
    import gc

    from app.cli import main

    home = _make_home(tmp_path, llm)
    llm.add(text("fine"))
    gc.enable()  # as in a fresh process (the tests' own fixture turns it off)
    frozen = gc.get_freeze_count()
    try:
        assert main(["--home", str(home), "ask", "hi"]) == 0
        assert gc.isenabled()
        assert gc.get_freeze_count() > frozen
    finally:
        gc.disable()


def _ask_env() -> dict[str, str]:
    """`ask`'s environment: no API key or home from the outside, no keyring."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("DESKHAND_HOME", None)
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
    env["PYTHONPATH"] = str(REPO)
    return env


def _ask_with(home: Path, prompt: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = _ask_env()
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "--home", str(home), "ask", prompt, *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )


def test_ask_attaches_a_document_as_its_text(llm: ScriptedLLM, tmp_path: Path):
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Budget"
    sheet.append(["Item", "Cost"])
    sheet.append(["Servers", 1200])
    sheet_path = tmp_path / "budget.xlsx"
    book.save(str(sheet_path))
    home = _make_home(tmp_path, llm)
    llm.add(text("It costs 1200."))

    proc = _ask_with(home, "what do the servers cost?", "--attach", str(sheet_path))

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "It costs 1200."
    sent = json.dumps(llm.requests[-1].body)
    assert "sheet Budget" in sent and "| Servers | 1200 |" in sent


def test_ask_sends_nothing_when_a_file_cannot_be_attached(llm: ScriptedLLM, tmp_path: Path):
    home = _make_home(tmp_path, llm)
    proc = _ask_with(home, "read it", "--attach", str(tmp_path / "missing.pdf"))
    assert proc.returncode == 2
    assert "cannot attach" in proc.stderr and "missing.pdf" in proc.stderr
    assert llm.requests == []


def test_ask_at_a_terminal_asks_an_encrypted_pdfs_password_without_echo(
    llm: ScriptedLLM, tmp_path: Path
):
    from tests.test_delegation_cli import _Terminal
    from tests.test_documents import write_pdf

    locked = write_pdf(tmp_path / "payslip.pdf", ["Net pay: 3,141 euros."], password="hunter2")
    home = _make_home(tmp_path, llm)
    llm.add(text("3,141 euros."))
    env = _ask_env()
    terminal = _Terminal()
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app.cli",
                "--home",
                str(home),
                "ask",
                "net pay?",
                "--attach",
                str(locked),
            ],
            stdin=terminal.slave,
            stderr=terminal.slave,
            stdout=subprocess.PIPE,
            env=env,
            cwd=REPO,
            text=True,
        )
        os.close(terminal.slave)
        try:
            terminal.until("payslip.pdf is encrypted. Password (used for this message only): ")
            terminal.type("wrong")
            terminal.until("That password does not open payslip.pdf. Password: ")
            terminal.type("hunter2")
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        terminal.close()
    assert proc.returncode == 0, terminal.shown
    assert out.strip() == "3,141 euros."
    assert "hunter2" not in terminal.shown and "wrong" not in terminal.shown  # no echo
    assert "Net pay: 3,141 euros." in json.dumps(llm.requests[-1].body)


def test_ask_without_a_terminal_says_the_pdf_is_encrypted_and_sends_nothing(
    llm: ScriptedLLM, tmp_path: Path
):
    from tests.test_documents import write_pdf

    locked = write_pdf(tmp_path / "payslip.pdf", ["Net pay."], password="hunter2")
    home = _make_home(tmp_path, llm)
    proc = _ask_with(home, "net pay?", "--attach", str(locked))
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith(
        "payslip.pdf: it is encrypted: open it, or save a copy without a password"
    )
    assert llm.requests == []
