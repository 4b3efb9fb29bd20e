"""Where an MCP sign-in may send the client secret, a code or a token: only to an https
token endpoint on the authorization server's own host (plain http only on this machine).
A hostile authorization server's metadata naming a token endpoint on another host, or over
http, ends the sign-in with a plain error naming that endpoint, and nothing reaches it.

Real parts: Deskhand's manager, connection and OAuth providers over an in-memory keyring,
and hostile HTTP servers on 127.0.0.1 (tests/test_mcp_oauth_hostile_servers.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from app.core.mcp.oauth import SignInFailed, _require_own_endpoint
from tests.test_mcp_oauth_hostile_servers import (
    NAME,
    SHORT_SIGN_IN,
    Desk,
    Hostile,
    as_json,
    authorization_server,
    protected_by,
    random_secret,
    settled,
)


def _hostile() -> Iterator[Hostile]:
    server = Hostile().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def rs() -> Iterator[Hostile]:
    """The MCP server in mcp.json; it names `evil_as` as its authorization server."""
    yield from _hostile()


@pytest.fixture
def evil_as() -> Iterator[Hostile]:
    """A hostile authorization server (its metadata is its own issuer's)."""
    yield from _hostile()


@pytest.fixture
def foreign() -> Iterator[Hostile]:
    """Another server, where the hostile authorization server sends the token request."""
    yield from _hostile()


@pytest.fixture
def desk(home: Path) -> Iterator[Desk]:
    deskhand = Desk(home)
    try:
        yield deskhand
    finally:
        deskhand.close()


def _point_token_endpoint(server: Hostile, token_endpoint: str) -> None:
    """`server` is an authorization server (its own issuer) whose metadata names
    `token_endpoint` for the token request."""
    authorization_server(server)
    route = server.routes["/.well-known/oauth-authorization-server"]
    _, _, text = route(None)  # type: ignore[arg-type]  (the route ignores the request)
    metadata: dict[str, Any] = json.loads(text)
    metadata["token_endpoint"] = token_endpoint
    server.routes["/.well-known/oauth-authorization-server"] = lambda hit: as_json(metadata)


def test_a_token_endpoint_on_another_host_stops_the_sign_in_and_gets_nothing(
    desk: Desk, rs: Hostile, evil_as: Hostile, foreign: Hostile
) -> None:
    endpoint = f"{foreign.origin}/token"
    _point_token_endpoint(evil_as, endpoint)
    url = protected_by(rs, evil_as.origin)
    secret = random_secret("corp-oauth")
    auth = {
        "type": "oauth",
        "client_id": "corp-app",
        "client_secret": secret,
        "issuer": evil_as.origin + "/",
    }
    manager = desk.started({NAME: {"url": url, "auth": auth}})
    state = manager.sign_in(NAME, timeout=SHORT_SIGN_IN)

    assert foreign.hits == [], "the foreign token endpoint was sent something"
    assert not [h for h in evil_as.hits if h.path == "/token"]
    assert state.error is not None
    assert endpoint in state.error and "not an https address" in state.error, state.error
    assert secret not in state.error
    assert desk.opened == [], "the sign-in page opened although the sign-in cannot finish"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_client_credentials_are_not_sent_to_a_foreign_token_endpoint(
    desk: Desk, rs: Hostile, evil_as: Hostile, foreign: Hostile
) -> None:
    endpoint = f"{foreign.origin}/token"
    _point_token_endpoint(evil_as, endpoint)
    url = protected_by(rs, evil_as.origin)
    secret = random_secret("corp-cc")
    auth = {
        "type": "client_credentials",
        "client_id": "corp-app",
        "client_secret": secret,
        "issuer": evil_as.origin + "/",
    }
    manager = desk.started({NAME: {"url": url, "auth": auth}})
    state = settled(manager)

    assert foreign.hits == [], "the client secret went to another host"
    assert state.error is not None and endpoint in state.error, state.error
    assert secret not in state.error


@pytest.mark.parametrize(
    ("endpoint", "issuer"),
    [
        ("http://login.corp.example/token", "https://login.corp.example/"),  # in the clear
        ("https://evil.example/token", "https://login.corp.example/"),  # another host
        ("https://login.corp.example:8443/token", "https://login.corp.example/"),  # port
        ("https://login.corp.example.evil.example/token", "https://login.corp.example/"),
        ("https://login.corp.example@evil.example/token", "https://login.corp.example/"),
        ("http://127.0.0.1:9/token", "http://127.0.0.1:10/"),  # another local server
    ],
)
def test_endpoints_off_the_issuers_host_or_over_http_are_refused(
    endpoint: str, issuer: str
) -> None:
    with pytest.raises(SignInFailed) as caught:
        _require_own_endpoint(endpoint, issuer)
    assert endpoint in str(caught.value)


@pytest.mark.parametrize(
    ("endpoint", "issuer"),
    [
        ("https://login.corp.example/oauth2/token", "https://login.corp.example/"),
        ("https://Login.Corp.Example:443/token", "https://login.corp.example"),
        ("http://127.0.0.1:8123/token", "http://127.0.0.1:8123/"),  # tests, local servers
        ("http://localhost:8123/token", "http://localhost:8123"),
    ],
)
def test_https_endpoints_on_the_issuers_host_are_used(endpoint: str, issuer: str) -> None:
    _require_own_endpoint(endpoint, issuer)
