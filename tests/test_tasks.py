"""Scheduled tasks: schedules in zones and across DST, catch-up after a gap, no overlapping
runs, the tasks file (round trip, corruption) and `deskhand tasks` in-process. Time is
passed explicitly: no sleeps."""

from __future__ import annotations

import argparse
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.cli.tasks import add_parsers, run_tasks
from app.core.rules import Matcher
from app.core.tasks import (
    STALE_GRACE,
    TASKS_FILE,
    Budget,
    ProfileEntry,
    Schedule,
    TaskBook,
    TaskBusy,
    TaskError,
    describe_profile,
    first_lines,
    parse_allow,
)

PARIS = "Europe/Paris"
#: Friday 27 March 2026, 06:00 UTC; Paris moves to summer time on Sunday 29 March.
FRIDAY = datetime(2026, 3, 27, 6, 0, tzinfo=UTC)


@pytest.fixture
def book(tmp_path: Path) -> TaskBook:
    return TaskBook(tmp_path)


def weekday_task(book: TaskBook, now: datetime = FRIDAY, **kw):
    return book.add(
        "Morning brief", "Summarise my day", Schedule.recurring("0 8 * * 1-5", PARIS), now=now, **kw
    )


def finish(book: TaskBook, task_id: str, run_id: str, now: datetime, answer: str = "done"):
    return book.record_run(task_id, run_id, now=now, ok=True, answer=answer)


# ---- schedules ----------------------------------------------------------------------------


def test_cron_keeps_local_time_across_dst(book):
    task = weekday_task(book)
    assert task.next_due == datetime(2026, 3, 27, 7, 0, tzinfo=UTC)  # 08:00 CET
    assert book.due(FRIDAY) == []
    at = FRIDAY + timedelta(hours=1)
    [due] = book.due(at)
    assert (due.task.id, due.planned, due.late, due.missed) == (task.id, task.next_due, False, 0)
    ticket = book.start_run(task.id, now=at, planned=due.planned)
    finish(book, task.id, ticket.run_id, at + timedelta(minutes=1))
    after = book.get(task.id)
    # Monday 08:00 is now CEST: 06:00 UTC, skipping the weekend
    assert after.next_due == datetime(2026, 3, 30, 6, 0, tzinfo=UTC)
    assert book.next_run(after, at) == after.next_due
    assert book.due(datetime(2026, 3, 30, 5, 59, tzinfo=UTC)) == []


def test_zones_change_the_instant(book):
    paris = weekday_task(book)
    york = book.add("NY", "p", Schedule.recurring("0 8 * * 1-5", "America/New_York"), now=FRIDAY)
    assert york.next_due is not None and paris.next_due is not None
    assert york.next_due - paris.next_due == timedelta(hours=5)  # NY is already on DST
    assert book.next_wake(FRIDAY) == paris.next_due


def test_one_shot_runs_once_at_its_time(book):
    task = book.add(
        "Prune", "prune stopped containers", Schedule.once("2026-03-27T23:00", PARIS), now=FRIDAY
    )
    assert task.next_due == datetime(2026, 3, 27, 22, 0, tzinfo=UTC)
    assert book.due(datetime(2026, 3, 27, 21, 59, tzinfo=UTC)) == []
    at = datetime(2026, 3, 27, 22, 0, 30, tzinfo=UTC)
    [due] = book.due(at)
    assert not due.late
    ticket = book.start_run(task.id, now=at, planned=due.planned)
    assert book.get(task.id).next_due is None
    record = finish(book, task.id, ticket.run_id, at + timedelta(seconds=40), "Removed 3.\nOK")
    assert record is not None and record.ok and record.summary == "Removed 3.\nOK"
    done = book.get(task.id)
    assert done.running is None and done.last_run == record
    assert book.due(at + timedelta(days=3)) == []
    assert book.next_run(done, at) is None


def test_an_offset_in_the_time_wins_over_the_zone():
    schedule = Schedule.once("2026-05-04T08:30+00:00", PARIS)
    assert schedule.at is not None
    assert schedule.at.astimezone(UTC) == datetime(2026, 5, 4, 8, 30, tzinfo=UTC)
    assert schedule.zone == PARIS
    assert schedule.describe() == "once at 2026-05-04 10:30 Europe/Paris"


# ---- catch-up and overlap -----------------------------------------------------------------


