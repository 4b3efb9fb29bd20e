"""The Tasks window on a real TaskBook (and RuleBook) in a temporary folder, with an injected
clock: the list, the detail pane, Run now / Pause / Edit / Remove, the New and Edit form and
its errors, and that what a task holds is only ever shown as plain text (pytest-qt,
offscreen)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

import app.ui.tasks_view as tasks_view
from app.core.reminders import system_zone
from app.core.rules import RuleBook
from app.core.settings import ProviderAccount
from app.core.tasks import Budget, Schedule, TaskBook, parse_allow
from app.ui.reminders_view import when_text
from app.ui.tasks_view import MODEL_PLACEHOLDER, OTHER_CALLS, PROFILE_FIXED, TasksView

pytestmark = pytest.mark.gui
START = datetime(2026, 3, 27, 9, 30, tzinfo=UTC)  # a Friday


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(START)


@pytest.fixture
def book(tmp_path: Path) -> TaskBook:
    return TaskBook(tmp_path, rules=RuleBook(tmp_path / "rules.json"))


@pytest.fixture
def view(book: TaskBook, clock: Clock, qtbot: Any) -> TasksView:
    window = TasksView(book, clock=clock)
    qtbot.addWidget(window)
    window.show()
    return window


WORK = ProviderAccount(id="work", kind="openai", label="Work OpenAI", base_url="", model="gpt-4o")
LOCAL = ProviderAccount(
    id="local", kind="openai", label="Local <b>llama</b>", base_url="", model="llama3"
)


@pytest.fixture
def accounts_view(book: TaskBook, clock: Clock, qtbot: Any) -> TasksView:
    window = TasksView(book, clock=clock, accounts=[WORK, LOCAL], active="work")
    qtbot.addWidget(window)
    window.show()
    return window


def choices(combo: Any) -> list[tuple[str, Any]]:
    return [(combo.itemText(i), combo.itemData(i)) for i in range(combo.count())]


def zone() -> str:
    return system_zone().key


def daily(book: TaskBook, clock: Clock, title: str = "Calendar summary", **extra: Any) -> Any:
    return book.add(
        title,
        "Summarise my calendar.",
        Schedule.recurring("0 8 * * *", zone()),
        now=clock(),
        **extra,
    )


def run_once(book: TaskBook, task_id: str, start: datetime, ok: bool, answer: str) -> None:
    """A run the scheduler started at its planned time `start` (late when the book says)."""
    planned = book.get(task_id).next_due
    assert planned is not None
    ticket = book.start_run(task_id, now=start, planned=planned)
    book.record_run(task_id, ticket.run_id, now=start + timedelta(seconds=30), ok=ok, answer=answer)


def test_list_shows_schedule_next_run_and_last_result(
    view: TasksView, book: TaskBook, clock: Clock
) -> None:
    recurring = daily(book, clock)
    planned = book.get(recurring.id).next_due
    assert planned is not None
    clock.now = planned + timedelta(minutes=40)  # the app was closed at 8:00: a late run
    run_once(book, recurring.id, clock.now, False, "The calendar did not answer.\nDetails…")
    once = book.add(
        "Parking permit",
        "Check the permit page.",
        Schedule.once(clock.now + timedelta(days=3)),
        now=clock.now,
    )
    paused = daily(book, clock, "Paused one")
    book.pause(paused.id)
    view.refresh()

    tz, now = system_zone(), clock.now
    assert view.ids() == [recurring.id, once.id, paused.id]
    title, schedule, next_run, last = view.texts(recurring.id)
    assert (title, schedule) == ("Calendar summary", "Every day at 08:00")
    upcoming = book.next_run(book.get(recurring.id), now)
    assert upcoming is not None and next_run == when_text(upcoming, now, tz)
    assert last.startswith("✗ ") and "· late" in last
    assert last.endswith("— The calendar did not answer.")  # the first line only
    assert view.texts(once.id)[1] == f"Once, {when_text(now + timedelta(days=3), now, tz)}"
    assert view.texts(once.id)[3] == "Not run yet"
    assert view.texts(paused.id)[2] == "Paused"

    view.select(recurring.id)  # the detail: most recent run first, late and failed said
    heads = [head for head, _ in view.detail.history_texts()]
    assert "failed" in heads[0] and "late (planned for" in heads[0]
    assert view.detail.history_texts()[0][1] == "The calendar did not answer.\nDetails…"
    assert "Each run stops after 10 minutes or 20 steps." in view.detail.budget.text()

    clock.now = upcoming + timedelta(days=400)  # a one-shot that ran and has nothing left
    run_once(book, once.id, clock.now, True, "Renewable online.")
    view.refresh()
    assert view.texts(once.id)[2] == "No further runs"


def test_pause_and_resume_toggle_and_tell_the_scheduler(
    view: TasksView, book: TaskBook, clock: Clock, qtbot: Any
) -> None:
    task = daily(book, clock)
    view.refresh()
    view.select(task.id)
    assert view.pause_button.text() == "Pause"
    with qtbot.waitSignal(view.changed):
        view.pause_button.click()
    assert book.get(task.id).paused
    assert view.texts(task.id)[2] == "Paused" and view.pause_button.text() == "Resume"
    assert view.run_button.isEnabled()  # a paused task can still be run by hand
    with qtbot.waitSignal(view.changed):
        view.pause_button.click()
    assert not book.get(task.id).paused
    assert view.texts(task.id)[2] != "Paused" and view.pause_button.text() == "Pause"


def test_run_now_asks_for_a_run_and_waits_while_one_is_under_way(
    view: TasksView, book: TaskBook, clock: Clock, qtbot: Any
) -> None:
    task = daily(book, clock)
    view.refresh()
    view.select(task.id)
    with qtbot.waitSignal(view.runNowRequested) as asked:
        view.run_button.click()
    assert asked.args == [task.id]

    book.start_run(task.id, now=clock())  # the runner took it; the app refreshes the view
    view.refresh()
    assert view.selected_id() == task.id
    assert not view.run_button.isEnabled() and not view.remove_button.isEnabled()
    assert view.texts(task.id)[2] == "Running now"
    assert view.detail.history_texts()[0][0].startswith("Running since")
    emitted: list[str] = []
    view.runNowRequested.connect(emitted.append)
    view.run_selected()
    assert emitted == []
    assert view.open_button.isEnabled()
    with qtbot.waitSignal(view.openConversationRequested) as opened:
        view.open_button.click()
    assert opened.args == [task.id]


def test_edit_changes_title_and_schedule_and_keeps_the_profile(
    view: TasksView, book: TaskBook, clock: Clock, qtbot: Any, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    task = daily(book, clock, profile=[parse_allow(f"fs_write_file,folder={notes}")])
    view.refresh()
    view.select(task.id)
    qtbot.keyClick(view.tree, Qt.Key.Key_Return)  # Enter on a task opens its form
    editor = view.editor
    assert editor is not None and editor.isVisible() and editor.task is not None
    assert editor.task.id == task.id and editor.title.text() == "Calendar summary"
    assert editor.mode() == "daily" and editor.fixed.text() == PROFILE_FIXED
    editor.title.setText("Weekday calendar summary")
    editor.repeat.setCurrentIndex(list(tasks_view.REPEATS).index("weekdays"))
    editor.time.setTime(editor.time.time().fromString("09:15", "HH:mm"))
    editor.minutes.setValue(5)
    with qtbot.waitSignal(view.changed):
        editor.save_button.click()
    assert not editor.isVisible()

    changed = book.get(task.id)
    assert changed.title == "Weekday calendar summary"
    assert changed.schedule == Schedule.recurring("15 9 * * 1-5", zone())
    assert changed.budget == Budget(max_seconds=300)
    assert changed.profile == task.profile and len(book.profile_rules(task.id)) == 1
    assert view.texts(task.id)[:2] == ["Weekday calendar summary", "Weekdays at 09:15"]


def test_editing_a_one_shot_that_already_ran_keeps_its_time(
    view: TasksView, book: TaskBook, clock: Clock, qtbot: Any
) -> None:
    at = clock() + timedelta(hours=2, seconds=17)
    task = book.add("Call", "Remind me to call.", Schedule.once(at), now=clock())
    run_once(book, task.id, at, True, "Done.")
    clock.now = at + timedelta(days=1)  # its time is in the past now: saving must not re-plan
    view.refresh()
    editor = view.open_editor(task.id)
    assert editor.mode() == "once"
    editor.title.setText("Call the bank")
    with qtbot.waitSignal(view.changed):
        editor.save_button.click()
    saved = book.get(task.id)
    assert (saved.title, saved.schedule, saved.next_due) == ("Call the bank", task.schedule, None)


def test_a_bad_cron_is_shown_at_the_cron_field_and_nothing_typed_is_lost(
    view: TasksView, book: TaskBook, qtbot: Any
) -> None:
    editor = view.open_editor(None)
    editor.title.setText("Backups")
    editor.prompt.setPlainText("Check last night's backup\nand tell me if it failed.")
    editor.repeat.setCurrentIndex(list(tasks_view.REPEATS).index("cron"))
    qtbot.keyClicks(editor.cron, "61 25 * *")
    editor.save_button.click()

    assert editor.isVisible() and book.list() == []
    error = editor.errors["cron"]
    assert error.isVisible() and "cron" in error.text().lower()
    assert editor.cron.property("invalid") is True
    cron_row = editor.grid.getItemPosition(editor.grid.indexOf(editor.cron.parentWidget()))[0]
    assert editor.grid.getItemPosition(editor.grid.indexOf(error))[0] == cron_row + 1
    assert editor.prompt.toPlainText() == "Check last night's backup\nand tell me if it failed."
    assert (editor.title.text(), editor.cron.text()) == ("Backups", "61 25 * *")

    editor.cron.setText("0 3 * * *")  # fixed: it saves, and the error goes
    editor.save_button.click()
    assert not editor.isVisible() and [t.title for t in book.list()] == ["Backups"]


def test_new_task_with_allow_lines_gets_its_profile_shown_in_plain_words(
    view: TasksView, book: TaskBook, qtbot: Any, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    qtbot.keyClick(view, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    editor = view.editor
    assert editor is not None and editor.isVisible() and editor.task is None
    editor.title.setText("Notes digest")
    editor.prompt.setPlainText("Summarise today's notes.")
    editor.allow.setPlainText("fs_read_file\nfs_write_file,folder=notes\n*@mcp:github")
    assert "Line 2:" in editor.errors["allow"].text() and editor.errors["allow"].isVisible()
    assert "May run fs_read_file with any arguments without asking" in editor.preview.text()
    assert "May run every tool from mcp:github" in editor.preview.text()
    editor.save_button.click()
    assert editor.isVisible() and book.list() == []  # a bad line stops the save

    editor.allow.setPlainText(f"fs_read_file\nfs_write_file,folder={notes}")
    assert not editor.errors["allow"].isVisible()
    with qtbot.waitSignal(view.changed):
        editor.save_button.click()
    (task,) = book.list()
    assert [e.tool for e in task.profile] == ["fs_read_file", "fs_write_file"]
    assert len(book.profile_rules(task.id)) == 2
    assert view.selected_id() == task.id
    lines = view.detail.profile.text().splitlines()
    assert lines == [
        "• May run fs_read_file with any arguments without asking",
        f"• May run fs_write_file in {notes} without asking",
        f"• {OTHER_CALLS.rstrip('.')}",
    ]
    assert "Settings → Rules" in view.detail.profile_note.text()

    rule = book.profile_rules(task.id)[0]  # removed in Settings → Rules: the detail follows
    assert book.rules is not None
    book.rules.remove(rule.id)
    view.refresh()
    assert "May run fs_read_file" not in view.detail.profile.text()
    assert "1 rule of this task were removed" in view.detail.profile_note.text()


def test_remove_asks_first_and_then_removes_the_task_and_its_rules(
    view: TasksView, book: TaskBook, clock: Clock, qtbot: Any, monkeypatch: Any
) -> None:
    task = daily(book, clock, profile=[parse_allow("fs_read_file")])
    view.refresh()
    view.select(task.id)
    answers = [False, True]
    asked: list[str] = []

    def confirm(parent: Any, which: Any) -> bool:
        asked.append(which.id)
        return answers.pop(0)

    monkeypatch.setattr(tasks_view, "confirm_remove", confirm)
    view.remove_button.click()  # declined
    assert asked == [task.id] and book.list() != []
    with qtbot.waitSignal(view.changed):
        qtbot.keyClick(view.tree, Qt.Key.Key_Delete)
    assert asked == [task.id, task.id]
    assert book.list() == [] and book.profile_rules(task.id) == []
    assert view.ids() == [] and view.stack.currentWidget() is view.empty
    assert "deskhand tasks add" in view.empty.text() and "New task" in view.empty.text()
    assert not view.run_button.isEnabled()


def test_the_confirm_box_shows_the_title_as_plain_text(
    view: TasksView, book: TaskBook, clock: Clock, monkeypatch: Any
) -> None:
    task = daily(book, clock, "<b>bold</b>")
    seen: list[tuple[Qt.TextFormat, str]] = []

    def answer(box: QMessageBox) -> int:
        seen.append((box.textFormat(), box.text()))
        return int(QMessageBox.StandardButton.Cancel)

    monkeypatch.setattr(QMessageBox, "exec", answer)
    assert tasks_view.confirm_remove(view, task) is False
    assert seen == [(Qt.TextFormat.PlainText, "Remove the task “<b>bold</b>”?")]


def test_what_a_task_holds_is_shown_literally(
    view: TasksView, book: TaskBook, clock: Clock
) -> None:
    html = '<b>x</b><img src="http://127.0.0.1:9/track.png">'
    task = daily(book, clock, "<i>title</i>\u202eevil")
    planned = book.get(task.id).next_due
    assert planned is not None
    run_once(book, task.id, planned, True, f"{html}\n<a href='http://127.0.0.1:9'>link</a>")
    clock.now = planned + timedelta(minutes=1)
    view.refresh()
    view.select(task.id)

    title, _, _, last = view.texts(task.id)
    assert title == "<i>title</i>⟨U+202E⟩evil"
    assert last.endswith(f"— {html}")
    _head, summary = view.detail.history_texts()[0]
    assert summary == f"{html}\n<a href='http://127.0.0.1:9'>link</a>"
    labels = [view.detail.title, view.detail.prompt, view.detail.profile]
    labels += [label for pair in view.detail._history_rows for label in pair]
    assert all(label.textFormat() == Qt.TextFormat.PlainText for label in labels)
    assert view.detail.title.text() == "<i>title</i>⟨U+202E⟩evil"


def test_new_task_with_an_account_and_a_model_stores_them(
    accounts_view: TasksView, book: TaskBook, qtbot: Any
) -> None:
    editor = accounts_view.open_editor(None)
    assert choices(editor.account) == [
        ("Active provider (Work OpenAI)", None),
        ("Work OpenAI", "work"),
        ("Local <b>llama</b>", "local"),  # a label is plain text
    ]
    assert editor.model_name.placeholderText() == MODEL_PLACEHOLDER
    editor.title.setText("Local digest")
    editor.prompt.setPlainText("Summarise my notes.")
    editor.account.setCurrentIndex(editor.account.findData("local"))
    qtbot.keyClicks(editor.model_name, " qwen2.5:7b ")
    with qtbot.waitSignal(accounts_view.changed):
        editor.save_button.click()

    (task,) = book.list()
    assert (task.provider, task.model) == ("local", "qwen2.5:7b")
    assert "Model: Local <b>llama</b> · qwen2.5:7b" in accounts_view.detail.budget.text()


def test_the_defaults_store_no_account_and_no_model(
    accounts_view: TasksView, book: TaskBook, qtbot: Any
) -> None:
    editor = accounts_view.open_editor(None)
    assert editor.account.currentIndex() == 0 and editor.model_name.text() == ""
    editor.title.setText("Digest")
    editor.prompt.setPlainText("Summarise my notes.")
    editor.model_name.setText("   ")  # blank: the account's model
    with qtbot.waitSignal(accounts_view.changed):
        editor.save_button.click()

    (task,) = book.list()
    assert (task.provider, task.model) == (None, None)
    assert accounts_view.detail.budget.text().endswith("\nModel: the active provider")


def test_edit_changes_the_account_and_model_and_only_when_asked(
    accounts_view: TasksView, book: TaskBook, clock: Clock, qtbot: Any, monkeypatch: Any
) -> None:
    task = daily(book, clock, provider="work", model="gpt-4o-mini")
    accounts_view.refresh()
    editor = accounts_view.open_editor(task.id)
    assert editor.account.currentData() == "work" and editor.model_name.text() == "gpt-4o-mini"
    sent: list[dict[str, Any]] = []
    update = book.update

    def spy(task_id: str, **changes: Any) -> Any:
        sent.append({k: v for k, v in changes.items() if k != "now"})
        return update(task_id, **changes)

    monkeypatch.setattr(book, "update", spy)
    editor.title.setText("Calendar digest")  # the account and model untouched: not sent
    with qtbot.waitSignal(accounts_view.changed):
        editor.save_button.click()
    assert sent == [{"title": "Calendar digest"}]

    editor = accounts_view.open_editor(task.id)
    editor.account.setCurrentIndex(0)  # back to the active provider, the account's model
    editor.model_name.clear()
    with qtbot.waitSignal(accounts_view.changed):
        editor.save_button.click()
    assert sent[1] == {"provider": None, "model": None}
    saved = book.get(task.id)
    assert (saved.provider, saved.model, saved.title) == (None, None, "Calendar digest")

    editor = accounts_view.open_editor(task.id)
    editor.account.setCurrentIndex(editor.account.findData("local"))
    with qtbot.waitSignal(accounts_view.changed):
        editor.save_button.click()
    assert (book.get(task.id).provider, book.get(task.id).model) == ("local", None)
    assert accounts_view.detail.budget.text().endswith("\nModel: Local <b>llama</b>")


def test_a_missing_account_is_shown_and_kept_until_another_is_chosen(
    accounts_view: TasksView, book: TaskBook, clock: Clock, qtbot: Any
) -> None:
    task = daily(book, clock, provider="gone1", model="mixtral")
    accounts_view.refresh()
    assert "Model: missing account (gone1) · mixtral" in accounts_view.detail.budget.text()
    editor = accounts_view.open_editor(task.id)
    assert editor.account.currentText() == "Missing account (gone1) — choose another"
    assert editor.account.currentData() == "gone1" and editor.account.count() == 4
    editor.title.setText("Calendar digest")
    with qtbot.waitSignal(accounts_view.changed):
        editor.save_button.click()
    kept = book.get(task.id)
    assert (kept.title, kept.provider, kept.model) == ("Calendar digest", "gone1", "mixtral")

    editor = accounts_view.open_editor(task.id)
    editor.account.setCurrentIndex(editor.account.findData("work"))
    with qtbot.waitSignal(accounts_view.changed):
        editor.save_button.click()
    assert book.get(task.id).provider == "work"


def test_accounts_can_be_given_later_and_the_plain_view_offers_the_active_one(
    view: TasksView, book: TaskBook, clock: Clock
) -> None:
    editor = view.open_editor(None)  # no accounts passed: only the active provider
    assert choices(editor.account) == [("Active provider (none set)", None)]
    editor.close()
    task = daily(book, clock, provider="work")
    view.refresh()
    view.select(task.id)
    assert view.detail.budget.text().endswith("\nModel: missing account (work)")
    view.set_accounts([WORK], "work")
    assert view.detail.budget.text().endswith("\nModel: Work OpenAI")
    assert view.open_editor(task.id).account.currentText() == "Work OpenAI"
