"""What tools see of the app, as structural types: its settings, and the services tool
categories reach with `ctx.service(name)`.

Tools never import `app`: the app's pydantic settings (app.core.settings.Settings) and its
services (the reminder book, the task book, the memory service, the skill library) satisfy
these protocols by shape, and mypy checks that (settings where the app hands them to a
ToolContext, services in app/core/tool_services.py). Every attribute is read-only, so a list
field may be seen as a Sequence and an int as a float. Each service protocol names exactly
what its category uses; a category that needs more adds it here first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol


class FileSettingsView(Protocol):
    """`settings.files`: the folders file tools may touch."""

    @property
    def allowed_roots(self) -> Sequence[str]: ...

    @property
    def denied_paths(self) -> Sequence[str]: ...

    @property
    def folders_chosen(self) -> bool: ...


class BrowserSettingsView(Protocol):
    """`settings.browser`: which browser the browser tools drive, and how."""

    @property
    def executable(self) -> str: ...

    @property
    def headless(self) -> bool: ...

    @property
    def ask_new_sites(self) -> bool: ...

    @property
    def idle_close_seconds(self) -> float: ...


class ShellSettingsView(Protocol):
    """`settings.shell`: the terminal tool's sandbox and time limit."""

    @property
    def sandbox(self) -> str: ...

    @property
    def timeout(self) -> float: ...


class SettingsView(Protocol):
    """`ctx.settings`: the parts of the app's settings that tools read."""

    @property
    def files(self) -> FileSettingsView: ...

    @property
    def browser(self) -> BrowserSettingsView: ...

    @property
    def shell(self) -> ShellSettingsView: ...


# ---- ctx.service("reminders"): app.core.reminders.ReminderBook ---------------------------


