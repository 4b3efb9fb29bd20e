"""The user's time zone, for tools and the app alike (no app imports)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def system_zone() -> ZoneInfo:
    """The machine's IANA zone (UTC when it cannot be told)."""
    local = datetime.now().astimezone().tzinfo
    key = getattr(local, "key", None)
    if key:
        return ZoneInfo(key)
    try:
        link = str(Path("/etc/localtime").resolve())
        marker = "zoneinfo/"
        return ZoneInfo(link.split(marker, 1)[1] if marker in link else "UTC")
    except (OSError, ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")
