"""One tool call's cluster: the context (account) it talks to, its API client, and REST
requests whose failures become readable ToolErrors. Imports the kubernetes package."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

from integrations.kubernetes import discover, read_kubeconfig
from integrations.spec import Account
from tools.kubectl.errors import Attempt, api_error, config_error, unreachable
from tools.spec import ToolContext, ToolError

#: (connect, read) seconds for one request; logs and exec pass their own read timeout.
TIMEOUT = (5.0, 60.0)
JSON = "application/json"


def _names(account: Account) -> set[str]:
    return {account.fields.get("context", ""), account.id, account.label} - {""}


def active_account(ctx: ToolContext) -> Account:
    """The active kubernetes account; without an account directory (tests, scripts) the
    kubeconfig's current context."""
    try:
        return ctx.account("kubernetes")
    except ToolError as exc:
        found = discover()
        if found:
            return found[0]
        raise ToolError(
            f"{exc}. No kubeconfig context was found either: set KUBECONFIG or create "
            "~/.kube/config"
        ) from None


def select_account(ctx: ToolContext, context: str | None) -> Account:
    """The account for a tool's `context` argument: the active one, one the user added, or
    another context of the active account's kubeconfig."""
    active = active_account(ctx)
    if not context or context in _names(active):
        return active
    candidates: list[Account] = []
    if ctx.accounts is not None:
        with contextlib.suppress(LookupError):
            candidates.extend(ctx.accounts.list("kubernetes"))
    candidates.extend(discover(active.fields.get("kubeconfig", "")))
    for account in candidates:
        if context in _names(account):
            return account
    import difflib

    known = sorted({a.fields.get("context", "") for a in candidates} - {""})
    close = difflib.get_close_matches(context, known, n=2)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    raise ToolError(
        f"there is no kubeconfig context {context!r}.{hint} Known contexts: "
        f"{', '.join(known) or 'none'}"
    )


def _context_namespace(account: Account) -> str:
    if account.fields.get("namespace"):
        return account.fields["namespace"]
    name = account.fields.get("context", "")
    for entry in read_kubeconfig(account.fields.get("kubeconfig", ""))["contexts"]:
        if entry.get("name") == name:
            return (entry.get("context") or {}).get("namespace") or "default"
    return "default"


class Cluster:
    """The API client of one context plus request helpers."""

    def __init__(self, account: Account, client: Any) -> None:
        self.account = account
        self.client = client
        self.context: str = account.fields.get("context") or account.label
        self.server: str = str(client.configuration.host)
        self.namespace: str = _context_namespace(account)

    # ---- raw requests ---------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        attempt: Attempt,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        accept: str = JSON,
        timeout: tuple[float, float] = TIMEOUT,
        text: bool = False,
        suggest: Callable[[], str] | None = None,
        missing_ok: bool = False,
    ) -> Any:
        """One REST call. Returns decoded JSON (or text; None for 404 when `missing_ok`);
        raises ToolError naming the context on every failure."""
        from kubernetes.client.rest import ApiException
        from kubernetes.config import ConfigException
        from urllib3.exceptions import HTTPError

        params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        try:
            response = self.client.call_api(
                path,
                method,
                query_params=params,
                header_params={"Accept": accept, "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=timeout,
            )
            raw = response.data
        except ApiException as exc:
            if not exc.status:  # raised before any HTTP status: TLS and similar
                raise unreachable(self.server, self.context, exc) from None
            if exc.status == 404 and missing_ok:
                return None
            hint = suggest() if suggest is not None and exc.status == 404 else ""
            raise api_error(
                exc.status, exc.body, attempt, self.context, self.server, hint
            ) from None
        except ConfigException as exc:
            raise config_error(self.context, exc) from None
        except (HTTPError, OSError) as exc:
            raise unreachable(self.server, self.context, exc) from None
        decoded = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        if text:
            return decoded
        try:
            return json.loads(decoded) if decoded.strip() else {}
        except ValueError:
            raise ToolError(
                f"the API server at {self.server} answered {attempt.verb} {attempt.resource} "
                f"with something that is not JSON (context {self.context})"
            ) from None

    def get(self, path: str, attempt: Attempt, **kwargs: Any) -> Any:
        return self.request("GET", path, attempt, **kwargs)

    def get_or_none(self, path: str, attempt: Attempt, **kwargs: Any) -> Any:
        """GET that returns None for 404 (every other error still raises)."""
        return self.request("GET", path, attempt, missing_ok=True, **kwargs)


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def connect(ctx: ToolContext, context: str | None) -> Cluster:
    """The cluster for a call: resolves the account and its (cached) API client."""
    from kubernetes.config import ConfigException

    from integrations.kube_client import api_client

    account = select_account(ctx, context)
    name = account.fields.get("context") or account.label
    try:
        client = api_client(account)
    except (ConfigException, OSError, ValueError) as exc:
        raise config_error(name, exc) from None
    return Cluster(account, client)