class ReminderView(Protocol):
    """One reminder, as the reminder and calendar tools read it."""

    @property
    def id(self) -> str: ...

    @property
    def message(self) -> str: ...

    @property
    def due_at(self) -> datetime: ...

    @property
    def tz(self) -> str: ...

    @property
    def cron(self) -> str | None: ...

    @property
    def status(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def source_ref(self) -> str | None: ...

    def local_due(self) -> datetime: ...

    def to_json(self) -> dict[str, Any]: ...


class ReminderBookView(Protocol):
    """The reminder book (reminders and calendar alarms). Bad input (time, zone, cron, id)
    raises a ValueError whose text is meant for the model."""

    @property
    def clock(self) -> Callable[[], datetime]: ...

    def create_once(
        self,
        message: str,
        at: datetime,
        tz: str | None = None,
        *,
        source: str = ...,
        source_ref: str | None = ...,
    ) -> ReminderView: ...

    def create_recurring(self, message: str, cron: str, tz: str | None = None) -> ReminderView: ...

    def get(self, reminder_id: str) -> ReminderView: ...

    def cancel(self, reminder_id: str) -> ReminderView: ...

    def snooze(self, reminder_id: str, minutes: int) -> ReminderView: ...

    def list(self, statuses: tuple[str, ...] = ...) -> Sequence[ReminderView]: ...


# ---- ctx.service("memory"): app.core.memory.MemoryService -------------------------------


class MemoryView(Protocol):
    """One remembered note."""

    def line(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...


class MemoryServiceView(Protocol):
    """The memory service, bound to the calling conversation. A refused change (a private
    conversation, an unknown id, a bad kind) raises a ValueError meant for the model."""

    def remember(
        self,
        content: str,
        kind: str = ...,
        origin: str | None = None,
        private: str | None = None,
    ) -> MemoryView: ...

    def search(
        self, query: str, kind: str | None = None, limit: int = ...
    ) -> Sequence[MemoryView]: ...

    def update(
        self,
        memory_id: int,
        content: str | None = None,
        kind: str | None = None,
        origin: str | None = None,
        private: str | None = None,
    ) -> MemoryView: ...

    def delete(self, memory_id: int) -> MemoryView: ...

    def list(self, kind: str | None = None, limit: int = ...) -> Sequence[MemoryView]: ...


# ---- ctx.service("knowledge"): app.core.knowledge_tools.KnowledgeTools -------------------


class KnowledgeFolderView(Protocol):
    """A knowledge folder (or one large attached document) the calling conversation sees."""

    @property
    def path(self) -> str: ...

    @property
    def conversation_id(self) -> str | None: ...


class KnowledgePassageView(Protocol):
    """One indexed passage: the document, where in it (a section label such as "page 3",
    "sheet Budget", "heading: Costs", or ""), its text (redacted before it was indexed)."""

    @property
    def path(self) -> str: ...

    @property
    def location(self) -> str: ...

    @property
    def text(self) -> str: ...


class KnowledgeServiceView(Protocol):
    """The knowledge index, bound to the calling conversation: its folders are the global
    ones and that conversation's own. Nothing here reads a file; all comes from the index.
    A refusal raises a ValueError meant for the model."""

    def folders(self) -> Sequence[KnowledgeFolderView]: ...

    def search(self, query: str, k: int) -> Sequence[KnowledgePassageView]: ...

    def read(self, path: str) -> Sequence[KnowledgePassageView]: ...


# ---- ctx.service("skills"): app.core.skills.SkillLibrary --------------------------------


class SkillView(Protocol):
    """One installed skill: a folder with SKILL.md."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def folder(self) -> Path: ...

    def body(self) -> str: ...

    def files(self) -> Sequence[Path]: ...


class ScriptRunView(Protocol):
    """How one run of a skill's script ended."""

    @property
    def command(self) -> Sequence[str]: ...

    @property
    def exit_code(self) -> int | None: ...

    @property
    def output(self) -> str: ...

    @property
    def truncated(self) -> bool: ...

    @property
    def timed_out(self) -> bool: ...

    @property
    def seconds(self) -> float: ...


class SkillLibraryView(Protocol):
    """The skill library. An unknown skill, a malformed SKILL.md or a script that cannot
    run raises a ValueError meant for the model; a file that cannot be read an OSError."""

    def discover(self) -> Sequence[SkillView]: ...

    def get(self, name: str) -> SkillView: ...

    def command(
        self, name: str, script: str, args: list[str]
    ) -> tuple[SkillView, Sequence[str]]: ...

    def run_script(
        self,
        name: str,
        script: str,
        args: list[str] | None = None,
        *,
        timeout: float = ...,
        output_cap: int = ...,
        cancel: threading.Event | None = None,
    ) -> ScriptRunView: ...


# ---- ctx.service("tasks"): app.core.tasks.TaskBook --------------------------------------


class ScheduleView(Protocol):
    """When a task runs: once `at`, or on `cron`; both read in `zone`."""

    @property
    def at(self) -> datetime | None: ...

    @property
    def cron(self) -> str | None: ...

    @property
    def zone(self) -> str: ...


class RunRecordView(Protocol):
    """One finished run of a task."""

    @property
    def started(self) -> datetime: ...

    @property
    def ok(self) -> bool: ...

    @property
    def summary(self) -> str: ...


class TaskView(Protocol):
    """One scheduled task."""

    @property
    def id(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def paused(self) -> bool: ...

    @property
    def schedule(self) -> ScheduleView: ...

    @property
    def last_run(self) -> RunRecordView | None: ...

    def is_running(self, now: datetime) -> bool: ...


class TaskBookView(Protocol):
    """The task book. Bad input or an unknown id raises the book module's TaskError (a
    ValueError with a `field`); its Schedule, Budget and profile entries come from that
    module too (tools.tasks.approval.task_api), so they are `Any` here. Methods taking a
    task take one this book returned."""

    def add(
        self,
        title: str,
        prompt: str,
        schedule: Any,
        *,
        now: datetime,
        profile: list[Any] | None = None,
        budget: Any = None,
    ) -> TaskView: ...

    def get(self, task_id: str) -> TaskView: ...

    def remove(self, task_id: str) -> TaskView: ...

    def pause(self, task_id: str) -> TaskView: ...

    def next_run(self, task: Any, now: datetime) -> datetime | None: ...

    def describe_in_force(self, task: Any) -> Sequence[str]: ...

    def list(self) -> Sequence[TaskView]: ...


class JobsView(Protocol):
    """A conversation's background jobs (app/core/jobs.py `JobControl`), as the job tools
    use them. Job ids are only found in the conversation that started them. `submit` and
    `check` raise `tools.spec.ToolError` with what is wrong."""

    def check(self, tool: str, arguments: dict[str, Any]) -> None: ...

    def submit(self, tool: str, arguments: dict[str, Any]) -> str: ...

    async def wait(self, job_ids: Sequence[str]) -> list[dict[str, Any]]: ...

    def get(self, job_id: str) -> dict[str, Any] | None: ...

    def active(self) -> list[dict[str, Any]]: ...

    def stop(self, job_id: str) -> bool: ...
