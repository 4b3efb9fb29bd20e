"""Cold start to the first painted window, and idle RSS, against a bare PySide6 window.

Each run is a fresh process; the time runs from just before the process is spawned until
the main window receives its first Paint event. Median of RUNS runs.

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python bench/startup.py   (or under Xvfb)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNS = 7

CHILD = textwrap.dedent(
    """
    import json, sys, time
    from PySide6.QtCore import QEvent, QObject, QTimer
    from PySide6.QtWidgets import QApplication, QMainWindow

    def rss_mib():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    class FirstPaint(QObject):
        def __init__(self):
            super().__init__()
            self.painted = None
        def eventFilter(self, obj, event):
            if event.type() == QEvent.Type.Paint and self.painted is None:
                self.painted = time.time()
                QTimer.singleShot(1500, finish)  # idle a moment, then read RSS
            return False

    def finish():
        print(json.dumps({"painted": watcher.painted, "rss_mib": rss_mib()}))
        sys.stdout.flush()
        import os
        os._exit(0)

    app = QApplication(sys.argv)
    watcher = FirstPaint()
    if sys.argv[1] == "bare":
        window = QMainWindow()
        window.resize(1100, 760)
        window.installEventFilter(watcher)
        window.show()
        app.exec()
    else:
        import asyncio
        import qasync
        loop = qasync.QEventLoop(app)
        asyncio.set_event_loop(loop)
        from app.ui.main import App
        gui = App(app, sys.argv[2])
        gui.window.installEventFilter(watcher)
        gui.show()
        with loop:
            loop.run_forever()
    """
)


def run_once(kind: str, home: str) -> tuple[float, float]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    env.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    start = time.time()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, kind, home],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    ).stdout
    report = json.loads(out.strip().splitlines()[-1])
    return report["painted"] - start, report["rss_mib"]


def main() -> None:
    home = tempfile.mkdtemp(prefix="deskhand-bench-")
    results = {}
    for kind in ("bare", "deskhand"):
        run_once(kind, home)  # warm the OS file cache, like a second launch
        samples = [run_once(kind, home) for _ in range(RUNS)]
        results[kind] = (
            statistics.median(s[0] for s in samples),
            statistics.median(s[1] for s in samples),
        )
    platform = os.environ.get("QT_QPA_PLATFORM", "offscreen")
    for kind, (seconds, rss) in results.items():
        print(
            f"{kind:>9}: first paint {seconds:.3f} s (median of {RUNS}), idle RSS {rss:.0f} MiB"
            f"  [{platform}]"
        )


if __name__ == "__main__":
    main()
