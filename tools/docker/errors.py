"""Docker SDK and transport failures → messages a user (and the model) can act on."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

import docker.errors
import requests.exceptions

from tools.redact import shorten
from tools.spec import ToolError

START_HINT = "start it with `sudo systemctl start docker` (Linux) or open Docker Desktop"
GROUP_HINT = (
    "add your user to the docker group (`sudo usermod -aG docker $USER`, then log out and "
    "back in) or use rootless Docker / Docker Desktop"
)


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception, its causes and contexts, and the reasons urllib3 wraps in args."""
    seen: list[BaseException] = []
    pending: list[BaseException] = [exc]
    while pending:
        item = pending.pop()
        if any(item is s for s in seen):
            continue
        seen.append(item)
        pending.extend(e for e in (item.__cause__, item.__context__) if e is not None)
        pending.extend(a for a in item.args if isinstance(a, BaseException))
        reason = getattr(item, "reason", None)
        if isinstance(reason, BaseException):
            pending.append(reason)
    return seen


def _has(exc: BaseException, kind: type[BaseException], text: str) -> bool:
    return any(isinstance(e, kind) for e in _chain(exc)) or text in str(exc)


def connection_problem(exc: BaseException, address: str) -> str | None:
    """A message when `exc` means the engine could not be reached at all, else None."""
    if _has(exc, PermissionError, "Permission denied"):
        return f"Permission denied on the Docker socket at {address}: {GROUP_HINT}."
    if isinstance(exc, requests.exceptions.Timeout):
        return f"Docker at {address} did not answer in time; it may be overloaded or hung."
    unreachable = (requests.exceptions.ConnectionError, ConnectionError, FileNotFoundError)
    if any(isinstance(e, unreachable) for e in _chain(exc)):
        detail = "" if _has(exc, FileNotFoundError, "No such file") else f" ({_first_line(exc)})"
        return f"Docker is not running at {address}{detail} — {START_HINT}."
    if isinstance(exc, docker.errors.DockerException) and not isinstance(
        exc, docker.errors.APIError
    ):  # e.g. bad TLS files or an unsupported host URL
        return f"Cannot use Docker at {address}: {_first_line(exc)}"
    return None


def near_matches(wanted: str, candidates: Iterable[str]) -> list[str]:
    names = sorted(set(candidates))
    prefixed = [n for n in names if n.startswith(wanted) and n != wanted]
    close = difflib.get_close_matches(wanted, names, n=3, cutoff=0.5)
    return list(dict.fromkeys([*close, *prefixed]))[:3]


def _did_you_mean(matches: list[str]) -> str:
    return f" Did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""


def no_such_container(ref: str, host: str, names: Iterable[str]) -> ToolError:
    return ToolError(
        f"No container {ref!r} on {host}.{_did_you_mean(near_matches(ref, names))} "
        "docker_list_containers with all=true shows every container."
    )


def no_such_image(ref: str, host: str, tags: Iterable[str]) -> ToolError:
    return ToolError(
        f"Image {ref!r} is not present locally on {host}.{_did_you_mean(near_matches(ref, tags))}"
        f" Download it first with docker_pull_image (image={ref!r})."
    )


def api_problem(exc: docker.errors.APIError) -> str:
    explanation = _first_line(exc.explanation or exc)
    if exc.status_code == 409:
        return f"Docker refused: {explanation}"
    return f"Docker error {exc.status_code}: {explanation}"


def _first_line(value: object) -> str:
    text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    return shorten((text.strip().splitlines() or [""])[0], 500, mark="")
