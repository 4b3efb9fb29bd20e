"""The few settings the window needs before its first paint, read straight from
settings.json without the settings model (pydantic costs tens of milliseconds to import).

A value that is missing or not what the model would accept gives the default; the full
load (`app.core.settings`) reports and repairs such entries later.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast, get_args

from app.core.paths import settings_path

#: The settings model's own types for these fields (app.core.settings uses them).
ThemeMode = Literal["system", "light", "dark"]
THEMES: tuple[ThemeMode, ...] = get_args(ThemeMode)
SendKey = Literal["enter", "ctrl_enter"]
SEND_KEYS: tuple[SendKey, ...] = get_args(SendKey)


@dataclass(frozen=True)
class GeneralPeek:
    theme: ThemeMode = "system"
    start_minimized: bool = False
    send_key: SendKey = "enter"


def read_general(home: Path) -> GeneralPeek:
    """`general.theme`, `general.start_minimized` and `general.send_key`, or their
    defaults."""
    try:
        raw = json.loads(settings_path(home).read_text("utf-8"))
    except (OSError, ValueError):
        return GeneralPeek()
    general = raw.get("general") if isinstance(raw, dict) else None
    if not isinstance(general, dict):
        return GeneralPeek()
    theme = general.get("theme")
    minimized = general.get("start_minimized")
    send_key = general.get("send_key")
    return GeneralPeek(
        theme=cast(ThemeMode, theme) if theme in THEMES else "system",
        start_minimized=minimized if isinstance(minimized, bool) else False,
        send_key=cast(SendKey, send_key) if send_key in SEND_KEYS else "enter",
    )
