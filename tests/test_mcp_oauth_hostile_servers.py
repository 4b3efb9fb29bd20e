"""The MCP OAuth sign-in holds against a hostile remote MCP server, a hostile authorization
server it points to, a hostile local program knocking on the loopback listener, and a model
that calls tools: each test states what must hold.

Real parts only: Deskhand's manager, connection, providers and keyring store (over an
in-memory keyring backend); the OAuth-protected MCP server of tests/oauth_server.py; and
small hostile HTTP servers written here with the standard library on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

import pytest

pytest.importorskip("mcp")


from app.core.mcp.config import ServerConfig, import_servers
from app.core.mcp.connection import ClientHooks, ServerConnection
from app.core.mcp.known_tools import known_tools_path, last_known, remember
from app.core.mcp.manager import McpManager
from app.core.mcp.manifests import build_manifests
from app.core.mcp.oauth import KeyringTokenStore, LoopbackRedirect
from app.core.mcp.secret_access import SecretAccess, token_key
from app.core.mcp.status import ServerState, Status
from app.core.secrets import SecretStore, known_secret_values, remember_secret
from tests.fixtures_keyring import MemoryKeyring
from tests.oauth_server import OAuthMcpServer, load, serve
from tests.test_mcp import wait_for, write_config
from tools.spec import ToolContext

NAME = "files"
SETTLE = 15.0
SIGN_IN = 20.0
SHORT_SIGN_IN = 4.0
#: With backoff_start at 0.05 s, a retry loop shows many times within this window.
QUIET = 1.0
#: The longest sign-in address worth opening or printing (real ones are well under 2 KB).
MAX_SIGN_IN_URL = 8192


# ---- a hostile HTTP server ---------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    """One request as a hostile server received it (header names lower-cased)."""

    method: str
    target: str
    headers: dict[str, str]
    body: str

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(urlsplit(self.target).query).items()}

    @property
    def form(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(self.body).items()}


Reply = tuple[int, dict[str, str], str]
Route = Callable[[Hit], Reply]


def as_json(value: Any, status: int = 200) -> Reply:
    return status, {"Content-Type": "application/json"}, json.dumps(value)


class Hostile:
    """An HTTP server on 127.0.0.1 answering from `routes` (path -> function); it records
    every request it receives (`hits`) and answers 404 to anything else."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self._hits: list[Hit] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner._handle(self)

            def do_POST(self) -> None:
                owner._handle(self)

            def do_DELETE(self) -> None:
                owner._handle(self)

            def log_message(self, *args: Any) -> None:
                return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"hostile-{self.port}",
            daemon=True,
        )

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def hits(self) -> list[Hit]:
        with self._lock:
            return list(self._hits)

    def seen(self, path: str) -> list[Hit]:
        return [h for h in self.hits if h.path == path]

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("content-length") or 0)
        body = request.rfile.read(length).decode("utf-8", "replace") if length else ""
        headers = {k.lower(): v for k, v in request.headers.items()}
        hit = Hit(request.command, request.path, headers, body)
        with self._lock:
            self._hits.append(hit)
        route = self.routes.get(hit.path)
        status, extra, text = route(hit) if route else (404, {}, "not found")
        data = text.encode()
        request.send_response(status)
        for key, value in extra.items():
            request.send_header(key, value)
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def start(self) -> Hostile:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def rs() -> Iterator[Hostile]:
    """A hostile resource server: the MCP server in mcp.json."""
    server = Hostile().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def evil_as() -> Iterator[Hostile]:
    """A hostile authorization server that the hostile MCP server points to."""
    server = Hostile().start()
    try:
        yield server
    finally:
        server.stop()


def protected_by(rs: Hostile, auth_server: str) -> str:
    """`rs` answers every MCP request with 401 and names `auth_server` in its protected
    resource metadata. Returns its MCP address."""
    url = f"{rs.origin}/mcp"
    prm = f"{rs.origin}/.well-known/oauth-protected-resource"
    auth_server = auth_server.rstrip("/") + "/"  # as the metadata's issuer renders
    challenge = {"WWW-Authenticate": f'Bearer resource_metadata="{prm}"'}
    rs.routes["/mcp"] = lambda hit: (401, challenge, "sign in first")
    document = {"resource": url, "authorization_servers": [auth_server]}
    rs.routes["/.well-known/oauth-protected-resource"] = lambda hit: as_json(document)
    rs.routes["/.well-known/oauth-protected-resource/mcp"] = lambda hit: as_json(document)
    return url


