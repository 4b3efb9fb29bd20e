"""Events as iCalendar components: reading occurrences (recurrences expanded), building new
events and applying changes. The same code serves the local .ics file and CalDAV."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, cast
from zoneinfo import ZoneInfo

import icalendar
import recurring_ical_events

from tools.calendar.zones import as_datetime, iso, show_span
from tools.spec import ToolError

PRODID = "-//Deskhand//Calendar//EN"


@dataclass(frozen=True)
class CalendarRef:
    """One calendar of an account: `id` is its URL (CalDAV) or "local"."""

    id: str
    name: str


@dataclass
class StoredEvent:
    """One event as stored: a VCALENDAR with its VEVENT(s) sharing one UID (the series and
    its changed occurrences). `handle` is the backend's own object (a caldav Event)."""

    calendar: CalendarRef
    ical: icalendar.Calendar
    handle: Any = None

    @property
    def master(self) -> icalendar.Event:
        events = [e for e in self.ical.walk("VEVENT") if isinstance(e, icalendar.Event)]
        if not events:
            raise ToolError(f"calendar object in {self.calendar.name} holds no event")
        plain = [e for e in events if "RECURRENCE-ID" not in e]
        return (plain or events)[0]

    @property
    def uid(self) -> str:
        return str(self.master.get("UID", ""))


@dataclass(frozen=True)
class Occurrence:
    uid: str
    calendar: str
    title: str
    start: date | datetime
    end: date | datetime
    location: str = ""
    description: str = ""
    attendees: tuple[str, ...] = ()
    recurring: bool = False
    busy: bool = True
    alarm_minutes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def all_day(self) -> bool:
        return not isinstance(self.start, datetime)

    def span(self, tz: ZoneInfo) -> tuple[datetime, datetime]:
        return as_datetime(self.start, tz), as_datetime(self.end, tz)

    def line(self, tz: ZoneInfo) -> str:
        parts = [f"{show_span(self.start, self.end, tz)} — {self.title or '(no title)'}"]
        if self.location:
            parts.append(f"@ {self.location}")
        if self.recurring:
            parts.append("(repeats)")
        parts.append(f"[id {self.uid}; {self.calendar}]")
        return " ".join(parts)

    def to_json(self, tz: ZoneInfo) -> dict[str, Any]:
        return {
            "id": self.uid,
            "calendar": self.calendar,
            "title": self.title,
            "start": iso(self.start, tz),
            "end": iso(self.end, tz),
            "all_day": self.all_day,
            "location": self.location,
            "description": self.description,
            "attendees": list(self.attendees),
            "recurring": self.recurring,
            "busy": self.busy,
            "alarm_minutes": self.alarm_minutes,
        }


# ---- reading ----------------------------------------------------------------------------


def _text(component: icalendar.Component, name: str) -> str:
    value = component.get(name)
    return str(value) if value is not None else ""


def attendees_of(component: icalendar.Component) -> tuple[str, ...]:
    raw = component.get("ATTENDEE")
    if raw is None:
        return ()
    items = raw if isinstance(raw, list) else [raw]
    return tuple(str(a).removeprefix("mailto:").removeprefix("MAILTO:") for a in items)


def alarm_minutes_of(component: icalendar.Component) -> int | None:
    """Minutes before the start of the first alarm relative to the start, if any."""
    for alarm in component.walk("VALARM"):
        trigger = alarm.get("TRIGGER")
        if trigger is None or not isinstance(trigger.dt, timedelta):
            continue
        if str(trigger.params.get("RELATED", "START")).upper() != "START":
            continue
        return max(0, round(-trigger.dt.total_seconds() / 60))
    return None


def _dt(component: icalendar.Component, name: str) -> object:
    """The parsed value of a date, time or duration property. A property icalendar could not
    parse (vBroken) raises icalendar's own error on `.dt`, as a direct access would."""
    prop = component[name]
    if isinstance(prop, icalendar.vDDDTypes | icalendar.vBroken):
        return prop.dt
    raise ToolError(f"{name} of event {_text(component, 'UID')} is not a date, time or duration")


def when(component: icalendar.Component, name: str) -> date | datetime:
    """DTSTART, DTEND or RECURRENCE-ID as a date (all-day) or a datetime."""
    value = _dt(component, name)
    if isinstance(value, date):  # a datetime is a date too
        return value
    raise ToolError(f"{name} of event {_text(component, 'UID')} is not a date or a time")


def _duration(component: icalendar.Component) -> timedelta:
    value = _dt(component, "DURATION")
    if isinstance(value, timedelta):
        return value
    raise ToolError(f"DURATION of event {_text(component, 'UID')} is not a duration")


def _end_of(component: icalendar.Component, start: date | datetime) -> date | datetime:
    if "DTEND" in component:
        return when(component, "DTEND")
    if "DURATION" in component:
        return start + _duration(component)
    return start if isinstance(start, datetime) else start + timedelta(days=1)


