"""Start-up of the window: one instance per home, the qasync loop, tray, theme, and the
reminder scheduler (it keeps running while the window is closed to the tray).

Kept light: no provider, tool implementation or SDK is imported before the window shows.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

if TYPE_CHECKING:
    from app.core.reminders import Delivery

log = logging.getLogger(__name__)
REMINDER_KEY = "reminder:"
REMINDER_TIMEOUT_MS = 20_000


class App:
    """Everything the running GUI owns, so tests and benchmarks can build it the same way."""

    def __init__(self, qapp: QApplication, home: str | Path | None = None) -> None:
        from app.core.logging_setup import configure
        from app.core.runtime import Runtime
        from app.core.scheduler import Scheduler
        from app.ui.gc_guard import MainThreadCollector
        from app.ui.icons import app_icon
        from app.ui.main_window import MainWindow
        from app.ui.theme import apply_theme
        from app.ui.tray import Tray

        self.qapp = qapp
        self.collector = MainThreadCollector(qapp)
        self.runtime = Runtime(home)
        self.runtime.headless = False  # file tools wait for the folder question
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
        self.tray.remindersRequested.connect(lambda: self.window.show_reminders())
        self.tray.notificationClicked.connect(self._notification_clicked)
        self.tray.snoozeRequested.connect(self.snooze_reminder)
        self.tray.doneRequested.connect(self.done_reminder)
        self.window.remindersChanged.connect(self.reminders_changed)
        self._settings_dialog = None
        self.scheduler = Scheduler(self.runtime.reminders, self.deliver)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reminders_stopped = False
        QTimer.singleShot(0, self.start_scheduler)
        # Read the tool manifests once the window is up, before the first message needs them.
        QTimer.singleShot(150, lambda: self.runtime.registry)
        QTimer.singleShot(0, self.start_mcp_servers)

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

    # ---- reminders -----------------------------------------------------------------------

    def start_scheduler(self) -> None:
        """Starts the reminder loop once the qasync loop runs (start-up may not be done)."""
        if self._reminders_stopped:
            return
        loop = asyncio.get_event_loop()
        if not loop.is_running():
            QTimer.singleShot(200, self.start_scheduler)
            return
        self._loop = loop
        self.scheduler.start()

    def start_mcp_servers(self) -> None:
        """MCP servers connect in the background after the window shows; the user can chat
        meanwhile, and their tools join the registry as they come up."""
        from app.core.paths import mcp_path

        if not mcp_path(self.runtime.home).exists():
            return
        loop = asyncio.get_event_loop()
        if not loop.is_running():
            QTimer.singleShot(200, self.start_mcp_servers)
            return
        # off the GUI thread; returns once the servers are launched, and their tools join the
        # registry as each one comes up (the runtime follows the manager)
        self._mcp_future = loop.run_in_executor(None, self.runtime.start_mcp)
        # servers may ask the user something as soon as they connect: the window answers
        self._mcp_future.add_done_callback(lambda _done: self.window.attach_mcp())

    def stop_reminders(self) -> None:
        """No more reminders from this App (quitting, or a test tearing it down)."""
        self._reminders_stopped = True
        self.scheduler.stop()

    def poke_scheduler(self) -> None:
        """Plan again now. Safe from any thread: the poke hops onto the loop."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.scheduler.poke)

    def reminders_changed(self) -> None:
        self.poke_scheduler()
        self.window.refresh_reminders()

    def deliver(self, delivery: Delivery) -> None:
        """The scheduler's callback: one tray notification per due reminder."""
        reminder = delivery.reminder
        title = "Reminder (late)" if delivery.late else "Reminder"
        text = reminder.message
        if delivery.missed:
            text += f" — {delivery.missed} more missed"
        self.tray.notify(
            title, text, timeout_ms=REMINDER_TIMEOUT_MS, key=REMINDER_KEY + reminder.id
        )
        self.tray.set_last_reminder(reminder.id, reminder.message)
        self.window.refresh_reminders()

    def _notification_clicked(self, key: str) -> None:
        if key.startswith(REMINDER_KEY):
            self.window.show_reminders(select=key.removeprefix(REMINDER_KEY))
        else:
            self.window.bring_to_front()

    def snooze_reminder(self, reminder_id: str, minutes: int) -> None:
        self._change_reminder(reminder_id, lambda book: book.snooze(reminder_id, minutes))

    def done_reminder(self, reminder_id: str) -> None:
        self._change_reminder(reminder_id, lambda book: book.done(reminder_id))

    def _change_reminder(self, reminder_id: str, change: Callable[[Any], Any]) -> None:
        from app.core.reminders import ReminderError

        book = self.runtime.reminders
        try:
            if book.get(reminder_id).status in ("scheduled", "fired"):  # not already closed
                change(book)
        except ReminderError as exc:
            log.warning("reminder %s: %s", reminder_id, exc)
        if self.tray.last_reminder_id == reminder_id:
            self.tray.set_last_reminder(None)
        self.reminders_changed()

    def quit(self) -> None:
        self.stop_reminders()
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
    from app.ui.passphrase import install_gui_prompts

    install_gui_prompts()  # an encrypted-file keyring asks for its passphrase in a dialog
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
