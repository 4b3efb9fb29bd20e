"""Time zones and ISO 8601 times as the calendar tools read them (no app imports)."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tools.clock import system_zone
from tools.spec import ToolError

__all__ = ["system_zone"]


def zone(name: str | None) -> ZoneInfo:
    if not name:
        return system_zone()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"unknown time zone {name!r}; use an IANA name like Europe/Paris") from None


def parse_date(text: str, what: str) -> date:
    try:
        return date.fromisoformat(text.strip()[:10])
    except ValueError:
        raise ToolError(
            f"`{what}` must be an ISO 8601 date like 2026-11-23; got {text!r}"
        ) from None


def parse_time(text: str, tz: ZoneInfo, what: str) -> datetime:
    """An aware datetime: with its own offset when it has one, else read in `tz`.
    A bare date means midnight in `tz`."""
    raw = text.strip()
    try:
        if len(raw) == 10:
            value = datetime.combine(date.fromisoformat(raw), time())
        else:
            value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ToolError(
            f"`{what}` must be ISO 8601 like 2026-11-23T14:30 (optionally with an offset); "
            f"got {text!r}"
        ) from None
    return value.replace(tzinfo=tz) if value.tzinfo is None else value


def parse_clock(text: str, what: str) -> time:
    try:
        return time.fromisoformat(text.strip())
    except ValueError:
        raise ToolError(f"`{what}` must be a time of day like 09:00; got {text!r}") from None


def as_datetime(value: date | datetime, tz: ZoneInfo) -> datetime:
    """Aware datetime for comparing: dates are midnight in `tz`, floating times are `tz`."""
    if not isinstance(value, datetime):
        return datetime.combine(value, time(), tzinfo=tz)
    return value.replace(tzinfo=tz) if value.tzinfo is None else value


def show(value: date | datetime, tz: ZoneInfo) -> str:
    if not isinstance(value, datetime):
        return value.strftime("%a %d %b %Y")
    return as_datetime(value, tz).astimezone(tz).strftime("%a %d %b %Y %H:%M %Z")


def show_span(start: date | datetime, end: date | datetime, tz: ZoneInfo) -> str:
    if not isinstance(start, datetime):
        end_day = end.date() if isinstance(end, datetime) else end
        last = end_day - timedelta(days=1)
        if last > start:
            return f"{show(start, tz)} – {show(last, tz)} (all day)"
        return f"{show(start, tz)} (all day)"
    a = as_datetime(start, tz).astimezone(tz)
    b = as_datetime(end, tz).astimezone(tz)
    if a.date() == b.date():
        return f"{a:%a %d %b %Y %H:%M}–{b:%H:%M %Z}"
    return f"{show(a, tz)} – {show(b, tz)}"


def iso(value: date | datetime, tz: ZoneInfo) -> str:
    if not isinstance(value, datetime):
        return value.isoformat()
    return as_datetime(value, tz).astimezone(tz).isoformat()
