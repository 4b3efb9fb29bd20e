"""The job tools' bodies: the pipeline gives a conversation that may start jobs `ctx.jobs`."""

from __future__ import annotations

import json
from typing import Any

from tools.spec import ToolContext, ToolError, ToolResult
from tools.views import JobsView


def _jobs(ctx: ToolContext) -> JobsView:
    if ctx.jobs is None:
        raise ToolError(
            "jobs cannot be started here (a sub-agent has none): do the work with your own "
            "tools, one call after another"
        )
    return ctx.jobs


async def submit_job(args: Any, ctx: ToolContext) -> ToolResult:
    jobs = _jobs(ctx)
    job_id = jobs.submit(args.tool, args.arguments)
    return ToolResult(
        ok=True,
        content=(
            f"Started {job_id} ({args.tool}) in the background. get_job with this id gives "
            "its result once it is done; list_active_jobs shows what still runs."
        ),
        data={"job_id": job_id},
    )


async def submit_parallel_jobs(args: Any, ctx: ToolContext) -> ToolResult:
    jobs = _jobs(ctx)
    for number, job in enumerate(args.jobs, start=1):  # nothing starts if one cannot run
        try:
            jobs.check(job.tool, job.arguments)
        except ToolError as exc:
            raise ToolError(f"job {number} ({job.tool}): {exc}") from None
    ids = [jobs.submit(job.tool, job.arguments) for job in args.jobs]
    finished = await jobs.wait(ids)
    parts = [
        f"## {done['job_id']} · {done['tool']} · {done['status']}\n{done.get('result', '')}"
        for done in finished
    ]
    ok = all(done["status"] == "ok" for done in finished)
    summary = f"{len(finished)} jobs finished" + ("" if ok else " (not all of them ok)")
    return ToolResult(ok=True, content=summary + "\n\n" + "\n\n".join(parts), data=finished)


async def get_job(args: Any, ctx: ToolContext) -> ToolResult:
    found = _jobs(ctx).get(args.job_id)
    if found is None:
        raise ToolError(f"there is no job {args.job_id!r} in this conversation")
    result = found.pop("result", None)
    head = json.dumps(found, ensure_ascii=False)
    if result is None:
        return ToolResult(ok=True, content=f"{head}\nStill running.", data=found)
    return ToolResult(ok=True, content=f"{head}\n{result}", data=found)


async def list_active_jobs(_args: Any, ctx: ToolContext) -> ToolResult:
    active = _jobs(ctx).active()
    if not active:
        return ToolResult(ok=True, content="No job is running in this conversation.", data=[])
    lines = [json.dumps(job, ensure_ascii=False) for job in active]
    return ToolResult(ok=True, content="\n".join(lines), data=active)


async def stop_job(args: Any, ctx: ToolContext) -> ToolResult:
    if not _jobs(ctx).stop(args.job_id):
        raise ToolError(f"there is no running job {args.job_id!r} in this conversation")
    return ToolResult(ok=True, content=f"Stopped {args.job_id}.")
