"""Scheduled tasks in the window app (§5.14): a task runs at its time with the window
closed, its result arrives as a notification whose Open shows the task's conversation, and
its questions are answered from the notification or from the whole question (Review…).
The real App, a scripted model over HTTP, the real notification server of
tests/fixtures_notify.py; time is the task runner's clock, moved by the test."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from app.core.paths import settings_path
from app.core.settings import ProviderAccount, SettingsStore
from app.core.tasks import Schedule, parse_allow
from app.ui.main import App
from app.ui.task_question import TaskQuestionDialog
from tests import test_gui_notifications as gui
from tests.fakellm import ScriptedLLM, text, tool_calls
from tests.fixtures_notify import NotificationServer
from tests.fixtures_qt import wait_until
from tests.test_gui_notifications import START, Clock, buttons, next_shown, press, run

# the window app's fixtures, shared with the notification tests
make_app, clock, quits = gui.make_app, gui.clock, gui.quits

pytestmark = pytest.mark.gui


@pytest.fixture
def work(home: Path, llm: ScriptedLLM) -> Iterator[Path]:
    """A folder the file tools may use (a short path, so a call's arguments fit a
    notification), and the scripted model as a provider account."""
    folder = Path(tempfile.mkdtemp(prefix="dh-work-"))

    def configure(settings: Any) -> None:
        settings.providers.append(
            ProviderAccount(
                id="scripted", kind="openai", label="Scripted",
                base_url=llm.openai_base_url, model="scripted",
            )
        )
        settings.files.allowed_roots = [str(folder)]
        settings.files.folders_chosen = True

    SettingsStore(settings_path(home)).update(configure)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def started(app: App) -> Any:
    """The task host running. A home without tasks starts it with its first task (a poke);
    these tests add theirs after start-up, so the book is made first."""
    app.runtime.tasks.path.parent.mkdir(parents=True, exist_ok=True)
    if not app.runtime.tasks.path.exists():
        app.runtime.tasks.path.write_text('{"tasks": []}', "utf-8")
    return wait_until(lambda: app.tasks.runner is not None, what="the task host to start")


def add(app: App, work: Path, *, allow: tuple[str, ...] = (), hours: float = 1) -> Any:
    """A one-shot task `hours` after START (created an hour before START)."""
    return app.runtime.tasks.add(
        "Nightly report", "Write the report", Schedule.once(START + timedelta(hours=hours)),
        now=START - timedelta(hours=1),
        provider="scripted",
        profile=[parse_allow(line) for line in allow],
    )


def write(path: Path, content: str = "report") -> Any:
    return tool_calls(("w1", "fs_write_file", {"path": str(path), "content": content}))


def test_a_task_runs_with_the_window_closed_and_open_shows_its_conversation(
    server: NotificationServer, make_app: Callable[[], App], clock: Clock, qloop: Any,
    llm: ScriptedLLM, work: Path,
) -> None:
    app = make_app()
    app.tasks.clock = clock  # before its loop starts
    assert not app.window.isVisible()  # closed to the tray, or never opened
    report = work / "report.txt"
    task = add(app, work, allow=(f"fs_write_file,folder={work}",))
    llm.add(write(report), text("Report written.\nThree builds passed."))

    async def body() -> None:
        await started(app)
        assert app.tasks.runs_schedule
        clock.advance(hours=1)
        app.tasks.poke()
        shown = await next_shown(server)
        assert shown.summary == "Task done: Nightly report"
        assert shown.body.startswith("Report written.\nThree builds passed.")
        assert ("open", "Open") in buttons(shown)
        assert report.read_text() == "report"
        assert not app.window.isVisible()  # nothing popped up by itself
        await press(app, server, f"task:{task.id}", shown, "open")
        conversation_id = app.runtime.tasks.get(task.id).conversation_id
        await wait_until(lambda: app.window.controller.conversation_id == conversation_id,
                         what="the task's conversation to open")
        assert app.window.isVisible()

    run(qloop, body())


def test_a_question_is_answered_from_its_notification(
    server: NotificationServer, make_app: Callable[[], App], clock: Clock, qloop: Any,
    llm: ScriptedLLM, work: Path,
) -> None:
    app = make_app()
    app.tasks.clock = clock  # before its loop starts
    report = work / "report.txt"
    task = add(app, work, hours=5)
    llm.add(write(report), text("Done after your OK."))

    async def body() -> None:
        await started(app)
        assert app.tasks.run_now(task.id) is None
        assert app.tasks.run_now(task.id) == "“Nightly report” is still running"
        question = await next_shown(server)
        assert question.summary == "Task “Nightly report” asks"
        assert [k for k, _label in buttons(question)] == ["default", "allow_once", "deny"]
        [key] = [k for k in app.tasks._questions]
        await press(app, server, key, question, "allow_once")
        done = await next_shown(server)
        assert done.summary == "Task done: Nightly report"
        assert report.read_text() == "report"
        assert app.tasks.approvals is not None and app.tasks.approvals.pending() == []

    run(qloop, body())


def test_review_opens_the_whole_question_over_the_tasks_conversation(
    server: NotificationServer, make_app: Callable[[], App], clock: Clock, qloop: Any,
    llm: ScriptedLLM, work: Path,
) -> None:
    app = make_app()
    app.tasks.clock = clock  # before its loop starts
    report = work / "report.txt"
    task = add(app, work, hours=5)
    long_text = "line <b>bold</b>\n" * 200
    llm.add(write(report, long_text), text("Written."))

    async def body() -> None:
        await started(app)
        app.tasks.run_now(task.id)
        question = await next_shown(server)
        assert [k for k, _label in buttons(question)] == ["default", "review", "deny"]
        [key] = list(app.tasks._questions)
        await press(app, server, key, question, "review")
        dialog = await wait_until(
            lambda: next(iter(app.window.findChildren(TaskQuestionDialog)), None),
            what="the whole question",
        )
        assert "line <b>bold</b>" in dialog.arguments.toPlainText()  # all of it, as text
        conversation_id = app.runtime.tasks.get(task.id).conversation_id
        assert app.window.controller.conversation_id == conversation_id
        bar = app.window.task_question_bar  # the question shows in the task's conversation
        assert bar.isVisible() and "“Nightly report” waits for your answer" in bar.label.text()
        dialog.reject()  # closing it answers nothing: the bar's Review… opens it again
        bar.button.click()
        dialog = await wait_until(
            lambda: next(
                (d for d in app.window.findChildren(TaskQuestionDialog) if d.isVisible()), None
            ),
            what="the whole question again",
        )
        dialog.allow_button.click()
        done = await next_shown(server)
        assert done.summary == "Task done: Nightly report"
        assert report.read_text() == long_text
        assert not bar.isVisible()

    run(qloop, body())


def test_another_process_holding_the_schedule_leaves_the_runs_to_it(
    home: Path, make_app: Callable[[], App], clock: Clock, qloop: Any, work: Path
) -> None:
    from app.core.task_scheduler import ScheduleLock

    serve = ScheduleLock(home)  # e.g. `deskhand tasks serve`
    assert serve.acquire()
    try:
        app = make_app()
        app.tasks.clock = clock
        run(qloop, started(app))
        assert not app.tasks.runs_schedule
        task = add(app, work)
        clock.advance(hours=2)
        app.tasks.poke()
        run(qloop, asyncio.sleep(0))
        assert app.runtime.tasks.get(task.id).running is None
    finally:
        serve.release()


def test_a_run_missed_while_closed_runs_as_the_app_starts(
    server: NotificationServer, make_app: Callable[[], App], clock: Clock, qloop: Any,
    llm: ScriptedLLM, work: Path,
) -> None:
    app = make_app()
    app.tasks.clock = clock
    task = add(app, work, hours=-0.5)  # came due while Deskhand was closed
    llm.add(text("Caught up."))

    async def body() -> None:
        shown = await next_shown(server)
        assert shown.summary == "Task done: Nightly report (ran late)"
        assert shown.body == "Caught up."
        last = app.runtime.tasks.get(task.id).last_run
        assert last is not None and last.ok and last.late

    run(qloop, body())


def test_the_tasks_window_offers_the_saved_provider_accounts(
    make_app: Callable[[], App], clock: Clock, qloop: Any, work: Path
) -> None:
    app = make_app()
    view = app.window.show_tasks()
    editor = view.open_editor(None)
    offered = [editor.account.itemText(i) for i in range(editor.account.count())]
    assert offered[0].startswith("Active provider")
    assert any(text.startswith("Scripted") for text in offered[1:])
    editor.close()
    view.close()


def test_tasks_are_reachable_from_the_menu_and_the_tray(
    make_app: Callable[[], App], clock: Clock, qloop: Any, work: Path
) -> None:
    app = make_app()
    action = app.window.tasks_action
    assert action.text() == "Tasks…" and action.shortcut().toString() == "Ctrl+T"
    next(a for a in app.tray.menu.actions() if a.text() == "Tasks…").trigger()
    view = app.window.tasks_view
    assert view is not None and view.isVisible() and app.window.isVisible()
    view.close()
    action.trigger()
    assert view.isVisible() and app.window.tasks_view is view
    view.close()


def test_a_home_without_tasks_starts_the_task_host_with_its_first_task(
    make_app: Callable[[], App], clock: Clock, qloop: Any, work: Path
) -> None:
    """Nothing to schedule, nothing loaded (the runner, rules and book: ~3 MiB idle)."""
    import app.ui.main as gui

    app = make_app()
    app.tasks.clock = clock
    run(qloop, wait_until(lambda: app._loop is not None, what="the scheduler to start"))
    app._start_tasks()  # what the start-up timer does
    assert not app.tasks.started and not app.tasks.has_tasks()
    assert gui.TASKS_LOOK_MS <= 30_000  # a task added elsewhere is noticed as the schedule would
    import threading

    import app.ui.task_host as host

    threads: list[str] = []
    real_import = host._import_task_modules

    def importing() -> None:
        threads.append(threading.current_thread().name)
        real_import()

    host._import_task_modules = importing
    try:
        task = add(app, work)
        app.tasks.poke()  # the window's tasksChanged after a tool or the Tasks view added it
        run(qloop, started(app))
    finally:
        host._import_task_modules = real_import
    assert app.tasks.runs_schedule
    assert app.runtime.tasks.get(task.id) is not None
    # the runner's imports: on a worker, not on the GUI thread
    assert len(threads) == 1 and threads[0].startswith("deskhand-off-gui")