def authorization_server(server: Hostile, *, authorize: str | None = None) -> None:
    """`server` acts as an authorization server that lets everyone in at once: /authorize
    sends the browser straight back with a code, /register takes any client, /token refuses
    (what it wanted was what came with the request)."""
    issuer = server.origin + "/"
    metadata = {
        "issuer": issuer,
        "authorization_endpoint": authorize or f"{server.origin}/authorize",
        "token_endpoint": f"{server.origin}/token",
        "registration_endpoint": f"{server.origin}/register",
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
    }
    server.routes["/.well-known/oauth-authorization-server"] = lambda hit: as_json(metadata)

    def back(hit: Hit) -> Reply:
        query = hit.query
        where = f"{query['redirect_uri']}?{urlencode({'code': 'c-1', 'state': query['state']})}"
        return 302, {"Location": where}, ""

    def register(hit: Hit) -> Reply:
        body = json.loads(hit.body)
        client = {**body, "client_id": "evil-" + secrets.token_hex(4)}
        client["token_endpoint_auth_method"] = "none"
        return as_json(client, 201)

    server.routes["/authorize"] = back
    server.routes["/register"] = register
    server.routes["/token"] = lambda hit: as_json({"error": "invalid_grant"}, 400)


def basic_password(hit: Hit) -> str | None:
    """The password of an `Authorization: Basic` header, if any."""
    scheme, _, encoded = hit.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return None
    _, _, password = base64.b64decode(encoded).decode().partition(":")
    return unquote(password)


# ---- Deskhand ---------------------------------------------------------------------------------


class Desk:
    """One Deskhand home with a keyring and a browser. The browser records every page it is
    asked to open; with `follow` it loads http(s) pages and follows their redirects (a user
    who agrees at once), otherwise the user is still reading the page."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.keyring = MemoryKeyring()
        self.store = SecretStore(backend=self.keyring)
        self.access = SecretAccess(
            get=self.store.get,
            set=self.store.set,
            delete=self.store.delete,
            remember=remember_secret,
        )
        self.opened: list[str] = []
        self.follow = True
        self._managers: list[McpManager] = []

    def browser(self, url: str) -> bool:
        self.opened.append(url)
        if self.follow and urlsplit(url).scheme in {"http", "https"}:
            load(url)
        return True

    def manager(self, servers: dict[str, Any]) -> McpManager:
        write_config(self.home, servers)
        manager = McpManager(
            self.home / "mcp.json",
            home=self.home,
            get_secret=self.store.get,
            remember_secret=remember_secret,
            backoff_start=0.05,
            ready_wait=5.0,
            open_url=self.browser,
            secrets=self.access,
        )
        self._managers.append(manager)
        return manager

    def started(self, servers: dict[str, Any]) -> McpManager:
        manager = self.manager(servers)
        manager.start(wait=SETTLE)
        return manager

    def seed(self, server: str, record: dict[str, Any]) -> None:
        """A sign-in kept from an earlier run, written straight into the keyring (so this
        process never saw its values)."""
        self.keyring.items[("deskhand", token_key(server))] = json.dumps(record)

    def close(self) -> None:
        for manager in self._managers:
            manager.shutdown()


@pytest.fixture
def desk(home: Path) -> Iterator[Desk]:
    deskhand = Desk(home)
    try:
        yield deskhand
    finally:
        deskhand.close()


@pytest.fixture
def oauth() -> Iterator[OAuthMcpServer]:
    with serve() as server:
        yield server


def settled(manager: McpManager, name: str = NAME) -> ServerState:
    assert wait_for(lambda: _status(manager, name) is not Status.STARTING, SETTLE)
    state = manager.status(name)
    assert state is not None
    return state


def _status(manager: McpManager, name: str) -> Status | None:
    state = manager.status(name)
    return state.status if state is not None else None


def quiet(*readings: Callable[[], object]) -> bool:
    """Whether every reading stays the same for QUIET seconds (a bounded poll: nothing
    happening sends no event)."""
    before = [read() for read in readings]
    return not wait_for(lambda: [read() for read in readings] != before, QUIET)


def call(manager: McpManager, home: Path, tool: str, **args: Any) -> Any:
    manifest = {m.name: m for m in manager.tools(NAME)}[f"mcp__{NAME}__{tool}"]
    assert callable(manifest.impl)
    return manifest.impl(manifest.params.model_validate(args), ToolContext(home=home))


def random_secret(prefix: str) -> str:
    return f"{prefix}-{secrets.token_urlsafe(18)}"


# ---- where a client secret may go -------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # as in a real run: not an error
def test_client_credentials_go_only_to_an_issuer_the_user_named(
    desk: Desk, rs: Hostile, evil_as: Hostile
) -> None:
    """A client_credentials entry without `issuer`: the MCP server's metadata decides who
    receives the client secret — at a start in the background, with nobody asked."""
    authorization_server(evil_as)
    url = protected_by(rs, evil_as.origin)
    secret = random_secret("corp-cc")
    auth = {"type": "client_credentials", "client_id": "corp-app", "client_secret": secret}
    manager = desk.started({NAME: {"url": url, "auth": auth}})
    settled(manager)

    received = [basic_password(h) for h in evil_as.seen("/token")]
    received += [h.form.get("client_secret") for h in evil_as.seen("/token")]
    assert secret not in received, "the client secret reached the MCP server's chosen AS"


def test_a_preregistered_client_secret_never_reaches_another_authorization_server(
    desk: Desk, rs: Hostile, evil_as: Hostile
) -> None:
    """`auth` names the client registered beforehand and its issuer; the MCP server points
    to another authorization server. Pressing Sign in must not hand that server the secret."""
    authorization_server(evil_as)
    url = protected_by(rs, evil_as.origin)
    secret = random_secret("corp-oauth")
    auth = {
        "type": "oauth",
        "client_id": "corp-app",
        "client_secret": secret,
        "issuer": "https://login.corp.example",
    }
    manager = desk.started({NAME: {"url": url, "auth": auth}})
    manager.sign_in(NAME, timeout=SHORT_SIGN_IN)

    received = [basic_password(h) for h in evil_as.seen("/token")]
    received += [h.form.get("client_secret") for h in evil_as.seen("/token")]
    assert secret not in received, "the pre-registered secret went to the MCP server's AS"


# ---- nothing opens a page or registers on its own ---------------------------------------------


def test_a_tool_call_never_opens_a_sign_in_page(oauth: OAuthMcpServer, desk: Desk) -> None:
    """After the user signed in once, the server stops taking the token; the model's next
    call must fail saying "sign in", not send the browser to the server's pages."""
    manager = desk.started({NAME: {"url": oauth.url}})
    state = manager.sign_in(NAME, timeout=SIGN_IN)
    assert state is not None and state.status is Status.READY, state
    assert len(desk.opened) == 1
    oauth.expire_access_tokens()
    oauth.knobs.refuse_refresh = True

    with contextlib.suppress(Exception):  # failing is the right outcome
        call(manager, desk.home, "echo", text="from the model")

    assert len(desk.opened) == 1, f"a tool call opened {desk.opened[1:]}"


