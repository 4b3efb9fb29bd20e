"""Reminder tools: one-shot and recurring reminders that pop up as notifications."""

from __future__ import annotations

from pydantic import BaseModel, Field

from tools.spec import DeferredParams, Operation, ToolManifest

IMPL = "tools.reminders.actions"
APPROVAL = "tools.reminders.approval"


class CreateReminder(DeferredParams):
    message: str = Field(..., min_length=1, max_length=500, description="What to remind about")
    at: str | None = Field(
        None,
        description="When, ISO 8601 (e.g. 2026-11-22T17:00 or with an offset/Z); "
        "without an offset it is read in `tz`",
    )
    in_minutes: int | None = Field(
        None, ge=1, le=525_600, description="Instead of `at`: this many minutes from now"
    )
    tz: str | None = Field(None, description="IANA time zone; default: the user's zone")


class CreateRecurring(DeferredParams):
    message: str = Field(..., min_length=1, max_length=500)
    cron: str = Field(
        ..., description="Five-field cron: minute hour day month weekday, e.g. '15 9 * * 1-5'"
    )
    tz: str | None = Field(None, description="IANA time zone; default: the user's zone")


class ListReminders(DeferredParams):
    include_past: bool = Field(False, description="Also fired, done and cancelled ones")


class ReminderRef(DeferredParams):
    id: str = Field(..., description="Reminder id from reminders_list")


class SnoozeReminder(ReminderRef):
    minutes: int = Field(10, ge=1, le=10_080)


def _tool(name: str, description: str, params: type[BaseModel], op: Operation) -> ToolManifest:
    short = name.removeprefix("reminders_")
    return ToolManifest(
        name=name,
        category="reminders",
        description=description,
        params=params,
        operations=frozenset({op}),
        impl=f"{IMPL}:{name}",
        timeout=20,
        summary_line=None if op is Operation.READ else f"{APPROVAL}:summary_{short}",
    )


MANIFESTS = [
    _tool(
        "reminders_create",
        "Create a one-time reminder at a time (ISO 8601) or in N minutes; it pops up on screen.",
        CreateReminder,
        Operation.CREATE,
    ),
    _tool(
        "reminders_create_recurring",
        "Create a repeating reminder from a cron expression in a time zone (weekdays at 9:15…).",
        CreateRecurring,
        Operation.CREATE,
    ),
    _tool(
        "reminders_list",
        "List upcoming reminders with their next time in the user's zone.",
        ListReminders,
        Operation.READ,
    ),
    _tool("reminders_cancel", "Cancel a reminder.", ReminderRef, Operation.DELETE),
    _tool(
        "reminders_snooze",
        "Show a reminder again in N minutes.",
        SnoozeReminder,
        Operation.UPDATE,
    ),
]