def occurrence_of(component: icalendar.Component, calendar: str, recurring: bool) -> Occurrence:
    start = when(component, "DTSTART")
    transparent = _text(component, "TRANSP").upper() == "TRANSPARENT"
    cancelled = _text(component, "STATUS").upper() == "CANCELLED"
    return Occurrence(
        uid=_text(component, "UID"),
        calendar=calendar,
        title=_text(component, "SUMMARY"),
        start=start,
        end=_end_of(component, start),
        location=_text(component, "LOCATION"),
        description=_text(component, "DESCRIPTION"),
        attendees=attendees_of(component),
        recurring=recurring,
        busy=not (transparent or cancelled),
        alarm_minutes=alarm_minutes_of(component),
    )


def expand(stored: StoredEvent, start: datetime, end: datetime) -> list[Occurrence]:
    """The occurrences of one stored event overlapping [start, end)."""
    recurring = any("RRULE" in e or "RDATE" in e for e in stored.ical.walk("VEVENT"))
    try:
        found = recurring_ical_events.of(stored.ical).between(start, end)
    except Exception as exc:  # a malformed RRULE from some other client
        raise ToolError(
            f"cannot read event {stored.uid} in {stored.calendar.name}: {exc}"
        ) from None
    return [occurrence_of(c, stored.calendar.name, recurring) for c in found if "DTSTART" in c]


def occurrences(
    stored: Iterable[StoredEvent], start: datetime, end: datetime, tz: ZoneInfo
) -> list[Occurrence]:
    found = [o for s in stored for o in expand(s, start, end)]
    return sorted(found, key=lambda o: (o.span(tz)[0], o.title))


# ---- writing ----------------------------------------------------------------------------


def new_uid() -> str:
    return f"{uuid.uuid4()}@deskhand"


def wrap(*events: icalendar.Event) -> icalendar.Calendar:
    cal = icalendar.Calendar()
    cal.add("prodid", PRODID)
    cal.add("version", "2.0")
    for event in events:
        cal.add_component(event)
    cal.add_missing_timezones()
    return cal


def parse_rrule(text: str) -> icalendar.vRecur:
    raw = text.strip().removeprefix("RRULE:")
    try:
        rule = icalendar.vRecur.from_ical(raw)
    except (ValueError, TypeError):
        rule = None
    if not rule or "FREQ" not in rule:
        raise ToolError(
            f"`recurrence` must be an RFC 5545 rule like FREQ=WEEKLY;BYDAY=MO;COUNT=10; "
            f"got {text!r}"
        )
    return cast(icalendar.vRecur, rule)


@dataclass
class EventFields:
    """What a create or update sets; None means "leave as it is" for an update."""

    title: str | None = None
    start: date | datetime | None = None
    end: date | datetime | None = None
    location: str | None = None
    description: str | None = None
    attendees: list[str] | None = None
    alarm_minutes: int | None = None  # -1 removes the alarm
    recurrence: str | None = None  # "" removes it


def _replace(event: icalendar.Event, name: str, value: Any) -> None:
    event.pop(name, None)
    if value not in (None, ""):
        event.add(name, value)


def set_alarm(event: icalendar.Event, minutes: int | None) -> None:
    event.subcomponents = [c for c in event.subcomponents if c.name != "VALARM"]
    if minutes is None or minutes < 0:
        return
    alarm = icalendar.Alarm()
    alarm.add("action", "DISPLAY")
    alarm.add("description", str(event.get("SUMMARY", "Event")))
    alarm.add("trigger", timedelta(minutes=-minutes))
    event.add_component(alarm)


def _set_attendees(event: icalendar.Event, attendees: list[str]) -> None:
    event.pop("ATTENDEE", None)
    for address in attendees:
        address = address.strip()
        if not address:
            continue
        value = address if ":" in address else f"mailto:{address}"
        event.add("attendee", icalendar.vCalAddress(value), encode=False)


def apply(event: icalendar.Event, fields: EventFields) -> None:
    if fields.title is not None:
        _replace(event, "SUMMARY", fields.title)
    if fields.start is not None:
        _replace(event, "DTSTART", fields.start)
    if fields.end is not None:
        event.pop("DURATION", None)
        _replace(event, "DTEND", fields.end)
    if fields.location is not None:
        _replace(event, "LOCATION", fields.location)
    if fields.description is not None:
        _replace(event, "DESCRIPTION", fields.description)
    if fields.attendees is not None:
        _set_attendees(event, fields.attendees)
    if fields.recurrence is not None:
        rule = parse_rrule(fields.recurrence) if fields.recurrence.strip() else None
        _replace(event, "RRULE", rule)
    if fields.alarm_minutes is not None:
        set_alarm(event, fields.alarm_minutes)
    now = datetime.now(UTC).replace(microsecond=0)
    _replace(event, "DTSTAMP", now)
    _replace(event, "LAST-MODIFIED", now)


def new_event(fields: EventFields, uid: str | None = None) -> icalendar.Event:
    event = icalendar.Event()
    event.add("uid", uid or new_uid())
    event.add("created", datetime.now(UTC).replace(microsecond=0))
    event.add("sequence", 0)
    apply(event, fields)
    return event


def bump_sequence(event: icalendar.Event) -> None:
    _replace(event, "SEQUENCE", int(event.get("SEQUENCE", 0)) + 1)
