"""Calendar tools that change events (create, update, delete) and their approval previews.
An event's alarm is mirrored as a Deskhand reminder (see alarms.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import icalendar

from tools.calendar import alarms
from tools.calendar.backend import Backend, backend_for, pick_one, resolve_account
from tools.calendar.common import (
    DEFAULT_DURATION,
    detail_lines,
    find_event,
    first_occurrence,
    is_date,
    rule_text,
    zone_of,
)
from tools.calendar.events import (
    EventFields,
    Occurrence,
    StoredEvent,
    apply,
    bump_sequence,
    new_event,
    occurrence_of,
    when,
    wrap,
)
from tools.calendar.manifest import CreateEvent, DeleteEvent, UpdateEvent
from tools.calendar.zones import parse_date, parse_time, show, zone
from tools.redact import shorten
from tools.spec import ToolContext, ToolError, ToolResult


def _one_length(args: CreateEvent | UpdateEvent) -> None:
    if args.end and args.duration_minutes:
        raise ToolError("give either `end` or `duration_minutes`, not both")


def _create_times(args: CreateEvent, tz: ZoneInfo) -> tuple[date | datetime, date | datetime]:
    _one_length(args)
    if args.all_day:
        first = parse_date(args.start, "start")
        if args.end:
            last = parse_date(args.end, "end")
            return first, last + timedelta(days=1)  # DTEND of all-day events is exclusive
        days = math.ceil((args.duration_minutes or 1440) / 1440)
        return first, first + timedelta(days=days)
    start = parse_time(args.start, tz, "start").astimezone(tz)
    if args.end:
        end = parse_time(args.end, tz, "end").astimezone(tz)
    else:
        duration = timedelta(minutes=args.duration_minutes) if args.duration_minutes else None
        end = start + (duration or DEFAULT_DURATION)
    return start, end


def _check_order(start: date | datetime, end: date | datetime, tz: ZoneInfo) -> None:
    if isinstance(start, datetime) != isinstance(end, datetime):
        raise ToolError("start and end must both be dates (all-day) or both be times")
    if end <= start:
        raise ToolError(f"the event ends ({show(end, tz)}) before it starts ({show(start, tz)})")


def _create_fields(args: CreateEvent, tz: ZoneInfo) -> EventFields:
    start, end = _create_times(args, tz)
    _check_order(start, end, tz)
    return EventFields(
        title=args.title,
        start=start,
        end=end,
        location=args.location,
        description=args.description,
        attendees=args.attendees,
        alarm_minutes=args.alarm_minutes,
        recurrence=args.recurrence or None,
    )


def calendar_create_event(args: CreateEvent, ctx: ToolContext) -> ToolResult:
    tz = zone(args.tz)
    event = new_event(_create_fields(args, tz))
    with backend_for(ctx, args.account) as backend:
        calendar = pick_one(backend, args.calendar)
        stored = backend.add(calendar, wrap(event))
        label = backend.label
    reminder, note = alarms.schedule(ctx, stored, tz)
    occ = first_occurrence(stored)
    text = f"Created in {calendar.name} ({label}): {occ.line(tz)}"
    data = {
        "account": label,
        "calendar": calendar.name,
        "event": occ.to_json(tz),
        "reminder_id": reminder.id if reminder is not None else None,
    }
    return ToolResult(True, text + (f"\n{note}" if note else ""), data)


def preview_create_event(args: CreateEvent, ctx: ToolContext) -> str:
    tz = zone(args.tz)
    event = new_event(_create_fields(args, tz))
    account = resolve_account(ctx, args.account)
    calendar = args.calendar or account.fields.get("calendar") or "the default calendar"
    occ = occurrence_of(event, calendar, "RRULE" in event)
    rule = rule_text(event)
    lines = [f"Create an event in {calendar} of {account.label}:", *detail_lines(occ, tz, rule)]
    if occ.attendees:
        lines.append("  (the server may send the attendees an invitation)")
    if args.alarm_minutes is not None:
        lines.append("  A Deskhand reminder is set for the alarm too.")
    return "\n".join(lines)


# ---- changing -------------------------------------------------------------------------------


@dataclass
class PlannedUpdate:
    stored: StoredEvent
    before: Occurrence
    after: Occurrence
    changed: icalendar.Calendar
    tz: ZoneInfo
    rules: tuple[str, str] = ("", "")  # the repeat rule before and after


def _update_times(
    args: UpdateEvent, master: icalendar.Event, tz: ZoneInfo, keep: ZoneInfo
) -> tuple[date | datetime | None, date | datetime | None]:
    """New start and end: naive times are read in `tz` (the zone the user sees), then kept
    in the event's zone `keep`."""
    _one_length(args)
    old = occurrence_of(master, "", False)
    length = old.end - old.start  # type: ignore[operator]
    start: date | datetime | None = None
    if args.start:
        if is_date(args.start):
            start = parse_date(args.start, "start")
        else:
            start = parse_time(args.start, tz, "start").astimezone(keep)
        if isinstance(start, datetime) != isinstance(old.start, datetime):
            length = DEFAULT_DURATION if isinstance(start, datetime) else timedelta(days=1)
    base = start if start is not None else old.start
    if args.end:
        if not isinstance(base, datetime):
            return start, parse_date(args.end, "end") + timedelta(days=1)
        return start, parse_time(args.end, tz, "end").astimezone(keep)
    if args.duration_minutes:
        minutes = timedelta(minutes=args.duration_minutes)
        if not isinstance(base, datetime):
            return start, base + timedelta(days=math.ceil(minutes / timedelta(days=1)))
        return start, base + minutes
    return start, (base + length if start is not None else None)


