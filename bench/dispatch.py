"""Dispatch overhead: a no-op tool through the whole call pipeline (validate → classify →
decide against 40 rules → run in the pool → redact 50 known secrets → cap → label), against
the floor of handing the same function to the same thread pool. Also 32 concurrent sleeping
tools vs one pool round.

Run: .venv/bin/python bench/dispatch.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import BaseModel

from app.core.approval import deny_all
from app.core.pipeline import CallPipeline, ToolEnvironment
from app.core.rules import Matcher, Rule, RuleBook, RuleDecision
from app.core.sources import TrustStore
from tools.redact import Tripwire
from tools.registry import ToolRegistry
from tools.runner import ToolRunner
from tools.session import ToolSession
from tools.spec import Operation, ToolContext, ToolManifest

CALLS = 5_000
CONCURRENT = 32
SLEEP_S = 0.2


class NoArgs(BaseModel):
    value: int = 0


def noop(args: NoArgs, ctx: ToolContext) -> str:
    return "ok"


def sleeper(args: NoArgs, ctx: ToolContext) -> str:
    time.sleep(SLEEP_S)
    return "slept"


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    for name, fn in (("noop", noop), ("sleeper", sleeper)):
        reg.add(
            [
                ToolManifest(
                    name=name,
                    category="bench",
                    description="x.",
                    params=NoArgs,
                    operations=frozenset({Operation.READ}),
                    impl=fn,
                )
            ]
        )
    return reg


def pipeline(runner: ToolRunner, home: Path) -> CallPipeline:
    rules = [
        Rule(tool=f"never_{i}", decision=RuleDecision.DENY) for i in range(20)
    ] + [
        Rule(
            tool=f"other_{i}",
            decision=RuleDecision.ALLOW,
            matcher=Matcher(kind="path", value=f"/srv/{i}"),
        )
        for i in range(20)
    ]
    return CallPipeline(
        runner,
        ToolEnvironment(home=home),
        rules=RuleBook(None, rules),
        trust=TrustStore(None),
        approver=deny_all,
        tripwire=runner.tripwire,
    )


async def dispatch_latency(runner: ToolRunner, home: Path) -> list[float]:
    calls = pipeline(runner, home)
    session = ToolSession(runner.registry)
    samples = []
    for i in range(CALLS + 200):
        start = time.perf_counter()
        outcome = await calls.call(str(i), "noop", '{"value": 1}', session=session)
        elapsed = time.perf_counter() - start
        assert outcome.result.ok, outcome.result.content
        if i >= 200:  # warm-up
            samples.append(elapsed)
    return samples


async def floor_latency(runner: ToolRunner, home: Path) -> list[float]:
    """The same function handed to the same pool, with nothing around it."""
    loop = asyncio.get_running_loop()
    pool = runner._pool
    samples = []
    for i in range(CALLS + 200):
        start = time.perf_counter()
        await loop.run_in_executor(pool, noop, NoArgs(value=1), ToolContext(home=home))
        elapsed = time.perf_counter() - start
        if i >= 200:
            samples.append(elapsed)
    return samples


async def concurrent_round(runner: ToolRunner, home: Path) -> float:
    calls = pipeline(runner, home)
    session = ToolSession(runner.registry)
    start = time.perf_counter()
    results = await asyncio.gather(
        *(calls.call(f"s{i}", "sleeper", {}, session=session) for i in range(CONCURRENT))
    )
    assert all(r.result.ok for r in results)
    return time.perf_counter() - start


def main() -> None:
    secrets = {f"secret-value-{i:04d}-abcdef" for i in range(50)}
    runner = ToolRunner(registry(), max_workers=CONCURRENT, tripwire=Tripwire(secrets))
    home = Path(tempfile.mkdtemp())
    try:
        floor = sorted(asyncio.run(floor_latency(runner, home)))
        samples = sorted(asyncio.run(dispatch_latency(runner, home)))
        wall = asyncio.run(concurrent_round(runner, home))
    finally:
        runner.shutdown()
    p50 = statistics.median(samples) * 1e3
    p99 = samples[int(len(samples) * 0.99)] * 1e3
    f50 = statistics.median(floor) * 1e3
    print(
        f"whole pipeline per call ({CALLS} calls, 40 rules, 50 known secrets): "
        f"p50 {p50:.3f} ms, p99 {p99:.3f} ms (target p50 < 0.5 ms)"
    )
    print(f"floor (the bare thread-pool hand-off): p50 {f50:.3f} ms; ratio {p50 / f50:.1f}x")
    print(
        f"{CONCURRENT} concurrent tools sleeping {SLEEP_S * 1000:.0f} ms each: "
        f"{wall * 1000:.0f} ms wall ({wall / SLEEP_S:.2f} pool rounds)"
    )


if __name__ == "__main__":
    main()
