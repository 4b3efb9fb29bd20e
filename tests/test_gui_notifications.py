"""Native notifications in the window app: reminders with Snooze / Done buttons,
keys passed through for other callers (tasks), the tray balloon when no notification server
answers, and closing the window without a tray (stock GNOME) never stopping reminders
silently. Against the real notification server of tests/fixtures_notify.py, on a private
session bus (pytest-qt, offscreen, qasync loop)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel

from app.core.notifications import Action
from app.core.paths import settings_path
from app.core.providers.base import ChatMessage
from app.core.settings import ProviderAccount, SettingsStore
from app.ui.main import App
from app.ui.notify_bridge import session_bus_possible
from app.ui.tray import KeepRunningDialog
from app.ui.ui_state import UiState
from tests.clock import Clock
from tests.fixtures_notify import NotificationServer, Shown
from tests.fixtures_qt import restore_look, saved_look, wait_until

pytestmark = pytest.mark.gui
REPO = Path(__file__).resolve().parents[1]
START = datetime(2026, 3, 27, 8, 0, tzinfo=UTC)
STILL_RUNNING = "Deskhand is still running"


@pytest.fixture
def clock() -> Clock:
    return Clock(START)


@pytest.fixture
def quits(qapp: QApplication, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts QApplication.quit() calls (the real one would end the test's event loop)."""
    calls: list[int] = []
    monkeypatch.setattr(qapp, "quit", lambda: calls.append(1))
    return calls


@pytest.fixture
def make_app(
    home: Path,
    qapp: QApplication,
    qloop: asyncio.AbstractEventLoop,
    clock: Clock,
    quits: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[[], App]]:
    """Builds the whole GUI App on `home` (after the test set the bus up); tears it down."""
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    monkeypatch.setattr("app.core.logging_setup.configure", lambda *a, **k: None)
    store = SettingsStore(settings_path(home))

    def provider(settings: Any) -> None:  # no first-run card probing ports
        account = ProviderAccount(
            kind="openai", label="Scripted", base_url="http://127.0.0.1:9/v1", model="m"
        )
        settings.providers.append(account)
        settings.active_provider = account.id

    store.update(provider)
    saved = saved_look(qapp)
    quit_on_close = qapp.quitOnLastWindowClosed()
    apps: list[App] = []

    def make() -> App:
        app = App(qapp, home)
        app.runtime.reminders.clock = clock
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.stop_reminders()
        task = app.scheduler._task
        if task is not None and app._loop is not None:
            app._loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
        app.window.close_handler = None
        app.window.quit_now()
        app.tray.hide()
        app.notifications.close()
        app.runtime.close()
        app.window.deleteLater()
    restore_look(qapp, saved)
    qapp.setQuitOnLastWindowClosed(quit_on_close)


