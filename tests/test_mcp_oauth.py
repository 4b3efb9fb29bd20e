"""Signing in to remote MCP servers with OAuth 2.1, against a real
OAuth-protected MCP server (tests/oauth_server.py: Streamable HTTP behind a bearer token, with
its own authorization server) and Deskhand's real manager, connection and providers.

The keyring is `SecretStore` over an in-memory keyring backend (the tests are about what is
stored, not about D-Bus); the `deskhand mcp login/logout` test runs the real CLI as a
subprocess against the real Secret Service of tests/fixtures_keyring.py, since a subprocess
cannot see an in-memory keyring. The "browser" loads the sign-in page and follows its
redirects to Deskhand's loopback listener, as a browser does after the user agreed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from app.core import secrets as app_secrets
from app.core.logging_setup import RedactingFilter
from app.core.mcp.config import keyring_key, read_config
from app.core.mcp.manager import McpManager
from app.core.mcp.secret_access import SecretAccess, token_key
from app.core.mcp.status import ServerState, Status
from app.core.secrets import SecretStore, known_secret_values, remember_secret
from tests.fixtures_keyring import MemoryKeyring
from tests.oauth_server import Knobs, OAuthMcpServer, load, serve
from tests.test_cli import REPO, deskhand, deskhand_env
from tests.test_mcp import wait_for, write_config
from tools.redact import TRIPWIRE
from tools.registry import ToolRegistry
from tools.runner import ToolRunner
from tools.spec import ToolContext, ToolError

NAME = "files"
#: Long enough for a real sign-in on a slow machine, short enough that a hang fails quickly.
SIGN_IN = 20.0
#: How long a failing sign-in (no answer from the browser) may hold a test.
SHORT_SIGN_IN = 5.0
SETTLE = 15.0
#: A server that retried on its own would do so within `backoff_start` (0.05 s here); this
#: window would see many retries.
QUIET = 1.0


class Browser:
    """The user's browser, with a user who agrees: every page asked for is recorded; an
    http(s) one is loaded and its redirects followed (the last lands on the loopback)."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.landed: list[tuple[int, str]] = []

    def __call__(self, url: str) -> bool:
        self.opened.append(url)
        if urlsplit(url).scheme not in {"http", "https"}:
            return False
        status, final, _ = load(url)
        self.landed.append((status, final))
        return True


class Deskhand:
    """One home folder with a keyring; makes managers (a new one is a restart of the app)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.keyring = MemoryKeyring()
        self.store = SecretStore(backend=self.keyring)
        self.browser = Browser()
        self._managers: list[McpManager] = []

    def configure(self, servers: dict[str, Any]) -> Path:
        return write_config(self.home, servers)

    def manager(self, *, ready_wait: float = 20.0) -> McpManager:
        store = self.store
        manager = McpManager(
            self.home / "mcp.json",
            home=self.home,
            get_secret=store.get,
            remember_secret=remember_secret,
            backoff_start=0.05,
            ready_wait=ready_wait,
            open_url=self.browser,
            secrets=SecretAccess(
                get=store.get, set=store.set, delete=store.delete, remember=remember_secret
            ),
        )
        self._managers.append(manager)
        return manager

    def record(self, server: str = NAME) -> dict[str, Any] | None:
        text = self.store.get(token_key(server))
        return json.loads(text) if text else None

    def close(self) -> None:
        for manager in self._managers:
            manager.shutdown()


@pytest.fixture(autouse=True)
def own_tripwire(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tripwire's set of known secrets is process-wide: each test starts with its own,
    so one test's tokens neither satisfy another's assertions nor slow the rest of the run
    (each new secret recompiles the redaction pattern)."""
    monkeypatch.setattr(app_secrets, "_known", set())


@pytest.fixture
def oauth() -> Iterator[OAuthMcpServer]:
    with serve() as server:
        yield server


@pytest.fixture
def app(home: Path) -> Iterator[Deskhand]:
    deskhand = Deskhand(home)
    try:
        yield deskhand
    finally:
        deskhand.close()


