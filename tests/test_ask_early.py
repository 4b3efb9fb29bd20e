"""`deskhand ask` sends its first request before the app has loaded (app.core.ask_early):
what it sends must be exactly what the loaded app would send, and nothing it would not.

The CLI runs as a real subprocess against the scripted model server over real HTTP; the
stored key lives in a plain-file keyring (bench/file_keyring.py) so a home can hold one."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.core import ask_early
from app.core.providers.base import ProviderConfig
from tests.fakellm import ScriptedLLM, text

REPO = Path(__file__).resolve().parents[1]
ACCOUNT = "acct01"
KEY = "sk-early-0123456789abcdef"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("DESKHAND_HOME", None)
    env["PYTHON_KEYRING_BACKEND"] = "bench.file_keyring.FileKeyring"
    env["DESKHAND_BENCH_KEYRING"] = str(home / "keyring.json")
    env["PYTHONPATH"] = str(REPO)
    return env | extra


def _make_home(
    tmp_path: Path, llm: ScriptedLLM, *, key: str | None = None, kind: str = "openai"
) -> Path:
    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    url = llm.openai_base_url if kind == "openai" else llm.anthropic_base_url
    account = {"id": ACCOUNT, "kind": kind, "label": "t", "base_url": url}
    settings = {
        "providers": [account | {"model": "m"}],
        "active_provider": ACCOUNT,
        "files": {"allowed_roots": [str(home / "work")], "folders_chosen": True},
    }
    (home / "settings.json").write_text(json.dumps(settings), "utf-8")
    if key is not None:
        _store_key(home, key)
    return home


def _store_key(home: Path, value: str) -> None:
    """Stores the account's key the way the settings pane does, in the file keyring."""
    code = (
        "import sys\n"
        "from app.core.secrets import SecretStore, secret_key\n"
        "SecretStore(mode='system', home=sys.argv[1]).set("
        f"secret_key('provider', {ACCOUNT!r}, 'api_key'), sys.argv[2])\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(home), value],
        env=_env(home),
        cwd=REPO,
        check=True,
        capture_output=True,
    )


def _ask(home: Path, prompt: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "--home", str(home), "ask", prompt, *flags],
        capture_output=True,
        text=True,
        env=_env(home),
        cwd=REPO,
        timeout=60,
    )


def _user_texts(body: Any) -> list[str]:
    return [_text(m["content"]) for m in body["messages"] if m["role"] == "user"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content)


def _system(body: Any) -> str:
    if "system" in body:
        return _text(body["system"])
    return _text(body["messages"][0]["content"])


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_second_ask_is_answered_from_its_early_request_sent_once(
    llm: ScriptedLLM, tmp_path: Path, kind: str
):
    home = _make_home(tmp_path, llm, key=KEY, kind=kind)
    llm.add(text("first answer"))
    llm.add(text("second answer"))
    first = _ask(home, "what is on today?")
    assert first.returncode == 0, first.stderr
    recipe_file = home / ask_early.RECIPE_FILE
    assert stat.S_IMODE(recipe_file.stat().st_mode) == 0o600
    kept = recipe_file.read_text("utf-8")
    assert "what is on today?" not in kept and KEY not in kept
    assert "Now: " not in kept  # the time line is cut out too

    log = home / "logs" / "deskhand.log"
    assert "went out before the app had loaded" not in log.read_text("utf-8")
    second = _ask(home, "and tomorrow?")
    assert second.returncode == 0, second.stderr
    assert "went out before the app had loaded" in log.read_text("utf-8")
    assert second.stdout.strip() == "second answer"
    assert len(llm.requests) == 2  # the early request was taken, not sent twice
    early, normal = llm.requests[1], llm.requests[0]
    assert _user_texts(early.body) == ["and tomorrow?"]
    if kind == "openai":
        assert early.headers["authorization"] == f"Bearer {KEY}"
    else:
        assert early.headers["x-api-key"] == KEY
    assert early.headers["accept"] == "text/event-stream"
    # the same request as the loaded app makes: only the prompt differs
    assert early.body["tools"] == normal.body["tools"]
    assert _system(early.body).split("Now: ")[0] == _system(normal.body).split("Now: ")[0]
    db = sqlite3.connect(home / "deskhand.db")
    stored = [r[0] for r in db.execute("SELECT content FROM messages ORDER BY id")]
    assert stored[-2:] == ["and tomorrow?", "second answer"]


