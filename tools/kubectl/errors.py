"""Kubernetes failures turned into messages a user (and the model) can act on."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tools.redact import shorten
from tools.spec import ToolError

#: `pods is forbidden: User "jane" cannot list resource "pods" in API group "" in the
#: namespace "default"` (the API server's RBAC wording).
_FORBIDDEN_RE = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>[\w-]+) resource "(?P<resource>[^"]+)"'
    r'(?: in API group "(?P<group>[^"]*)")?'
    r'(?: in the namespace "(?P<namespace>[^"]+)"| at the cluster scope)?'
)


class ApiStatusError(ToolError):
    """The API server answered with an error status (`code`)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Attempt:
    """What a request tried to do, so every error can say it: verb, resource (plural with
    group and subresource, e.g. "deployments.apps/scale"), namespace, name."""

    verb: str
    resource: str
    namespace: str | None = None
    name: str | None = None

    @property
    def where(self) -> str:
        return f"in namespace {self.namespace}" if self.namespace else "at cluster scope"


def status_of(body: Any) -> dict[str, Any]:
    """The `Status` object an API error carries (empty when the body is not one)."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return {"message": shorten(body.strip(), 500, mark="")} if body.strip() else {}
    return body if isinstance(body, dict) else {}


def forbidden_message(status: dict[str, Any], attempt: Attempt, context: str) -> str:
    message = str(status.get("message") or "")
    match = _FORBIDDEN_RE.search(message)
    if match:
        group = match["group"] or ""
        base, _, sub = match["resource"].partition("/")
        resource = f"{base}.{group}" if group else base
        resource += f"/{sub}" if sub else ""
        where = f"in namespace {match['namespace']}" if match["namespace"] else "at cluster scope"
        who = f" as user {match['user']}" if match["user"] else ""
        text = f"forbidden: cannot {match['verb']} {resource} {where}{who}"
    else:
        text = f"forbidden: cannot {attempt.verb} {attempt.resource} {attempt.where}"
        if message:
            text += f" ({message})"
    return (
        f"{text} (context {context}). Your RBAC role does not allow it: ask a cluster admin "
        "for the permission, or use a context that has it."
    )


def api_error(
    code: int, body: Any, attempt: Attempt, context: str, server: str, suggestions: str = ""
) -> ApiStatusError:
    """The error for an HTTP error status of the API server."""
    return ApiStatusError(_api_message(code, body, attempt, context, server, suggestions), code)


def _api_message(
    code: int, body: Any, attempt: Attempt, context: str, server: str, suggestions: str
) -> str:
    status = status_of(body)
    message = str(status.get("message") or "").strip()
    target = f"{attempt.resource} {attempt.name!r}" if attempt.name else attempt.resource
    if code == 401:
        return (
            f"the cluster at {server} rejected the credentials of context {context} "
            "(401 Unauthorized): they are expired or invalid. Log in again (refresh the token, "
            "re-run your cloud's get-credentials command) and retry."
        )
    if code == 403:
        return forbidden_message(status, attempt, context)
    if code == 404:
        text = f"not found: {target} {attempt.where} (context {context})"
        if not attempt.name and message:
            text += f": {message}"
        return text + suggestions
    if code == 409:
        hint = ""
        if "conflict" in message.lower() and "apply" in attempt.verb:
            hint = " Pass force_conflicts=true to take the fields over."
        return f"conflict: {message or target} (context {context}).{hint}"
    if code == 422:
        return f"the API server rejected {target} as invalid: {message}"
    if code in (502, 503, 504):
        return (
            f"the API server at {server} is unavailable ({code}) for {attempt.verb} "
            f"{attempt.resource}: {message or 'try again later'} (context {context})"
        )
    reason = status.get("reason") or "error"
    return (
        f"{attempt.verb} {target} {attempt.where} failed with {code} {reason}: "
        f"{message or 'no details'} (context {context})"
    )


def unreachable(server: str, context: str, exc: BaseException) -> ToolError:
    reason = _short_reason(exc)
    return ToolError(
        f"cannot reach the cluster at {server} (context {context}): {reason}. Check that the "
        "cluster is running and reachable (VPN, network), or pick another context."
    )


def _short_reason(exc: BaseException) -> str:
    text = str(getattr(exc, "reason", None) or exc)
    lowered = text.lower()
    for needle, short in (
        ("connection refused", "connection refused"),
        ("timed out", "connection timed out"),
        ("name or service not known", "unknown host name"),
        ("nodename nor servname", "unknown host name"),
        ("temporary failure in name resolution", "host name lookup failed"),
        ("no route to host", "no route to host"),
        ("certificate verify failed", "TLS certificate verification failed"),
        ("connection reset", "connection reset"),
    ):
        if needle in lowered:
            return short
    return shorten(text.splitlines()[0], 200, mark="") if text else type(exc).__name__


def config_error(context: str, exc: BaseException) -> ToolError:
    return ToolError(
        f"cannot use context {context} from the kubeconfig: {exc}. If it logs in through a "
        "plugin (aws, gke-gcloud-auth-plugin, kubelogin), your login may have expired."
    )
