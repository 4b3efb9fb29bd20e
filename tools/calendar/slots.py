"""Free time between busy intervals, within working hours, computed in one time zone."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

Interval = tuple[datetime, datetime]


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def working_windows(
    start: datetime,
    end: datetime,
    tz: ZoneInfo,
    work_start: time,
    work_end: time,
    weekdays: set[int],
) -> list[Interval]:
    """[work_start, work_end) on each chosen ISO weekday (1 = Monday), clipped to the range.
    Wall-clock times in `tz`, so "9 to 5" stays 9 to 5 across DST changes."""
    windows: list[Interval] = []
    day = start.astimezone(tz).date()
    last = end.astimezone(tz).date()
    while day <= last:
        if day.isoweekday() in weekdays:
            a = datetime.combine(day, work_start, tzinfo=tz)
            b = datetime.combine(day, work_end, tzinfo=tz)
            a, b = max(a, start), min(b, end)
            if a < b:
                windows.append((a, b))
        day += timedelta(days=1)
    return windows


def free_slots(
    windows: Iterable[Interval], busy: Iterable[Interval], min_length: timedelta
) -> list[Interval]:
    taken = merge(busy)
    free: list[Interval] = []
    for win_start, win_end in windows:
        cursor = win_start
        for b_start, b_end in taken:
            if b_end <= cursor or b_start >= win_end:
                continue
            if b_start - cursor >= min_length:
                free.append((cursor, b_start))
            cursor = max(cursor, b_end)
            if cursor >= win_end:
                break
        if win_end - cursor >= min_length:
            free.append((cursor, win_end))
    return free
