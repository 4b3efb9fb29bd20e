"""One MCP server: connect over its transport, keep one `ClientSession` open, notice a
crash and reconnect with backoff, list its tools again when it says they changed. Runs
entirely on the manager's event loop; `on_tools` tells the manager each new listing.

It also answers what the server asks of the client (see `ClientHooks`): elicitation goes to
the manager's handler on a worker thread, roots are the folders the user allowed, sampling
is declined (and not advertised), log messages go to `deskhand.mcp.<server>`.

This module imports the `mcp` SDK; it is loaded only when a server starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from app.core.mcp import reaper
from app.core.mcp.client_callbacks import SAMPLING_DECLINED, ServerLog, client_info
from app.core.mcp.config import SecretGetter, ServerConfig
from app.core.mcp.elicitation import (
    ElicitationAnswer,
    ElicitationHandler,
    ElicitationRequest,
    UnsupportedRequest,
    check_answer,
    decline_all,
    form_request,
    url_request,
)
from app.core.mcp.manifests import needs_tasks
from app.core.mcp.status import ServerState, Status
from app.core.mcp.stderr import StderrPipe

if TYPE_CHECKING:
    from app.core.mcp.oauth import LoopbackRedirect
    from app.core.mcp.secret_access import SecretAccess

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 60.0
HEALTH_INTERVAL = 0.5
PING_EVERY = 30.0
BACKOFF_START = 0.5
BACKOFF_MAX = 30.0
STABLE_AFTER = 60.0
RELIST_TIMEOUT = 30.0


class ServerUnavailable(Exception):
    """The server is not connected (starting, crashed, failed or stopped)."""


@dataclass
class ClientHooks:
    """What the manager provides to answer a server's requests; read at each request, so a
    handler set (or roots changed) later applies to running connections."""

    elicitation: Callable[[], ElicitationHandler] = lambda: decline_all
    #: (file:// URI, name) of each folder the user allowed.
    roots: Callable[[], list[tuple[str, str]]] = lambda: []
    #: Opens a web page (URL-mode elicitation after the user agreed; a sign-in page).
    open_url: Callable[[str], object] = lambda url: None
    #: The keyring, for OAuth tokens (None: remote servers cannot sign in).
    secrets: SecretAccess | None = None


class DeskhandSession(ClientSession):
    """A `ClientSession` that answers sampling requests with a clear refusal but does not
    advertise sampling (the SDK advertises it whenever a sampling callback is given)."""

    def _build_capabilities(self, version: str) -> Any:
        caps = super()._build_capabilities(version)
        return caps.model_copy(update={"sampling": None})


async def _decline_sampling(context: Any, params: Any) -> Any:
    from mcp import types

    return types.ErrorData(code=types.INVALID_REQUEST, message=SAMPLING_DECLINED)


@dataclass
class Listing:
    tools: list[Any] = field(default_factory=list)
    resources: list[Any] = field(default_factory=list)
    prompts: list[Any] = field(default_factory=list)


class ServerConnection:
    def __init__(
        self,
        config: ServerConfig,
        *,
        get_secret: SecretGetter,
        on_change: Callable[[ServerState], None],
        on_tools: Callable[[ServerConnection], None] = lambda conn: None,
        backoff_start: float = BACKOFF_START,
        connect_timeout: float = CONNECT_TIMEOUT,
        hooks: ClientHooks | None = None,
    ) -> None:
        self.config = config
        self._hooks = hooks or ClientHooks()
        self._server_log = ServerLog(config.name)
        #: Deskhand call ids of the tool calls running on this server now.
        self._calls: list[str] = []
        self._get_secret = get_secret
        self._on_change = on_change
        self._on_tools = on_tools
        self._backoff_start = backoff_start
        self._connect_timeout = connect_timeout
        self._marker = reaper.new_marker()
        self.state = ServerState(config.name, config.transport)
        self.listing = Listing()
        #: Whether `listing` came from the server (at least one connection succeeded).
        self.listed = False
        #: When the current connection attempt began (time.monotonic()).
        self.attempt_started = time.monotonic()
        self.session: ClientSession | None = None
        self._ready = asyncio.Event()
        self._settled = asyncio.Event()  # first attempt finished, whatever the outcome
        self._stop = asyncio.Event()
        self._broken = asyncio.Event()
        self._relist = asyncio.Event()  # the server said its tools (or resources...) changed
        self._wake = asyncio.Event()  # stop or relist: the watch loop looks now
        self._task: asyncio.Task[None] | None = None
        #: The httpx auth of the current attempt (remote servers), which notes sign-in needs.
        self._auth: Any = None
        #: Set while the user signs in (the browser may be opened); stays for the connection's
        #: life, so a scope step-up during a call can ask again.
        self._redirect: LoopbackRedirect | None = None
        self._sign_in = asyncio.Event()  # the user asked to sign in
        #: A call needed more access than granted: after the user's Sign in, the listener
        #: stays until the next call is over (it is where the browser step happens).
        self._more_access = False
        self._signed_in = asyncio.Event()  # that attempt finished, whatever the outcome

    # ---- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._supervise(), name=f"mcp:{self.config.name}"
            )

    async def wait_settled(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), timeout)

    @property
    def ready(self) -> bool:
        return self.session is not None

    @property
    def settled(self) -> bool:
        """The first attempt finished, whatever the outcome."""
        return self._settled.is_set()

    async def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._task is None:
            return
        if self.session is None and self.config.transport == "stdio":
            # Starting or hung: no polite goodbye (the SDK would give a server that never
            # answered two more seconds to notice its closed stdin); end its processes now.
            await asyncio.to_thread(reaper.reap, self._marker, 0.5)
        if self.session is None:
            self._task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except (TimeoutError, asyncio.CancelledError):
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        await self._close_redirect()
        self._signed_in.set()  # a sign-in waiting on this connection ends with it
        self._set(Status.STOPPED)

    def _set(self, status: Status, error: str | None = None) -> None:
        self.state.status = status
        if error is not None or status is Status.READY:
            self.state.error = error
        self.state.tools = [t.name for t in self.listing.tools if not needs_tasks(t)]
        self.state.hidden_tools = [t.name for t in self.listing.tools if needs_tasks(t)]
        self.state.resources = [str(r.uri) for r in self.listing.resources]
        self.state.prompts = [p.name for p in self.listing.prompts]
        try:
            self._on_change(self.state.copy())
        except Exception:  # a listener must not break the connection
            log.exception("MCP status listener failed")

    async def _supervise(self) -> None:
        delay = self._backoff_start
        while not self._stop.is_set():
            started = time.monotonic()
            error: str | None = None
            try:
                await self._run_once()
            except asyncio.CancelledError:
                if self._stop.is_set():
                    raise
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                error = "the connection was cancelled"
            except Exception as exc:
                error = _describe(exc)
            finally:
                self.session = None
                self._ready.clear()
            if self._stop.is_set():
                break
            if self._sign_in.is_set():  # the user asked to sign in: go again at once
                continue
            problem = getattr(self._auth, "problem", None)
            if self._redirect is not None:  # a sign-in that did not end ready: never again
                await self._close_redirect()  # on its own (no page opens without a click)
                problem = problem or Exception(f"signing in did not finish: {error}")
            if problem is not None:
                await self._wait_for_sign_in(str(problem))
                delay = self._backoff_start
                continue
            error = error or "the server closed the connection"
            if time.monotonic() - started > STABLE_AFTER:
                delay = self._backoff_start
            self.state.restarts += 1
            self.attempt_started = time.monotonic() + delay
            was_ready = self._settled.is_set() and self.state.status is Status.READY
            log.warning(
                "MCP server %s %s: %s; restarting in %.1f s",
                self.config.name,
                "crashed" if was_ready else "failed to start",
                error,
                delay,
            )
            self._set(Status.RESTARTING if was_ready else Status.FAILED, error)
            self._settled.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)
            delay = min(delay * 2, BACKOFF_MAX)

    async def _wait_for_sign_in(self, why: str) -> None:
        """The server needs the user: say so and wait for Sign in (or stop), never retrying
        on its own."""
        log.warning("MCP server %s: %s", self.config.name, why)
        # client credentials have nothing to sign in to: failed, until mcp.json changes
        signs_in = self.config.auth.kind == "oauth"
        self._set(Status.NEEDS_SIGN_IN if signs_in else Status.FAILED, why)
        self._settled.set()
        self._signed_in.set()
        stop = asyncio.ensure_future(self._stop.wait())
        asked = asyncio.ensure_future(self._sign_in.wait())
        try:
            await asyncio.wait([stop, asked], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            asked.cancel()

    async def sign_in(self, timeout: float) -> ServerState:
        """Connect again with the browser sign-in allowed; the state once that attempt is
        over (ready, or why not), waiting at most `timeout` s."""
        from app.core.mcp.oauth import loopback_for

        hooks = self._hooks
        if self.config.transport == "stdio" or hooks.secrets is None:
            return self.state.copy()
        assert self.config.url is not None
        if self._redirect is None:
            self._redirect = await loopback_for(self.config.name, self.config.url, hooks.secrets)
        self._signed_in.clear()
        self._sign_in.set()
        self._broken.set()  # a running connection reconnects (now able to sign in)
        self._wake.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._signed_in.wait(), timeout)
        return self.state.copy()

    async def _close_redirect(self) -> None:
        if self._redirect is not None:
            redirect, self._redirect = self._redirect, None
            await redirect.close()

    async def _run_once(self) -> None:
        self._sign_in.clear()
        self._broken.clear()
        self._relist.clear()
        self.attempt_started = time.monotonic()
        self._set(Status.STARTING)
        limit = self._connect_timeout
        if self._redirect is not None:  # the user is signing in: give them time
            from app.core.mcp.oauth import SIGN_IN_WAIT

            limit += SIGN_IN_WAIT
        async with AsyncExitStack() as stack:
            # Not wait_for: it would run the transport's anyio scopes in another task.
            async with asyncio.timeout(limit):
                session = await self._connect(stack)
                self.listing = await self._discover(session)
            self.session = session
            self.listed = True
            if not self._more_access:  # signed in: no page opens again without a click
                await self._close_redirect()
            # tools first: whoever sees READY must find them
            self._tools_changed()
            self._ready.set()
            self._set(Status.READY)
            self._settled.set()
            self._signed_in.set()
            log.info("MCP server %s ready with %d tools", self.config.name, len(self.listing.tools))
            await self._watch(session)

    def _tools_changed(self) -> None:
        try:
            self._on_tools(self)
        except Exception:  # a listener must not break the connection
            log.exception("MCP tools listener failed")

    async def _connect(self, stack: AsyncExitStack) -> ClientSession:
        # every keyring: value and ${keyring:…} placeholder, in env, headers, args and URL
        cfg = self.config.resolved(self._get_secret)
        if cfg.transport == "stdio":
            assert cfg.command is not None
            env = dict(cfg.env)
            env[reaper.ENV_NAME] = self._marker
            params = StdioServerParameters(
                command=cfg.command, args=list(cfg.args), env=env, cwd=cfg.cwd
            )
            stack.push_async_callback(asyncio.to_thread, reaper.reap, self._marker)
            streams = await stack.enter_async_context(
                stdio_client(params, errlog=self._errlog(stack))
            )
        else:
            import httpx2

            assert cfg.url is not None
            headers = dict(cfg.headers)
            timeout = httpx2.Timeout(30.0, read=300.0)
            auth = self._auth = self._make_auth(cfg)
            if cfg.transport == "sse":
                from mcp.client.sse import sse_client

                streams = await stack.enter_async_context(
                    sse_client(cfg.url, headers=headers or None, auth=auth)
                )
            else:
                from mcp.client.streamable_http import streamable_http_client

                client = await stack.enter_async_context(
                    httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth)
                )
                streams = await stack.enter_async_context(
                    streamable_http_client(cfg.url, http_client=client)
                )
        read, write = streams[0], streams[1]
        session = await stack.enter_async_context(
            DeskhandSession(
                read,
                write,
                message_handler=self._on_message,
                client_info=client_info(),
                sampling_callback=_decline_sampling,
                elicitation_callback=self._elicit,
                list_roots_callback=self._list_roots,
                logging_callback=self._on_log,
                log_level="info",
            )
        )
        await session.initialize()
        return session

    def _make_auth(self, cfg: ServerConfig) -> Any:
        """OAuth for this attempt (None when the entry says "none" or there is no keyring)."""
        secrets = self._hooks.secrets
        if secrets is None or cfg.auth.kind == "none" or cfg.url is None:
            return None
        from app.core.mcp.oauth import make_auth

        return make_auth(
            cfg.name,
            cfg.url,
            cfg.auth,
            secrets,
            redirect=self._redirect,
            open_url=self._hooks.open_url,
            current_redirect=lambda: self._redirect,
        )

    def _errlog(self, stack: AsyncExitStack) -> TextIO:
        """The server's stderr, logged line by line (and scrubbed by the log tripwire)."""
        pipe = StderrPipe(self.config.name)
        stack.callback(pipe.close)
        return pipe.writer

    async def _discover(self, session: ClientSession) -> Listing:
        caps = session.server_capabilities
        listing = Listing()
        if caps is None or caps.tools is not None:
            listing.tools = await _all_pages(session.list_tools, "tools")
        if caps is not None and caps.resources is not None:
            listing.resources = await _optional(_all_pages(session.list_resources, "resources"))
        if caps is not None and caps.prompts is not None:
            listing.prompts = await _optional(_all_pages(session.list_prompts, "prompts"))
        return listing

    async def _on_message(self, message: Any) -> None:
        """Notifications from the server, run inline by the SDK's reader: only flag them
        (a request from here would wait on that same reader)."""
        from mcp import types

        changed = (
            types.ToolListChangedNotification,
            types.ResourceListChangedNotification,
            types.PromptListChangedNotification,
        )
        if isinstance(message, changed):
            self._relist.set()
            self._wake.set()
        elif isinstance(message, types.ElicitCompleteNotification):
            log.info("MCP server %s: the web page it asked you to open reports it is done",
                     self.config.name)

    # ---- what the server asks of the client ----------------------------------------------

    async def _on_log(self, params: Any) -> None:
        self._server_log.message(params.level, params.data, params.logger)

    async def _list_roots(self, context: Any) -> Any:
        from mcp import types

        roots = [types.Root(uri=uri, name=name) for uri, name in self._hooks.roots()]
        return types.ListRootsResult(roots=roots)

    async def roots_changed(self) -> None:
        """Tell the server the allowed folders changed (it asks for them again)."""
        from mcp import types

        session = self.session
        if session is not None:
            with contextlib.suppress(Exception):  # a closing connection: nothing to tell
                await session.send_notification(types.RootsListChangedNotification())

    async def _elicit(self, context: Any, params: Any) -> Any:
        from mcp import types

        name = self.config.name
        call_id = (self._calls[0] or None) if len(self._calls) == 1 else None
        try:
            if getattr(params, "mode", "form") == "url":
                request = url_request(name, params.message, params.url, call_id)
            else:
                request = form_request(name, params.message, params.requested_schema, call_id)
        except UnsupportedRequest as exc:
            log.warning("MCP server %s asked for input Deskhand cannot show (%s); declined",
                        name, exc)
            return types.ElicitResult(action="decline")
        answer = await self._ask(request)
        answer, problem = check_answer(request, answer)
        if problem:
            log.warning("MCP server %s: the answer did not fit its form (%s); declined",
                        name, problem)
        if request.mode == "url" and answer.action == "accept" and request.url:
            await asyncio.to_thread(self._hooks.open_url, request.url)
        return types.ElicitResult(action=answer.action, content=answer.content)

    async def _ask(self, request: ElicitationRequest) -> ElicitationAnswer:
        """The handler on a worker thread (it may wait for the user); if the server withdraws
        the request meanwhile, `request.cancelled` tells the handler to stop asking."""
        handler = self._hooks.elicitation()
        try:
            return await asyncio.to_thread(_run_handler, handler, request)
        except asyncio.CancelledError:
            request.cancelled.set()
            raise
        except Exception:
            log.exception("the elicitation handler failed; declined")
            return ElicitationAnswer("decline")

    async def _watch(self, session: ClientSession) -> None:
        """Returns when asked to stop or when the connection is gone; lists the tools
        again when the server says they changed."""
        last_ping = time.monotonic()
        while not self._stop.is_set():
            if self._broken.is_set() or _closed(session):
                return
            if self._relist.is_set():
                self._relist.clear()
                try:
                    async with asyncio.timeout(RELIST_TIMEOUT):
                        self.listing = await self._discover(session)
                except Exception as exc:
                    log.warning("MCP server %s: listing its tools again failed: %s",
                                self.config.name, _describe(exc))
                    return  # reconnect: a fresh connection lists them again
                log.info("MCP server %s changed its tools (%d now)", self.config.name,
                         len(self.listing.tools))
                self._tools_changed()
                self._set(Status.READY)
            if time.monotonic() - last_ping > PING_EVERY:
                last_ping = time.monotonic()
                try:
                    async with asyncio.timeout(10.0):
                        await session.send_ping()
                except Exception:
                    return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), HEALTH_INTERVAL)
            self._wake.clear()

    # ---- calls --------------------------------------------------------------------------

    def not_ready_text(self) -> str:
        """Why calls cannot run now, in plain words."""
        name = self.config.name
        since = max(0.0, time.monotonic() - self.attempt_started)
        if self.state.status is Status.STARTING:
            return f"the MCP server {name!r} is not ready (still starting after {since:.1f} s)"
        why = f": {self.state.error}" if self.state.error else ""
        if self.state.status is Status.RESTARTING:
            return f"the MCP server {name!r} is not ready (it stopped and is restarting{why})"
        if self.state.status is Status.FAILED:
            return f"the MCP server {name!r} could not start{why}"
        if self.state.status is Status.NEEDS_SIGN_IN:
            return self.state.error or f"the MCP server {name!r} needs you to sign in"
        return f"the MCP server {name!r} is {self.state.status.value}{why}"

    async def ready_session(self, timeout: float) -> ClientSession:
        """The open session, waiting at most `timeout` s for the server to be ready (not at
        all when it waits for the user to sign in)."""
        if self.session is None and self.state.status is Status.NEEDS_SIGN_IN:
            raise ServerUnavailable(self.not_ready_text())
        if self.session is None and not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), timeout)
        if self.session is None:
            raise ServerUnavailable(self.not_ready_text())
        return self.session

    async def wait_ready(self, timeout: float) -> bool:
        """Wait at most `timeout` s for the server to be ready (or its start to have failed
        once, when it never was ready; at once when it needs the user to sign in)."""
        needs_user = self.state.status is Status.NEEDS_SIGN_IN
        if self._settled.is_set() and (not self.listed or needs_user):
            return self.session is not None  # its first start failed already: no waiting
        if self.session is None and not self._stop.is_set():
            waits = [asyncio.ensure_future(self._ready.wait())]
            if not self._settled.is_set():
                waits.append(asyncio.ensure_future(self._settled.wait()))
            try:
                await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waits:
                    waiter.cancel()
        return self.session is not None

    async def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any],
        timeout: float,
        ready_wait: float = 30.0,
        *,
        progress: Callable[[float, float | None, str | None], None] | None = None,
        call_id: str = "",
    ) -> Any:
        """Call `tool`; a progress token goes with every call (`progress` hears each
        notification); `call_id` ties the server's elicitation requests to this call."""
        session = await self.ready_session(min(timeout, ready_wait))

        report = progress

        # The SDK's ProgressFnT protocol names the parameters, so the names must match.
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if report is not None:
                report(progress, total, message)

        self._calls.append(call_id)
        try:
            return await session.call_tool(tool, arguments, progress_callback=on_progress)
        except Exception:
            problem = getattr(self._auth, "problem", None)
            if problem is not None:  # more access needed: wait for the user's Sign in
                self._more_access = "more access" in str(problem)
                self._set(Status.NEEDS_SIGN_IN, str(problem))  # said at once, before the reply
                self._broken.set()
                self._wake.set()
                raise ServerUnavailable(str(problem)) from None
            if _closed(session):
                self._broken.set()
                raise ServerUnavailable(
                    f"the MCP server {self.config.name!r} stopped during the call; "
                    "it is being restarted"
                ) from None
            raise
        finally:
            self._calls.remove(call_id)
            if self._more_access and self._redirect is not None and session is self.session:
                # the call the user signed in again for is over: no page opens after it
                self._more_access = False
                await self._close_redirect()

    async def read_resource(self, uri: str, ready_wait: float = 30.0) -> Any:
        session = await self.ready_session(ready_wait)
        return await session.read_resource(uri)

    async def get_prompt(
        self, name: str, arguments: dict[str, str], ready_wait: float = 30.0
    ) -> Any:
        session = await self.ready_session(ready_wait)
        return await session.get_prompt(name, arguments or None)


def _run_handler(handler: ElicitationHandler, request: ElicitationRequest) -> ElicitationAnswer:
    answer = handler(request)
    return answer if isinstance(answer, ElicitationAnswer) else ElicitationAnswer("decline")


def _closed(session: ClientSession) -> bool:
    """Whether the session's transport has ended (the SDK fans out CONNECTION_CLOSED)."""
    dispatcher = getattr(session, "_dispatcher", None)
    return bool(getattr(dispatcher, "_closed", False))


async def _all_pages(method: Any, attr: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    from mcp.types import PaginatedRequestParams

    for _ in range(100):
        result = await method(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        items.extend(getattr(result, attr))
        cursor = result.next_cursor
        if not cursor:
            break
    return items


async def _optional(coro: Any) -> list[Any]:
    try:
        found: list[Any] = await coro
        return found
    except Exception as exc:
        log.info("MCP listing failed: %s", exc)
        return []


def _describe(exc: BaseException) -> str:
    """A one-line reason, unwrapping the exception groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
