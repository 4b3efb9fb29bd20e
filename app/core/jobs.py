"""Jobs: tool calls (a delegation included) started in the background of a conversation,
collected later (`submit_job`, `submit_parallel_jobs`, `get_job`, `list_active_jobs`,
`stop_job`).

A job's call goes through the conversation's pipeline like any other (validated, decided,
asked about, redacted, labelled); only its waiting is moved off the turn. Jobs belong to
their conversation: another conversation's id is "not found". At most
`Settings.max_parallel_jobs` of a conversation's jobs run at once; the rest wait their turn.
Jobs live as long as this process (the window, or an `ask` that waits for them).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from app.core.events import AgentEvent, ToolCallFinished, ToolCallStarted
from tools.spec import ToolResult

if TYPE_CHECKING:
    from app.core.pipeline import CallPipeline, ParentCall

log = logging.getLogger(__name__)

JobStatus = Literal["waiting", "running", "ok", "error", "denied", "stopped"]
#: Tools a job may not run: jobs never start jobs, and a job is no way round delegation's
#: own rules (a sub-agent has no job tools at all).
JOB_TOOLS = frozenset(
    {"submit_job", "submit_parallel_jobs", "get_job", "list_active_jobs", "stop_job"}
)
STOPPED = "Stopped before it finished."
#: How a job's call is known outside the model's words (`Job.call_id`).
JOB_CALL_PREFIX = "jobs/"


def is_job_call(call_id: str) -> bool:
    """A job's call, or a call of a sub-agent a job runs: it outlives the turn that
    started it."""
    return call_id.startswith(JOB_CALL_PREFIX)


@dataclass
class Job:
    id: str
    conversation_id: str | None
    tool: str
    arguments: dict[str, Any]
    #: The `submit_job` / `submit_parallel_jobs` call that started it.
    parent_call_id: str
    status: JobStatus = "waiting"
    result: ToolResult | None = None
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    task: asyncio.Task[None] | None = None

    @property
    def call_id(self) -> str:
        """Its call's id outside the model's words (cards, questions, events): a model's
        own ids never hold "/" (Agent's `_unique_ids`), so none can be taken for a job's."""
        return f"{JOB_CALL_PREFIX}{self.id}"

    @property
    def done(self) -> bool:
        return self.status not in ("waiting", "running")

    def seconds(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    def describe(self, *, with_result: bool = True) -> dict[str, Any]:
        """What `get_job` and `list_active_jobs` tell the model."""
        shown: dict[str, Any] = {
            "job_id": self.id,
            "tool": self.tool,
            "status": self.status,
            "seconds": round(self.seconds(), 1),
        }
        if self.tool == "delegate_agent":
            shown["agent"] = self.arguments.get("agent")
        if with_result and self.result is not None:
            shown["result"] = self.result.content
        return shown


#: Where a conversation's job events go when the window listens (else the submitting turn's).
Listener = Callable[[AgentEvent], None]


class JobBook:
    """This process's jobs. Used on one event loop (the agent's)."""

    def __init__(self, max_parallel: Callable[[], int] = lambda: 4) -> None:
        self._max_parallel = max_parallel
        self._jobs: dict[str, Job] = {}
        self._numbers = itertools.count(1)
        self._gates: dict[str | None, asyncio.Semaphore] = {}
        self._listeners: dict[str, Listener] = {}
        #: Finished jobs kept per conversation (the oldest are forgotten beyond it).
        self.keep_finished = 200

    # ---- starting ------------------------------------------------------------------------

    def submit(
        self, pipeline: CallPipeline, call: ParentCall, tool: str, arguments: Mapping[str, Any]
    ) -> Job:
        """Starts `tool` in the background through `pipeline` (which validates, decides and
        asks when the job runs; `JobControl.check` says at once what could never run)."""
        from tools.runner import InvalidCall

        if tool in JOB_TOOLS:
            raise InvalidCall(f"{tool} cannot run as a job: jobs do not start or manage jobs")
        job = Job(
            id=f"job-{next(self._numbers)}",
            conversation_id=call.conversation_id,
            tool=tool,
            arguments=dict(arguments),
            parent_call_id=call.call_id,
        )
        self._jobs[job.id] = job
        self._forget_old(call.conversation_id)
        job.task = asyncio.get_running_loop().create_task(self._run(job, pipeline, call))
        return job

    async def _run(self, job: Job, pipeline: CallPipeline, call: ParentCall) -> None:
        emit = self._emitter(job, call)
        gate = self._gates.setdefault(
            job.conversation_id, asyncio.Semaphore(max(1, self._max_parallel()))
        )
        emit(ToolCallStarted(job.call_id, job.tool, job.arguments, parent_call_id=call.call_id))
        try:
            async with gate:
                job.status = "running"
                job.started = time.monotonic()
                outcome = await pipeline.call(
                    job.call_id,
                    job.tool,
                    job.arguments,
                    session=call.session,
                    conversation_id=call.conversation_id,
                    emit=emit,
                )
            job.result = outcome.result
            job.status = "ok" if outcome.status == "ok" else (
                "denied" if outcome.status == "denied" else "error"
            )
        except asyncio.CancelledError:
            said = pipeline.stopped_results.pop(job.call_id, None)
            detail = (said.error or said.content) if said is not None else ""
            job.result = ToolResult.failure(f"{STOPPED} {detail}".strip())
            job.status = "stopped"
        except Exception as exc:  # a crashing job fails alone, never its conversation
            log.exception("job %s (%s) failed", job.id, job.tool)
            job.result = ToolResult.failure(f"the job failed: {type(exc).__name__}: {exc}")
            job.status = "error"
        finally:
            job.finished = time.monotonic()
            if job.result is not None:
                emit(ToolCallFinished(job.call_id, job.tool, job.result, job.seconds()))

    def _emitter(self, job: Job, call: ParentCall) -> Listener:
        """The window's listener for the conversation when there is one, else the
        submitting turn's consumers (gone once that turn ended: then nobody is told)."""

        def emit(event: AgentEvent) -> None:
            listener = self._listeners.get(job.conversation_id or "")
            target = listener if listener is not None else call.emit
            try:
                target(event)
            except Exception:  # a consumer that went away must not fail the job
                log.debug("job event not delivered", exc_info=True)

        return emit

    # ---- asking about them ---------------------------------------------------------------

    def get(self, job_id: str, conversation_id: str | None) -> Job | None:
        """The job, only for the conversation it belongs to."""
        job = self._jobs.get(job_id.strip())
        return job if job is not None and job.conversation_id == conversation_id else None

    def active(self, conversation_id: str | None = None) -> list[Job]:
        """Jobs not finished, of one conversation (or all of them for None)."""
        return [
            j
            for j in self._jobs.values()
            if not j.done and (conversation_id is None or j.conversation_id == conversation_id)
        ]

    async def wait(self, jobs: Iterable[Job]) -> None:
        tasks = [j.task for j in jobs if j.task is not None]
        if tasks:
            await asyncio.gather(*(asyncio.shield(t) for t in tasks), return_exceptions=True)

    # ---- stopping -----------------------------------------------------------------------

    def stop(self, job_id: str, conversation_id: str | None) -> bool:
        job = self.get(job_id, conversation_id)
        if job is None or job.done or job.task is None:
            return False
        job.task.cancel()
        return True

    def stop_conversation(self, conversation_id: str | None) -> int:
        """Stop (Esc) in a conversation: every job of it."""
        stopped = 0
        for job in self.active(conversation_id):
            if job.task is not None:
                job.task.cancel()
                stopped += 1
        return stopped

    async def stop_all(self) -> None:
        """The process ends: every job is stopped and waited for (their tools' grace)."""
        running = [j.task for j in self.active() if j.task is not None]
        for task in running:
            task.cancel()
        for task in running:
            with contextlib.suppress(BaseException):
                await task

    def listen(self, conversation_id: str, listener: Listener | None) -> None:
        """The window shows this conversation: its jobs' events go to `listener` (None:
        back to the turn that started them)."""
        if listener is None:
            self._listeners.pop(conversation_id, None)
        else:
            self._listeners[conversation_id] = listener

    def _forget_old(self, conversation_id: str | None) -> None:
        finished = [
            j for j in self._jobs.values() if j.done and j.conversation_id == conversation_id
        ]
        for job in finished[: max(0, len(finished) - self.keep_finished)]:
            del self._jobs[job.id]


