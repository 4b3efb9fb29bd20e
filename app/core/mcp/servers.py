"""`McpServers`: every change the window or the CLI makes to the servers of mcp.json.

Save (add, edit, rename), enable or disable, remove, import (Claude Desktop's config, a
file, pasted text); every path moves secrets to the keyring through the one mover
(`app.core.mcp.config.move_secrets`), deletes the keyring entries a change left without a
reference, and tells a running manager (a saved or imported server connects at once, a
removed one stops). It also follows the servers for a view: their states, the last lines
each wrote (a log handler, installed on first use and removed by `close`), sign-in.

Every method that touches a file, the keyring or the manager blocks: a view runs it on a
worker thread.
"""

from __future__ import annotations

import collections
import json
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from app.core.mcp.config import (
    EntryError,
    EntryProblem,
    ImportReport,
    McpConfigError,
    ServerConfig,
    case_twin,
    case_twin_detail,
    check_entry,
    import_block,
    is_own_ref,
    keyring_key,
    move_secrets,
    parse_servers,
    read_servers_block,
    rehome_refs,
    secret_refs,
    write_servers_block,
)
from app.core.mcp.desktop import claude_desktop_config_path
from app.core.mcp.secret_access import SecretAccess, forget_sign_in, has_sign_in, token_key
from app.core.mcp.secret_shapes import KEYRING_PREFIX
from app.core.mcp.status import ServerState

if TYPE_CHECKING:
    from app.core.mcp.manager import McpManager

__all__ = [
    "HIDDEN_FIELDS",
    "PASTE_EXAMPLE",
    "EntryError",
    "EntryProblem",
    "ImportReport",
    "Listing",
    "McpConfigError",
    "McpServers",
    "Saved",
    "claude_desktop_config_path",
    "has_stored_token",
    "servers_from_text",
    "signs_in_with_browser",
    "validate",
]

log = logging.getLogger(__name__)

#: Lines of each server's output kept for its status.
TAIL_LINES = 12
#: Fields of an entry the window's form does not show; saving keeps them.
HIDDEN_FIELDS = ("cwd", "timeout")
PASTE_EXAMPLE = '{"mcpServers": {"files": {"command": "npx", "args": ["-y", "server-name"]}}}'
#: Where the servers' output is logged (`deskhand.mcp.<server>`).
OUTPUT_LOGGER = "deskhand.mcp"

Listener = Callable[[ServerState], None]


class Secrets(Protocol):
    """The keyring as this service uses it (app.core.secrets.SecretStore)."""

    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str) -> None: ...

    def delete(self, key: str) -> None: ...


@dataclass(frozen=True)
class Listing:
    """mcp.json as read now: each entry's raw object, why the file cannot be used (""),
    and the servers' states (the manager's if it exists, else the invalid entries')."""

    servers: dict[str, dict[str, Any]]
    error: str
    states: list[ServerState]


@dataclass(frozen=True)
class Saved:
    """What a save wrote: the servers now, and hidden fields dropped as invalid."""

    servers: dict[str, dict[str, Any]]
    dropped: list[str] = field(default_factory=list)


def validate(name: str, entry: dict[str, Any]) -> None:
    """Raises EntryError naming every field of `entry` that cannot be used."""
    ServerConfig.from_json(name, entry)


#: The access-token field's reference (`_2`… when a new token was stored beside the old).
_TOKEN_REF = re.compile(re.escape(KEYRING_PREFIX) + r"mcp/[^/]+/oauth_token(?:_\d+)?")


def has_stored_token(entry: dict[str, Any]) -> bool:
    """Whether the entry signs in with an access token kept in the keyring."""
    return _stored_token_ref(entry) is not None


def _stored_token_ref(entry: dict[str, Any]) -> str | None:
    headers = entry.get("headers") or {}
    auth = str(headers.get("Authorization", "")) if isinstance(headers, dict) else ""
    return auth if _TOKEN_REF.fullmatch(auth) else None


def signs_in_with_browser(name: str, entry: dict[str, Any]) -> bool:
    """Whether this entry is a remote server that signs in through the browser (OAuth);
    stdio servers, `"auth": "none"` and client credentials never do."""
    try:
        config = ServerConfig.from_json(name, entry)
    except (McpConfigError, ValueError, TypeError):
        return False
    return config.transport != "stdio" and config.auth.kind == "oauth"


