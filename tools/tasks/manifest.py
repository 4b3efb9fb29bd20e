"""Scheduled-task tools: a prompt the assistant runs by itself, once or on a schedule, with
what its runs may do without asking. Creating one grants permissions, so it always asks."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from tools.spec import DeferredParams, Operation, ToolManifest

IMPL = "tools.tasks.actions"
APPROVAL = "tools.tasks.approval"

#: A one-shot time this far in the past is still accepted (as the task book does).
PAST_TOLERANCE = timedelta(minutes=1)
ALLOW_KINDS = ("folder", "path", "site", "account", "command")


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def check_allow_line(line: str) -> None:
    """The syntax the task book reads (`TOOL[@SOURCE][,KIND=VALUE]`), checked before the
    user is asked, so a call that cannot work never reaches the approval card."""
    if not line.isprintable():
        raise ValueError(f"{line!r}: contains a line break, control or invisible character")
    head, _, cond = line.partition(",")
    if not head.partition("@")[0].strip():
        raise ValueError(f"{line!r}: name a tool or a pattern like docker_*")
    if not cond:
        return
    kind, eq, value = (part.strip() for part in cond.partition("="))
    if not eq or kind not in ALLOW_KINDS or not value:
        raise ValueError(
            f"{line!r}: after the comma write one of {', '.join(ALLOW_KINDS)} then = and a "
            "value, e.g. folder=/home/me/notes"
        )
    if kind in ("folder", "path") and not os.path.isabs(os.path.expanduser(value)):
        raise ValueError(f"{line!r}: the {kind} must be an absolute path")


class CreateTask(DeferredParams):
    title: str = Field(..., min_length=1, max_length=120, description="A short name")
    prompt: str = Field(
        ...,
        min_length=1,
        max_length=8000,
        description="What the assistant is told at each run. Write it complete: a run does "
        "not see this chat",
    )
    tz: str | None = Field(None, description="IANA time zone; default: the user's zone")
    at: str | None = Field(
        None,
        description="Run once at this time, ISO 8601 (2026-05-04T08:30); without an offset "
        "it is read in `tz`",
    )
    cron: str | None = Field(
        None,
        description="Instead of `at`, repeat: five-field cron, minute hour day month weekday, "
        "e.g. '0 8 * * 1-5' (weekdays at 08:00)",
    )
    allow: list[str] = Field(
        default_factory=list,
        max_length=20,
        description="What runs may do without asking, one entry each: "
        "TOOL[@SOURCE][,KIND=VALUE], KIND one of folder, path, site, account, command; "
        "e.g. 'docker_list_containers', 'fs_write_file,folder=/home/me/notes'. Keep it "
        "narrow: any other call waits for the user",
    )
    max_minutes: int = Field(10, ge=1, le=360, description="Time limit of one run")
    max_steps: int = Field(20, ge=1, le=200, description="Tool-call rounds of one run")

    _blank = field_validator("title", "prompt")(_not_blank)

    @field_validator("tz")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        if value:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    f"unknown time zone {value!r}; use an IANA name like Europe/Paris"
                ) from None
        return value or None

    @field_validator("at")
    @classmethod
    def _at(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(
                f"{value!r} is not an ISO time; write it like 2026-05-04T08:30"
            ) from None
        if moment.tzinfo is None:
            if "tz" not in info.data:  # the zone was refused; that error is reported
                return value
            from tools.clock import system_zone

            zone = info.data["tz"]
            moment = moment.replace(tzinfo=ZoneInfo(zone) if zone else system_zone())
        if moment < datetime.now(UTC) - PAST_TOLERANCE:
            raise ValueError(f"{value!r} is in the past")
        return value

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from croniter import croniter  # loaded when a call is checked, not with the manifest

        cron = " ".join(value.split())
        if len(cron.split()) != 5 or not croniter.is_valid(cron):
            raise ValueError(
                f"invalid cron expression {value!r}; five fields: minute hour day month "
                "weekday, e.g. '0 8 * * 1-5'"
            )
        return cron

    @field_validator("allow")
    @classmethod
    def _allow(cls, lines: list[str]) -> list[str]:
        for line in lines:
            check_allow_line(line)
        return lines

    @model_validator(mode="after")
    def _one_time(self) -> CreateTask:
        if (self.at is None) == (self.cron is None):
            raise ValueError("at/cron: give exactly one: `at` (run once) or `cron` (repeat)")
        return self


class ListTasks(DeferredParams):
    pass


class TaskRef(DeferredParams):
    id: str = Field(..., min_length=1, max_length=64, description="Task id from tasks_list")


def _tool(
    name: str, description: str, params: type[BaseModel], op: Operation, **hooks: Any
) -> ToolManifest:
    short = name.removeprefix("tasks_")
    return ToolManifest(
        name=name,
        category="tasks",
        description=description,
        params=params,
        operations=frozenset({op}),
        impl=f"{IMPL}:{name}",
        timeout=20,
        summary_line=None if op is Operation.READ else f"{APPROVAL}:summary_{short}",
        **hooks,
    )


MANIFESTS = [
    _tool(
        "tasks_create",
        "Schedule a task: a prompt the assistant runs by itself, once (`at`) or repeatedly "
        "(`cron`). `allow` lists what its runs may do without asking; anything else waits "
        "for the user. Always asks the user, showing the prompt and every permission. Tools "
        "cannot change a task: to change one, the user edits it in the Tasks window.",
        CreateTask,
        Operation.CREATE,
        preview=f"{APPROVAL}:preview_create",
        escalate=f"{APPROVAL}:always_ask",
    ),
    _tool(
        "tasks_list",
        "List scheduled tasks with their id, next run and last result.",
        ListTasks,
        Operation.READ,
    ),
    _tool(
        "tasks_remove",
        "Delete a scheduled task and the permissions it was given.",
        TaskRef,
        Operation.DELETE,
        escalate=f"{APPROVAL}:in_a_run",
    ),
    _tool(
        "tasks_pause",
        "Pause a scheduled task; the user resumes it in the Tasks window.",
        TaskRef,
        Operation.UPDATE,
        escalate=f"{APPROVAL}:in_a_run",
    ),
]
