"""Memory over a long session: RSS over N turns (default 10,000) of the real agent loop
against the scripted model over real HTTP, headless, in one process.

Each turn is what the window does for one message (app/ui/controller.py `_run`): the
provider config is resolved, a provider (its own httpx client) and an agent are made, the
turn runs with the user's rules and the real tool pool, the provider is closed. Odd turns
the model calls two read-only file tools (list the allowed folder, read a file; no approval
question) before it streams its ~600-character answer; even turns are plain answers.
The scripted model (tests/fakellm.py) runs in its own process (bench/llm_server.py): it
records every request, which would otherwise be measured as the app's growth.

A new conversation every CONVERSATION_TURNS (20) turns: that is how the app is used (a
chat is tens of turns, then "New chat"), and it measures what the process keeps across
turns, not one history that is meant to grow (a 10,000-turn history would be compacted,
which needs the model's summary in the script at the point compaction asks for it).

RSS (VmRSS) is read every 500 turns; warm-up is the first 10 % of the turns (1,000 of
10,000). Growth after warm-up = (last - at warm-up) / at warm-up; target ≤ 10 %.
Then a second process with tracemalloc on (--trace-turns, default 2,000; ~0.4 s a turn)
lists the allocation sites that grew most between its half-way turn and its end.

Run: .venv/bin/python bench/soak.py [--turns 10000] [--trace-turns 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pyc_cache import compile_project
from bench.scripted import (
    configure_home,
    make_files,
    rss_mib,
    served,
)

CONVERSATION_TURNS = 20
SAMPLE_EVERY = 500
TOP_SITES = 12


class Approvals:
    """Records approval questions: the read-only calls in an allowed folder need none."""

    def __init__(self) -> None:
        self.asked = 0

    async def __call__(self, request: object) -> object:
        from app.core.approval import Decision

        self.asked += 1
        return Decision.DENY


async def one_turn(runtime: object, conv: object, approver: Approvals, prompt: str) -> int:
    """Runs one user turn the way the window does; returns the tool results seen."""
    from app.core.events import Error, ToolCallFinished
    from app.core.providers import make_provider

    loop = asyncio.get_running_loop()
    config = await loop.run_in_executor(None, runtime.provider_config)  # type: ignore[attr-defined]
    provider = make_provider(config)
    results = 0
    try:
        agent = runtime.make_agent(provider, approver)  # type: ignore[attr-defined]
        async for event in agent.run(conv, prompt):
            if isinstance(event, ToolCallFinished):
                results += 1
                if not event.result.ok:
                    raise RuntimeError(f"tool failed: {event.result.content[:200]}")
            elif isinstance(event, Error):
                raise RuntimeError(f"turn failed: {event.message}")
    finally:
        await provider.aclose()
    return results


async def soak(turns: int, trace: bool) -> dict[str, object]:
    from app.core.runtime import Runtime

    work = Path(tempfile.mkdtemp(prefix="deskhand-soak-"))
    root = work / "files"
    make_files(root)
    with served("soak", root, turns) as base_url:
        configure_home(work / "home", base_url, root)
        runtime = Runtime(work / "home", entry_points=False)
        try:
            return await turns_loop(runtime, root, turns, trace)
        finally:
            runtime.close()


async def turns_loop(runtime: object, root: Path, turns: int, trace: bool) -> dict[str, object]:
    """The turns, RSS samples and (with `trace`) the tracemalloc growth after warm-up."""
    approver = Approvals()
    # the traced run is shorter: its snapshot is taken half-way
    warmup = max(1, turns // 2 if trace else turns // 10)
    samples: list[tuple[int, float]] = [(0, rss_mib())]
    snapshot_at_warmup: tracemalloc.Snapshot | None = None
    tool_results = 0
    conv = None
    start = time.perf_counter()
    for n in range(1, turns + 1):
        if conv is None or n % CONVERSATION_TURNS == 1:
            conv = runtime.open_conversation(None)  # type: ignore[attr-defined]
        tool_results += await one_turn(runtime, conv, approver, f"question {n}")
        if n % SAMPLE_EVERY == 0 or n in (warmup, turns):
            samples.append((n, rss_mib()))
        if trace and n == warmup:
            gc.collect()
            snapshot_at_warmup = tracemalloc.take_snapshot()
    elapsed = time.perf_counter() - start
    gc.collect()
    result: dict[str, object] = {
        "turns": turns,
        "warmup": warmup,
        "seconds": elapsed,
        "samples": samples,
        "after_gc": rss_mib(),
        "tool_results": tool_results,
        "asked": approver.asked,
    }
    if snapshot_at_warmup is not None:
        result["sites"] = top_growth(snapshot_at_warmup, tracemalloc.take_snapshot())
    return result


def top_growth(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot) -> list[str]:
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]
    stats = after.filter_traces(ignore).compare_to(before.filter_traces(ignore), "traceback")
    lines = []
    for stat in stats[:TOP_SITES]:
        frames = [f"{f.filename}:{f.lineno}" for f in stat.traceback[-4:]]
        lines.append(
            f"{stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks  "
            + " <- ".join(reversed(frames))
        )
    return lines


def at(samples: list[tuple[int, float]], turn: int) -> float:
    return next(rss for n, rss in samples if n == turn)


def report(result: dict[str, object]) -> None:
    samples: list[tuple[int, float]] = result["samples"]  # type: ignore[assignment]
    warmup = int(result["warmup"])  # type: ignore[arg-type]
    turns = int(result["turns"])  # type: ignore[arg-type]
    seconds = float(result["seconds"])  # type: ignore[arg-type]
    base, last = at(samples, warmup), samples[-1][1]
    growth = (last - base) / base * 100
    print(
        f"soak: {turns} turns ({turns + (turns + 1) // 2} model requests over HTTP, "
        f"{result['tool_results']} tool calls, {result['asked']} approval questions) "
        f"in {seconds:.0f} s ({seconds / turns * 1000:.1f} ms/turn)"
    )
    print("  turn    RSS MiB")
    for n, rss in samples:
        print(f"  {n:>6}  {rss:8.1f}")
    print(
        f"  RSS at warm-up (turn {warmup}) {base:.1f} MiB -> end {last:.1f} MiB: "
        f"{growth:+.1f} % (target ≤ 10 %); after gc.collect() {result['after_gc']:.1f} MiB"
    )
    per_k = (last - base) / max(1, turns - warmup) * 1000
    print(f"  slope after warm-up: {per_k:+.2f} MiB per 1,000 turns")


def main() -> None:
    compile_project()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument(
        "--trace-turns",
        type=int,
        default=2_000,
        help="turns of the second run with tracemalloc (0: skip it)",
    )
    parser.add_argument("--child-trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_trace:
        tracemalloc.start(8)
        print(json.dumps(asyncio.run(soak(args.turns, trace=True))))
        return
    report(asyncio.run(soak(args.turns, trace=False)))
    if args.trace_turns <= 0:
        return
    out = subprocess.run(
        [sys.executable, __file__, "--turns", str(args.trace_turns), "--child-trace"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    traced = json.loads(out.strip().splitlines()[-1])
    print(
        f"tracemalloc run ({traced['turns']} turns, {traced['seconds']:.0f} s): "
        f"top growth between turn {traced['warmup']} and the end"
    )
    for line in traced["sites"]:
        print("  " + line)


if __name__ == "__main__":
    main()
