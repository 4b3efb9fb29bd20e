"""`delegate_agent`: a named sub-agent runs its own loop in a child conversation, through
the same pipeline, and never gets more than both its parent's rules and its profile allow.

End to end: the parent and the child talk to the scripted model over real HTTP (one script,
served in order), their calls go through the real pipeline, the real file tools and the
real store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from app.core.approval import ApprovalRequest, Decision
from app.core.events import AgentEvent, TextDelta, ToolCallFinished, ToolCallStarted
from app.core.providers import make_provider
from app.core.rules import Rule, RuleDecision, Scope
from app.core.runtime import Runtime
from app.core.settings import AgentDefinition, ProviderAccount, Settings
from tests.fakellm import ScriptedLLM, text, tool_calls
from tests.fixtures_runtime import RuntimeFactory

Approver = Callable[[ApprovalRequest], Any]


class Asked:
    """An approver that answers `answer` and keeps every question."""

    def __init__(self, answer: Decision = Decision.DENY) -> None:
        self.answer = answer
        self.requests: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> Decision:
        self.requests.append(request)
        return self.answer


def _agents(*definitions: AgentDefinition) -> Callable[[Settings], None]:
    def change(settings: Settings) -> None:
        settings.agents = list(definitions)

    return change


WRITER = AgentDefinition(
    name="Writer", description="Writes notes.", tools=["fs_write_file", "fs_read_file"]
)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The one folder the file tools may use (never Deskhand's own home)."""
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def _runtime(make_runtime: RuntimeFactory, work: Path, *agents: AgentDefinition) -> Runtime:
    return make_runtime(roots=[work], configure=_agents(*agents))


def _turn(
    runtime: Runtime,
    prompt: str,
    approver: Approver,
    conversation_id: str | None = None,
    *,
    task_id: str | None = None,
) -> tuple[str, list[AgentEvent]]:
    """One parent turn (a scheduled task's run with `task_id`: its profile rules count);
    (its conversation id, its events)."""
    provider = make_provider(runtime.provider_config())
    agent = runtime.make_agent(provider, approver, task_id=task_id)
    conversation = runtime.open_conversation(conversation_id)

    async def go() -> list[AgentEvent]:
        try:
            return [event async for event in agent.run(conversation, prompt)]
        finally:
            await provider.aclose()

    events = asyncio.run(go())
    assert conversation.id is not None
    return conversation.id, events


def _delegate(agent: str, task: str, call_id: str = "d1") -> Any:
    return tool_calls((call_id, "delegate_agent", {"agent": agent, "task": task}))


def _result_of(events: Sequence[AgentEvent], call_id: str = "d1") -> str:
    found = [e for e in events if isinstance(e, ToolCallFinished) and e.call_id == call_id]
    assert found, f"no result for {call_id}"
    return found[0].result.content


def _tools_offered(request_body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request_body.get("tools", [])}


def test_a_delegation_runs_the_agent_in_a_child_conversation_and_returns_its_report(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, work: Path
):
    runtime = _runtime(make_runtime, work)
    (work / "notes.txt").write_text("the meeting moved to Thursday", "utf-8")
    llm.add(_delegate("researcher", "What does notes.txt in the work folder say?"))
    llm.add(tool_calls(("c1", "fs_read_file", {"path": str(work / "notes.txt")})))
    llm.add(text("The note says the meeting moved to Thursday."))
    llm.add(text("Your meeting is on Thursday."))

    parent_id, events = _turn(runtime, "when is the meeting?", Asked())

    report = _result_of(events)
    assert "moved to Thursday" in report
    child_calls = [e for e in events if isinstance(e, ToolCallStarted) and e.agent]
    assert [(e.call_id, e.name, e.agent, e.parent_call_id) for e in child_calls] == [
        ("d1/1", "fs_read_file", "Researcher", "d1")
    ]
    children = runtime.store.child_conversations(parent_id)
    assert [(c.agent, c.parent_id) for c in children] == [("Researcher", parent_id)]
    stored = runtime.store.load_messages(children[0].id)
    assert stored[0].content == "What does notes.txt in the work folder say?"
    assert any(m.role == "tool" and "Thursday" in m.content for m in stored), stored
    # the child was told who it is, and offered only its own tools
    child_request = llm.requests[1].body
    assert "You are Researcher" in json.dumps(child_request["messages"][0])
    offered = _tools_offered(child_request) | {"browse_tools"}
    assert "delegate_agent" not in offered
    assert not any(name.startswith(("fs_write", "fs_delete", "tasks_")) for name in offered)
    # the child conversation stays out of the chat list
    assert [c.id for c in runtime.store.list_conversations()] == [parent_id]


