"""Noticing changes in knowledge folders: a periodic rescan of sizes and mtimes.

Why not file-system events: the `watchfiles` library is not a dependency, and the OS's own
watchers (inotify, FSEvents, ReadDirectoryChangesW) each need their own code, a watch per
folder on Linux (100,000 folders exhaust the default inotify limit) and a rescan anyway
after an overflow or a sleep. A rescan is one `stat` per file and compares it with what
the index holds (`indexer.plan`); it is cheap, the same on every system, and bounded: the
interval grows with the time a scan takes, so rescans never use more than a small share of
the time however large the folders are.

`Schedule` is the worker's clock and in-box: folders asked for now (added, resumed,
reindexed) and every folder when the rescan is due.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

#: How often folders are looked at again, at least.
RESCAN_SECONDS = 60.0
#: The longest share of the time rescans may take (a scan of 2 s: every 40 s at most).
MAX_SCAN_SHARE = 0.05


class Schedule:
    """When the worker runs its next round and which folders it looks at then."""

    def __init__(
        self, every: float = RESCAN_SECONDS, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._every = every
        self._clock = clock
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._asked: set[int] = set()
        self._everything = True  # the first round looks at every folder
        self._scan_seconds = 0.0
        self._last = clock()

    def ask(self, folder_ids: Iterable[int] = (), *, everything: bool = False) -> None:
        """Look at these folders (or all) at once."""
        with self._lock:
            self._asked.update(folder_ids)
            self._everything = self._everything or everything
            self._wake.set()

    def pending(self) -> bool:
        """Something was asked for and not yet taken."""
        with self._lock:
            return self._everything or bool(self._asked)

    def wait(self, stop: threading.Event) -> None:
        """Until something is asked for, the rescan is due, or `stop` is set (set `stop`,
        then `ask()`, to end a wait at once)."""
        while not stop.is_set():
            with self._lock:
                if self._everything or self._asked:
                    return
                left = self.interval() - (self._clock() - self._last)
                if left <= 0:
                    self._everything = True
                    return
                self._wake.clear()
            self._wake.wait(left)

    def take(self) -> tuple[bool, set[int]]:
        """(every folder?, the folders asked for), and forget them: the round takes them."""
        with self._lock:
            everything, asked = self._everything, self._asked
            self._everything, self._asked = False, set()
            return everything, asked

    def scanned(self, seconds: float) -> None:
        """A round looked at every folder in `seconds`: the next rescan counts from now."""
        with self._lock:
            self._scan_seconds = seconds
            self._last = self._clock()

    def interval(self) -> float:
        """Seconds between rescans: `every`, longer when scans are slow."""
        return max(self._every, self._scan_seconds / MAX_SCAN_SHARE)