def started(app: Deskhand, url: str, **entry: Any) -> McpManager:
    """A manager with `url` as the server NAME, started in the background, once its first
    attempt is over. (Polled rather than `start(wait=…)`, which waits out its whole timeout
    for a server whose first attempt ends before the wait begins: see
    test_waiting_for_a_server_that_needs_sign_in_returns_at_once.)"""
    app.configure({NAME: {"url": url, **entry}})
    return restarted(app)


def restarted(app: Deskhand) -> McpManager:
    """Deskhand started again with the same home and keyring, once its first attempt is over."""
    manager = app.manager()
    manager.start()
    over = {Status.READY, Status.NEEDS_SIGN_IN, Status.FAILED, Status.RESTARTING, Status.INVALID}
    assert wait_for(lambda: _status(manager) in over, SETTLE), manager.status(NAME)
    return manager


def _status(manager: McpManager) -> Status | None:
    state = manager.status(NAME)
    return state.status if state is not None else None


def signed_in(app: Deskhand, oauth: OAuthMcpServer) -> McpManager:
    manager = started(app, oauth.url)
    state = manager.sign_in(NAME, timeout=SIGN_IN)
    assert state is not None and state.status is Status.READY, state
    return manager


def quiet(*readings: Callable[[], object]) -> bool:
    """Whether every reading stays the same for QUIET seconds. Nothing happening sends no
    event, so this is a bounded poll; with backoff_start at 0.05 s a retry loop would show
    within the first tenth of the window."""
    before = [read() for read in readings]
    return not wait_for(lambda: [read() for read in readings] != before, QUIET)


def call(manager: McpManager, home: Path, tool: str, **args: Any) -> Any:
    manifest = {m.name: m for m in manager.tools(NAME)}[f"mcp__{NAME}__{tool}"]
    assert callable(manifest.impl)
    return manifest.impl(manifest.params.model_validate(args), ToolContext(home=home))


def needs_sign_in(state: ServerState | None) -> str:
    assert state is not None and state.status is Status.NEEDS_SIGN_IN, state
    return state.error or ""


# ---- a background start never sends anyone anywhere -------------------------------------------


def test_background_start_needs_sign_in_opens_nothing_and_is_not_retried(
    oauth: OAuthMcpServer, app: Deskhand
) -> None:
    manager = started(app, oauth.url)
    changes: list[Status] = []
    manager.subscribe(lambda state: changes.append(state.status))

    error = needs_sign_in(manager.status(NAME))
    assert "Sign in" in error and f"deskhand mcp login {NAME}" in error
    assert app.browser.opened == []
    for endpoint in ("register", "authorize", "token"):
        assert oauth.count(endpoint) == 0, oauth.counts()
    assert oauth.count("mcp") >= 1 and app.record() is None

    # it waits for the user: no retry, no status change
    assert quiet(lambda: oauth.count("mcp"), lambda: len(changes))
    needs_sign_in(manager.status(NAME))
    assert changes == [] and app.browser.opened == []


def test_calls_to_a_server_that_needs_sign_in_fail_fast_saying_so(
    oauth: OAuthMcpServer, app: Deskhand
) -> None:
    """Nothing will change until the user signs in, so a call does not wait for it."""
    app.configure({NAME: {"url": oauth.url}})
    manager = app.manager(ready_wait=30.0)  # waiting for it would show as 30 s
    manager.start()
    assert wait_for(lambda: _status(manager) is Status.NEEDS_SIGN_IN, SETTLE)

    hint = manager.missing_tool_hint(f"mcp__{NAME}__echo")
    assert hint is not None and f"deskhand mcp login {NAME}" in hint

    began = time.monotonic()
    with pytest.raises(ToolError) as failed:
        manager.call_tool(NAME, "echo", {"text": "hi"}, ToolContext(home=app.home))
    took = time.monotonic() - began
    assert f"deskhand mcp login {NAME}" in str(failed.value)
    assert took < 15, f"the call waited {took:.1f} s for a server that waits for the user"


