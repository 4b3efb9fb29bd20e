"""An attacker's review of `deskhand ask`'s early first request (app.core.ask_early), kept
as tests: each is a way the early request could send what the loaded app would not, hang,
or keep what it must not. The CLI runs as a real subprocess against the scripted model
server over real HTTP (helpers from tests/test_ask_early.py)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.core import ask_early
from tests.fakellm import ScriptedLLM, text
from tests.test_ask_early import ACCOUNT, KEY, _env, _make_home, _sends_early
from tests.test_ask_early_attacks import _ask, _recipe, _write_recipe

GH_TOKEN = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"


def _ask_with(home: Path, prompt: str, *flags: str, **env: str) -> Any:
    import subprocess

    return subprocess.run(
        [sys.executable, "-m", "app.cli", "--home", str(home), "ask", prompt, *flags],
        capture_output=True,
        text=True,
        env=_env(home, **env),
        cwd=Path(__file__).resolve().parents[1],
        timeout=60,
    )


# ---- secrets of mcp.json that the loaded app redacts ---------------------------------------


@pytest.mark.parametrize(
    ("entry", "secret"),
    [
        ({"args": [f"--token={GH_TOKEN}"]}, GH_TOKEN),
        ({"env": {"DB_PASSWORD": "pw4711!"}}, "pw4711!"),
        ({"env": {"DATABASE_URL": "postgres://bob:Sup3rS3cretPw@db/x"}}, "Sup3rS3cretPw"),
        ({"url": "https://mcp.example/?api_key=Zx9Qw8Er7Ty6Ui5"}, "Zx9Qw8Er7Ty6Ui5"),
        ({"url": "https://mcp.example/", "auth": {"clientSecret": "cs-77aa88bb"}}, "cs-77aa88bb"),
    ],
    ids=["token-argument", "short-password", "url-password", "url-query-key", "client-secret"],
)
def test_a_secret_part_of_mcp_json_in_the_prompt_never_goes_out_early(
    llm: ScriptedLLM, tmp_path: Path, entry: dict[str, Any], secret: str
):
    """The loaded app's tripwire knows the secret *parts* of mcp.json (a `--token=` value,
    a URL's password, a short password under a credential name); the early request must
    not send any of them, even though the loaded app then redacts its own request."""
    home = _make_home(tmp_path, llm)
    server = {"command": str(tmp_path / "no-such-server")} | entry
    if "url" in entry:
        server.pop("command")
    (home / "mcp.json").write_text(json.dumps({"mcpServers": {"srv": server}}), "utf-8")
    llm.add(text("one"))
    first = _ask(home, "hello")
    assert first.returncode == 0, first.stderr
    assert (home / ask_early.RECIPE_FILE).exists()
    assert _sends_early(home, "a plain question")  # the recipe itself is usable

    assert not _sends_early(home, f"is {secret} right?")
    assert not _sends_early(home, f"is {secret.encode().hex()} or {secret} right?")


def test_mcp_json_that_is_not_json_sends_nothing_early(llm: ScriptedLLM, tmp_path: Path):
    home = _make_home(tmp_path, llm)
    llm.add(text("one"))
    assert _ask(home, "hello").returncode == 0
    recipe = _recipe(home)
    (home / "mcp.json").write_text("{ not json", "utf-8")
    recipe["fingerprint"] = ask_early.inputs_fingerprint(home, (None, None, None))
    _write_recipe(home, recipe)
    assert not _sends_early(home, "a plain question")


# ---- a slow or endless fingerprint -----------------------------------------------------------


def test_a_link_loop_in_a_skill_folder_does_not_hang_ask(llm: ScriptedLLM, tmp_path: Path):
    """A cloned skill can ship links to its parent: following them made every `ask` walk
    2^n paths before sending anything."""
    home = _make_home(tmp_path, llm)
    skill = home / "skills" / "looping"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: looping\ndescription: d\n---\nbody\n", "utf-8")
    for name in ("a", "b", "c"):
        os.symlink("..", skill / name)
    tools_dir = home / "tools"
    tools_dir.mkdir()
    os.symlink("..", tools_dir / "up")
    started = time.monotonic()
    assert ask_early.inputs_fingerprint(home, (None, None, None)) is not None
    assert time.monotonic() - started < 5
    llm.add(text("one"), text("two"))
    assert _ask(home, "hello").returncode == 0
    assert _ask(home, "again").stdout.strip() == "two"


def test_a_skill_edit_changes_the_fingerprint_and_a_huge_tree_means_no_recipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    home = tmp_path / "home"
    skill = home / "skills" / "notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: notes\ndescription: one\n---\n", "utf-8")
    before = ask_early.inputs_fingerprint(home, ())
    (skill / "SKILL.md").write_text("---\nname: notes\ndescription: other\n---\n", "utf-8")
    assert ask_early.inputs_fingerprint(home, ()) != before

    packs = home / "tools"
    packs.mkdir()
    for n in range(30):
        (packs / f"pack{n}.py").write_text("", "utf-8")
    monkeypatch.setattr(ask_early, "MAX_STAMPED_FILES", 20)
    assert ask_early.inputs_fingerprint(home, ()) is None


# ---- inputs the fingerprint must stand for ---------------------------------------------------


def test_disabling_a_tool_pack_or_adding_a_rule_sends_nothing_early(
    llm: ScriptedLLM, tmp_path: Path
):
    """trust.json (which packs are enabled) and rules.json shape the tools offered: after a
    change, the old recipe's tool descriptions must not go out with the new prompt."""
    home = _make_home(tmp_path, llm)
    llm.add(text("one"))
    assert _ask(home, "hello").returncode == 0
    assert _sends_early(home, "again")
    (home / "trust.json").write_text(json.dumps({"sources": {}}), "utf-8")
    assert not _sends_early(home, "again")
    llm.add(text("two"))
    assert _ask(home, "hello").returncode == 0  # a new recipe for the new trust
    assert _sends_early(home, "again")
    (home / "rules.json").write_text(json.dumps({"rules": []}), "utf-8")
    assert not _sends_early(home, "again")


