"""Reminders: one-shot or recurring (cron + IANA zone), kept in the store, due by wall clock.

Due times are absolute UTC instants. Whatever happened in between — the machine slept,
the clock jumped, Deskhand was closed — `collect_due(now)` hands out each reminder that
came due exactly once: late ones marked late, and a burst of missed repeats of a recurring
reminder coalesced into one delivery. No Qt, no timers here; `scheduler.py` drives it.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tools.clock import system_zone

if TYPE_CHECKING:
    from app.core.store import ReminderRow, Store

#: Delivered later than this after its due time → shown as late.
LATE_AFTER = timedelta(seconds=90)
STATUSES = ("scheduled", "fired", "done", "cancelled")


class ReminderError(ValueError):
    """Bad input for a reminder (unknown zone, invalid cron, time in the past…)."""


@dataclass(frozen=True)
class Reminder:
    id: str
    message: str
    due_at: datetime  # UTC
    tz: str
    cron: str | None
    status: str
    created_at: datetime
    fired_at: datetime | None
    fired_count: int
    source: str = "user"
    source_ref: str | None = None

    @property
    def recurring(self) -> bool:
        return self.cron is not None

    def local_due(self) -> datetime:
        return self.due_at.astimezone(ZoneInfo(self.tz))

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "message": self.message,
            "due": self.local_due().isoformat(),
            "due_utc": self.due_at.isoformat(),
            "tz": self.tz,
            "cron": self.cron,
            "status": self.status,
            "fired_count": self.fired_count,
            "source": self.source,
        }


@dataclass(frozen=True)
class Delivery:
    """One notification to show."""

    reminder: Reminder
    due_at: datetime  # the (first) occurrence this delivery stands for
    late: bool
    missed: int  # further occurrences coalesced into this one


def zone(name: str | None) -> ZoneInfo:
    if not name:
        return system_zone()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ReminderError(
            f"unknown time zone {name!r}; use an IANA name like Europe/Paris"
        ) from None


def next_occurrence(cron: str, tz: str, after: datetime) -> datetime:
    """The first occurrence strictly after `after`, in UTC, computed in local time so that
    "9:15 every weekday" stays 9:15 across DST changes."""
    from croniter import croniter

    local = after.astimezone(zone(tz))
    try:
        nxt: datetime = croniter(cron, local).get_next(datetime)
    except (ValueError, KeyError) as exc:
        raise ReminderError(f"invalid cron expression {cron!r}: {exc}") from None
    return nxt.astimezone(UTC)


def validate_cron(cron: str) -> None:
    from croniter import croniter

    if not croniter.is_valid(cron):
        raise ReminderError(
            f"invalid cron expression {cron!r}; five fields: minute hour day month weekday"
        )


class ReminderBook:
    """Reminders in the store. Blocking (SQLite): call from a thread or keep calls short."""

    def __init__(self, store: Store, clock: Callable[[], datetime] | None = None) -> None:
        self.store = store
        self.clock = clock or (lambda: datetime.now(UTC))

    # ---- creating ---------------------------------------------------------------------

    def create_once(
        self, message: str, at: datetime, tz: str | None = None, **extra: Any
    ) -> Reminder:
        if at.tzinfo is None:
            at = at.replace(tzinfo=zone(tz))
        due = at.astimezone(UTC)
        if due < self.clock() - timedelta(minutes=1):
            raise ReminderError(f"{at.isoformat()} is in the past")
        return self._insert(message, due, tz or zone(None).key, None, **extra)

    def create_recurring(
        self, message: str, cron: str, tz: str | None = None, **extra: Any
    ) -> Reminder:
        validate_cron(cron)
        name = zone(tz).key
        due = next_occurrence(cron, name, self.clock())
        return self._insert(message, due, name, cron, **extra)

    def _insert(
        self,
        message: str,
        due: datetime,
        tz: str,
        cron: str | None,
        *,
        source: str = "user",
        source_ref: str | None = None,
        conversation_id: str | None = None,
    ) -> Reminder:
        if not message.strip():
            raise ReminderError("a reminder needs a message")
        reminder_id = uuid.uuid4().hex[:10]
        self.store.insert_reminder(
            {
                "id": reminder_id,
                "message": message.strip(),
                "due_at": due.timestamp(),
                "tz": tz,
                "cron": cron,
                "status": "scheduled",
                "created_at": self.clock().timestamp(),
                "source": source,
                "source_ref": source_ref,
                "conversation_id": conversation_id,
            }
        )
        return self.get(reminder_id)

    # ---- reading ----------------------------------------------------------------------

    def get(self, reminder_id: str) -> Reminder:
        row = self.store.reminder_row(reminder_id)
        if row is None:
            raise ReminderError(f"no reminder {reminder_id!r}")
        return _from_row(row)

    def list(self, statuses: tuple[str, ...] = ("scheduled",)) -> list[Reminder]:
        return [_from_row(r) for r in self.store.reminder_rows_with_status(statuses)]

    def next_due(self) -> datetime | None:
        upcoming = self.list()
        return upcoming[0].due_at if upcoming else None

    # ---- changing ---------------------------------------------------------------------

    def cancel(self, reminder_id: str) -> Reminder:
        self.get(reminder_id)
        self.store.update_reminder(reminder_id, status="cancelled")
        return self.get(reminder_id)

    def done(self, reminder_id: str) -> Reminder:
        reminder = self.get(reminder_id)
        if not reminder.recurring:  # a recurring one stays scheduled for its next time
            self.store.update_reminder(reminder_id, status="done")
        return self.get(reminder_id)

    def snooze(self, reminder_id: str, minutes: int) -> Reminder:
        """Shows it again in `minutes`. A recurring reminder gets a one-shot copy, so its
        own schedule is not moved."""
        if not 1 <= minutes <= 7 * 24 * 60:
            raise ReminderError("snooze between 1 minute and 7 days")
        reminder = self.get(reminder_id)
        due = self.clock() + timedelta(minutes=minutes)
        if reminder.recurring:
            return self._insert(
                reminder.message, due, reminder.tz, None, source="snooze", source_ref=reminder.id
            )
        self.store.update_reminder(reminder_id, status="scheduled", due_at=due.timestamp())
        return self.get(reminder_id)

    def collect_due(self) -> builtins.list[Delivery]:
        """Marks every reminder due by now as delivered and returns one Delivery for each."""
        now = self.clock()
        deliveries = []
        for reminder in self.list():
            if reminder.due_at > now:
                break  # sorted by due time
            deliveries.append(self._deliver(reminder, now))
        return deliveries

    def _deliver(self, reminder: Reminder, now: datetime) -> Delivery:
        late = now - reminder.due_at > LATE_AFTER
        missed = 0
        if reminder.recurring:
            assert reminder.cron is not None
            following = next_occurrence(reminder.cron, reminder.tz, reminder.due_at)
            while following <= now:  # coalesce the burst missed while asleep/closed
                missed += 1
                following = next_occurrence(reminder.cron, reminder.tz, following)
            self.store.update_reminder(
                reminder.id,
                due_at=following.timestamp(),
                fired_at=now.timestamp(),
                fired_count=reminder.fired_count + 1,
            )
        else:
            self.store.update_reminder(
                reminder.id,
                status="fired",
                fired_at=now.timestamp(),
                fired_count=reminder.fired_count + 1,
            )
        return Delivery(self.get(reminder.id), reminder.due_at, late, missed)


def _from_row(row: ReminderRow) -> Reminder:
    def at(value: float | None) -> datetime | None:
        return None if value is None else datetime.fromtimestamp(value, UTC)

    return Reminder(
        id=row["id"],
        message=row["message"],
        due_at=datetime.fromtimestamp(row["due_at"], UTC),
        tz=row["tz"],
        cron=row["cron"],
        status=row["status"],
        created_at=datetime.fromtimestamp(row["created_at"], UTC),
        fired_at=at(row["fired_at"]),
        fired_count=row["fired_count"],
        source=row["source"],
        source_ref=row["source_ref"],
    )
