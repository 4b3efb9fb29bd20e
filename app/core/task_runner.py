"""Runs a scheduled task headless through the one pipeline (docs/architecture.md §5.14).

A run claims its ticket from the `TaskBook` (never two runs of one task at once), opens the
task's own conversation, and runs the agent with the task's provider and model, its step
budget, and its profile: the pipeline is built with the task's id, so the task-scoped allow
rules count, deny rules still win, and any other call that would ask goes to `ask` — the
unattended channel (notifications with buttons, the window). No answer by the end of the
run's time budget means denied; with nobody to ask, it is denied at once.

The time budget is read from `clock` (so tests drive it) and enforced three times: the run
stops at the first event after the deadline, a run waiting on nothing (a hung stream, a
stuck tool) is stopped when the clock is said to have passed it (`clock_moved`), and a real
timeout stops a run that hangs.

While nobody watches, a run gets no more than its profile gave it: an answer allows that
one call at most (never a rule, never trust), an answer that comes after the deadline
allows nothing, and the rules a run sees are those in the rules file now (`RuleBook`
re-reads it when another Deskhand process changed it), without the allow rules "for this
conversation" that a person gave while chatting in the task's conversation (`Rule.applies_to`:
those are for that chat, not for later unattended runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from app.core.approval import ApprovalRequest, Decision
from app.core.events import Error, TextDelta, ToolCallFinished, TurnFinished
from app.core.tasks import RunRecord, RunTicket, Task, TaskBook, first_lines
from tools.tasks.approval import TASK_RUN_NOTE

log = logging.getLogger(__name__)

#: What a run's unattended question gets back: Allow once, Deny, or None (no answer in time).
Asker = Callable[[Task, ApprovalRequest, "Deadline"], Awaitable[Decision | None]]
#: Told when a run ends (a notification, the Tasks window).
Announcer = Callable[["RunOutcome"], None]
#: The real timeout allows this much beyond the budget, so the clock's check comes first.
HANG_GRACE = 5.0
CONVERSATION_PREFIX = "Task: "


@dataclass(frozen=True)
class RunOutcome:
    task: Task
    conversation_id: str
    ok: bool
    answer: str
    record: RunRecord | None  # None when the run was replaced as stale meanwhile
    late: bool = False
    missed: int = 0

    @property
    def summary(self) -> str:
        return first_lines(self.answer)


class Deadline:
    """The end of a run's time budget on the runner's clock. Waiters (an unanswered
    question) wake when the clock is said to have moved, or at the real remaining time."""

    def __init__(self, at: datetime, clock: Callable[[], datetime]) -> None:
        self.at = at
        self._clock = clock
        self._moved = asyncio.Event()

    def remaining(self) -> float:
        return max(0.0, (self.at - self._clock()).total_seconds())

    @property
    def passed(self) -> bool:
        return self.remaining() <= 0

    def clock_moved(self) -> None:
        self._moved.set()

    async def wait(self, future: asyncio.Future[Any]) -> bool:
        """Waits for `future` until the deadline; False if the deadline came first."""
        while not future.done():
            left = self.remaining()
            if left <= 0:
                return False
            self._moved.clear()
            moved = asyncio.ensure_future(self._moved.wait())
            try:
                await asyncio.wait({future, moved}, timeout=left, return_when="FIRST_COMPLETED")
            finally:
                moved.cancel()
        return True


class TaskRunner:
    """Claims and executes task runs. `ask` answers questions while nobody watches; None
    denies every call outside the profile."""

    def __init__(
        self,
        runtime: Any,
        *,
        ask: Asker | None = None,
        announce: Announcer | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.runtime = runtime
        self.ask = ask
        self.announce = announce
        self.clock = clock or (lambda: datetime.now(UTC))
        self._deadlines: set[Deadline] = set()

    @property
    def book(self) -> TaskBook:
        book: TaskBook = self.runtime.tasks
        return book

    def clock_moved(self) -> None:
        """The clock jumped (tests, a resumed machine): budgets are checked again now."""
        for deadline in list(self._deadlines):
            deadline.clock_moved()

    # ---- running ---------------------------------------------------------------------------

    def claim(self, task_id: str, planned: datetime | None = None) -> RunTicket:
        """Marks the run as started (raises TaskBusy while the previous one runs)."""
        return self.book.start_run(task_id, now=self.clock(), planned=planned)

    async def run_now(self, task_id: str) -> RunOutcome:
        return await self.execute(self.claim(task_id))

    async def execute(self, ticket: RunTicket) -> RunOutcome:
        task = ticket.task
        deadline = Deadline(self.clock() + timedelta(seconds=task.budget.max_seconds), self.clock)
        self._deadlines.add(deadline)
        said: list[str] = []
        conversation_id = ""
        try:
            conversation_id = self._conversation(task)
            async with asyncio.timeout(task.budget.max_seconds + HANG_GRACE):
                ok, answer = await self._within(
                    deadline, self._agent_run(task, ticket, conversation_id, deadline, said)
                )
        except TimeoutError:
            ok, answer = False, self._over_budget(task, said)
        except asyncio.CancelledError:  # Deskhand quits: say so now, not as a stale marker
            partial = "".join(said).strip()
            self.book.record_run(
                task.id,
                ticket.run_id,
                now=self.clock(),
                ok=False,
                answer="Stopped: Deskhand quit during the run."
                + (f"\n{partial}" if partial else ""),
            )
            raise
        except Exception as exc:  # any failure is the run's outcome, never a stuck marker
            log.warning("task %s: the run failed: %s", task.id, exc, exc_info=True)
            ok, answer = False, f"The run failed: {exc}"
        finally:
            self._deadlines.discard(deadline)
        # the history and the notification never show a stored secret (the user's prompt or
        # an error text may hold one)
        answer = self.runtime.tripwire.text(answer)
        record = self.book.record_run(
            task.id, ticket.run_id, now=self.clock(), ok=ok, answer=answer
        )
        outcome = RunOutcome(
            task, conversation_id, ok, answer, record, late=ticket.late, missed=ticket.missed
        )
        if self.announce is not None:
            try:
                self.announce(outcome)
            except Exception:  # telling the user must not lose the recorded outcome
                log.exception("could not announce the run of task %s", task.id)
        return outcome

    @staticmethod
    async def _within(deadline: Deadline, work: Awaitable[tuple[bool, str]]) -> tuple[bool, str]:
        """`work`, stopped (TimeoutError) once the deadline passes even when it waits on
        nothing that would notice: a stream that sends nothing, a tool that never ends."""
        running = asyncio.ensure_future(work)
        try:
            in_time = await deadline.wait(running)
        except BaseException:
            running.cancel()
            raise
        if in_time:
            return running.result()
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        raise TimeoutError

    def _conversation(self, task: Task) -> str:
        """The task's own conversation (made again if the user deleted it)."""
        store = self.runtime.store
        if task.conversation_id and store.get_conversation(task.conversation_id) is not None:
            return task.conversation_id
        conversation_id: str = store.create_conversation(CONVERSATION_PREFIX + task.title)
        self.book.set_conversation(task.id, conversation_id)
        return conversation_id

    async def _agent_run(
        self,
        task: Task,
        ticket: RunTicket,
        conversation_id: str,
        deadline: Deadline,
        said: list[str],
    ) -> tuple[bool, str]:
        from app.core.providers import make_provider

        # the keyring, the system prompt and the store block: never on the window's thread
        config = await asyncio.to_thread(
            self.runtime.account_provider_config, task.provider, task.model
        )
        provider = make_provider(config)
        try:
            if not config.model:
                models = await provider.list_models()
                if not models:
                    return False, "No model is set for this task and the server lists none."
                config.model = models[0]
            agent = await asyncio.to_thread(
                functools.partial(
                    self.runtime.make_agent,
                    provider,
                    self._approver(task, deadline),
                    task_id=task.id,
                    max_steps=task.budget.max_steps,
                )
            )
            conversation = await asyncio.to_thread(self.runtime.open_conversation, conversation_id)
            conversation.session.notes[TASK_RUN_NOTE] = task.id
            return await self._turn(agent, conversation, task, ticket, deadline, said)
        finally:
            await provider.aclose()

    async def _turn(
        self,
        agent: Any,
        conversation: Any,
        task: Task,
        ticket: RunTicket,
        deadline: Deadline,
        said: list[str],
    ) -> tuple[bool, str]:
        errors: list[str] = []
        finished: TurnFinished | None = None
        async for event in agent.run(conversation, self._message(task, ticket)):
            if isinstance(event, TextDelta):
                said.append(event.text)
            elif isinstance(event, ToolCallFinished):
                said.clear()  # the answer is what comes after the last tool call
            elif isinstance(event, Error):
                errors.append(event.message)
            elif isinstance(event, TurnFinished):
                finished = event
            if deadline.passed:
                return False, self._over_budget(task, said)
        answer = "".join(said).strip()
        if errors:
            return False, f"The run failed: {errors[-1]}" + (f"\n{answer}" if answer else "")
        if finished is not None and finished.stop_reason == "max_steps":
            stop = f"Stopped after {task.budget.max_steps} steps, the task's step budget."
            return False, stop + (f"\n{answer}" if answer else "")
        return True, answer or "(The run ended without an answer.)"

    @staticmethod
    def _message(task: Task, ticket: RunTicket) -> str:
        """The run's user message: the prompt, with when and why it runs."""
        if ticket.planned is None:
            why = "started by hand"
        else:
            local = ticket.planned.astimezone(task.schedule.tz())
            why = f"planned for {local.strftime('%Y-%m-%d %H:%M')} {task.schedule.zone}"
            if ticket.late:
                why += ", running late"
            if ticket.missed:
                why += f"; {ticket.missed} earlier planned run(s) were missed"
        return f"[Scheduled task “{task.title}”, {why}]\n\n{task.prompt}"

    @staticmethod
    def _over_budget(task: Task, said: list[str]) -> str:
        minutes = task.budget.max_seconds / 60
        shown = f"{minutes:g} minutes" if minutes >= 1 else f"{task.budget.max_seconds} seconds"
        partial = "".join(said).strip()
        stop = f"Stopped: the run reached its time budget of {shown}."
        return stop + (f"\n{partial}" if partial else "")

    def _approver(self, task: Task, deadline: Deadline) -> Callable[..., Awaitable[Decision]]:
        async def approve(request: ApprovalRequest) -> Decision:
            if self.ask is None or deadline.passed:
                log.info("task %s: %s denied (nobody to ask)", task.id, request.tool)
                return Decision.DENY
            answer = await self.ask(task, request, deadline)
            if answer is None or deadline.passed:
                log.info("task %s: %s denied (no answer within the budget)", task.id, request.tool)
                return Decision.DENY
            # while nobody watches, an answer allows this one call at most: no rule is made,
            # no source is trusted
            return Decision.ALLOW_ONCE if answer.allows else Decision.DENY

        return approve


def finished_notice(outcome: RunOutcome) -> tuple[str, str]:
    """Title and text of the notification that says a run ended: the first lines of the
    answer (the model's words: shown as plain text by the notifier)."""
    verb = "done" if outcome.ok else "did not finish"
    title = f"Task {verb}: {outcome.task.title}"
    if outcome.late:
        title += " (ran late)"
    text = outcome.summary
    if outcome.missed:
        text += f"\n{outcome.missed} earlier planned run(s) were missed and not repeated."
    return title, text