def test_a_connected_account_changes_the_fingerprint(llm: ScriptedLLM, tmp_path: Path):
    import sqlite3

    home = _make_home(tmp_path, llm)
    llm.add(text("one"))
    assert _ask(home, "hello").returncode == 0
    before = ask_early.inputs_fingerprint(home, ())
    with sqlite3.connect(home / "deskhand.db") as db:
        db.execute(
            "INSERT INTO integration_accounts (id, integration, label, fields, created_at)"
            " VALUES ('a1', 'github', 'work', '{}', 0)"
        )
    assert ask_early.inputs_fingerprint(home, ()) != before


def test_the_keyring_passphrase_variable_does_not_stop_recipes(llm: ScriptedLLM, tmp_path: Path):
    """Loading Deskhand takes DESKHAND_KEYRING_PASSPHRASE out of the environment: the
    fingerprint's variables are those the ask began with."""
    home = _make_home(tmp_path, llm)
    llm.add(text("one"), text("two"))
    passphrase = {"DESKHAND_KEYRING_PASSPHRASE": "a long passphrase for the test"}
    assert _ask_with(home, "hello", **passphrase).returncode == 0
    assert (home / ask_early.RECIPE_FILE).exists()
    second = _ask_with(home, "again", **passphrase)
    assert second.stdout.strip() == "two"
    log = (home / "logs" / "deskhand.log").read_text("utf-8")
    assert "went out before the app had loaded" in log


# ---- what a recipe may hold and do -----------------------------------------------------------


@pytest.mark.parametrize(
    "address", ["http://alice:pa55word@{host}/v1", "http://{host}/v1?api_key=Zx9Qw8Er7Ty6Ui5"]
)
def test_a_credential_in_the_address_is_never_kept(
    llm: ScriptedLLM, tmp_path: Path, address: str
):
    home = _make_home(tmp_path, llm)
    host = llm.openai_base_url.split("://", 1)[1].split("/", 1)[0]
    llm.add(text("one"))
    _ask_with(home, "hello", "--base-url", address.format(host=host))
    recipe = home / ask_early.RECIPE_FILE
    assert not recipe.exists() or (
        "pa55word" not in recipe.read_text("utf-8")
        and "Zx9Qw8Er7Ty6Ui5" not in recipe.read_text("utf-8")
    )