def test_a_long_gap_gives_one_late_coalesced_run(tmp_path):
    book = TaskBook(tmp_path)
    task = book.add("Hourly", "check", Schedule.recurring("0 * * * *", "UTC"), now=FRIDAY)
    back = FRIDAY + timedelta(days=3, minutes=30)  # the machine slept three days
    restarted = TaskBook(tmp_path)  # and the app was restarted
    [due] = restarted.due(back)
    assert due.late and due.planned == FRIDAY + timedelta(hours=1)
    assert due.missed == 3 * 24 - 1
    ticket = restarted.start_run(task.id, now=back, planned=due.planned)
    assert ticket.late and ticket.missed == due.missed
    assert restarted.due(back) == []  # running
    record = finish(restarted, task.id, ticket.run_id, back + timedelta(minutes=2))
    assert record is not None and record.late and record.missed == due.missed
    assert restarted.due(back + timedelta(minutes=2)) == []  # no second catch-up run
    assert restarted.get(task.id).next_due == FRIDAY + timedelta(days=3, hours=1)


def test_a_run_never_overlaps_the_previous_one(book):
    task = weekday_task(book)
    at = FRIDAY + timedelta(minutes=59)
    by_hand = book.start_run(task.id, now=at)  # "Run now", a minute before its time
    assert by_hand.planned is None and book.get(task.id).next_due == task.next_due
    later = at + timedelta(minutes=5)
    assert book.due(later) == []  # its time came while it runs: it waits
    with pytest.raises(TaskBusy):
        book.start_run(task.id, now=later)
    finish(book, task.id, by_hand.run_id, later)
    [due] = book.due(later)  # then runs once, late
    assert due.planned == task.next_due and due.late
    ticket = book.start_run(task.id, now=later, planned=due.planned)
    with pytest.raises(TaskBusy):
        book.start_run(task.id, now=later, planned=due.planned)
    assert ticket.run_id != by_hand.run_id


def test_a_stale_run_stops_blocking_and_is_recorded(book):
    task = weekday_task(book, budget=Budget(max_seconds=60))
    at = FRIDAY + timedelta(hours=1)
    first = book.start_run(task.id, now=at, planned=book.due(at)[0].planned)
    monday = datetime(2026, 3, 30, 6, 0, tzinfo=UTC)
    assert book.get(task.id).is_running(at + timedelta(seconds=60) + STALE_GRACE)
    [due] = book.due(monday)  # the app died during the first run
    second = book.start_run(task.id, now=monday, planned=due.planned)
    history = book.get(task.id).history
    assert [r.run_id for r in history] == [first.run_id]
    assert not history[0].ok and "did not finish" in history[0].summary
    assert finish(book, task.id, first.run_id, monday) is None  # superseded: dropped
    assert book.get(task.id).running is not None
    assert finish(book, task.id, second.run_id, monday) is not None


def test_paused_tasks_do_not_run_and_resume_skips_the_missed_runs(book):
    task = weekday_task(book)
    book.pause(task.id)
    monday = datetime(2026, 3, 30, 9, 0, tzinfo=UTC)
    assert book.due(monday) == []
    assert book.next_run(book.get(task.id), monday) is None
    resumed = book.resume(task.id, now=monday)
    assert not resumed.paused
    assert resumed.next_due == datetime(2026, 3, 31, 6, 0, tzinfo=UTC)
    assert book.due(monday) == []
    with pytest.raises(TaskError):
        book.start_run(task.id, now=monday, planned=task.next_due)  # no longer due


# ---- the file -----------------------------------------------------------------------------


def test_tasks_round_trip_through_the_file(tmp_path):
    book = TaskBook(tmp_path)
    profile = [
        parse_allow("fs_read_file"),
        parse_allow(f"fs_write_file,folder={tmp_path / 'notes'}"),
        parse_allow("*@mcp:github"),
    ]
    task = weekday_task(
        book, profile=profile, provider="openai", model="m1", budget=Budget(max_steps=5)
    )
    path = tmp_path / TASKS_FILE
    if os.name == "posix":
        assert path.stat().st_mode & 0o777 == 0o600
    again = TaskBook(tmp_path).get(task.id)
    assert again == task
    assert again.profile[1].matcher == Matcher(kind="folder", value=str(tmp_path / "notes"))
    changed = book.update(
        task.id, now=FRIDAY, title="Brief", schedule=Schedule.recurring("30 7 * * *", PARIS)
    )
    assert changed.next_due == datetime(2026, 3, 27, 6, 30, tzinfo=UTC)
    assert TaskBook(tmp_path).get(task.id).title == "Brief"
    assert book.remove(task.id).id == task.id
    assert TaskBook(tmp_path).list() == []
    with pytest.raises(TaskError, match="no task"):
        book.get(task.id)