def test_waiting_for_a_server_that_needs_sign_in_returns_at_once(
    oauth: OAuthMcpServer, app: Deskhand
) -> None:
    """`start(wait=…)` / `wait_settled` stop waiting once the first attempt is over; here it
    is over (needs sign-in) before the wait begins, as it is for a second `mcp list`, or a
    `tools call` to a server that already said it needs the user."""
    manager = started(app, oauth.url)
    needs_sign_in(manager.status(NAME))

    for wait in (lambda: manager.wait_settled(30.0, [NAME]), lambda: manager.start(wait=30.0)):
        began = time.monotonic()
        needs_sign_in(next(s for s in wait() if s.name == NAME))
        took = time.monotonic() - began
        assert took < 15, f"waited {took:.1f} s for a server that waits for the user"


# ---- signing in ---------------------------------------------------------------------------------


def test_sign_in_through_the_browser_then_tools_work_with_the_token(
    oauth: OAuthMcpServer, app: Deskhand
) -> None:
    manager = started(app, oauth.url)
    assert not manager.signed_in(NAME)
    state = manager.sign_in(NAME, timeout=SIGN_IN)

    assert state is not None and state.status is Status.READY, state
    assert {"echo", "add", "leak"} <= set(state.tools)
    assert manager.signed_in(NAME)

    # one page opened: this server's /authorize, with PKCE S256 and a loopback redirect
    [page] = app.browser.opened
    parts = urlsplit(page)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert (parts.hostname, parts.port, parts.path) == ("127.0.0.1", oauth.port, "/authorize")
    assert query["code_challenge_method"] == "S256" and query["state"]
    loopback = urlsplit(query["redirect_uri"])
    assert (loopback.scheme, loopback.hostname, loopback.path) == ("http", "127.0.0.1", "/callback")
    [client] = oauth.clients.values()
    assert client["redirect_uris"] == [query["redirect_uri"]]
    assert client["token_endpoint_auth_method"] == "none"
    # the browser ended on Deskhand's listener, which answered
    assert app.browser.landed == [(200, app.browser.landed[0][1])]
    assert app.browser.landed[0][1].startswith(query["redirect_uri"] + "?")
    assert (oauth.count("register"), oauth.count("authorize")) == (1, 1)
    assert oauth.count("token:authorization_code") == 1

    # a tool call goes with the bearer token
    assert call(manager, app.home, "echo", text="hi", times=2).content == "hi hi"
    [access] = oauth.access_tokens()
    assert oauth.mcp_authorizations()[-1] == f"Bearer {access}"

    # the record is in the keyring under mcp/<server>/oauth, bound to the URL
    record = app.record()
    assert record is not None and record["url"] == oauth.url
    assert record["tokens"]["access_token"] == access
    assert record["tokens"]["refresh_token"] in oauth.refresh_tokens()
    assert record["client"]["client_id"] == client["client_id"]
    assert ("deskhand", keyring_key(NAME, "oauth")) in app.keyring.items


def test_a_restart_uses_the_stored_sign_in(oauth: OAuthMcpServer, app: Deskhand) -> None:
    signed_in(app, oauth).shutdown()
    before = oauth.counts()
    [access] = oauth.access_tokens()

    manager = restarted(app)

    assert manager.status(NAME).status is Status.READY  # type: ignore[union-attr]
    assert call(manager, app.home, "add", a=2, b=3).content == "5"
    for endpoint in ("register", "authorize", "token", "prm", "asm"):
        assert oauth.count(endpoint) == before.get(endpoint, 0), endpoint
    assert oauth.mcp_authorizations()[-1] == f"Bearer {access}"
    assert len(app.browser.opened) == 1


def test_an_expired_access_token_is_refreshed_on_restart(
    oauth: OAuthMcpServer, app: Deskhand
) -> None:
    signed_in(app, oauth).shutdown()
    [old_access] = oauth.access_tokens()
    [refresh] = oauth.refresh_tokens()
    oauth.expire_access_tokens()
    record = app.record()
    assert record is not None
    app.store.set(token_key(NAME), json.dumps({**record, "expires_at": time.time() - 60}))
    authorizations = oauth.count("authorize")

    manager = restarted(app)

    assert manager.status(NAME).status is Status.READY  # type: ignore[union-attr]
    assert oauth.count("token:refresh_token") == 1
    assert oauth.count("authorize") == authorizations and len(app.browser.opened) == 1
    [grant] = [s for s in oauth.seen("token") if s.params.get("grant_type") == "refresh_token"]
    assert grant.params["refresh_token"] == refresh
    new_access = oauth.access_tokens()[-1]
    assert new_access != old_access
    assert oauth.mcp_authorizations()[-1] == f"Bearer {new_access}"
    stored = app.record()
    assert stored is not None and stored["tokens"]["access_token"] == new_access
    assert stored["tokens"]["refresh_token"] == refresh  # kept: the server did not rotate it
    assert stored["expires_at"] > time.time()


