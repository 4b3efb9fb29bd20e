"""Opening Settings: the first open, later opens, and RSS over 20 open/close cycles.

Each run is a fresh process: a QApplication with Deskhand's look, a shown main window as
the dialog's parent, and a real `Runtime` on a temporary home as right after start-up
(settings loaded; the tool registry not built yet). Settings is opened through the app's
own `App.open_settings`, so the measured path is the one Ctrl+, takes. A time runs from
the request until the dialog's first Paint event; the first open includes importing the
dialog. RSS (after `gc.collect()`) is read before the first open, after it (open, visit
every page, close), and after 20 more such cycles. A page's first visit runs from the
switch to it until its first Paint, importing and building it included (Tools also builds
the tool registry); Tools is reported on its own line.

The floor, measured in the same run: a bare QDialog (a list of 14 entries, a stack of 14
empty pages, two buttons) built and opened on the same parent, in its own processes.

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python bench/settings_open.py [--runs N] [--empty]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
from typing import Any

from homes import bench_env, configured_home, empty_home, reap_mcp_servers
from pyc_cache import compile_project

CYCLES = 20
LATER_OPENS = 10

CHILD = textwrap.dedent(
    """
    import asyncio, gc, json, sys, time
    from types import SimpleNamespace

    import qasync
    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtWidgets import (
        QApplication, QDialog, QHBoxLayout, QListWidget, QMainWindow, QPushButton,
        QStackedWidget, QVBoxLayout, QWidget,
    )

    MODE, HOME, CYCLES, LATER = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    PAGES = 14

    def rss_mib():
        gc.collect()
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    class Painted(QObject):
        def __init__(self, future):
            super().__init__()
            self.future = future

        def eventFilter(self, obj, event):
            if event.type() == QEvent.Type.Paint and not self.future.done():
                self.future.set_result(time.perf_counter())
            return False

    async def painted(widget, action):
        future = asyncio.get_running_loop().create_future()
        watcher = Painted(future)
        widget.installEventFilter(watcher)
        action()
        when = await asyncio.wait_for(future, 30)
        widget.removeEventFilter(watcher)
        return when

    async def settle():
        for _ in range(5):
            await asyncio.sleep(0.01)

    app = QApplication(sys.argv[:1])
    app.setQuitOnLastWindowClosed(False)
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    from app.ui.theme import apply_theme

    apply_theme(app, "light")
    window = QMainWindow()
    window.resize(1100, 760)

    def bare_dialog():
        dialog = QDialog(window)
        dialog.resize(940, 620)
        root = QHBoxLayout(dialog)
        nav = QListWidget()
        stack = QStackedWidget()
        for i in range(PAGES):
            nav.addItem(f"Page {i}")
            stack.addWidget(QWidget())
        nav.currentRowChanged.connect(stack.setCurrentIndex)
        root.addWidget(nav)
        main = QVBoxLayout()
        main.addWidget(stack, 1)
        main.addWidget(QPushButton("Cancel"))
        main.addWidget(QPushButton("Save"))
        root.addLayout(main, 1)
        dialog.nav = nav
        return dialog

    if MODE == "bare":
        holder = SimpleNamespace(dialog=None)

        def request():
            if holder.dialog is not None:
                holder.dialog.deleteLater()
            holder.dialog = bare_dialog()
            holder.dialog.open()
            return holder.dialog

        def visit(dialog, row):
            dialog.nav.setCurrentRow(row)

        def close(dialog):
            dialog.reject()
    else:
        from app.core.runtime import Runtime
        from app.ui import main_window  # noqa: F401  (loaded in the app when Settings opens)
        from app.ui.main import App

        runtime = Runtime(__import__("pathlib").Path(HOME))
        _ = runtime.settings
        holder = SimpleNamespace(
            runtime=runtime, window=window, qapp=app, _settings_dialog=None
        )

        def request():
            App.open_settings(holder, "providers")
            return holder._settings_dialog

        def visit(dialog, row):
            dialog.nav.setCurrentRow(row)

        def close(dialog):
            dialog.reject()

    async def open_once():
        start = time.perf_counter()
        box = []

        def act():
            box.append(request())

        # the dialog exists only once requested: watch the first Paint of whatever opened
        future = asyncio.get_running_loop().create_future()
        watcher = Painted(future)
        act()
        box[0].installEventFilter(watcher)
        when = await asyncio.wait_for(future, 30)
        box[0].removeEventFilter(watcher)
        return box[0], (when - start) * 1000

    async def cycle(visit_pages):
        dialog, ms = await open_once()
        switches = {}
        if visit_pages:
            for row in range(1, PAGES):
                start = time.perf_counter()
                box = dialog.findChild(QStackedWidget).widget(row)
                await painted(box, lambda: visit(dialog, row))
                switches[dialog.nav.item(row).text()] = (time.perf_counter() - start) * 1000
            visit(dialog, 0)
        await settle()
        close(dialog)
        await settle()
        return ms, switches

    async def main():
        report = {}
        window.show()
        await settle()
        report["rss_before"] = rss_mib()
        first, switches = await cycle(visit_pages=True)
        report["first_ms"] = first
        report["first_visits_ms"] = switches
        report["rss_after_first"] = rss_mib()
        later = []
        for _ in range(LATER):
            ms, _ = await cycle(visit_pages=False)
            later.append(ms)
        report["later_ms"] = later
        report["rss_after_later"] = rss_mib()
        for _ in range(CYCLES):
            await cycle(visit_pages=True)
        await settle()
        report["rss_after_cycles"] = rss_mib()
        print(json.dumps(report))
        sys.stdout.flush()

    with loop:
        loop.run_until_complete(main())
    """
)


def run_child(mode: str, home: str) -> dict[str, Any]:
    env = bench_env(__import__("pathlib").Path(home))
    env["DESKHAND_HOME"] = home
    result = subprocess.run(
        [sys.executable, "-c", CHILD, mode, home, str(CYCLES), str(LATER_OPENS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise SystemExit(f"{mode} run failed ({result.returncode}):\n{result.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(lines[-1])
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--empty", action="store_true", help="an empty home (default: configured)")
    args = parser.parse_args()
    compile_project()
    home = str(empty_home() if args.empty else configured_home())
    floors: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    try:
        for _ in range(args.runs):  # interleaved: both see the machine in the same state
            floors.append(run_child("bare", home))
            runs.append(run_child("deskhand", home))
            reap_mcp_servers()
    finally:
        shutil.rmtree(home, ignore_errors=True)

    def median(rows: list[dict[str, Any]], key: str) -> float:
        return statistics.median(row[key] for row in rows)

    def later(rows: list[dict[str, Any]]) -> float:
        return statistics.median(statistics.median(row["later_ms"]) for row in rows)

    floor_first, first = median(floors, "first_ms"), median(runs, "first_ms")
    floor_later, again = later(floors), later(runs)
    print(f"home: {'empty' if args.empty else 'configured'}, {args.runs} runs, medians")
    print(f"first open:  {first:7.1f} ms  (floor {floor_first:.1f} ms, {first / floor_first:.1f}×)")
    print(f"later opens: {again:7.1f} ms  (floor {floor_later:.1f} ms, {again / floor_later:.1f}×)")
    visits = {
        page: statistics.median(row["first_visits_ms"][page] for row in runs)
        for page in runs[0]["first_visits_ms"]
    }
    slowest = sorted(visits.items(), key=lambda item: -item[1])[:4]
    print("first visits of a page, slowest: " + ", ".join(f"{p} {ms:.0f} ms" for p, ms in slowest))
    if "Tools" in visits:  # a row per tool (~100): the page most sensitive to per-row cost
        print(f"first visit of Tools: {visits['Tools']:.0f} ms")
    before = median(runs, "rss_before")
    after_first = median(runs, "rss_after_first")
    after_later = median(runs, "rss_after_later")
    after_cycles = median(runs, "rss_after_cycles")
    print(
        f"RSS: {before:.1f} MiB before → {after_first:.1f} after the first open "
        f"(+{after_first - before:.1f}) → {after_later:.1f} after {LATER_OPENS} more opens "
        f"→ {after_cycles:.1f} after {CYCLES} more open/visit-all/close cycles "
        f"(+{after_cycles - after_later:.1f} MiB over the {CYCLES} cycles)"
    )
    floor_growth = median(floors, "rss_after_cycles") - median(floors, "rss_after_later")
    print(f"floor RSS over its {CYCLES} cycles: +{floor_growth:.1f} MiB")


if __name__ == "__main__":
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    main()
