"""A stdio server's stderr, line by line into logging (logger `deskhand.mcp.<server>`), so
the secret tripwire on the log handlers scrubs it like any other record."""

from __future__ import annotations

import logging
import os
import threading
from typing import IO


class StderrPipe:
    """Owns a pipe: `writer` goes to the child as its stderr; a daemon thread logs lines."""

    def __init__(self, server: str) -> None:
        self._log = logging.getLogger(f"deskhand.mcp.{server}")
        self._server = server
        read_fd, write_fd = os.pipe()
        self.writer: IO[str] = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self._reader = os.fdopen(read_fd, "r", encoding="utf-8", errors="replace")
        self._thread = threading.Thread(target=self._pump, name=f"mcp-stderr-{server}", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        with self._reader:
            for line in self._reader:
                text = line.rstrip()
                if text:
                    self._log.info("[%s] %s", self._server, text)

    def close(self) -> None:
        """Our copy of the write end; the thread ends once the server's copies close too."""
        self.writer.close()
