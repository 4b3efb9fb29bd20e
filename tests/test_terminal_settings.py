"""Settings → Terminal against real parts: the settings dialog (offscreen, qasync),
settings.json on disk, and the real sandbox probe running bubblewrap."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QComboBox

from app.core.runtime import Runtime
from app.core.secrets import SecretStore
from app.ui.settings.dialog import SettingsDialog
from app.ui.settings.terminal_page import CHECKING, TerminalPage
from tests.conftest import service_unavailable
from tests.fixtures_qt import wait_until
from tests.test_settings_dialog import MemoryKeyring
from tools.shell import sandbox
from tools.shell.sandbox import SandboxInfo

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parents[1]


def run(loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    return loop.run_until_complete(asyncio.wait_for(coro, timeout=30))


@pytest.fixture
def runtime(home: Path) -> Iterator[Runtime]:
    rt = Runtime(home, entry_points=False)
    rt.secrets = SecretStore(backend=MemoryKeyring())
    yield rt
    rt.close()


@pytest.fixture
def open_dialog(qtbot: Any, qloop: asyncio.AbstractEventLoop, qapp: QApplication) -> Iterator[Any]:
    """Opens the dialog; Save closes it, which must not quit the test's application."""
    quit_on_close = qapp.quitOnLastWindowClosed()
    qapp.setQuitOnLastWindowClosed(False)

    def make(runtime: Runtime, page: str = "terminal") -> SettingsDialog:
        dialog = SettingsDialog(runtime, page=page)
        qtbot.addWidget(dialog)
        dialog.show()
        run(qloop, asyncio.shield(dialog.key_states))
        return dialog

    yield make
    qapp.setQuitOnLastWindowClosed(quit_on_close)


@pytest.fixture
def bubblewrap() -> None:
    """A working bubblewrap (installed by scripts/test.sh); CI fails without one."""
    if not sys.platform.startswith("linux"):
        service_unavailable("bubblewrap tests need Linux")
    info = sandbox.probe()
    if not info.available:
        service_unavailable(info.why)


class GatedProbe:
    """Stands in for `sandbox.probe`: notes the thread and arguments of each call and
    holds the call until the test opens the gate, then answers `answer`."""

    def __init__(self, answer: SandboxInfo) -> None:
        self.answer = answer
        self.calls: list[tuple[bool, bool]] = []  # (refresh, on the GUI thread)
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, *, refresh: bool = False) -> SandboxInfo:
        on_gui = threading.current_thread() is threading.main_thread()
        self.calls.append((refresh, on_gui))
        assert self.gate.wait(20), "the test never opened the gate"
        return self.answer


async def settled(page: TerminalPage) -> None:
    """Every probe the page started has finished."""
    while page.pending():
        await asyncio.gather(*page.pending())


def choose(qtbot: Any, combo: QComboBox, choice: str) -> None:
    """Pick an entry with the keyboard, as a user can."""
    target = combo.findData(choice)
    key = Qt.Key.Key_Down if target > combo.currentIndex() else Qt.Key.Key_Up
    for _ in range(abs(target - combo.currentIndex())):
        qtbot.keyClick(combo, key)
    assert combo.currentData() == choice


def saved_shell(runtime: Runtime) -> dict[str, Any]:
    data = json.loads(runtime.settings_store.path.read_text("utf-8"))
    shell: dict[str, Any] = data["shell"]
    return shell


def test_choice_and_timeout_round_trip_to_settings_json(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, bubblewrap: None
) -> None:
    dialog = open_dialog(runtime)
    page = dialog.terminal
    assert dialog.current_page() == "terminal"
    assert page.choice() == "auto"  # the default: sandboxed where there is one
    assert page.timeout_spin.value() == 120
    assert (page.timeout_spin.minimum(), page.timeout_spin.maximum()) == (1, 3600)

    choose(qtbot, page.choice_combo, "off")
    page.timeout_spin.setValue(300)
    assert run(qloop, dialog.save())
    run(qloop, settled(page))
    assert saved_shell(runtime) == {"sandbox": "off", "timeout": 300}
    assert runtime.settings.shell.sandbox == "off"
    assert runtime.settings.shell.timeout == 300

    again = open_dialog(runtime)  # a new window shows what was saved
    assert again.terminal.choice() == "off"
    assert again.terminal.choice_combo.currentText() == "Never sandboxed — every command asks"
    assert again.terminal.timeout_spin.value() == 300

    choose(qtbot, again.terminal.choice_combo, "auto")
    assert run(qloop, again.save())
    run(qloop, settled(again.terminal))
    assert saved_shell(runtime) == {"sandbox": "auto", "timeout": 300}
    assert runtime.settings_store.load().shell.sandbox == "auto"


