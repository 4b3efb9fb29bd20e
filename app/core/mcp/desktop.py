"""Where Claude Desktop keeps its config (a light module: the CLI parser names it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def claude_desktop_config_path() -> Path:
    """Where Claude Desktop keeps its config on this platform."""
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "Claude" / "claude_desktop_config.json"
