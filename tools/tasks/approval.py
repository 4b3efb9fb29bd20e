"""Approval hooks of the task tools, and the one reading of a `tasks_create` call that the
approval card and the tool body share (`draft`), so the card shows what will be created.

Creating a task is a grant of permissions that later runs use unattended: `always_ask`
makes every call ask, never covered by a rule or `--yes`. The card names the schedule in
plain words, every profile line, and calls out broad ones ("may run EVERY tool").

Tools may not import the app: the task model (Schedule, Budget, parse_allow,
describe_profile, TaskError) is taken from the module of the book the app hands in as
`ctx.service("tasks")`. Hooks read only that file and the registry; they change nothing.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from types import ModuleType
from typing import Any
from zoneinfo import ZoneInfo

from tools.reminders.approval import day_words
from tools.spec import Escalation, Operation, ToolContext, ToolError
from tools.summary_text import clean, quoted
from tools.views import ScheduleView, TaskBookView, TaskView

BUILTIN = "builtin"
ALWAYS_ASK = (
    "a task runs by itself later, and what it may do without asking is a permission you "
    "give now; no rule and no --yes can give it for you"
)
IN_A_RUN = (
    "a scheduled run is asking to change your tasks while you may be away; only you can "
    "change, pause or remove a task, whatever its permissions say"
)
#: Set in a scheduled run's tool session notes (by the task runner) to the task's id.
TASK_RUN_NOTE = "scheduled_task_run"
#: Tools that run commands or code of the caller's choosing.
SHELL_TOOLS = ("shell_run", "shell_code", "shell_start", "shell_send")
#: Programs that run whatever program or code they are given: a command rule starting
#: with one of them is as broad as any command.
RUN_ANYTHING = frozenset(
    {
        *("bash", "sh", "zsh", "dash", "ksh", "fish", "busybox", "cmd", "pwsh", "powershell"),
        *("env", "xargs", "sudo", "su", "doas", "nohup", "nice", "timeout", "stdbuf", "time"),
        *("command", "exec", "eval", "python", "python3", "node", "nodejs", "deno", "bun"),
        *("perl", "ruby", "php", "lua", "npx", "uv", "uvx", "pipx", "osascript"),
    }
)
#: Names unlike each other: a pattern matching all of them matches every tool.
_PROBES = ("a", "z9", "fs_delete", "shell_run", "mcp__server__tool")
_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


def task_api(book: TaskBookView) -> ModuleType:
    """The module defining the app's task book: its model and its own parsing."""
    return sys.modules[type(book).__module__]


def always_ask(args: Any, ctx: ToolContext) -> Escalation:
    """Every tasks_create call asks a person; nothing about it may fail or vary."""
    return Escalation(ALWAYS_ASK, never_covered=True)


def in_a_run(args: Any, ctx: ToolContext) -> Escalation | None:
    """A task tool that changes tasks asks a person when a scheduled run calls it: a run
    must not pause, remove (or, with tasks_create, add) tasks by itself, whatever profile
    it has — with `*` it could otherwise stop the task that watches it."""
    notes = getattr(ctx.session, "notes", None) or {}
    if notes.get(TASK_RUN_NOTE):
        return Escalation(IN_A_RUN, never_covered=True)
    return None


# ---- reading a tasks_create call -----------------------------------------------------------


@dataclass(frozen=True)
class Draft:
    """A tasks_create call as the task book reads it, before anything is created."""

    schedule: Any
    profile: list[Any]
    budget: Any
    now: datetime
    first_run: datetime | None


def draft(args: Any, ctx: ToolContext) -> Draft:
    """Schedule, profile and budget through the app's own parsing; a ToolError naming the
    argument at fault when one is refused."""
    api = task_api(ctx.service("tasks"))
    now = datetime.now(UTC)
    try:
        if args.cron is not None:
            schedule = api.Schedule.recurring(args.cron, args.tz)
        else:
            schedule = api.Schedule.once(args.at, args.tz)
        profile = [api.parse_allow(line) for line in args.allow]
    except api.TaskError as exc:
        raise ToolError(f"{exc.field or 'arguments'}: {exc}") from None
    budget = api.Budget(max_seconds=args.max_minutes * 60, max_steps=args.max_steps)
    return Draft(schedule, profile, budget, now, schedule.first_after(now))


# ---- a schedule in plain words -------------------------------------------------------------


def _weekdays(field: str) -> set[int] | None:
    """Cron weekdays ("1-5", "0,6", "3") as numbers, Sunday 0; None for other forms."""
    days: set[int] = set()
    for part in field.split(","):
        m = re.fullmatch(r"([0-7])(?:-([0-7]))?", part)
        if m is None:
            return None
        first, last = int(m[1]), int(m[2] or m[1])
        if last < first:
            return None
        days |= {d % 7 for d in range(first, last + 1)}
    return days


