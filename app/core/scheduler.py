"""Fires reminders on time. Waits are bounded (≤ 30 s) and every wake re-reads the wall
clock, so a suspended machine or a clock change is noticed at the next wake, and the
book's catch-up rules deliver what came due exactly once. No Qt: the GUI passes `deliver`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from app.core.reminders import Delivery, ReminderBook

log = logging.getLogger(__name__)

MAX_SLEEP_SECONDS = 30.0


class Scheduler:
    def __init__(
        self,
        book: ReminderBook,
        deliver: Callable[[Delivery], None],
        *,
        max_sleep: float = MAX_SLEEP_SECONDS,
    ) -> None:
        self.book = book
        self.deliver = deliver
        self.max_sleep = max_sleep
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self.run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def poke(self) -> None:
        """Reminders changed: re-plan now instead of at the next wake."""
        self._wake.set()

    def tick(self) -> list[Delivery]:
        """Delivers everything due now; returns what was delivered."""
        deliveries = self.book.collect_due()
        for delivery in deliveries:
            try:
                self.deliver(delivery)
            except Exception:  # one failing notification must not stop the others
                log.exception("could not show reminder %s", delivery.reminder.id)
        return deliveries

    def seconds_until_next(self) -> float:
        nxt = self.book.next_due()
        if nxt is None:
            return self.max_sleep
        wait = (nxt - self.book.clock()).total_seconds()
        return min(self.max_sleep, max(0.0, wait))

    async def run(self) -> None:
        while True:
            self.tick()
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.seconds_until_next())
