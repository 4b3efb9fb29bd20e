"""The agent loop end to end in-process: real providers over HTTP to the scripted server,
real file tools, the real store."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import BaseModel

from app.core.agent import Agent, Conversation, TurnSetup
from app.core.approval import ApprovalRequest, Decision, allow_all, deny_all
from app.core.events import (
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
from app.core.pipeline import CallPipeline, ToolEnvironment
from app.core.providers import make_provider
from app.core.providers.base import ProviderConfig
from app.core.rules import Rule, RuleBook, RuleDecision
from app.core.settings import Settings
from app.core.sources import TrustStore
from app.core.store import Store
from tests.fakellm import ScriptedLLM, error, hang, text, tool_calls
from tests.fixtures_qt import wait_until
from tools.redact import Tripwire
from tools.registry import ToolRegistry
from tools.runner import ToolRunner
from tools.session import ToolSession
from tools.spec import Operation, ToolContext, ToolManifest

SECRET = "sk-test-SECRET-9f8e7d6c5b4a"


class Empty(BaseModel):
    pass


def meet_barrier(barrier: threading.Barrier):
    def meet(args: Empty, ctx: ToolContext) -> str:
        ctx.progress("waiting for the other call")
        barrier.wait()
        return "met"

    return meet


def wait_until_cancelled(args: Empty, ctx: ToolContext) -> str:
    ctx.progress("started")
    ctx.cancel_event.wait(timeout=10)
    ctx.check_cancelled()
    return "not cancelled"


class Env:
    def __init__(self, llm: ScriptedLLM, root: Path, home: Path, kind: str = "openai") -> None:
        self.llm = llm
        self.root = root
        self.registry = ToolRegistry.default(None, entry_points=False)
        barrier = threading.Barrier(2, timeout=5)
        self.registry.add(
            [
                ToolManifest(
                    name="test_meet",
                    category="test",
                    description="Meet.",
                    params=Empty,
                    impl=meet_barrier(barrier),
                ),
                ToolManifest(
                    name="test_block",
                    category="test",
                    description="Block until cancelled.",
                    params=Empty,
                    impl=wait_until_cancelled,
                    operations={Operation.READ},
                ),
            ]
        )
        self.tripwire = Tripwire({SECRET})
        self.runner = ToolRunner(self.registry, tripwire=self.tripwire)
        self.settings = Settings()
        self.settings.files.allowed_roots = [str(root)]
        self.store = Store(home / "deskhand.db")
        base = llm.openai_base_url if kind == "openai" else llm.anthropic_base_url
        self.provider = make_provider(
            ProviderConfig(
                kind=kind, base_url=base, model="scripted", api_key=SECRET, max_retries=0
            )
        )
        self.home = home
        #: One loop per test: the provider's connection pool belongs to the loop that made it.
        self.loop = asyncio.new_event_loop()

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def agent(self, approver=allow_all, rules: Sequence[Rule] = (), **kw) -> Agent:
        """An agent whose pipeline holds `rules` in memory (a RuleBook without a file)."""
        pipeline = CallPipeline(
            self.runner,
            ToolEnvironment(home=self.home, settings=self.settings),
            rules=RuleBook(None, list(rules)),
            trust=TrustStore(None),
            approver=approver,
            recorder=self.store,
            tripwire=self.tripwire,
        )
        setup = TurnSetup(system_prompt="You are a test.", settings=self.settings, **kw)
        return Agent(
            self.provider, pipeline, tripwire=self.tripwire, recorder=self.store, setup=setup
        )

    def conversation(self) -> Conversation:
        return Conversation(ToolSession(self.registry), self.store.create_conversation())

    def close(self) -> None:
        self.runner.shutdown()
        self.store.close()


@pytest.fixture(params=["openai", "anthropic"])
def env(request, llm, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    e = Env(llm, root, home, request.param)
    yield e
    e.run(e.provider.aclose())
    e.loop.close()
    e.close()


async def collect(agent: Agent, conv: Conversation, message: str) -> list:
    return [event async for event in agent.run(conv, message)]


def of(events, kind):
    return [e for e in events if isinstance(e, kind)]


def test_streams_text_and_stores_the_exchange(env):
    env.llm.add(text("Hello there, how can I help?", chunk_size=3))
    conv = env.conversation()
    events = env.run(collect(env.agent(), conv, "hi"))
    assert "".join(e.text for e in of(events, TextDelta)) == "Hello there, how can I help?"
    assert len(of(events, TextDelta)) > 5
    done = events[-1]
    assert isinstance(done, TurnFinished) and done.stop_reason == "end_turn"
    assert done.usage.output_tokens > 0
    stored = env.store.load_messages(conv.id)
    assert [(m.role, m.content) for m in stored] == [
        ("user", "hi"),
        ("assistant", "Hello there, how can I help?"),
    ]


def test_parallel_writes_then_answer(env):
    env.llm.add(
        tool_calls(
            ("c1", "fs_write_file", {"path": str(env.root / "a.txt"), "content": "alpha\n"}),
            ("c2", "fs_write_file", {"path": str(env.root / "b.txt"), "content": "beta\n"}),
            text_before="Writing both.",
            arg_chunk_size=3,
        )
    )
    env.llm.add(text("Both files are written."))
    conv = env.conversation()
    asked: list[ApprovalRequest] = []

    async def approver(req: ApprovalRequest) -> Decision:
        asked.append(req)
        return Decision.ALLOW_ONCE

    events = env.run(collect(env.agent(approver), conv, "write a and b"))
    assert (env.root / "a.txt").read_text() == "alpha\n"
    assert (env.root / "b.txt").read_text() == "beta\n"
    assert sorted(r.tool for r in asked) == ["fs_write_file", "fs_write_file"]
    assert all(r.preview for r in asked), "approval shows what will happen"
    finished = of(events, ToolCallFinished)
    assert {f.call_id for f in finished} == {"c1", "c2"} and all(f.result.ok for f in finished)
    second = env.llm.requests[1].body
    sent = json.dumps(second)
    assert "c1" in sent and "c2" in sent  # both results went back to the model
    kinds = [m.role for m in env.store.load_messages(conv.id)]
    assert kinds == ["user", "assistant", "tool", "tool", "assistant"]
    rows = env.store.list_tool_calls(conv.id)
    assert {r.status for r in rows} == {"ok"}


def test_denied_write_changes_nothing_and_tells_the_model(env):
    target = env.root / "nope.txt"
    env.llm.add(tool_calls(("c1", "fs_write_file", {"path": str(target), "content": "x"})))
    env.llm.add(text("Understood, I did not write it."))
    conv = env.conversation()
    events = env.run(collect(env.agent(deny_all), conv, "write it"))
    assert not target.exists()
    result = of(events, ToolCallFinished)[0].result
    assert not result.ok and "declined" in result.content
    assert of(events, ApprovalDecided)[0].decision is Decision.DENY
    assert "declined" in json.dumps(env.llm.requests[1].body)
    assert env.store.list_approvals(conv.id)[0].decision == "deny"


def test_deny_rule_beats_always_allow_without_asking(env):
    target = env.root / "x.txt"
    env.llm.add(tool_calls(("c1", "fs_write_file", {"path": str(target), "content": "x"})))
    env.llm.add(text("ok"))
    rules = [
        Rule(tool="fs_*", decision=RuleDecision.ALLOW),
        Rule(tool="fs_write_file", decision=RuleDecision.DENY),
    ]

    async def must_not_ask(req: ApprovalRequest) -> Decision:
        raise AssertionError("a deny rule must not ask")

    events = env.run(collect(env.agent(must_not_ask, rules), env.conversation(), "go"))
    assert not target.exists()
    assert "deny rule" in of(events, ToolCallFinished)[0].result.content


def test_always_allow_is_asked_once_and_persisted(env):
    for i in range(2):
        env.llm.add(
            tool_calls(
                (f"c{i}", "fs_write_file", {"path": str(env.root / f"{i}.txt"), "content": "x"})
            )
        )
        env.llm.add(text("done"))
    asked: list[str] = []

    async def approver(req):
        asked.append(req.call_id)
        return Decision.ALWAYS_ALLOW

    agent = env.agent(approver)
    conv = env.conversation()
    env.run(collect(agent, conv, "one"))
    env.run(collect(agent, conv, "two"))
    assert asked == ["c0"]
    [rule] = agent.pipeline.rules.rules()
    # the narrowest useful rule: this tool, in this folder — not "any arguments"
    assert (rule.tool, rule.decision, rule.matcher.kind) == ("fs_write_file", "allow", "folder")
    assert Path(rule.matcher.value) == env.root.resolve()
    assert (env.root / "1.txt").exists()


def test_invalid_calls_become_errors_the_model_can_fix(env):
    env.llm.add(
        tool_calls(
            ("c1", "fs_read_fil", {"path": "a"}),
            ("c2", "fs_read_file", '{"path": '),
            ("c3", "fs_read_file", {"pth": "a"}),
        )
    )
    (env.root / "a.txt").write_text("content A")
    env.llm.add(tool_calls(("c4", "fs_read_file", {"path": str(env.root / "a.txt")})))
    env.llm.add(text("It says content A."))
    events = env.run(collect(env.agent(), env.conversation(), "read a"))
    results = {f.call_id: f.result for f in of(events, ToolCallFinished)}
    assert "Did you mean fs_read_file" in results["c1"].content
    assert "not valid JSON" in results["c2"].content
    assert "path: Field required" in results["c3"].content
    assert results["c4"].ok and "content A" in results["c4"].content
    assert isinstance(events[-1], TurnFinished)


def test_endless_invalid_calls_are_bounded(env):
    for i in range(3):
        env.llm.add(tool_calls((f"c{i}", "no_such_tool", {})))
    events = env.run(collect(env.agent(), env.conversation(), "go"))
    assert isinstance(events[-1], Error) and events[-1].kind == "invalid_tool_calls"
    assert len(env.llm.requests) == 3


def test_max_steps_stops_the_loop(env):
    for i in range(2):
        env.llm.add(tool_calls((f"c{i}", "fs_list_dir", {"path": str(env.root)})))
    events = env.run(collect(env.agent(max_steps=2), env.conversation(), "loop"))
    assert isinstance(events[-1], TurnFinished) and events[-1].stop_reason == "max_steps"


def test_parallel_calls_run_concurrently_with_progress(env):
    env.llm.add(tool_calls(("m1", "test_meet", {}), ("m2", "test_meet", {})))
    env.llm.add(text("met"))
    events = env.run(collect(env.agent(), env.conversation(), "meet"))
    contents = [f.result.content for f in of(events, ToolCallFinished)]
    assert len(contents) == 2 and all("met" in c for c in contents)
    assert {p.call_id for p in of(events, ToolProgress)} == {"m1", "m2"}


def test_provider_error_is_an_event_and_keeps_history(env):
    env.llm.add(error(401))
    conv = env.conversation()
    events = env.run(collect(env.agent(), conv, "hello?"))
    assert isinstance(events[-1], Error) and events[-1].kind == "auth"
    assert SECRET not in events[-1].message
    assert [m.content for m in env.store.load_messages(conv.id)] == ["hello?"]


def test_secret_never_reaches_the_model(env):
    (env.root / "env.txt").write_text(f"OPENAI_API_KEY={SECRET}\n")
    env.llm.add(tool_calls(("c1", "fs_read_file", {"path": str(env.root / "env.txt")})))
    env.llm.add(text("The key is redacted."))
    events = env.run(collect(env.agent(), env.conversation(), "show env.txt"))
    assert "[redacted]" in of(events, ToolCallFinished)[0].result.content
    for recorded in env.llm.requests:
        assert SECRET not in json.dumps(recorded.body)


def test_cancel_mid_stream_closes_promptly_and_keeps_partial(env):
    env.llm.add(hang("partial answer"))
    conv = env.conversation()
    agent = env.agent()
    seen: list[str] = []

    async def body():
        # stop as the user would: cancel the task consuming the stream
        task = asyncio.create_task(_consume_until(agent, conv, seen))
        await wait_until(lambda: "".join(seen) == "partial answer", what="the partial answer")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    env.run(body())
    env.llm.wait_for_disconnects(1, timeout=5)
    stored = env.store.load_messages(conv.id)
    assert [m.content for m in stored] == ["go", "partial answer"]


def test_cancel_during_a_tool_keeps_history_valid(env):
    env.llm.add(tool_calls(("b1", "test_block", {})))
    conv = env.conversation()
    agent = env.agent()

    async def body():
        events: list = []
        task = asyncio.create_task(_consume_into(agent, conv, events))
        await wait_until(lambda: of(events, ToolProgress), what="the tool to report progress")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    env.run(body())
    stored = env.store.load_messages(conv.id)
    assert stored[-1].role == "tool" and stored[-1].tool_call_id == "b1"
    assert "Cancelled" in stored[-1].content
    assert env.store.list_tool_calls(conv.id)[0].status == "cancelled"


def test_approval_request_precedes_decision(env):
    env.llm.add(tool_calls(("c1", "fs_write_file", {"path": str(env.root / "f"), "content": "1"})))
    env.llm.add(text("ok"))
    events = env.run(collect(env.agent(), env.conversation(), "go"))
    kinds = [type(e) for e in events]
    assert kinds.index(ToolCallStarted) < kinds.index(ApprovalRequested)
    assert kinds.index(ApprovalRequested) < kinds.index(ApprovalDecided)
    assert kinds.index(ApprovalDecided) < kinds.index(ToolCallFinished)


async def _consume_until(agent, conv, seen):
    async for event in agent.run(conv, "go"):
        if isinstance(event, TextDelta):
            seen.append(event.text)


async def _consume_into(agent, conv, events):
    async for event in agent.run(conv, "go"):
        events.append(event)


def test_a_store_that_cannot_write_warns_but_the_turn_goes_on(env):
    env.llm.add(text("answer despite a full disk"))
    conv = env.conversation()

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    env.store.append_message = disk_full
    events = env.run(collect(env.agent(), conv, "hi"))
    notices = of(events, Notice)
    assert len(notices) == 1 and "No space left on device" in notices[0].message
    assert isinstance(events[-1], TurnFinished)
    assert [m.content for m in conv.messages] == ["hi", "answer despite a full disk"]


def test_retry_continues_from_history_without_repeating_the_question(env):
    env.llm.add(error(503))
    env.llm.add(text("second time lucky"))
    conv = env.conversation()
    first = env.run(collect(env.agent(), conv, "question"))
    assert isinstance(first[-1], Error) and first[-1].retryable
    again = env.run(collect(env.agent(), conv, None))
    assert isinstance(again[-1], TurnFinished)
    sent = [m for m in env.llm.requests[-1].body["messages"] if m["role"] != "system"]
    assert [m["content"] for m in sent] == ["question"]
    assert [m.content for m in env.store.load_messages(conv.id)] == [
        "question",
        "second time lucky",
    ]


def test_a_read_tool_can_escalate_one_call_to_ask(env):
    def open_site(args, ctx):
        return "opened"

    def new_site(args, ctx):
        return "a site not visited before" if args.site != "known" else None

    class Site(BaseModel):
        site: str

    env.registry.add(
        [
            ToolManifest(
                name="test_open",
                category="test",
                description="Open.",
                params=Site,
                impl=open_site,
                escalate=new_site,
            ),
        ]
    )
    env.llm.add(
        tool_calls(("k", "test_open", {"site": "known"}), ("n", "test_open", {"site": "new"}))
    )
    env.llm.add(text("ok"))
    asked: list[str] = []

    async def approver(req):
        asked.append(req.call_id)
        return Decision.DENY

    events = env.run(
        collect(
            env.agent(approver, [Rule(tool="test_*", decision=RuleDecision.ALLOW)]),
            env.conversation(),
            "go",
        )
    )
    assert asked == ["n"]
    results = {f.call_id: f.result.ok for f in of(events, ToolCallFinished)}
    assert results == {"k": True, "n": False}
