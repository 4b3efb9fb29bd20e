"""Review 17b: a hand-edited settings.json with a wrong choice, and pasted MCP servers
whose names the real keyring cannot take."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from app.core.mcp.config import import_block
from app.core.secrets import SecretStore
from app.core.settings import SettingsStore

SECRET = "ghp_0123456789abcdefghijABCDEFGHIJ012345"


def test_a_wrong_choice_in_settings_json_keeps_the_other_settings(tmp_path: Path) -> None:
    """`"theme": "Dark"` (a capital letter) sets the whole file aside: the providers and
    every other setting are gone until the user digs the file out. Out-of-range numbers
    are already forgiven (the field gets its default); a wrong choice or type should be
    too."""
    path = tmp_path / "settings.json"
    account = {"id": "a", "kind": "openai", "label": "Mine", "base_url": "http://x/v1"}
    path.write_text(
        json.dumps({"providers": [account], "active_provider": "a", "general": {"theme": "Dark"}})
    )
    settings = SettingsStore(path).load()
    assert [a.label for a in settings.providers] == ["Mine"]
    assert settings.general.theme == "system"


def test_pasted_secret_is_never_written_in_clear(keyring_env: dict[str, str], home: Path) -> None:
    """A server name with a NUL (pasted JSON) makes the Secret Service refuse the key
    `mcp/<name>/GITHUB_TOKEN`; the import then "keeps the literal value rather than lose
    it" — the token is written to mcp.json in clear."""
    store = SecretStore(home=home)
    target = home / "mcp.json"
    servers = {"gh\u0000": {"command": "npx", "env": {"GITHUB_TOKEN": SECRET}}}
    with contextlib.suppress(Exception):  # refusing the server is fine
        import_block(target, servers, Path("pasted text"), set_secret=store.set)
    assert not target.exists() or SECRET not in target.read_text("utf-8")
