"""Where Deskhand keeps its state: one home folder (docs/architecture.md §6).

The path helpers only compute paths; callers create sub-folders when they need them.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "Deskhand"
HOME_ENV = "DESKHAND_HOME"


def deskhand_home(override: str | Path | None = None) -> Path:
    """The home folder: `override`, else `$DESKHAND_HOME`, else the platform's user data dir.

    The folder is created (mode 0o700: it holds conversations) if it does not exist yet;
    an existing folder's permissions are left alone.
    """
    if override is not None and str(override) != "":
        raw: str | Path = override
    elif os.environ.get(HOME_ENV):
        raw = os.environ[HOME_ENV]
    else:
        raw = platformdirs.user_data_dir(APP_NAME, appauthor=False)
    home = Path(raw).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    return home


def db_path(home: Path) -> Path:
    return home / "deskhand.db"


def settings_path(home: Path) -> Path:
    return home / "settings.json"


#: The task book (app.core.tasks), written with the first task.
TASKS_FILE = "tasks.json"


def mcp_path(home: Path) -> Path:
    return home / "mcp.json"


def tools_dir(home: Path) -> Path:
    """Third-party tool packs (`*.py` files) dropped in by the user."""
    return home / "tools"


def logs_dir(home: Path) -> Path:
    return home / "logs"
