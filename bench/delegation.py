"""Sub-agents (`delegate_agent`), three figures against floors measured in the same run:

* parallel: 8 sub-agents at once, each making 3 file-tool calls (the model waits 0.2 s
  before each) and streaming a 40-token answer (20 ms a token), against the slowest of
  3 runs of one sub-agent alone doing the same (target: wall time <= 1.25x). The agent's
  event loop is watched meanwhile: its longest gap;
* window: the same 8 sub-agents asked for in the real window (bench/stall_child.py: the
  App started as `deskhand` starts, the message typed and sent: the first turn of a fresh
  window), the GUI loop's longest gap while they run and their cards update (target
  <= 16 ms; median of 3 runs);
* overhead: one delegation to an agent whose model answers at once without tools, against
  a plain turn answered the same way (target: <= 20 ms more; medians of 30);
* memory: 100 delegations in one conversation; resident memory after them against after
  the first 10 (target: <= 10 % growth).

The model is bench/agents_server.py in its own process (it answers by what each request
holds, so interleaved sub-agents each get their own script).

Run: .venv/bin/python bench/delegation.py
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.pyc_cache import compile_project  # noqa: E402
from bench.scripted import configure_home, make_files, rss_mib, serving  # noqa: E402

PARALLEL = 8
RUNS = 3
OVERHEAD_RUNS = 30
MEMORY_RUNS = 100
WARM = 10


def served(root: Path, mode: str) -> contextlib.AbstractContextManager[str]:
    return serving(Path(__file__).with_name("agents_server.py"), str(root), mode)


def make_runtime(home: Path, url: str, root: Path):  # type: ignore[no-untyped-def]
    from app.core.runtime import Runtime

    configure(home, url, root)
    return Runtime(home, entry_points=False)


def configure(home: Path, url: str, root: Path) -> None:
    """A home on the model server at `url`, `root` allowed, the Lister agent."""
    from app.core.paths import settings_path
    from app.core.settings import AgentDefinition, SettingsStore

    configure_home(home, url, root)
    lister = AgentDefinition(name="Lister", description="Lists a folder.", tools=["fs_list_dir"])

    def change(settings: object) -> None:
        settings.agents = [lister]  # type: ignore[attr-defined]
        settings.max_parallel_jobs = PARALLEL  # type: ignore[attr-defined]

    SettingsStore(settings_path(home)).update(change)


def in_the_window(home: Path) -> list[float]:
    """The GUI loop's longest gap while 8 sub-agents run, per run (ms)."""
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
        DESKHAND_STALL_MESSAGE=f"delegate {PARALLEL}",
        QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"),
    )
    child = [sys.executable, str(Path(__file__).with_name("stall_child.py")), "app", str(home)]
    gaps = []
    for run in range(RUNS + 1):  # the first warms the caches
        done = subprocess.run([*child, "1"], capture_output=True, text=True, env=env, timeout=180)
        if done.returncode != 0:
            raise SystemExit(f"the window run failed:\n{done.stderr[-3000:]}")
        if run:
            result = json.loads(done.stdout.strip().splitlines()[-1])
            gaps.append(max(result["phases"]["turn"]["gaps"]))
    return gaps


