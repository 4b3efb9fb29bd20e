"""Jobs: calls started in the background of a conversation and collected later, through the
same pipeline, bounded per conversation, stopped with it, never crossing conversations.

The parent talks to one scripted model server; sub-agents run as jobs talk to a second one
(an agent with its own provider account), so each server's script is served in order."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.approval import ApprovalRequest, Decision
from app.core.events import AgentEvent, ToolCallFinished, ToolCallStarted
from app.core.providers import make_provider
from app.core.runtime import Runtime
from app.core.settings import AgentDefinition, ProviderAccount, Settings
from tests.fakellm import ScriptedLLM, hang, text, tool_calls
from tests.fixtures_runtime import RuntimeFactory


async def deny(_request: ApprovalRequest) -> Decision:
    return Decision.DENY


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "a.txt").write_text("alpha", "utf-8")
    (folder / "b.txt").write_text("beta", "utf-8")
    return folder


@pytest.fixture
def llm2() -> Iterator[ScriptedLLM]:
    """The sub-agents' own model server."""
    with ScriptedLLM() as server:
        yield server


def _runtime(
    make_runtime: RuntimeFactory, work: Path, llm2: ScriptedLLM, **settings: Any
) -> Runtime:
    side = ProviderAccount(kind="openai", label="side", base_url=llm2.openai_base_url, model="m")
    slow = AgentDefinition(name="Slow", description="Reads.", provider=side.id)

    def change(s: Settings) -> None:
        s.providers.append(side)
        s.agents = [slow]
        for key, value in settings.items():
            setattr(s, key, value)

    return make_runtime(roots=[work], configure=change)


async def _turn(
    runtime: Runtime, prompt: str, conversation_id: str | None = None
) -> tuple[str, list[AgentEvent]]:
    provider = make_provider(runtime.provider_config())
    agent = runtime.make_agent(provider, deny)
    conversation = runtime.open_conversation(conversation_id)
    try:
        events = [event async for event in agent.run(conversation, prompt)]
    finally:
        await provider.aclose()
    assert conversation.id is not None
    return conversation.id, events


def _run(runtime: Runtime, body: Callable[[], Awaitable[Any]]) -> Any:
    async def go() -> Any:
        try:
            return await body()
        finally:
            await runtime.jobs.stop_all()

    return asyncio.run(go())


def _result(events: list[AgentEvent], call_id: str) -> str:
    found = [e for e in events if isinstance(e, ToolCallFinished) and e.call_id == call_id]
    assert found, f"no result for {call_id}"
    return found[0].result.content


