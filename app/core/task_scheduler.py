"""Starts scheduled task runs on time (docs/architecture.md §5.14). No Qt.

Like the reminder scheduler: waits are bounded (≤ 30 s) and every wake re-reads the clock,
so a suspended machine or a changed clock is noticed at the next wake; the book's catch-up
rules make a missed burst one late run. Each due task is claimed (`TaskRunner.claim`)
before its run starts, so a run never overlaps the previous run of the same task; runs of
different tasks go side by side.

Only one process runs the schedule: the holder of `<home>/tasks.lock` (the window, or
`deskhand tasks serve`). Another process sees the lock taken and leaves the runs to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from app.core.task_runner import RunOutcome, TaskRunner
from app.core.tasks import TaskError

log = logging.getLogger(__name__)

MAX_SLEEP_SECONDS = 30.0
LOCK_FILE = "tasks.lock"


class ScheduleLock:
    """Who runs the schedule on this machine for this home; held for the process's life."""

    def __init__(self, home: Path) -> None:
        from filelock import FileLock

        self._lock = FileLock(str(Path(home) / LOCK_FILE))

    def acquire(self) -> bool:
        from filelock import Timeout

        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            return False
        return True

    @property
    def held(self) -> bool:
        return bool(self._lock.is_locked)

    def release(self) -> None:
        if self._lock.is_locked:
            self._lock.release()


class TaskScheduler:
    def __init__(
        self,
        runner: TaskRunner,
        *,
        max_sleep: float = MAX_SLEEP_SECONDS,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.runner = runner
        self.max_sleep = max_sleep
        #: Told when a run starts or ends (the Tasks window refreshes).
        self.on_change = on_change
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._runs: set[asyncio.Task[RunOutcome | None]] = set()

    @property
    def clock(self) -> Callable[[], datetime]:
        return self.runner.clock

    def start(self) -> None:
        if self._loop_task is None or self._loop_task.done():
            self._loop_task = asyncio.ensure_future(self.run())

    def stop(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
        for run in list(self._runs):
            run.cancel()

    def poke(self) -> None:
        """Tasks or the clock changed: plan again now (and budgets are checked again)."""
        self.runner.clock_moved()
        self._wake.set()

    def tick(self) -> list[asyncio.Task[RunOutcome | None]]:
        """Claims and starts every run due now; returns the started runs."""
        started = []
        for due in self.runner.book.due(self.clock()):
            try:
                ticket = self.runner.claim(due.task.id, planned=due.planned)
            except TaskError as exc:  # still running, changed meanwhile: next wake decides
                log.info("task %s not started: %s", due.task.id, exc)
                continue
            run = asyncio.ensure_future(self._execute(ticket))
            self._runs.add(run)
            run.add_done_callback(self._runs.discard)
            started.append(run)
        if started:
            self._changed()
        return started

    async def _execute(self, ticket: Any) -> RunOutcome | None:
        try:
            return await self.runner.execute(ticket)
        finally:
            self._wake.set()  # its next run may be due already
            self._changed()

    async def idle(self) -> None:
        """Waits for every started run to end (tests, quitting)."""
        while self._runs:
            await asyncio.gather(*list(self._runs), return_exceptions=True)

    def seconds_until_next(self) -> float:
        now = self.clock()
        book = self.runner.book
        # a running task is planned again when its run ends (that wakes the loop)
        times = [book.next_run(t, now) for t in book.list() if not t.is_running(now)]
        nxt = min((t for t in times if t is not None), default=None)
        if nxt is None:
            return self.max_sleep
        return min(self.max_sleep, max(0.0, (nxt - now).total_seconds()))

    async def run(self) -> None:
        while True:
            try:
                self.tick()
            except Exception:  # an unreadable file must not end the schedule
                log.exception("could not start the due tasks")
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.seconds_until_next())

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:
                log.exception("task listener failed")
