"""Scheduled tasks: a prompt the agent runs by itself at a time (one-shot) or on a cron
schedule in an IANA zone, with a permission profile fixed when the task is made.

Tasks live in `<home>/tasks.json`, written atomically and re-read on every call, so the
CLI and the app see each other's changes. Time handling follows the reminders: each task
keeps the next planned time (UTC); `due(now)` hands out what came due, a run missed while
the machine slept or the app was closed runs once, marked late, and a burst of missed
repeats is coalesced into that one run. A run never overlaps the previous run of the same
task: `start_run` leaves a `running` marker that only `record_run` or a stale timeout
(the run's time budget plus a grace) clears. Every change is a read-modify-write under a
lock file next to the tasks file, so two processes (the window, `tasks serve`, `tasks run`
by hand) never both claim one run. No Qt, no agent here.

A task's profile becomes rules only when a person makes or edits the task through this
book: nothing in tasks.json grants anything by itself (the rules file holds the grants),
and a profile rule the user removed stays removed when the task is edited later.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import os
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.core.paths import TASKS_FILE
from app.core.reminders import LATE_AFTER, ReminderError, next_occurrence, validate_cron, zone
from app.core.rules import BUILTIN, Matcher, Rule, RuleBook, RuleDecision

log = logging.getLogger(__name__)

#: A `running` marker older than the run's time budget plus this is taken as a run that
#: died with the app (crash, power loss): it no longer blocks the next run.
STALE_GRACE = timedelta(minutes=2)
#: One-shot times this far in the past are still accepted (typing takes a moment).
PAST_TOLERANCE = timedelta(minutes=1)
#: How long a change waits for another process that is changing the tasks file.
LOCK_WAIT = 10.0
HISTORY_KEPT = 20
SUMMARY_LINES = 5
SUMMARY_CHARS = 600


class TaskError(ValueError):
    """Bad input for a task; `field` names the argument at fault ("cron", "zone"…)."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class TaskBusy(TaskError):
    """The task's previous run has not finished."""


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise TaskError("a time needs a zone", "at")
    return value.astimezone(UTC)


# ---- the parts of a task ------------------------------------------------------------------


