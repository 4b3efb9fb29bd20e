"""Calendar tools: the local calendar on this computer and CalDAV accounts (Nextcloud,
Fastmail, iCloud, Radicale…). Times are ISO 8601, read in `tz` (IANA; default the user's zone).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from tools.spec import DeferredParams, Operation, ToolManifest

_READ = "tools.calendar.read"
_WRITE = "tools.calendar.write"
_APPROVAL = "tools.calendar.approval"
#: caldav itself is not required: the local calendar works without it, and a CalDAV
#: account says clearly that the package is missing.
REQUIRES = ("icalendar", "recurring_ical_events")

_TZ = "IANA time zone (e.g. Europe/Paris) for reading and showing times; default: the user's"
_TIME = "ISO 8601, e.g. 2026-11-23T14:30; without an offset it is read in `tz`"


class AccountParam(DeferredParams):
    account: str | None = Field(
        None,
        description="Calendar account id or label; default: the active one "
        "(the local calendar when none is set up)",
    )


class ListCalendars(AccountParam):
    pass


class RangeParams(AccountParam):
    start: str | None = Field(None, description=f"Range start, {_TIME}; default: now")
    end: str | None = Field(None, description=f"Range end, {_TIME}; default: start + 7 days")
    tz: str | None = Field(None, description=_TZ)
    calendars: list[str] | None = Field(
        None, description="Calendar names to include; default: all of the account's calendars"
    )


class ListEvents(RangeParams):
    limit: int = Field(200, ge=1, le=1000, description="At most this many occurrences")


class SearchEvents(AccountParam):
    query: str = Field(
        ..., min_length=1, description="Words to find in title, location, description, attendees"
    )
    start: str | None = Field(None, description=f"Search from, {_TIME}; default: 90 days ago")
    end: str | None = Field(None, description=f"Search until, {_TIME}; default: 1 year ahead")
    tz: str | None = Field(None, description=_TZ)
    calendars: list[str] | None = Field(None, description="Calendar names; default: all")
    limit: int = Field(50, ge=1, le=500)


class EventDetails(DeferredParams):
    end: str | None = Field(None, description=f"End, {_TIME}; or give duration_minutes")
    duration_minutes: int | None = Field(None, ge=1, le=60 * 24 * 366)
    tz: str | None = Field(None, description="IANA zone the event is kept in; default: user's")
    location: str | None = Field(None, max_length=1000)
    description: str | None = Field(None, max_length=20_000)
    attendees: list[str] | None = Field(None, description="E-mail addresses")
    recurrence: str | None = Field(
        None, description="RFC 5545 RRULE, e.g. FREQ=WEEKLY;BYDAY=MO;COUNT=10"
    )


class CreateEvent(AccountParam, EventDetails):
    title: str = Field(..., min_length=1, max_length=500)
    start: str = Field(..., description=f"Start, {_TIME} (a date for all-day events)")
    all_day: bool = Field(
        False, description="An all-day event: start (and end) are dates, end inclusive"
    )
    calendar: str | None = Field(None, description="Calendar name; default: the account's")
    alarm_minutes: int | None = Field(
        None, ge=0, le=40_320, description="Alarm this many minutes before the start"
    )


class EventRef(AccountParam):
    event_id: str = Field(..., min_length=1, description="The event id (UID) from a listing")
    calendar: str | None = Field(None, description="Calendar name to look in; default: all")


class UpdateEvent(EventRef, EventDetails):
    title: str | None = Field(None, min_length=1, max_length=500)
    start: str | None = Field(
        None, description=f"New start, {_TIME}; the duration is kept unless end is given"
    )
    tz: str | None = Field(
        None,
        description="IANA zone for reading the new times (default: the user's); when given, "
        "the event is also kept in it, else it stays in its own zone",
    )
    recurrence: str | None = Field(
        None, description='New RFC 5545 RRULE, e.g. FREQ=WEEKLY;COUNT=10; "" stops repeating'
    )
    alarm_minutes: int | None = Field(
        None, ge=-1, le=40_320, description="Alarm minutes before the start; -1 removes it"
    )


class DeleteEvent(EventRef):
    pass


class FindFreeSlots(RangeParams):
    work_start: str = Field("09:00", description="Working day starts (HH:MM in `tz`)")
    work_end: str = Field("17:00", description="Working day ends (HH:MM in `tz`)")
    weekdays: list[int] = Field(
        [1, 2, 3, 4, 5], description="ISO weekdays to consider, 1 = Monday … 7 = Sunday"
    )
    min_minutes: int = Field(30, ge=5, le=24 * 60, description="Shortest slot worth listing")
    count_all_day: bool = Field(
        False, description="Let all-day events (holidays, birthdays) block whole days"
    )


def _tool(
    name: str,
    description: str,
    params: type[BaseModel],
    op: Operation,
    *,
    preview: bool = False,
) -> ToolManifest:
    module = _READ if op is Operation.READ else _WRITE
    short = name.removeprefix("calendar_")
    return ToolManifest(
        name=name,
        category="calendar",
        description=description,
        params=params,
        operations=frozenset({op}),
        impl=f"{module}:{name}",
        requires=REQUIRES,
        integration="caldav",
        timeout=60,
        preview=f"{module}:preview_{short}" if preview else None,
        subject=None if op is Operation.READ else f"{_APPROVAL}:subject",
        summary_line=None if op is Operation.READ else f"{_APPROVAL}:summary_{short}",
    )


MANIFESTS = [
    _tool(
        "calendar_list_calendars",
        "List the calendars of a calendar account (local or CalDAV). Shows which is the default.",
        ListCalendars,
        Operation.READ,
    ),
    _tool(
        "calendar_list_events",
        "List calendar events in a time range, repeating events expanded, times in the "
        "user's zone. Default range: the next 7 days.",
        ListEvents,
        Operation.READ,
    ),
    _tool(
        "calendar_search_events",
        "Search calendar events by words in title, location, description or attendees.",
        SearchEvents,
        Operation.READ,
    ),
    _tool(
        "calendar_create_event",
        "Create a calendar event: title, start, end or duration, zone, location, description, "
        "attendees, alarm, repeat rule. An alarm also sets a Deskhand reminder.",
        CreateEvent,
        Operation.CREATE,
        preview=True,
    ),
    _tool(
        "calendar_update_event",
        "Change a calendar event by id (the whole series for a repeating event); only the "
        "fields given change.",
        UpdateEvent,
        Operation.UPDATE,
        preview=True,
    ),
    _tool(
        "calendar_delete_event",
        "Delete a calendar event by id (the whole series for a repeating event).",
        DeleteEvent,
        Operation.DELETE,
        preview=True,
    ),
    _tool(
        "calendar_find_free_slots",
        "Find free time slots across calendars within working hours (default Mon–Fri "
        "09:00–17:00) in a range.",
        FindFreeSlots,
        Operation.READ,
    ),
]
