"""`mcp import` moves EVERY secret-looking value to the keyring — not only values under
credential-looking names — and the server still gets exactly what was configured."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from app.core.mcp.config import (
    ServerConfig,
    import_block,
    import_servers,
    read_servers_block,
    resolve_args,
    resolve_secrets,
    resolve_text,
)

GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SLACK = "xoxb-2048-1234567890-Zyxwvutsrq"
ANTHROPIC = "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx1\n-----END RSA PRIVATE KEY-----"
DB_PASSWORD = "db-Pa55word"
URL_PASSWORD = "url-Pa55word"
QUERY_KEY = "q9key77"
FLAG_VALUE = "flag-secret-42"

SERVERS: dict[str, Any] = {
    "db": {
        "command": "npx",
        "args": [
            "-y",
            "@modelcontextprotocol/server-postgres",
            f"postgresql://reader:{DB_PASSWORD}@db.internal:5432/app",
            f"--token={GH}",
            "--api-key",
            FLAG_VALUE,
            "--verbose",
        ],
        "env": {
            "NOTE": ANTHROPIC,  # a harmless-sounding name
            "CERT": PEM,
            "LOG_LEVEL": "debug",
            "HOME_URL": "https://example.com/docs",
            "REF": "${OTHER_VAR}",
        },
    },
    "remote": {
        "type": "sse",
        "url": f"https://me:{URL_PASSWORD}@mcp.example/sse?api_key={QUERY_KEY}&page=2",
        "headers": {"X-Debug": SLACK, "Accept": "text/event-stream"},
    },
}
SECRETS = [GH, SLACK, ANTHROPIC, PEM, DB_PASSWORD, URL_PASSWORD, QUERY_KEY, FLAG_VALUE]


def _source(tmp_path: Path) -> Path:
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(json.dumps({"mcpServers": SERVERS}), "utf-8")
    return source


def test_every_secret_looking_value_moves_and_resolves_back_exactly(tmp_path: Path) -> None:
    target = tmp_path / "home" / "mcp.json"
    target.parent.mkdir()
    stored: dict[str, str] = {}
    report = import_servers(target, _source(tmp_path), set_secret=stored.__setitem__)

    written = target.read_text("utf-8")
    for secret in SECRETS:
        assert secret not in written, secret
        assert json.dumps(secret)[1:-1] not in written
    assert sorted(stored.values()) == sorted(SECRETS)
    assert report.kept_in_file == []
    assert len(report.moved_to_keyring) == len(SECRETS)

    servers = read_servers_block(target)
    db, remote = servers["db"], servers["remote"]
    # What is not secret is left alone, readable.
    assert db["args"][:2] == ["-y", "@modelcontextprotocol/server-postgres"]
    assert db["args"][4] == "--api-key" and db["args"][6] == "--verbose"
    assert db["args"][2].startswith("postgresql://reader:${keyring:mcp/db/")
    assert db["args"][2].endswith("}@db.internal:5432/app")
    assert db["args"][3].startswith("--token=${keyring:")
    assert db["env"]["LOG_LEVEL"] == "debug" and db["env"]["REF"] == "${OTHER_VAR}"
    assert db["env"]["HOME_URL"] == "https://example.com/docs"
    assert db["env"]["NOTE"] == "keyring:mcp/db/NOTE"
    assert remote["headers"]["Accept"] == "text/event-stream"
    assert remote["url"].startswith("https://me:${keyring:") and "&page=2" in remote["url"]

    # At start-up the server gets exactly what the original config said.
    db_cfg = ServerConfig.from_json("db", db)
    assert resolve_args(db_cfg.args, stored.get) == SERVERS["db"]["args"]
    assert resolve_secrets(db_cfg.env, stored.get) == SERVERS["db"]["env"]
    remote_cfg = ServerConfig.from_json("remote", remote)
    assert remote_cfg.transport == "sse" and remote_cfg.url is not None
    assert resolve_text("url", remote_cfg.url, stored.get) == SERVERS["remote"]["url"]
    assert resolve_secrets(remote_cfg.headers, stored.get) == SERVERS["remote"]["headers"]
    assert remote_cfg.resolved(stored.get) == ServerConfig.from_json("remote", SERVERS["remote"])
    assert db_cfg.resolved(stored.get) == ServerConfig.from_json("db", SERVERS["db"])


def test_a_keyring_failure_refuses_the_server_and_says_so(tmp_path: Path) -> None:
    """A secret the keyring refuses is never kept in mcp.json: its server is not imported
    and the report says why (it used to keep the literal value)."""

    def broken(ref: str, value: str) -> None:
        raise RuntimeError(f"keyring locked (was given {value})")

    target = tmp_path / "mcp.json"
    report = import_servers(target, _source(tmp_path), set_secret=broken)
    assert report.added == [] and report.moved_to_keyring == [] and report.kept_in_file == []
    assert not target.exists()  # nothing was written
    assert [(p.name, p.field) for p in report.invalid] == [
        ("db", "env.NOTE"),
        ("remote", "headers.X-Debug"),
    ]
    for problem in report.invalid:
        assert problem.detail.startswith("could not store its secret in the keyring: keyring")
        assert problem.detail.endswith("; nothing was written for it")
        assert not any(secret in problem.message for secret in SECRETS)


def test_literal_configs_tell_the_tripwire_their_secret_parts() -> None:
    """A hand-written mcp.json with literal secrets: their values are known to the
    tripwire (only the secret parts, not whole URLs or harmless values)."""
    db = ServerConfig.from_json("db", SERVERS["db"])
    remote = ServerConfig.from_json("remote", SERVERS["remote"])
    found = set(db.credential_values()) | set(remote.credential_values())
    assert set(SECRETS) <= found
    assert not {"debug", "-y", "--verbose", "text/event-stream", "${OTHER_VAR}"} & found
    assert "https://example.com/docs" not in found


@pytest.mark.keyring
def test_cli_import_stores_in_the_real_keyring_and_the_next_start_knows(
    keyring_env: dict[str, str], home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main
    from app.core.secrets import SecretStore

    assert main(["mcp", "import", str(_source(tmp_path)), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sorted(out["added"]) == ["db", "remote"] and out["kept_in_file"] == []
    written = (home / "mcp.json").read_text("utf-8")
    assert not any(secret in written for secret in SECRETS)

    ref = read_servers_block(home / "mcp.json")["db"]["env"]["NOTE"].removeprefix("keyring:")
    found = subprocess.run(
        ["secret-tool", "lookup", "service", "deskhand", "username", ref],
        env={**os.environ, **keyring_env},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert found.stdout == ANTHROPIC
    # The index lists them: the next start knows secrets exist without the keyring.
    assert len(SecretStore(home=home).stored_names()) == len(SECRETS)


PASTED_TOKEN = "ghp_0123456789abcdefghijABCDEFGHIJ012345"


def test_a_pasted_secret_the_keyring_refuses_is_never_written_in_clear(
    keyring_env: dict[str, str], home: Path
) -> None:
    """A server name with a NUL (pasted JSON) makes the Secret Service refuse the key
    `mcp/<name>/GITHUB_TOKEN`: the import may refuse the server, but never keeps the token
    in mcp.json in clear instead."""
    from app.core.secrets import SecretStore

    store = SecretStore(home=home)
    target = home / "mcp.json"
    servers = {"gh\u0000": {"command": "npx", "env": {"GITHUB_TOKEN": PASTED_TOKEN}}}
    with contextlib.suppress(Exception):  # refusing the server is fine
        import_block(target, servers, Path("pasted text"), set_secret=store.set)
    assert not target.exists() or PASTED_TOKEN not in target.read_text("utf-8")
