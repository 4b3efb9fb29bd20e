"""The platform's per-user autostart entry behind "Start Deskhand at login". No Qt.

Linux: an XDG autostart file, `$XDG_CONFIG_HOME/autostart/deskhand.desktop`.
macOS: a LaunchAgent, `~/Library/LaunchAgents/app.deskhand.plist` (RunAtLoad); launchd
reads it at the next login, so nothing is loaded now.
Windows: a value in `HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run`.

The content builders are pure functions so every platform's format is testable anywhere.
"""

from __future__ import annotations

import os
import plistlib
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

APP_NAME = "Deskhand"
DESKTOP_FILE = "deskhand.desktop"
AGENT_LABEL = "app.deskhand"
RUN_KEY = r"Software\Microsoft\Windows\CurrentVersion\Run"


class AutostartError(OSError):
    """The autostart entry could not be written or removed."""


def launch_command() -> list[str]:
    """How to start this Deskhand again: the frozen executable, or this Python with the CLI."""
    if getattr(sys, "frozen", False):
        return [sys.executable]
    return [sys.executable, "-m", "app.cli"]


# ---- pure content builders ------------------------------------------------------------

_EXEC_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`=%")


def desktop_exec(command: Sequence[str]) -> str:
    """The Exec value of a desktop entry (quoting rules of the Desktop Entry spec)."""
    parts = []
    for arg in command:
        arg = arg.replace("%", "%%")  # field codes start with %
        if arg and not (set(arg) & _EXEC_RESERVED):
            parts.append(arg)
            continue
        escaped = "".join("\\" + ch if ch in '"`$\\' else ch for ch in arg)
        parts.append(f'"{escaped}"')
    # The entry format itself treats a backslash as an escape, so each one is doubled again.
    return " ".join(parts).replace("\\", "\\\\")


def desktop_entry(command: Sequence[str]) -> str:
    return (
        "[Desktop Entry]\n"
        "Type=Application\n"
        f"Name={APP_NAME}\n"
        "Comment=Desktop AI assistant; keeps reminders running\n"
        f"Exec={desktop_exec(command)}\n"
        "Icon=deskhand\n"
        "Terminal=false\n"
        "X-GNOME-Autostart-enabled=true\n"
    )


def launch_agent_plist(command: Sequence[str]) -> bytes:
    return plistlib.dumps(
        {
            "Label": AGENT_LABEL,
            "ProgramArguments": list(command),
            "RunAtLoad": True,
            "ProcessType": "Interactive",
        }
    )


def windows_run_value(command: Sequence[str]) -> str:
    """One command line, quoted as Windows' argument parser expects."""
    return subprocess.list2cmdline(list(command))


# ---- paths ------------------------------------------------------------------------------


def linux_entry_path() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "autostart" / DESKTOP_FILE


def mac_agent_path() -> Path:
    return Path.home() / "Library" / "LaunchAgents" / f"{AGENT_LABEL}.plist"


# ---- the platform switch ------------------------------------------------------------


def enable(command: Sequence[str] | None = None) -> None:
    """Install (or rewrite) the entry so `command` runs at login."""
    command = list(command or launch_command())
    try:
        if sys.platform == "win32":
            _set_run_value(windows_run_value(command))
        elif sys.platform == "darwin":
            _write(mac_agent_path(), launch_agent_plist(command))
        else:
            _write(linux_entry_path(), desktop_entry(command).encode("utf-8"))
    except OSError as exc:
        raise AutostartError(f"could not set up start at login: {exc}") from exc


def disable() -> None:
    """Remove the entry; nothing happens when there is none."""
    try:
        if sys.platform == "win32":
            _delete_run_value()
        else:
            _entry_path().unlink(missing_ok=True)
    except OSError as exc:
        raise AutostartError(f"could not remove start at login: {exc}") from exc


def is_enabled() -> bool:
    if sys.platform == "win32":
        return _get_run_value() is not None
    return _entry_path().exists()


def set_enabled(wanted: bool, command: Sequence[str] | None = None) -> None:
    if wanted:
        enable(command)
    else:
        disable()


def _entry_path() -> Path:
    return mac_agent_path() if sys.platform == "darwin" else linux_entry_path()


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# ---- Windows registry (winreg exists only there) --------------------------------------


def _set_run_value(value: str) -> None:  # pragma: no cover - Windows only
    if sys.platform != "win32":
        raise OSError("the Windows registry exists only on Windows")
    import winreg

    with winreg.CreateKey(winreg.HKEY_CURRENT_USER, RUN_KEY) as key:
        winreg.SetValueEx(key, APP_NAME, 0, winreg.REG_SZ, value)


def _delete_run_value() -> None:  # pragma: no cover - Windows only
    if sys.platform != "win32":
        raise OSError("the Windows registry exists only on Windows")
    import winreg

    try:
        with winreg.OpenKey(winreg.HKEY_CURRENT_USER, RUN_KEY, 0, winreg.KEY_SET_VALUE) as key:
            winreg.DeleteValue(key, APP_NAME)
    except FileNotFoundError:
        pass


def _get_run_value() -> str | None:  # pragma: no cover - Windows only
    if sys.platform != "win32":
        raise OSError("the Windows registry exists only on Windows")
    import winreg

    try:
        with winreg.OpenKey(winreg.HKEY_CURRENT_USER, RUN_KEY) as key:
            value, _ = winreg.QueryValueEx(key, APP_NAME)
    except FileNotFoundError:
        return None
    return str(value)
