"""A real OAuth-protected MCP server for the tests: the MCP server of tests/mcp_servers.py over
Streamable HTTP at `/mcp`, behind `Authorization: Bearer <token>`, and a minimal OAuth 2.1
authorization server on the same origin.

Endpoints: `/.well-known/oauth-protected-resource[/mcp]` (RFC 9728),
`/.well-known/oauth-authorization-server` (RFC 8414), `POST /register` (RFC 7591),
`GET /authorize` (client, registered redirect_uri, PKCE S256 and state checked; 302 back to
the redirect_uri), `POST /token` (authorization_code with the code_verifier checked,
refresh_token, client_credentials with client_secret_basic). Everything it receives is
counted per endpoint (`count`) and kept (`seen`), so tests can assert what happened.

`Knobs` make it hostile or strict: a refused sign-in, a non-http authorization endpoint,
refused refreshes, short-lived access tokens, another authorization server named in its
resource metadata.

Started on 127.0.0.1 on a free port by `start()` (returns once the MCP session manager is
running and the socket listens), stopped by `stop()`; `serve()` does both around a block.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import socket
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from tests.mcp_servers import build

START_TIMEOUT = 20.0
PRM_PATH = "/.well-known/oauth-protected-resource"
ASM_PATH = "/.well-known/oauth-authorization-server"


@dataclass
class Knobs:
    """How the server behaves; tests may change these while it runs."""

    #: `expires_in` of each access token (and when the server stops accepting it).
    access_ttl: int = 3600
    #: /authorize redirects back with error=access_denied (the user said no).
    refuse: bool = False
    #: The `authorization_endpoint` advertised instead of this server's /authorize.
    authorization_endpoint: str | None = None
    #: The refresh_token grant answers invalid_grant.
    refuse_refresh: bool = False
    #: The authorization server the resource metadata names instead of this server.
    authorization_server: str | None = None
    #: The client registered beforehand, for client_credentials (client_secret_basic).
    client_id: str = "deskhand-machine"
    client_secret: str = field(default_factory=lambda: "cc-" + secrets.token_urlsafe(18))


@dataclass(frozen=True)
class Seen:
    """One request as the server received it."""

    endpoint: str
    method: str
    path: str
    authorization: str | None
    params: dict[str, str]


class OAuthMcpServer:
    def __init__(self, knobs: Knobs | None = None) -> None:
        self.knobs = knobs or Knobs()
        self._lock = threading.Lock()
        self._hits: Counter[str] = Counter()
        self._seen: list[Seen] = []
        self.clients: dict[str, dict[str, Any]] = {}
        self._codes: dict[str, dict[str, Any]] = {}
        self._access: dict[str, float] = {}  # token -> when it stops being accepted
        self._refresh: dict[str, str] = {}  # token -> client_id
        #: Every access and refresh token handed out, in order.
        self.issued: list[str] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self._mcp = self._build_mcp()
        self._mcp_app = self._mcp.streamable_http_app(host="127.0.0.1")
        self._routes = Starlette(
            routes=[
                Route(PRM_PATH, self._prm, methods=["GET"]),
                Route(PRM_PATH + "/mcp", self._prm, methods=["GET"]),
                Route(ASM_PATH, self._asm, methods=["GET"]),
                Route("/register", self._register, methods=["POST"]),
                Route("/authorize", self._authorize, methods=["GET"]),
                Route("/token", self._token, methods=["POST"]),
            ]
        )
        self._started = threading.Event()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    # ---- what tests look at -------------------------------------------------------------

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The MCP endpoint, as an mcp.json entry names it."""
        return f"{self.origin}/mcp"

    def count(self, endpoint: str) -> int:
        """Requests so far to `endpoint`: mcp, mcp-401, prm, asm, register, authorize,
        token, token:<grant_type>, not-found."""
        with self._lock:
            return self._hits[endpoint]

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._hits)

    def seen(self, endpoint: str | None = None) -> list[Seen]:
        with self._lock:
            return [s for s in self._seen if endpoint is None or s.endpoint == endpoint]

    def mcp_authorizations(self) -> list[str | None]:
        """The Authorization header of every request to /mcp, in order."""
        return [s.authorization for s in self.seen("mcp")]

    def access_tokens(self) -> list[str]:
        with self._lock:
            return list(self._access)

    def refresh_tokens(self) -> list[str]:
        with self._lock:
            return list(self._refresh)

    def last_bearer(self) -> str:
        """The last access token /mcp accepted ("" when none)."""
        for value in reversed(self.mcp_authorizations()):
            token = _bearer(value)
            if token and self._valid(token):
                return token
        return ""

    def expire_access_tokens(self) -> None:
        """Stop accepting every access token issued so far (refresh tokens still work)."""
        with self._lock:
            self._access = dict.fromkeys(self._access, 0.0)

    # ---- start and stop -----------------------------------------------------------------

    def start(self) -> OAuthMcpServer:
        self._sock.listen(64)
        config = uvicorn.Config(
            self, log_level="warning", lifespan="on", timeout_graceful_shutdown=2
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._sock]},
            daemon=True,
            name=f"oauth-mcp-{self.port}",
        )
        self._thread.start()
        if not self._started.wait(START_TIMEOUT):
            self.stop()
            raise RuntimeError("the OAuth MCP test server did not start")
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._sock.close()

    # ---- ASGI ---------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._mcp_app(scope, receive, self._watch_startup(send))
            return
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path.rstrip("/") == "/mcp":
            await self._guarded_mcp(scope, receive, send)
            return
        if path not in {r.path for r in self._routes.routes if isinstance(r, Route)}:
            self._note("not-found", Request(scope), {})
        await self._routes(scope, receive, send)

    def _watch_startup(self, send: Send) -> Send:
        async def watched(message: Message) -> None:
            await send(message)
            if message["type"] == "lifespan.startup.complete":
                self._started.set()

        return watched

    async def _guarded_mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        header = request.headers.get("authorization")
        self._note("mcp", request, {})
        token = _bearer(header)
        if token is None or not self._valid(token):
            with self._lock:
                self._hits["mcp-401"] += 1
            metadata = f"{self.origin}{PRM_PATH}/mcp"
            error = ', error="invalid_token"' if token else ""
            response = PlainTextResponse(
                "sign in first",
                status_code=401,
                headers={"WWW-Authenticate": f'Bearer resource_metadata="{metadata}"{error}'},
            )
            await response(scope, receive, send)
            return
        await self._mcp_app(scope, receive, send)

    def _valid(self, token: str) -> bool:
        with self._lock:
            return self._access.get(token, 0.0) > time.time()

    def _note(self, endpoint: str, request: Request, params: dict[str, str]) -> None:
        seen = Seen(
            endpoint,
            request.method,
            request.url.path,
            request.headers.get("authorization"),
            dict(params),
        )
        with self._lock:
            self._hits[endpoint] += 1
            self._seen.append(seen)

    # ---- the MCP server -----------------------------------------------------------------

    def _build_mcp(self) -> MCPServer:
        server = build()

        @server.tool(annotations=ToolAnnotations(read_only_hint=True))
        def leak() -> str:
            """A careless server: answers with the bearer token it was sent."""
            return f"your token is {self.last_bearer()}"

        return server

    # ---- the authorization server -------------------------------------------------------

    async def _prm(self, request: Request) -> Response:
        self._note("prm", request, {})
        return JSONResponse(
            {
                "resource": self.url,
                "authorization_servers": [self.knobs.authorization_server or self.origin],
                "bearer_methods_supported": ["header"],
            }
        )

    async def _asm(self, request: Request) -> Response:
        self._note("asm", request, {})
        return JSONResponse(
            {
                "issuer": self.origin,
                "authorization_endpoint": self.knobs.authorization_endpoint
                or f"{self.origin}/authorize",
                "token_endpoint": f"{self.origin}/token",
                "registration_endpoint": f"{self.origin}/register",
                "response_types_supported": ["code"],
                "grant_types_supported": [
                    "authorization_code",
                    "refresh_token",
                    "client_credentials",
                ],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
            }
        )

    async def _register(self, request: Request) -> Response:
        body = await request.json()
        self._note("register", request, {k: str(v) for k, v in body.items()})
        uris = body.get("redirect_uris")
        if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
            return _oauth_error("invalid_redirect_uri", "redirect_uris must be a list of URLs")
        client_id = "client-" + secrets.token_urlsafe(8)
        method = body.get("token_endpoint_auth_method") or "client_secret_basic"
        client = {
            **body,
            "client_id": client_id,
            "client_id_issued_at": int(time.time()),
            "token_endpoint_auth_method": method,
        }
        if method != "none":
            client["client_secret"] = "cs-" + secrets.token_urlsafe(18)
        with self._lock:
            self.clients[client_id] = client
        return JSONResponse(client, status_code=201)

    async def _authorize(self, request: Request) -> Response:
        query = dict(request.query_params)
        self._note("authorize", request, query)
        with self._lock:
            client = self.clients.get(query.get("client_id", ""))
        redirect = query.get("redirect_uri", "")
        if client is None:
            return PlainTextResponse("unknown client_id", status_code=400)
        if redirect not in client.get("redirect_uris", []):
            return PlainTextResponse("redirect_uri is not registered", status_code=400)
        state = query.get("state")
        back: dict[str, str] = {"state": state} if state else {}
        if query.get("response_type") != "code":
            return _back(redirect, error="unsupported_response_type", **back)
        if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
            return _back(redirect, error="invalid_request", **back)
        if not state:
            return _back(redirect, error="invalid_request")
        if self.knobs.refuse:
            return _back(redirect, error="access_denied", state=state)
        code = "code-" + secrets.token_urlsafe(16)
        with self._lock:
            self._codes[code] = {
                "client_id": client["client_id"],
                "redirect_uri": redirect,
                "challenge": query["code_challenge"],
            }
        return _back(redirect, code=code, state=state)

    async def _token(self, request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        grant = form.get("grant_type", "")
        self._note("token", request, form)
        with self._lock:
            self._hits[f"token:{grant}"] += 1
        if grant == "authorization_code":
            return self._code_grant(form)
        if grant == "refresh_token":
            return self._refresh_grant(form)
        if grant == "client_credentials":
            return self._client_credentials(request)
        return _oauth_error("unsupported_grant_type", grant)

    def _code_grant(self, form: dict[str, str]) -> Response:
        with self._lock:
            issued = self._codes.pop(form.get("code", ""), None)
        if issued is None:
            return _oauth_error("invalid_grant", "unknown or used code")
        if form.get("client_id") != issued["client_id"]:
            return _oauth_error("invalid_grant", "the code was issued to another client")
        if form.get("redirect_uri") != issued["redirect_uri"]:
            return _oauth_error("invalid_grant", "redirect_uri differs from the authorization")
        verifier = form.get("code_verifier", "")
        if _challenge(verifier) != issued["challenge"]:
            return _oauth_error("invalid_grant", "code_verifier does not match the challenge")
        return self._tokens(issued["client_id"], with_refresh=True)

    def _refresh_grant(self, form: dict[str, str]) -> Response:
        if self.knobs.refuse_refresh:
            return _oauth_error("invalid_grant", "refresh refused")
        with self._lock:
            client_id = self._refresh.get(form.get("refresh_token", ""))
        if client_id is None or client_id != form.get("client_id"):
            return _oauth_error("invalid_grant", "unknown refresh token")
        return self._tokens(client_id, with_refresh=False)

    def _client_credentials(self, request: Request) -> Response:
        header = request.headers.get("authorization") or ""
        scheme, _, encoded = header.partition(" ")
        try:
            pair = base64.b64decode(encoded).decode() if scheme.lower() == "basic" else ""
        except ValueError:
            pair = ""
        client_id, _, secret = pair.partition(":")
        if (unquote(client_id), unquote(secret)) != (
            self.knobs.client_id,
            self.knobs.client_secret,
        ):
            return _oauth_error("invalid_client", "bad client credentials", status=401)
        return self._tokens(self.knobs.client_id, with_refresh=False)

    def _tokens(self, client_id: str, *, with_refresh: bool) -> Response:
        access = "at-" + secrets.token_urlsafe(24)
        body: dict[str, Any] = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.knobs.access_ttl,
        }
        with self._lock:
            self._access[access] = time.time() + self.knobs.access_ttl
            self.issued.append(access)
            if with_refresh:
                refresh = "rt-" + secrets.token_urlsafe(24)
                self._refresh[refresh] = client_id
                self.issued.append(refresh)
                body["refresh_token"] = refresh
        return JSONResponse(body, headers={"Cache-Control": "no-store"})


