"""Python's cyclic garbage collector, run only on the Qt main thread.

The collector normally runs in whichever thread happens to allocate when a threshold is
crossed — here often a tool or executor thread. If it then frees a cycle holding a Qt
object, the C++ destructor runs on the wrong thread, the object's timers cannot be
unregistered, and Qt later fires a timer at freed memory (a segfault seen in testing).
So automatic collection is turned off and this guard collects from the main thread, with
the same thresholds, a few times a second.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

INTERVAL_MS = 250


def collect_if_due() -> int:
    """Collects the oldest generation whose threshold is exceeded; returns objects freed."""
    counts = gc.get_count()
    thresholds = gc.get_threshold()
    for generation in (2, 1, 0):
        if counts[generation] > thresholds[generation]:
            return gc.collect(generation)
    return 0


class MainThreadCollector(QObject):
    def __init__(self, parent: QObject | None = None, interval_ms: int = INTERVAL_MS) -> None:
        super().__init__(parent)
        gc.disable()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(collect_if_due)
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        gc.enable()

    @staticmethod
    def freeze() -> None:
        """Moves every object tracked now (the modules, classes and widgets start-up made)
        out of the collector's sight: a full collection then only walks what came later
        (36 ms → under 1 ms with the window up). Called once, when start-up is over; it
        does not collect first (that would be the 36 ms pause this avoids), so the little
        garbage start-up left stays."""
        gc.freeze()
