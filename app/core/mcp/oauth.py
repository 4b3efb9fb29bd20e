"""Signing in to remote MCP servers with OAuth 2.1, through the SDK's OAuth support.

The SDK does the protocol (protected-resource and authorization-server metadata discovery,
dynamic client registration or a client metadata document, authorization code + PKCE,
refresh, client credentials, scope step-up). Deskhand adds what a desktop app needs:

- `KeyringTokenStore`: tokens, the registered client and the discovered metadata live in
  the OS keyring under `mcp/<server>/oauth`, bound to the server's URL — a stored token is
  never sent to another address, even if the user points the entry elsewhere. Every token
  joins the secret tripwire, so no tool result or log can carry it.
- Nobody is sent to a web page they did not ask for: while a server starts in the
  background, a 401 ends the attempt with `SignInNeeded` (status "needs sign-in"), before
  any client registration, and nothing retries it in a loop. Only `sign_in` — the user's
  Sign-in button or `deskhand mcp login` — opens the browser.
- `LoopbackRedirect`: the authorization code comes back to a one-shot HTTP listener on
  127.0.0.1 (RFC 8252); its port is kept with the registered client so the next sign-in
  reuses the registration.

Imports the SDK: load it only on the MCP thread, when a remote server starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from pydantic import AnyUrl

from app.core.mcp.client_callbacks import client_version
from app.core.mcp.config import AuthConfig
from app.core.mcp.secret_access import SecretAccess, token_key
from app.core.visible import visible

log = logging.getLogger(__name__)

#: How long a sign-in waits for the browser to come back with the code.
SIGN_IN_WAIT = 300.0
CALLBACK_PATH = "/callback"
#: Connections the loopback listener holds at once (a browser needs one or two).
MAX_CONNECTIONS = 8
#: Longer sign-in addresses are refused rather than handed to the browser.
MAX_SIGN_IN_URL = 8192
#: Where the redirect goes when no listener is bound (never used to sign in).
_NO_REDIRECT = "http://127.0.0.1/callback"


class SignInNeeded(Exception):
    """The server needs the user to sign in, and nobody asked to (background start, or a
    call asking for more access than the user granted)."""

    def __init__(self, server: str, *, more_access: bool = False) -> None:
        what = "asks for more access than you granted" if more_access else "needs you to sign in"
        super().__init__(
            f"the MCP server {server!r} {what}: press Sign in in "
            f"Settings › MCP servers, or run `deskhand mcp login {server}`"
        )


class SignInFailed(Exception):
    """The user tried to sign in and it did not work; the message says why."""


class KeyringTokenStore:
    """The SDK's `TokenStorage`, kept in the keyring as one JSON record per server.

    The record names the server URL it was made for; a record for another URL is ignored
    (and replaced on the next save). `redirect_uri` is the loopback address of this sign-in:
    a client registered for another address is not offered, so the SDK registers again."""

    def __init__(
        self,
        server: str,
        url: str,
        secrets: SecretAccess,
        *,
        redirect_uri: str | None = None,
        fixed_client: OAuthClientInformationFull | None = None,
    ) -> None:
        self.server = server
        self.url = url
        self._secrets = secrets
        self._redirect_uri = redirect_uri
        self._fixed_client = fixed_client
        self._record: dict[str, Any] | None = None

    # ---- the record ---------------------------------------------------------------------

    async def _load(self) -> dict[str, Any]:
        if self._record is None:
            self._record = await asyncio.to_thread(self.read_record)
        return self._record

    def read_record(self) -> dict[str, Any]:
        """Blocking: the stored record for this URL (empty when none, or for another URL)."""
        try:
            text = self._secrets.get(token_key(self.server))
        except Exception as exc:  # a locked or missing keyring: sign in again
            log.warning("MCP server %s: could not read its sign-in from the keyring: %s",
                        self.server, exc)
            return {}
        if not text:
            return {}
        try:
            record = json.loads(text)
        except ValueError:
            return {}
        if not isinstance(record, dict) or record.get("url") != self.url:
            return {}
        tokens = record.get("tokens") or {}
        client = record.get("client") or {}
        for value in (
            tokens.get("access_token"),
            tokens.get("refresh_token"),
            client.get("client_secret"),
        ):
            if isinstance(value, str):
                self._secrets.remember(value)
        return record

    async def _save(self, **changes: Any) -> None:
        record = dict(await self._load())
        record.update(changes, url=self.url)
        self._record = record
        try:
            await asyncio.to_thread(
                self._secrets.set, token_key(self.server), json.dumps(record)
            )
        except Exception as exc:
            log.warning("MCP server %s: could not keep its sign-in in the keyring: %s",
                        self.server, exc)

    # ---- TokenStorage -------------------------------------------------------------------

    async def get_tokens(self) -> OAuthToken | None:
        raw = (await self._load()).get("tokens")
        if not isinstance(raw, dict):
            return None
        try:
            return OAuthToken.model_validate(raw)
        except ValueError:
            return None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        for value in (tokens.access_token, tokens.refresh_token):
            if value:
                self._secrets.remember(value)
        expires_at = time.time() + tokens.expires_in if tokens.expires_in else None
        await self._save(
            tokens=tokens.model_dump(mode="json", exclude_none=True), expires_at=expires_at
        )

    async def expires_at(self) -> float | None:
        value = (await self._load()).get("expires_at")
        return float(value) if isinstance(value, int | float) else None

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self._fixed_client is not None:
            return self._fixed_client
        raw = (await self._load()).get("client")
        if not isinstance(raw, dict):
            return None
        try:
            client = OAuthClientInformationFull.model_validate(raw)
        except ValueError:
            return None
        registered = [str(u) for u in (client.redirect_uris or [])]
        if self._redirect_uri is not None and self._redirect_uri not in registered:
            return None  # registered for another loopback port: register again
        return client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if client_info.client_secret:
            self._secrets.remember(client_info.client_secret)
        await self._save(client=client_info.model_dump(mode="json", exclude_none=True))

    async def get_metadata(self) -> tuple[OAuthMetadata | None, ProtectedResourceMetadata | None]:
        record = await self._load()
        try:
            oauth = OAuthMetadata.model_validate(record["oauth"]) if record.get("oauth") else None
            prm = record.get("resource")
            resource = ProtectedResourceMetadata.model_validate(prm) if prm else None
        except ValueError:
            return None, None
        return oauth, resource

    async def set_metadata(
        self, oauth: OAuthMetadata | None, resource: ProtectedResourceMetadata | None
    ) -> None:
        await self._save(
            oauth=oauth.model_dump(mode="json", exclude_none=True) if oauth else None,
            resource=resource.model_dump(mode="json", exclude_none=True) if resource else None,
        )


# ---- the loopback redirect ----------------------------------------------------------------


_PAGE = (
    "<!doctype html><meta charset=utf-8><title>Deskhand</title>"
    "<body style='font-family:sans-serif;margin:3em'><h2>{title}</h2><p>{text}</p>"
)


class LoopbackRedirect:
    """A one-shot listener on 127.0.0.1 for the authorization server's redirect.

    Bound when created (so its port can go into the registration); it answers only
    `GET /callback` and only once, and gives up after `SIGN_IN_WAIT` seconds."""

    def __init__(self, server: str, port: int = 0) -> None:
        self.server_name = server
        self._sock = _bind(port)
        self.port = self._sock.getsockname()[1]
        self._result: asyncio.Future[AuthorizationCodeResult] | None = None
        self._server: asyncio.Server | None = None
        #: The `state` of the sign-in under way: a callback without it is someone else's
        #: (another local program guessing the port) and is ignored, not taken as the answer.
        self.expected_state: str | None = None
        self._open_connections = 0

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    async def start(self) -> None:
        self._result = asyncio.get_running_loop().create_future()
        self._server = await asyncio.start_server(self._serve, sock=self._sock)

    async def wait(self, timeout: float = SIGN_IN_WAIT) -> AuthorizationCodeResult:
        if self._result is None:
            await self.start()
        assert self._result is not None
        try:
            return await asyncio.wait_for(asyncio.shield(self._result), timeout)
        except TimeoutError:
            raise SignInFailed(
                f"no answer from the browser within {timeout / 60:.0f} minutes; "
                "press Sign in to try again"
            ) from None

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        self._sock.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._open_connections >= MAX_CONNECTIONS:  # someone is holding the port open
            writer.close()
            return
        self._open_connections += 1
        try:
            async with asyncio.timeout(5):
                line = await reader.readline()
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # headers: not needed
            method, target, *_ = [*line.decode("latin-1").split(" "), "", ""]
            parts = urlsplit(target)
            if method != "GET" or parts.path != CALLBACK_PATH or self._done:
                await _answer(writer, 404, "Not found", "Nothing here.")
                return
            query = parse_qs(parts.query)
            first = {k: v[0] for k, v in query.items() if v}
            if self.expected_state is not None and first.get("state") != self.expected_state:
                await _answer(writer, 400, "Unknown sign-in", "This is not the sign-in under way.")
                return
            if "error" in first:
                why = first.get("error_description") or first["error"]
                self._finish(SignInFailed(f"the sign-in was refused: {why[:200]}"))
                await _answer(writer, 200, "Sign-in refused", "You can close this tab.")
                return
            if not first.get("code"):
                await _answer(writer, 400, "No code", "The address had no authorization code.")
                return
            self._finish(
                AuthorizationCodeResult(
                    code=first["code"], state=first.get("state"), iss=first.get("iss")
                )
            )
            await _answer(
                writer,
                200,
                "Signed in",
                "Deskhand has what it needs. You can close this tab and go back.",
            )
        except (TimeoutError, ConnectionError, ValueError, asyncio.LimitOverrunError):
            pass
        finally:
            self._open_connections -= 1
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    @property
    def _done(self) -> bool:
        return self._result is None or self._result.done()

    def _finish(self, outcome: AuthorizationCodeResult | Exception) -> None:
        if self._result is None or self._result.done():
            return
        if isinstance(outcome, Exception):
            self._result.set_exception(outcome)
        else:
            self._result.set_result(outcome)
        if self._server is not None:
            self._server.close()  # one answer only: stop listening


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        if port == 0:
            sock.close()
            raise
        sock.close()
        return _bind(0)  # the registered port is taken: register again with a new one
    sock.listen(4)
    sock.setblocking(False)
    return sock


async def _answer(writer: asyncio.StreamWriter, status: int, title: str, text: str) -> None:
    body = _PAGE.format(title=title, text=text).encode()
    head = (
        f"HTTP/1.1 {status} {title}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n"
        "Cache-Control: no-store\r\n\r\n"
    )
    writer.write(head.encode() + body)
    await writer.drain()


async def loopback_for(server: str, url: str, secrets: SecretAccess) -> LoopbackRedirect:
    """A listener for signing in to `server`, on the port its stored registration names
    when that port is free (so the registration is reused), else on a new one."""
    record = await asyncio.to_thread(KeyringTokenStore(server, url, secrets).read_record)
    return LoopbackRedirect(server, registered_port(record))


def registered_port(record: dict[str, Any]) -> int:
    """The loopback port the stored client was registered with (0: none)."""
    for uri in (record.get("client") or {}).get("redirect_uris") or []:
        parts = urlsplit(str(uri))
        if parts.hostname == "127.0.0.1" and parts.port:
            return parts.port
    return 0


# ---- the providers ------------------------------------------------------------------------


class _Remembering:
    """What every Deskhand provider adds to the SDK's: stored expiry and metadata (so a
    restart refreshes an expired token instead of asking to sign in again), and what went
    wrong (`problem`), since the transport may hide the exception behind a closed stream."""

    context: Any
    _initialized: bool
    _store: KeyringTokenStore
    #: SignInNeeded or SignInFailed from the last request, if any.
    problem: Exception | None = None

    async def _initialize(self) -> None:
        await super()._initialize()  # type: ignore[misc]
        store = self._store
        expires_at = await store.expires_at()
        if self.context.current_tokens is not None and expires_at is not None:
            self.context.token_expiry_time = expires_at
        oauth, resource = await store.get_metadata()
        if self.context.oauth_metadata is None:
            self.context.oauth_metadata = oauth
        if self.context.protected_resource_metadata is None:
            self.context.protected_resource_metadata = resource


class DeskhandOAuth(_Remembering, OAuthClientProvider):
    """Authorization code + PKCE in the system browser. With `interactive` False (a start in
    the background) the first 401 ends the attempt with `SignInNeeded`, before anything is
    registered or opened."""

    def __init__(
        self,
        server: str,
        url: str,
        auth: AuthConfig,
        store: KeyringTokenStore,
        *,
        redirect: LoopbackRedirect | None,
        open_url: Callable[[str], object],
        current_redirect: Callable[[], LoopbackRedirect | None] | None = None,
    ) -> None:
        self._server = server
        self._store = store
        #: The connection's listener now: the browser may open only while the user signs in,
        #: and only through the listener this attempt was made for (its address is the one
        #: registered).
        self._initial = redirect
        self._current = current_redirect or (lambda: redirect)
        self._open_url = open_url
        metadata = OAuthClientMetadata(
            client_name="Deskhand",
            software_id="deskhand",
            software_version=client_version(),
            redirect_uris=[AnyUrl(redirect.uri if redirect else _NO_REDIRECT)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="client_secret_basic" if auth.client_secret else "none",
            scope=auth.scope,
        )
        super().__init__(
            url,
            metadata,
            store,
            redirect_handler=self._send_to_browser,
            callback_handler=self._wait_for_code,
            client_metadata_url=auth.client_metadata_url,
        )

    @property
    def _redirect(self) -> LoopbackRedirect | None:
        current = self._current()
        return current if current is not None and current is self._initial else None

    @property
    def interactive(self) -> bool:
        return self._redirect is not None

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, Any]:
        """The SDK's flow, watched: a 401 in the background ends it (`SignInNeeded`) unless a
        refresh token can renew the access token first (the server may reject a token the
        SDK's clock thinks valid: revoked, no `expires_in`, clock skew); metadata naming a
        sign-in page that is not a web address ends it with the reason."""
        refreshed = False
        while True:
            flow = super()._auth_flow(request)
            retry = False
            try:
                outgoing = await flow.__anext__()
                _check_send(outgoing, request, self.context, self._expected_issuer)
                while True:
                    response = yield outgoing
                    if outgoing is request and response.status_code == 401:
                        if not refreshed and self.context.can_refresh_token():
                            refreshed = retry = True
                            self.context.token_expiry_time = 1.0  # expired: refresh, retry
                            break
                        if not self.interactive:
                            raise SignInNeeded(self._server)
                    if (
                        outgoing is request
                        and not self.interactive
                        and response.status_code == 403
                        and "insufficient_scope" in response.headers.get("www-authenticate", "")
                    ):
                        raise SignInNeeded(self._server, more_access=True)
                    await _check_metadata(outgoing, response)
                    outgoing = await flow.asend(response)
                    _check_send(outgoing, request, self.context, self._expected_issuer)
                    if outgoing is request:
                        await self._store.set_metadata(
                            self.context.oauth_metadata,
                            self.context.protected_resource_metadata,
                        )
            except StopAsyncIteration:
                return
            except (SignInNeeded, SignInFailed) as exc:
                raise self._fail(exc) from None
            except Exception as exc:
                if self.interactive:
                    raise self._fail(
                        SignInFailed(f"signing in did not work: {_plain(exc)}")
                    ) from exc
                raise
            finally:
                await flow.aclose()
            if not retry:
                return

    def _fail(self, exc: Exception) -> Exception:
        self.problem = exc
        return exc

    async def _send_to_browser(self, authorization_url: str) -> None:
        redirect = self._redirect
        if redirect is None:  # nobody pressed Sign in: never open a page
            raise self._fail(SignInNeeded(self._server, more_access=True))
        if len(authorization_url) > MAX_SIGN_IN_URL:
            raise SignInFailed(
                f"the server's sign-in address is too long ({len(authorization_url)} "
                "characters); Deskhand did not open it"
            )
        parts = urlsplit(authorization_url)
        if parts.scheme not in {"https", "http"} or not parts.hostname:
            raise SignInFailed(
                f"the server's sign-in page is not a web address ({parts.scheme or 'none'}:); "
                "Deskhand did not open it"
            )
        states = parse_qs(parts.query).get("state")
        redirect.expected_state = states[0] if states else None
        await redirect.start()
        log.info("MCP server %s: opening the sign-in page at %s", self._server, parts.hostname)
        await asyncio.to_thread(self._open_url, authorization_url)

    async def _wait_for_code(self) -> AuthorizationCodeResult:
        redirect = self._redirect
        if redirect is None:
            raise self._fail(SignInNeeded(self._server))
        return await redirect.wait()


class _Guarded:
    """Client credentials: a refusal at the token endpoint ends the attempt for good
    (`problem`), so the connection waits for the user to fix mcp.json instead of sending
    the secret again and again."""

    problem: Exception | None = None

    context: Any

    def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, Any]:
        return self._guarded(super()._auth_flow(request), request)  # type: ignore[misc]

    def _guarded(self, flow: Any, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, Any]:
        issuer = getattr(self, "_expected_issuer", None)

        async def run() -> AsyncGenerator[httpx2.Request, Any]:
            try:
                outgoing = await flow.__anext__()
                _check_send(outgoing, request, self.context, issuer)
                while True:
                    response = yield outgoing
                    await _check_metadata(outgoing, response)
                    outgoing = await flow.asend(response)
                    _check_send(outgoing, request, self.context, issuer)
            except StopAsyncIteration:
                return
            except SignInFailed as exc:  # an endpoint Deskhand will not send the secret to
                self.problem = exc
                raise
            except Exception as exc:
                self.problem = SignInFailed(
                    "the authorization server refused Deskhand's client credentials "
                    f"({_plain(exc)}); check auth in mcp.json"
                )
                raise self.problem from exc
            finally:
                await flow.aclose()

        return run()


class DeskhandClientCredentials(_Guarded, _Remembering, ClientCredentialsOAuthProvider):
    def __init__(self, url: str, auth: AuthConfig, store: KeyringTokenStore) -> None:
        assert auth.client_id and auth.client_secret
        method = auth.method if auth.method == "client_secret_post" else "client_secret_basic"
        super().__init__(
            url,
            store,
            auth.client_id,
            auth.client_secret,
            token_endpoint_auth_method=method,
            scope=auth.scope,
            issuer=auth.issuer,
        )
        self._store = store


class DeskhandPrivateKeyJWT(_Guarded, _Remembering, PrivateKeyJWTOAuthProvider):
    def __init__(self, url: str, auth: AuthConfig, store: KeyringTokenStore) -> None:
        assert auth.client_id and auth.private_key_file
        key = _read_key(auth.private_key_file)
        params = SignedJWTParameters(
            issuer=auth.client_id,
            subject=auth.client_id,
            signing_key=key,
            signing_algorithm=auth.signing_algorithm,
        )
        super().__init__(
            url,
            store,
            auth.client_id,
            params.create_assertion_provider(),
            scope=auth.scope,
            issuer=auth.issuer,
        )
        self._store = store


_METADATA_PATHS = ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration")
_ENDPOINTS = ("authorization_endpoint", "token_endpoint", "registration_endpoint")


async def _check_metadata(request: httpx2.Request, response: httpx2.Response) -> None:
    """Authorization-server metadata whose endpoints are not web addresses (`javascript:`,
    `file:`…) ends the sign-in saying so; the SDK alone would drop the document and guess
    endpoints at the server's origin, and the user would never learn why."""
    if response.status_code != 200 or not request.url.path.startswith(_METADATA_PATHS):
        return
    try:
        data = json.loads(await response.aread())
    except ValueError:
        return
    if not isinstance(data, dict):
        return
    for key in _ENDPOINTS:
        value = data.get(key)
        if value is None:
            continue
        parts = urlsplit(str(value))
        if parts.scheme not in {"https", "http"} or not parts.hostname:
            scheme = visible(parts.scheme or "none", keep_newlines=False)[:20]
            raise SignInFailed(
                f"the server's sign-in settings name a {key.replace('_', ' ')} that is not a "
                f"web address ({scheme}:); Deskhand did not open or use it"
            )
    issuer = str(data.get("issuer") or f"{request.url.scheme}://{request.url.netloc.decode()}")
    for key in _SECRET_ENDPOINTS:
        value = data.get(key)
        if value is not None:
            _require_own_endpoint(str(value), issuer, key.replace("_", " "))
    registration = data.get("registration_endpoint")
    if registration is not None and not _secure(urlsplit(str(registration))):
        raise SignInFailed(
            f"the server's sign-in settings name a registration endpoint that is not https "
            f"({_shown(str(registration))}): the client secret it hands out could be read "
            "on the way; Deskhand stopped signing in"
        )


#: Endpoints the client secret, a code, a refresh token or an assertion is sent to: they
#: must be https (plain http only on this machine) on the authorization server's own host.
_SECRET_ENDPOINTS = ("token_endpoint",)
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_FORM = "application/x-www-form-urlencoded"


def _secure(parts: Any) -> bool:
    return bool(parts.hostname) and (
        parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in _LOOPBACK)
    )


