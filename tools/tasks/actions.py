"""Task tool bodies, on the task book the app hands in as `ctx.service("tasks")`.

No tool edits a task's prompt or profile: a model must not widen what a task may do.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

from tools.spec import ToolContext, ToolError, ToolResult
from tools.summary_text import clean, quoted
from tools.tasks.approval import draft, moment_words, schedule_words, task_api
from tools.tasks.manifest import CreateTask, ListTasks, TaskRef
from tools.views import TaskBookView, TaskView

#: How much of a run's answer the list shows: earlier answers are data, kept short.
LAST_RESULT_CHARS = 100
P = ParamSpec("P")
T = TypeVar("T")


def _book(ctx: ToolContext) -> TaskBookView:
    return ctx.service("tasks")


def _guard(ctx: ToolContext, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """TaskError (bad input, no such task) becomes a ToolError naming the argument."""
    api = task_api(_book(ctx))
    try:
        return fn(*args, **kwargs)
    except api.TaskError as exc:
        raise ToolError(f"{exc.field or 'arguments'}: {exc}") from None


def _next(book: TaskBookView, task: TaskView, now: datetime) -> str:
    if task.paused:
        return "paused"
    when = book.next_run(task, now)
    if when is None:
        return "no run left"
    return f"next run {moment_words(when, task.schedule.zone, now)}"


def _last(task: TaskView, now: datetime) -> str | None:
    record = task.last_run
    if record is None:
        return None
    first = next((line for line in record.summary.splitlines() if line.strip()), "")
    when = moment_words(record.started, task.schedule.zone, now)
    said = f" — {quoted(first, LAST_RESULT_CHARS)}" if first else ""
    return f"last run {when}: {'ok' if record.ok else 'failed'}{said}"


def _describe(book: TaskBookView, task: TaskView, now: datetime) -> str:
    head = f"[{task.id}] {quoted(task.title, 80)} — {schedule_words(task.schedule, now)}"
    lines = [f"{head}; {_next(book, task, now)}"]
    if task.is_running(now):
        lines.append("    running now")
    last = _last(task, now)
    if last:
        lines.append(f"    {last}")
    return "\n".join(lines)


def _data(book: TaskBookView, task: TaskView, now: datetime) -> dict[str, Any]:
    when = book.next_run(task, now)
    record = task.last_run
    return {
        "id": task.id,
        "title": task.title,
        "schedule": schedule_words(task.schedule, now),
        "next_run": when.isoformat() if when else None,
        "paused": task.paused,
        "last_ok": record.ok if record else None,
        "last_result": clean(record.summary, LAST_RESULT_CHARS) if record else None,
        "allows": book.describe_in_force(task),
    }


def tasks_create(args: CreateTask, ctx: ToolContext) -> ToolResult:
    book = _book(ctx)
    plan = draft(args, ctx)  # the same reading the approval card showed
    task = _guard(
        ctx,
        book.add,
        args.title,
        args.prompt,
        plan.schedule,
        now=datetime.now(UTC),
        profile=plan.profile,
        budget=plan.budget,
    )
    now = datetime.now(UTC)
    return ToolResult(
        ok=True,
        content="Task scheduled: " + _describe(book, task, now),
        data=_data(book, task, now),
    )


def tasks_list(args: ListTasks, ctx: ToolContext) -> ToolResult:
    book = _book(ctx)
    tasks = _guard(ctx, book.list)
    if not tasks:
        return ToolResult(ok=True, content="No scheduled tasks.", data={"tasks": []})
    now = datetime.now(UTC)
    return ToolResult(
        ok=True,
        content="\n".join(_describe(book, t, now) for t in tasks),
        data={"tasks": [_data(book, t, now) for t in tasks]},
    )


def tasks_remove(args: TaskRef, ctx: ToolContext) -> ToolResult:
    task = _guard(ctx, _book(ctx).remove, args.id)
    return ToolResult(
        ok=True,
        content=f"Removed the task {quoted(task.title, 80)} and its permissions.",
        data={"id": task.id},
    )


def tasks_pause(args: TaskRef, ctx: ToolContext) -> ToolResult:
    task = _guard(ctx, _book(ctx).pause, args.id)
    return ToolResult(
        ok=True,
        content=f"Paused the task {quoted(task.title, 80)}; the user resumes it in the Tasks "
        "window.",
        data={"id": task.id, "paused": True},
    )
