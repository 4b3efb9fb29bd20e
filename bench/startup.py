"""Cold start to the first painted window, and idle RSS, against a bare PySide6 window.

Each run is a fresh process going through `run_gui`, as `deskhand` starts; times run from
just before the process is spawned until the window's first Paint event ("first paint") and
until the composer takes keys with the chat list shown ("ready"). RSS is read 2 s after
ready. Median of RUNS runs, for an empty home and for a configured one (a stored provider
key, two MCP servers); the floor is a bare PySide6 window in the same run.

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python bench/startup.py   (or under Xvfb)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from homes import bench_env, configured_home, empty_home, reap_mcp_servers
from pyc_cache import compile_project

RUNS = 7
#: RSS is read this long after the window is ready (the issue: "2 s after start").
IDLE_MS = 2000

CHILD = textwrap.dedent(
    """
    import json, os, sys, time

    def rss_mib():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    report = {}

    def finish():
        report["rss_mib"] = rss_mib()
        print(json.dumps(report))
        sys.stdout.flush()
        os._exit(0)

    if sys.argv[1] == "bare":
        from PySide6.QtCore import QEvent, QObject, QTimer
        from PySide6.QtWidgets import QApplication, QMainWindow

        class FirstPaint(QObject):
            def eventFilter(self, obj, event):
                if event.type() == QEvent.Type.Paint and "paint" not in report:
                    report["paint"] = report["ready"] = time.time()
                    QTimer.singleShot(IDLE_MS, finish)
                return False

        app = QApplication(sys.argv)
        watcher = FirstPaint()
        window = QMainWindow()
        window.resize(1100, 760)
        window.installEventFilter(watcher)
        window.show()
        app.exec()
    else:
        from PySide6.QtCore import QTimer
        from app.ui import startup_timeline

        def marked(name, when):
            report[name] = when
            if name == "ready":
                QTimer.singleShot(IDLE_MS, finish)

        startup_timeline.listeners.append(marked)
        from app.ui.main import run_gui
        run_gui(sys.argv[2])
    """
).replace("IDLE_MS", str(IDLE_MS))


def run_once(kind: str, home: Path) -> dict[str, float]:
    env = bench_env(home)
    start = time.time()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, "bare" if kind == "bare" else "deskhand", str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,  # its MCP servers go with it, not into the next run
    )
    try:
        out, _ = child.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        reap_mcp_servers()
    if child.returncode != 0:
        raise RuntimeError(f"{kind} start-up failed with exit code {child.returncode}")
    report = json.loads(out.strip().splitlines()[-1])
    return {
        "paint": report["paint"] - start,
        "ready": report["ready"] - start,
        "rss_mib": report["rss_mib"],
    }


def main() -> None:
    compile_project()
    homes = {"bare": empty_home(), "deskhand": empty_home(), "configured": configured_home()}
    results: dict[str, dict[str, float]] = {}
    for kind, home in homes.items():
        run_once(kind, home)  # warm the OS file cache (and write first-run files)
        samples = [run_once(kind, home) for _ in range(RUNS)]
        results[kind] = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    floor = results["bare"]["paint"]
    platform = os.environ.get("QT_QPA_PLATFORM", "offscreen")
    print(f"median of {RUNS} cold starts [{platform}]; floor = a bare PySide6 window")
    print(f"{'':>11} {'first paint':>16} {'ready':>16} {'RSS +2 s':>9}")
    for kind, r in results.items():
        print(
            f"{kind:>11} {r['paint']:7.3f} s {r['paint'] / floor:4.1f}× "
            f"{r['ready']:7.3f} s {r['ready'] / floor:4.1f}× {r['rss_mib']:6.0f} MiB"
        )
    print("ready: the composer takes keys and the chat list is shown")
    print("configured: a provider key in the keyring and two MCP servers in mcp.json")


if __name__ == "__main__":
    main()
