"""The client's side of the protocol that is not a tool call: who Deskhand says it is,
progress of a call, a server's log messages, sampling (declined) and roots (the folders the
user allowed). No SDK import at module level: the manager uses the progress adapter too.

Everything a server sends here is untrusted text: it is made visible (no terminal escapes,
no bidi tricks) and cut to one line before it reaches a log line or a tool card.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from app.core.visible import one_line
from tools.redact import shorten

SAMPLING_DECLINED = "Deskhand does not let MCP servers use its model (sampling)"
#: Progress notifications past this many in one call are dropped (a flood would fill the
#: tool card and the event stream).
MAX_PROGRESS = 500
#: A server may log this many lines per second; the rest are counted and reported once.
LOG_RATE = 50

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


def client_version() -> str:
    from app.version import version

    try:
        return version()
    except Exception:  # a broken checkout must not stop MCP
        return "0"


def client_info() -> Any:
    """`clientInfo` for `initialize`: Deskhand and its version."""
    import mcp_types

    return mcp_types.Implementation(name="Deskhand", title="Deskhand", version=client_version())


# ---- progress ---------------------------------------------------------------------------------


ProgressSink = Callable[[str, "float | None"], None]


def progress_reporter(sink: ProgressSink) -> Callable[[float, float | None, str | None], None]:
    """A `notifications/progress` handler for one call: each notification becomes
    `sink(message, fraction)` (fraction in [0, 1] when the server gave a total)."""
    count = 0

    def report(progress: float, total: float | None, message: str | None) -> None:
        nonlocal count
        count += 1
        if count > MAX_PROGRESS:
            return
        fraction: float | None = None
        if total is not None and math.isfinite(total) and total > 0 and math.isfinite(progress):
            fraction = min(1.0, max(0.0, progress / total))
        if message:
            text = one_line(message, 200)
        elif total is not None and math.isfinite(total):
            text = f"{progress:g} of {total:g}"
        else:
            text = f"{progress:g}"
        sink(text, fraction)

    return report


# ---- server log messages ----------------------------------------------------------------------


class ServerLog:
    """`notifications/message` from one server, to Python logging as `deskhand.mcp.<server>`
    at the matching level (the root handlers redact secrets, like every log line)."""

    def __init__(self, server: str, rate: int = LOG_RATE) -> None:
        self.server = server
        self._log = logging.getLogger(f"deskhand.mcp.{server}")
        self._rate = rate
        self._window = 0.0
        self._count = 0
        self._dropped = 0
        self._lock = threading.Lock()

    def message(self, level: str, data: Any, logger: str | None = None) -> None:
        if not self._allowed():
            return
        number = _LEVELS.get(str(level), logging.INFO)
        text = data if isinstance(data, str) else _json(data)
        origin = f" [{one_line(logger, 60)}]" if logger else ""
        self._log.log(
            number, "MCP server %r%s: %s", one_line(self.server, 80), origin, one_line(text, 2000)
        )

    def _allowed(self) -> bool:
        with self._lock:
            now = time.monotonic()
            if now - self._window >= 1.0:
                dropped, self._dropped = self._dropped, 0
                self._window, self._count = now, 0
                if dropped:
                    self._log.warning(
                        "MCP server %r sent too many log messages; %d were dropped",
                        one_line(self.server, 80), dropped,
                    )
            self._count += 1
            if self._count > self._rate:
                self._dropped += 1
                return False
            return True


def _json(data: Any) -> str:
    try:
        return shorten(json.dumps(data, ensure_ascii=False, default=str), 4000, mark="")
    except (TypeError, ValueError):
        return shorten(repr(data), 4000, mark="")


# ---- roots ------------------------------------------------------------------------------------


def file_roots(paths: Iterable[str | Path]) -> list[tuple[str, str]]:
    """(file:// URI, name) of each folder, absolute, without duplicates."""
    seen: set[str] = set()
    roots: list[tuple[str, str]] = []
    for raw in paths:
        if not str(raw).strip():
            continue
        path = Path(raw).expanduser()
        if not path.is_absolute():
            continue  # a relative root has no meaning to another process
        path = path.resolve(strict=False)
        uri = path.as_uri()
        if uri not in seen:
            seen.add(uri)
            roots.append((uri, path.name or str(path)))
    return roots