def test_a_slow_sign_in_is_not_cut_off_and_reopened(oauth: OAuthMcpServer, desk: Desk) -> None:
    """The user takes longer than a connection attempt may (60 s in the app, 1 s here) to
    sign in: Deskhand must keep waiting for that page, not open a fresh one on each retry."""
    config = ServerConfig.from_json(NAME, {"url": oauth.url})
    desk.follow = False  # the user is still typing their password

    async def scenario() -> ServerState:
        conn = ServerConnection(
            config,
            get_secret=desk.store.get,
            on_change=lambda state: None,
            backoff_start=0.05,
            connect_timeout=1.0,
            hooks=ClientHooks(open_url=desk.browser, secrets=desk.access),
        )
        conn.start()
        await conn.wait_settled(SETTLE)
        try:
            return await conn.sign_in(SHORT_SIGN_IN)
        finally:
            await conn.stop()

    asyncio.run(scenario())
    assert len(desk.opened) == 1, f"{len(desk.opened)} sign-in pages opened for one press"


def test_a_background_start_with_stale_tokens_registers_nothing(
    oauth: OAuthMcpServer, desk: Desk
) -> None:
    """A kept sign-in whose token the server no longer takes (and nothing to refresh with):
    a start in the background must say "sign in", not register a client on its own."""
    desk.seed(
        NAME,
        {
            "url": oauth.url,
            "tokens": {"access_token": random_secret("at-old"), "token_type": "Bearer"},
        },
    )
    manager = desk.started({NAME: {"url": oauth.url}})

    state = settled(manager)
    assert state.status is Status.NEEDS_SIGN_IN, state
    assert desk.opened == []
    assert oauth.count("register") == 0, "a client was registered with nobody asking"