def test_a_token_the_server_stopped_accepting_is_refreshed_not_signed_in_again(
    oauth: OAuthMcpServer, app: Deskhand
) -> None:
    """The server stops accepting the access token before the expiry Deskhand noted
    (revoked, shortened, or a clock apart): a stored refresh token still works, so a start
    in the background must use it rather than ask the user to sign in again."""
    signed_in(app, oauth).shutdown()
    oauth.expire_access_tokens()  # the keyring still says it is valid for an hour

    manager = restarted(app)

    state = manager.status(NAME)
    assert state is not None and state.status is Status.READY, state
    assert oauth.count("token:refresh_token") == 1 and len(app.browser.opened) == 1


def test_a_refused_refresh_needs_sign_in_without_opening_the_browser(
    oauth: OAuthMcpServer, app: Deskhand
) -> None:
    signed_in(app, oauth).shutdown()
    oauth.expire_access_tokens()
    record = app.record()
    assert record is not None
    app.store.set(token_key(NAME), json.dumps({**record, "expires_at": time.time() - 60}))
    oauth.knobs.refuse_refresh = True
    before = oauth.counts()

    manager = restarted(app)

    needs_sign_in(manager.status(NAME))
    assert oauth.count("token:refresh_token") == 1
    assert oauth.count("authorize") == before["authorize"]
    assert oauth.count("register") == before["register"]
    assert len(app.browser.opened) == 1
    assert quiet(lambda: oauth.count("mcp"), lambda: oauth.count("token"))


def test_the_token_is_bound_to_the_url(oauth: OAuthMcpServer, app: Deskhand) -> None:
    manager = signed_in(app, oauth)
    old = list(oauth.issued)
    with serve() as other:
        app.configure({NAME: {"url": other.url}})
        state = manager.reload(NAME, wait=SETTLE)

        needs_sign_in(state)
        received = other.seen()
        assert received, "the second server was never contacted"
        assert all(s.authorization is None for s in received), received
        assert not any(token in repr(received) for token in old)
        assert other.count("register") == 0 and len(app.browser.opened) == 1

        state = manager.sign_in(NAME, timeout=SIGN_IN)
        assert state is not None and state.status is Status.READY, state
        record = app.record()
        assert record is not None and record["url"] == other.url
        assert record["tokens"]["access_token"] in other.access_tokens()
        manager.shutdown()


def test_sign_out_forgets_the_tokens(oauth: OAuthMcpServer, app: Deskhand) -> None:
    manager = signed_in(app, oauth)
    assert manager.signed_in(NAME)
    authorizations = oauth.count("authorize")

    state = manager.sign_out(NAME)
    assert state is not None
    assert app.record() is None and not manager.signed_in(NAME)
    state = manager.wait_settled(SETTLE, [NAME])[0]
    needs_sign_in(state)
    assert oauth.count("authorize") == authorizations and len(app.browser.opened) == 1
    # the old token is not sent any more
    [access] = oauth.access_tokens()
    assert oauth.mcp_authorizations()[-1] != f"Bearer {access}"


# ---- a sign-in that does not work ---------------------------------------------------------------


def test_a_refused_sign_in_says_so_and_does_not_loop(oauth: OAuthMcpServer, app: Deskhand) -> None:
    oauth.knobs.refuse = True
    manager = started(app, oauth.url)

    state = manager.sign_in(NAME, timeout=SIGN_IN)

    assert "refused" in needs_sign_in(state)
    assert oauth.count("authorize") == 1 and oauth.count("token") == 0
    assert app.record() is None or "tokens" not in (app.record() or {})
    assert quiet(lambda: oauth.count("mcp"), lambda: oauth.count("authorize"))
    assert len(app.browser.opened) == 1

    # the user changes their mind and presses Sign in again
    oauth.knobs.refuse = False
    state = manager.sign_in(NAME, timeout=SIGN_IN)
    assert state is not None and state.status is Status.READY, state
    assert len(app.browser.opened) == 2


