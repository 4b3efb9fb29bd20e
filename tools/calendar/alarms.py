"""Event alarms also become Deskhand reminders (when the app provides the reminder book), so
the alarm pops up even if no other calendar client is running."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

from tools.calendar.events import StoredEvent, alarm_minutes_of, expand
from tools.calendar.zones import as_datetime
from tools.spec import ToolContext, ToolError
from tools.views import ReminderBookView, ReminderView

SOURCE = "calendar"
#: How far ahead the next occurrence of a repeating event is looked for.
HORIZON = timedelta(days=400)


def _book(ctx: ToolContext) -> ReminderBookView | None:
    try:
        return ctx.service("reminders")
    except ToolError:
        return None


def cancel(ctx: ToolContext, uid: str) -> int:
    """Cancels the scheduled reminders made for event `uid`; how many."""
    book = _book(ctx)
    if book is None:
        return 0
    count = 0
    for reminder in book.list():
        if reminder.source == SOURCE and reminder.source_ref == uid:
            book.cancel(reminder.id)
            count += 1
    return count


def schedule(
    ctx: ToolContext, stored: StoredEvent, tz: ZoneInfo
) -> tuple[ReminderView | None, str]:
    """A reminder at the next alarm of the event (its next occurrence for a series).
    Returns (reminder or None, a note for the result text; "" when there is no alarm)."""
    minutes = alarm_minutes_of(stored.master)
    if minutes is None:
        return None, ""
    book = _book(ctx)
    if book is None:
        return None, "the alarm is stored in the event (no reminder service here)"
    now = book.clock()
    lead = timedelta(minutes=minutes)
    for occurrence in expand(stored, now, now + HORIZON):
        start = as_datetime(occurrence.start, tz)
        if start - lead <= now:
            continue
        message = f"{occurrence.title or 'Event'} — starts {start.astimezone(tz):%H:%M %Z}"
        try:
            reminder = book.create_once(
                message, start - lead, tz.key, source=SOURCE, source_ref=stored.uid
            )
        except ValueError as exc:  # ReminderError
            return None, f"no reminder set ({exc})"
        when = reminder.local_due().strftime("%a %d %b %H:%M %Z")
        return reminder, f"reminder set for {when} ({minutes} min before)"
    return None, "no reminder set (the alarm time has passed)"