@pytest.mark.parametrize("content", [b"{not json", b'{"tasks": [{"title": 3}]}', b"\xff\xfe"])
def test_a_corrupt_file_is_kept_aside_and_reported(tmp_path, content):
    (tmp_path / TASKS_FILE).write_bytes(content)
    book = TaskBook(tmp_path)
    assert book.list() == []
    assert book.load_error is not None and "unreadable" in book.load_error
    [kept] = tmp_path.glob(f"{TASKS_FILE}.unreadable-*")
    assert kept.read_bytes() == content and str(kept) in book.load_error
    task = weekday_task(book)  # and the book works on
    assert [t.id for t in TaskBook(tmp_path).list()] == [task.id]


# ---- input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "field", "words"),
    [
        (lambda: Schedule.recurring("0 25 * * *", PARIS), "cron", "invalid cron"),
        (lambda: Schedule.recurring("* * * * * *", PARIS), "cron", "five fields"),
        (lambda: Schedule.recurring("0 8 * * *", "Mars/Olympus"), "zone", "unknown time zone"),
        (lambda: Schedule.once("tomorrow at 8", PARIS), "at", "not an ISO time"),
        (lambda: parse_allow("fs_write_file,folder=notes"), "allow", "absolute"),
        (lambda: parse_allow("fs_write_file,colour=red"), "allow", "after the comma"),
        (lambda: parse_allow("@mcp:x"), "allow", "name a tool"),
    ],
)
def test_bad_input_names_its_field(make, field, words):
    with pytest.raises(TaskError, match=words) as info:
        make()
    assert info.value.field == field


def test_a_time_in_the_past_and_empty_text_are_refused(book):
    past = Schedule.once("2026-03-27T06:00", PARIS)  # 05:00 UTC
    with pytest.raises(TaskError, match="in the past") as info:
        book.add("t", "p", past, now=FRIDAY)
    assert info.value.field == "at"
    with pytest.raises(TaskError) as info:
        book.add(" ", "p", Schedule.recurring("0 8 * * *", PARIS), now=FRIDAY)
    assert info.value.field == "title"
    assert book.list() == []


def test_profile_in_plain_words():
    profile = [
        ProfileEntry(tool="fs_read_file"),
        parse_allow("shell_run,command=git status,folder=/home/me/proj"),
        parse_allow("*@mcp:github"),
    ]
    assert describe_profile(profile) == [
        "May run fs_read_file with any arguments without asking",
        "May run shell_run for commands starting with “git status” in /home/me/proj without "
        "asking",
        "May run every tool from mcp:github with any arguments without asking",
        "Any other call waits for your answer; your deny rules still win",
    ]
    assert describe_profile([])[0] == "May run no tool that needs approval without asking"


def test_first_lines_keep_the_start_of_the_answer():
    assert first_lines("\n\nOne\n\nTwo\n") == "One\nTwo"
    assert first_lines("\n".join(str(i) for i in range(9))) == "0\n1\n2\n3\n4\n…"
    assert len(first_lines("x" * 5000)) == 600


# ---- the command line, in-process ---------------------------------------------------------


def cli(home: Path, *argv: str, now: datetime = FRIDAY, runner=None) -> int:
    parser = argparse.ArgumentParser(prog="deskhand")
    add_parsers(parser.add_subparsers(dest="command"))
    return run_tasks(parser.parse_args(["tasks", *argv]), home, runner=runner, now=lambda: now)


def test_cli_add_list_pause_resume_remove(tmp_path, capsys):
    code = cli(
        tmp_path,
        "add", "--title", "Brief", "--prompt", "Summarise my day",
        "--cron", "0 8 * * 1-5", "--zone", PARIS, "--allow", "calendar_*",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "next run Fri 2026-03-27 08:00 CET" in out
    assert "May run calendar_* with any arguments without asking" in out
    [task] = TaskBook(tmp_path).list()
    assert cli(tmp_path, "list") == 0
    out = capsys.readouterr().out
    assert f"{task.id}  active   Brief" in out and "cron “0 8 * * 1-5” in Europe/Paris" in out
    assert cli(tmp_path, "pause", task.id) == 0
    capsys.readouterr()
    assert cli(tmp_path, "list", "--json") == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["paused"] and row["next_run"] is None and row["profile"][0]["tool"] == "calendar_*"
    assert cli(tmp_path, "resume", task.id) == 0
    assert "Resumed: Brief; next run Fri 2026-03-27 08:00 CET" in capsys.readouterr().out
    assert cli(tmp_path, "remove", task.id) == 0
    assert TaskBook(tmp_path).list() == []
    assert cli(tmp_path, "list") == 0
    assert "No tasks yet" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--cron", "0 8 * * 9"], "--cron: invalid cron expression '0 8 * * 9'"),
        (["--cron", "0 8 * * *", "--zone", "Paris"], "--zone: unknown time zone 'Paris'"),
        (["--at", "2026-03-26T08:00", "--zone", PARIS], "--at: 2026-03-26T08:00:00+01:00 is in"),
        (["--at", "next friday"], "--at: 'next friday' is not an ISO time"),
        (["--cron", "0 8 * * *", "--allow", "x,site"], "--allow: 'x,site': after the comma"),
    ],
)
def test_cli_points_at_the_bad_argument(tmp_path, capsys, args, expected):
    code = cli(tmp_path, "add", "--title", "T", "--prompt", "P", *args)
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("deskhand tasks add: " + expected)
    assert TaskBook(tmp_path).list() == []