@pytest.mark.parametrize("endpoint", ["javascript:alert(1)", "file:///etc/passwd"])
def test_a_sign_in_page_that_is_not_a_web_address_is_never_opened(
    app: Deskhand, endpoint: str
) -> None:
    """The SDK drops such metadata as invalid and would fall back to `/authorize` on the
    MCP server's own origin, a page nobody advertised: Deskhand must stop and say why."""
    with serve(Knobs(authorization_endpoint=endpoint)) as hostile:
        manager = started(app, hostile.url)
        try:
            state = manager.sign_in(NAME, timeout=SHORT_SIGN_IN)
        finally:
            manager.shutdown()

    scheme = endpoint.split(":", 1)[0]
    assert not any(url.startswith(f"{scheme}:") for url in app.browser.opened)
    assert state is not None and state.status is Status.NEEDS_SIGN_IN, state
    assert "not a web address" in (state.error or ""), state.error
    assert app.browser.opened == [], "no page the server did not advertise may open"


def test_the_loopback_listener_takes_one_callback_with_the_right_state(
    oauth: OAuthMcpServer, app: Deskhand
) -> None:
    """Only `GET /callback` with the state of the sign-in under way counts: other paths are
    404, a forged or missing state is turned away without ending the sign-in (a page that
    guesses the port cannot abort or hijack it), and after the real answer nothing more is
    taken."""
    answers: dict[str, int] = {}

    def knocking_browser(url: str) -> bool:
        status, _, headers = load(url, follow=False)
        assert status == 302
        callback = headers["location"]
        base = callback.split("?", 1)[0]
        code = parse_qs(urlsplit(callback).query)["code"][0]
        answers["other path"] = load(base.rsplit("/", 1)[0] + "/favicon.ico")[0]
        answers["no state"] = load(f"{base}?code={code}")[0]
        answers["forged state"] = load(f"{base}?code={code}&state=forged")[0]
        answers["forged refusal"] = load(f"{base}?error=access_denied&state=forged")[0]
        answers["callback"] = load(callback)[0]
        try:
            answers["second callback"] = load(callback)[0]
        except OSError:  # the listener stops once it has its answer
            answers["second callback"] = 404
        return True

    manager = started(app, oauth.url)
    manager.set_url_opener(knocking_browser)
    state = manager.sign_in(NAME, timeout=SIGN_IN)

    assert answers == {
        "other path": 404,
        "no state": 400,
        "forged state": 400,
        "forged refusal": 400,
        "callback": 200,
        "second callback": 404,
    }
    assert state is not None and state.status is Status.READY, state
    assert oauth.count("token:authorization_code") == 1  # the code was exchanged once


# ---- tokens stay secret --------------------------------------------------------------------------


