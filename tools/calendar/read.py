"""Calendar tools that only read: calendars, events in a range, search, free slots."""

from __future__ import annotations

from datetime import datetime, timedelta

from tools.calendar.backend import backend_for
from tools.calendar.common import collect_events, start_of_today, time_range
from tools.calendar.events import Occurrence, occurrences
from tools.calendar.manifest import FindFreeSlots, ListCalendars, ListEvents, SearchEvents
from tools.calendar.slots import free_slots, working_windows
from tools.calendar.zones import parse_clock, show, zone
from tools.redact import TRIPWIRE, Redactor
from tools.spec import ToolContext, ToolError, ToolResult


def calendar_list_calendars(args: ListCalendars, ctx: ToolContext) -> ToolResult:
    with backend_for(ctx, args.account) as backend:
        calendars = backend.calendars()
        default = backend.default_calendar() if calendars else None
        label = backend.label
    rows = [{"id": c.id, "name": c.name, "default": c == default} for c in calendars]
    if not rows:
        return ToolResult(True, f"{label} has no calendars.", {"account": label, "calendars": []})
    lines = [f"- {r['name']}{' (default)' if r['default'] else ''}" for r in rows]
    return ToolResult(
        True, f"Calendars of {label}:\n" + "\n".join(lines), {"account": label, "calendars": rows}
    )


def calendar_list_events(args: ListEvents, ctx: ToolContext) -> ToolResult:
    tz = zone(args.tz)
    start, end = time_range(args.start, args.end, tz, start_of_today(tz), timedelta(days=7))
    with backend_for(ctx, args.account) as backend:
        names, stored = collect_events(backend, args.calendars, start, end, ctx)
        label = backend.label
    found = occurrences(stored, start, end, tz)
    shown = found[: args.limit]
    head = f"{label} ({', '.join(names)}), {show(start, tz)} – {show(end, tz)}:"
    lines = [o.line(tz) for o in shown] or ["No events."]
    if len(found) > len(shown):
        lines.append(f"… {len(found) - len(shown)} more; narrow the range to see them")
    data = {
        "account": label,
        "tz": tz.key,
        "start": start.astimezone(tz).isoformat(),
        "end": end.astimezone(tz).isoformat(),
        "events": [o.to_json(tz) for o in shown],
        "total": len(found),
    }
    return ToolResult(True, head + "\n" + "\n".join(lines), data)


def _matches(occ: Occurrence, words: list[str], redactor: Redactor) -> bool:
    """Whether every word occurs in the event as a listing shows it: title, location,
    description and attendees with known secrets masked (a search must not tell a right
    guess of a key in an invitation from a wrong one)."""
    fields = [occ.title, occ.location, occ.description, *occ.attendees]
    text = redactor.text("\n".join(redactor.text(f) for f in fields)).lower()
    return all(w in text for w in words)


def calendar_search_events(args: SearchEvents, ctx: ToolContext) -> ToolResult:
    tz = zone(args.tz)
    today = start_of_today(tz)
    start, end = time_range(
        args.start, args.end, tz, today - timedelta(days=90), timedelta(days=90 + 366)
    )
    words = args.query.lower().split()
    redactor = TRIPWIRE.redactor(ctx.secret_values())
    with backend_for(ctx, args.account) as backend:
        _, stored = collect_events(backend, args.calendars, start, end, ctx)
        label = backend.label
    seen: set[str] = set()
    hits: list[Occurrence] = []
    for occ in occurrences(stored, start, end, tz):
        if occ.uid not in seen and _matches(occ, words, redactor):
            seen.add(occ.uid)  # a repeating event is listed once, at its first occurrence
            hits.append(occ)
    shown = hits[: args.limit]
    if not shown:
        text = f"No events matching {args.query!r} in {label} between {show(start, tz)} and "
        return ToolResult(True, text + f"{show(end, tz)}.", {"account": label, "events": []})
    lines = [o.line(tz) for o in shown]
    if len(hits) > len(shown):
        lines.append(f"… {len(hits) - len(shown)} more")
    return ToolResult(
        True,
        f"Events matching {args.query!r} in {label}:\n" + "\n".join(lines),
        {"account": label, "tz": tz.key, "events": [o.to_json(tz) for o in shown]},
    )


def calendar_find_free_slots(args: FindFreeSlots, ctx: ToolContext) -> ToolResult:
    tz = zone(args.tz)
    now = datetime.now(tz).replace(second=0, microsecond=0)
    start, end = time_range(args.start, args.end, tz, now, timedelta(days=7))
    work_start = parse_clock(args.work_start, "work_start")
    work_end = parse_clock(args.work_end, "work_end")
    if work_end <= work_start:
        raise ToolError("work_end must be after work_start")
    weekdays = set(args.weekdays)
    if not weekdays or not weekdays <= set(range(1, 8)):
        raise ToolError("weekdays are ISO numbers 1 (Monday) … 7 (Sunday)")
    with backend_for(ctx, args.account) as backend:
        names, stored = collect_events(backend, args.calendars, start, end, ctx)
        label = backend.label
    busy = [
        o.span(tz)
        for o in occurrences(stored, start, end, tz)
        if o.busy and (args.count_all_day or not o.all_day)
    ]
    windows = working_windows(start, end, tz, work_start, work_end, weekdays)
    slots = free_slots(windows, busy, timedelta(minutes=args.min_minutes))
    rows = [
        {
            "start": a.astimezone(tz).isoformat(),
            "end": b.astimezone(tz).isoformat(),
            "minutes": int((b - a).total_seconds() // 60),
        }
        for a, b in slots
    ]
    head = (
        f"Free slots of at least {args.min_minutes} min, {work_start:%H:%M}–{work_end:%H:%M} "
        f"{tz.key}, in {label} ({', '.join(names)}):"
    )
    lines = [
        f"- {a.astimezone(tz):%a %d %b %Y %H:%M}–{b.astimezone(tz):%H:%M} ({r['minutes']} min)"
        for (a, b), r in zip(slots, rows, strict=True)
    ] or ["None in this range."]
    data = {"account": label, "tz": tz.key, "slots": rows, "busy_count": len(busy)}
    return ToolResult(True, head + "\n" + "\n".join(lines), data)
