"""The measured process of bench/loop_stall.py (one fresh process per run).

`stall_child.py bare SETTLE_S TURN_S`: an empty window, gaps for SETTLE_S after the loop
starts (phase "startup"), then TURN_S more (phase "turn").
`stall_child.py app HOME TURNS`: the real App on HOME; phase "startup" is the 3 s after the
loop starts; then TURNS messages sent through the composer (phase "turn"), the text of
`DESKHAND_STALL_MESSAGE` when set (`{n}`: the turn's number).
Prints one JSON line: the gaps of each phase (ms), the time before the loop ran, and every
gap over 16 ms with the GUI thread's stack samples taken during it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from PySide6.QtCore import Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication, QMainWindow  # noqa: E402

THRESHOLD_S = 0.016
SAMPLE_EVERY_S = 0.001
SETTLE_S = 3.0
#: Seconds between two keys typed in a turn's message.
TYPING_S = 0.03
PROJECT = ("app/", "tools/", "integrations/")
HERE = Path(__file__).name


def short(filename: str) -> str:
    if filename.startswith(str(REPO) + os.sep):
        return filename[len(str(REPO)) + 1 :]
    if "site-packages" in filename:
        return filename.split("site-packages" + os.sep, 1)[1]
    return "py:" + Path(filename).name


Frame = tuple[str, int, str]


def stack_of(frame: Any) -> tuple[Frame, ...]:
    """Innermost first."""
    out: list[Frame] = []
    while frame is not None:
        code = frame.f_code
        out.append((short(code.co_filename), frame.f_lineno, code.co_name))
        frame = frame.f_back
    return tuple(out)


class Watchdog(threading.Thread):
    """Samples the GUI thread's stack while the current gap is over the threshold."""

    def __init__(self, start: float) -> None:
        super().__init__(name="stall-watchdog", daemon=True)
        self.gui = threading.main_thread().ident
        self.last_tick = start
        self.samples: list[tuple[float, tuple[Frame, ...]]] = []
        #: What the other threads ran meanwhile (innermost frame, thread name).
        self.others: list[tuple[float, str]] = []
        self.stopped = False

    def run(self) -> None:
        while not self.stopped:
            time.sleep(SAMPLE_EVERY_S)
            now = time.perf_counter()
            if now - self.last_tick > THRESHOLD_S:
                frames = sys._current_frames()
                frame = frames.get(self.gui)
                if frame is not None:
                    self.samples.append((now, stack_of(frame)))
                names = {t.ident: t.name for t in threading.enumerate()}
                for ident, other in frames.items():
                    if ident not in (self.gui, self.ident):
                        name = names.get(ident, "?")
                        self.others.append((now, f"{name}: {blame_of(stack_of(other))}"))
                del frame, frames

    def between(self, start: float, end: float) -> list[tuple[Frame, ...]]:
        return [s for t, s in self.samples if start < t <= end]

    def others_between(self, start: float, end: float) -> list[str]:
        return [s for t, s in self.others if start < t <= end]


def blame_of(stack: tuple[Frame, ...]) -> str:
    """The innermost project frame (with its caller chain's first project frame), else
    the innermost frame outside this file."""
    inner = [f for f in stack if not f[0].endswith(HERE)]
    project = [f for f in inner if f[0].startswith(PROJECT)]
    chosen = project[0] if project else (inner[0] if inner else ("?", 0, "?"))
    return f"{chosen[0]}:{chosen[1]} {chosen[2]}"


