"""Start-up of the window: one instance per home, the qasync loop, tray, theme.

Kept light: no provider, tool implementation or SDK is imported before the window shows.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

log = logging.getLogger(__name__)


class App:
    """Everything the running GUI owns, so tests and benchmarks can build it the same way."""

    def __init__(self, qapp: QApplication, home: str | Path | None = None) -> None:
        from app.core.logging_setup import configure
        from app.core.runtime import Runtime
        from app.ui.gc_guard import MainThreadCollector
        from app.ui.icons import app_icon
        from app.ui.main_window import MainWindow
        from app.ui.theme import apply_theme
        from app.ui.tray import Tray

        self.qapp = qapp
        self.collector = MainThreadCollector(qapp)
        self.runtime = Runtime(home)
        configure(self.runtime.secrets.known_values, log_dir=self.runtime.home / "logs")
        qapp.setApplicationName("Deskhand")
        qapp.setApplicationDisplayName("Deskhand")
        qapp.setDesktopFileName("deskhand")
        qapp.setQuitOnLastWindowClosed(False)
        icon = app_icon()
        qapp.setWindowIcon(icon)
        apply_theme(qapp, self.runtime.settings.general.theme)
        self.tray = Tray(icon)
        self.window = MainWindow(self.runtime, self.tray)
        self.window.settingsRequested.connect(self.open_settings)
        self.window.quitRequested.connect(self.quit)
        self.tray.openRequested.connect(self.window.bring_to_front)
        self.tray.newChatRequested.connect(self._new_chat_from_tray)
        self.tray.quitRequested.connect(self.quit)
        self._settings_dialog = None

    def show(self) -> None:
        if self.runtime.settings.general.start_minimized and self.tray.available:
            return
        self.window.show()

    def _new_chat_from_tray(self) -> None:
        self.window.bring_to_front()
        self.window.new_chat()
        self.window.focus_composer()

    def open_settings(self, page: str = "providers") -> None:
        from app.ui.settings_dialog import SettingsDialog
        from app.ui.theme import apply_theme

        dialog = SettingsDialog(self.runtime, self.window, page=page)
        self._settings_dialog = dialog

        def applied() -> None:
            self.window.apply_settings()
            apply_theme(self.qapp, self.runtime.settings.general.theme)

        dialog.settingsChanged.connect(applied)
        dialog.open()

    def quit(self) -> None:
        self.window.quit_now()
        self.tray.hide()
        self.runtime.close()
        self.qapp.quit()


def run_gui(home: str | Path | None = None) -> int:
    import qasync

    from app.core.paths import deskhand_home
    from app.ui.single_instance import InstanceServer, ask_running_instance

    qapp = QApplication.instance() or QApplication(sys.argv)
    resolved_home = deskhand_home(home)
    if ask_running_instance(resolved_home):
        print("Deskhand is already running; brought its window to the front.", file=sys.stderr)
        return 0
    loop = qasync.QEventLoop(qapp)
    asyncio.set_event_loop(loop)
    app = App(qapp, resolved_home)
    server = InstanceServer(resolved_home)
    server.activationRequested.connect(app.window.bring_to_front)
    app.show()
    QTimer.singleShot(0, lambda: log.info("window shown"))
    with loop:
        loop.run_until_complete(_until_quit(qapp))
    server.close()
    return 0


async def _until_quit(qapp: QApplication) -> None:
    done = asyncio.get_running_loop().create_future()
    qapp.aboutToQuit.connect(lambda: done.done() or done.set_result(None))
    await done
