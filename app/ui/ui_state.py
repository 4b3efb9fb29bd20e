"""Window geometry, splitter, sidebar, last conversation and one-time notices, kept in the home
folder (`ui_state.json`, written atomically) rather than in the OS's Qt settings store."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

from app.core.atomic_file import atomic_write

log = logging.getLogger(__name__)


@dataclass
class UiState:
    geometry: str = ""  # base64 of QWidget.saveGeometry()
    splitter: str = ""  # base64 of QSplitter.saveState()
    sidebar_visible: bool = True
    sidebar_width: int = 260  # the sidebar's width when shown (also while it is hidden)
    last_conversation: str | None = None
    tray_notice_shown: bool = False
    #: Closing the window without a tray: "keep" running, "quit", or "" (ask).
    background_choice: str = ""
    background_notice_shown: bool = False  # "still running" told once without a tray
    drafts: dict[str, str] = field(default_factory=dict)  # conversation id ("" = new) → text

    @classmethod
    def load(cls, path: Path) -> UiState:
        try:
            raw = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", path.name, exc)
            return cls()
        known = {k: v for k, v in raw.items() if k in cls.__dataclass_fields__}
        try:
            state = cls(**known)
        except TypeError:
            return cls()
        if not isinstance(state.sidebar_visible, bool):
            state.sidebar_visible = True
        if not isinstance(state.sidebar_width, int) or isinstance(state.sidebar_width, bool):
            state.sidebar_width = 260
        return state

    def save(self, path: Path) -> None:
        try:
            atomic_write(path, json.dumps(asdict(self)).encode("utf-8"), mode=0o600)
        except OSError as exc:  # a full disk must not crash closing the window
            log.warning("could not save the window state: %s", exc)
