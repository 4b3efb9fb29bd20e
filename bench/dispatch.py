"""Dispatch overhead: a no-op tool through approval policy + runner (validation, thread pool,
output cap, secret tripwire). Also 32 concurrent sleeping tools vs one pool round.

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

from app.core.approval import ApprovalPolicy, Verdict
from tools.registry import ToolRegistry
from tools.runner import ToolRunner
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


async def dispatch_latency(runner: ToolRunner, home: Path) -> list[float]:
    policy = ApprovalPolicy(deny=["never_*"], always_allow=["bench_*"])
    manifest = runner.registry.get("noop")
    samples = []
    for i in range(CALLS + 200):
        start = time.perf_counter()
        assert policy.verdict(manifest) is Verdict.ALLOW
        result = await runner.run("noop", '{"value": 1}', ToolContext(call_id=str(i), home=home))
        elapsed = time.perf_counter() - start
        assert result.ok
        if i >= 200:  # warm-up
            samples.append(elapsed)
    return samples


async def concurrent_round(runner: ToolRunner, home: Path) -> float:
    start = time.perf_counter()
    results = await asyncio.gather(
        *(runner.run("sleeper", {}, ToolContext(home=home)) for _ in range(CONCURRENT))
    )
    assert all(r.ok for r in results)
    return time.perf_counter() - start


def main() -> None:
    secrets = {f"secret-value-{i:04d}-abcdef" for i in range(50)}
    runner = ToolRunner(registry(), max_workers=CONCURRENT, secrets=lambda: secrets)
    home = Path(tempfile.mkdtemp())
    try:
        samples = asyncio.run(dispatch_latency(runner, home))
        wall = asyncio.run(concurrent_round(runner, home))
    finally:
        runner.shutdown()
    samples.sort()
    p50 = statistics.median(samples) * 1e3
    p99 = samples[int(len(samples) * 0.99)] * 1e3
    print(
        f"dispatch overhead per call ({CALLS} calls, 50 known secrets): "
        f"p50 {p50:.3f} ms, p99 {p99:.3f} ms"
    )
    print(
        f"{CONCURRENT} concurrent tools sleeping {SLEEP_S * 1000:.0f} ms each: "
        f"{wall * 1000:.0f} ms wall ({wall / SLEEP_S:.2f} pool rounds)"
    )


if __name__ == "__main__":
    main()