def _job(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": name, "arguments": arguments}


def test_parallel_jobs_run_side_by_side_and_all_results_come_back(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, llm2: ScriptedLLM, work: Path
):
    runtime = _runtime(make_runtime, work, llm2)
    jobs = [_job("fs_read_file", path=str(work / n)) for n in ("a.txt", "b.txt")]
    llm.add(tool_calls(("p1", "submit_parallel_jobs", {"jobs": jobs})))
    llm.add(text("alpha and beta"))

    _, events = _run(runtime, lambda: _turn(runtime, "read both"))

    said = _result(events, "p1")
    assert "2 jobs finished" in said
    assert "alpha" in said and "beta" in said
    started = [e for e in events if isinstance(e, ToolCallStarted) and e.parent_call_id == "p1"]
    assert [(e.call_id, e.name) for e in started] == [
        ("jobs/job-1", "fs_read_file"),
        ("jobs/job-2", "fs_read_file"),
    ]


def test_a_job_outlives_its_turn_and_is_collected_later(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, llm2: ScriptedLLM, work: Path
):
    runtime = _runtime(make_runtime, work, llm2)
    llm.add(tool_calls(("s1", "submit_job", _job("delegate_agent", agent="Slow", task="x"))))
    llm.add(text("started it"))
    llm2.add(hang("thinking"))
    heard: list[AgentEvent] = []

    async def body() -> tuple[str, str]:
        conversation_id, events = await _turn(runtime, "start it")
        assert "Started job-1 (delegate_agent)" in _result(events, "s1")
        runtime.jobs.listen(conversation_id, heard.append)  # the window shows it now
        [running] = runtime.jobs.active(conversation_id)
        await asyncio.to_thread(llm2.wait_for_hang)
        llm2.release()
        await runtime.jobs.wait([running])
        # a later turn collects it
        llm.add(tool_calls(("g1", "get_job", {"job_id": "job-1"})))
        llm.add(text("done"))
        _, later = await _turn(runtime, "how did it go?", conversation_id)
        return conversation_id, _result(later, "g1")

    conversation_id, collected = _run(runtime, body)
    assert '"status": "ok"' in collected and "thinking" in collected
    assert any(isinstance(e, ToolCallFinished) and e.call_id == "jobs/job-1" for e in heard)
    assert runtime.jobs.active(conversation_id) == []


def test_list_and_stop_a_running_job(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, llm2: ScriptedLLM, work: Path
):
    runtime = _runtime(make_runtime, work, llm2)
    llm2.add(hang())
    llm.add(tool_calls(("s1", "submit_job", _job("delegate_agent", agent="Slow", task="x"))))
    llm.add(tool_calls(("l1", "list_active_jobs", {})))
    llm.add(tool_calls(("x1", "stop_job", {"job_id": "job-1"})))
    llm.add(tool_calls(("g1", "get_job", {"job_id": "job-1"})))
    llm.add(text("stopped"))

    _, events = _run(runtime, lambda: _turn(runtime, "go"))

    listed = json.loads(_result(events, "l1"))
    assert listed["job_id"] == "job-1" and listed["agent"] == "Slow"
    assert listed["status"] in ("waiting", "running")
    assert _result(events, "x1") == "Stopped job-1."
    assert '"status": "stopped"' in _result(events, "g1")


def test_a_job_id_of_another_conversation_is_not_found(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, llm2: ScriptedLLM, work: Path
):
    runtime = _runtime(make_runtime, work, llm2)
    llm.add(tool_calls(("s1", "submit_job", _job("fs_read_file", path=str(work / "a.txt")))))
    llm.add(text("started"))
    llm.add(tool_calls(("g1", "get_job", {"job_id": "job-1"})))
    llm.add(text("nothing"))

    async def body() -> list[AgentEvent]:
        first, _ = await _turn(runtime, "start")
        await runtime.jobs.wait(runtime.jobs.active(first))
        _, other = await _turn(runtime, "peek")  # a new conversation
        return other

    events = _run(runtime, body)
    assert "there is no job 'job-1' in this conversation" in _result(events, "g1")


@pytest.mark.parametrize(
    ("job", "said"),
    [
        (_job("submit_job", tool="fs_read_file"), "jobs do not start or manage jobs"),
        (_job("no_such_tool"), "no_such_tool"),
        (_job("fs_read_file", nope=1), "invalid arguments"),
    ],
)
def test_a_job_that_could_never_run_is_refused_at_once(
    make_runtime: RuntimeFactory,
    llm: ScriptedLLM,
    llm2: ScriptedLLM,
    work: Path,
    job: dict[str, Any],
    said: str,
):
    runtime = _runtime(make_runtime, work, llm2)
    llm.add(tool_calls(("s1", "submit_job", job)))
    llm.add(text("ok"))
    conversation_id, events = _run(runtime, lambda: _turn(runtime, "go"))
    assert said in _result(events, "s1")
    assert runtime.jobs.active(conversation_id) == []


def test_nothing_starts_when_one_of_the_parallel_jobs_could_not_run(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, llm2: ScriptedLLM, work: Path
):
    runtime = _runtime(make_runtime, work, llm2)
    jobs = [_job("fs_read_file", path=str(work / "a.txt")), _job("no_such_tool")]
    llm.add(tool_calls(("p1", "submit_parallel_jobs", {"jobs": jobs})))
    llm.add(text("ok"))
    _, events = _run(runtime, lambda: _turn(runtime, "go"))
    assert "job 2 (no_such_tool)" in _result(events, "p1")
    jobs_started = [e for e in events if isinstance(e, ToolCallStarted) and e.parent_call_id]
    assert jobs_started == []


def test_jobs_of_a_conversation_wait_for_its_parallel_limit(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, llm2: ScriptedLLM, work: Path
):
    runtime = _runtime(make_runtime, work, llm2, max_parallel_jobs=1)
    llm2.add(hang("one"), text("two"))
    slow = _job("delegate_agent", agent="Slow", task="x")
    llm.add(tool_calls(("s1", "submit_job", slow), ("s2", "submit_job", slow)))
    llm.add(text("started"))

    async def body() -> list[str]:
        conversation_id, _ = await _turn(runtime, "go")
        await asyncio.to_thread(llm2.wait_for_hang)
        statuses = [job.status for job in runtime.jobs.active(conversation_id)]
        assert len(llm2.requests) == 1  # the second waits for the first
        llm2.release()
        await runtime.jobs.wait(runtime.jobs.active(conversation_id))
        return statuses

    assert sorted(_run(runtime, body)) == ["running", "waiting"]
    assert len(llm2.requests) == 2


def test_stop_in_a_conversation_stops_its_jobs_and_no_other(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, llm2: ScriptedLLM, work: Path
):
    runtime = _runtime(make_runtime, work, llm2)
    llm2.add(hang(), hang())
    slow = _job("delegate_agent", agent="Slow", task="x")
    llm.add(tool_calls(("s1", "submit_job", slow)), text("one"))
    llm.add(tool_calls(("s1", "submit_job", slow)), text("two"))

    async def body() -> tuple[str, str]:
        first, _ = await _turn(runtime, "a")
        second, _ = await _turn(runtime, "b")
        await asyncio.to_thread(llm2.wait_for_requests, 2)
        stopping = runtime.jobs.active(first)
        assert runtime.jobs.stop_conversation(first) == 1
        await runtime.jobs.wait(stopping)
        [kept] = runtime.jobs.active(second)
        assert runtime.jobs.get("job-1", first) is not None
        return first, kept.id

    first, kept = _run(runtime, body)
    job = runtime.jobs.get("job-1", first)
    assert job is not None and job.status == "stopped"
    assert kept == "job-2"


def test_a_failing_job_fails_alone(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, llm2: ScriptedLLM, work: Path
):
    runtime = _runtime(make_runtime, work, llm2)
    nobody = _job("delegate_agent", agent="Nobody", task="x")
    llm.add(tool_calls(("p1", "submit_parallel_jobs", {"jobs": [nobody]})))
    llm.add(text("the agent does not exist; going on"))
    _, events = _run(runtime, lambda: _turn(runtime, "go"))
    said = _result(events, "p1")
    assert "not all of them ok" in said and "there is no agent called 'Nobody'" in said
    answer = "".join(getattr(e, "text", "") for e in events)
    assert "going on" in answer


def test_a_sub_agent_cannot_start_jobs(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, llm2: ScriptedLLM, work: Path
):
    runtime = _runtime(make_runtime, work, llm2)
    llm.add(tool_calls(("d1", "delegate_agent", {"agent": "Slow", "task": "x"})))
    llm2.add(tool_calls(("c1", "submit_job", _job("fs_read_file", path=str(work / "a.txt")))))
    llm2.add(text("I cannot."))
    llm.add(text("ok"))
    _, events = _run(runtime, lambda: _turn(runtime, "go"))
    assert "cannot delegate further, start jobs" in _result(events, "d1/1")
    assert runtime.jobs.active(None) == []
