"""Plain-text tables, sizes and times for results the model reads."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns separated by two spaces; trailing blanks trimmed."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def counted(count: int, noun: str) -> str:
    """'1 image', '3 images'."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def human_size(num: float | int | None) -> str:
    if num is None:
        return "?"
    value = float(num)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


def parse_time(text: str, *, now: datetime | None = None) -> datetime:
    """'10m', '2h', '1d' (that long ago) or an ISO 8601 timestamp (UTC when no zone)."""
    now = now or datetime.now(UTC)
    match = _RELATIVE.match(text)
    if match:
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()]
        return now - timedelta(seconds=seconds)
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"cannot read the time {text!r}: use ISO 8601 (2024-05-01T12:00:00Z) or a "
            "relative duration like '30s', '10m', '2h', '1d'"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def parse_engine_time(text: str | None) -> datetime | None:
    """Docker's RFC 3339 timestamps carry nanoseconds; Python reads at most microseconds."""
    if not text or text.startswith("0001-01-01"):
        return None
    trimmed = re.sub(r"(\.\d{6})\d+", r"\1", text.replace("Z", "+00:00"))
    try:
        return datetime.fromisoformat(trimmed)
    except ValueError:
        return None


def ago(moment: datetime | None, *, now: datetime | None = None) -> str:
    if moment is None:
        return "never"
    seconds = max(0, int(((now or datetime.now(UTC)) - moment).total_seconds()))
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''} ago"
    return f"{seconds} seconds ago"


def keep_newest(text: str, limit: int) -> tuple[str, int]:
    """The last whole lines of `text` that fit in `limit` characters, and how many were
    dropped from the start."""
    if len(text) <= limit:
        return text, 0
    lines = text.splitlines(keepends=True)
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        if size + len(line) > limit:
            break
        kept.append(line)
        size += len(line)
    if not kept:  # one enormous line: keep its end
        return lines[-1][-limit:], len(lines) - 1
    return "".join(reversed(kept)), len(lines) - len(kept)


def ports_summary(ports: dict[str, list[dict[str, str]] | None] | None) -> str:
    """NetworkSettings.Ports → '0.0.0.0:8080->80/tcp, 443/tcp'."""
    parts = []
    for container_port, bindings in sorted((ports or {}).items()):
        if not bindings:
            parts.append(container_port)
            continue
        for b in bindings:
            parts.append(f"{b.get('HostIp') or '0.0.0.0'}:{b.get('HostPort')}->{container_port}")
    return ", ".join(dict.fromkeys(parts))