def servers_from_text(text: str) -> dict[str, Any]:
    """The servers in pasted JSON: a whole Claude Desktop config (`{"mcpServers": {…}}`),
    its `mcpServers` object, or one `"name": {…}` pair. Raises ValueError in plain words."""
    text = text.strip()
    if not text:
        raise ValueError("Paste the JSON first.")
    data: Any = None
    error: json.JSONDecodeError | None = None
    for candidate in (text, "{" + text.rstrip(",") + "}"):
        try:
            data = json.loads(candidate)
            break
        except json.JSONDecodeError as exc:
            error = error or exc
        except RecursionError:
            raise ValueError("This JSON is nested too deeply to read.") from None
    if data is None and error is not None:
        raise ValueError(
            f"This is not valid JSON: {error.msg.lower()} (line {error.lineno}, "
            f"column {error.colno})."
        )
    if isinstance(data, dict) and isinstance(data.get("mcpServers"), dict):
        data = data["mcpServers"]
    if not isinstance(data, dict) or not data:
        raise ValueError("Expected an object of servers, like " + PASTE_EXAMPLE)
    if not all(isinstance(v, dict) for v in data.values()):
        raise ValueError("Each server needs an object with a command or a url.")
    return data


class OutputTail(logging.Handler):
    """The last lines each server logged as `deskhand.mcp.<name>` (its stderr, its log
    messages), masked when kept: this handler sees a record before the root handlers'
    redaction."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self._lines: dict[str, collections.deque[str]] = {}
        self._lines_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        from app.core.mcp.stderr import safe_line

        server = record.name.removeprefix(OUTPUT_LOGGER + ".")
        try:
            text = record.getMessage()
        except Exception:
            return
        text = safe_line(text.removeprefix(f"[{server}] "))
        with self._lines_lock:
            self._lines.setdefault(server, collections.deque(maxlen=TAIL_LINES)).append(text)

    def clear(self, server: str) -> None:
        with self._lines_lock:
            self._lines.pop(server, None)

    def tail(self, server: str) -> list[str]:
        with self._lines_lock:
            return list(self._lines.get(server, ()))


class McpServers:
    """The MCP servers of `path` as the user changes them. `secrets` and `manager` are read
    on each use (the keyring may be replaced; the manager exists only once something built
    it); `build_manager` builds it (Connect)."""

    def __init__(
        self,
        path: Path,
        *,
        secrets: Callable[[], Secrets],
        manager: Callable[[], McpManager | None],
        build_manager: Callable[[], McpManager],
    ) -> None:
        self.path = path
        self._secrets = secrets
        self._manager = manager
        self._build_manager = build_manager
        self._tail: OutputTail | None = None
        self._tail_lock = threading.Lock()
        self._saved_level: int | None = None
        self._listeners: list[Listener] = []
        self._relaying: McpManager | None = None

    # ---- reading ----------------------------------------------------------------------

    @property
    def manager_running(self) -> bool:
        return self._manager() is not None

    def read(self) -> Listing:
        """mcp.json and the servers' states (blocking: a file, maybe the manager)."""
        try:
            servers, error = read_servers_block(self.path), ""
        except McpConfigError as exc:
            servers, error = {}, str(exc)
        manager = self._running()
        if manager is not None:
            return Listing(servers, error, manager.states())
        # no manager yet: bad entries still show why they cannot be used
        checked = parse_servers(servers)
        bad = dict.fromkeys(p.name for p in checked.problems)
        states = [ServerState.invalid(n, checked.problems_of(n)) for n in bad]
        return Listing(servers, error, states)

    # ---- changes ----------------------------------------------------------------------

    def save(
        self,
        name: str,
        entry: dict[str, Any],
        *,
        original: str | None = None,
        token: str | None = None,
        keep_token: bool = False,
    ) -> Saved:
        """Add `name` (or replace `original`, renaming it) with `entry`, whose secrets may
        still be literal: they go to the keyring first (a new access `token` too; with
        `keep_token` the one stored for `original` stays). A renamed server's secrets move
        to keys of its new name. Fields the form does not show are kept from the saved
        entry. Raises EntryError for a taken name, an invalid entry or a secret the
        keyring refuses; then mcp.json and the secrets it refers to are as they were, and
        what this save stored is deleted again."""
        servers = read_servers_block(self.path)
        if name != original and name in servers:
            raise EntryError(
                [EntryProblem(name, "name", "another server already has this name; choose another")]
            )
        twin = case_twin(name, {k: v for k, v in servers.items() if k != original})
        if twin is not None:
            raise EntryError([EntryProblem(name, "name", case_twin_detail(twin))])
        entry = json.loads(json.dumps(entry))
        before = original or name
        raw_old = servers.get(before, {})
        old: dict[str, Any] = raw_old if isinstance(raw_old, dict) else {}
        dropped = _keep_hidden_fields(name, entry, old)
        headers = entry.get("headers") or {}
        if keep_token and token is None and "Authorization" not in headers:
            stored = _stored_token_ref(old) or KEYRING_PREFIX + keyring_key(before, "oauth_token")
            entry.setdefault("headers", {})["Authorization"] = stored
        others = {k: v for k, v in servers.items() if k != before}
        # nothing mcp.json refers to now is overwritten: a refused save changes nothing
        taken = frozenset(secret_refs(others)) | frozenset(secret_refs(old))
        moves = rehome_refs(entry, before, name, taken) if before != name else {}
        validate(name, entry)
        servers = {(name if k == before else k): v for k, v in servers.items()}
        written: list[str] = []
        secrets = self._secrets()

        def store(key: str, value: str) -> None:
            secrets.set(key, value)
            written.append(key)

        try:
            self._copy_secrets(name, moves, store)
            move_secrets(name, entry, store, token=token, taken=taken)
            servers[name] = entry
            write_servers_block(self.path, servers)
        except BaseException:
            for key in written:
                self._delete(key)
            raise
        self._forget_unreferenced(old, servers, before)
        if before != name:
            self._forget_sign_in(before)
        self._reconcile(servers, {name, before})
        return Saved(servers, dropped)

    def _copy_secrets(
        self, name: str, moves: dict[str, str], store: Callable[[str, str], None]
    ) -> None:
        """A rename: each secret stored under its old key is stored under its new one."""
        for old_key, new_key in moves.items():
            try:
                value = self._secrets().get(old_key)
                if value is not None:
                    store(new_key, value)
            except Exception as exc:
                detail = f"could not move its secrets to the new name: {exc}; nothing was written"
                raise EntryError([EntryProblem(name, "name", detail)]) from None

    def set_enabled(self, name: str, enabled: bool) -> dict[str, dict[str, Any]]:
        servers = read_servers_block(self.path)
        if name not in servers:
            raise McpConfigError(f"there is no MCP server {name!r} in {self.path}")
        entry = dict(servers[name])
        if enabled:
            entry.pop("disabled", None)
        else:
            entry["disabled"] = True
        servers[name] = entry
        write_servers_block(self.path, servers)
        self._reconcile(servers, {name})
        return servers

    def remove(self, name: str) -> dict[str, dict[str, Any]]:
        """Remove `name` from mcp.json, stop it, and delete its keyring entries (those no
        other server refers to) and its sign-in."""
        servers = read_servers_block(self.path)
        old = servers.pop(name, None)
        write_servers_block(self.path, servers)
        self._reconcile(servers, {name})
        self._forget_unreferenced(old, servers, name)
        self._forget_sign_in(name)
        return servers

    def import_file(self, source: Path | None = None, *, overwrite: bool = False) -> ImportReport:
        """Import the mcpServers of `source` (None: Claude Desktop's config here)."""
        source = source or claude_desktop_config_path()
        if not source.exists():
            raise McpConfigError(f"{source} does not exist")
        return self.import_servers(read_servers_block(source), source, overwrite=overwrite)

    def import_text(self, text: str) -> ImportReport:
        """Import pasted JSON (`servers_from_text`); it never goes to disk before its
        secrets move. Raises ValueError (not JSON of servers) or EntryError (none usable)."""
        return self.import_servers(servers_from_text(text), Path("pasted text"))

    def import_servers(
        self, incoming: dict[str, Any], source: Path, *, overwrite: bool = False
    ) -> ImportReport:
        """Merge `incoming` into mcp.json (existing names kept unless `overwrite`). An
        entry that refers to the keyring is not imported (`import_block`)."""
        before = read_servers_block(self.path)
        secrets = self._secrets()
        report = import_block(
            self.path,
            incoming,
            source,
            set_secret=secrets.set,
            delete_secret=secrets.delete,
            overwrite=overwrite,
        )
        if report.added:
            servers = read_servers_block(self.path)
            for name in report.added:
                if name in before:
                    self._forget_unreferenced(before[name], servers, name)
            self._reconcile(servers, set(report.added))
        return report

    # ---- the manager --------------------------------------------------------------------

    def connect(self, wait: float) -> list[ServerState]:
        """Start every enabled server not running yet (building the manager); wait up to
        `wait` s for each. The states then."""
        manager = self._build_manager()
        self._relay(manager)
        manager.reload_config()
        return manager.start(wait)

    def restart(self, name: str) -> ServerState | None:
        """Start `name` again as configured (None: not configured, or no manager)."""
        manager = self._running()
        if manager is None:
            return None
        self.clear_output(name)
        return manager.reload(name)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """`listener` gets each server's state as it changes (on the MCP thread), from now
        on if the manager exists, else from when it is built here. Returns the unsubscribe."""
        self._listeners.append(listener)
        self._running()

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _running(self) -> McpManager | None:
        """The manager if it exists (its states relayed to the listeners from now on)."""
        manager = self._manager()
        if manager is not None:
            self._relay(manager)
        return manager

    def _relay(self, manager: McpManager) -> None:
        if self._relaying is manager:
            return
        self._relaying = manager
        manager.subscribe(self._notify)

    def _notify(self, state: ServerState) -> None:
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception as exc:  # one gone view never stops the others
                log.warning("an MCP state listener failed: %s", exc)

    def _reconcile(self, servers: dict[str, Any], changed: set[str]) -> None:
        """Make a running manager read mcp.json again: a changed server restarts as now
        configured (so a saved one connects), a disabled one stops, a removed one is
        forgotten (its tools leave the registry); the others keep running."""
        for name in changed:
            self.clear_output(name)
        manager = self._running()
        if manager is None:
            return
        known = {state.name for state in manager.states()} | changed
        for name in sorted(known):
            try:
                if name not in servers:
                    manager.remove(name)
                elif name in changed or servers[name].get("disabled"):
                    manager.reload(name)
            except Exception as exc:
                log.warning("reloading MCP server %s: %s", name, exc)
        manager.reload_config()

    # ---- sign-in ------------------------------------------------------------------------

    def signed_in(self, name: str, url: str | None) -> bool:
        """Whether `name` has a stored sign-in (for its `url`)."""
        manager = self._manager()
        if manager is not None:
            return bool(manager.signed_in(name))
        return has_sign_in(name, url, self._secret_access())

    def sign_in(self, name: str, timeout: float) -> ServerState | None:
        """Sign in through the browser and connect (blocks until the user is done)."""
        manager = self._running()
        if manager is None:
            return None
        return manager.sign_in(name, timeout)

    def sign_out(self, name: str) -> ServerState | None:
        """Forget `name`'s sign-in; a running manager reconnects it (the state after)."""
        manager = self._running()
        if manager is not None:
            return manager.sign_out(name)
        forget_sign_in(name, self._secret_access())
        return None

    def _secret_access(self) -> SecretAccess:
        secrets = self._secrets()
        return SecretAccess(get=secrets.get, set=secrets.set, delete=secrets.delete)

    # ---- the keyring ------------------------------------------------------------------

    def _forget_unreferenced(self, entry: Any, servers: dict[str, Any], name: str) -> None:
        """Delete the keyring entries of server `name` that its old `entry` referred to and
        no server does now. Only its own: a (hand-written) reference to another server's
        secret, or to anything else, never deletes it."""
        if not entry:
            return
        still = set(secret_refs(servers))
        for ref in dict.fromkeys(secret_refs(entry)):
            if is_own_ref(name, ref) and ref not in still:
                self._delete(ref)

    def _forget_sign_in(self, name: str) -> None:
        self._delete(token_key(name))

    def _delete(self, key: str) -> None:
        try:
            self._secrets().delete(key)
        except Exception as exc:
            log.warning("could not delete %s from the keyring: %s", key, exc)

    # ---- the servers' output --------------------------------------------------------------

    def output(self, name: str) -> list[str]:
        """The last lines `name` logged since this service watches (masked, visible)."""
        return self._output_tail().tail(name)

    def recent_output(self, name: str) -> list[str]:
        """The last lines of `name`'s newest start that wrote any (blocking, briefly)."""
        from app.core.mcp import stderr

        return stderr.recent(name)

    def clear_output(self, name: str) -> None:
        if self._tail is not None:
            self._tail.clear(name)

    def _output_tail(self) -> OutputTail:
        with self._tail_lock:
            if self._tail is None:
                self._tail = OutputTail()
                logger = logging.getLogger(OUTPUT_LOGGER)
                logger.addHandler(self._tail)
                if logger.getEffectiveLevel() > logging.INFO:
                    self._saved_level = logger.level
                    logger.setLevel(logging.INFO)
            return self._tail

    def close(self) -> None:
        """Stop watching the servers' output (the log handler goes) and drop listeners."""
        with self._tail_lock:
            if self._tail is not None:
                logger = logging.getLogger(OUTPUT_LOGGER)
                logger.removeHandler(self._tail)
                if self._saved_level is not None:
                    logger.setLevel(self._saved_level)
                    self._saved_level = None
                self._tail = None
        self._listeners.clear()


def _keep_hidden_fields(name: str, entry: dict[str, Any], old: dict[str, Any]) -> list[str]:
    """Copy the fields the form does not show from the saved entry `old` into `entry`; one
    that is invalid is left out (the form could not fix it). Returns those left out."""
    for key in HIDDEN_FIELDS:
        if key in old:
            entry[key] = old[key]
    found = check_entry(name, entry)
    if isinstance(found, ServerConfig):
        return []
    bad = [key for key in HIDDEN_FIELDS if any(p.field == key for p in found)]
    for key in bad:
        entry.pop(key, None)
    return bad
