"""Approval hooks of the reminder tools: one plain line saying what a call will do, with times
in the reminder's zone as the tools read them ("at 20:15 today", "at 09:15 on Mon 30 Mar").

Reads only the reminder book (local SQLite) to name the reminder a call cancels or snoozes;
changes nothing.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tools.clock import system_zone
from tools.integrations.approval import quoted
from tools.spec import ToolContext, ToolError
from tools.views import ReminderBookView, ReminderView


def _book(ctx: ToolContext) -> ReminderBookView | None:
    try:
        return ctx.service("reminders")
    except ToolError:
        return None


def _now(ctx: ToolContext) -> datetime:
    """Now by the reminder book's clock (the one the tools use), else the machine's."""
    book = _book(ctx)
    return book.clock() if book is not None else datetime.now(UTC)


def _zone(name: str | None) -> ZoneInfo | None:
    """As the reminder tools read `tz`: the user's zone when not given; None when unknown."""
    if not name:
        return system_zone()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def day_words(day: date, today: date) -> str:
    """ "today", "tomorrow", or "on Mon 30 Mar" (with the year when it is not this year's)."""
    if day == today:
        return "today"
    if day == today + timedelta(days=1):
        return "tomorrow"
    year = f" {day.year}" if day.year != today.year else ""
    return f"on {day:%a} {day.day} {day:%b}{year}"


def when_words(moment: datetime, now: datetime, tz: ZoneInfo) -> str:
    """ "at 20:15 today" for an aware `moment`, read in `tz`; the zone is named when it is
    not the user's, and a time already gone is said to be."""
    local = moment.astimezone(tz)
    words = f"at {local:%H:%M} {day_words(local.date(), now.astimezone(tz).date())}"
    notes = [tz.key] if tz.key != system_zone().key else []
    if moment < now - timedelta(minutes=1):
        notes.append("in the past")
    return words + (f" ({', '.join(notes)})" if notes else "")


def summary_create(args: Any, ctx: ToolContext) -> str:
    head = f"Remind you {quoted(args.message)}"
    if (args.at is None) == (args.in_minutes is None):
        return f"{head} (no valid time: give either a time or a number of minutes)"
    tz = _zone(args.tz)
    if tz is None:
        return f"{head} (unknown time zone {quoted(args.tz, 40)})"
    now = _now(ctx)
    if args.in_minutes is not None:
        due = now + timedelta(minutes=args.in_minutes)
        return f"{head} in {args.in_minutes} min, {when_words(due, now, tz)}"
    try:
        at = datetime.fromisoformat(args.at.replace("Z", "+00:00"))
    except ValueError:
        return f"{head} at {quoted(args.at, 40)} (not a valid time)"
    if at.tzinfo is None:
        at = at.replace(tzinfo=tz)
    return f"{head} {when_words(at, now, tz)}"


def summary_create_recurring(args: Any, ctx: ToolContext) -> str:
    head = f"Remind you {quoted(args.message)} repeatedly on the schedule {quoted(args.cron, 40)}"
    tz = _zone(args.tz)
    if tz is None:
        return f"{head} (unknown time zone {quoted(args.tz, 40)})"
    from croniter import croniter  # loaded when asked, not with the manifest

    now = _now(ctx)
    try:
        first = croniter(args.cron, now.astimezone(tz)).get_next(datetime)
    except (ValueError, KeyError):
        return f"{head} (not a valid schedule)"
    return f"{head}, first {when_words(first, now, tz)}"


def _reminder(ctx: ToolContext, reminder_id: str) -> ReminderView | None:
    book = _book(ctx)
    if book is None:
        return None
    try:
        return book.get(reminder_id)
    except (LookupError, ValueError):  # ReminderError: no such reminder
        return None


def _named(ctx: ToolContext, reminder_id: str) -> tuple[str, ReminderView | None]:
    reminder = _reminder(ctx, reminder_id)
    if reminder is None:
        return f"{quoted(reminder_id, 40)} (no such reminder)", None
    return quoted(reminder.message), reminder


def summary_cancel(args: Any, ctx: ToolContext) -> str:
    words, reminder = _named(ctx, args.id)
    line = f"Cancel the reminder {words}"
    if reminder is not None and reminder.cron:
        return f"{line} (it repeats on {quoted(reminder.cron, 40)}; every time is cancelled)"
    if reminder is not None and reminder.status == "scheduled":
        tz = _zone(reminder.tz) or system_zone()
        return f"{line}, due {when_words(reminder.due_at, _now(ctx), tz)}"
    return line


def summary_snooze(args: Any, ctx: ToolContext) -> str:
    words, reminder = _named(ctx, args.id)
    tz = (_zone(reminder.tz) if reminder is not None else None) or system_zone()
    now = _now(ctx)
    due = now + timedelta(minutes=args.minutes)
    line = f"Show the reminder {words} again in {args.minutes} min, {when_words(due, now, tz)}"
    if reminder is not None and reminder.cron:
        line += " (once; its schedule stays)"
    return line