def _bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def _challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _back(redirect_uri: str, **params: str) -> Response:
    joiner = "&" if urlsplit(redirect_uri).query else "?"
    return RedirectResponse(f"{redirect_uri}{joiner}{urlencode(params)}", status_code=302)


def _oauth_error(error: str, description: str, status: int = 400) -> Response:
    return JSONResponse({"error": error, "error_description": description}, status_code=status)


@contextmanager
def serve(knobs: Knobs | None = None) -> Iterator[OAuthMcpServer]:
    """A started server, stopped after the block."""
    server = OAuthMcpServer(knobs).start()
    try:
        yield server
    finally:
        server.stop()


# ---- a browser ------------------------------------------------------------------------------


def _opener(follow: bool) -> urllib.request.OpenerDirector:
    handlers: list[Any] = [urllib.request.ProxyHandler({})]  # 127.0.0.1 never via a proxy
    if not follow:
        handlers.append(_NoRedirect())
    return urllib.request.build_opener(*handlers)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def load(url: str, *, follow: bool = True) -> tuple[int, str, dict[str, str]]:
    """GET `url` as a browser would (following redirects unless told not to): the final
    status, address and headers."""
    try:
        with _opener(follow).open(url, timeout=20) as page:
            page.read()
            return page.status, page.url, dict(page.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.url, dict(exc.headers)
