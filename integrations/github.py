"""GitHub (or GitHub Enterprise) accounts: a personal access token and an API base URL.

`GitHubClient` is a small synchronous client on httpx (tools run in threads). It turns
GitHub's failures into `GitHubError`s with a readable message (a rejected token, a rate
limit with its reset time, a missing repository) and follows `Link: rel="next"` pages.
httpx is imported only when a client is made, so declaring the spec stays cheap.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from integrations.spec import Account, IntegrationField, IntegrationSpec

if TYPE_CHECKING:
    import httpx

DEFAULT_BASE_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
#: Most pages one listing follows, whatever limit was asked (100 items a page).
MAX_PAGES = 10
PER_PAGE_MAX = 100


class GitHubError(Exception):
    """A GitHub request failed; the message is meant for the user and the model."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def reset_clock(epoch: float) -> str:
    """A reset time as local HH:MM."""
    return time.strftime("%H:%M", time.localtime(epoch))


class GitHubClient:
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
            raise GitHubError("this GitHub account has no token; add one in Settings → Accounts")
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=timeout,
            transport=transport,
            follow_redirects=True,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": "deskhand",
            },
        )

    @classmethod
    def for_account(cls, account: Account) -> GitHubClient:
        return cls(account.get("token"), account.get("base_url", DEFAULT_BASE_URL))

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ---- requests ---------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
    ) -> httpx.Response:
        import httpx

        try:
            response = self._http.request(method, path, params=params, json=json)
        except httpx.TimeoutException:
            raise GitHubError(f"GitHub at {self.base_url} did not answer in time") from None
        except httpx.HTTPError as exc:
            raise GitHubError(f"could not reach GitHub at {self.base_url}: {exc}") from None
        if response.status_code >= 400:
            raise GitHubError(describe_failure(response), response.status_code)
        return response

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return self.request("GET", path, params=params).json()

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("POST", path, json=body).json()

    def paginate(
        self,
        path: str,
        params: dict[str, Any] | None = None,
        *,
        limit: int,
        keep: Callable[[Any], bool] | None = None,
    ) -> tuple[list[Any], bool]:
        """Items of a listing (a JSON array, or a search's `items`), following `rel="next"`
        links up to `limit` kept items or MAX_PAGES pages. `keep(item)` filters. Returns the
        items and whether more were left."""
        query: dict[str, Any] | None = {**(params or {}), "per_page": PER_PAGE_MAX}
        items: list[Any] = []
        url: str | None = path
        for _ in range(MAX_PAGES):
            if url is None:
                break
            response = self.request("GET", url, params=query)
            payload = response.json()
            page = payload.get("items", []) if isinstance(payload, dict) else payload
            for index, item in enumerate(page):
                if keep is None or keep(item):
                    items.append(item)
                if len(items) >= limit:
                    rest_of_page = index + 1 < len(page)
                    return items, rest_of_page or self._next_link(response) is not None
            url, query = self._next_link(response), None
        return items, url is not None

    def _next_link(self, response: httpx.Response) -> str | None:
        url = response.links.get("next", {}).get("url")
        if not url:
            return None
        # Never send the token to another host than the account's.
        if urlsplit(url).netloc != urlsplit(self.base_url).netloc:
            return None
        return url


def describe_failure(response: httpx.Response) -> str:
    status = response.status_code
    try:
        message = str(response.json().get("message", ""))
    except (ValueError, AttributeError):
        message = response.text[:200]
    headers = response.headers
    limited = headers.get("x-ratelimit-remaining") == "0" or "rate limit" in message.lower()
    if status == 429 or (status == 403 and (limited or "retry-after" in headers)):
        return f"GitHub rate limited this token until {_reset_of(headers)}; try again then"
    if status == 401:
        return "GitHub: the token was rejected (401 Bad credentials); update the account's token"
    if status == 403:
        return f"GitHub refused the request (403): {message or 'forbidden'}"
    if status == 404:
        return "GitHub: not found (or this account's token cannot see it)"
    if status == 422:
        return f"GitHub rejected the request (422): {message or 'validation failed'}"
    return f"GitHub answered {status}: {message or response.reason_phrase}"


def _reset_of(headers: httpx.Headers) -> str:
    reset = headers.get("x-ratelimit-reset")
    if reset and reset.isdigit():
        return f"{reset_clock(int(reset))} (reset)"
    retry = headers.get("retry-after")
    if retry and retry.isdigit():
        return f"{reset_clock(time.time() + int(retry))} (retry after {retry}s)"
    return "the limit resets"


def test_connection(account: Account) -> str:
    with GitHubClient.for_account(account) as client:
        user = client.get("/user")
    return f"Signed in to GitHub as {user.get('login', '?')} ({client.base_url})"


SPEC = IntegrationSpec(
    id="github",
    title="GitHub",
    description="GitHub or GitHub Enterprise: repositories, issues, pull requests, files.",
    fields=(
        IntegrationField(
            "base_url",
            "API base URL",
            default=DEFAULT_BASE_URL,
            help="https://api.github.com, or https://HOST/api/v3 for GitHub Enterprise",
        ),
        IntegrationField("token", "Personal access token", secret=True, required=True),
    ),
    test_connection=test_connection,
)