def test_an_early_request_that_is_not_the_wanted_one_is_dropped_and_replaced(
    llm: ScriptedLLM, tmp_path: Path
):
    home = _make_home(tmp_path, llm)
    llm.add(text("one"))
    assert _ask(home, "hello").returncode == 0
    recipe_file = home / ask_early.RECIPE_FILE
    kept = json.loads(recipe_file.read_text("utf-8"))
    kept["payload"]["max_tokens"] = 7  # what an older Deskhand might have sent
    recipe_file.write_text(json.dumps(kept), "utf-8")
    llm.add(text("from the dropped request"))
    llm.add(text("from the right request"))

    proc = _ask(home, "again")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "from the right request"
    assert [r.body["max_tokens"] for r in llm.requests[1:]] == [7, 4096]
    assert json.loads(recipe_file.read_text("utf-8"))["payload"]["max_tokens"] == 4096


def test_a_prompt_holding_a_stored_secret_never_goes_out_early(llm: ScriptedLLM, tmp_path: Path):
    home = _make_home(tmp_path, llm, key=KEY)
    llm.add(text("one"))
    assert _ask(home, "hello").returncode == 0
    assert not _sends_early(home, f"my key is {KEY}, keep it")
    assert _sends_early(home, "a plain question")  # the same home does send a clean prompt


def test_changed_settings_memories_or_a_continued_chat_send_nothing_early(
    llm: ScriptedLLM, tmp_path: Path
):
    home = _make_home(tmp_path, llm)
    llm.add(text("one"))
    assert _ask(home, "hello").returncode == 0
    assert _sends_early(home, "again")

    settings = json.loads((home / "settings.json").read_text("utf-8"))
    settings["max_steps"] = 5
    (home / "settings.json").write_text(json.dumps(settings), "utf-8")
    assert not _sends_early(home, "again")

    llm.add(text("two"))
    assert _ask(home, "hello").returncode == 0  # a new recipe for the new settings
    assert _sends_early(home, "again")
    db = sqlite3.connect(home / "deskhand.db")
    with db:
        db.execute(
            "INSERT INTO memories (kind, content, created_at, updated_at)"
            " VALUES ('fact', 'x', 0, 0)"
        )
    assert ask_early.memories_absent(home) is False
    assert not _sends_early(home, "again")
    with db:
        db.execute("DELETE FROM memories")
    assert _sends_early(home, "again")
    assert not _sends_early(home, "again", new=False)  # `--conversation`: its history counts


def test_a_recipe_cannot_send_the_key_to_another_server(llm: ScriptedLLM, tmp_path: Path):
    home = _make_home(tmp_path, llm, key=KEY)
    llm.add(text("one"))
    assert _ask(home, "hello").returncode == 0
    recipe_file = home / ask_early.RECIPE_FILE
    honest = json.loads(recipe_file.read_text("utf-8"))
    with ScriptedLLM() as other:
        elsewhere = f"{other.openai_base_url}/chat/completions"
        for tampered in (
            honest | {"url": elsewhere},  # another server, the key's source unchanged
            honest | {"url": elsewhere, "key_source": [ACCOUNT, other.openai_base_url, elsewhere]},
        ):
            recipe_file.write_text(json.dumps(tampered), "utf-8")
            assert not _sends_early(home)
        assert other.requests == []


def _begin_in_subprocess(home: Path, prompt: str = "hi", *, new: bool = True) -> tuple[str, str]:
    """Runs `begin` alone in a fresh process: whether it sent, and the modules it loaded."""
    code = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from app.core import ask_early\n"
        "async def main():\n"
        "    early = ask_early.begin(Path(sys.argv[1]), sys.argv[2], (None, None, None),"
        " new_conversation=sys.argv[3] == 'new')\n"
        "    await early.wait_written(5.0)\n"
        "    print(early.sent)\n"
        "    print(sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('pydantic', 'tools', 'app')))\n"
        "    await early.aclose()\n"
        "asyncio.run(main())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(home), prompt, "new" if new else "continued"],
        env=_env(home),
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    sent, modules = proc.stdout.splitlines()
    return sent, modules


