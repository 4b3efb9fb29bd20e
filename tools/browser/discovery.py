"""Find the user's installed Chrome, Chromium or Edge. Deskhand never downloads a browser.

Cheap (no playwright): the settings pane uses `find_browser()` to show what was found.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from tools.spec import ToolError

#: Playwright channels: resolved by Playwright to the vendor's standard install location.
CHANNELS = (
    "chrome",
    "chrome-beta",
    "chrome-dev",
    "chrome-canary",
    "msedge",
    "msedge-beta",
    "msedge-dev",
)

#: Command names looked up on PATH, in order of preference.
PATH_NAMES = (
    "google-chrome",
    "google-chrome-stable",
    "chromium",
    "chromium-browser",
    "microsoft-edge",
    "microsoft-edge-stable",
    "brave-browser",
)

_MAC_APPS = (
    "Google Chrome.app/Contents/MacOS/Google Chrome",
    "Chromium.app/Contents/MacOS/Chromium",
    "Microsoft Edge.app/Contents/MacOS/Microsoft Edge",
    "Brave Browser.app/Contents/MacOS/Brave Browser",
)

_WINDOWS_RELATIVE = (
    r"Google\Chrome\Application\chrome.exe",
    r"Chromium\Application\chrome.exe",
    r"Microsoft\Edge\Application\msedge.exe",
    r"BraveSoftware\Brave-Browser\Application\brave.exe",
)

NOT_FOUND = (
    "No Chrome, Chromium or Edge found — install one (e.g. `sudo apt install chromium`) "
    "or set its path in Settings → Tools → Browser"
)


@dataclass(frozen=True)
class BrowserChoice:
    """What to launch: an executable path, or a Playwright channel name."""

    executable: str | None
    channel: str | None
    source: str  # "settings", "PATH", "standard location", "channel"

    @property
    def label(self) -> str:
        return self.executable or f"channel {self.channel}"


def standard_locations() -> list[Path]:
    """Where the vendors' installers put their browsers on this platform."""
    if sys.platform == "darwin":
        roots = [Path("/Applications"), Path.home() / "Applications"]
        return [root / app for root in roots for app in _MAC_APPS]
    if sys.platform == "win32":
        bases = [
            os.environ.get(name) for name in ("PROGRAMFILES", "PROGRAMFILES(X86)", "LOCALAPPDATA")
        ]
        return [Path(base) / rel for base in bases if base for rel in _WINDOWS_RELATIVE]
    return [
        Path("/usr/bin/chromium"),
        Path("/usr/bin/google-chrome"),
        Path("/opt/google/chrome/chrome"),
        Path("/opt/microsoft/msedge/msedge"),
        Path("/snap/bin/chromium"),
    ]


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_browser(configured: str = "") -> BrowserChoice:
    """The configured browser if set, else the first one found; ToolError if none."""
    configured = configured.strip()
    if configured:
        path = Path(os.path.expanduser(configured))
        if _executable(path):
            return BrowserChoice(str(path), None, "settings")
        on_path = shutil.which(configured)
        if on_path:
            return BrowserChoice(on_path, None, "settings")
        if configured in CHANNELS:
            return BrowserChoice(None, configured, "settings")
        raise ToolError(
            f"The browser set in Settings → Tools → Browser ({configured}) was not found or is "
            "not executable; fix the path or clear it to let Deskhand look for one"
        )
    for name in PATH_NAMES:
        found = shutil.which(name)
        if found:
            return BrowserChoice(found, None, "PATH")
    for path in standard_locations():
        if _executable(path):
            return BrowserChoice(str(path), None, "standard location")
    raise ToolError(NOT_FOUND)


def describe_found(configured: str = "") -> str:
    """One line for the settings pane: what Deskhand would launch, or what to install."""
    try:
        choice = find_browser(configured)
    except ToolError as exc:
        return str(exc)
    return f"Using {choice.label} (found via {choice.source})"
