"""Reminders in the GUI: the App's scheduler → tray notifications, the tray's Snooze/Done,
the Reminders view (pytest-qt, offscreen, qasync loop, an injectable clock on the book)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QDateTime, Qt
from PySide6.QtWidgets import QApplication

from app.core.paths import settings_path
from app.core.reminders import Reminder, system_zone
from app.core.settings import ProviderAccount, SettingsStore
from app.ui.main import App
from tests.clock import Clock
from tests.fakellm import ScriptedLLM, text, tool_calls
from tests.fixtures_qt import restore_look, saved_look, wait_until

pytestmark = pytest.mark.gui
START = datetime(2026, 3, 27, 8, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> Clock:
    return Clock(START)


@contextlib.contextmanager
def running_app(
    home: Path, qapp: QApplication, qtbot: Any, clock: Clock, monkeypatch: Any
) -> Iterator[App]:
    """The whole GUI App on `home`; the process-wide things it sets are put back."""
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    monkeypatch.setattr("app.core.logging_setup.configure", lambda *a, **k: None)
    # the tray's balloons are tested here: no notification server, whatever the machine has
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", f"unix:path={home}/no-bus")
    store = SettingsStore(settings_path(home))
    if store.load().active_provider_account() is None:  # no first-run card probing ports
        store.update(lambda s: use_provider(s, "http://127.0.0.1:9/v1"))
    saved = saved_look(qapp)
    quit_on_close = qapp.quitOnLastWindowClosed()
    app = App(qapp, home)
    app.runtime.reminders.clock = clock
    qtbot.addWidget(app.window)
    try:
        yield app
    finally:
        app.window.stop_background_work()
        app.tray.hide()
        app.stop_reminders()
        task = app.scheduler._task
        if task is not None and app._loop is not None:  # let the cancellation finish
            app._loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
        app.notifications.close()
        app.runtime.close()
        restore_look(qapp, saved)
        qapp.setQuitOnLastWindowClosed(quit_on_close)


@pytest.fixture
def gui(
    home: Path, qapp: QApplication, qloop: Any, qtbot: Any, clock: Clock, monkeypatch: Any
) -> Iterator[App]:
    with running_app(home, qapp, qtbot, clock, monkeypatch) as app:
        yield app


def use_provider(settings: Any, base_url: str) -> None:
    account = ProviderAccount(kind="openai", label="Scripted", base_url=base_url, model="m")
    settings.providers.append(account)
    settings.active_provider = account.id


def run(loop: Any, coro: Any) -> Any:
    return loop.run_until_complete(asyncio.wait_for(coro, timeout=30))


async def scheduler_running(app: App) -> None:
    await wait_until(lambda: app._loop is not None, what="the scheduler to start")


async def replanned(app: App, ticks: list[int]) -> None:
    """Waits for the scheduler to wake and plan again after a poke: the test must not end
    with a step pending, which Qt would run after the test, outside the asyncio loop."""
    before = len(ticks)
    await wait_until(lambda: len(ticks) > before, what="the scheduler to plan again")


def count_ticks(app: App) -> list[int]:
    ticks: list[int] = []
    real_tick = app.scheduler.tick

    def tick() -> Any:
        ticks.append(1)
        return real_tick()

    app.scheduler.tick = tick  # type: ignore[method-assign]
    return ticks


def reload(app: App, reminder: Reminder) -> Reminder:
    return app.runtime.reminders.get(reminder.id)


def test_a_late_reminder_notifies_through_the_tray_and_lands_under_late(gui, clock, qloop):
    book = gui.runtime.reminders
    r = book.create_once("call the bank", clock.now + timedelta(minutes=10))

    async def body() -> None:
        await scheduler_running(gui)
        view = gui.window.show_reminders()
        assert view.ids("upcoming") == [r.id] and gui.tray.sent == []
        clock.advance(minutes=15)  # five minutes after it was due: late
        gui.poke_scheduler()
        await wait_until(lambda: gui.tray.sent, what="a notification")
        await wait_until(lambda: r.id in view.ids("late"), what="the view to update")

    run(qloop, body())
    assert gui.tray.sent == [("Reminder (late)", "call the bank")]
    assert gui.tray.last_key == f"reminder:{r.id}"
    assert gui.tray.reminder_menu.isEnabled()
    assert "call the bank" in gui.tray.reminder_menu.title()
    view = gui.window.reminders_view
    assert view.ids("upcoming") == [] and view.tabs.tabText(1) == "Late (1)"
    assert reload(gui, r).status == "fired"


def test_on_time_reminder_then_done_from_the_tray(gui, clock, qloop):
    book = gui.runtime.reminders
    r = book.create_once("stretch", clock.now + timedelta(minutes=2))
    ticks = count_ticks(gui)

    async def body() -> None:
        await scheduler_running(gui)
        view = gui.window.show_reminders()
        clock.advance(minutes=2)
        gui.poke_scheduler()
        await wait_until(lambda: r.id in view.ids("done"), what="the fired reminder listed")
        assert gui.tray.sent == [("Reminder", "stretch")]
        assert view.texts("done", r.id)[2] == "Shown"
        gui.tray.done_action.trigger()
        await wait_until(lambda: view.texts("done", r.id)[2] == "Done", what="Done in the view")
        await replanned(gui, ticks)

    run(qloop, body())
    assert reload(gui, r).status == "done"
    assert not gui.tray.reminder_menu.isEnabled()


def test_missed_repeats_are_coalesced_into_one_late_notification(gui, clock, qloop):
    gui.runtime.reminders.create_recurring("drink water", "*/5 * * * *", "UTC")

    async def body() -> None:
        await scheduler_running(gui)
        clock.advance(minutes=21)  # due 08:05; 08:10, 08:15 and 08:20 missed too
        gui.poke_scheduler()
        await wait_until(lambda: gui.tray.sent, what="a notification")

    run(qloop, body())
    assert gui.tray.sent == [("Reminder (late)", "drink water — 3 more missed")]


def test_snooze_5_from_the_tray_menu_moves_it_back_to_upcoming(gui, clock, qloop):
    book = gui.runtime.reminders
    r = book.create_once("take the pizza out", clock.now + timedelta(minutes=1))

    async def body() -> None:
        await scheduler_running(gui)
        view = gui.window.show_reminders()
        clock.advance(minutes=1)
        gui.poke_scheduler()
        await wait_until(lambda: gui.tray.sent, what="the first notification")
        gui.tray.snooze_actions[5].trigger()
        await wait_until(lambda: view.ids("upcoming") == [r.id], what="back in Upcoming")
        snoozed = reload(gui, r)
        assert snoozed.status == "scheduled"
        assert snoozed.due_at == clock.now + timedelta(minutes=5)
        assert not gui.tray.reminder_menu.isEnabled()
        clock.advance(minutes=5)
        gui.poke_scheduler()
        await wait_until(lambda: len(gui.tray.sent) == 2, what="the snoozed notification")

    run(qloop, body())
    assert gui.tray.sent == [("Reminder", "take the pizza out")] * 2


def test_clicking_the_notification_opens_the_view_on_that_reminder(gui, clock, qloop):
    book = gui.runtime.reminders
    other = book.create_once("later", clock.now + timedelta(hours=3))
    r = book.create_once("meeting with Ana", clock.now + timedelta(minutes=3))

    async def body() -> None:
        await scheduler_running(gui)
        clock.advance(minutes=10)
        gui.poke_scheduler()
        await wait_until(lambda: gui.tray.sent, what="a notification")

    run(qloop, body())
    assert gui.window.reminders_view is None  # nothing opened by itself
    gui.tray.icon.messageClicked.emit()
    view = gui.window.reminders_view
    assert view is not None and view.isVisible() and gui.window.isVisible()
    assert view.current_section() == "late" and view.selected_id() == r.id
    assert view.ids("upcoming") == [other.id]


def test_a_reminder_created_in_the_view_is_stored_and_planned(gui, clock, qloop, qtbot):
    book = gui.runtime.reminders
    due_local = (clock.now + timedelta(hours=1)).astimezone(system_zone())

    async def body() -> None:
        await scheduler_running(gui)
        view = gui.window.show_reminders()
        qtbot.mouseClick(view.new_button, Qt.MouseButton.LeftButton)
        assert view.form.isVisible()
        qtbot.keyClicks(view.form.message, "water the plants")
        view.form.when.setDateTime(QDateTime(due_local.date(), due_local.time()))
        qtbot.mouseClick(view.form.add_button, Qt.MouseButton.LeftButton)
        # Same step as the click: a scheduler that was poked by the view finds it due.
        clock.advance(hours=1)
        await wait_until(lambda: gui.tray.sent, what="the new reminder to fire")
        assert not view.form.isVisible()

    run(qloop, body())
    [stored] = book.list(("scheduled", "fired"))
    assert stored.message == "water the plants" and stored.due_at == clock.now
    assert stored.tz == system_zone().key and stored.cron is None
    assert gui.tray.sent == [("Reminder", "water the plants")]


def test_view_creates_a_weekday_reminder_and_rejects_a_bad_cron(gui, clock, qloop):
    view = gui.window.show_reminders()
    view.show_form(True)
    form = view.form
    form.message.setText("standup")
    form.repeat.setCurrentIndex(form.repeat.findData("cron"))
    form.cron.setText("every morning")
    assert view.create_from_form() is None
    assert "Invalid cron expression" in form.error.text() and form.isVisible()
    form.repeat.setCurrentIndex(form.repeat.findData("weekdays"))
    local = datetime(2026, 3, 27, 9, 15)
    form.when.setDateTime(QDateTime(local.date(), local.time()))
    created = view.create_from_form()
    assert created is not None and created.cron == "15 9 * * 1-5"
    assert gui.runtime.reminders.list() == [created]
    assert view.texts("upcoming", created.id)[2] == "Weekdays at 09:15"
    assert view.selected_id() == created.id


def test_view_actions_snooze_done_cancel(gui, clock, qloop):
    book = gui.runtime.reminders
    a = book.create_once("a", clock.now + timedelta(minutes=30))
    b = book.create_once("b", clock.now + timedelta(minutes=40))
    view = gui.window.show_reminders()
    view.select(a.id)
    view.snooze_actions[60].trigger()
    assert reload(gui, a).due_at == clock.now + timedelta(minutes=60)
    view.select(b.id)
    view.cancel_selected()
    assert reload(gui, b).status == "cancelled" and view.ids("done") == [b.id]
    assert view.texts("done", b.id)[2] == "Cancelled"
    view.select(a.id)
    view.mark_done()
    assert reload(gui, a).status == "done" and view.ids("upcoming") == []
    assert not view.snooze_button.isEnabled()  # a done reminder has no actions


def test_a_reminder_the_model_creates_is_planned_after_the_tool_finishes(
    home: Path, llm: ScriptedLLM, qapp, qloop, qtbot, clock, monkeypatch
):
    def configure(settings: Any) -> None:
        use_provider(settings, llm.openai_base_url)
        settings.approvals.always_allow = ["reminders_create"]

    SettingsStore(settings_path(home)).update(configure)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm.add(tool_calls(("r1", "reminders_create", {"message": "stretch", "in_minutes": 2})))
    llm.add(text("I'll remind you."))
    with running_app(home, qapp, qtbot, clock, monkeypatch) as app:
        pokes: list[int] = []
        real_poke = app.scheduler.poke
        app.scheduler.poke = lambda: (pokes.append(1), real_poke())  # type: ignore[method-assign]

        async def body() -> None:
            await scheduler_running(app)
            view = app.window.show_reminders()
            app.window.send("remind me in 2 minutes to stretch", [])
            await wait_until(
                lambda: not app.window.controller.busy and len(llm.requests) == 2,
                what="the turn to finish",
            )
            await wait_until(lambda: view.ids("upcoming"), what="the view to show it")
            assert pokes, "the scheduler was not poked after the tool ran"

        run(qloop, body())
        [created] = app.runtime.reminders.list()
        assert created.message == "stretch"
        assert created.due_at == clock.now + timedelta(minutes=2)  # the tool used the book


def test_reminders_are_reachable_from_the_menu_and_the_tray(gui, qtbot):
    action = gui.window.reminders_action
    assert action.text() == "Reminders…" and action.shortcut().toString() == "Ctrl+R"
    tray_texts = [a.text() for a in gui.tray.menu.actions()]
    assert "Reminders…" in tray_texts and "Last reminder" in tray_texts
    assert not gui.tray.reminder_menu.isEnabled()  # nothing delivered yet
    gui.tray.notify("Deskhand needs your approval", "fs_write_file is waiting for you.")
    gui.tray.icon.messageClicked.emit()  # not a reminder: just the window
    assert gui.window.isVisible() and gui.window.reminders_view is None
    next(a for a in gui.tray.menu.actions() if a.text() == "Reminders…").trigger()
    view = gui.window.reminders_view
    assert view is not None and view.isVisible()
    view.close()
    action.trigger()
    assert view.isVisible() and gui.window.reminders_view is view
