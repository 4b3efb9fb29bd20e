"""Start-up of the window: one instance per home, the qasync loop, tray, notifications,
theme, and the reminder scheduler (it keeps running while the window is closed to the tray,
or hidden without one).

Kept light: no provider, tool implementation or SDK is imported before the window shows;
the notification server is probed on a worker thread after it shows.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication
from shiboken6 import isValid

from app.ui import startup_timeline as timeline
from app.ui.off_gui import run_off_gui

if TYPE_CHECKING:
    from app.core.notifications import Action
    from app.core.reminders import Delivery
    from app.core.runtime import Runtime
    from app.ui.main_window import MainWindow
    from app.ui.settings_dialog import SettingsDialog
    from app.ui.tray import KeepRunningDialog

log = logging.getLogger(__name__)
REMINDER_KEY = "reminder:"
TASKS_START_MS = 400
#: How often a home without tasks is looked at for a first one (the schedule's own wake).
TASKS_LOOK_MS = 30_000
#: How soon a thread hands the interpreter lock on when another waits (Python's default
#: is 5 ms): the GUI thread re-enters Python for each widget event and each row it paints,
#: and waiting 5 ms each time while a worker imported made a 45 ms window build take 108 ms.
#: At 0.5 ms a full repaint while the MCP SDK loaded still took 16–30 ms; at 0.2 ms the
#: longest stall was 11 ms. Three CPU-bound threads lose ~5 % of their throughput.
GUI_SWITCH_INTERVAL_S = 0.0002
#: The pause between two parts of the window being put together: a real timer, not a
#: zero one — Qt runs zero-delay calls one after another before its timers and the window
#: system's events get a turn, which made three parts one 18 ms stall.
PART_GAP_MS = 1
REMINDER_TIMEOUT_MS = 20_000
REMINDER_SNOOZE_MINUTES = 10
SNOOZE = "snooze"
DONE = "done"
#: The "Deskhand is still running" notice; its buttons are OPEN and QUIT.
BACKGROUND_KEY = "app:background"
OPEN = "open"
QUIT = "quit"
KEEP_RUNNING, QUIT_ON_CLOSE = "keep", "quit"  # ui_state.background_choice
#: The notification server is probed this long after start-up (off the first paint).
PROBE_DELAY_MS = 1000
TRAY_NOTICE = "It keeps running in the tray for reminders and approvals. Quit from the tray menu."
BACKGROUND_NOTICE = (
    "It keeps running in the background for reminders and scheduled tasks. Start Deskhand "
    "again to open its window; quit from its File menu."
)


def _action(action_id: str, label: str) -> Action:
    from app.core.notifications import Action

    return Action(action_id, label)


class App:
    """Everything the running GUI owns, so tests and benchmarks can build it the same way."""

    def __init__(
        self,
        qapp: QApplication,
        home: str | Path | None = None,
        *,
        window: MainWindow | None = None,
        runtime: Runtime | None = None,
        staged: bool = False,
    ) -> None:
        """`window`: the frame `run_gui` painted first (else one is made here);
        `runtime`: one built meanwhile on a worker thread (else one is made here);
        `staged`: built part by part by `build_step`, not all here."""
        self._staged = staged
        self._parts = self._build(qapp, home, window, runtime)
        if not staged:
            for _ in self._parts:
                pass

    def build_step(self) -> bool:
        """Builds the next part (a few milliseconds); False once the App is whole."""
        return next(self._parts, False) is None

    def _build(
        self,
        qapp: QApplication,
        home: str | Path | None,
        window: MainWindow | None,
        runtime: Runtime | None,
    ) -> Iterator[None]:
        from app.core.logging_setup import configure
        from app.core.runtime import Runtime
        from app.core.scheduler import Scheduler
        from app.ui.gc_guard import MainThreadCollector
        from app.ui.icons import app_icon
        from app.ui.main_window import MainWindow
        from app.ui.notify_bridge import Notifications
        from app.ui.theme import apply_theme
        from app.ui.tray import Tray

        self.qapp = qapp
        self.collector = MainThreadCollector(qapp, starting=self._staged)
        self.runtime = runtime or Runtime(home)
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
        if window is None:
            window = MainWindow(home=self.runtime.home)
            window.build_early(self.runtime.store)
        self.window = window
        # before the window is put together: a close, Ctrl+Q or Ctrl+, meanwhile is heard
        self._settings_dialog: SettingsDialog | None = None
        self.window.close_handler = self._window_closing
        self.window.settingsRequested.connect(self.open_settings)
        self.window.quitRequested.connect(self.quit)
        yield
        # the rest in attach's last part: once the window is attached, its close, Quit and
        # the tray reach a whole App
        yield from self.window.attach_steps(self.runtime, self.tray)
        if self.window.closed_while_starting:
            QTimer.singleShot(0, self.quit)
        #: Native notifications with buttons, else the tray's balloons. The task runner
        #: shows its own (e.g. key "task:<id>") and listens for its keys on the signals.
        self.notifications = Notifications(self.tray)
        self.notifications.actionInvoked.connect(self._notification_action)
        self.notifications.clicked.connect(self._notification_clicked)
        self.window.notify_user = lambda title, message, key: self.notifications.show(
            title, message, key=key
        )
        self._keep_running_dialog: KeepRunningDialog | None = None
        self.tray.openRequested.connect(self.window.bring_to_front)
        self.tray.newChatRequested.connect(self._new_chat_from_tray)
        self.tray.quitRequested.connect(self.quit)
        self.tray.remindersRequested.connect(lambda: self.window.show_reminders())
        self.tray.tasksRequested.connect(lambda: self.window.show_tasks())
        self.tray.snoozeRequested.connect(self.snooze_reminder)
        self.tray.doneRequested.connect(self.done_reminder)
        self.window.remindersChanged.connect(self.reminders_changed)
        self.scheduler = Scheduler(self.runtime.reminders, self.deliver)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reminders_stopped = False
        # once the loop runs: reminders, then MCP servers (after the window's first paint)
        QTimer.singleShot(0, self.start_scheduler)
        QTimer.singleShot(PROBE_DELAY_MS, self.notifications.start)
        from app.ui.task_host import TaskHost

        #: Scheduled tasks: runs, their questions and results (core imported when started).
        self.tasks = TaskHost(self.runtime, self.notifications, self.open_conversation, self.window)
        self.tasks.changed.connect(self.window.refresh_tasks)
        self.window.taskRunRequested.connect(self.run_task_now)
        self.window.taskConversationRequested.connect(self.tasks.open_task_conversation)
        self.window.tasksChanged.connect(self.tasks.poke)
        self.tasks.questionsChanged.connect(self.window.set_task_questions)
        self.window.taskQuestionReview.connect(self.tasks.review_key)

    def show(self) -> None:
        if self.runtime.settings.general.start_minimized and self.tray.available:
            return
        self.window.show()

    def open_conversation(self, conversation_id: str) -> bool:
        """Brings the window to the front on that conversation (e.g. from a task's
        notification). False, leaving the current one, when it does not exist or was
        deleted, or while another conversation's turn runs (opening would stop it)."""
        window = self.window
        window.bring_to_front()
        if window.controller.conversation_id == conversation_id:
            return True
        conv = self.runtime.store.get_conversation(conversation_id)
        if conv is None or conv.deleted_at is not None or window.controller.busy:
            return False
        window.open_conversation(conversation_id)
        return True

    def _new_chat_from_tray(self) -> None:
        self.window.bring_to_front()
        self.window.new_chat()
        self.window.focus_composer()

    def open_settings(self, page: str = "providers") -> None:
        from app.ui.settings.dialog import SettingsDialog
        from app.ui.theme import apply_theme

        dialog = self._settings_dialog
        if dialog is not None:  # made at the first request, then reused
            dialog.show_page(page)
            dialog.open()
            return
        dialog = self._settings_dialog = SettingsDialog(self.runtime, self.window, page=page)

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
        self.start_mcp_servers()
        # after the first paint: the task runner's imports are not needed for it
        QTimer.singleShot(TASKS_START_MS, self._start_tasks)

    def _start_tasks(self) -> None:
        """Starts the task host once there are tasks (their runner loads the agent, the
        rules and the task book: about 3 MiB). Until then a stat every TASKS_LOOK_MS
        notices a task added from the command line, as the running schedule would."""
        if self._reminders_stopped or self.tasks.started:
            return
        if self.tasks.has_tasks():
            self.tasks.start_soon()
        else:
            QTimer.singleShot(TASKS_LOOK_MS, self._start_tasks)

    def start_mcp_servers(self) -> None:
        """MCP servers connect in the background after the window shows; the user can chat
        meanwhile, and their tools join the registry as they come up."""
        from app.core.paths import mcp_path

        # quitting (or a test's App torn down) before the timer fired: no servers nobody stops
        if self._reminders_stopped or not mcp_path(self.runtime.home).exists():
            return
        loop = asyncio.get_event_loop()
        if not loop.is_running():
            QTimer.singleShot(200, self.start_mcp_servers)
            return
        # off the GUI thread; returns once the servers are launched, and their tools join the
        # registry as each one comes up (the runtime follows the manager); servers may ask
        # the user something as soon as they connect: the window answers
        run_off_gui(self.runtime.start_mcp, self._mcp_started)

    def _mcp_started(self, _started: bool) -> None:
        if not self._reminders_stopped and isValid(self.window):
            self.window.attach_mcp()

    def stop_reminders(self) -> None:
        """No more reminders from this App (quitting, or a test tearing it down)."""
        self._reminders_stopped = True
        self.scheduler.stop()
        self.tasks.stop()

    def poke_scheduler(self) -> None:
        """Plan again now. Safe from any thread: the poke hops onto the loop."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.scheduler.poke)

    def reminders_changed(self) -> None:
        self.poke_scheduler()
        self.window.refresh_reminders()

    def deliver(self, delivery: Delivery) -> None:
        """The scheduler's callback: one notification per due reminder, with Snooze and
        Done buttons where notifications have them (else in the tray's menu)."""
        reminder = delivery.reminder
        title = "Reminder (late)" if delivery.late else "Reminder"
        text = reminder.message
        if delivery.missed:
            text += f" — {delivery.missed} more missed"
        self.notifications.show(
            title,
            text,
            key=REMINDER_KEY + reminder.id,
            actions=[
                _action(SNOOZE, f"Snooze {REMINDER_SNOOZE_MINUTES} min"),
                _action(DONE, "Done"),
            ],
            timeout_ms=REMINDER_TIMEOUT_MS,
        )
        self.tray.set_last_reminder(reminder.id, reminder.message)
        self.window.refresh_reminders()

    def _notification_clicked(self, key: str) -> None:
        if key.startswith(REMINDER_KEY):
            self.window.show_reminders(select=key.removeprefix(REMINDER_KEY))
        else:
            self.window.bring_to_front()

    def _notification_action(self, key: str, action: str) -> None:
        """A button on one of the App's own notifications; other keys (a task's) are for
        whoever showed them."""
        if key.startswith(REMINDER_KEY):
            reminder_id = key.removeprefix(REMINDER_KEY)
            if action == SNOOZE:
                self.snooze_reminder(reminder_id, REMINDER_SNOOZE_MINUTES)
            elif action == DONE:
                self.done_reminder(reminder_id)
        elif key == BACKGROUND_KEY:
            if action == QUIT:
                self.quit()
            elif action == OPEN:
                self.window.bring_to_front()

    def run_task_now(self, task_id: str) -> None:
        """Run now from the Tasks window; why it cannot start is shown there."""
        from PySide6.QtWidgets import QMessageBox

        problem = self.tasks.run_now(task_id)
        if problem is not None:
            QMessageBox.information(self.window.tasks_view or self.window, "Run now", problem)

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
        self.notifications.withdraw(REMINDER_KEY + reminder_id)
        self.reminders_changed()

    # ---- closing the window -----------------------------------------------------------------

    def _window_closing(self) -> None:
        """The window's close (not Quit): to the tray if there is one; without one (stock
        GNOME) ask once whether to keep running, so reminders and tasks never stop
        silently."""
        if self.tray.available:
            self._keep_in_background(TRAY_NOTICE, "tray_notice_shown")
            return
        choice = self.window.ui_state.background_choice
        if choice == QUIT_ON_CLOSE:
            self.quit()
        elif choice == KEEP_RUNNING:
            self._keep_in_background(BACKGROUND_NOTICE, "background_notice_shown")
        elif self.window.isVisible():  # a hidden window has nothing to ask about
            self._ask_keep_running()

    def _ask_keep_running(self) -> None:
        from app.ui.tray import KeepRunningDialog

        dialog = self._keep_running_dialog
        if dialog is None:
            dialog = self._keep_running_dialog = KeepRunningDialog(self.window)
            dialog.chosen.connect(self._kept_or_quit)
        if not dialog.isVisible():
            dialog.open()  # not exec(): no nested event loop under qasync
        dialog.raise_()

    def _kept_or_quit(self, keep_running: bool, remember: bool) -> None:
        state = self.window.ui_state
        if remember:
            state.background_choice = KEEP_RUNNING if keep_running else QUIT_ON_CLOSE
            state.save(self.window.state_path)
        if keep_running:
            self._keep_in_background(BACKGROUND_NOTICE, "background_notice_shown")
        else:
            self.quit()

    def _keep_in_background(self, notice: str, shown_flag: str) -> None:
        """Hides the window; says once (per `shown_flag` in ui_state) that Deskhand runs on."""
        self.window.hide()
        state = self.window.ui_state
        if getattr(state, shown_flag):
            return
        self.notifications.show(
            "Deskhand is still running",
            notice,
            key=BACKGROUND_KEY,
            actions=[_action(OPEN, "Open"), _action(QUIT, "Quit")],
        )
        setattr(state, shown_flag, True)
        state.save(self.window.state_path)

    def quit(self) -> None:
        self.stop_reminders()
        self.notifications.close()
        self.window.quit_now()
        self.tray.hide()
        self.runtime.close()
        self.qapp.quit()


def run_gui(home: str | Path | None = None) -> int:
    """Paints the window's frame, then the chat list and message box (the user can read
    and type), then imports the rest and builds the runtime on a worker thread while the
    event loop runs, and finally the rest of the window (docs/architecture.md §2)."""
    from app.core.paths import deskhand_home
    from app.ui.single_instance import ask_running_instance

    sys.setswitchinterval(GUI_SWITCH_INTERVAL_S)
    # no automatic collection from here on: one run by the start-up worker while it imports
    # could free a cycle holding a widget on that thread (a crash, seen 1 start in 9); the
    # App's collector collects on this thread once it exists (app/ui/gc_guard.py)
    gc.disable()
    existing = QApplication.instance()
    qapp = existing if isinstance(existing, QApplication) else QApplication(sys.argv)
    resolved_home = deskhand_home(home)
    if ask_running_instance(resolved_home):
        print("Deskhand is already running; brought its window to the front.", file=sys.stderr)
        return 0
    # closing the window while it starts must not quit before the App decides (tray)
    qapp.setQuitOnLastWindowClosed(False)
    frame = paint_frame(qapp, resolved_home)
    # the chat list's and composer's modules (and the event loop's) load on a worker while
    # the painted frame keeps answering the window system (a resize, a repaint)
    timeline.wait_for(qapp, run_off_gui(lambda: _import_all(EARLY_MODULES)))
    # in parts, with Qt's events handled in between (a few milliseconds each)
    _prime_widgets()
    qapp.processEvents()
    store = frame.build_early(between=lambda: _chat_list_shown(qapp))
    timeline.mark("composer")
    import qasync

    loop = qasync.QEventLoop(qapp)
    asyncio.set_event_loop(loop)
    from app.ui.passphrase import install_gui_prompts

    install_gui_prompts()  # an encrypted-file keyring asks for its passphrase in a dialog
    start = StagedStart(qapp, resolved_home, frame, store)
    QTimer.singleShot(0, start.begin)
    with loop:
        loop.run_until_complete(_until_quit(qapp))
    start.close()
    return 0


def _chat_list_shown(qapp: QApplication) -> None:
    """The chat list paints before the message box is made: the two one-time costs (each
    a few milliseconds of widget construction, style and first paint) in separate turns."""
    timeline.mark("chat list")
    qapp.processEvents()


class StagedStart:
    """The rest of start-up once the chat list and message box are up: the window's
    modules and the runtime on a worker thread (the GUI thread would otherwise wait for
    an import the worker holds), then the App on the GUI thread."""

    #: Imported on the worker thread before the App is built. They define classes only:
    #: no widget or pixmap is made at import (those must be made on the GUI thread).
    MODULES = (
        "app.ui.chat.render",
        "app.ui.chat.layouts",
        "app.ui.chat.delegate",
        "app.ui.chat.model",
        "app.ui.chat.view",
        "app.ui.chat.elicitation_form",
        "app.ui.controller",
        "app.ui.model_picker",
        "app.ui.setup_card",
        "app.ui.folders_dialog",
        "app.ui.starter_prompts",
        "app.ui.task_question",
        "app.ui.tray",
        "app.ui.notify_bridge",
        "app.ui.task_host",
        "app.core.scheduler",
        "app.ui.gc_guard",
        "app.core.logging_setup",
        "tools.redact",
        "importlib.readers",
        "importlib.resources.readers",
        "resources",
    )

    def __init__(
        self,
        qapp: QApplication,
        home: Path,
        frame: MainWindow,
        store: Any,
    ) -> None:
        self.qapp = qapp
        self.home = home
        self.frame = frame
        self.store = store
        self.app: App | None = None
        self._parts = 0
        self.server: Any = None
        #: The message shown when start-up failed (for tests).
        self.failure: Any = None

    def begin(self) -> None:
        timeline.mark("ready")  # the composer takes keys, the chat list is shown
        home, store, modules = self.home, self.store, self.MODULES
        run_off_gui(lambda: _prepare(home, store, modules), self._finish, self._failed)

    def _failed(self, exc: BaseException) -> None:
        """E.g. an unreadable home: say so, then quit."""
        log.error("start-up failed", exc_info=exc)
        self._fail(exc)

    def _finish(self, runtime: Runtime) -> None:
        timeline.mark("runtime")
        self.app = App(self.qapp, self.home, window=self.frame, runtime=runtime, staged=True)
        QTimer.singleShot(PART_GAP_MS, self._next_part)

    def _next_part(self) -> None:
        """One part of the App per turn of the event loop, then it shows whole."""
        from app.ui.single_instance import InstanceServer

        assert self.app is not None
        try:
            if self.app.build_step():
                self._parts += 1
                timeline.mark(f"part {self._parts}")
                QTimer.singleShot(PART_GAP_MS, self._next_part)
                return
            self.server = InstanceServer(self.home)
            self.server.activationRequested.connect(self.app.window.bring_to_front)
            if not self.frame.closed_while_starting:  # else the App is quitting
                self.app.show()
        except Exception as exc:
            log.exception("start-up failed")
            self._fail(exc)
            return
        timeline.mark("attached")
        log.info("window shown")
        # what start-up made stays: collections walk only what comes later, and what later
        # imports make (the MCP SDK, the first turn's modules) is frozen too
        self.app.collector.start_up_done()
        self.app.runtime.secrets.start_loading()  # on its own thread; a turn waits for it

    def _fail(self, exc: BaseException) -> None:
        from PySide6.QtWidgets import QMessageBox

        box = QMessageBox(
            QMessageBox.Icon.Critical,
            "Deskhand could not start",
            f"Deskhand could not start: {type(exc).__name__}: {exc}",
            QMessageBox.StandardButton.Close,
            self.frame,
        )
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.finished.connect(self.qapp.quit)
        box.open()
        self.failure = box

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


#: What `build_early` and the event loop need, imported on a worker after the first paint.
EARLY_MODULES = (
    "app.core.store",
    "app.core.settings_file",
    "app.ui.icons",
    "app.ui.plain_text",
    "app.ui.sidebar",
    "app.ui.composer",
    "qasync",
    "app.ui.passphrase",
)


def _prime_widgets() -> None:
    """PySide makes the Python enums of QtWidgets' classes on the first call of some of
    their methods (65 classes, 10 ms here): paid on its own, rather than inside the making
    of the message box (with which it made a 20 ms stall)."""
    from PySide6.QtWidgets import QPlainTextEdit

    edit = QPlainTextEdit()
    edit.viewport()
    edit.deleteLater()


def _import_all(modules: tuple[str, ...]) -> None:
    import importlib

    for name in modules:
        importlib.import_module(name)


def _prepare(home: Path, store: Any, modules: tuple[str, ...]) -> Runtime:
    """On a worker thread: the window's modules, the settings model and the runtime
    (about 200 ms of imports, which would stall the GUI thread)."""
    _import_all(modules)
    from app.core.runtime import Runtime

    runtime = Runtime(home, load_secrets=False)  # loaded once the window is whole
    runtime.adopt_store(store)
    return runtime


def paint_frame(qapp: QApplication, home: Path) -> MainWindow:
    """Shows the window's frame in the saved theme and geometry and returns once it is
    painted, before the runtime, the chat or the event loop's modules are imported (not
    shown when it starts minimized)."""
    from app.core.settings_file import read_general
    from app.ui.main_window import MainWindow
    from app.ui.theme import apply_theme

    general = read_general(home)
    apply_theme(qapp, general.theme)
    window = MainWindow(home=home)
    if general.start_minimized:
        return window
    window.show()
    timeline.wait_for_paint(qapp, window)
    return window


async def _until_quit(qapp: QApplication) -> None:
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def quitting() -> None:
        if not done.done():
            done.set_result(None)

    qapp.aboutToQuit.connect(quitting)
    await done