class JobControl:
    """`ctx.jobs` for one call of a job tool (tools.views.JobsView): the book, bound to the
    conversation and the pipeline the call came through."""

    def __init__(self, book: JobBook, pipeline: CallPipeline, call: ParentCall) -> None:
        self._book, self._pipeline, self._call = book, pipeline, call

    def check(self, tool: str, arguments: dict[str, Any]) -> None:
        from tools.runner import InvalidCall
        from tools.spec import ToolError

        if tool in JOB_TOOLS:
            raise ToolError(f"{tool} cannot run as a job: jobs do not start or manage jobs")
        try:
            self._pipeline.validate(tool, dict(arguments), self._call.session)
        except InvalidCall as exc:
            raise ToolError(str(exc)) from None

    def submit(self, tool: str, arguments: dict[str, Any]) -> str:
        self.check(tool, arguments)
        return self._book.submit(self._pipeline, self._call, tool, arguments).id

    async def wait(self, job_ids: Sequence[str]) -> list[dict[str, Any]]:
        jobs = [j for j in (self._book.get(i, self._call.conversation_id) for i in job_ids) if j]
        await self._book.wait(jobs)
        return [job.describe() for job in jobs]

    def get(self, job_id: str) -> dict[str, Any] | None:
        job = self._book.get(job_id, self._call.conversation_id)
        return job.describe() if job is not None else None

    def active(self) -> list[dict[str, Any]]:
        active = self._book.active(self._call.conversation_id)
        return [job.describe(with_result=False) for job in active]

    def stop(self, job_id: str) -> bool:
        return self._book.stop(job_id, self._call.conversation_id)