def test_the_parent_is_told_which_agents_there_are(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, work: Path
):
    runtime = _runtime(make_runtime, work, WRITER)
    llm.add(text("ok"))
    _turn(runtime, "hi", Asked())
    system = json.dumps(llm.requests[0].body["messages"][0])
    for name in ("Researcher", "Reviewer", "Writer"):
        assert f"- {name}: " in system


def test_a_grant_for_the_parent_conversation_does_not_reach_the_child(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, work: Path
):
    """"Allow in this conversation" for fs_write_file is no grant to a sub-agent whose
    profile does not allow the same: its write asks, naming the agent, with only Allow once
    and Deny; denied, nothing is written."""
    runtime = _runtime(make_runtime, work, WRITER)
    parent_id = runtime.store.create_conversation()
    runtime.rules.add_many(
        [
            Rule(
                tool="fs_write_file",
                decision=RuleDecision.ALLOW,
                scope=Scope.CONVERSATION,
                conversation_id=parent_id,
            )
        ]
    )
    target = work / "out.txt"
    llm.add(_delegate("Writer", "write hi to out.txt"))
    llm.add(tool_calls(("w1", "fs_write_file", {"path": str(target), "content": "hi"})))
    llm.add(text("I could not write it."))
    llm.add(text("done"))
    asked = Asked(Decision.DENY)

    _turn(runtime, "go", asked, parent_id)

    assert not target.exists()
    [request] = asked.requests
    assert request.agent == "Writer"
    assert request.call_id == "d1/1"
    assert request.choices() == [Decision.ALLOW_ONCE, Decision.DENY]
    assert "Writer's profile does not cover it" in (request.reason or "")


def test_the_child_runs_unasked_only_where_both_the_parent_and_its_profile_allow(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, work: Path
):
    runtime = make_runtime(roots=[work])
    writer = WRITER.model_copy(update={"allow": [f"fs_write_file,folder={work}"]})
    runtime.settings = runtime.settings_store.update(lambda s: setattr(s, "agents", [writer]))
    parent_id = runtime.store.create_conversation()
    target = work / "out.txt"

    # the profile alone: the parent's rules would ask, so the child asks
    llm.add(_delegate("Writer", "write hi"))
    llm.add(tool_calls(("w1", "fs_write_file", {"path": str(target), "content": "hi"})))
    llm.add(text("not written"))
    llm.add(text("done"))
    asked = Asked(Decision.DENY)
    _turn(runtime, "go", asked, parent_id)
    assert len(asked.requests) == 1 and not target.exists()

    # the parent allows it in this conversation too: now it runs without a question
    runtime.rules.add_many(
        [
            Rule(
                tool="fs_write_file",
                decision=RuleDecision.ALLOW,
                scope=Scope.CONVERSATION,
                conversation_id=parent_id,
            )
        ]
    )
    llm.add(_delegate("Writer", "write hi", "d2"))
    llm.add(tool_calls(("w2", "fs_write_file", {"path": str(target), "content": "hi"})))
    llm.add(text("written"))
    llm.add(text("done"))
    asked = Asked(Decision.DENY)
    _, events = _turn(runtime, "again", asked, parent_id)
    assert asked.requests == []
    assert target.read_text("utf-8") == "hi"
    assert "What it changed:\n- fs_write_file" in _result_of(events, "d2")


