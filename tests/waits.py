"""Waits for something to happen, off the Qt loop; each fails the test with what it waited
for when it never happens (tests/fixtures_qt.py's wait_until is the asyncio one)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


def poll_until(
    predicate: Callable[[], Any],
    timeout: float = 10.0,
    what: str = "condition",
    every: float = 0.05,
) -> Any:
    """Polls `predicate` (real state: a process list, a thread) until it is true; fails
    after `timeout` s saying `what` never happened."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


class Watch:
    """Runs `then` on a thread once `predicate` holds (what a user's click mid-call does).
    Past `timeout` it runs `then` anyway, so the call under test ends, and `check()` fails
    the test saying `what` never happened."""

    def __init__(
        self,
        predicate: Callable[[], Any],
        then: Callable[[], None],
        what: str,
        timeout: float = 30.0,
        every: float = 0.05,
    ) -> None:
        self.problem: str | None = None
        self._args = (predicate, then, what, timeout, every)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        predicate, then, what, timeout, every = self._args
        try:
            poll_until(predicate, timeout, what, every)
        except AssertionError as exc:
            self.problem = str(exc)
        finally:
            then()

    def check(self) -> None:
        """Fails the test when the watched-for thing never happened."""
        self._thread.join(5)
        assert self.problem is None, self.problem
