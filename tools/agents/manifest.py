"""`delegate_agent`: hand one task to a named sub-agent, which works in its own conversation
with its own, narrower tools and reports back. Each of its calls is decided by this
conversation's rules and by the agent's profile together (app/core/delegation.py), so the
delegation itself only reads."""

from __future__ import annotations

from pydantic import Field

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
    )
]
