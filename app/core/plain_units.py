"""Sizes and durations as the user reads them, the same in the window and the terminal."""

from __future__ import annotations


def size_text(size: int) -> str:
    """ "491 MB", "1.1 GB": a file's or a process's size."""
    if size >= 1_000_000_000:
        return f"{size / 1e9:,.1f} GB"
    return f"{max(size, 0) / 1e6:,.0f} MB"


def duration_text(seconds: float) -> str:
    """ "39 s", "3 min", "1.5 h"."""
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"
