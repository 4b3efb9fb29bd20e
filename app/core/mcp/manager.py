"""`McpManager`: one asyncio loop on a dedicated thread owning every server connection.

Tool bodies run on the runner's pool threads; they submit coroutines to this loop with
`asyncio.run_coroutine_threadsafe` and wait, polling `ctx.cancel_event` — cancelling the
future cancels the SDK request, which sends `notifications/cancelled` to the server.

Servers start in parallel and never wait for one another. Whenever a server's tools change
(it became ready, reconnected, sent `notifications/tools/list_changed`, was reloaded or
removed) the manager builds that server's manifests and `ToolSource` again and tells the
`subscribe_tools` listeners — on the MCP thread; the runtime puts them in its registry.
A call to a server that is not ready waits at most `ready_wait` s (and never longer than
the server's own timeout), then fails saying so.

Public API: `configs`, `start`, `start_soon`, `wait_settled`, `reload`, `remove`,
`states`, `status`, `failed_servers`, `tools`, `server_tools`, `server_manifests`, `tool_sources`,
`subscribe`, `subscribe_tools`, `call_tool`, `resources`, `read_resource`, `prompts`,
`get_prompt`, `missing_tool_hint`, `shutdown`, and for what
servers ask of the client: `set_roots` (the folders advertised as roots) and
`set_elicitation_handler` (who answers `elicitation/create`; by default it is declined);
`sign_in`, `sign_out`, `signed_in` for remote servers that need OAuth.
Every tool call carries a progress token; progress reaches `ctx.progress`.

Importing this module is cheap; the SDK loads on the MCP thread when a server first starts.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import logging
import threading
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from app.core.mcp.cached import entry_hashes, offer_of
from app.core.mcp.catalog import (
    PromptEntry,
    PromptMessage,
    ResourceEntry,
    prompt_entries,
    prompt_messages,
    resource_entries,
)
from app.core.mcp.client_callbacks import file_roots, progress_reporter
from app.core.mcp.config import (
    EntryProblem,
    McpConfigError,
    SecretGetter,
    ServerConfig,
    parse_servers,
    read_servers_block,
)
from app.core.mcp.elicitation import ElicitationHandler, decline_all
from app.core.mcp.manifests import ServerTools, build_manifests, category, slug
from app.core.mcp.status import ServerState, Status
from tools.registry import ToolSource
from tools.spec import Operation, ToolCancelled, ToolContext, ToolError, ToolManifest, ToolResult

if TYPE_CHECKING:
    from app.core.mcp.connection import ServerConnection
    from app.core.mcp.secret_access import SecretAccess

log = logging.getLogger(__name__)

POLL = 0.05
#: How long `sign_in` waits for the user to finish in the browser.
SIGN_IN_WAIT = 300.0
#: The longest a tool call waits for its server to be ready (capped by the server's timeout).
READY_WAIT = 20.0
Listener = Callable[[ServerState], None]


#: Called on the MCP thread with a server's name and its tools now (None: it has none any
#: more — removed, stopped or reloaded).
ToolsListener = Callable[[str, "ServerTools | None"], None]


class ReadResourceArgs(BaseModel):
    uri: str = Field(description="The resource URI, as listed by the server")


class McpManager:
    def __init__(
        self,
        config_path: Path,
        *,
        home: Path,
        get_secret: SecretGetter = lambda key: None,
        backoff_start: float = 0.5,
        remember_secret: Callable[[str], None] = lambda value: None,
        ready_wait: float = READY_WAIT,
        roots: Iterable[str | Path] = (),
        open_url: Callable[[str], object] | None = None,
        secrets: SecretAccess | None = None,
    ) -> None:
        self.config_path = config_path
        self._remember_secret = remember_secret
        self.home = home
        self._get_secret = get_secret
        self._backoff_start = backoff_start
        self.ready_wait = ready_wait
        self._configs: list[ServerConfig] = []
        self._loaded = False
        self._config_lock = threading.RLock()
        self.config_error: str | None = None
        #: Entries of mcp.json that cannot be used, each with its name and field.
        self.config_problems: list[EntryProblem] = []
        self._names: list[str] = []
        #: Each server's raw mcp.json entry, as read last, as the cache keys it
        #: (app.core.mcp.cached.entry_hashes).
        self._entry_hashes: dict[str, str] = {}
        self._connections: dict[str, ServerConnection] = {}
        self._listeners: list[Listener] = []
        self._tool_listeners: list[ToolsListener] = []
        self._tools: dict[str, ServerTools] = {}
        self._tools_lock = threading.Lock()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._roots = file_roots(roots)
        self._elicitation: ElicitationHandler = decline_all
        self._open_url = open_url
        #: Where OAuth sign-ins are kept (None: remote servers cannot sign in).
        self.secrets = secrets

    # ---- what servers ask of the client -------------------------------------------------

    def set_roots(self, paths: Iterable[str | Path]) -> None:
        """The folders the user allowed changed: advertise these as roots from now on and
        send `notifications/roots/list_changed` to each running server. Returns at once."""
        roots = file_roots(paths)
        if roots == self._roots:
            return
        self._roots = roots
        with self._lock:
            running = self._loop is not None and not self._closed
        if running:
            self.submit(self._roots_changed())

    def roots(self) -> list[tuple[str, str]]:
        """(file:// URI, name) of each folder advertised as a root."""
        return list(self._roots)

    async def _roots_changed(self) -> None:
        conns = list(self._connections.values())
        await asyncio.gather(*(c.roots_changed() for c in conns), return_exceptions=True)

    def set_elicitation_handler(self, handler: ElicitationHandler | None) -> None:
        """Who answers a server's `elicitation/create` (None: decline every request). It
        runs on a worker thread and may block until the user answers; see
        app/core/mcp/elicitation.py for the request and answer it takes and gives."""
        self._elicitation = handler or decline_all

    def _hooks(self) -> Any:
        from app.core.mcp.connection import ClientHooks

        return ClientHooks(
            elicitation=lambda: self._elicitation,
            roots=lambda: list(self._roots),
            open_url=self._open_page,
            secrets=self.secrets,
        )

    def _open_page(self, url: str) -> object:
        opener = self._open_url if self._open_url is not None else _open_in_browser
        return opener(url)

    # ---- signing in (OAuth) -------------------------------------------------------------

    def set_url_opener(self, open_url: Callable[[str], object]) -> None:
        """Who opens web pages for servers (sign-in, URL elicitation after the user agreed);
        connections made from now on use it. Default: the system browser."""
        self._open_url = open_url

    def sign_in(self, name: str, timeout: float = SIGN_IN_WAIT) -> ServerState | None:
        """Blocking: sign in to the remote server `name` — the system browser opens the
        server's sign-in page and the answer comes back to a loopback address — then
        connect. Starts the server if needed. The state after (None: not configured)."""
        cfg = self.config(name)
        if cfg is None or cfg.disabled:
            return self.status(name)
        if name not in self._connections:
            self.submit(self._start([cfg], 0.0)).result()
        conn = self._connections[name]
        future = self.submit(conn.sign_in(timeout))
        state: ServerState | None = future.result(timeout + 30.0)
        return state

    def sign_out(self, name: str) -> ServerState | None:
        """Blocking: forget `name`'s tokens and registration, and reconnect (it will need
        a new sign-in if the server asks for one)."""
        from app.core.mcp.secret_access import forget_sign_in

        if self.secrets is not None:
            forget_sign_in(name, self.secrets)
        return self.reload(name)

    def signed_in(self, name: str) -> bool:
        """Blocking (keyring): whether `name` has a stored sign-in."""
        from app.core.mcp.secret_access import has_sign_in

        cfg = self.config(name)
        if self.secrets is None or cfg is None:
            return False
        return has_sign_in(name, cfg.url, self.secrets)

    # ---- configuration and state ------------------------------------------------------

    def configs(self) -> list[ServerConfig]:
        """The usable servers of mcp.json; each bad entry is in `config_problems` and the
        others run (one bad entry never disables the rest). Any thread: `ask` starts the
        servers on one while a runner thread may already call a cached tool."""
        with self._config_lock:
            if not self._loaded:
                self._load_config()
                self._loaded = True  # only once everything above is in place
            return list(self._configs)

    def _load_config(self) -> None:
        try:
            block = read_servers_block(self.config_path)
            loaded = parse_servers(block)
        except McpConfigError as exc:
            self.config_error = str(exc)
            log.warning("mcp.json: %s", exc)
            return
        self._configs = loaded.servers
        self.config_problems = loaded.problems
        self._names = loaded.names
        self._entry_hashes = entry_hashes(self.home, block) if block else {}
        for problem in loaded.problems:
            log.warning("mcp.json: %s", problem.message)
        for config in self._configs:  # literal tokens in mcp.json: keep them out of logs
            for value in config.credential_values():
                self._remember_secret(value)

    def reload_config(self) -> list[ServerConfig]:
        """Read mcp.json again (running servers keep running; see `reload`)."""
        with self._config_lock:
            self._configs = []
            self._loaded = False
            self.config_error = None
            self.config_problems = []
            self._names = []
            return self.configs()

    def config(self, name: str) -> ServerConfig | None:
        return next((c for c in self.configs() if c.name == name), None)

    def subscribe(self, listener: Listener) -> None:
        """Called (on the MCP thread) with a copy of a server's state whenever it changes."""
        self._listeners.append(listener)

    def subscribe_tools(self, listener: ToolsListener) -> None:
        """Called (on the MCP thread) whenever a server's tools change; see `ToolsListener`."""
        self._tool_listeners.append(listener)

    def _notify(self, state: ServerState) -> None:
        if state.status is Status.STOPPED and state.name not in self._connections:
            self._drop_tools(state.name)  # stopped and forgotten: its tools go too
        for listener in list(self._listeners):
            listener(state)

    def states(self) -> list[ServerState]:
        """Every entry of mcp.json in file order: bad entries as INVALID with their problems;
        a server that failed shows the last lines it wrote to stderr."""
        from app.core.mcp import stderr

        by_name: dict[str, ServerState] = {}
        for cfg in self.configs():
            conn = self._connections.get(cfg.name)
            if conn is not None:
                state = conn.state.copy()
                if state.status in (Status.FAILED, Status.RESTARTING) or state.error:
                    state.stderr = stderr.recent(cfg.name, settle=0)
            else:
                status = Status.DISABLED if cfg.disabled else Status.STOPPED
                state = ServerState(cfg.name, cfg.transport, status)
            by_name[cfg.name] = state
        for name in {p.name for p in self.config_problems}:
            by_name[name] = ServerState.invalid(
                name, [p for p in self.config_problems if p.name == name]
            )
        order = self._names or list(by_name)
        return [by_name[n] for n in order if n in by_name]

    def status(self, name: str) -> ServerState | None:
        """One server's state (None when mcp.json has no such server)."""
        return next((s for s in self.states() if s.name == name), None)

    def failed_servers(self) -> set[str]:
        """The servers that failed to start in this process: their first attempt ended
        without a tool listing (it failed, or the server waits for a sign-in) and none came
        since. Their cached tools (app/core/mcp/cached.py) must not be offered again until
        they list (or are reloaded). Any thread."""
        return {
            name
            for name, conn in list(self._connections.items())
            if conn.settled and not conn.listed
        }

    def not_ready_text(self, name: str) -> str | None:
        """Why `name`'s tools cannot be called now, in plain words (None: they can)."""
        conn = self._connections.get(name)
        if conn is None:
            state = self.status(name)
            if state is None:
                return f"no MCP server {name!r} is configured in {self.config_path}"
            return f"the MCP server {name!r} is {state.status.value}"
        return None if conn.ready else conn.not_ready_text()

    def missing_tool_hint(self, name: str) -> str | None:
        """Why an `mcp__<server>__…` tool is not there (its server failed, or no such server)."""
        from app.core.mcp.manifests import server_slug_of

        wanted = server_slug_of(name)
        if wanted is None:
            return None
        for problem in self.config_problems:
            if slug(problem.name, camel=False) == wanted:
                return "; ".join(p.message for p in self.config_problems if p.name == problem.name)
        for state in self.states():
            if slug(state.name, camel=False) == wanted:
                if state.status is Status.READY:
                    tools = ", ".join(state.tools) or "none"
                    return f"the MCP server {state.name!r} has no such tool (its tools: {tools})"
                conn = self._connections.get(state.name)
                if conn is not None:
                    return conn.not_ready_text()
                why = f": {state.error}" if state.error else ""
                return f"the MCP server {state.name!r} is {state.status.value}{why}"
        return f"no MCP server {wanted!r} is configured in {self.config_path}"

    def servers_for(self, tool: str) -> list[str]:
        """The configured servers an `mcp__<server>__…` name can belong to."""
        from app.core.mcp.manifests import server_slug_of

        wanted = server_slug_of(tool)
        return [c.name for c in self.configs() if slug(c.name, camel=False) == wanted]

    # ---- the loop -----------------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closed:
                raise ToolError("MCP servers are shut down")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=_run_loop, args=(loop,), name="deskhand-mcp", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
                atexit.register(self.shutdown)  # quitting ends every server process tree
            return self._loop

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())

    def enabled(self) -> list[ServerConfig]:
        return [c for c in self.configs() if not c.disabled]

    def start(self, wait: float = 0.0) -> list[ServerState]:
        """Start every enabled server, all at once (idempotent); wait up to `wait` seconds
        for each to be ready or to have failed once."""
        configs = self.enabled()
        if configs:
            self.submit(self._start(configs, wait)).result()
        return self.states()

    def start_soon(self) -> bool:
        """Start every enabled server without waiting for anything (not even the SDK import,
        which happens on the MCP thread). False when there is nothing to start."""
        configs = self.enabled()
        if configs:
            self.submit(self._start(configs, 0.0))
        return bool(configs)

    def wait_settled(self, timeout: float, names: Iterable[str] | None = None) -> list[ServerState]:
        """Block until each server (or each of `names`) is ready or has failed once, at most
        `timeout` s counted from when the servers were launched; the states then."""
        wanted = list(names) if names is not None else [c.name for c in self.enabled()]
        if wanted and not self._closed:
            future = self.submit(self._wait_settled(wanted, timeout))
            try:  # the SDK import may come first on the loop; never hang on it
                future.result(timeout + 30.0)
            except concurrent.futures.TimeoutError:
                future.cancel()
        return self.states()

    async def _wait_settled(self, names: list[str], timeout: float) -> None:
        conns = [c for c in (self._connections.get(n) for n in names) if c is not None]
        if conns:
            await asyncio.gather(*(c.wait_ready(timeout) for c in conns))

    async def _start(self, configs: list[ServerConfig], wait: float) -> None:
        from app.core.mcp.connection import ServerConnection

        for cfg in configs:
            if cfg.name not in self._connections:
                conn = ServerConnection(
                    cfg,
                    get_secret=self._get_secret,
                    on_change=self._notify,
                    on_tools=self._publish,
                    backoff_start=self._backoff_start,
                    hooks=self._hooks(),
                )
                self._connections[cfg.name] = conn
                conn.start()
        if wait > 0:
            await self._wait_settled([c.name for c in configs], wait)

    def reload(self, name: str, wait: float = 0.0) -> ServerState | None:
        """`name`'s entry in mcp.json changed (or went away): read mcp.json again, stop the
        server (its tools leave the registry) and start it as now configured, unless it is
        gone or disabled. Other servers keep running. The state after (None: not configured)."""
        self.reload_config()
        self.submit(self._stop_one(name)).result()
        cfg = self.config(name)
        if cfg is not None and not cfg.disabled:
            self.submit(self._start([cfg], wait)).result()
        return self.status(name)

    def remove(self, name: str) -> None:
        """Stop `name` and forget it (its tools leave the registry); mcp.json is read again,
        so remove its entry there first."""
        if self._loop is not None and not self._closed:
            self.submit(self._stop_one(name)).result()
        self.reload_config()

    async def _stop_one(self, name: str) -> None:
        conn = self._connections.pop(name, None)
        if conn is not None:
            await conn.stop()
        self._drop_tools(name)

    def shutdown(self, timeout: float = 15.0) -> None:
        """Stop every server (ending each stdio server's process tree) and the loop."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._stop_all(), loop)
        try:
            future.result(timeout)
        except Exception as exc:
            log.warning("MCP servers did not all stop cleanly: %s", exc)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        atexit.unregister(self.shutdown)

    async def _stop_all(self) -> None:
        conns = list(self._connections.values())
        await asyncio.gather(*(c.stop() for c in conns), return_exceptions=True)

    # ---- tools --------------------------------------------------------------------------

    def _publish(self, conn: ServerConnection) -> None:
        """(MCP thread) `conn` has a new listing: build its tools and tell the listeners."""
        name = conn.config.name
        if self._connections.get(name) is not conn:
            return  # replaced or removed meanwhile
        tools, offers = self._build_tools(conn)
        with self._tools_lock:
            self._tools[name] = tools
        self._tell(name, tools)
        from app.core.mcp.known_tools import remember

        entry = self._entry_hashes.get(name, "")
        remember(
            self.home, name, tools.source.fingerprint, tools.manifests, entry=entry, offers=offers
        )

    def _drop_tools(self, name: str) -> None:
        with self._tools_lock:
            had = self._tools.pop(name, None)
        if had is not None:
            self._tell(name, None)

    def _tell(self, name: str, tools: ServerTools | None) -> None:
        for listener in list(self._tool_listeners):
            try:
                listener(name, tools)
            except Exception:  # a listener must not break the MCP thread
                log.exception("MCP tools listener failed for %s", name)

    def _build_tools(self, conn: ServerConnection) -> tuple[ServerTools, list[dict[str, Any]]]:
        """The server's tools now, and what the cache keeps of them to offer next time."""
        from app.core.sources import mcp_tool_fingerprint

        name = conn.config.name
        found, names = build_manifests(
            name,
            conn.listing.tools,
            functools.partial(self._tool_impl, name),
            timeout=conn.config.timeout,
        )
        definitions = {t.name: mcp_tool_fingerprint(t) for t in conn.listing.tools}
        tools = {m.name: definitions.get(names.get(m.name, ""), "") for m in found}
        offers = [
            offer for m in found if (offer := offer_of(m, names[m.name], tools[m.name])) is not None
        ]
        reader = self._resource_manifest(name) if conn.listing.resources else None
        if reader is not None and reader.name not in {m.name for m in found}:
            found.append(reader)
            tools[reader.name] = "resources"
        config = conn.config
        source = ToolSource(
            "mcp",
            f"mcp:{name}",
            fingerprint=config.fingerprint(),
            origin=f"the MCP server {name!r} in mcp.json",
            tools=tools,
        )
        return ServerTools(name, found, source), offers

    def last_known_tools(self, name: str) -> list[Any] | None:
        """`name`'s tools as it listed them last time (app.core.mcp.known_tools), if its
        mcp.json entry is unchanged since; for listings while it is still starting."""
        from app.core.mcp.known_tools import last_known

        cfg = self.config(name)
        if cfg is None:
            return None
        return last_known(self.home, name, cfg.fingerprint())

    def server_tools(self) -> dict[str, ServerTools]:
        """Every server's tools now (servers that were ready at least once)."""
        with self._tools_lock:
            return dict(self._tools)

    def tools(self, name: str) -> list[ToolManifest]:
        """One server's manifests now (empty when it never was ready)."""
        with self._tools_lock:
            found = self._tools.get(name)
        return list(found.manifests) if found is not None else []

    def tool_manifests(self, wait: float = 30.0) -> list[ToolManifest]:
        """Start the servers (if needed), wait up to `wait` s for each, and return the tools
        of every server that is (or was) ready."""
        self.start(wait)
        return [m for tools in self.server_tools().values() for m in tools.manifests]

    def server_manifests(self) -> dict[str, list[ToolManifest]]:
        """Each server's own manifests (built from its own connection); names of two servers
        may collide, so never match by name."""
        return {name: list(t.manifests) for name, t in self.server_tools().items()}

    def tool_sources(self) -> dict[str, ToolSource]:
        """Each server as a tool source (identity + each tool's definition hash)."""
        return {name: t.source for name, t in self.server_tools().items()}

    # ---- resources and prompts (attachments and slash commands) -------------------------

    def resources(self) -> list[ResourceEntry]:
        """Every ready server's resources, for attaching to a message."""
        out: list[ResourceEntry] = []
        for name, conn in list(self._connections.items()):
            if conn.listed:
                out += resource_entries(name, list(conn.listing.resources))
        return out

    def prompts(self) -> list[PromptEntry]:
        """Every ready server's prompts, offered as slash commands."""
        out: list[PromptEntry] = []
        for name, conn in list(self._connections.items()):
            if conn.listed:
                out += prompt_entries(name, list(conn.listing.prompts))
        return out

    def read_resource(self, server: str, uri: str, ctx: ToolContext) -> ToolResult:
        """Blocking: read one resource (text inline, binary saved as an attachment file)."""
        return self._read_resource(server, uri, ctx)

    def get_prompt(
        self, server: str, name: str, arguments: dict[str, str], ctx: ToolContext
    ) -> list[PromptMessage]:
        """Blocking: the messages of `server`'s prompt `name` filled with `arguments`."""
        conn = self._connection(server)
        wait = min(self.ready_wait, conn.config.timeout)
        return prompt_messages(self._wait(conn.get_prompt(name, arguments, wait), ctx))

    def _resource_manifest(self, server: str) -> ToolManifest:
        uris = ", ".join(str(r.uri) for r in self._connections[server].listing.resources[:10])
        return ToolManifest(
            name=f"mcp__{slug(server, camel=False)}__read_resource",
            category=category(server),
            description=(
                f"Read a resource of the MCP server {server!r} by URI. Listed resources: {uris}"
            ),
            params=ReadResourceArgs,
            operations=frozenset({Operation.READ}),
            impl=lambda args, ctx: self._read_resource(server, args.uri, ctx),
        )

    def _tool_impl(self, server: str, tool: str) -> Callable[[Any, ToolContext], ToolResult]:
        def run(args: Any, ctx: ToolContext) -> ToolResult:
            return self.call_tool(server, tool, args.arguments(), ctx)

        return run

    def call_cached_tool(
        self,
        server: str,
        tool: str,
        definition: str,
        fingerprint: str,
        arguments: dict[str, Any],
        ctx: ToolContext,
    ) -> ToolResult:
        """Blocking: a tool offered from `server`'s cached listing (app/core/mcp/cached.py)
        was called. Start the server if it is not, wait for it (at most `ready_wait` s, never
        past its timeout), and call the tool only if the server still has it exactly as
        cached (the trust check was made for that definition), on a server started from
        the entry the tool was offered under (`fingerprint`: mcp.json may have changed)."""
        from app.core.mcp.connection import ServerUnavailable
        from app.core.sources import mcp_tool_fingerprint

        cfg = self.config(server)
        if cfg is None or cfg.disabled:
            raise ToolError(self.not_ready_text(server) or f"{server!r} is not configured")
        if server not in self._connections:
            self.submit(self._start([cfg], 0.0)).result()
        conn = self._connection(server)
        if fingerprint != conn.config.fingerprint():
            raise ToolError(
                f"the MCP server {server!r} is not the one this tool was offered from (its "
                "entry in mcp.json changed), so it was not called; ask again"
            )
        try:
            self._wait(conn.ready_session(min(self.ready_wait, cfg.timeout)), ctx)
        except ToolError as exc:  # not ready in time, or failed
            raise ToolError(str(exc)) from None
        except ServerUnavailable as exc:  # pragma: no cover - _wait turns it into ToolError
            raise ToolError(str(exc)) from None
        live = next((t for t in conn.listing.tools if t.name == tool), None)
        if live is None:
            names = ", ".join(t.name for t in conn.listing.tools) or "none"
            raise ToolError(
                f"the MCP server {server!r} no longer has the tool {tool!r} (its tools now: "
                f"{names}); ask again to use one of those"
            )
        if mcp_tool_fingerprint(live) != definition:
            raise ToolError(
                f"the MCP server {server!r} changed the tool {tool!r} since it last listed it, "
                "so it was not called; ask again to use its new definition"
            )
        return self.call_tool(server, tool, arguments, ctx)

    def _connection(self, server: str) -> ServerConnection:
        conn = self._connections.get(server)
        if conn is None:
            raise ToolError(f"the MCP server {server!r} is not running")
        return conn

    def call_tool(
        self, server: str, tool: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> ToolResult:
        """Blocking: call `tool` on `server`, cancelling it if `ctx` is cancelled."""
        from app.core.mcp.results import convert

        conn = self._connection(server)
        timeout = conn.config.timeout
        call = conn.call_tool(
            tool,
            arguments,
            timeout,
            self.ready_wait,
            progress=progress_reporter(ctx.progress),
            call_id=ctx.call_id,
        )
        result = self._wait(call, ctx)
        return convert(result, self.home, label=f"mcp-{slug(server, camel=False)}")

    def _read_resource(self, server: str, uri: str, ctx: ToolContext) -> ToolResult:
        from app.core.mcp.results import convert_resource

        conn = self._connection(server)
        result = self._wait(conn.read_resource(uri, min(self.ready_wait, conn.config.timeout)), ctx)
        return convert_resource(result, self.home, label=f"mcp-{slug(server, camel=False)}")

    def _wait(self, coro: Coroutine[Any, Any, Any], ctx: ToolContext) -> Any:
        from app.core.mcp.connection import ServerUnavailable

        future = self.submit(coro)
        while True:
            try:
                return future.result(timeout=POLL)
            except concurrent.futures.TimeoutError:
                if ctx.cancel_event.is_set():
                    future.cancel()  # cancels the request: the SDK sends notifications/cancelled
                    raise ToolCancelled("cancelled") from None
            except concurrent.futures.CancelledError:
                raise ToolCancelled("cancelled") from None
            except ServerUnavailable as exc:
                raise ToolError(str(exc)) from None
            except ToolError:
                raise
            except Exception as exc:
                raise ToolError(_mcp_error_text(exc)) from None


def _open_in_browser(url: str) -> object:
    import webbrowser

    return webbrowser.open(url)


def _mcp_error_text(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return f"the MCP server answered with an error: {message}"


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        try:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
