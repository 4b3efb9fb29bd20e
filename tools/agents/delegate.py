"""The body of `delegate_agent`: the pipeline gives it the way to run a sub-agent."""

from __future__ import annotations

from typing import Any

from tools.spec import ToolContext, ToolError, ToolResult


async def delegate_agent(args: Any, ctx: ToolContext) -> ToolResult:
    if ctx.delegate is None:
        raise ToolError(
            "sub-agents cannot hand work to other agents: do the task with your own tools, "
            "or say in your answer what is left to do"
        )
    return await ctx.delegate(args.agent.strip(), args.task)


def summary(args: Any, _ctx: ToolContext) -> str:
    return f"Hand a task to {args.agent.strip()}"
