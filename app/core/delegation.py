"""`delegate_agent`: a named sub-agent's own agent loop, for one task, in a child
conversation linked to its parent's.

A sub-agent never has more rights than its parent: its pipeline (`ChildBounds`) offers only
the agent's tools (never delegating again, jobs, tasks, agents or rules), decides each call
by the parent's rules in the parent's conversation *and* by the agent's profile, the
stricter answer counting, and asks the parent's approver, naming the agent, with only
Allow once / Deny. What it reads counts for the parent as if the parent had read it. Its
answer (and what it changed) is the `delegate_agent` result.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from app.core import untrusted
from app.core.agent import Agent, Conversation, TurnSetup
from app.core.approval import ApprovalRequest, Decision
from app.core.events import (
    AgentEvent,
    ApprovalDecided,
    ApprovalRequested,
    Error,
    Notice,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
    TurnFinished,
)
from app.core.pipeline import CallPipeline, ChildBounds, ParentCall
from app.core.rules import RuleBook
from tools.spec import Operation, ToolResult

if TYPE_CHECKING:
    from app.core.providers.base import Provider
    from app.core.runtime import Runtime
    from app.core.settings import AgentDefinition

log = logging.getLogger(__name__)

#: Progress about the child's answer is sent at most this often (seconds).
TEXT_PROGRESS_EVERY = 0.25
PREAMBLE = (
    "You are {name}, a sub-agent of Deskhand, working on one task for another assistant "
    "(your parent), not talking with the user. Use your tools to do the task; when it is "
    "done, or cannot be done, your last message is your report to the parent: the result, "
    "and anything you could not do. You cannot hand work to other agents."
)


class OutsideIds:
    """How a sub-agent's calls are known outside it (cards, approvals, events):
    `<delegation>/<n>`, n counting this delegation's calls, a tool's question keeping its
    `~<k>`. Never the child model's own ids: the parent's ids hold no "/" (Agent's
    `_unique_ids`), so none can collide with them or with another delegation's, whatever
    either model names its calls."""

    def __init__(self, parent_call_id: str) -> None:
        self._parent = parent_call_id
        self._ids: dict[str, str] = {}
        self._count = 0

    def of(self, call_id: str) -> str:
        base, mark, question = call_id.partition("~")
        if base not in self._ids:
            self._count += 1
            self._ids[base] = f"{self._parent}/{self._count}"
        return self._ids[base] + mark + question

    def finished(self, call_id: str) -> str:
        """The call's outside id, for the last time (a later round may reuse its id)."""
        outside = self.of(call_id)
        del self._ids[call_id.partition("~")[0]]
        return outside


@dataclass
class _Report:
    """What the parent learns of the child's run."""

    answer: list[str] = field(default_factory=list)
    #: call id → (tool, operations, arguments shown)
    calls: dict[str, tuple[str, list[str], str]] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)
    stop_reason: str = "end_turn"
    steps: int = 0
    tokens: int = 0
    error: str | None = None


