"""Start at login: the XDG autostart file for real (tmp XDG_CONFIG_HOME), the macOS plist
and the Windows Run value as content."""

from __future__ import annotations

import plistlib
import sys
from pathlib import Path

import pytest

from app.core import autostart

linux_only = pytest.mark.skipif(
    sys.platform in ("win32", "darwin"), reason="the XDG autostart file is the Linux backend"
)


@pytest.fixture
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    config = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    return config


def entry_fields(text: str) -> dict[str, str]:
    lines = text.splitlines()
    assert lines[0] == "[Desktop Entry]"
    return dict(line.split("=", 1) for line in lines[1:] if line)


def unescape_exec(value: str) -> list[str]:
    """Reads Exec as the Desktop Entry spec says: the string-level escape (\\\\ → \\)
    first, then arguments split on spaces, a quoted one with backslash escapes inside."""
    value = value.replace("\\\\", "\\")
    args: list[str] = []
    i = 0
    while i < len(value):
        if value[i] == " ":
            i += 1
            continue
        if value[i] != '"':
            end = value.find(" ", i)
            end = len(value) if end < 0 else end
            args.append(value[i:end])
            i = end
            continue
        arg, i = "", i + 1
        while value[i] != '"':
            if value[i] == "\\":
                i += 1
            arg += value[i]
            i += 1
        args.append(arg)
        i += 1
    return args


def test_launch_command_runs_the_cli_module_or_the_frozen_executable(monkeypatch):
    assert autostart.launch_command() == [sys.executable, "-m", "app.cli"]
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", "/opt/Deskhand/deskhand")
    assert autostart.launch_command() == ["/opt/Deskhand/deskhand"]


@linux_only
def test_linux_enable_writes_the_desktop_file_and_disable_removes_it(xdg):
    command = ["/home/ann/.venv/bin/python", "-m", "app.cli"]
    assert not autostart.is_enabled()
    autostart.enable(command)
    path = xdg / "autostart" / "deskhand.desktop"
    assert autostart.linux_entry_path() == path and autostart.is_enabled()
    fields = entry_fields(path.read_text(encoding="utf-8"))
    assert fields["Exec"] == "/home/ann/.venv/bin/python -m app.cli"
    assert fields["Type"] == "Application" and fields["Name"] == "Deskhand"
    assert fields["X-GNOME-Autostart-enabled"] == "true"
    autostart.disable()
    assert not path.exists() and not autostart.is_enabled()
    autostart.disable()  # nothing to remove: still fine


@linux_only
def test_linux_enable_uses_the_launch_command_by_default(xdg):
    autostart.set_enabled(True)
    fields = entry_fields(autostart.linux_entry_path().read_text(encoding="utf-8"))
    assert unescape_exec(fields["Exec"]) == autostart.launch_command()
    autostart.set_enabled(False)
    assert not autostart.is_enabled()


@linux_only
def test_linux_unwritable_folder_is_a_clear_error(xdg):
    xdg.mkdir()
    (xdg / "autostart").write_text("a file where the folder should be")
    with pytest.raises(autostart.AutostartError, match="start at login"):
        autostart.enable(["/usr/bin/deskhand"])


def test_exec_quotes_spaces_and_escapes_specials():
    command = ["/Users/Ann Lee/Deskhand/python", "-m", "app.cli", 'say "hi" $HOME 100%', "a\\b"]
    value = autostart.desktop_exec(command)
    assert value.startswith('"/Users/Ann Lee/Deskhand/python" -m app.cli ')
    assert "100%%" in value  # % starts a field code
    assert unescape_exec(value.replace("%%", "%")) == command


def test_macos_launch_agent_plist():
    command = ["/Applications/Deskhand.app/Contents/MacOS/Deskhand"]
    data = plistlib.loads(autostart.launch_agent_plist(command))
    assert data == {
        "Label": "app.deskhand",
        "ProgramArguments": command,
        "RunAtLoad": True,
        "ProcessType": "Interactive",
    }
    assert autostart.mac_agent_path().parts[-3:] == (
        "Library",
        "LaunchAgents",
        "app.deskhand.plist",
    )


def test_windows_run_value_quotes_paths_with_spaces():
    value = autostart.windows_run_value([r"C:\Program Files\Deskhand\python.exe", "-m", "app.cli"])
    assert value == r'"C:\Program Files\Deskhand\python.exe" -m app.cli'
    assert autostart.windows_run_value([r"C:\Deskhand\deskhand.exe"]) == r"C:\Deskhand\deskhand.exe"


@linux_only
def test_general_page_checkbox_installs_and_removes_the_entry(xdg, home, qtbot, monkeypatch):
    from app.core.runtime import Runtime
    from app.ui.settings.general_page import GeneralPage

    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    runtime = Runtime(home, entry_points=False)
    try:
        page = GeneralPage(runtime)
        qtbot.addWidget(page)
        assert page.login_check.text() == "Start Deskhand at login"
        assert not page.login_check.isChecked()
        page.login_check.setChecked(True)
        saved = runtime.settings_store.update(page.patch())
        page.mark_saved(saved)
        assert saved.general.start_at_login and autostart.is_enabled()
        page.login_check.setChecked(False)
        saved = runtime.settings_store.update(page.patch())
        assert not saved.general.start_at_login and not autostart.is_enabled()
    finally:
        runtime.close()