def _host_port(parts: Any) -> tuple[str, int] | None:
    try:
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80)


def _shown(url: str) -> str:
    return visible(url, keep_newlines=False)[:200]


def _require_own_endpoint(endpoint: str, issuer: str, what: str = "token endpoint") -> None:
    """SignInFailed unless `endpoint` is https (http only on this machine) on the host and
    port of `issuer`: a hostile server's metadata must not make Deskhand send its client
    secret, a code or a token in the clear or to another host."""
    parts, home = urlsplit(endpoint), urlsplit(issuer)
    own = _host_port(parts)
    if not _secure(parts) or own is None or own != _host_port(home):
        where = _host_port(home)
        host = f"{where[0]}:{where[1]}" if where else _shown(issuer)
        raise SignInFailed(
            f"the server's sign-in settings send Deskhand's credentials to the {what} "
            f"{_shown(endpoint)}, which is not an https address on the authorization "
            f"server's own host ({host}); Deskhand stopped signing in and sent nothing there"
        )


def _check_send(
    outgoing: httpx2.Request,
    request: httpx2.Request,
    context: Any,
    expected_issuer: Callable[[], str] | None,
) -> None:
    """Before the flow sends a request of its own that can carry the client secret, a code,
    a refresh token or an assertion (a form post, or one with an Authorization header):
    its address must pass `_require_own_endpoint` for the authorization server's issuer.
    Also covers metadata kept from an earlier sign-in."""
    if outgoing is request:
        return
    form = outgoing.headers.get("content-type", "").startswith(_FORM)
    if not form and "authorization" not in outgoing.headers:
        return
    metadata = getattr(context, "oauth_metadata", None)
    issuer = str(metadata.issuer) if metadata is not None and metadata.issuer else None
    if issuer is None and expected_issuer is not None:
        issuer = expected_issuer()
    if issuer is None:
        issuer = str(getattr(context, "server_url", "") or "")
    _require_own_endpoint(str(outgoing.url), issuer)