def test_tokens_join_the_tripwire_and_never_reach_results_or_logs(
    oauth: OAuthMcpServer, app: Deskhand, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.handler.addFilter(RedactingFilter(known_secret_values))
    manager = signed_in(app, oauth)
    [access] = oauth.access_tokens()
    [refresh] = oauth.refresh_tokens()
    assert {access, refresh} <= known_secret_values()

    registry = ToolRegistry()
    registry.add(manager.tools(NAME), "mcp")
    runner = ToolRunner(registry, tripwire=TRIPWIRE)
    try:
        leaked = asyncio.run(runner.run(f"mcp__{NAME}__leak", {}, ToolContext(home=app.home)))
    finally:
        runner.shutdown()
    assert oauth.last_bearer() == access  # the server did send it back
    assert leaked.ok and access not in leaked.content and "[redacted]" in leaked.content
    assert access not in json.dumps(leaked.data, default=str)
    manager.shutdown()

    assert caplog.records, "nothing was logged"
    for secret in (access, refresh):
        assert secret not in caplog.text


def test_the_tripwire_learns_the_tokens_not_the_whole_keyring_record(
    oauth: OAuthMcpServer, app: Deskhand
) -> None:
    """The keyring record (tokens, client, both metadata documents: over a kilobyte of
    JSON, a new text at every save) must not become a tripwire secret itself: every new
    secret recompiles the redaction pattern over all of them (seconds with a few such
    records, paid by `states()`, the log filter and the runner), and the tokens in it are
    already known one by one."""
    manager = signed_in(app, oauth)
    manager.shutdown()
    restarted(app)  # reads the record again

    known = known_secret_values()
    assert {*oauth.access_tokens(), *oauth.refresh_tokens()} <= known
    records = [v for v in known if '"access_token"' in v or '"redirect_uris"' in v]
    assert records == [], f"{len(records)} keyring records ({[len(r) for r in records]} chars)"


# ---- client credentials -------------------------------------------------------------------------


@pytest.mark.parametrize("with_issuer", [True, False], ids=["issuer", "no-issuer"])
def test_client_credentials_from_mcp_json_connect_without_a_browser(
    oauth: OAuthMcpServer, app: Deskhand, with_issuer: bool
) -> None:
    app.store.set(keyring_key(NAME, "client_secret"), oauth.knobs.client_secret)
    secret_ref = "${keyring:" + keyring_key(NAME, "client_secret") + "}"
    auth = {
        "type": "client_credentials",
        "client_id": oauth.knobs.client_id,
        "client_secret": secret_ref,
    }
    if with_issuer:
        auth["issuer"] = oauth.origin
    manager = started(app, oauth.url, auth=auth)

    state = manager.status(NAME)
    if not with_issuer:  # the MCP server would choose where the secret goes: refused
        assert state is not None and state.status is Status.INVALID, state
        assert "need the issuer" in (state.error or "") and oauth.count("token") == 0
        return
    assert state is not None and state.status is Status.READY, state
    assert call(manager, app.home, "echo", text="machine").content == "machine"
    assert app.browser.opened == []
    assert oauth.count("token:client_credentials") == 1
    assert (oauth.count("authorize"), oauth.count("register")) == (0, 0)
    [grant] = oauth.seen("token")
    assert (grant.authorization or "").startswith("Basic ")
    assert "client_secret" not in grant.params  # client_secret_basic: in the header only
    [access] = oauth.access_tokens()
    assert oauth.mcp_authorizations()[-1] == f"Bearer {access}"
    assert access in known_secret_values()


def test_client_credentials_go_only_to_the_issuer_named_in_mcp_json(
    oauth: OAuthMcpServer, app: Deskhand
) -> None:
    """The MCP server's resource metadata names the authorization server; when it names
    another one than the `issuer` in mcp.json, the client secret is not sent there."""
    app.store.set(keyring_key(NAME, "client_secret"), oauth.knobs.client_secret)
    auth = {
        "type": "client_credentials",
        "client_id": oauth.knobs.client_id,
        "client_secret": "${keyring:" + keyring_key(NAME, "client_secret") + "}",
        "issuer": oauth.origin,
    }
    with serve() as elsewhere:
        oauth.knobs.authorization_server = elsewhere.origin
        manager = started(app, oauth.url, auth=auth)
        try:
            state = manager.status(NAME)
        finally:
            manager.shutdown()

        assert state is not None and state.status in {Status.FAILED, Status.RESTARTING}, state
        assert "issuer" in (state.error or ""), state.error
        assert elsewhere.count("token") == 0
        assert all(s.authorization is None for s in elsewhere.seen()), elsewhere.seen()
        assert oauth.count("token") == 0 and app.browser.opened == []


# ---- the command line ----------------------------------------------------------------------------


@pytest.mark.keyring
def test_cli_login_and_logout(
    oauth: OAuthMcpServer, tmp_path: Path, keyring_env: dict[str, str]
) -> None:
    import keyring

    home = tmp_path / "cli-home"
    home.mkdir()
    write_config(home, {NAME: {"url": oauth.url}})
    env = deskhand_env(**keyring_env)
    command = ("mcp", "login", NAME, "--no-browser")
    login = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "--home", str(home), *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        assert login.stderr is not None
        printed: list[str] = []
        for line in login.stderr:  # ends at the address, or when the CLI exits
            printed.append(line)
            if line.startswith("  http"):
                break
        address = printed[-1].strip() if printed else ""
        assert address.startswith(f"{oauth.origin}/authorize?"), "".join(printed)
        status, final, _ = load(address)  # the user signs in, in a browser
        assert status == 200 and final.startswith("http://127.0.0.1:")
        out, err = login.communicate(timeout=60)
    finally:
        if login.poll() is None:
            login.kill()
            login.wait()
    assert login.returncode == 0, "".join(printed) + err
    assert f"signed in to {NAME}" in out
    stored = keyring.get_password("deskhand", token_key(NAME))
    assert stored is not None and json.loads(stored)["url"] == oauth.url

    listed = deskhand("--home", str(home), "mcp", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)[0]["status"] == "ready"
    assert oauth.count("authorize") == 1

    logout = deskhand("--home", str(home), "mcp", "logout", NAME, env=env)
    assert logout.returncode == 0, logout.stderr
    assert f"signed out of {NAME}" in logout.stdout
    assert keyring.get_password("deskhand", token_key(NAME)) is None
    listed = deskhand("--home", str(home), "mcp", "list", "--json", env=env)
    assert json.loads(listed.stdout)[0]["status"] == "needs sign-in"
    assert oauth.count("authorize") == 1


# ---- configuration -------------------------------------------------------------------------------


def test_auth_entries_are_checked_field_by_field(tmp_path: Path) -> None:
    url = "https://mcp.example/mcp"
    path = write_config(
        tmp_path,
        {
            "no-id": {"url": url, "auth": {"type": "client_credentials", "client_secret": "x1"}},
            "no-secret": {"url": url, "auth": {"type": "client_credentials", "client_id": "c"}},
            "no-issuer": {
                "url": url,
                "auth": {"type": "client_credentials", "client_id": "c", "client_secret": "s"},
            },
            "bad-type": {"url": url, "auth": {"type": "password"}},
            "unknown": {"url": url, "auth": {"password": "hunter2-secret"}},
            "jwt-oauth": {"url": url, "auth": {"token_endpoint_auth_method": "private_key_jwt"}},
            "plain-doc": {"url": url, "auth": {"client_metadata_url": "http://x.example/c"}},
            "not-object": {"url": url, "auth": 42},
            "local": {"command": "srv", "auth": {"type": "oauth"}},
            "literal": {
                "url": url,
                "auth": {
                    "type": "client_credentials",
                    "clientId": "c",
                    "clientSecret": "literal-cc-secret-0042",
                    "issuer": "https://auth.example",
                },
            },
            "stored": {
                "url": url,
                "auth": {
                    "type": "client_credentials",
                    "client_id": "c",
                    "client_secret": "${keyring:mcp/stored/client_secret}",
                    "issuer": "https://auth.example",
                },
            },
            "off": {"url": url, "auth": "none"},
        },
    )
    config = read_config(path)

    fields = {p.name: p.field for p in config.problems}
    assert fields == {
        "no-id": "auth.client_id",
        "no-secret": "auth.client_secret",
        "no-issuer": "auth.issuer",
        "bad-type": "auth.type",
        "unknown": "auth.password",
        "jwt-oauth": "auth.token_endpoint_auth_method",
        "plain-doc": "auth.client_metadata_url",
        "not-object": "auth",
        "local": "auth",
    }
    assert len(config.problems) == len(fields)  # one message per bad field
    assert all(p.message.startswith(f"server {p.name!r}: ") for p in config.problems)
    assert "hunter2-secret" not in " ".join(p.message for p in config.problems)
    assert "remote servers" in config.problems_of("local")[0].detail

    literal, stored, off = (config.server(n) for n in ("literal", "stored", "off"))
    assert literal is not None and stored is not None and off is not None
    assert literal.auth.kind == "client_credentials"
    assert literal.auth.method == "client_secret_basic"
    assert "literal-cc-secret-0042" in literal.credential_values()
    assert stored.credential_values() == []
    assert off.auth.kind == "none"

    remembered: list[str] = []
    manager = McpManager(path, home=tmp_path, remember_secret=remembered.append)
    manager.configs()
    assert "literal-cc-secret-0042" in remembered
    manager.shutdown()