def test_a_deny_rule_wins_over_the_agents_profile(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, work: Path
):
    runtime = make_runtime(roots=[work])
    writer = WRITER.model_copy(update={"allow": [f"fs_write_file,folder={work}"]})
    runtime.settings = runtime.settings_store.update(lambda s: setattr(s, "agents", [writer]))
    runtime.rules.add_many([Rule(tool="fs_write_file", decision=RuleDecision.DENY)])
    target = work / "out.txt"
    llm.add(_delegate("Writer", "write hi"))
    llm.add(tool_calls(("w1", "fs_write_file", {"path": str(target), "content": "hi"})))
    llm.add(text("blocked"))
    llm.add(text("done"))
    asked = Asked(Decision.ALLOW_ONCE)
    _, events = _turn(runtime, "go", asked)
    assert asked.requests == [] and not target.exists()
    finished = [e for e in events if isinstance(e, ToolCallFinished) and e.call_id == "d1/1"]
    assert "deny rule" in finished[0].result.content


def test_an_always_answer_to_a_childs_question_allows_once_and_adds_no_rule(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, work: Path
):
    runtime = _runtime(make_runtime, work, WRITER)
    target = work / "out.txt"
    llm.add(_delegate("Writer", "write hi"))
    llm.add(tool_calls(("w1", "fs_write_file", {"path": str(target), "content": "hi"})))
    llm.add(text("written"))
    llm.add(text("done"))
    before = runtime.rules.rules()
    _turn(runtime, "go", Asked(Decision.ALWAYS_ALLOW_ANY))
    assert target.read_text("utf-8") == "hi"
    assert runtime.rules.rules() == before


@pytest.mark.parametrize(
    ("tool", "said"),
    [
        ("delegate_agent", "cannot delegate further"),
        ("tasks_create", "cannot delegate further"),
        ("fs_write_file", "is not among the tools of the agent Reviewer"),
    ],
)
def test_a_child_cannot_call_what_its_agent_does_not_have(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, work: Path, tool: str, said: str
):
    runtime = _runtime(make_runtime, work)
    llm.add(_delegate("Reviewer", "review"))
    llm.add(tool_calls(("x1", tool, {"agent": "Researcher", "task": "more", "path": "a"})))
    llm.add(text("I cannot do that."))
    llm.add(text("done"))
    asked = Asked(Decision.ALLOW_ONCE)
    _, events = _turn(runtime, "go", asked)
    finished = [e for e in events if isinstance(e, ToolCallFinished) and e.call_id == "d1/1"]
    assert said in finished[0].result.content
    assert asked.requests == []
    assert "I cannot do that." in _result_of(events)


def test_an_unknown_agent_is_an_error_the_model_can_act_on(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, work: Path
):
    runtime = _runtime(make_runtime, work)
    llm.add(_delegate("Nobody", "x"))
    llm.add(text("sorry"))
    _, events = _turn(runtime, "go", Asked())
    said = _result_of(events)
    assert "there is no agent called 'Nobody'" in said
    assert "Researcher" in said and "Reviewer" in said


def test_what_the_child_read_counts_for_the_parent(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, work: Path
):
    runtime = _runtime(make_runtime, work)
    (work / "private.txt").write_text("salary: 100", "utf-8")
    llm.add(_delegate("Researcher", "read private.txt"))
    llm.add(tool_calls(("c1", "fs_read_file", {"path": str(work / "private.txt")})))
    llm.add(text("It is about a salary."))
    llm.add(text("ok"))
    parent_id, events = _turn(runtime, "go", Asked())
    # its report may repeat what the file said: data for the parent's model, not orders
    assert "<untrusted_data origin=\"the agent Researcher, after reading file" in _result_of(
        events
    )
    kinds = {kind for kind, _what in runtime.store.conversation_taint(parent_id)}
    assert kinds == {"private", "untrusted"}
    reopened = runtime.open_conversation(parent_id)
    assert reopened.session.private_data_read


