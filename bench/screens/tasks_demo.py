"""Screenshots of the Tasks window with three sample tasks — a repeating one with a history
(a late run, a failure), a one-shot, a paused one — and of the New task form, light and
dark, small and large, to look at the real rendering. Two provider accounts are saved; the
New form picks one of them and a model.

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python bench/screens/tasks_demo.py OUT_DIR
Writes tasks-{light,dark}-{small,large}.png, tasks-empty-light.png,
task-new-{light,dark}.png, task-edit-{light,dark}.png (with an error),
task-question-{light,dark}.png (a run's whole question) and keep-running-{light,dark}.png
(closing without a tray) into OUT_DIR.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtWidgets import QApplication, QWidget

NOW = datetime(2026, 4, 14, 9, 30, tzinfo=UTC)  # a Tuesday
SIZES = {"small": (720, 480), "large": (1200, 800)}
CALENDAR_ANSWER = """You have 3 meetings today: stand-up at 9:30, design review at 11:00,
1:1 with Sam at 15:00.
Nothing conflicts. The design review has a new agenda document attached.
Tomorrow starts at 10:00."""


def sample_accounts():  # -> list[ProviderAccount]
    from app.core.settings import ProviderAccount

    return [
        ProviderAccount(
            id="work", kind="openai", label="Work OpenAI", base_url="", model="gpt-4o-mini"
        ),
        ProviderAccount(
            id="local",
            kind="openai",
            label="Local Ollama",
            base_url="http://localhost:11434/v1",
            model="llama3.1:8b",
        ),
    ]


def sample_book(home: Path):  # -> TaskBook (imported late, after the path is set)
    from app.core.reminders import system_zone
    from app.core.rules import RuleBook
    from app.core.tasks import Budget, Schedule, TaskBook, parse_allow

    book = TaskBook(home, rules=RuleBook(home / "rules.json"))
    zone = system_zone().key
    made = NOW - timedelta(days=6)
    daily = book.add(
        "Morning calendar summary",
        "Every weekday, read today's calendar and summarise it in five lines: meetings, "
        "conflicts, anything I must prepare. Mention tomorrow's first meeting.",
        Schedule.recurring("0 8 * * 1-5", zone),
        now=made,
        profile=[parse_allow("calendar_list_events"), parse_allow("calendar_get_event")],
        budget=Budget(max_seconds=300, max_steps=12),
    )
    runs = (  # (days before NOW, minutes late, ok, answer)
        (6, 0, True, "2 meetings today: stand-up at 9:30 and planning at 14:00.\nNo conflicts."),
        (5, 47, True, "Deskhand was closed at 8:00; ran at 8:47.\n1 meeting: stand-up at 9:30."),
        (1, 0, False, "The calendar server did not answer (connection refused)."),
        (0, 0, True, CALENDAR_ANSWER),
    )
    for days, late, ok, answer in runs:
        day = (NOW - timedelta(days=days)).replace(hour=0, minute=0)
        planned = book.update(daily.id, now=day, schedule=daily.schedule).next_due
        assert planned is not None
        start = planned + timedelta(minutes=late)
        ticket = book.start_run(daily.id, now=start, planned=planned)
        book.record_run(
            daily.id, ticket.run_id, now=start + timedelta(seconds=38), ok=ok, answer=answer
        )
    book.update(daily.id, now=NOW, schedule=daily.schedule)
    book.add(
        "Renew the parking permit",
        "Open the city's parking page and tell me whether my permit can be renewed online, "
        "and what documents I need.",
        Schedule.once(
            NOW.astimezone(system_zone()).replace(tzinfo=None) + timedelta(days=2, hours=2), zone
        ),
        now=NOW,
        profile=[parse_allow("browser_navigate,site=https://www.example.org")],
    )
    weekly = book.add(
        "Weekly disk clean-up report",
        "List the ten biggest files in ~/Downloads and suggest which can go.",
        Schedule.recurring("30 18 * * 5", "America/New_York"),
        now=made,
        profile=[parse_allow(f"fs_list_dir,folder={Path.home() / 'Downloads'}")],
        provider="local",
        model="qwen2.5:7b",
    )
    book.pause(weekly.id)
    return book


def settle(app: QApplication) -> None:
    for _ in range(5):
        app.processEvents()


def save(widget: QWidget, out: Path) -> None:
    widget.grab().save(str(out))
    print(f"wrote {out}")


def shoot(app: QApplication, out_dir: Path, dark: bool) -> None:
    from app.ui.tasks_view import TasksView
    from app.ui.theme import apply_theme

    mode = "dark" if dark else "light"
    apply_theme(app, mode)
    with tempfile.TemporaryDirectory() as home:
        book = sample_book(Path(home))
        view = TasksView(book, clock=lambda: NOW, accounts=sample_accounts(), active="work")
        view.show()
        for size, (width, height) in SIZES.items():
            view.resize(width, height)
            settle(app)
            save(view, out_dir / f"tasks-{mode}-{size}.png")
        view.resize(*SIZES["large"])
        editor = view.open_editor(None)
        editor.title.setText("Inbox digest")
        editor.prompt.setPlainText("Summarise the unread mail in my inbox, most urgent first.")
        editor.repeat.setCurrentIndex(2)
        editor.allow.setPlainText("mail_list\nfs_write_file,folder=notes")
        editor.account.setCurrentIndex(editor.account.findData("local"))
        editor.model_name.setText("qwen2.5:7b")
        editor.adjustSize()
        settle(app)
        save(editor, out_dir / f"task-new-{mode}.png")
        editor.close()
        editor = view.open_editor(view.ids()[0])  # Edit, with a mistyped custom rule
        editor.repeat.setCurrentIndex(4)
        editor.cron.setText("0 8 * * 1-5 *")
        editor.save_button.click()
        editor.adjustSize()
        settle(app)
        save(editor, out_dir / f"task-edit-{mode}.png")
        editor.close()
        view.close()
    if not dark:
        with tempfile.TemporaryDirectory() as home:
            from app.core.tasks import TaskBook

            view = TasksView(TaskBook(Path(home)), clock=lambda: NOW)
            view.show()
            view.resize(*SIZES["small"])
            settle(app)
            save(view, out_dir / "tasks-empty-light.png")
            view.close()


def shoot_questions(app: QApplication, out_dir: Path, dark: bool) -> None:
    """The whole question of a run (Review…) and the no-tray close question."""
    from app.core.approval import ApprovalRequest
    from app.core.task_approvals import Pending
    from app.ui.task_question import TaskQuestionDialog
    from app.ui.theme import apply_theme
    from app.ui.tray import KeepRunningDialog

    mode = "dark" if dark else "light"
    apply_theme(app, mode)
    request = ApprovalRequest(
        call_id="c1",
        tool="docker_remove_container",
        category="docker",
        operations=["delete"],
        arguments={"container": "web-1", "force": True},
        summary="Remove container web-1 (running) on local",
        target="Docker · local",
        reason="it would delete something",
        arguments_text='{\n  "container": "web-1",\n  "force": true\n}',
    )
    pending = Pending(
        "t1", "Nightly clean-up", request, frozenset({"review", "deny"}), lambda _decision: None
    )
    dialog = TaskQuestionDialog(pending)
    dialog.show()
    dialog.adjustSize()
    settle(app)
    save(dialog, out_dir / f"task-question-{mode}.png")
    dialog.close()
    keep = KeepRunningDialog()
    keep.show()
    keep.adjustSize()
    settle(app)
    save(keep, out_dir / f"keep-running-{mode}.png")
    keep.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    for dark in (False, True):
        shoot(app, args.out_dir, dark)
        shoot_questions(app, args.out_dir, dark)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
