"""`McpServers`, the one place MCP servers change: a typed entry and an imported one have
their secrets moved to the keyring by the same rule, removing a server (or dropping a secret)
deletes its keyring entries, and a running manager connects a saved server by itself."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.mcp.config import (
    EntryError,
    ServerConfig,
    read_servers_block,
    secret_refs,
)
from app.core.mcp.manager import McpManager
from app.core.mcp.secret_access import SecretAccess, token_key
from app.core.mcp.servers import McpServers
from app.core.mcp.status import ServerState, Status
from app.core.secrets import SecretStore
from tests.fixtures_keyring import MemoryKeyring

SERVER = str(Path(__file__).with_name("mcp_servers.py"))
GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
ANTHROPIC = "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"
FLAG_VALUE = "flag-secret-42"
ENV_TOKEN = "tok-5e6f7a8b9c0d"
#: An entry as a user types it into the form: secrets in an argument, after a flag, under a
#: harmless-looking name and under a credential-looking one.
TYPED: dict[str, Any] = {
    "command": "npx",
    "args": ["-y", "some-server", f"--token={GH}", "--api-key", FLAG_VALUE, "--verbose"],
    "env": {"NOTE": ANTHROPIC, "API_TOKEN": ENV_TOKEN, "LOG_LEVEL": "debug"},
}
SECRETS = [GH, FLAG_VALUE, ANTHROPIC, ENV_TOKEN]


def service_on(path: Path, store: SecretStore, manager: McpManager | None = None) -> McpServers:
    return McpServers(
        path,
        secrets=lambda: store,
        manager=lambda: manager,
        build_manager=lambda: manager or pytest.fail("no manager in this test"),
    )


@pytest.fixture
def real_store(keyring_env: dict[str, str], home: Path) -> SecretStore:
    """The system keyring (a private gnome-keyring), as the app uses it."""
    return SecretStore(home=home)


@pytest.fixture
def servers(home: Path, real_store: SecretStore) -> McpServers:
    return service_on(home / "mcp.json", real_store)


def stored_text(service: McpServers) -> str:
    return service.path.read_text("utf-8")


def test_a_token_argument_typed_into_the_editor_goes_to_the_keyring(
    servers: McpServers, real_store: SecretStore
) -> None:
    """Drift that was: the form moved only values under credential names, so `--token=…`
    stayed in clear in mcp.json while the same argument imported was moved."""
    servers.save("db", json.loads(json.dumps(TYPED)))
    text = stored_text(servers)
    for secret in SECRETS:
        assert secret not in text
    saved = read_servers_block(servers.path)["db"]
    assert saved["env"]["LOG_LEVEL"] == "debug" and saved["args"][-1] == "--verbose"
    # the server still gets exactly what was typed
    resolved = ServerConfig.from_json("db", saved).resolved(real_store.get)
    assert list(resolved.args) == TYPED["args"]
    assert dict(resolved.env) == TYPED["env"]


def test_a_typed_entry_and_an_imported_one_are_stored_alike(
    servers: McpServers, real_store: SecretStore
) -> None:
    servers.save("typed", json.loads(json.dumps(TYPED)))
    report = servers.import_text(json.dumps({"mcpServers": {"pasted": TYPED}}))
    assert report.added == ["pasted"]
    block = read_servers_block(servers.path)
    typed = json.dumps(block["typed"]).replace("mcp/typed/", "mcp/X/")
    pasted = json.dumps(block["pasted"]).replace("mcp/pasted/", "mcp/X/")
    assert typed == pasted


def test_removing_a_server_deletes_its_keyring_entries(
    servers: McpServers, real_store: SecretStore
) -> None:
    servers.save("db", json.loads(json.dumps(TYPED)))
    servers.save(
        "web",
        {"url": "https://mcp.example/mcp", "auth": "none"},
        token=ENV_TOKEN,
    )
    real_store.set(token_key("db"), json.dumps({"url": None, "tokens": {}}))  # a sign-in
    db_refs = secret_refs(read_servers_block(servers.path)["db"])
    assert db_refs and all(real_store.get(ref) is not None for ref in db_refs)

    servers.remove("db")

    assert "db" not in read_servers_block(servers.path)
    for ref in [*db_refs, token_key("db")]:
        assert real_store.get(ref) is None, ref
    # the other server's secret stays
    assert real_store.get("mcp/web/oauth_token") == f"Bearer {ENV_TOKEN}"
    servers.remove("web")
    assert real_store.get("mcp/web/oauth_token") is None


def test_a_secret_dropped_from_an_entry_is_deleted_and_one_kept_stays(
    servers: McpServers, real_store: SecretStore
) -> None:
    servers.save("db", {"command": "npx", "env": {"API_TOKEN": ENV_TOKEN, "B_PASSWORD": "b-val"}})
    saved = read_servers_block(servers.path)["db"]
    assert real_store.get("mcp/db/API_TOKEN") == ENV_TOKEN
    # the form shows references as they are: saving them again keeps the secrets
    servers.save("db", saved, original="db")
    assert real_store.get("mcp/db/API_TOKEN") == ENV_TOKEN
    # the user deletes one line
    servers.save(
        "db", {"command": "npx", "env": {"B_PASSWORD": saved["env"]["B_PASSWORD"]}}, original="db"
    )
    assert real_store.get("mcp/db/API_TOKEN") is None
    assert real_store.get("mcp/db/B_PASSWORD") == "b-val"


def test_a_new_secret_never_overwrites_one_the_entry_still_refers_to(
    home: Path,
) -> None:
    store = SecretStore(backend=MemoryKeyring(), home=home)
    servers = service_on(home / "mcp.json", store)
    servers.save("db", {"command": "npx", "args": ["a", f"--token={GH}"]})
    first = read_servers_block(servers.path)["db"]["args"]
    # an argument is added in front; a new token lands where the old one's index was
    servers.save("db", {"command": "npx", "args": [f"--key={ANTHROPIC}", *first]}, original="db")
    resolved = ServerConfig.from_json("db", read_servers_block(servers.path)["db"]).resolved(
        store.get
    )
    assert list(resolved.args) == [f"--key={ANTHROPIC}", "a", f"--token={GH}"]


class _RefusingKeyring(MemoryKeyring):
    def set_password(self, service: str, username: str, password: str) -> None:
        raise RuntimeError("the keyring refused the item")


def test_a_secret_the_keyring_refuses_is_never_written_in_clear(home: Path) -> None:
    servers = service_on(home / "mcp.json", SecretStore(backend=_RefusingKeyring(), home=home))
    with pytest.raises(EntryError) as refused:
        servers.save("db", json.loads(json.dumps(TYPED)))
    assert "could not store its secret in the keyring" in str(refused.value)
    assert not servers.path.exists()


def test_a_taken_name_is_refused_and_nothing_changes(home: Path) -> None:
    servers = service_on(home / "mcp.json", SecretStore(backend=MemoryKeyring(), home=home))
    servers.save("a", {"command": "x"})
    servers.save("b", {"command": "y"})
    with pytest.raises(EntryError) as taken:
        servers.save("a", {"command": "z"}, original="b")
    assert taken.value.problems[0].field == "name"
    assert read_servers_block(servers.path) == {"a": {"command": "x"}, "b": {"command": "y"}}


@pytest.fixture
def running_manager(home: Path) -> Iterator[tuple[McpManager, SecretStore]]:
    store = SecretStore(backend=MemoryKeyring(), home=home)
    manager = McpManager(
        home / "mcp.json",
        home=home,
        get_secret=store.get,
        secrets=SecretAccess(get=store.get, set=store.set, delete=store.delete),
    )
    manager.start()
    yield manager, store
    manager.shutdown()


def test_a_saved_server_connects_when_the_manager_runs(
    home: Path, running_manager: tuple[McpManager, SecretStore]
) -> None:
    manager, store = running_manager
    servers = service_on(home / "mcp.json", store, manager)
    ready = threading.Event()
    seen: list[ServerState] = []

    def follow(state: ServerState) -> None:
        seen.append(state)
        if state.name == "notes" and state.status is Status.READY:
            ready.set()

    servers.subscribe(follow)
    entry = {"command": sys.executable, "args": [SERVER, "stdio"], "env": {"API_TOKEN": "t-1"}}
    servers.save("notes", entry)
    assert ready.wait(30), [s.status for s in seen]  # nobody pressed Connect
    state = manager.status("notes")
    assert state is not None and state.status is Status.READY and state.tools

    # disabled: it stops; removed: the manager forgets it
    servers.set_enabled("notes", False)
    assert manager.status("notes").status is Status.DISABLED  # type: ignore[union-attr]
    servers.remove("notes")
    assert manager.states() == []


def test_the_output_tail_masks_secrets_and_controls_and_close_removes_it(home: Path) -> None:
    """The handler sees a server's log record before the root handlers' redaction."""
    servers = service_on(home / "mcp.json", SecretStore(backend=MemoryKeyring(), home=home))
    logger = logging.getLogger("deskhand.mcp")
    before = list(logger.handlers)
    assert servers.output("leaky") == []  # watching from now on
    assert len(logger.handlers) == len(before) + 1
    token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    logging.getLogger("deskhand.mcp.leaky").warning("[leaky] auth failed for %s\x1b[2J", token)
    [line] = servers.output("leaky")
    assert token not in line and "\x1b" not in line and "auth failed" in line
    servers.output("leaky")
    assert len(logger.handlers) == len(before) + 1  # installed once
    servers.close()
    assert logger.handlers == before