def run(loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    return loop.run_until_complete(asyncio.wait_for(coro, timeout=30))


async def next_shown(server: NotificationServer) -> Shown:
    """The next notification the server got, waited for without blocking the loop."""
    got: list[Shown] = []

    def poll() -> list[Shown]:
        with contextlib.suppress(queue.Empty):
            got.append(server.interface.shown.get_nowait())
        return got

    await wait_until(poll, what="a native notification")
    return got[0]


def buttons(shown: Shown) -> list[tuple[str, str]]:
    """(key, label) pairs; "default" is the click on the body."""
    return list(zip(shown.actions[::2], shown.actions[1::2], strict=True))


async def press(app: App, server: NotificationServer, key: str, shown: Shown, action: str) -> None:
    """A user's click, once the notifier knows the notification is up (a user could not
    press it earlier)."""
    await wait_until(lambda: app.notifications.shown(key), what="the notification to be up")
    server.press(shown.id, action)


async def due_reminder(app: App, clock: Clock, message: str, minutes: int = 2) -> str:
    """Creates a reminder, lets the scheduler deliver it; returns its id."""
    reminder = app.runtime.reminders.create_once(message, clock.now + timedelta(minutes=minutes))
    await wait_until(lambda: app._loop is not None, what="the scheduler to start")
    clock.advance(minutes=minutes)
    app.poke_scheduler()
    return reminder.id


def count_ticks(app: App) -> list[int]:
    ticks: list[int] = []
    real_tick = app.scheduler.tick

    def tick() -> Any:
        ticks.append(1)
        return real_tick()

    app.scheduler.tick = tick  # type: ignore[method-assign]
    return ticks


async def replanned(ticks: list[int], before: int) -> None:
    """The scheduler woke after a change: no step of it may be left for after the loop
    stops (Qt would run it outside asyncio)."""
    await wait_until(lambda: len(ticks) > before, what="the scheduler to plan again")


def asked(app: App) -> list[KeepRunningDialog]:
    return [d for d in app.window.findChildren(KeepRunningDialog) if d.isVisible()]


def said(dialog: KeepRunningDialog) -> str:
    return "\n".join(label.text() for label in dialog.findChildren(QLabel))


# ---- reminders ----------------------------------------------------------------------------


def test_a_due_reminder_shows_snooze_and_done_and_done_closes_it(
    server: NotificationServer, make_app: Callable[[], App], clock: Clock, qloop: Any
) -> None:
    app = make_app()
    ticks = count_ticks(app)

    async def body() -> None:
        rid = await due_reminder(app, clock, "stretch")
        shown = await next_shown(server)
        assert (shown.summary, shown.body) == ("Reminder", "stretch")
        assert buttons(shown) == [("default", ""), ("snooze", "Snooze 10 min"), ("done", "Done")]
        assert app.notifications.native is True
        assert app.tray.sent == []  # no balloon as well
        assert app.tray.reminder_menu.isEnabled()  # the tray's menu still offers them
        before = len(ticks)
        await press(app, server, f"reminder:{rid}", shown, "done")
        await wait_until(lambda: app.runtime.reminders.get(rid).status == "done", what="done")
        assert not app.tray.reminder_menu.isEnabled()
        await replanned(ticks, before)

    run(qloop, body())


def test_snooze_on_the_notification_shows_it_again_ten_minutes_later(
    server: NotificationServer, make_app: Callable[[], App], clock: Clock, qloop: Any
) -> None:
    app = make_app()
    ticks = count_ticks(app)

    async def body() -> None:
        rid = await due_reminder(app, clock, "take the pizza out")
        first = await next_shown(server)
        before = len(ticks)
        await press(app, server, f"reminder:{rid}", first, "snooze")
        book = app.runtime.reminders
        await wait_until(lambda: book.get(rid).status == "scheduled", what="snoozed")
        assert book.get(rid).due_at == clock.now + timedelta(minutes=10)
        await replanned(ticks, before)
        clock.advance(minutes=10)
        app.poke_scheduler()
        again = await next_shown(server)
        assert (again.summary, again.body) == ("Reminder", "take the pizza out")

    run(qloop, body())


def test_clicking_the_reminder_opens_the_reminders_view_on_it(
    server: NotificationServer, make_app: Callable[[], App], clock: Clock, qloop: Any
) -> None:
    app = make_app()
    other = app.runtime.reminders.create_once("later", clock.now + timedelta(hours=3))

    async def body() -> str:
        rid = await due_reminder(app, clock, "meeting with Ana")
        shown = await next_shown(server)
        assert app.window.reminders_view is None  # nothing opened by itself
        await press(app, server, f"reminder:{rid}", shown, "default")
        await wait_until(lambda: app.window.reminders_view is not None, what="the view")
        return rid

    rid = run(qloop, body())
    view = app.window.reminders_view
    assert view is not None and view.isVisible() and app.window.isVisible()
    assert view.selected_id() == rid and view.ids("upcoming") == [other.id]
    assert app.runtime.reminders.get(rid).status == "fired"  # a click changes nothing


def test_without_a_notification_server_the_tray_balloon_keeps_the_key(
    session_bus: str, make_app: Callable[[], App], clock: Clock, qloop: Any
) -> None:
    app = make_app()
    ticks = count_ticks(app)

    async def body() -> None:
        rid = await due_reminder(app, clock, "call the bank")
        await wait_until(lambda: app.tray.sent, what="the balloon")
        assert app.notifications.native is False
        assert app.tray.sent == [("Reminder", "call the bank")]
        assert app.tray.last_key == f"reminder:{rid}" and app.tray.reminder_menu.isEnabled()
        app.tray.icon.messageClicked.emit()  # the balloon's click still opens it
        view = app.window.reminders_view
        assert view is not None and view.selected_id() == rid
        before = len(ticks)
        app.tray.done_action.trigger()  # Snooze / Done stay in the tray menu
        assert app.runtime.reminders.get(rid).status == "done"
        await replanned(ticks, before)

    run(qloop, body())


def test_no_bus_at_all_is_known_without_probing(tmp_path: Path) -> None:
    missing = f"unix:path={tmp_path / 'no-bus'}"
    assert session_bus_possible({"DBUS_SESSION_BUS_ADDRESS": missing}) is False
    assert session_bus_possible({}) is False
    (tmp_path / "bus").touch()
    assert session_bus_possible({"DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp_path}/bus"})
    assert session_bus_possible({"DBUS_SESSION_BUS_ADDRESS": "unix:abstract=/tmp/x"})
    assert session_bus_possible({"DISPLAY": ":0"})


def test_a_pointless_bus_address_falls_back_to_the_tray_at_once(
    tmp_path: Path,
    make_app: Callable[[], App],
    clock: Clock,
    qloop: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", f"unix:path={tmp_path / 'no-bus'}")
    app = make_app()
    app.notifications.show("Task finished", "done", key="task:1")
    assert app.notifications.native is False  # known at once: nothing to probe
    assert app.tray.sent == [("Task finished", "done")] and app.tray.last_key == "task:1"


# ---- other callers' keys, and opening a conversation ---------------------------------------


def test_keys_of_other_kinds_pass_through_the_signals(
    server: NotificationServer, make_app: Callable[[], App], qloop: Any
) -> None:
    app = make_app()
    actions: list[tuple[str, str]] = []
    clicks: list[str] = []
    app.notifications.actionInvoked.connect(lambda key, action: actions.append((key, action)))
    app.notifications.clicked.connect(clicks.append)

    async def body() -> None:
        app.notifications.show(
            "Task finished <b>x</b>",
            "3 pull requests <i>wait</i>",
            key="task:42",
            actions=[Action("open", "Open")],
        )
        shown = await next_shown(server)
        assert buttons(shown) == [("default", ""), ("open", "Open")]
        assert shown.body == "3 pull requests &lt;i&gt;wait&lt;/i&gt;"  # plain text
        await press(app, server, "task:42", shown, "open")
        await wait_until(lambda: actions, what="the action")
        app.notifications.show("Task failed", "see the log", key="task:43")
        second = await next_shown(server)
        await press(app, server, "task:43", second, "default")
        await wait_until(lambda: clicks, what="the click")

    run(qloop, body())
    assert actions == [("task:42", "open")] and clicks == ["task:43"]
    assert app.window.isVisible()  # a click on anything else brings the window up


def test_withdraw_takes_a_reminder_off_the_screen_once_it_is_done_elsewhere(
    server: NotificationServer, make_app: Callable[[], App], clock: Clock, qloop: Any
) -> None:
    app = make_app()
    ticks = count_ticks(app)

    async def body() -> None:
        rid = await due_reminder(app, clock, "stretch")
        shown = await next_shown(server)
        await wait_until(lambda: app.notifications.shown(f"reminder:{rid}"), what="up")
        before = len(ticks)
        app.tray.done_action.trigger()  # done from the tray menu
        await replanned(ticks, before)
        closed = await asyncio.get_running_loop().run_in_executor(
            None, server.interface.closed.get, True, 10.0
        )
        assert closed == shown.id

    run(qloop, body())


def test_open_conversation_brings_the_window_up_on_it(
    make_app: Callable[[], App], qloop: Any
) -> None:
    app = make_app()
    store = app.runtime.store
    first = store.create_conversation("First")
    store.append_message(first, ChatMessage("user", "hello"))
    task_chat = store.create_conversation("Nightly report")
    store.append_message(task_chat, ChatMessage("assistant", "3 new issues"))
    gone = store.create_conversation("Gone")
    store.delete_conversation(gone)
    app.window.open_conversation(first)
    app.window.hide()

    assert app.open_conversation(task_chat) is True
    assert app.window.isVisible() and app.window.controller.conversation_id == task_chat
    assert app.window.title_label.text() == "Nightly report"
    assert app.window.chat_view.message_count() == 1
    assert app.open_conversation(task_chat) is True  # already open: stays
    assert app.open_conversation(gone) is False
    assert app.open_conversation("no-such-conversation") is False
    assert app.window.controller.conversation_id == task_chat


# ---- closing the window -------------------------------------------------------------------


def test_without_a_tray_closing_asks_and_keep_running_keeps_reminders_firing(
    server: NotificationServer,
    make_app: Callable[[], App],
    clock: Clock,
    qloop: Any,
    qtbot: Any,
    quits: list[int],
) -> None:
    app = make_app()
    assert not app.tray.available  # offscreen: like stock GNOME
    app.window.show()

    async def body() -> None:
        app.window.close()
        [dialog] = asked(app)
        assert app.window.isVisible()  # nothing happens before the answer
        assert "in the background for reminders and scheduled tasks?" in said(dialog)
        assert "Start Deskhand again to open this window; quit from its menu" in said(dialog)
        qtbot.mouseClick(dialog.keep_button, Qt.MouseButton.LeftButton)
        assert not app.window.isVisible() and quits == []
        notice = await next_shown(server)
        assert notice.summary == STILL_RUNNING and "Start Deskhand again" in notice.body
        assert buttons(notice) == [("default", ""), ("open", "Open"), ("quit", "Quit")]
        await due_reminder(app, clock, "stand-up")  # the window is hidden
        reminder = await next_shown(server)
        assert (reminder.summary, reminder.body) == ("Reminder", "stand-up")
        await press(app, server, "app:background", notice, "open")
        await wait_until(app.window.isVisible, what="the window back")
        app.window.close()  # not remembered: asks again
        [again] = asked(app)
        again.reject()  # Esc: nothing changes
        assert app.window.isVisible() and quits == []

    run(qloop, body())
    assert UiState.load(app.window.state_path).background_choice == ""


def test_a_remembered_keep_running_skips_the_question(
    server: NotificationServer, make_app: Callable[[], App], qloop: Any, qtbot: Any
) -> None:
    app = make_app()
    app.window.show()

    async def body() -> None:
        app.window.close()
        [dialog] = asked(app)
        dialog.remember.setChecked(True)
        qtbot.mouseClick(dialog.keep_button, Qt.MouseButton.LeftButton)
        assert (await next_shown(server)).summary == STILL_RUNNING
        app.window.bring_to_front()  # what starting Deskhand again does
        app.window.close()
        assert asked(app) == [] and not app.window.isVisible()

    run(qloop, body())
    assert UiState.load(app.window.state_path).background_choice == "keep"
    assert server.interface.shown.empty()  # the notice was shown once


def test_quit_in_the_question_quits_and_a_remembered_quit_does_not_ask(
    make_app: Callable[[], App], qtbot: Any, quits: list[int]
) -> None:
    app = make_app()
    app.window.show()
    app.window.close()
    [dialog] = asked(app)
    assert "reminders and scheduled tasks won't fire until Deskhand is started again" in (
        said(dialog)
    )
    dialog.remember.setChecked(True)
    qtbot.mouseClick(dialog.quit_button, Qt.MouseButton.LeftButton)
    assert quits == [1] and app._reminders_stopped and not app.window.isVisible()
    assert UiState.load(app.window.state_path).background_choice == "quit"

    second = make_app()  # the next start remembers it
    second.window.show()
    second.window.close()
    assert asked(second) == [] and quits == [1, 1]


def test_quit_on_the_still_running_notice_quits(
    server: NotificationServer, make_app: Callable[[], App], qloop: Any, quits: list[int]
) -> None:
    app = make_app()
    app.window.ui_state.background_choice = "keep"
    app.window.show()

    async def body() -> None:
        app.window.close()
        notice = await next_shown(server)
        await press(app, server, "app:background", notice, "quit")
        await wait_until(lambda: quits, what="the quit")

    run(qloop, body())
    assert app._reminders_stopped and not app.window.isVisible()


def test_with_a_tray_the_window_hides_and_says_so_once(
    server: NotificationServer, make_app: Callable[[], App], qloop: Any, quits: list[int]
) -> None:
    app = make_app()
    app.tray.available = True  # as on a desktop with a tray
    app.window.show()

    async def body() -> None:
        app.window.close()
        assert asked(app) == [] and not app.window.isVisible()
        notice = await next_shown(server)
        assert notice.summary == STILL_RUNNING and "tray" in notice.body
        app.window.bring_to_front()
        app.window.close()
        assert not app.window.isVisible()

    run(qloop, body())
    assert quits == [] and server.interface.shown.empty()


# ---- start-up -------------------------------------------------------------------------------


def test_the_notification_server_is_probed_after_the_window_shows(
    server: NotificationServer, tmp_path: Path
) -> None:
    code = textwrap.dedent(
        """
        import asyncio, json, sys
        from PySide6.QtCore import QEventLoop, QTimer
        from PySide6.QtWidgets import QApplication
        import qasync
        app = QApplication([])
        asyncio.set_event_loop(qasync.QEventLoop(app))
        from app.ui.main import App
        gui = App(app, sys.argv[1])
        gui.show()
        app.processEvents()
        heavy = ("desktop_notifier", "dbus_fast")
        def loaded():
            return sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in heavy})
        at_first_paint = loaded()
        wait = QEventLoop()
        gui.notifications.availabilityKnown.connect(lambda _native: wait.quit())
        QTimer.singleShot(20_000, wait.quit)
        if gui.notifications.native is None:
            wait.exec()
        print(json.dumps({"first": at_first_paint, "later": loaded(),
                          "native": gui.notifications.native}))
        gui.notifications.close()
        """
    )
    env = {
        "QT_QPA_PLATFORM": "offscreen",
        "PYTHONPATH": str(REPO),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "DBUS_SESSION_BUS_ADDRESS": os.environ["DBUS_SESSION_BUS_ADDRESS"],
    }
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "home")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {
        "first": [],
        "later": ["dbus_fast", "desktop_notifier"],
        "native": True,
    }


def test_mcp_servers_do_not_start_once_the_app_is_stopping(
    make_app: Callable[[], App], home: Path, qloop: asyncio.AbstractEventLoop
) -> None:
    """The MCP start waits for the event loop; an App that quit (or was torn down)
    meanwhile starts no servers that nobody would stop."""
    from app.core.paths import mcp_path

    server = {"command": sys.executable, "args": [str(Path(__file__).with_name("mcp_servers.py"))]}
    mcp_path(home).write_text(json.dumps({"mcpServers": {"one": server}}), "utf-8")
    app = make_app()
    app.stop_reminders()

    async def the_timer_fires() -> None:  # with the loop running, as the timer would
        app.start_mcp_servers()

    qloop.run_until_complete(the_timer_fires())
    assert app.runtime.started_mcp is None
