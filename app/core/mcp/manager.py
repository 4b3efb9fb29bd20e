"""`McpManager`: one asyncio loop on a dedicated thread owning every server connection.

Tool bodies run on the runner's pool threads; they submit coroutines to this loop with
`asyncio.run_coroutine_threadsafe` and wait, polling `ctx.cancel_event` — cancelling the
future cancels the SDK request, which sends `notifications/cancelled` to the server.

Importing this module is cheap; the SDK loads when `start()` first runs.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from app.core.mcp.config import McpConfigError, SecretGetter, ServerConfig, load_config
from app.core.mcp.manifests import build_manifests, category, slug
from app.core.mcp.status import ServerState, Status
from tools.registry import ToolSource
from tools.spec import Operation, ToolCancelled, ToolContext, ToolError, ToolManifest, ToolResult

if TYPE_CHECKING:
    from app.core.mcp.connection import ServerConnection

log = logging.getLogger(__name__)

POLL = 0.05
Listener = Callable[[ServerState], None]


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
    ) -> None:
        self.config_path = config_path
        self._remember_secret = remember_secret
        self.home = home
        self._get_secret = get_secret
        self._backoff_start = backoff_start
        self._configs: list[ServerConfig] = []
        self.config_error: str | None = None
        self._connections: dict[str, ServerConnection] = {}
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    # ---- configuration and state ------------------------------------------------------

    def configs(self) -> list[ServerConfig]:
        if not self._configs and self.config_error is None:
            try:
                self._configs = load_config(self.config_path)
                for config in self._configs:  # literal tokens in mcp.json: keep them out of logs
                    for value in config.credential_values():
                        self._remember_secret(value)
            except McpConfigError as exc:
                self.config_error = str(exc)
                log.warning("mcp.json: %s", exc)
        return list(self._configs)

    def subscribe(self, listener: Listener) -> None:
        """Called (on the MCP thread) with a copy of a server's state whenever it changes."""
        self._listeners.append(listener)

    def _notify(self, state: ServerState) -> None:
        for listener in list(self._listeners):
            listener(state)

    def states(self) -> list[ServerState]:
        out = []
        for cfg in self.configs():
            conn = self._connections.get(cfg.name)
            if conn is not None:
                out.append(conn.state.copy())
            else:
                status = Status.DISABLED if cfg.disabled else Status.STOPPED
                out.append(ServerState(cfg.name, cfg.transport, status))
        return out

    def missing_tool_hint(self, name: str) -> str | None:
        """Why an `mcp__<server>__…` tool is not there (its server failed, or no such server)."""
        from app.core.mcp.manifests import server_slug_of

        wanted = server_slug_of(name)
        if wanted is None:
            return None
        for state in self.states():
            if slug(state.name, camel=False) == wanted:
                if state.status is Status.READY:
                    tools = ", ".join(state.tools) or "none"
                    return f"the MCP server {state.name!r} has no such tool (its tools: {tools})"
                why = f": {state.error}" if state.error else ""
                return f"the MCP server {state.name!r} is {state.status.value}{why}"
        return f"no MCP server {wanted!r} is configured in {self.config_path}"

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

    def start(self, wait: float = 0.0) -> list[ServerState]:
        """Start every enabled server in the background (idempotent); wait up to `wait`
        seconds for each to be ready or to have failed once."""
        configs = [c for c in self.configs() if not c.disabled]
        if configs:
            self.submit(self._start(configs, wait)).result()
        return self.states()

    async def _start(self, configs: list[ServerConfig], wait: float) -> None:
        from app.core.mcp.connection import ServerConnection

        for cfg in configs:
            if cfg.name not in self._connections:
                conn = ServerConnection(
                    cfg,
                    get_secret=self._get_secret,
                    on_change=self._notify,
                    backoff_start=self._backoff_start,
                )
                self._connections[cfg.name] = conn
                conn.start()
        if wait > 0:
            await asyncio.gather(*(self._connections[c.name].wait_settled(wait) for c in configs))

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
        await asyncio.gather(
            *(c.stop() for c in self._connections.values()), return_exceptions=True
        )

    # ---- tools --------------------------------------------------------------------------

    def tool_manifests(self, wait: float = 30.0) -> list[ToolManifest]:
        """Start the servers (if needed) and describe the tools of every connected one."""
        from app.core.sources import mcp_server_fingerprint, mcp_tool_fingerprint

        self.start(wait)
        manifests: list[ToolManifest] = []
        by_server: dict[str, list[ToolManifest]] = {}
        sources: dict[str, ToolSource] = {}
        for name, conn in list(self._connections.items()):
            found, names = build_manifests(
                name,
                conn.listing.tools,
                lambda tool, server=name: self._tool_impl(server, tool),
                timeout=conn.config.timeout,
            )
            definitions = {t.name: mcp_tool_fingerprint(t) for t in conn.listing.tools}
            tools = {m.name: definitions.get(names.get(m.name, ""), "") for m in found}
            reader = self._resource_manifest(name) if conn.listing.resources else None
            if reader is not None and reader.name not in {m.name for m in found}:
                found.append(reader)
                tools[reader.name] = "resources"
            manifests += found
            by_server[name] = found
            config = conn.config
            sources[name] = ToolSource(
                "mcp",
                f"mcp:{name}",
                fingerprint=mcp_server_fingerprint(
                    command=config.command,
                    args=config.args,
                    env=config.env,
                    url=config.url,
                    cwd=config.cwd,
                ),
                origin=f"the MCP server {name!r} in mcp.json",
                tools=tools,
            )
        self._sources = sources
        self._by_server = by_server
        return manifests

    def server_manifests(self) -> dict[str, list[ToolManifest]]:
        """Each server's own manifests (built from its own connection), as of the last
        `tool_manifests()`; names of two servers may collide, so never match by name."""
        return dict(getattr(self, "_by_server", {}))

    def tool_sources(self) -> dict[str, ToolSource]:
        """Each server as a tool source (identity + each tool's definition hash), as of the
        last `tool_manifests()`."""
        return dict(getattr(self, "_sources", {}))

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
        result = self._wait(conn.call_tool(tool, arguments, conn.config.timeout), ctx)
        return convert(result, self.home, label=f"mcp-{slug(server, camel=False)}")

    def _read_resource(self, server: str, uri: str, ctx: ToolContext) -> ToolResult:
        from app.core.mcp.results import convert_resource

        conn = self._connection(server)
        result = self._wait(conn.read_resource(uri), ctx)
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