class Delegator:
    """`CallPipeline(delegate=...)` for one parent agent; `provider` is the parent's (a
    sub-agent without its own account or model shares it)."""

    def __init__(self, runtime: Runtime, provider: Provider) -> None:
        self._runtime = runtime
        self._provider = provider

    async def __call__(
        self, parent: CallPipeline, call: ParentCall, agent_name: str, task: str
    ) -> ToolResult:
        from app.core.agents import find

        runtime = self._runtime
        definition = find(agent_name, runtime.settings.agents)
        if definition is None:
            return ToolResult.failure(_unknown_agent(agent_name, runtime))
        if not task.strip():
            return ToolResult.failure("say what the agent should do: `task` is empty")
        try:
            bounds = self._bounds(definition, call)
        except ValueError as exc:
            return ToolResult.failure(str(exc))
        provider, own_provider = self._provider_for(definition)
        try:
            return await self._run(parent, call, definition, bounds, provider, task)
        finally:
            if own_provider:
                await provider.aclose()

    def _bounds(self, definition: AgentDefinition, call: ParentCall) -> ChildBounds:
        from app.core.agents import problems, profile_rules, tool_names
        from app.core.tasks import TaskError

        runtime = self._runtime
        registry = runtime.registry
        ids = [p.id for p in runtime.settings.providers]
        from app.core.agents import is_builtin

        found = problems(definition, registry, ids)
        if is_builtin(definition):  # its own name is no problem
            found = [p for p in found if p[0] != "name"]
        if found:
            said = "; ".join(f"{where}: {why}" for where, why in found)
            raise ValueError(
                f"the agent {definition.name} cannot run: {said}. The user can fix it in "
                "Settings → Agents or with `deskhand agents edit`"
            )
        try:
            profile = RuleBook(None, profile_rules(definition))
        except TaskError as exc:
            raise ValueError(f"the agent {definition.name} cannot run: allow: {exc}") from None
        return ChildBounds(
            agent=definition.name,
            tools=tool_names(definition, registry),
            profile=profile,
            parent_conversation_id=call.conversation_id,
            parent_session=call.session,
        )

    def _provider_for(self, definition: AgentDefinition) -> tuple[Provider, bool]:
        """(the provider, whether it is the child's own and must be closed)."""
        if definition.provider is None and definition.model is None:
            return self._provider, False
        from app.core.providers import make_provider

        if definition.provider is not None:
            config = self._runtime.account_provider_config(definition.provider, definition.model)
        else:
            config = replace(self._provider.config, model=definition.model or "")
        return make_provider(config), True

    async def _run(
        self,
        parent: CallPipeline,
        call: ParentCall,
        definition: AgentDefinition,
        bounds: ChildBounds,
        provider: Provider,
        task: str,
    ) -> ToolResult:
        runtime = self._runtime
        store = parent.recorder
        conversation_id = None
        if store is not None and hasattr(store, "create_conversation"):
            conversation_id = store.create_conversation(
                _title(definition.name, task),
                parent_id=call.conversation_id,
                agent=definition.name,
            )
            # its task may carry what the parent read: kept with it, for a later reopening
            for kind, what in _taint_of(call.session):
                store.add_taint(conversation_id, kind, what)
        session = runtime.new_session()
        session.only = bounds.tools
        session.active.intersection_update(bounds.tools)
        # the task may carry what the parent read: the child starts as tainted as it
        session.private_data_read = call.session.private_data_read
        session.last_untrusted_origin = call.session.last_untrusted_origin
        ids = OutsideIds(call.call_id)
        pipeline = CallPipeline(
            parent.runner,
            parent.env,
            rules=parent.rules,
            trust=parent.trust,
            approver=_tagged_approver(parent, ids),
            auto_approve=parent.auto_approve,
            recorder=store,
            task_id=parent.task_id,
            tripwire=parent.tripwire,
            bounds=bounds,
        )
        agent = Agent(
            provider,
            pipeline,
            tripwire=parent.tripwire,
            recorder=store,
            setup=TurnSetup(
                system_prompt=_system_prompt(definition),
                max_steps=definition.max_steps,
                max_tokens=definition.max_tokens,
                settings=runtime.settings,
            ),
        )
        report = _Report()
        call.emit(ToolProgress(call.call_id, f"{definition.name} started"))
        started = time.monotonic()
        events = agent.run(Conversation(session, conversation_id), task)
        try:
            async with asyncio.timeout(definition.max_seconds):
                await self._follow(events, call, definition.name, report, ids)
        except TimeoutError:
            report.stop_reason = "max_seconds"
        finally:
            await events.aclose()
        self._taint_up(parent, call, session)
        return _result(definition, report, session, time.monotonic() - started, conversation_id)

    async def _follow(
        self,
        events: AsyncIterator[AgentEvent],
        call: ParentCall,
        name: str,
        report: _Report,
        ids: OutsideIds,
    ) -> None:
        """The child's events, told to the parent's consumers with its calls' ids made
        unique and tagged with the agent; its answer kept for the report."""
        last_said = 0.0
        async for event in events:
            if isinstance(event, TextDelta):
                report.answer.append(event.text)
                now = time.monotonic()
                if now - last_said >= TEXT_PROGRESS_EVERY:
                    last_said = now
                    tail = "".join(report.answer)[-160:].replace("\n", " ")
                    call.emit(ToolProgress(call.call_id, f"{name}: …{tail}"))
            elif isinstance(event, ToolCallStarted):
                report.answer.clear()  # the answer is what follows its last call
                shown = event.arguments
                text = shown if isinstance(shown, str) else json.dumps(shown, ensure_ascii=False)
                report.calls[event.call_id] = (event.name, list(event.operations), text)
                outside = ids.of(event.call_id)
                call.emit(replace(event, call_id=outside, agent=name, parent_call_id=call.call_id))
            elif isinstance(event, ToolCallFinished):
                self._note_change(report, event)
                call.emit(replace(event, call_id=ids.finished(event.call_id)))
            elif isinstance(event, ApprovalRequested):
                request = replace(event.request, call_id=ids.of(event.request.call_id))
                call.emit(ApprovalRequested(request))
            elif isinstance(event, ApprovalDecided | ToolProgress):
                call.emit(replace(event, call_id=ids.of(event.call_id)))
            elif isinstance(event, Notice):
                call.emit(ToolProgress(call.call_id, f"{name}: {event.message}"))
            elif isinstance(event, Error):
                report.error = event.message
                report.stop_reason = "error"
            elif isinstance(event, TurnFinished):
                report.stop_reason = event.stop_reason
                report.steps = event.steps
                report.tokens = event.usage.total

    @staticmethod
    def _note_change(report: _Report, event: ToolCallFinished) -> None:
        name, operations, arguments = report.calls.get(event.call_id, (event.name, [], ""))
        if event.result.ok and set(operations) - {Operation.READ.value}:
            report.changed.append(f"{name} {arguments[:200]}")

    @staticmethod
    def _taint_up(parent: CallPipeline, call: ParentCall, child: Any) -> None:
        """What the child read is kept with the parent conversation too, under the
        `delegate_agent` call (the live parent session learnt it as each call finished)."""
        parent.keep_taint(call.conversation_id, call.call_id, _taint_of(child))