def shown(stack: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """The innermost 4 frames, then up to 5 project frames further out (the caller)."""
    inner = tuple(f for f in stack if not f[0].endswith(HERE))
    callers = tuple(f for f in inner[4:] if f[0].startswith(PROJECT))[:5]
    return inner[:4] + callers


def summarise(stacks: list[tuple[Frame, ...]]) -> tuple[list[Any], list[str]]:
    counts = Counter(shown(s) for s in stacks)
    common = [
        [n, [f"{file}:{line} {name}" for file, line, name in stack]]
        for stack, n in counts.most_common(3)
    ]
    return common, [blame_of(s) for s in stacks]


class Probe:
    """The 1 ms timer: gaps per phase, long gaps with their stacks."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.last = start
        self.phase = "preloop"
        self.phases: dict[str, dict[str, Any]] = {}
        self.long: list[dict[str, Any]] = []
        self.watchdog = Watchdog(start)
        self.watchdog.start()
        self.first_tick: float | None = None
        #: The GUI thread's CPU time at the last tick: a long gap with little CPU was a
        #: wait (for the interpreter lock, or for a core), not work.
        self.last_cpu = time.thread_time()
        self.gap_cpu = 0.0
        self.extra: dict[str, Any] = {}
        #: Start-up's marks (app/ui/startup_timeline.py) as (name, perf_counter time).
        self.marks: list[tuple[str, float]] = []
        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(1)
        self.timer.timeout.connect(self.tick)
        self.timer.start()

    def enter(self, phase: str) -> None:
        self.phase = phase
        self.phases[phase] = {"gaps": [], "began": time.perf_counter()}

    def tick(self) -> None:
        now = time.perf_counter()
        cpu = time.thread_time()
        gap = now - self.last
        self.gap_cpu, self.last_cpu = cpu - self.last_cpu, cpu
        if self.first_tick is None:
            self.first_tick = now
            self._long("preloop", gap, self.last, now)
            self.enter("startup")
        else:
            self.phases[self.phase]["gaps"].append(gap * 1000)
            if gap > THRESHOLD_S:
                self._long(self.phase, gap, self.last, now)
        self.last = now
        self.watchdog.last_tick = now

    def _long(self, phase: str, gap: float, start: float, end: float) -> None:
        stacks = self.watchdog.between(start, end)
        common, blame = summarise(stacks)
        before = [name for name, when in self.marks if when <= start]
        during = [name for name, when in self.marks if start < when <= end]
        self.long.append(
            {
                "phase": phase,
                "ms": gap * 1000,
                "at": start - self.start,
                "after": before[-1] if before else "",
                "during": during,
                "samples": len(stacks),
                "gui_cpu_ms": self.gap_cpu * 1000,
                "others": Counter(self.watchdog.others_between(start, end)).most_common(4),
                "stacks": common,
                "blame": blame,
            }
        )

    def result(self) -> dict[str, Any]:
        self.watchdog.stopped = True
        now = time.perf_counter()
        names = list(self.phases)
        ends = [self.phases[n]["began"] for n in names[1:]] + [now]
        phases = {}
        for name, end in zip(names, ends, strict=True):
            phase = self.phases[name]
            phases[name] = {"gaps": phase["gaps"] or [0.0], "seconds": end - phase["began"]}
        assert self.first_tick is not None
        return {
            "preloop_ms": (self.first_tick - self.start) * 1000,
            "phases": phases,
            "long": self.long,
            **{k: v for k, v in self.extra.items() if k != "driver"},
        }


def finish(probe: Probe, cleanup: Any = None) -> None:
    print(json.dumps(probe.result()))
    sys.stdout.flush()
    if cleanup is not None:
        cleanup()
    os._exit(0)


def bare(settle_s: float, turn_s: float) -> None:
    start = time.perf_counter()
    app = QApplication(sys.argv[:1])
    probe = Probe(start)
    window = QMainWindow()
    window.resize(1100, 760)
    window.show()
    QTimer.singleShot(int(settle_s * 1000), lambda: probe.enter("turn"))
    QTimer.singleShot(int((settle_s + turn_s) * 1000), lambda: finish(probe))
    app.exec()


def real_app(home: str, turns: int) -> None:
    """The real start-up path (`run_gui`: frame, chat list and composer, the runtime on a
    worker, then the rest of the window), then SETTLE_S of idle, then the turns."""
    import asyncio

    start = time.perf_counter()
    #: What each turn types (bench/delegation.py sends its own).
    message = os.environ.get("DESKHAND_STALL_MESSAGE", "What is in my folder? ({n})")
    app = QApplication(sys.argv[:1])
    probe = Probe(start)
    from app.ui import startup_timeline

    def cleanup(window: Any) -> None:
        if "mcp" in window.runtime.__dict__:
            window.runtime.mcp.shutdown()

    async def drive(window: Any) -> None:
        await asyncio.sleep(SETTLE_S)
        if turns:
            before = tool_results(window.runtime)
            probe.enter("turn")
            for n in range(turns):
                await one_turn(window, message.format(n=n))
            probe.enter("done")  # counting the results below is not part of a turn
            probe.extra["tool_results"] = tool_results(window.runtime) - before
        finish(probe, lambda: cleanup(window))

    def marked(name: str, _when: float) -> None:
        probe.marks.append((name, time.perf_counter()))
        if name == "attached":
            window = next(w for w in app.topLevelWidgets() if hasattr(w, "controller"))
            probe.extra["driver"] = asyncio.ensure_future(drive(window))

    startup_timeline.listeners.append(marked)
    from app.ui.main import run_gui

    run_gui(home)


def tool_results(runtime: Any) -> int:
    """Successful tool results stored in all conversations."""
    total = 0
    for conv in runtime.store.list_conversations(limit=10_000):
        messages = runtime.store.load_messages(conv.id)
        total += sum(m.role == "tool" and not m.is_error for m in messages)
    return total


async def one_turn(window: Any, message: str) -> None:
    import asyncio

    controller = window.controller
    count = window.chat_view.message_count()
    from PySide6.QtTest import QTest

    window.composer.edit.setFocus()
    for key in message:  # typed key by key, as a quick typist does (the first warms up)
        QTest.keyClick(window.composer.edit, key)
        await asyncio.sleep(TYPING_S)
    window.composer.submit()
    deadline = time.monotonic() + 60
    while controller.busy or window.chat_view.message_count() <= count + 1:
        if time.monotonic() > deadline:
            raise SystemExit(f"the turn did not finish: {window.chat_view.message_count()}")
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)


def main() -> None:
    if sys.argv[1] == "bare":
        bare(float(sys.argv[2]), float(sys.argv[3]))
    else:
        real_app(sys.argv[2], int(sys.argv[3]))


if __name__ == "__main__":
    main()