def _sends_early(home: Path, prompt: str = "hi", *, new: bool = True) -> bool:
    return _begin_in_subprocess(home, prompt, new=new)[0] == "True"


def test_the_early_path_loads_no_settings_model_tools_or_agent(llm: ScriptedLLM, tmp_path: Path):
    home = _make_home(tmp_path, llm, key=KEY)
    llm.add(text("one"))
    assert _ask(home, "hello").returncode == 0
    sent, modules = _begin_in_subprocess(home)
    assert sent == "True"
    loaded = set(json.loads(modules.replace("'", '"')))
    assert not {m for m in loaded if m.split(".")[0] == "pydantic"}
    heavy = {"app.core.settings", "app.core.runtime", "app.core.agent", "tools.registry"}
    assert not loaded & heavy
    assert len(llm.requests) == 2 and _user_texts(llm.requests[1].body) == ["hi"]


# ---- the recipe itself ------------------------------------------------------------------


def _config(**kw: Any) -> ProviderConfig:
    return ProviderConfig(kind="openai", base_url="http://127.0.0.1:1/v1", model="m", **kw)


def test_cut_out_and_fill_in_round_trip_only_a_single_prompt_and_time_line():
    line = "Now: Tuesday 2026-11-24 10:00 in UTC (UTC+0000)."
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": f"Be brief.\n{line}"},
            {"role": "user", "content": "hello"},
        ],
    }
    template = ask_early.cut_out(body, "hello", line, secret=None)
    assert template is not None and "hello" not in json.dumps(template)
    later = "Now: Tuesday 2026-11-24 10:01 in UTC (UTC+0000)."
    filled = ask_early.fill_in(template, "bye", later)
    assert filled["messages"][1]["content"] == "bye"
    assert filled["messages"][0]["content"] == f"Be brief.\n{later}"
    assert ask_early.cut_out(body, "m", line, secret=None) is None  # the prompt is the model
    assert ask_early.cut_out(body, "hello", "no such line", secret=None) is None
    assert ask_early.cut_out(body, "hello", line, secret="brief") is None  # a secret inside


def test_a_request_wanting_a_key_from_nowhere_keeps_no_recipe(tmp_path: Path):
    early = ask_early.EarlyRequest(tmp_path, "f", "hi", "Now: x.", recordable=True)
    body = {"messages": [{"role": "system", "content": "Now: x."}, {"content": "hi"}]}
    headers = {"Authorization": "Bearer k"}
    claimed = early.claim("http://h/v1", headers, body, _config(api_key="k"))
    assert claimed is None
    assert not (tmp_path / ask_early.RECIPE_FILE).exists()  # no key source: nothing kept
    early = ask_early.EarlyRequest(tmp_path, "f", "hi", "Now: x.", recordable=True)
    source = ("a", "http://h/v1", "http://h/v1")
    early.claim("http://h/v1", headers, body, _config(api_key="k", key_source=source))
    kept = ask_early.load_recipe(tmp_path, "f")
    assert kept is not None and kept.headers == {"Authorization": f"Bearer {ask_early.KEY_MARK}"}
    assert ask_early.load_recipe(tmp_path, "another fingerprint") is None


@pytest.mark.parametrize("damage", ["{", "[]", '{"format": 1}', '{"format": 99}'])
def test_a_damaged_recipe_is_ignored(tmp_path: Path, damage: str):
    (tmp_path / ask_early.RECIPE_FILE).write_text(damage, "utf-8")
    assert ask_early.load_recipe(tmp_path, "f") is None


# ---- the client for a plain-http server ---------------------------------------------------


def test_a_plain_http_client_skips_the_ca_bundle_but_trusts_no_tls_peer(monkeypatch):
    import ssl

    from app.core.providers.http_client import _tls_for

    for name in [n for n in os.environ if n.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)
    plain = _tls_for("http://127.0.0.1:11434/v1")
    assert isinstance(plain, ssl.SSLContext)
    assert plain.verify_mode is ssl.CERT_REQUIRED and plain.check_hostname
    assert plain.cert_store_stats()["x509_ca"] == 0  # any https peer fails verification
    assert _tls_for("https://api.openai.com/v1") is True  # the system's CAs
    monkeypatch.setenv("HTTPS_PROXY", "https://proxy.example:3128")
    assert _tls_for("http://127.0.0.1:11434/v1") is True  # the proxy may speak TLS
