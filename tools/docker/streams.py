"""Following a container's output stream with progress, a deadline and cancellation.

The SDK's streams block in `recv`, so a reader thread feeds a queue and the tool's thread
stays free to notice the deadline or a cancel and stop the producer.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from enum import StrEnum

from tools.redact import shorten
from tools.spec import ToolContext

#: Characters of output a result carries; older lines are dropped first.
OUTPUT_CAP = 20_000
#: Output lines forwarded as progress per call; a flood beyond this is summarised.
PROGRESS_LINES = 1_000
#: How long to keep draining after asking the producer to stop.
STOP_GRACE = 15.0
_POLL = 0.1


class Outcome(StrEnum):
    FINISHED = "finished"
    TIMED_OUT = "timed out"
    CANCELLED = "cancelled"


class OutputCollector:
    """Splits chunks into lines, forwards them as progress, keeps the newest ones."""

    def __init__(self, ctx: ToolContext, limit: int = OUTPUT_CAP) -> None:
        self._ctx = ctx
        self._limit = limit
        self._lines: deque[str] = deque()
        self._size = 0
        self._partial = ""
        self._forwarded = 0
        self.dropped_lines = 0

    def feed(self, chunk: bytes | str) -> None:
        text = chunk.decode("utf-8", errors="replace") if isinstance(chunk, bytes) else chunk
        *complete, self._partial = (self._partial + text).split("\n")
        for line in complete:
            self._add(line)

    def finish(self) -> None:
        if self._partial:
            self._add(self._partial)
            self._partial = ""

    @property
    def text(self) -> str:
        return "\n".join(self._lines)

    def _add(self, line: str) -> None:
        line = line.rstrip("\r")
        if self._forwarded < PROGRESS_LINES:
            self._ctx.progress(shorten(line, 500, secrets=self._ctx.secret_values(), mark=""))
        elif self._forwarded == PROGRESS_LINES:
            self._ctx.progress("… (more output; live lines stop here, the result keeps the end)")
        self._forwarded += 1
        self._lines.append(line)
        self._size += len(line) + 1
        while self._size > self._limit and len(self._lines) > 1:
            self._size -= len(self._lines.popleft()) + 1
            self.dropped_lines += 1


_DONE = object()


def follow(
    chunks: Iterable[bytes],
    collector: OutputCollector,
    ctx: ToolContext,
    *,
    timeout: float,
    stop: Callable[[], None],
) -> Outcome:
    """Feed `chunks` into `collector` until they end, the timeout passes or the call is
    cancelled; in the latter cases `stop()` is called once to end the producer."""
    pending: queue.Queue[object] = queue.Queue()

    def read() -> None:
        try:
            for chunk in chunks:
                pending.put(chunk)
        except Exception as exc:  # a stream cut by stop() ends like any other
            pending.put(exc)
        finally:
            pending.put(_DONE)

    reader = threading.Thread(target=read, name="deskhand-docker-stream", daemon=True)
    reader.start()
    outcome = Outcome.FINISHED
    deadline = time.monotonic() + timeout
    grace_until: float | None = None
    while True:
        now = time.monotonic()
        if grace_until is None and (ctx.cancelled or now >= deadline):
            outcome = Outcome.CANCELLED if ctx.cancelled else Outcome.TIMED_OUT
            with contextlib.suppress(Exception):  # the producer may be gone already
                stop()
            grace_until = now + STOP_GRACE
        if grace_until is not None and now >= grace_until:
            break
        try:
            item = pending.get(timeout=_POLL)
        except queue.Empty:
            continue
        if item is _DONE:
            break
        if isinstance(item, bytes | str):
            collector.feed(item)
    collector.finish()
    return outcome