def _taint_of(session: Any) -> list[tuple[str, str]]:
    found = []
    if session.private_data_read:
        found.append((untrusted.PRIVATE, session.private_data_read))
    if session.last_untrusted_origin:
        found.append((untrusted.UNTRUSTED, session.last_untrusted_origin))
    return found


def _tagged_approver(parent: CallPipeline, ids: OutsideIds) -> Any:
    """The parent's approver, asked about a child's call under its outside id."""

    async def ask(request: ApprovalRequest) -> Decision:
        return Decision(await parent.approver(replace(request, call_id=ids.of(request.call_id))))

    return ask


def _system_prompt(definition: AgentDefinition) -> str:
    preamble = PREAMBLE.format(name=definition.name)
    return f"{preamble}\n\n{definition.instructions}".strip()


def _title(name: str, task: str) -> str:
    from app.core.store.conversations import make_title

    return f"{name}: {make_title(task)}"


_STOPS = {
    "max_steps": "it used its {steps} steps (its step budget)",
    "max_tokens": "it used its {tokens:,} tokens (its token budget)",
    "max_seconds": "its time budget of {seconds} s ran out",
}


def _result(
    definition: AgentDefinition,
    report: _Report,
    session: Any,
    seconds: float,
    conversation_id: str | None,
) -> ToolResult:
    """The report: what the child wrote (its answer, and the arguments of what it changed),
    labelled as data when it had read untrusted content, then Deskhand's own notes."""
    data = {
        "agent": definition.name,
        "conversation_id": conversation_id,
        "stop_reason": report.stop_reason,
        "seconds": round(seconds, 1),
        "changed": report.changed,
    }
    parts = ["".join(report.answer).strip()]
    if report.changed:
        parts.append("What it changed:\n" + "\n".join(f"- {c}" for c in report.changed))
    written = "\n\n".join(p for p in parts if p)
    origin = session.last_untrusted_origin
    if written and origin:  # it may repeat what a page or a file said: data, not orders
        written = untrusted.label(written, f"the agent {definition.name}, after reading {origin}")
    if report.error is not None:
        said = f"the agent {definition.name} failed: {report.error}"
        return ToolResult.failure(
            f"{said}\nWhat it wrote before:\n{written}" if written else said, data=data
        )
    lines = [written or f"({definition.name} gave no answer.)"]
    if report.stop_reason in _STOPS:
        why = _STOPS[report.stop_reason].format(
            steps=definition.max_steps,
            tokens=definition.max_tokens,
            seconds=definition.max_seconds,
        )
        lines.append(f"[{definition.name} was stopped before it finished: {why}.]")
    return ToolResult(ok=True, content="\n\n".join(lines), data=data)


def _unknown_agent(name: str, runtime: Runtime) -> str:
    from app.core.agents import all_agents

    known = ", ".join(a.name for a in all_agents(runtime.settings.agents))
    return f"there is no agent called {name!r}; the agents are: {known}"