class LoopWatch:
    """The event loop's longest gap while it runs (a 1 ms ticker)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            self.longest = max(self.longest, time.perf_counter() - start - 0.001)

    def __enter__(self) -> LoopWatch:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def turn(runtime, prompt: str, conversation_id: str | None = None):  # type: ignore[no-untyped-def]
    """One parent turn: (its seconds, [(start, end) of each delegate_agent call], conv id)."""
    from app.core.approval import deny_all
    from app.core.events import ToolCallFinished, ToolCallStarted
    from app.core.providers import make_provider

    provider = make_provider(runtime.provider_config())
    agent = runtime.make_agent(provider, deny_all)
    conversation = runtime.open_conversation(conversation_id)
    starts: dict[str, float] = {}
    spans: list[tuple[float, float]] = []
    begin = time.perf_counter()
    try:
        async for event in agent.run(conversation, prompt):
            now = time.perf_counter()
            if isinstance(event, ToolCallStarted) and event.name == "delegate_agent":
                starts[event.call_id] = now
            elif isinstance(event, ToolCallFinished) and event.name == "delegate_agent":
                assert event.result.ok, event.result.content
                spans.append((starts[event.call_id], now))
    finally:
        await provider.aclose()
    return time.perf_counter() - begin, spans, conversation.id


async def parallel(runtime) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    alone = []
    for _ in range(RUNS):
        _, spans, _ = await turn(runtime, "delegate 1")
        alone.append(spans[0][1] - spans[0][0])
    walls, gaps = [], []
    for _ in range(RUNS):
        with LoopWatch() as watch:
            _, spans, _ = await turn(runtime, f"delegate {PARALLEL}")
        assert len(spans) == PARALLEL
        walls.append(max(e for _, e in spans) - min(s for s, _ in spans))
        gaps.append(watch.longest)
    return max(alone), statistics.median(walls), max(gaps)


async def overhead(runtime) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    plain, delegated = [], []
    for _ in range(OVERHEAD_RUNS):
        seconds, _, _ = await turn(runtime, "hello")
        plain.append(seconds)
        _, spans, _ = await turn(runtime, "delegate 1")
        delegated.append(spans[0][1] - spans[0][0])
    return statistics.median(plain), statistics.median(delegated)


async def memory(runtime) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    conversation_id = None
    warm = 0.0
    for n in range(1, MEMORY_RUNS + 1):
        _, _, conversation_id = await turn(runtime, "delegate 1", conversation_id)
        if n == WARM:
            gc.collect()
            warm = rss_mib()
    gc.collect()
    return warm, rss_mib()


def main() -> None:
    compile_project()
    with tempfile.TemporaryDirectory(prefix="deskhand-bench-") as tmp:
        root = Path(tmp) / "work"
        make_files(root)
        with served(root, "paced") as url:
            runtime = make_runtime(Path(tmp) / "paced", url, root)
            try:
                alone, wall, gap = asyncio.run(parallel(runtime))
            finally:
                runtime.close()
            window_home = Path(tmp) / "window"
            configure(window_home, url, root)
            window_gaps = in_the_window(window_home)
        with served(root, "instant") as url:
            runtime = make_runtime(Path(tmp) / "instant", url, root)
            try:
                plain, delegated = asyncio.run(overhead(runtime))
                warm, after = asyncio.run(memory(runtime))
            finally:
                runtime.close()
    results = {
        "alone_s": alone,
        "parallel_wall_s": wall,
        "ratio": wall / alone,
        "longest_loop_gap_ms": gap * 1000,
        "window_longest_gap_ms": window_gaps,
        "plain_turn_ms": plain * 1000,
        "delegation_ms": delegated * 1000,
        "overhead_ms": (delegated - plain) * 1000,
        "rss_after_10_mib": warm,
        "rss_after_100_mib": after,
        "rss_growth": after / warm - 1,
    }
    print(
        f"{PARALLEL} sub-agents at once: {wall:.2f} s against {alone:.2f} s for the slowest "
        f"one alone ({wall / alone:.2f}x; target <= 1.25x); this process's own loop (no window, "
        f"its collector on) longest gap {gap * 1000:.1f} ms"
    )
    print(
        f"in the window: the GUI loop's longest gap while they run "
        f"{statistics.median(window_gaps):.1f} ms (median of {RUNS}; worst "
        f"{max(window_gaps):.1f} ms; target <= 16 ms)"
    )
    print(
        f"one delegation {delegated * 1000:.1f} ms against a plain turn's {plain * 1000:.1f} ms "
        f"(+{(delegated - plain) * 1000:.1f} ms; target <= 20 ms)"
    )
    print(
        f"RSS {warm:.1f} MiB after {WARM} delegations, {after:.1f} MiB after {MEMORY_RUNS} "
        f"({(after / warm - 1) * 100:+.1f} %; target <= 10 %)"
    )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