def _day_list(days: set[int]) -> str:
    if days == {1, 2, 3, 4, 5}:
        return "every weekday"
    names = [_DAYS[d] for d in sorted(days, key=lambda d: (d == 0, d))]  # Monday first
    if len(names) == 1:
        return f"every {names[0]}"
    return "every " + ", ".join(names[:-1]) + " and " + names[-1]


def cron_words(cron: str) -> str:
    """Common schedules in words ("every weekday at 08:00"); others as written,
    named as a cron schedule."""
    fields = cron.split()
    fallback = f"on the cron schedule {quoted(cron, 40)} (minute hour day month weekday)"
    if len(fields) != 5:
        return fallback
    minute, hour, dom, month, dow = fields
    if month != "*":
        return fallback
    if (hour, dom, dow) == ("*", "*", "*"):
        if minute == "*":
            return "every minute"
        if m := re.fullmatch(r"\*/(\d+)", minute):
            return "every minute" if int(m[1]) == 1 else f"every {int(m[1])} minutes"
        if minute.isdigit():
            return f"every hour at {int(minute):02d} minutes past"
        return fallback
    if not (minute.isdigit() and hour.isdigit()):
        return fallback
    at = f"at {int(hour):02d}:{int(minute):02d}"
    if dom == "*" and dow == "*":
        return f"every day {at}"
    if dom == "*":
        days = _weekdays(dow)
        return f"{_day_list(days)} {at}" if days else fallback
    if dow == "*" and dom.isdigit():
        return f"on day {int(dom)} of every month {at}"
    return fallback


def moment_words(moment: datetime, zone: str, now: datetime) -> str:
    """A time read in the task's zone: "08:00 tomorrow", "08:00 on Mon 30 Mar"."""
    tz = ZoneInfo(zone)
    local = moment.astimezone(tz)
    return f"{local:%H:%M} {day_words(local.date(), now.astimezone(tz).date())}"


def schedule_words(schedule: ScheduleView, now: datetime) -> str:
    """In words with its zone: "every weekday at 08:00 (Europe/Berlin)"."""
    if schedule.cron is not None:
        return f"{cron_words(schedule.cron)} ({schedule.zone})"
    if schedule.at is None:  # not made by Schedule.once/recurring
        return f"never ({schedule.zone})"
    return f"once, at {moment_words(schedule.at, schedule.zone, now)} ({schedule.zone})"


# ---- a permission profile in plain words ----------------------------------------------------


def _every(pattern: str) -> bool:
    return all(fnmatchcase(name, pattern) for name in _PROBES)


def _broad_command(entry: Any) -> bool:
    words = entry.matcher.value.split() if entry.matcher.kind == "command" else []
    return entry.matcher.kind == "command" and (not words or words[0] in RUN_ANYTHING)


def _any_shell(entry: Any) -> bool:
    return (
        entry.matcher.kind == "any"
        and fnmatchcase(BUILTIN, entry.source)
        and any(fnmatchcase(name, entry.tool) for name in SHELL_TOOLS)
    )


def _every_tool(entry: Any) -> bool:
    return entry.matcher.kind == "any" and _every(entry.tool)


def _matching(entry: Any, registry: Any) -> list[Any]:
    """The tools known now that the entry's tool and source patterns match."""
    if registry is None:
        return []
    return [
        m
        for m in registry.manifests()
        if fnmatchcase(m.name, entry.tool)
        and fnmatchcase(registry.source_of(m.name).id, entry.source)
    ]


def entry_warnings(entry: Any, registry: Any) -> list[str]:
    """What a profile line lets through that the user must not miss, in plain words."""
    if _every_tool(entry):
        where = "" if entry.source == BUILTIN else f" from {entry.source}"
        if entry.source == "*":
            where = " from every source (Deskhand's own, MCP servers, tool packs)"
        return [
            f"That is EVERY tool{where}: its runs may run commands, change and delete files "
            "and send messages, all without asking you"
        ]
    if _any_shell(entry):
        return ["That means ANY command or code on your computer, run without asking you"]
    if _broad_command(entry):
        return [
            f"Commands starting with {quoted(entry.matcher.value, 40)} can run any program: "
            "as broad as any command"
        ]
    found = _matching(entry, registry)
    notes = []
    if any(ch in entry.tool for ch in "*?["):
        names = ", ".join(m.name for m in found[:6]) + (", …" if len(found) > 6 else "")
        count = f"{len(found)} tools now ({names})" if found else "no tool now"
        notes.append(f"{entry.tool} matches {count}, and any added later that fit")
    risky = [m.name for m in found if m.operations & {Operation.EXECUTE, Operation.DELETE}]
    if risky and entry.matcher.kind == "any":
        listed = ", ".join(risky[:6]) + (", …" if len(risky) > 6 else "")
        notes.append(f"Including tools that run or delete things, with any arguments: {listed}")
    return notes


