"""Conversions between Qt's value types and Python's, typed (Qt's own `toPython()` is
typed `object`), and the non-None top-level rows of a tree."""

from __future__ import annotations

from datetime import datetime

from PySide6.QtCore import QDate, QDateTime, QTime
from PySide6.QtWidgets import QTreeWidget, QTreeWidgetItem


def to_qdatetime(moment: datetime) -> QDateTime:
    """`moment`'s wall-clock date and time, to the minute."""
    day = QDate(moment.year, moment.month, moment.day)
    return QDateTime(day, QTime(moment.hour, moment.minute))


def wall_clock(value: QDateTime) -> datetime:
    """A QDateTime's date and time as a naive datetime (read in the user's zone)."""
    day, clock = value.date(), value.time()
    return datetime(
        day.year(), day.month(), day.day(), clock.hour(), clock.minute(), clock.second()
    )


def top_level_items(tree: QTreeWidget) -> list[QTreeWidgetItem]:
    found = (tree.topLevelItem(i) for i in range(tree.topLevelItemCount()))
    return [item for item in found if item is not None]