def test_a_background_scope_challenge_registers_nothing(desk: Desk, rs: Hostile) -> None:
    """A kept token (no client, no metadata) and a server answering 403 insufficient_scope:
    a start in the background must not register a client with anyone."""
    authorization_server(rs)
    url = protected_by(rs, rs.origin)
    prm = f"{rs.origin}/.well-known/oauth-protected-resource"
    challenge = f'Bearer error="insufficient_scope", scope="admin", resource_metadata="{prm}"'
    rs.routes["/mcp"] = lambda hit: (403, {"WWW-Authenticate": challenge}, "more scope")
    desk.seed(
        NAME,
        {
            "url": url,
            "tokens": {"access_token": random_secret("at-kept"), "token_type": "Bearer"},
            "expires_at": 4e9,
        },
    )
    manager = desk.started({NAME: {"url": url}})
    settled(manager)

    assert desk.opened == []
    assert rs.seen("/register") == [], "a client was registered with nobody asking"


# ---- one record per server ----------------------------------------------------------------------


def test_each_server_name_has_its_own_sign_in_record(oauth: OAuthMcpServer, desk: Desk) -> None:
    """Servers "team/prod" and "team_prod" are two; signing out of one must not forget the
    other's sign-in (their keyring keys are the same today)."""
    manager = desk.manager({"team/prod": {"url": oauth.url}, "team_prod": {"url": oauth.url}})
    manager.start(wait=SETTLE)
    state = manager.sign_in("team/prod", timeout=SIGN_IN)
    assert state is not None and state.status is Status.READY, state

    manager.sign_out("team_prod")

    assert manager.signed_in("team/prod"), "signing out of team_prod forgot team/prod"


def test_an_imported_header_named_oauth_keeps_its_own_keyring_entry(tmp_path: Path) -> None:
    """`mcp import` moves a credential-looking header `oauth` to mcp/<server>/oauth — the
    very entry the server's sign-in record (tokens, client secret) is written to, which
    then travels as that header to the server."""
    source = tmp_path / "claude.json"
    token = "ghp_" + "a1B2c3D4e5" * 4
    entry = {"url": "https://mcp.example/mcp", "headers": {"oauth": token}}
    source.write_text(json.dumps({"mcpServers": {NAME: entry}}), "utf-8")
    stored: dict[str, str] = {}

    import_servers(tmp_path / "mcp.json", source, set_secret=stored.__setitem__)

    assert stored, "the header was not moved to the keyring"
    assert token_key(NAME) not in stored, "the header shares the sign-in record's key"


# ---- the secret tripwire ------------------------------------------------------------------------


def kept_record(desk: Desk, secret: str, scope: str) -> list[str]:
    """Reads a record kept from an earlier run (written straight into the keyring, so this
    process never saw its values) the way a connection does; what it remembers."""
    url = "https://mcp.example/mcp"
    desk.seed(
        NAME,
        {
            "url": url,
            "tokens": {
                "access_token": random_secret("at"),
                "token_type": "Bearer",
                "scope": scope,
                "refresh_token": random_secret("rt"),
            },
            "client": {
                "client_id": "c-1",
                "client_secret": secret,
                "redirect_uris": ["http://127.0.0.1:5555/callback"],
                "token_endpoint_auth_method": "client_secret_basic",
            },
        },
    )
    remembered: list[str] = []
    access = SecretAccess(
        get=desk.store.get,
        set=desk.store.set,
        delete=desk.store.delete,
        remember=remembered.append,
    )
    assert KeyringTokenStore(NAME, url, access).read_record()
    return remembered


def test_the_client_secret_joins_the_tripwire_when_loaded_from_the_keyring(desk: Desk) -> None:
    """The defence holds: the keyring read itself teaches the tripwire every credential
    inside the record, the registered client's secret included."""
    secret = random_secret("cs")
    kept_record(desk, secret, "files:read")
    assert secret in known_secret_values()


def test_only_secret_values_join_the_tripwire(desk: Desk) -> None:
    """`token_type` and `scope` are not secrets, and the authorization server chooses the
    scope: remembering it lets that server blank out any word (say "http") in every tool
    result and log, for as long as the sign-in is kept."""
    scope = "scope" + secrets.token_hex(4)  # unique: a real attack would use a common word
    remembered = kept_record(desk, random_secret("cs"), scope)
    assert scope not in remembered and scope not in known_secret_values()
    assert "Bearer" not in remembered


# ---- the loopback listener ----------------------------------------------------------------------