_SHORT = {
    "folder": "in one folder",
    "path": "on some paths",
    "site": "on one site",
    "account": "for one account",
    "command": "for some commands",
}


def _label(entry: Any, short: bool = False) -> str:
    where = "" if entry.source == BUILTIN else f"@{entry.source}"
    kind = entry.matcher.kind
    what = "" if kind == "any" else f" {_SHORT[kind] if short else entry.matcher.describe()}"
    return f"{entry.tool}{where}{what}"


def profile_clause(profile: list[Any]) -> str:
    """The profile in a few words, the broadest grant first."""
    if not profile:
        return "may run nothing without asking"
    if any(_every_tool(e) for e in profile):
        return "may run EVERY tool without asking"
    if any(_any_shell(e) for e in profile):
        return "may run ANY command on your computer without asking"
    if any(_broad_command(e) for e in profile):
        return "may run any program without asking"
    names = ", ".join(_label(e) for e in profile)
    if len(names) > 80:
        names = ", ".join(_label(e, short=True) for e in profile)
    return f"may run {names} without asking"


def profile_lines(api: ModuleType, profile: list[Any], registry: Any) -> list[str]:
    """Every profile line as the task book words it, each with its warnings."""
    lines = []
    described = api.describe_profile(profile)
    for i, text in enumerate(described):
        lines.append(f"- {text}")
        if i < len(profile):
            lines += [f"  ⚠ {note}" for note in entry_warnings(profile[i], registry)]
    return lines


# ---- the hooks --------------------------------------------------------------------------------


def summary_create(args: Any, ctx: ToolContext) -> str:
    head = f"Schedule the task {quoted(args.title, 40)}"
    try:
        plan = draft(args, ctx)
    except ToolError as exc:
        return f"{head} (this call will fail: {exc})"
    when = schedule_words(plan.schedule, plan.now)
    if plan.schedule.cron is not None and plan.first_run is not None:
        when += f", first run {moment_words(plan.first_run, plan.schedule.zone, plan.now)}"
    what = profile_clause(plan.profile)
    # the card cuts at 200 characters: the permissions must never be the part cut
    for line in (
        f"{head}: {when} · {what} · anything else waits for you",
        f"{head}: {when} · {what}",
    ):
        if len(line) <= 200:
            return line
    return f"{head}: {what} · {when}"


def preview_create(args: Any, ctx: ToolContext) -> str:
    plan = draft(args, ctx)  # a ToolError is shown as "this call will fail: …"
    api = task_api(ctx.service("tasks"))
    first = (
        moment_words(plan.first_run, plan.schedule.zone, plan.now)
        if plan.first_run is not None
        else "none"
    )
    minutes = plan.budget.max_seconds // 60
    lines = [
        "A task the assistant runs by itself, also when you are not there.",
        "",
        f"Title: {clean(args.title, 120)}",
        f"When: {schedule_words(plan.schedule, plan.now)}",
        f"First run: {first}",
        f"Each run: at most {minutes} min and {plan.budget.max_steps} steps",
        "",
        "What its runs may do without asking you:",
        *profile_lines(api, plan.profile, ctx.registry),
        "",
        "What the assistant will be told at each run:",
        *(f"│ {line}" for line in args.prompt.splitlines()),
        "",
        "Tools cannot change this task later; you can edit, pause or delete it in the "
        "Tasks window.",
    ]
    return "\n".join(lines)


def _task(ctx: ToolContext, task_id: str) -> TaskView | None:
    try:
        return ctx.service("tasks").get(task_id)
    except (ToolError, ValueError):  # no service, or TaskError: no such task
        return None


def _named(ctx: ToolContext, task_id: str) -> str:
    task = _task(ctx, task_id)
    if task is None:
        return f"{quoted(task_id, 40)} (no such task)"
    when = schedule_words(task.schedule, datetime.now(UTC))
    return f"{quoted(task.title, 40)} ({when})"


def summary_remove(args: Any, ctx: ToolContext) -> str:
    return f"Delete the scheduled task {_named(ctx, args.id)} and the permissions it was given"


def summary_pause(args: Any, ctx: ToolContext) -> str:
    return (
        f"Pause the scheduled task {_named(ctx, args.id)}: it will not run until you resume "
        "it in the Tasks window"
    )
