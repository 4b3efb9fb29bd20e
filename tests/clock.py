"""A clock the tests move: the schedulers (reminders, tasks) read the time from it."""

from __future__ import annotations

from datetime import datetime, timedelta


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now
