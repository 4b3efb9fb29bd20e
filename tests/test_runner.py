"""The runner: every outcome becomes a ToolResult; cancellation propagates; the tripwire holds."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from tools.redact import Tripwire
from tools.registry import ToolRegistry
from tools.runner import ToolRunner, always_asks
from tools.spec import Operation, Subject, ToolContext, ToolError, ToolManifest, ToolResult

SECRET = "sk-live-0123456789abcdef"


class Echo(BaseModel):
    text: str = Field(..., max_length=50_000)
    times: int = Field(1, ge=1, le=3)


class Empty(BaseModel):
    pass


def echo(args: Echo, ctx: ToolContext) -> str:
    return args.text * args.times


def leak(args: Empty, ctx: ToolContext) -> dict:
    return {
        "note": f"key is {SECRET}",
        "api_key": "whatever-value",
        "max_tokens": 5,
        "nested": [{"password": "hunter22"}],
    }


def crash(args: Empty, ctx: ToolContext) -> None:
    raise RuntimeError("disk on fire")


def refuse(args: Empty, ctx: ToolContext) -> None:
    raise ToolError("that file is too big; ask for a line range")


def wait_for_cancel(args: Empty, ctx: ToolContext) -> str:
    if not ctx.cancel_event.wait(timeout=10):
        return "never cancelled"
    ctx.check_cancelled()
    return "unreachable"


def thread_name(args: Empty, ctx: ToolContext) -> str:
    return threading.current_thread().name


def tool(name: str, fn, params=Empty, **kw) -> ToolManifest:
    return ToolManifest(
        name=name,
        category="test",
        description=f"{name}.",
        params=params,
        operations=frozenset({Operation.READ}),
        impl=fn,
        **kw,
    )


@pytest.fixture
def runner():
    registry = ToolRegistry()
    registry.add(
        [
            tool("echo", echo, Echo),
            tool("leak", leak),
            tool("crash", crash),
            tool("refuse", refuse),
            tool("slow", wait_for_cancel, timeout=0.2),
            tool("where", thread_name, thread="browser"),
            tool("missing_dep", echo, Echo, requires=("surely_not_installed_pkg_xyz",)),
            tool("bad_impl", "tools.nonexistent_module:fn"),
        ]
    )
    r = ToolRunner(registry, output_cap=100, tripwire=Tripwire({SECRET, "hunter22"}))
    yield r
    r.shutdown()


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(call_id="c1", home=tmp_path)


def run(runner: ToolRunner, name: str, args, tmp_path: Path) -> ToolResult:
    return asyncio.run(runner.run(name, args, ctx(tmp_path)))


def test_valid_call_returns_content(runner, tmp_path):
    result = run(runner, "echo", '{"text": "ab", "times": 2}', tmp_path)
    assert result.ok and result.content == "abab"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ('{"text": "a"', "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"times": 2}', "text: Field required"),
        ('{"text": "a", "times": 9}', "times: Input should be less than or equal to 3"),
    ],
)
def test_bad_arguments_become_readable_errors(runner, tmp_path, args, expected):
    result = run(runner, "echo", args, tmp_path)
    assert not result.ok
    assert expected in result.error


def test_unknown_tool_suggests_close_names(runner, tmp_path):
    result = run(runner, "ecko", "{}", tmp_path)
    assert not result.ok
    assert "no tool named 'ecko'" in result.error and "echo" in result.error


def test_exceptions_and_tool_errors_do_not_escape(runner, tmp_path):
    crashed = run(runner, "crash", {}, tmp_path)
    assert not crashed.ok and "RuntimeError: disk on fire" in crashed.error
    refused = run(runner, "refuse", {}, tmp_path)
    assert refused.error == "that file is too big; ask for a line range"


def test_unavailable_and_unloadable_tools(runner, tmp_path):
    assert (
        "surely_not_installed_pkg_xyz" in run(runner, "missing_dep", '{"text":"a"}', tmp_path).error
    )
    assert "could not be loaded" in run(runner, "bad_impl", {}, tmp_path).error


def test_output_is_capped_with_a_note(runner, tmp_path):
    result = run(runner, "echo", {"text": "x" * 500}, tmp_path)
    assert result.truncated
    assert result.content.startswith("x" * 100)
    assert "showing 100 of 500 characters" in result.content


def test_tripwire_scrubs_secret_values_and_credential_fields(runner, tmp_path):
    result = run(runner, "leak", {}, tmp_path)
    assert SECRET not in result.content and SECRET not in str(result.data)
    assert result.data["note"] == "key is [redacted]"
    assert result.data["api_key"] == "[redacted]"
    assert result.data["max_tokens"] == 5
    assert result.data["nested"][0]["password"] == "[redacted]"
    assert "hunter22" not in result.content


def test_timeout_stops_the_call_and_signals_the_tool(runner, tmp_path):
    context = ctx(tmp_path)
    result = asyncio.run(runner.run("slow", {}, context))
    assert not result.ok and "did not finish within 0.2 s" in result.error
    assert context.cancel_event.is_set()


def test_cancelling_the_caller_propagates_and_signals_the_tool(runner, tmp_path):
    context = ctx(tmp_path)

    async def body():
        task = asyncio.create_task(runner.run("slow", {}, context, timeout=30))
        await asyncio.sleep(0)  # let it reach the pool
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(body())
    assert context.cancel_event.is_set()


def test_thread_bound_tools_share_one_dedicated_thread(runner, tmp_path):
    names = {run(runner, "where", {}, tmp_path).content for _ in range(3)}
    assert len(names) == 1 and names.pop().startswith("deskhand-browser")


def test_many_calls_run_concurrently_in_the_pool(tmp_path):
    barrier = threading.Barrier(16, timeout=5)

    def meet(args: Empty, ctx: ToolContext) -> str:
        barrier.wait()  # breaks (and fails the call) unless all 16 run at once
        return "met"

    registry = ToolRegistry()
    registry.add([tool("meet", meet)])
    runner = ToolRunner(registry, max_workers=16)

    async def body():
        return await asyncio.gather(*(runner.run("meet", {}, ctx(tmp_path)) for _ in range(16)))

    try:
        results = asyncio.run(body())
    finally:
        runner.shutdown()
    assert [r.content for r in results] == ["met"] * 16


# ---- classify: a call's own hooks, in one hop --------------------------------------------


def _hooked_runner(seen: list[tuple[str, str]]) -> ToolRunner:
    """A runner whose one tool records which hook ran on which thread."""

    def hook(name: str, answer: object):
        def run(args: Empty, ctx: ToolContext) -> object:
            seen.append((name, threading.current_thread().name))
            return answer

        return run

    registry = ToolRegistry()
    registry.add(
        [
            tool(
                "hooked",
                echo,
                Empty,
                escalate=hook("escalate", f"it sends {SECRET} away"),
                subject=hook("subject", Subject(target="there")),
                summary_line=hook("summary_line", f"Send {SECRET}"),
                preview=hook("preview", f"will send {SECRET}"),
            )
        ]
    )
    return ToolRunner(registry, tripwire=Tripwire({SECRET}))


def test_classify_runs_every_hook_in_one_job_and_masks_what_they_say(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []
    runner = _hooked_runner(seen)
    try:
        manifest, params = runner.validate("hooked", {})
        found = asyncio.run(runner.classify(manifest, params, ctx(tmp_path), asks=always_asks))
    finally:
        runner.shutdown()
    assert [name for name, _ in seen] == ["escalate", "subject", "summary_line", "preview"]
    assert len({thread for _, thread in seen}) == 1  # one hop, one thread
    assert found.subject == Subject(target="there")
    texts = [found.escalation.reason, found.summary, found.preview]
    assert all(SECRET not in t and "[redacted]" in t for t in texts)


def test_classify_asks_for_the_card_only_for_a_call_that_asks(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []
    runner = _hooked_runner(seen)
    told: list[tuple[object, Subject]] = []

    def asks(escalation: object, subject: Subject) -> bool:
        told.append((escalation, subject))
        return False

    try:
        manifest, params = runner.validate("hooked", {})
        found = asyncio.run(runner.classify(manifest, params, ctx(tmp_path), asks=asks))
    finally:
        runner.shutdown()
    assert [name for name, _ in seen] == ["escalate", "subject"]
    assert found.summary is None and found.preview is None
    assert told == [(found.escalation, found.subject)]


def test_classify_keeps_a_given_subject_without_asking_the_tool(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []
    runner = _hooked_runner(seen)
    given = Subject(target="a third party")
    try:
        manifest, params = runner.validate("hooked", {})
        found = asyncio.run(runner.classify(manifest, params, ctx(tmp_path), subject=given))
    finally:
        runner.shutdown()
    assert found.subject is given and "subject" not in [name for name, _ in seen]