def test_cli_run(tmp_path, capsys):
    """The CLI's part: errors and the printed answer; the run itself is TaskRunner's
    (tests/test_task_runner.py runs `deskhand tasks run` end to end)."""
    book = TaskBook(tmp_path)
    task = weekday_task(book)
    assert cli(tmp_path, "run", "nope") == 2
    assert "ID: there is no task 'nope'" in capsys.readouterr().err
    assert cli(tmp_path, "run", task.id) == 1  # nothing to run it with
    assert "needs the agent" in capsys.readouterr().err

    seen = []

    def runner(task_id):
        seen.append(task_id)
        return True, "Three meetings.\nNo reviews waiting."

    assert cli(tmp_path, "run", task.id, runner=runner) == 0
    assert seen == [task.id]
    assert "Three meetings." in capsys.readouterr().out
    assert cli(tmp_path, "run", task.id, runner=lambda _id: (False, "model unreachable")) == 1
    book.start_run(task.id, now=FRIDAY)
    assert cli(tmp_path, "run", task.id, runner=runner) == 1
    assert "is still running" in capsys.readouterr().err
    assert seen == [task.id]


def test_updates_are_validated(book):
    task = weekday_task(book)
    with pytest.raises(TaskError) as info:
        book.update(task.id, now=FRIDAY, budget={"max_seconds": 1})
    assert info.value.field == "budget"
    with pytest.raises(TaskError, match="cannot change id"):
        book.update(task.id, now=FRIDAY, id="other")
    changed = book.update(task.id, now=FRIDAY, profile=[{"tool": "fs_read_file"}])
    assert changed.profile == [ProfileEntry(tool="fs_read_file")]
    assert book.get(task.id) == changed


def test_an_unreachable_file_is_an_error_not_a_wipe(tmp_path, capsys):
    (tmp_path / TASKS_FILE).mkdir()  # cannot be read as a file
    book = TaskBook(tmp_path)
    with pytest.raises(TaskError, match="cannot read the tasks file"):
        book.list()
    assert cli(tmp_path, "list") == 2
    assert "cannot read the tasks file" in capsys.readouterr().err
    assert (tmp_path / TASKS_FILE).is_dir() and book.load_error is None


def test_cli_list_shows_the_last_run_as_plain_text(tmp_path, capsys):
    book = TaskBook(tmp_path)
    task = book.add("Brief\x1b[31m", "p", Schedule.recurring("0 8 * * 1-5", PARIS), now=FRIDAY)
    at = FRIDAY + timedelta(hours=3)
    ticket = book.start_run(task.id, now=at, planned=book.due(at)[0].planned)
    assert cli(tmp_path, "list", now=at) == 0
    assert f"{task.id}  running  Brief⟨U+001B⟩[31m" in capsys.readouterr().out
    book.record_run(task.id, ticket.run_id, now=at, ok=False, answer="quota\x07 hit\nmore")
    assert cli(tmp_path, "list", now=at) == 0
    out = capsys.readouterr().out
    assert "last run 2026-03-27 09:00 UTC: failed, late  quota⟨U+0007⟩ hit" in out
    assert "next run Mon 2026-03-30 08:00 CEST" in out


def test_cli_list_shows_the_profile_in_force(tmp_path, capsys):
    """A profile rule the user removed (Settings → Rules) is not listed as a permission."""
    from app.core.rules import RuleBook

    rules = RuleBook(tmp_path / "rules.json")
    book = TaskBook(tmp_path, rules=rules)
    task = weekday_task(book, profile=[parse_allow("fs_read_file"), parse_allow("docker_*")])
    [read_rule, _docker] = rules.for_task(task.id)
    rules.remove(read_rule.id)
    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["tasks", "list", "--json"])
    assert run_tasks(args, tmp_path, now=lambda: FRIDAY, book=book) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["profile_text"][0] == "May run docker_* with any arguments without asking"
    assert not any("fs_read_file" in line for line in row["profile_text"])
