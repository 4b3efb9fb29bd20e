"""The browser settings a tool call sees, read from `ctx.settings.browser` (cheap)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tools.spec import ToolContext


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


@dataclass(frozen=True)
class BrowserConfig:
    #: A Chrome/Chromium/Edge executable or channel name; empty: look for one.
    executable: str = ""
    headless: bool = True
    ask_new_sites: bool = True
    idle_close_seconds: float = 300.0

    @classmethod
    def from_context(cls, ctx: ToolContext) -> BrowserConfig:
        """`ctx.settings.browser` (a pydantic model or a dict); defaults where missing."""
        raw = _get(ctx.settings, "browser")
        default = cls()
        values = {name: _get(raw, name) for name in ("executable", "headless", "ask_new_sites")}
        idle = _get(raw, "idle_close_seconds")
        return cls(
            executable=str(values["executable"] or ""),
            headless=default.headless if values["headless"] is None else bool(values["headless"]),
            ask_new_sites=(
                default.ask_new_sites
                if values["ask_new_sites"] is None
                else bool(values["ask_new_sites"])
            ),
            idle_close_seconds=float(idle) if idle else default.idle_close_seconds,
        )
