"""A stdio server's stderr, line by line into logging (logger `deskhand.mcp.<server>`), so
the secret tripwire on the log handlers scrubs it like any other record; the last lines of
each server are kept too, for `mcp list` and Settings to show why a server stopped.

The kept lines are redacted when read (every secret known by then, and anything shaped
like a credential) and their control characters made visible: a server's output is
untrusted text."""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from typing import TextIO

from app.core.secrets import known_secret_values
from app.core.visible import visible
from tools.redact import TRIPWIRE, Redactor

#: Lines kept per server start (the newest win).
KEPT_LINES = 40
#: Starts remembered per server.
KEPT_STARTS = 3
#: A longer line is cut into pieces of this many characters (a server must not make us
#: hold one endless line in memory).
MAX_LINE = 2000
#: How long `recent` waits, at most, for a finished server's last output to be read.
SETTLE = 1.0


class _Output:
    """What one start of a server wrote; `finished` once all of it has been read."""

    def __init__(self) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=KEPT_LINES)
        self.finished = False


_lock = threading.Lock()
_starts: dict[str, collections.deque[_Output]] = {}
_pipes: dict[str, list[StderrPipe]] = {}


class StderrPipe:
    """Owns a pipe: `writer` goes to the child as its stderr; a daemon thread logs lines."""

    def __init__(self, server: str) -> None:
        self._log = logging.getLogger(f"deskhand.mcp.{server}")
        self._server = server
        self._closed = False
        self._output = _Output()
        read_fd, write_fd = os.pipe()
        self.writer: TextIO = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self._reader = os.fdopen(read_fd, "r", encoding="utf-8", errors="replace")
        with _lock:
            _starts.setdefault(server, collections.deque(maxlen=KEPT_STARTS)).append(self._output)
            _pipes.setdefault(server, []).append(self)
        self._thread = threading.Thread(target=self._pump, name=f"mcp-stderr-{server}", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            with self._reader:
                for line in iter(lambda: self._reader.readline(MAX_LINE), ""):
                    text = line.rstrip()
                    if text:
                        with _lock:
                            self._output.lines.append(text)
                        self._log.info("[%s] %s", self._server, text)
        finally:
            with _lock:
                self._output.finished = True
                mine = _pipes.get(self._server, [])
                if self in mine:
                    mine.remove(self)

    def close(self) -> None:
        """Our copy of the write end; the thread ends once the server's copies close too."""
        self._closed = True
        self.writer.close()

    def drain(self, timeout: float) -> None:
        """Wait (bounded) until a closed pipe's output has all been read."""
        if self._closed:
            self._thread.join(timeout)


def recent(server: str, limit: int = 10, *, settle: float = SETTLE) -> list[str]:
    """The last `limit` lines `server` wrote to stderr, safe to show: known secrets and
    credential-shaped values masked, control characters visible. The lines come from the
    newest start that has ended with some output (why it stopped), else from the newest
    start with output. A start whose pipe is closed gets up to `settle` seconds for its
    last lines to be read."""
    deadline = time.monotonic() + settle
    with _lock:
        pipes = list(_pipes.get(server, ()))
    for pipe in pipes:
        pipe.drain(max(0.0, deadline - time.monotonic()))
    with _lock:
        starts = [s for s in _starts.get(server, ()) if s.lines]
        ended = [s for s in starts if s.finished]
        chosen = (ended or starts)[-1:]
        lines = list(chosen[0].lines)[-limit:] if chosen and limit > 0 else []
    if not lines:
        return []
    redactor = Redactor(known_secret_values())
    return [_safe(redactor, line) for line in lines]


def safe_line(line: str) -> str:
    """One line a server wrote, safe to show anywhere (secrets masked, controls visible)."""
    return _safe(Redactor(known_secret_values()), line)


def _safe(redactor: Redactor, line: str) -> str:
    return visible(TRIPWIRE.shapes(redactor.text(line)), keep_newlines=False)


def forget(server: str) -> None:
    """Drop what `server` wrote so far (its entry changed: old output would mislead)."""
    with _lock:
        _starts.pop(server, None)
