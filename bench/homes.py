"""Deskhand homes for the start-up benchmarks: empty, or "configured" (a provider account
with its API key stored in a keyring, and two MCP servers in mcp.json)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
#: Python MCP servers written with the official SDK (the tests' own).
MCP_SERVERS = REPO / "tests" / "mcp_servers.py"


def bench_env(home: Path) -> dict[str, str]:
    """The environment a benchmarked process runs in: the repository on the path and the
    benchmark's file keyring (secrets of `home` stay in `home`)."""
    return dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(REPO), str(BENCH)]),
        PYTHON_KEYRING_BACKEND="file_keyring.FileKeyring",
        DESKHAND_BENCH_KEYRING=str(home / "bench-keyring.json"),
        QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"),
    )


def empty_home() -> Path:
    return Path(tempfile.mkdtemp(prefix="deskhand-bench-"))


def configured_home(base_url: str = "http://127.0.0.1:9/v1") -> Path:
    """A provider account whose key is in the keyring, and two stdio MCP servers."""
    home = empty_home()
    os.environ.update(
        {k: v for k, v in bench_env(home).items() if k.startswith(("PYTHON", "DESKHAND"))}
    )
    sys.path[:0] = [str(REPO), str(BENCH)]
    from app.core.secrets import SecretStore, secret_key
    from app.core.settings import ProviderAccount, SettingsStore

    store = SettingsStore(home / "settings.json")
    account = ProviderAccount(kind="openai", label="Bench", base_url=base_url, model="m")

    def add(settings):  # type: ignore[no-untyped-def]
        settings.providers.append(account)
        settings.active_provider = account.id
        return settings

    store.update(add)
    SecretStore(mode="system", home=home).set(
        secret_key("provider", account.id, "api_key"), "sk-bench-0123"
    )
    servers = {
        name: {"command": sys.executable, "args": [str(MCP_SERVERS), "stdio"]}
        for name in ("bench-one", "bench-two")
    }
    (home / "mcp.json").write_text(json.dumps({"mcpServers": servers}), "utf-8")
    return home


def reap_mcp_servers() -> int:
    """Ends the MCP servers a finished run left behind (they run in their own sessions and
    would otherwise still be starting, eating CPU, during the next run). Linux only."""
    import signal

    ended = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if str(MCP_SERVERS).encode() in cmdline:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                ended += 1
            except OSError:
                pass
    return ended
