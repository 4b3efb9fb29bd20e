"""Python's cyclic garbage collector while `deskhand ask` starts.

Loading the runtime makes about 100,000 long-lived container objects (modules, classes,
pydantic's schemas). With the collector on, its full collections walk all of them again
and again before the first request leaves: 20–35 ms of a 240 ms start on the benchmark
machine (`bench/ask_start.py`). So it is paused while the command starts; when the turn
begins, what start-up made is frozen (never walked again) and collection resumes. The
window does the same with its own guard (app/ui/gc_guard.py).
"""

from __future__ import annotations

import gc
from types import TracebackType


class StartUpPause:
    """`with StartUpPause() as pause:` no automatic collection until `pause.over()` or the
    block's end. A collector that was already off stays off."""

    def __init__(self) -> None:
        self._resume = False

    def __enter__(self) -> StartUpPause:
        self._resume = gc.isenabled()
        gc.disable()
        return self

    def over(self) -> None:
        """What exists now lives as long as the process: it leaves the collector's sight,
        which runs again. The little garbage start-up left stays with it (kilobytes)."""
        if not self._resume:
            return
        self._resume = False
        gc.freeze()
        gc.enable()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.over()
