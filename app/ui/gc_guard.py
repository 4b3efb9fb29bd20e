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
import sys

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QGuiApplication

INTERVAL_MS = 250
#: Young objects from a stretch in which modules were imported: more than this many, and
#: they are frozen rather than walked (see `MainThreadCollector.tick`).
IMPORT_BURST_OBJECTS = 2_000


def collect_if_due(oldest: int = 2) -> int:
    """Collects the oldest generation (up to `oldest`) whose threshold is exceeded;
    returns objects freed."""
    counts = gc.get_count()
    thresholds = gc.get_threshold()
    for generation in range(oldest, -1, -1):
        if counts[generation] > thresholds[generation]:
            return gc.collect(generation)
    return 0


class MainThreadCollector(QObject):
    """`freeze_imports`: objects made while modules were imported (by any thread: the MCP
    SDK, a tool's library) are frozen instead of collected. They are the modules' classes
    and functions, which live as long as the process; walking the 100,000 of them an
    import leaves took 17–21 ms on the GUI thread, where freezing takes well under one.
    Freezing also keeps the garbage that was waiting at that moment (a few dozen objects
    when measured); so after such a freeze a *sweep* is due — unfreeze, collect everything,
    freeze again (tens of milliseconds) — run when the user is not looking: Deskhand stops
    being the active application (another app is in front, the window went to the tray).

    `starting`: while the window is being put together, no full collection (one took 15 ms
    of the interpreter lock); `start_up_done` ends that, freezes what start-up made and
    turns `freeze_imports` on."""

    def __init__(
        self,
        parent: QObject | None = None,
        interval_ms: int = INTERVAL_MS,
        *,
        freeze_imports: bool = False,
        starting: bool = False,
    ) -> None:
        super().__init__(parent)
        gc.disable()
        self.freeze_imports = freeze_imports
        self.starting = starting
        #: A freeze kept garbage: `sweep` frees it (when the application goes inactive).
        self.sweep_due = False
        self._modules = len(sys.modules)
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.tick)
        self._timer.start()
        if isinstance(parent, QGuiApplication):
            parent.applicationStateChanged.connect(self._state_changed)

    def _state_changed(self, state: Qt.ApplicationState) -> None:
        if state != Qt.ApplicationState.ApplicationActive:
            self.sweep()

    def sweep(self) -> int:
        """Frees the garbage earlier freezes kept (a full collection: only while the user
        is elsewhere); returns the objects freed."""
        if not self.sweep_due:
            return 0
        self.sweep_due = False
        gc.unfreeze()
        freed = gc.collect()
        gc.freeze()
        return freed

    def tick(self) -> int:
        modules = len(sys.modules)
        imported, self._modules = modules > self._modules, modules
        if self.freeze_imports and imported and gc.get_count()[0] > IMPORT_BURST_OBJECTS:
            gc.freeze()
            self.sweep_due = True
            return 0
        return collect_if_due(1 if self.starting else 2)

    def start_up_done(self) -> None:
        """The window is whole: what start-up made is frozen (full collections walk only
        what comes later; the little garbage it left waits for a sweep), later import
        bursts are frozen too, and full collections may run again."""
        self.freeze()
        self.sweep_due = True
        self.freeze_imports = True
        self.starting = False

    def stop(self) -> None:
        self._timer.stop()
        gc.enable()

    @staticmethod
    def freeze() -> None:
        """Moves every object tracked now (the modules, classes and widgets start-up made)
        out of the collector's sight: a full collection then only walks what came later
        (36 ms → under 1 ms with the window up). Called once, when start-up is over; it
        does not collect first (that would be the pause this avoids), so the little
        garbage start-up left stays."""
        gc.freeze()
