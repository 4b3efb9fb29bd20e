"""What several benches read of processes: the process tree and its memory (Linux /proc),
and which watched modules a fresh `deskhand` command line loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def descendants(pid: int) -> list[int]:
    """Every process under `pid`, however deep (/proc's children lists, thread by thread)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as f:
                direct = [int(p) for p in f.read().split()]
        except OSError:
            continue
        for child in direct:
            found.append(child)
            found.extend(descendants(child))
    return found


def status_kib(pid: int | str, names: Sequence[str] = ("VmRSS",)) -> dict[str, int]:
    """Fields of /proc/<pid>/status in KiB (VmRSS, RssAnon, RssFile…); 0 when the process
    ended meanwhile."""
    found = dict.fromkeys(names, 0)
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                name = line.split(":", 1)[0]
                if name in found:
                    found[name] = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return found


def loaded(watched: Sequence[str]) -> list[str]:
    """The watched modules (and their submodules) this process has imported."""
    return sorted(m for m in sys.modules if any(m == w or m.startswith(w + ".") for w in watched))


def child_env() -> dict[str, str]:
    """A child bench process's environment: this checkout first, no system keyring."""
    return dict(
        os.environ,
        PYTHONPATH=str(REPO),
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
        QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"),
    )


_CLI_CHILD = textwrap.dedent(
    """
    import atexit, json, os, sys
    WATCHED = %r

    def loaded():
        return sorted(m for m in sys.modules
                      if any(m == w or m.startswith(w + ".") for w in WATCHED))

    atexit.register(lambda: open(os.environ["BENCH_OUT"], "w").write(json.dumps(loaded())))
    from app.cli import main
    sys.argv = ["deskhand", *sys.argv[1:]]
    raise SystemExit(main())
    """
)


def cli_loaded(home: Path, command: Sequence[str], watched: Sequence[str]) -> list[str]:
    """The watched modules a fresh `deskhand --home HOME COMMAND…` had loaded when it ended."""
    out = home / "cli-modules.json"
    out.unlink(missing_ok=True)
    subprocess.run(
        [sys.executable, "-c", _CLI_CHILD % (tuple(watched),), "--home", str(home), *command],
        env=dict(child_env(), BENCH_OUT=str(out)),
        capture_output=True,
        timeout=120,
        check=False,
    )
    if not out.exists():
        return [f"(`deskhand {' '.join(command)}` did not run to its end)"]
    found: list[str] = json.loads(out.read_text("utf-8"))
    return found


def window_loaded(home: str, watched: Sequence[str]) -> None:
    """Run in a fresh process: the window on `home`; prints, as one JSON line, the watched
    modules loaded at "ready", once the window is whole, and 2 s later, then exits."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.ui import startup_timeline

    QApplication(sys.argv[:1])
    report: dict[str, list[str]] = {}

    def later() -> None:
        report["2 s after whole"] = loaded(watched)
        print(json.dumps(report), flush=True)
        os._exit(0)

    def marked(name: str, _when: float) -> None:
        if name in ("ready", "attached"):
            report["ready" if name == "ready" else "whole"] = loaded(watched)
        if name == "attached":
            QTimer.singleShot(2000, later)

    startup_timeline.listeners.append(marked)
    from app.ui.main import run_gui

    run_gui(home)
