"""The system prompt's line with the user's date, time and zone."""

from __future__ import annotations

from datetime import datetime

from tools.clock import system_zone


def current_time_line() -> str:
    """So "tomorrow at 5" means something: the user's date, time and zone."""
    tz = system_zone()
    now = datetime.now(tz)
    return f"Now: {now.strftime('%A %Y-%m-%d %H:%M')} in {tz.key} (UTC{now.strftime('%z')})."
