"""Reminder rows. The rules (due times, repeats, late delivery) live in app.core.reminders;
this is only what it stores and reads back."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TypedDict

from app.core.store.database import Database, SqlValue, assignments, checked_columns


class NewReminder(TypedDict):
    """What `insert_reminder` stores (`fired_at` and `fired_count` start empty)."""

    id: str
    message: str
    due_at: float
    tz: str
    cron: str | None
    status: str
    created_at: float
    source: str
    source_ref: str | None
    conversation_id: str | None


class ReminderRow(NewReminder):
    """A stored reminder."""

    fired_at: float | None
    fired_count: int


_INSERTABLE = frozenset(NewReminder.__annotations__)
#: The columns `update_reminder` may change: everything but the identity.
_SETTABLE = frozenset(ReminderRow.__annotations__) - {"id", "created_at"}


class Reminders(Database):
    """The `reminders` table."""

    def insert_reminder(self, row: NewReminder) -> None:
        checked_columns("reminders", row, _INSERTABLE)  # refuses extra keys at run time
        with self._write() as db:
            db.execute(
                "INSERT INTO reminders (id, message, due_at, tz, cron, status, created_at,"
                " source, source_ref, conversation_id) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    row["id"],
                    row["message"],
                    row["due_at"],
                    row["tz"],
                    row["cron"],
                    row["status"],
                    row["created_at"],
                    row["source"],
                    row["source_ref"],
                    row["conversation_id"],
                ),
            )

    def update_reminder(self, reminder_id: str, **changes: SqlValue) -> bool:
        """Set these columns (`status=`, `due_at=`, …); False when there is no such reminder.
        ValueError for a column that is not a reminder's or may not change."""
        names = checked_columns("reminders", changes, _SETTABLE)
        if not names:
            raise ValueError("update_reminder needs at least one column to change")
        with self._write() as db:
            cur = db.execute(
                f"UPDATE reminders SET {assignments(names)} WHERE id = ?",
                (*changes.values(), reminder_id),
            )
        return cur.rowcount > 0

    def reminder_row(self, reminder_id: str) -> ReminderRow | None:
        rows = self._read("SELECT * FROM reminders WHERE id = ?", (reminder_id,))
        return _reminder(rows[0]) if rows else None

    def reminder_rows_with_status(self, statuses: Sequence[str]) -> list[ReminderRow]:
        """Reminders in any of `statuses`, soonest due first."""
        marks = ", ".join("?" for _ in statuses)
        rows = self._read(
            f"SELECT * FROM reminders WHERE status IN ({marks}) ORDER BY due_at", statuses
        )
        return [_reminder(r) for r in rows]


def _reminder(r: sqlite3.Row) -> ReminderRow:
    return ReminderRow(
        id=r["id"],
        message=r["message"],
        due_at=r["due_at"],
        tz=r["tz"],
        cron=r["cron"],
        status=r["status"],
        created_at=r["created_at"],
        source=r["source"],
        source_ref=r["source_ref"],
        conversation_id=r["conversation_id"],
        fired_at=r["fired_at"],
        fired_count=r["fired_count"],
    )
