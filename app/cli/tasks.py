"""`deskhand tasks …`: scheduled tasks (add, list, pause, resume, remove, run, serve) from
the command line. Needs only the home folder; running a task needs the agent: `runner` and
`serve` are given by the caller (app.cli, through app/cli/task_run.py)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: building the parser stays light (`deskhand ask`)
    from app.core.tasks import Task, TaskBook

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

#: Runs one task now, headless, records the run, and returns (ok, answer text).
Runner = Callable[[str], tuple[bool, str]]

#: The option each TaskError field came from, to point at the bad argument.
_OPTION = {
    "at": "--at",
    "cron": "--cron",
    "zone": "--zone",
    "title": "--title",
    "prompt": "--prompt",
    "allow": "--allow",
    "id": "ID",
}


def add_parsers(sub: Any) -> None:
    tasks = sub.add_parser("tasks", help="scheduled tasks the assistant runs by itself")
    tasks_sub = tasks.add_subparsers(dest="tasks_command", required=True)
    add = tasks_sub.add_parser("add", help="schedule a task")
    add.add_argument("--title", required=True)
    add.add_argument("--prompt", required=True, help="what the assistant should do")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--at", help="once, at this ISO time (2026-05-04T08:30)")
    when.add_argument("--cron", help='repeating, e.g. "0 8 * * 1-5" (weekdays at 8:00)')
    add.add_argument("--zone", help="IANA time zone (default: this machine's)")
    add.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="TOOL[@SOURCE][,KIND=VALUE]",
        help="a tool the task may run without asking, e.g. fs_read_file, "
        '"fs_write_file,folder=/home/me/notes", "*@mcp:github" (repeatable)',
    )
    add.add_argument(
        "--provider",
        help="a provider account id from Settings → Providers (default: the active one)",
    )
    add.add_argument("--model")
    add.add_argument("--max-seconds", type=int)  # None: the task's default budget
    add.add_argument("--max-steps", type=int)
    lst = tasks_sub.add_parser("list", help="every task, its next run and last result")
    lst.add_argument("--json", action="store_true")
    for verb, text in (
        ("pause", "stop running a task until resumed"),
        ("resume", "run a paused task again from its next time"),
        ("remove", "delete a task"),
        ("run", "run a task now"),
    ):
        cmd = tasks_sub.add_parser(verb, help=text)
        cmd.add_argument("id")
    tasks_sub.add_parser(
        "serve",
        help="run reminders and scheduled tasks in the background, without the window",
    )


def run_tasks(
    args: argparse.Namespace,
    home: Path,
    *,
    runner: Runner | None = None,
    now: Callable[[], datetime] | None = None,
    book: TaskBook | None = None,
    serve: Callable[[], int] | None = None,
) -> int:
    from app.core.tasks import TaskBook, TaskBusy, TaskError

    clock = now or (lambda: datetime.now(UTC))
    book = book if book is not None else TaskBook(home)
    if args.tasks_command == "serve":
        if serve is None:
            print("deskhand tasks serve: not available here", file=sys.stderr)
            return EXIT_FAILED
        return serve()
    try:
        code = _dispatch(args, book, runner, clock)
    except TaskError as exc:
        where = _OPTION.get(exc.field, "")
        prefix = f"deskhand tasks {args.tasks_command}: " + (f"{where}: " if where else "")
        print(prefix + str(exc), file=sys.stderr)
        code = EXIT_USAGE if not isinstance(exc, TaskBusy) else EXIT_FAILED
    if book.load_error:
        print(f"deskhand: {book.load_error}", file=sys.stderr)
    return code


def _dispatch(
    args: argparse.Namespace,
    book: TaskBook,
    runner: Runner | None,
    clock: Callable[[], datetime],
) -> int:
    verb = args.tasks_command
    if verb == "add":
        return _add(args, book, clock())
    if verb == "list":
        return _list(args, book, clock())
    if verb == "pause":
        task = book.pause(args.id)
        print(f"Paused: {task.title}")
    elif verb == "resume":
        task = book.resume(args.id, now=clock())
        print(f"Resumed: {task.title}; next run {_when(book.next_run(task, clock()), task)}")
    elif verb == "remove":
        task = book.remove(args.id)
        print(f"Removed: {task.title}")
    else:
        return _run(args, book, runner, clock)
    return EXIT_OK


def _add(args: argparse.Namespace, book: TaskBook, now: datetime) -> int:
    from app.core.tasks import Budget, Schedule, parse_allow

    if args.cron is not None:
        schedule = Schedule.recurring(args.cron, args.zone)
    else:
        schedule = Schedule.once(args.at, args.zone)
    profile = [parse_allow(text) for text in args.allow]
    try:
        given = {"max_seconds": args.max_seconds, "max_steps": args.max_steps}
        budget = Budget(**{k: v for k, v in given.items() if v is not None})
    except ValueError:
        print(
            "deskhand tasks add: --max-seconds must be 10 to 21600 and --max-steps 1 to 200",
            file=sys.stderr,
        )
        return EXIT_USAGE
    task = book.add(
        args.title,
        args.prompt,
        schedule,
        now=now,
        profile=profile,
        provider=args.provider,
        model=args.model,
        budget=budget,
    )
    print(f"Added task {task.id}: {task.title}")
    print(f"  {schedule.describe()}; next run {_when(book.next_run(task, now), task)}")
    for line in book.describe_in_force(task):
        print(f"  {line}")
    return EXIT_OK


def _when(at: datetime | None, task: Task) -> str:
    if at is None:
        return "none (paused)" if task.paused else "none"
    from zoneinfo import ZoneInfo

    return at.astimezone(ZoneInfo(task.schedule.zone)).strftime("%a %Y-%m-%d %H:%M %Z")


def _row(task: Task, book: TaskBook, now: datetime) -> dict[str, Any]:
    nxt = book.next_run(task, now)
    last = task.last_run
    return {
        "id": task.id,
        "title": task.title,
        "prompt": task.prompt,
        "schedule": task.schedule.model_dump(mode="json"),
        "schedule_text": task.schedule.describe(),
        "provider": task.provider,
        "model": task.model,
        "paused": task.paused,
        "running": task.is_running(now),
        "next_run": nxt.isoformat() if nxt else None,
        "profile": [p.model_dump(mode="json") for p in task.profile],
        # what is in force: the profile minus the rules the user removed since
        "profile_text": book.describe_in_force(task),
        "budget": task.budget.model_dump(),
        "last_run": last.model_dump(mode="json") if last else None,
    }


def _list(args: argparse.Namespace, book: TaskBook, now: datetime) -> int:
    tasks = book.list()
    if args.json:
        print(json.dumps([_row(t, book, now) for t in tasks], ensure_ascii=False))
        return EXIT_OK
    if not tasks:
        print("No tasks yet: add one with `deskhand tasks add`.")
        return EXIT_OK
    from app.core.visible import visible

    for task in tasks:
        state = "paused" if task.paused else "running" if task.is_running(now) else "active"
        print(f"{task.id}  {state:<7}  {visible(task.title, keep_newlines=False)}")
        print(f"    {task.schedule.describe()}; next run {_when(book.next_run(task, now), task)}")
        last = task.last_run
        if last is not None:
            outcome = "ok" if last.ok else "failed"
            late = ", late" if last.late else ""
            first = last.summary.splitlines()[0] if last.summary else ""
            first = visible(first, keep_newlines=False)
            print(f"    last run {last.started:%Y-%m-%d %H:%M} UTC: {outcome}{late}  {first}")
    return EXIT_OK


def _run(
    args: argparse.Namespace,
    book: TaskBook,
    runner: Runner | None,
    clock: Callable[[], datetime],
) -> int:
    from app.core.tasks import TaskBusy

    task = book.get(args.id)
    if task.is_running(clock()):
        raise TaskBusy(f"“{task.title}” is still running", "id")
    if runner is None:
        print(
            "deskhand tasks run: running a task needs the agent, which is not available here",
            file=sys.stderr,
        )
        return EXIT_FAILED
    ok, answer = runner(task.id)
    from app.core.visible import visible

    print(visible(answer))
    return EXIT_OK if ok else EXIT_FAILED