def _plain(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


def _read_key(path: str) -> str:
    file = Path(path).expanduser()
    try:
        return file.read_text("utf-8")
    except OSError as exc:
        raise SignInFailed(
            f"could not read the private key file {file.name!r}: {exc.strerror or exc}"
        ) from None


def make_auth(
    server: str,
    url: str,
    auth: AuthConfig,
    secrets: SecretAccess,
    *,
    redirect: LoopbackRedirect | None,
    open_url: Callable[[str], object],
    current_redirect: Callable[[], LoopbackRedirect | None] | None = None,
) -> httpx2.Auth | None:
    """The httpx auth for one connection attempt (None: `auth` is "none"). `redirect` is
    the listener of a sign-in under way when the attempt starts; `current_redirect` tells
    later whether one still is (none: nothing may open the browser)."""
    if auth.kind == "none":
        return None
    if auth.kind == "client_credentials":
        store = KeyringTokenStore(server, url, secrets)
        if auth.method == "private_key_jwt":
            return DeskhandPrivateKeyJWT(url, auth, store)
        return DeskhandClientCredentials(url, auth, store)
    fixed = None
    if auth.client_id:
        fixed = OAuthClientInformationFull(
            client_id=auth.client_id,
            client_secret=auth.client_secret,
            issuer=auth.issuer,
            redirect_uris=[AnyUrl(redirect.uri if redirect else _NO_REDIRECT)],
            token_endpoint_auth_method=auth.method or (
                "client_secret_basic" if auth.client_secret else "none"
            ),
        )
    store = KeyringTokenStore(
        server, url, secrets, redirect_uri=redirect.uri if redirect else None, fixed_client=fixed
    )
    return DeskhandOAuth(
        server,
        url,
        auth,
        store,
        redirect=redirect,
        open_url=open_url,
        current_redirect=current_redirect,
    )