class Schedule(BaseModel):
    """One-shot (`at`, an aware time) or recurring (`cron`, five fields), in `zone`."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    at: datetime | None = None
    cron: str | None = None
    zone: str = "UTC"

    @classmethod
    def once(cls, at: datetime | str, zone_name: str | None = None) -> Schedule:
        """`at` as a datetime or ISO text; a time without an offset is read in `zone_name`
        (the machine's zone when none is given)."""
        try:
            tz = zone(zone_name)
        except ReminderError as exc:
            raise TaskError(str(exc), "zone") from None
        if isinstance(at, str):
            try:
                at = datetime.fromisoformat(at.strip())
            except ValueError:
                raise TaskError(
                    f"{at!r} is not an ISO time; write it like 2026-05-04T08:30 or "
                    "2026-05-04T08:30+02:00",
                    "at",
                ) from None
        if at.tzinfo is None:
            at = at.replace(tzinfo=tz)
        return cls(at=at.astimezone(tz), zone=tz.key)

    @classmethod
    def recurring(cls, cron: str, zone_name: str | None = None) -> Schedule:
        cron = " ".join(cron.split())
        try:
            tz = zone(zone_name)
        except ReminderError as exc:
            raise TaskError(str(exc), "zone") from None
        try:
            validate_cron(cron)
        except ReminderError as exc:
            raise TaskError(str(exc), "cron") from None
        if len(cron.split()) != 5:
            raise TaskError(
                f"invalid cron expression {cron!r}; five fields: minute hour day month weekday",
                "cron",
            )
        return cls(cron=cron, zone=tz.key)

    def first_after(self, now: datetime) -> datetime | None:
        """The first planned time strictly after `now` (UTC), None for a passed one-shot."""
        if self.cron is not None:
            return next_occurrence(self.cron, self.zone, now)
        assert self.at is not None
        at = _utc(self.at)
        return at if at > now else None

    def tz(self) -> Any:
        """The schedule's zone (a ZoneInfo)."""
        return zone(self.zone)

    def describe(self) -> str:
        if self.cron is not None:
            return f"cron “{self.cron}” in {self.zone}"
        assert self.at is not None
        return f"once at {self.at.strftime('%Y-%m-%d %H:%M')} {self.zone}"


class ProfileEntry(BaseModel):
    """A tool the task may call without asking: a name or glob, where it comes from, and
    optionally what its arguments must be (a rules.Matcher)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    tool: str
    source: str = BUILTIN
    matcher: Matcher = Field(default_factory=Matcher)

    @classmethod
    def from_rule(cls, rule: Rule) -> ProfileEntry:
        return cls(tool=rule.tool, source=rule.source, matcher=rule.matcher)

    def as_rule(self, task_id: str, title: str) -> Rule:
        return Rule(
            tool=self.tool,
            source=self.source,
            matcher=self.matcher,
            decision=RuleDecision.ALLOW,
            origin=f"permission profile of the task “{title}”",
            task_id=task_id,
        )

    def describe(self) -> str:
        what = "every tool" if self.tool == "*" else self.tool
        where = "" if self.source == BUILTIN else f" from {self.source}"
        return f"May run {what}{where} {self.matcher.describe()} without asking"


class Budget(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    max_seconds: int = Field(default=600, ge=10, le=6 * 3600)
    max_steps: int = Field(default=20, ge=1, le=200)


class RunRecord(BaseModel):
    """One finished (or abandoned) run."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    run_id: str
    planned: datetime | None  # None: started by hand ("Run now")
    started: datetime
    finished: datetime
    late: bool = False
    missed: int = 0  # further planned times coalesced into this run
    ok: bool = False
    summary: str = ""  # the first lines of the answer, or why it failed


class Running(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    run_id: str
    planned: datetime | None
    started: datetime
    late: bool = False
    missed: int = 0


class Task(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:10])
    title: str
    prompt: str
    schedule: Schedule
    provider: str | None = None
    model: str | None = None
    profile: list[ProfileEntry] = Field(default_factory=list)
    paused: bool = False
    created: datetime
    #: The next planned time not yet handed out (UTC); None once a one-shot has run.
    next_due: datetime | None = None
    budget: Budget = Field(default_factory=Budget)
    running: Running | None = None
    history: list[RunRecord] = Field(default_factory=list)
    #: The task's own conversation, where every run's question and answer land.
    conversation_id: str | None = None

    @property
    def last_run(self) -> RunRecord | None:
        return self.history[-1] if self.history else None

    def is_running(self, now: datetime) -> bool:
        """A run is under way and not stale. A marker from the future (the clock was set
        back since) is stale too: it must not block the task until the clock catches up."""
        if self.running is None:
            return False
        limit = timedelta(seconds=self.budget.max_seconds) + STALE_GRACE
        age = now - self.running.started
        return -STALE_GRACE <= age <= limit

    def describe_profile(self) -> list[str]:
        return describe_profile(self.profile)


def describe_profile(profile: list[ProfileEntry]) -> list[str]:
    """The permission profile in plain words, one line each, for the user to check."""
    lines = [entry.describe() for entry in profile]
    if not lines:
        lines.append("May run no tool that needs approval without asking")
    lines.append("Any other call waits for your answer; your deny rules still win")
    return lines


def parse_allow(text: str) -> ProfileEntry:
    """`TOOL[@SOURCE][,KIND=VALUE]`: "fs_read_file", "docker_*", "*@mcp:github",
    "fs_write_file,folder=/home/me/notes", "shell_run,command=ls -la",
    "shell_run,command=make test,folder=/home/me/proj"."""
    head, _, cond = text.partition(",")
    tool, _, source = head.strip().partition("@")
    if not tool.strip():
        raise TaskError(f"{text!r}: name a tool or a pattern like docker_*", "allow")
    matcher = Matcher()
    if cond:
        kind, eq, value = cond.partition("=")
        kinds = ("folder", "path", "site", "account", "command")
        if not eq or kind.strip() not in kinds or not value.strip():
            raise TaskError(
                f"{text!r}: after the comma write one of {', '.join(kinds)} "
                "then = and a value, e.g. folder=/home/me/notes",
                "allow",
            )
        kind = kind.strip()
        value = value.strip()
        if kind in ("folder", "path"):
            value = os.path.expanduser(value)
            if not os.path.isabs(value):
                raise TaskError(f"{text!r}: the {kind} must be an absolute path", "allow")
        matcher = (
            _command_matcher(text, value) if kind == "command" else Matcher(kind=kind, value=value)
        )
    return ProfileEntry(tool=tool.strip(), source=source.strip() or BUILTIN, matcher=matcher)


#: What may follow a command in a profile line: `,folder=/path`, `,exact`, `,network`.
_COMMAND_TAIL = re.compile(r",\s*(folder=[^,]+|exact|network)\s*$")


def _command_matcher(text: str, value: str) -> Matcher:
    """`command=make,folder=/home/me/proj`: a command rule, checked like "Always allow"
    would make it. A rule that names an interpreter or a program that runs others without
    its script, or code from a folder without the folder, is refused in plain words."""
    from tools.shell.danger import runs_model_code
    from tools.shell.parse import parse_line
    from tools.shell.programs import profile_problem

    folder, exact, network = "", False, False
    while (found := _COMMAND_TAIL.search(value)) is not None:
        option = found.group(1)
        value = value[: found.start()].strip()
        if option == "exact":
            exact = True
        elif option == "network":
            network = True
        else:
            folder = os.path.expanduser(option.split("=", 1)[1].strip())
            if not os.path.isabs(folder):
                raise TaskError(f"{text!r}: the folder must be an absolute path", "allow")
    problem = None if exact else profile_problem(value)
    if problem is not None:
        raise TaskError(f"{text!r}: {problem}", "allow")
    parsed = parse_line(value)
    if parsed.problems or len(parsed.commands) != 1:
        raise TaskError(f"{text!r}: write one simple command, with no shell syntax", "allow")
    if runs_model_code(parsed.commands[0]) and not folder:
        name = parsed.commands[0].words[0] if parsed.commands[0].words else value
        raise TaskError(
            f"{text!r}: {name} runs code from the folder it runs in, so the rule must name "
            "that folder: add ,folder=/path/to/project",
            "allow",
        )
    return Matcher(kind="command", value=value, folder=folder, exact=exact, network=network)


def first_lines(text: str) -> str:
    """What a notification and the task list show of an answer."""
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    kept = "\n".join(lines[:SUMMARY_LINES])
    if len(kept) > SUMMARY_CHARS:
        kept = kept[: SUMMARY_CHARS - 1] + "…"
    elif len(lines) > SUMMARY_LINES:
        kept += "\n…"
    return kept


@dataclass(frozen=True)
class DueRun:
    """A run to start: `planned` is the (first) planned time it stands for, None for a run
    started by hand; `missed` counts the further planned times coalesced into it."""

    task: Task
    planned: datetime | None
    late: bool
    missed: int = 0


@dataclass(frozen=True)
class RunTicket:
    """A started run: give `run_id` back to `record_run`."""

    task: Task
    run_id: str
    planned: datetime | None
    late: bool
    missed: int


class _TaskFile(BaseModel):
    version: int = 1
    tasks: list[Task] = Field(default_factory=list)


# ---- the book -----------------------------------------------------------------------------


class TaskBook:
    """The tasks file. Thread-safe; every call re-reads the file (the CLI may change it)."""

    def __init__(
        self, home: Path, rules: RuleBook | None = None, *, lock_wait: float = LOCK_WAIT
    ) -> None:
        from filelock import FileLock

        self.path = Path(home) / TASKS_FILE
        #: Where each task's profile lives as task-scoped allow rules (kept in step here).
        self.rules = rules
        self._lock = threading.RLock()
        #: Other processes' changes wait for ours (and ours for theirs) at most `lock_wait`.
        self._file_lock = FileLock(str(self.path) + ".lock")
        self.lock_wait = lock_wait
        #: Set when an unreadable file was moved aside (shown once to the user).
        self.load_error: str | None = None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """This thread, and no other process, changes the file until the block ends."""
        from filelock import Timeout

        with self._lock:
            try:
                self._file_lock.acquire(timeout=self.lock_wait)
            except Timeout:
                raise TaskBusy(
                    "another Deskhand process is changing the tasks; try again", "id"
                ) from None
            try:
                yield
            finally:
                self._file_lock.release()

    # ---- file -----------------------------------------------------------------------

    def _read(self) -> list[Task]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:  # not corrupt, just unreachable: keep it, change nothing
            raise TaskError(f"cannot read the tasks file {self.path}: {exc}") from None
        try:
            return _TaskFile.model_validate(json.loads(raw)).tasks
        except (ValueError, ValidationError) as exc:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
            kept = self.path.with_name(f"{self.path.name}.unreadable-{stamp}")
            os.replace(self.path, kept)
            first = str(exc).splitlines()[0]
            self.load_error = f"the tasks file was unreadable ({first}); it was kept as {kept}"
            log.warning("%s", self.load_error)
            return []

    def _write(self, tasks: list[Task]) -> None:
        from app.core.atomic_file import atomic_write

        text = _TaskFile(tasks=tasks).model_dump_json(indent=2) + "\n"
        try:
            atomic_write(self.path, text.encode("utf-8"), mode=0o600)
        except OSError as exc:
            raise TaskError(f"cannot save the tasks file {self.path}: {exc}") from None

    def _change(self, task_id: str, change: Any) -> Task:
        """Applies `change(task) -> Task` to one task and saves."""
        with self._locked():
            tasks = self._read()
            for i, task in enumerate(tasks):
                if task.id == task_id:
                    tasks[i] = change(task)
                    self._write(tasks)
                    return tasks[i]
        raise TaskError(f"there is no task {task_id!r}", "id")

    # ---- creating and reading ----------------------------------------------------------

    def add(
        self,
        title: str,
        prompt: str,
        schedule: Schedule,
        *,
        now: datetime,
        profile: list[ProfileEntry] | None = None,
        provider: str | None = None,
        model: str | None = None,
        budget: Budget | None = None,
    ) -> Task:
        if not title.strip():
            raise TaskError("a task needs a title", "title")
        if not prompt.strip():
            raise TaskError("a task needs a prompt: what the assistant should do", "prompt")
        next_due = self._first_due(schedule, now)
        task = Task(
            title=title.strip(),
            prompt=prompt.strip(),
            schedule=schedule,
            provider=provider or None,
            model=model or None,
            profile=list(profile or []),
            created=now.astimezone(UTC),
            next_due=next_due,
            budget=budget or Budget(),
        )
        with self._locked():
            tasks = self._read()
            tasks.append(task)
            self._write(tasks)
            self._sync_rules(task)
        return task

    def _sync_rules(self, task: Task) -> None:
        if self.rules is not None:
            self.rules.replace_task_rules(
                task.id, [entry.as_rule(task.id, task.title) for entry in task.profile]
            )

    def _removed_entries(self, task: Task) -> list[ProfileEntry]:
        """The profile lines whose rule the user removed since (Settings → Rules)."""
        if self.rules is None:
            return []
        live = {(r.tool, r.source, r.matcher) for r in self.rules.for_task(task.id)}
        return [e for e in task.profile if (e.tool, e.source, e.matcher) not in live]

    def profile_rules(self, task_id: str) -> list[Rule]:
        """The rules that let the task's runs act without asking — what is in force, which
        is the profile minus what the user removed in Rules since."""
        return self.rules.for_task(task_id) if self.rules is not None else []

    def profile_in_force(self, task: Task) -> list[ProfileEntry]:
        """The profile as it stands: its rules (the declared profile without a rule book)."""
        if self.rules is None:
            return list(task.profile)
        return [ProfileEntry.from_rule(r) for r in self.profile_rules(task.id)]

    def describe_in_force(self, task: Task) -> list[str]:
        return describe_profile(self.profile_in_force(task))

    @staticmethod
    def _first_due(schedule: Schedule, now: datetime) -> datetime:
        if schedule.cron is not None:
            due = schedule.first_after(now)
            assert due is not None
            return due
        assert schedule.at is not None
        at = _utc(schedule.at)
        if at < now - PAST_TOLERANCE:
            raise TaskError(f"{schedule.at.isoformat()} is in the past", "at")
        return at

    def list(self) -> list[Task]:
        with self._lock:
            return self._read()

    def get(self, task_id: str) -> Task:
        found = next((t for t in self.list() if t.id == task_id), None)
        if found is None:
            raise TaskError(f"there is no task {task_id!r}", "id")
        return found

    def next_run(self, task: Task, now: datetime) -> datetime | None:
        """When the task will next start: None when paused or nothing is left to run;
        `now` when it is overdue (waiting for the app, or for its previous run to end)."""
        if task.paused or task.next_due is None:
            return None
        return max(task.next_due, now)

    def next_wake(self, now: datetime) -> datetime | None:
        """The earliest next run of any task, for the scheduler's sleep."""
        times = [t for t in (self.next_run(task, now) for task in self.list()) if t]
        return min(times, default=None)

    # ---- changing ----------------------------------------------------------------------

    def update(self, task_id: str, *, now: datetime, **changes: Any) -> Task:
        """Changes title, prompt, schedule, provider, model, profile or budget. A new
        schedule re-plans the next run from `now`."""
        allowed = {"title", "prompt", "schedule", "provider", "model", "profile", "budget"}
        unknown = set(changes) - allowed
        if unknown:
            raise TaskError(f"cannot change {', '.join(sorted(unknown))}", sorted(unknown)[0])
        for key in ("title", "prompt"):
            if key in changes and not str(changes[key]).strip():
                raise TaskError(f"a task needs a {key}", key)
        if "schedule" in changes:
            changes["next_due"] = self._first_due(changes["schedule"], now)

        def apply(task: Task) -> Task:
            update = dict(changes)
            if "profile" in update:  # what the user removed in Rules is not given back
                removed = self._removed_entries(task)
                wanted = [ProfileEntry.model_validate(e) for e in update["profile"]]
                update["profile"] = [e for e in wanted if e not in removed]
            try:
                return Task.model_validate({**task.model_dump(), **update})
            except ValidationError as exc:
                raise TaskError(str(exc).splitlines()[0], sorted(changes)[0]) from None

        with self._locked():
            task = self._change(task_id, apply)
            if "profile" in changes:
                self._sync_rules(task)
        return task

    def remove(self, task_id: str) -> Task:
        with self._locked():
            tasks = self._read()
            found = next((t for t in tasks if t.id == task_id), None)
            if found is None:
                raise TaskError(f"there is no task {task_id!r}", "id")
            self._write([t for t in tasks if t.id != task_id])
            if self.rules is not None:
                self.rules.remove_task_rules(task_id)
            return found

    def set_conversation(self, task_id: str, conversation_id: str) -> Task:
        return self._change(
            task_id, lambda t: t.model_copy(update={"conversation_id": conversation_id})
        )

    def pause(self, task_id: str) -> Task:
        return self._change(task_id, lambda t: t.model_copy(update={"paused": True}))

    def resume(self, task_id: str, *, now: datetime) -> Task:
        """A recurring task resumes at its next time after `now`: the runs skipped while
        paused are not caught up. A one-shot whose time passed while paused runs once, late."""

        def resume(task: Task) -> Task:
            update: dict[str, Any] = {"paused": False}
            if task.schedule.cron is not None:
                update["next_due"] = task.schedule.first_after(now)
            return task.model_copy(update=update)

        return self._change(task_id, resume)

    # ---- running -----------------------------------------------------------------------

    def due(self, now: datetime) -> builtins.list[DueRun]:
        """The runs to start now, earliest first: each task whose planned time has come,
        not paused and not still running. Nothing is changed: `start_run` claims a run."""
        found = [
            self._due_run(task, now)
            for task in self.list()
            if not task.paused
            and task.next_due is not None
            and task.next_due <= now
            and not task.is_running(now)
        ]
        return sorted(found, key=lambda d: d.planned or now)

    @staticmethod
    def _due_run(task: Task, now: datetime) -> DueRun:
        assert task.next_due is not None
        missed = 0
        if task.schedule.cron is not None:
            following = next_occurrence(task.schedule.cron, task.schedule.zone, task.next_due)
            while following <= now:  # the burst missed while asleep or closed: one run
                missed += 1
                following = next_occurrence(task.schedule.cron, task.schedule.zone, following)
        late = now - task.next_due > LATE_AFTER
        return DueRun(task, task.next_due, late, missed)

    def start_run(
        self, task_id: str, *, now: datetime, planned: datetime | None = None
    ) -> RunTicket:
        """Claims a run: the due one when `planned` is its planned time, else a run by hand
        that leaves the schedule alone. Raises TaskBusy while the previous run is under
        way; a stale marker is recorded as an unfinished run and replaced."""
        ticket: list[RunTicket] = []

        def start(task: Task) -> Task:
            if task.is_running(now):
                raise TaskBusy(f"“{task.title}” is still running", "id")
            history = list(task.history)
            if task.running is not None:  # stale: the app stopped during that run
                history.append(_abandoned(task.running, now))
            update: dict[str, Any] = {}
            late, missed = False, 0
            if planned is not None:
                if task.next_due is None or task.next_due != planned or task.paused:
                    raise TaskError(f"“{task.title}” is not due at {planned.isoformat()}", "id")
                due = self._due_run(task, now)
                late, missed = due.late, due.missed
                update["next_due"] = task.schedule.first_after(max(now, planned))
            run_id = uuid.uuid4().hex[:10]
            update["running"] = Running(
                run_id=run_id, planned=planned, started=now, late=late, missed=missed
            )
            update["history"] = history[-HISTORY_KEPT:]
            changed = task.model_copy(update=update)
            ticket.append(RunTicket(changed, run_id, planned, late, missed))
            return changed

        with self._lock:
            self._change(task_id, start)
        return ticket[0]

    def record_run(
        self, task_id: str, run_id: str, *, now: datetime, ok: bool, answer: str
    ) -> RunRecord | None:
        """Ends a run: clears its marker and keeps its outcome with the first lines of the
        answer (or of the error). None when the run is no longer the current one (it was
        taken as stale and replaced): its outcome is dropped."""
        kept: list[RunRecord] = []

        def finish(task: Task) -> Task:
            if task.running is None or task.running.run_id != run_id:
                return task
            r = task.running
            record = RunRecord(
                run_id=run_id,
                planned=r.planned,
                started=r.started,
                finished=now,
                late=r.late,
                missed=r.missed,
                ok=ok,
                summary=first_lines(answer),
            )
            kept.append(record)
            history = [*task.history, record][-HISTORY_KEPT:]
            return task.model_copy(update={"running": None, "history": history})

        self._change(task_id, finish)
        return kept[0] if kept else None


def _abandoned(running: Running, now: datetime) -> RunRecord:
    return RunRecord(
        run_id=running.run_id,
        planned=running.planned,
        started=running.started,
        finished=now,
        late=running.late,
        missed=running.missed,
        ok=False,
        summary="did not finish (Deskhand stopped during the run)",
    )