def test_a_child_that_loops_is_stopped_by_its_step_budget_which_the_report_names(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, work: Path
):
    looper = AgentDefinition(
        name="Looper", description="Lists.", tools=["fs_list_dir"], max_steps=2
    )
    runtime = _runtime(make_runtime, work, looper)
    llm.add(_delegate("Looper", "list forever"))
    for n in range(2):
        llm.add(tool_calls((f"l{n}", "fs_list_dir", {"path": str(work)})))
    llm.add(text("ok"))
    _, events = _turn(runtime, "go", Asked())
    assert "stopped before it finished: it used its 2 steps (its step budget)" in _result_of(
        events
    )


def test_a_child_over_its_token_budget_is_stopped_and_the_report_says_so(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, work: Path
):
    spender = AgentDefinition(
        name="Spender", description="Lists.", tools=["fs_list_dir"], max_tokens=1_000
    )
    runtime = _runtime(make_runtime, work, spender)
    llm.add(_delegate("Spender", "list"))
    llm.add(
        tool_calls(("s1", "fs_list_dir", {"path": str(work)}), usage=(900, 200))
    )
    llm.add(text("ok"))
    _, events = _turn(runtime, "go", Asked())
    assert "it used its 1,000 tokens (its token budget)" in _result_of(events)


def test_an_unreachable_child_provider_fails_the_delegation_not_the_parent(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, work: Path, unused_port: int
):
    gone = ProviderAccount(
        kind="openai", label="gone", base_url=f"http://127.0.0.1:{unused_port}/v1", model="m"
    )
    runtime = make_runtime(roots=[work])
    remote = AgentDefinition(name="Remote", description="x", provider=gone.id)

    def change(settings: Settings) -> None:
        settings.providers.append(gone)
        settings.agents = [remote]

    runtime.settings = runtime.settings_store.update(change)
    llm.add(_delegate("Remote", "x"))
    llm.add(text("The agent failed; here is what I know."))
    _, events = _turn(runtime, "go", Asked())
    finished = [e for e in events if isinstance(e, ToolCallFinished) and e.call_id == "d1"]
    assert not finished[0].result.ok
    assert "the agent Remote failed" in finished[0].result.content
    answer = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert answer == "The agent failed; here is what I know."


@pytest.mark.parametrize("granted", [True, False], ids=["task-grants", "task-does-not"])
def test_a_task_runs_delegation_bounded_by_its_profile(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, work: Path, granted: bool
):
    """In a scheduled run the task's profile is the parent's grant: a child writes unasked
    only where the task's profile and the agent's profile both allow it; otherwise the
    question goes to the run's (unattended) approver, naming the agent."""
    runtime = make_runtime(roots=[work])
    writer = WRITER.model_copy(update={"allow": [f"fs_write_file,folder={work}"]})
    runtime.settings = runtime.settings_store.update(lambda s: setattr(s, "agents", [writer]))
    if granted:
        grant = Rule(tool="fs_write_file", decision=RuleDecision.ALLOW)
        runtime.rules.replace_task_rules("task01", [grant])
    target = work / "out.txt"
    llm.add(_delegate("Writer", "write hi"))
    llm.add(tool_calls(("w1", "fs_write_file", {"path": str(target), "content": "hi"})))
    llm.add(text("finished"))
    llm.add(text("done"))
    asked = Asked(Decision.DENY)

    _turn(runtime, "the task's prompt", asked, task_id="task01")

    if granted:
        assert asked.requests == [] and target.read_text("utf-8") == "hi"
    else:
        assert [r.agent for r in asked.requests] == ["Writer"] and not target.exists()
