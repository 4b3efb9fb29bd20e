"""Helpers shared by the calendar tool bodies: ranges, finding events, describing them."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import icalendar

from tools.calendar.backend import Backend, pick
from tools.calendar.events import Occurrence, StoredEvent, occurrence_of
from tools.calendar.zones import parse_time, show
from tools.spec import ToolContext, ToolError

#: Longest range a listing may expand (repeating events make long ranges expensive).
MAX_RANGE = timedelta(days=3 * 366)
DEFAULT_DURATION = timedelta(hours=1)


def time_range(
    start: str | None, end: str | None, tz: ZoneInfo, default_start: datetime, span: timedelta
) -> tuple[datetime, datetime]:
    a = parse_time(start, tz, "start") if start else default_start
    b = parse_time(end, tz, "end") if end else a + span
    if b <= a:
        raise ToolError(f"the range ends ({show(b, tz)}) before it starts ({show(a, tz)})")
    if b - a > MAX_RANGE:
        raise ToolError("ask for at most 3 years at a time")
    return a, b


def start_of_today(tz: ZoneInfo) -> datetime:
    return datetime.now(tz).replace(hour=0, minute=0, second=0, microsecond=0)


def collect_events(
    backend: Backend, names: list[str] | None, start: datetime, end: datetime, ctx: ToolContext
) -> tuple[list[str], list[StoredEvent]]:
    calendars = pick(backend, names)
    stored: list[StoredEvent] = []
    for calendar in calendars:
        ctx.check_cancelled()
        stored.extend(backend.events(calendar, start, end))
    return [c.name for c in calendars], stored


def is_date(text: str) -> bool:
    return len(text.strip()) == 10


def find_event(backend: Backend, event_id: str, calendar: str | None) -> StoredEvent:
    calendars = pick(backend, [calendar] if calendar else None)
    stored = backend.find(event_id, calendars)
    if stored is None:
        where = calendar or ", ".join(c.name for c in calendars) or "no calendars"
        raise ToolError(
            f"no event with id {event_id!r} in {backend.label} ({where}); "
            "list or search events to get its id"
        )
    return stored


def first_occurrence(stored: StoredEvent) -> Occurrence:
    recurring = any("RRULE" in e or "RDATE" in e for e in stored.ical.walk("VEVENT"))
    return occurrence_of(stored.master, stored.calendar.name, recurring)


def detail_lines(occ: Occurrence, tz: ZoneInfo, rule: str = "") -> list[str]:
    lines = [f"  What: {occ.title or '(no title)'}", f"  When: {occ.line(tz).split(' — ')[0]}"]
    if occ.location:
        lines.append(f"  Where: {occ.location}")
    if occ.attendees:
        lines.append(f"  Attendees: {', '.join(occ.attendees)}")
    if rule:
        lines.append(f"  Repeats: {rule}")
    if occ.alarm_minutes is not None:
        lines.append(f"  Alarm: {occ.alarm_minutes} min before")
    return lines


def zone_of(value: date | datetime, fallback: ZoneInfo) -> ZoneInfo:
    tzinfo = getattr(value, "tzinfo", None)
    return tzinfo if isinstance(tzinfo, ZoneInfo) else fallback


def rule_text(event: icalendar.Event) -> str:
    rule = event.get("RRULE")
    return rule.to_ical().decode() if rule is not None else ""
