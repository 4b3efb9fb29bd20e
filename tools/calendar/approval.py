"""Approval hooks of the calendar tools that change events: the account and calendar a call
acts on (`subject`) and one plain line saying what it will do (`summary_line`).

Cheap and side-effect free: no icalendar, no CalDAV server, no secrets; only the arguments
and the account list. (The approval preview, which may read the calendar, shows the rest.)
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from integrations import caldav as caldav_integration
from integrations.spec import Account
from tools.calendar.zones import parse_date, parse_time, system_zone, zone
from tools.integrations.approval import CallAccount, call_account, clean, quoted
from tools.spec import Subject, ToolContext, ToolError

INTEGRATION = "caldav"
#: An event without an end or a duration lasts this long (tools.calendar.common).
DEFAULT_MINUTES = 60


def _account(args: Any, ctx: ToolContext) -> CallAccount:
    """The calendar account a call acts on, as the tools choose it (backend.resolve_account):
    the named one, else the active one, else the local calendar."""
    if args.account or ctx.accounts is not None:
        return call_account(ctx, INTEGRATION, args.account)
    if getattr(ctx, "_account_resolver", None) is not None:
        return CallAccount(INTEGRATION, None)  # an account it cannot name without its secrets
    return CallAccount(INTEGRATION, caldav_integration.discover()[0].label)


def _calendar(args: Any, ctx: ToolContext) -> str | None:
    """The calendar name the call gives, else the account's default calendar (if set)."""
    if args.calendar:
        return clean(args.calendar, 40)
    directory = ctx.accounts
    if directory is None:
        return None
    found: Account | None
    try:
        if args.account:
            found = directory.find(INTEGRATION, args.account)
        else:
            found = directory.active(INTEGRATION)
    except LookupError:
        return None
    default = found.fields.get("calendar", "") if found is not None else ""
    return clean(default, 40) if default.strip() else None


def subject(args: Any, ctx: ToolContext) -> Subject:
    account = _account(args, ctx)
    calendar = _calendar(args, ctx)
    target = account.name
    if target and calendar:
        target += f" · {calendar}"
    return account.subject(target)


# ------------------------------------------------------------------ times


def _day(value: date, today: date) -> str:
    year = f" {value.year}" if value.year != today.year else ""
    return f"{value:%a} {value.day} {value:%b}{year}"


def _span(start: datetime, end: datetime, today: date) -> str:
    if start.date() == end.date():
        return f"on {_day(start.date(), today)} {start:%H:%M}–{end:%H:%M}"
    first, last = _day(start.date(), today), _day(end.date(), today)
    return f"from {first} {start:%H:%M} to {last} {end:%H:%M}"


def _days(first: date, last: date, today: date) -> str:
    if last <= first:
        return f"on {_day(first, today)} (all day)"
    return f"from {_day(first, today)} to {_day(last, today)} (all day)"


def _zone_note(args: Any, tz: ZoneInfo) -> str:
    return f" ({tz.key})" if args.tz and tz.key != system_zone().key else ""


def when_created(args: Any) -> str:
    """When a new event takes place, as calendar_create_event reads its times."""
    tz = zone(args.tz)
    today = datetime.now(tz).date()
    if args.all_day:
        first = parse_date(args.start, "start")
        if args.end:
            return _days(first, parse_date(args.end, "end"), today)
        days = -(-(args.duration_minutes or 1440) // 1440)
        return _days(first, first + timedelta(days=days - 1), today)
    start = parse_time(args.start, tz, "start").astimezone(tz)
    if args.end:
        end = parse_time(args.end, tz, "end").astimezone(tz)
    else:
        end = start + timedelta(minutes=args.duration_minutes or DEFAULT_MINUTES)
    return _span(start, end, today) + _zone_note(args, tz)


def _when_new(text: str, args: Any) -> str:
    tz = zone(args.tz)
    today = datetime.now(tz).date()
    if len(text.strip()) == 10:
        return _day(parse_date(text, "start"), today)
    moment = parse_time(text, tz, "start").astimezone(tz)
    return f"{_day(moment.date(), today)} {moment:%H:%M}{_zone_note(args, tz)}"


# ------------------------------------------------------------------ summaries


def _in(calendar: str | None, account: CallAccount) -> str:
    if calendar:
        return f"calendar {calendar}"
    if account.label is not None:
        return f"the default calendar of {account.label}"
    return "the default calendar"


def summary_create_event(args: Any, ctx: ToolContext) -> str:
    try:
        when = when_created(args)
    except ToolError:
        when = f"at {quoted(args.start, 40)} (not a valid time)"
    line = f"Add {quoted(args.title)} {when} to {_in(_calendar(args, ctx), _account(args, ctx))}"
    if args.recurrence:
        line += f", repeating ({clean(args.recurrence, 40)})"
    if args.attendees:
        count = len(args.attendees)
        line += f", inviting {count} {'person' if count == 1 else 'people'}"
    return line


def _changes(args: Any) -> list[str]:
    changes = []
    if args.title is not None:
        changes.append(f"title to {quoted(args.title)}")
    for name, value in (("start", args.start), ("end", args.end)):
        if value:
            try:
                changes.append(f"{name} to {_when_new(value, args)}")
            except ToolError:
                changes.append(f"{name} to {quoted(value, 40)} (not a valid time)")
    if args.duration_minutes:
        changes.append(f"length to {args.duration_minutes} min")
    if args.location is not None:
        changes.append(f"place to {quoted(args.location, 40)}")
    if args.description is not None:
        changes.append("description")
    if args.attendees is not None:
        changes.append(f"attendees to {quoted(', '.join(args.attendees), 40)}")
    if args.recurrence is not None:
        rule = args.recurrence.strip()
        changes.append(f"repeat rule to {clean(rule, 40)}" if rule else "no more repeating")
    if args.alarm_minutes is not None:
        alarm = args.alarm_minutes
        changes.append("no alarm" if alarm < 0 else f"alarm {alarm} min before")
    return changes


def _event(args: Any, ctx: ToolContext) -> str:
    where = f" in calendar {clean(args.calendar, 40)}" if args.calendar else ""
    account = _account(args, ctx)
    of = f" of {account.label}" if account.label is not None else ""
    return f"the event {quoted(args.event_id, 40)}{where}{of}"


def summary_update_event(args: Any, ctx: ToolContext) -> str:
    changes = _changes(args)
    what = ", ".join(changes) if changes else "nothing given to change"
    return f"Change {_event(args, ctx)} (a whole series if it repeats): {what}"


def summary_delete_event(args: Any, ctx: ToolContext) -> str:
    return f"Delete {_event(args, ctx)} (a whole series if it repeats)"