def test_saving_another_page_leaves_the_shell_settings_alone(
    qloop: Any, open_dialog: Any, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime.settings = runtime.settings_store.update(lambda s: setattr(s.shell, "timeout", 45))
    monkeypatch.setattr(sandbox, "probe", GatedProbe(SandboxInfo(True, "bubblewrap", "works")))
    dialog = open_dialog(runtime)
    assert dialog.terminal.timeout_spin.value() == 45
    # the file changes behind the window's back; an untouched page must not write it back
    runtime.settings_store.update(lambda s: setattr(s.shell, "timeout", 90))
    assert run(qloop, dialog.save())
    run(qloop, settled(dialog.terminal))
    assert saved_shell(runtime) == {"sandbox": "auto", "timeout": 90}


def test_status_shows_what_the_real_probe_found(
    qloop: Any, open_dialog: Any, runtime: Runtime, bubblewrap: None
) -> None:
    dialog = open_dialog(runtime)
    page = dialog.terminal
    run(qloop, settled(page))
    assert page.status.text() == "Sandbox available: bubblewrap"
    assert page.status.property("role") == "ok"
    assert page.info == sandbox.probe()
    assert page.check_button.isEnabled()


def test_check_again_reruns_the_real_probe_and_shows_why_there_is_none(
    qtbot: Any,
    qloop: Any,
    open_dialog: Any,
    runtime: Runtime,
    bubblewrap: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bwrap that cannot make namespaces (as on systems restricting user namespaces)."""
    dialog = open_dialog(runtime)
    page = dialog.terminal
    run(qloop, settled(page))
    assert page.status.text() == "Sandbox available: bubblewrap"

    fake = tmp_path / "bwrap"
    fake.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "sys.stderr.write('bwrap: setting up uid map: Permission denied\\n')\nsys.exit(1)\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    try:
        qtbot.mouseClick(page.check_button, Qt.MouseButton.LeftButton)
        run(qloop, settled(page))
        assert page.status.text() == (
            "No sandbox on this system: bubblewrap is installed but cannot make a sandbox "
            "here: bwrap: setting up uid map: Permission denied"
        )
        assert page.status.property("role") == "error"
        assert page.info is not None and not page.info.available
    finally:
        monkeypatch.undo()
        sandbox.probe(refresh=True)  # the process-wide answer is the real one again

    qtbot.mouseClick(page.check_button, Qt.MouseButton.LeftButton)
    run(qloop, settled(page))
    assert page.status.text() == "Sandbox available: bubblewrap"
    assert page.status.property("role") == "ok"


def test_check_again_probes_off_the_gui_thread_and_updates(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = GatedProbe(SandboxInfo(True, "bubblewrap", "bubblewrap works on this system"))
    monkeypatch.setattr(sandbox, "probe", fake)
    dialog = open_dialog(runtime)
    page = dialog.terminal
    run(qloop, settled(page))
    assert fake.calls == [(False, False)]  # the cached answer, asked in a worker thread
    assert page.status.text() == "Sandbox available: bubblewrap"

    why = "user namespaces are off\x1b[2J <b>see</b>"
    fake.answer = SandboxInfo(False, None, why)
    fake.gate.clear()

    async def body() -> None:
        qtbot.mouseClick(page.check_button, Qt.MouseButton.LeftButton)
        # the loop keeps running while the probe waits: the GUI thread is not blocked
        await wait_until(lambda: len(fake.calls) == 2, what="the second probe")
        assert page.status.text() == CHECKING
        assert page.status.property("role") == "muted"
        assert not page.check_button.isEnabled()  # one probe at a time
        fake.gate.set()
        await settled(page)

    run(qloop, body())
    assert fake.calls[1] == (True, False)  # probed anew, in a worker thread
    # the probe's words as plain, visible text: no escape sequence, no markup
    assert page.status.textFormat() == Qt.TextFormat.PlainText
    assert page.status.text() == (
        "No sandbox on this system: user namespaces are off⟨U+001B⟩[2J <b>see</b>"
    )
    assert page.status.property("role") == "error"
    assert page.check_button.isEnabled()


def test_the_probe_waits_until_the_page_is_shown(
    qloop: Any, open_dialog: Any, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = GatedProbe(SandboxInfo(True, "bubblewrap", "bubblewrap works on this system"))
    monkeypatch.setattr(sandbox, "probe", fake)
    dialog = open_dialog(runtime, page="general")
    assert fake.calls == [] and not dialog.terminal.pending()
    assert dialog.terminal.status.text() == CHECKING

    dialog.show_page("terminal")
    assert dialog.terminal.pending()
    run(qloop, settled(dialog.terminal))
    assert fake.calls == [(False, False)]
    dialog.show_page("general")
    dialog.show_page("terminal")  # shown again: the answer is already there
    assert not dialog.terminal.pending() and len(fake.calls) == 1


def test_opening_the_settings_window_does_not_import_the_sandbox() -> None:
    code = (
        "import sys\n"
        "import app.ui.settings.dialog\n"
        "assert 'tools.shell.sandbox' not in sys.modules, 'imported at window start'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
