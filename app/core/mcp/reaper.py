"""Ending a stdio server's whole process tree, even descendants that left its process group.

Each server is started with `DESKHAND_MCP_INSTANCE=<random>` in its environment; children
inherit it. After the SDK has stopped the server (stdin closed, then its process group
signalled), any process still carrying the marker is terminated. Linux reads /proc; on
other systems the SDK's process-group (POSIX) or Job Object (Windows) handling is all.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from pathlib import Path

ENV_NAME = "DESKHAND_MCP_INSTANCE"
PROC = Path("/proc")


def new_marker() -> str:
    return uuid.uuid4().hex


def marked_pids(marker: str) -> list[int]:
    if not PROC.is_dir():
        return []
    needle = f"{ENV_NAME}={marker}".encode()
    me = os.getpid()
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _is_zombie(pid: int) -> bool:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def reap(marker: str, grace: float = 1.0) -> list[int]:
    """SIGTERM every marked process, SIGKILL those still alive after `grace`. Blocking."""
    pids = [p for p in marked_pids(marker) if not _is_zombie(p)]
    if not pids:
        return []
    _signal(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        left = [p for p in marked_pids(marker) if not _is_zombie(p)]
        if not left:
            return pids
        time.sleep(0.05)
    _signal([p for p in marked_pids(marker) if not _is_zombie(p)], signal.SIGKILL)
    return pids