def _plan_update(args: UpdateEvent, backend: Backend) -> PlannedUpdate:
    stored = find_event(backend, args.event_id, args.calendar)
    before = first_occurrence(stored)
    changed = icalendar.Calendar.from_ical(stored.ical.to_ical())
    copy = StoredEvent(stored.calendar, changed, stored.handle)
    master = copy.master
    tz = zone(args.tz)
    keep = tz if args.tz else zone_of(when(master, "DTSTART"), tz)
    start, end = _update_times(args, master, tz, keep)
    fields = EventFields(
        title=args.title,
        start=start,
        end=end,
        location=args.location,
        description=args.description,
        attendees=args.attendees,
        alarm_minutes=args.alarm_minutes,
        recurrence=args.recurrence,
    )
    apply(master, fields)
    bump_sequence(master)
    after = first_occurrence(copy)
    _check_order(after.start, after.end, tz)
    changed.add_missing_timezones()
    rules = (rule_text(stored.master), rule_text(master))
    return PlannedUpdate(stored, before, after, changed, tz, rules)


def _changes(plan: PlannedUpdate, tz: ZoneInfo) -> list[str]:
    b, a = plan.before, plan.after
    pairs = [
        ("title", b.title, a.title),
        ("when", b.line(tz).split(" — ")[0], a.line(tz).split(" — ")[0]),
        ("location", b.location, a.location),
        ("description", shorten(b.description, 80, mark=""), shorten(a.description, 80, mark="")),
        ("attendees", ", ".join(b.attendees), ", ".join(a.attendees)),
        ("alarm", _alarm_text(b), _alarm_text(a)),
        ("repeats", *plan.rules),
    ]
    lines = [f"  {name}: {old or '—'} → {new or '—'}" for name, old, new in pairs if old != new]
    return lines or ["  (nothing changes)"]


def _alarm_text(occ: Occurrence) -> str:
    return "" if occ.alarm_minutes is None else f"{occ.alarm_minutes} min before"


def calendar_update_event(args: UpdateEvent, ctx: ToolContext) -> ToolResult:
    with backend_for(ctx, args.account) as backend:
        plan = _plan_update(args, backend)
        backend.replace(plan.stored, plan.changed)
        label = backend.label
    shown = zone(args.tz)
    updated = StoredEvent(plan.stored.calendar, plan.changed)
    alarms.cancel(ctx, plan.stored.uid)
    reminder, note = alarms.schedule(ctx, updated, shown)
    text = f"Updated in {plan.stored.calendar.name} ({label}): {plan.after.line(shown)}\n"
    text += "\n".join(_changes(plan, shown))
    data = {
        "account": label,
        "calendar": plan.stored.calendar.name,
        "event": plan.after.to_json(shown),
        "reminder_id": reminder.id if reminder is not None else None,
    }
    return ToolResult(True, text + (f"\n{note}" if note else ""), data)


def preview_update_event(args: UpdateEvent, ctx: ToolContext) -> str:
    shown = zone(args.tz)
    with backend_for(ctx, args.account) as backend:
        plan = _plan_update(args, backend)
        label = backend.label
    head = f"Update {plan.before.title!r} in {plan.stored.calendar.name} of {label}"
    if plan.before.recurring:
        head += " (every occurrence of the series)"
    return "\n".join([head + ":", *_changes(plan, shown)])


def calendar_delete_event(args: DeleteEvent, ctx: ToolContext) -> ToolResult:
    tz = zone(None)
    with backend_for(ctx, args.account) as backend:
        stored = find_event(backend, args.event_id, args.calendar)
        backend.remove(stored)
        label = backend.label
    occ = first_occurrence(stored)
    cancelled = alarms.cancel(ctx, stored.uid)
    text = f"Deleted from {stored.calendar.name} ({label}): {occ.line(tz)}"
    if occ.recurring:
        text += "\n(the whole series)"
    if cancelled:
        text += f"\n{cancelled} reminder(s) for it cancelled"
    data = {"account": label, "calendar": stored.calendar.name, "event": occ.to_json(tz)}
    return ToolResult(True, text, data)


def preview_delete_event(args: DeleteEvent, ctx: ToolContext) -> str:
    tz = zone(None)
    with backend_for(ctx, args.account) as backend:
        stored = find_event(backend, args.event_id, args.calendar)
        label = backend.label
    occ = first_occurrence(stored)
    head = f"Delete from {stored.calendar.name} of {label}"
    if occ.recurring:
        head += " (the whole repeating series)"
    return "\n".join([head + ":", *detail_lines(occ, tz, rule_text(stored.master))])