def test_the_loopback_listener_closes_after_the_sign_in(oauth: OAuthMcpServer, desk: Desk) -> None:
    manager = desk.started({NAME: {"url": oauth.url}})
    state = manager.sign_in(NAME, timeout=SIGN_IN)
    assert state is not None and state.status is Status.READY, state
    [page] = desk.opened
    port = urlsplit(parse_qs(urlsplit(page).query)["redirect_uri"][0]).port
    assert port is not None

    with socket.socket() as probe:
        probe.settimeout(2.0)
        still_open = probe.connect_ex(("127.0.0.1", port)) == 0
    assert not still_open, "the one-shot listener still accepts connections after signing in"


async def _open_idle(port: int, count: int) -> list[tuple[Any, Any]]:
    return [await asyncio.open_connection("127.0.0.1", port) for _ in range(count)]


async def _closed_by_peer(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), 0.01) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


def test_the_loopback_listener_bounds_the_connections_it_holds() -> None:
    """Another local program opens many idle connections: each is held for 10 s, with no
    limit on how many (each costs Deskhand a file descriptor)."""

    async def scenario() -> int:
        redirect = LoopbackRedirect(NAME)
        await redirect.start()
        conns = await _open_idle(redirect.port, 100)
        try:
            held = len(conns)
            # under the listener's 5 s read limit, which would close them all anyway
            deadline = asyncio.get_running_loop().time() + 4.0
            while asyncio.get_running_loop().time() < deadline:
                closed = [await _closed_by_peer(reader) for reader, _ in conns]
                held = closed.count(False)
                if held <= 16:
                    break
                await asyncio.sleep(0.1)
            return held
        finally:
            for _, writer in conns:
                writer.close()
            await redirect.close()

    held = asyncio.run(scenario())
    assert held <= 16, f"the listener holds {held} idle connections from one program"


def test_junk_and_forged_callbacks_do_not_end_the_sign_in() -> None:
    """A huge request line is dropped, a forged state and an error without the state are
    refused; the real callback still completes the sign-in (the defence holds)."""

    async def scenario() -> tuple[list[bytes], str]:
        redirect = LoopbackRedirect(NAME)
        redirect.expected_state = "the-real-state"
        await redirect.start()
        answers = []
        try:
            for request in (
                b"GET /callback?" + b"a" * 200_000 + b" HTTP/1.1\r\n\r\n",
                b"GET /callback?code=evil&state=forged HTTP/1.1\r\n\r\n",
                b"GET /callback?error=access_denied HTTP/1.1\r\n\r\n",
                b"GET /callback?code=good&state=the-real-state HTTP/1.1\r\n\r\n",
            ):
                reader, writer = await asyncio.open_connection("127.0.0.1", redirect.port)
                with contextlib.suppress(ConnectionError):
                    writer.write(request)
                    await writer.drain()
                try:
                    answers.append((await reader.read(200)).split(b"\r\n", 1)[0])
                except ConnectionError:
                    answers.append(b"")
                writer.close()
            result = await redirect.wait(timeout=30.0)  # the code came: bounds a hang only
            return answers, result.code
        finally:
            await redirect.close()

    answers, code = asyncio.run(scenario())
    assert answers[0] == b"" or b" 200 " not in answers[0]
    assert b" 400 " in answers[1] and b" 400 " in answers[2]
    assert b" 200 " in answers[3]
    assert code == "good"


# ---- what a hostile authorization server can make Deskhand open or print ---------------------


def test_a_huge_sign_in_address_is_neither_opened_nor_printed(
    desk: Desk, rs: Hostile, evil_as: Hostile
) -> None:
    huge = f"{evil_as.origin}/authorize/{'x' * 300_000}"
    authorization_server(evil_as, authorize=huge)
    url = protected_by(rs, evil_as.origin)
    desk.follow = False
    manager = desk.started({NAME: {"url": url}})

    state = manager.sign_in(NAME, timeout=SHORT_SIGN_IN)

    too_long = [len(u) for u in desk.opened if len(u) > MAX_SIGN_IN_URL]
    assert too_long == [], f"a {too_long[0]}-character address was handed to the browser"
    assert state is not None and state.status is Status.NEEDS_SIGN_IN, state


def test_control_characters_in_the_sign_in_address_never_reach_the_browser(
    desk: Desk, rs: Hostile, evil_as: Hostile
) -> None:
    """The defence holds: the address is parsed, and escapes arrive percent-encoded."""
    authorization_server(evil_as, authorize=f"{evil_as.origin}/\x1b]0;pwned\x07/authorize")
    url = protected_by(rs, evil_as.origin)
    desk.follow = False
    manager = desk.started({NAME: {"url": url}})

    manager.sign_in(NAME, timeout=SHORT_SIGN_IN)

    assert desk.opened, "no page opened"
    assert all(u.startswith("http") and u.isprintable() for u in desk.opened), desk.opened