def test_a_recipe_equal_only_to_python_is_not_the_request(llm: ScriptedLLM, tmp_path: Path):
    """`"stream": 1` equals `True` in Python but is another request on the wire: the early
    response must be dropped and the app's own request sent."""
    home = _make_home(tmp_path, llm)
    llm.add(text("one"))
    assert _ask(home, "hello").returncode == 0
    recipe = _recipe(home)
    assert recipe["payload"]["stream"] is True
    recipe["payload"]["stream"] = 1
    _write_recipe(home, recipe)
    llm.add(text("from the dropped request"), text("from the right request"))
    proc = _ask(home, "again")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "from the right request"
    assert [r.body["stream"] for r in llm.requests[1:]] == [1, True]


def test_a_recipe_naming_another_accounts_key_sends_nothing(llm: ScriptedLLM, tmp_path: Path):
    """Two accounts on one server: a recipe whose key source is the account that is not
    active (or a deleted one) must not send that key."""
    home = _make_home(tmp_path, llm, key=KEY)
    settings = json.loads((home / "settings.json").read_text("utf-8"))
    other = dict(settings["providers"][0], id="other01", label="other")
    settings["providers"].append(other)
    (home / "settings.json").write_text(json.dumps(settings), "utf-8")
    llm.add(text("one"))
    assert _ask(home, "hello").returncode == 0
    assert _sends_early(home, "again")
    recipe = _recipe(home)
    assert recipe["key_source"][0] == ACCOUNT
    for account in ("other01", "deleted99"):
        recipe["key_source"][0] = account
        _write_recipe(home, recipe)
        assert not _sends_early(home, "again")


def test_a_request_with_a_memory_note_keeps_no_recipe(tmp_path: Path):
    """A memory the agent added in front of the prompt (it may be deleted before the
    recipe is written) is never kept for the next `ask`."""
    from app.core.providers.base import ProviderConfig

    line = "Now: Saturday"
    early = ask_early.EarlyRequest(tmp_path, "f", "hello", line, recordable=True)
    config = ProviderConfig(kind="openai", base_url="http://127.0.0.1:9/v1", model="m")
    body = {
        "model": "m",
        "stream": True,
        "messages": [
            {"role": "system", "content": f"Be brief.\n{line}"},
            {"role": "user", "content": "Memories: my bank PIN is 4711"},
            {"role": "user", "content": "hello"},
        ],
    }

    async def claim() -> None:
        assert early.claim("http://127.0.0.1:9/v1/chat/completions", {}, body, config) is None

    asyncio.run(claim())
    assert not (tmp_path / ask_early.RECIPE_FILE).exists()


def test_the_loaded_app_takes_over_the_early_secret_store(llm: ScriptedLLM, tmp_path: Path):
    """One keyring read (one passphrase question) per `ask`, not one per path."""
    from app.cli import _load_for_ask
    from app.core.secrets import SecretStore

    home = _make_home(tmp_path, llm)
    store = SecretStore(mode="auto", home=home)
    runtime = _load_for_ask(home, store)
    try:
        assert runtime.secrets is store
    finally:
        runtime.close()
    elsewhere = SecretStore(mode="auto", home=tmp_path / "another")
    runtime = _load_for_ask(home, elsewhere)
    try:
        assert runtime.secrets is not elsewhere
    finally:
        runtime.close()


# ---- the loaded app: a prompt is redacted with every stored secret known -------------------


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
    from app.cli import _load_for_ask
    from tools.fs import protected

    protected._cached.cache_clear()
    runtime = _load_for_ask(_make_home(tmp_path, llm))
    try:
        assert protected._cached.cache_info().currsize == 0
        runtime.warm_file_places()  # what the window's first keystroke does
        assert protected._cached.cache_info().currsize == 1
    finally:
        runtime.close()
