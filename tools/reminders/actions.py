"""Reminder tool bodies, on the reminder book the app hands in as `ctx.service("reminders")`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import ParamSpec, TypeVar

from tools.reminders.manifest import (
    CreateRecurring,
    CreateReminder,
    ListReminders,
    ReminderRef,
    SnoozeReminder,
)
from tools.spec import ToolContext, ToolError, ToolResult
from tools.views import ReminderBookView, ReminderView

P = ParamSpec("P")
T = TypeVar("T")


def _book(ctx: ToolContext) -> ReminderBookView:
    return ctx.service("reminders")


def _guard(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    try:
        return fn(*args, **kwargs)
    except ValueError as exc:  # ReminderError is a ValueError: bad time, zone, cron, id
        raise ToolError(str(exc)) from None


def _describe(reminder: ReminderView) -> str:
    when = reminder.local_due().strftime("%a %d %b %Y %H:%M %Z")
    repeat = f" (repeats: {reminder.cron})" if reminder.cron else ""
    return f"[{reminder.id}] {when} — {reminder.message}{repeat} ({reminder.status})"


def reminders_create(args: CreateReminder, ctx: ToolContext) -> ToolResult:
    book = _book(ctx)
    if (args.at is None) == (args.in_minutes is None):
        raise ToolError("give exactly one of `at` (ISO 8601) or `in_minutes`")
    if args.in_minutes is not None:
        at = book.clock() + timedelta(minutes=args.in_minutes)
    else:
        try:
            at = datetime.fromisoformat(args.at.replace("Z", "+00:00"))  # type: ignore[union-attr]
        except ValueError:
            raise ToolError(
                f"`at` must be ISO 8601, e.g. 2026-11-22T17:00; got {args.at!r}"
            ) from None
    reminder = _guard(book.create_once, args.message, at, args.tz)
    return ToolResult(
        ok=True, content="Reminder set: " + _describe(reminder), data=reminder.to_json()
    )


def reminders_create_recurring(args: CreateRecurring, ctx: ToolContext) -> ToolResult:
    reminder = _guard(_book(ctx).create_recurring, args.message, args.cron, args.tz)
    return ToolResult(
        ok=True,
        content="Repeating reminder set, next: " + _describe(reminder),
        data=reminder.to_json(),
    )


def reminders_list(args: ListReminders, ctx: ToolContext) -> ToolResult:
    statuses = ("scheduled", "fired", "done", "cancelled") if args.include_past else ("scheduled",)
    reminders = _book(ctx).list(statuses)
    if not reminders:
        return ToolResult(ok=True, content="No reminders.", data={"reminders": []})
    return ToolResult(
        ok=True,
        content="\n".join(_describe(r) for r in reminders),
        data={"reminders": [r.to_json() for r in reminders]},
    )


def reminders_cancel(args: ReminderRef, ctx: ToolContext) -> ToolResult:
    reminder = _guard(_book(ctx).cancel, args.id)
    return ToolResult(ok=True, content="Cancelled: " + _describe(reminder), data=reminder.to_json())


def reminders_snooze(args: SnoozeReminder, ctx: ToolContext) -> ToolResult:
    reminder = _guard(_book(ctx).snooze, args.id, args.minutes)
    return ToolResult(ok=True, content="Snoozed: " + _describe(reminder), data=reminder.to_json())