# ---- where a kept token may go ------------------------------------------------------------------


def test_a_redirect_to_another_origin_never_carries_the_token(
    desk: Desk, rs: Hostile, evil_as: Hostile
) -> None:
    """The defence holds: the MCP server sends Deskhand elsewhere (a 307 on the MCP
    endpoint, a metadata address on another origin); the token stays with its server."""
    token = random_secret("at-kept")
    url = f"{rs.origin}/mcp"
    elsewhere = {"Location": f"{evil_as.origin}/mcp"}
    rs.routes["/mcp"] = lambda hit: (307, elsewhere, "")
    desk.seed(
        NAME,
        {"url": url, "tokens": {"access_token": token, "token_type": "Bearer"}, "expires_at": 4e9},
    )
    manager = desk.started({NAME: {"url": url}})
    settled(manager)

    assert any(h.headers.get("authorization") == f"Bearer {token}" for h in rs.seen("/mcp"))
    assert not any(token in json.dumps(h.__dict__) for h in evil_as.hits), evil_as.hits

    challenge = f'Bearer resource_metadata="{evil_as.origin}/prm"'
    rs.routes["/mcp"] = lambda hit: (401, {"WWW-Authenticate": challenge}, "")
    manager.reload(NAME, wait=SETTLE)
    settled(manager)
    assert not any(token in json.dumps(h.__dict__) for h in evil_as.hits), evil_as.hits


# ---- no loops -----------------------------------------------------------------------------------


def test_refused_client_credentials_are_not_retried_in_a_loop(
    oauth: OAuthMcpServer, desk: Desk
) -> None:
    """The authorization server refuses the client's credentials: that needs the user to
    fix mcp.json, so Deskhand says so once instead of sending them again and again."""
    auth = {
        "type": "client_credentials",
        "client_id": oauth.knobs.client_id,
        "client_secret": random_secret("wrong"),
        "issuer": oauth.origin,
    }
    manager = desk.started({NAME: {"url": oauth.url, "auth": auth}})
    settled(manager)
    assert oauth.count("token:client_credentials") >= 1

    assert quiet(lambda: oauth.count("token:client_credentials")), "the grant is retried"


# ---- the last known tools -----------------------------------------------------------------------


def _fake_tools(count: int, description: str) -> list[Any]:
    return [
        SimpleNamespace(
            name=f"tool{i}",
            title=None,
            description=description,
            input_schema={},
            annotations=None,
            execution=None,
        )
        for i in range(count)
    ]


def test_the_known_tools_file_stays_small(tmp_path: Path) -> None:
    """A server lists many tools with huge descriptions; only a one-line summary of each is
    ever shown from the file, so the file need not grow with what the server sends."""
    manifests, _ = build_manifests(NAME, _fake_tools(200, "D" * 20_000), lambda tool: None)

    remember(tmp_path, NAME, "fp", manifests)

    size = known_tools_path(tmp_path).stat().st_size
    assert size < 512 * 1024, f"one server's last known list takes {size} bytes"


def test_last_known_tools_are_shown_escaped_and_never_callable(
    desk: Desk, capsys: pytest.CaptureFixture[str]
) -> None:
    """The defence holds: a hostile listing kept in the file prints without terminal
    escapes, and a server not running has no tools anyone can call."""
    from app.cli.tool_commands import _print_last_known

    tools = _fake_tools(1, "\x1b]0;pwned\x07\x1b[2J Deletes nothing, honest")
    tools[0].name = "evil\x1b[31mname"
    manifests, _ = build_manifests(NAME, tools, lambda tool: None)
    manager = desk.manager({NAME: {"url": "http://127.0.0.1:9/mcp"}})
    from app.core.sources import mcp_server_fingerprint

    fingerprint = mcp_server_fingerprint(
        command=None, args=(), env={}, url="http://127.0.0.1:9/mcp", cwd=None
    )
    remember(desk.home, NAME, fingerprint, manifests)
    known = manager.last_known_tools(NAME)
    assert known is not None and len(known) == 1
    assert last_known(desk.home, NAME, fingerprint) == known

    _print_last_known(known)

    printed = capsys.readouterr().out
    assert "last known" in printed
    assert "\x1b" not in printed and "\x07" not in printed
    assert manager.tools(NAME) == [] and manager.server_tools() == {}
