"""`delegate_agent`: hand one task to a named sub-agent, which works in its own conversation
with its own, narrower tools and reports back. Each of its calls is decided by this
conversation's rules and by the agent's profile together (app/core/delegation.py), so the
delegation itself only reads.

The job tools start any call in the background and collect it later (app/core/jobs.py).
A job's call is validated, decided and asked about like any other when it runs, so starting,
listing and stopping jobs only read (a job can stop only its own conversation's jobs)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from tools.spec import DeferredParams, Operation, ToolManifest


class DelegateAgent(DeferredParams):
    agent: str = Field(
        ..., min_length=1, max_length=40, description="The agent's name, e.g. Researcher"
    )
    task: str = Field(
        ...,
        min_length=1,
        max_length=20_000,
        description=(
            "Everything the agent needs to do the task on its own: it does not see this "
            "conversation. Say what to find or do and what to report back."
        ),
    )


class _JobCall(BaseModel):
    tool: str = Field(..., min_length=1, max_length=120, description="The tool to run")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="Its arguments, as for calling it directly"
    )


class SubmitJob(DeferredParams, _JobCall):
    pass


class SubmitParallelJobs(DeferredParams):
    jobs: list[_JobCall] = Field(
        ..., min_length=1, max_length=32, description="The calls to run side by side"
    )


class JobId(DeferredParams):
    job_id: str = Field(..., min_length=1, max_length=40, description="e.g. job-3")


class NoParams(DeferredParams):
    pass


_IMPL = "tools.agents.jobs"


def _job_tool(name: str, description: str, params: type[BaseModel]) -> ToolManifest:
    return ToolManifest(
        name=name,
        category="agents",
        description=description,
        params=params,
        operations=frozenset({Operation.READ}),
        impl=f"{_IMPL}:{name}",
        on_loop=True,
        timeout=24 * 3600 + 60,
    )


MANIFESTS = [
    ToolManifest(
        name="delegate_agent",
        category="agents",
        description=(
            "Hand one task to a named sub-agent (the agents are listed in your "
            "instructions). It works alone with its own tools, asks the user when it needs "
            "to, and returns its report (and what it changed). Use it for a self-contained "
            "piece of work, e.g. research across many files or pages; several can run at "
            "once when you call it more than once in one message."
        ),
        params=DelegateAgent,
        operations=frozenset({Operation.READ}),
        impl="tools.agents.delegate:delegate_agent",
        on_loop=True,
        # the agent's own time budget (at most a day) ends it first
        timeout=24 * 3600 + 60,
        summary_line="tools.agents.delegate:summary",
    ),
    _job_tool(
        "submit_job",
        "Start one tool call (a delegate_agent call too) in the background and go on at "
        "once; returns its job id. It is checked and, if it must, asks the user like any "
        "call. Collect it later with get_job.",
        SubmitJob,
    ),
    _job_tool(
        "submit_parallel_jobs",
        "Run several tool calls (delegate_agent calls too) side by side and wait for all of "
        "them; returns each one's result. Nothing starts if one of them could not run.",
        SubmitParallelJobs,
    ),
    _job_tool(
        "get_job",
        "A job's status, and its result once it is done.",
        JobId,
    ),
    _job_tool(
        "list_active_jobs",
        "The jobs of this conversation that still run.",
        NoParams,
    ),
    _job_tool("stop_job", "Stop a job of this conversation.", JobId),
]
