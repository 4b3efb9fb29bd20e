"""Slack workspaces as accounts: a bot (xoxb-) or user (xoxp-) token and the Web API URL.

`SlackClient` is a small synchronous client on httpx (tools run in threads). Slack answers
200 with `{"ok": false, "error": "..."}` for most failures and 429 with `Retry-After` when
rate limited; both become `SlackError`s with a readable message. Listings follow
`response_metadata.next_cursor`. httpx is imported only when a client is made.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from integrations.spec import Account, IntegrationField, IntegrationSpec

if TYPE_CHECKING:
    import httpx

DEFAULT_BASE_URL = "https://slack.com/api"
#: Most pages one listing follows, whatever limit was asked.
MAX_PAGES = 10
PAGE_SIZE = 200

_AUTH_ERRORS = {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"}
_READABLE = {
    "channel_not_found": "no such channel (or this token cannot see it)",
    "not_in_channel": "this account is not a member of that channel; invite it first",
    "is_archived": "that channel is archived",
    "msg_too_long": "the message is too long",
    "no_text": "the message is empty",
    "user_not_found": "no such user",
    "ekm_access_denied": "the workspace's key management denied access",
}


class SlackError(Exception):
    """A Slack call failed; the message is meant for the user and the model."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class SlackClient:
    def __init__(
        self,
        token: str,
        base_url: str = DEFAULT_BASE_URL,
        *,
        timeout: float = 20.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        import httpx

        if not token:
            raise SlackError("this Slack account has no token; add one in Settings → Accounts")
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url + "/",
            timeout=timeout,
            transport=transport,
            headers={"Authorization": f"Bearer {token}", "User-Agent": "deskhand"},
        )

    @classmethod
    def for_account(cls, account: Account) -> SlackClient:
        return cls(account.get("token"), account.get("base_url", DEFAULT_BASE_URL))

    def __enter__(self) -> SlackClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def call(self, method: str, params: dict[str, Any] | None = None, *, post: bool = False) -> Any:
        """One Web API method: read methods as GET with a query, writes as a JSON POST."""
        import httpx

        clean = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            if post:
                response = self._http.post(method, json=clean)
            else:
                response = self._http.get(method, params=clean)
        except httpx.TimeoutException:
            raise SlackError(f"Slack at {self.base_url} did not answer in time") from None
        except httpx.HTTPError as exc:
            raise SlackError(f"could not reach Slack at {self.base_url}: {exc}") from None
        if response.status_code == 429:
            raise SlackError(
                f"Slack rate limited {method} until {_retry_at(response)}", "ratelimited"
            )
        if response.status_code >= 400:
            raise SlackError(f"Slack answered {response.status_code} to {method}")
        try:
            payload = response.json()
        except ValueError:
            raise SlackError(f"Slack sent a reply to {method} that is not JSON") from None
        if not payload.get("ok"):
            raise _error_of(method, payload, response)
        return payload

    def paginate(
        self, method: str, key: str, params: dict[str, Any] | None = None, *, limit: int
    ) -> tuple[list[Any], bool]:
        """`payload[key]` across pages (cursor pagination) up to `limit` items or MAX_PAGES
        pages. Returns the items and whether more were left."""
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            query = {**(params or {}), "limit": min(PAGE_SIZE, max(limit, 1)), "cursor": cursor}
            payload = self.call(method, query)
            items.extend(payload.get(key, []))
            cursor = (payload.get("response_metadata") or {}).get("next_cursor") or None
            if len(items) >= limit:
                return items[:limit], cursor is not None or len(items) > limit
            if cursor is None:
                return items, False
        return items, True


def _retry_at(response: httpx.Response) -> str:
    retry = response.headers.get("retry-after", "")
    seconds = int(retry) if retry.isdigit() else 60
    clock = time.strftime("%H:%M", time.localtime(time.time() + seconds))
    return f"{clock} (retry after {seconds}s)"


def _error_of(method: str, payload: dict[str, Any], response: httpx.Response) -> SlackError:
    code = str(payload.get("error") or "unknown_error")
    if code in _AUTH_ERRORS:
        return SlackError(
            f"Slack: the token was rejected ({code}); update the account's token", code
        )
    if code == "ratelimited":
        return SlackError(f"Slack rate limited {method} until {_retry_at(response)}", code)
    if code == "missing_scope":
        needed = payload.get("needed", "?")
        return SlackError(f"Slack: the token lacks the scope {needed} needed for {method}", code)
    return SlackError(f"Slack {method}: {_READABLE.get(code, code.replace('_', ' '))}", code)


def test_connection(account: Account) -> str:
    with SlackClient.for_account(account) as client:
        who = client.call("auth.test")
    return f"Connected to Slack workspace {who.get('team', '?')} as {who.get('user', '?')}"


SPEC = IntegrationSpec(
    id="slack",
    title="Slack",
    description="A Slack workspace: channels, people, messages.",
    fields=(
        IntegrationField(
            "base_url",
            "Web API URL",
            default=DEFAULT_BASE_URL,
            help="https://slack.com/api unless you use a proxy",
        ),
        IntegrationField(
            "token",
            "Token",
            secret=True,
            required=True,
            help="A bot token (xoxb-…) or a user token (xoxp-…)",
        ),
    ),
    test_connection=test_connection,
)
