"""Marks on the way from launch to a usable window ("paint", "ready"…) as wall-clock
times; logged at debug level, and read by `bench/startup.py`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from PySide6.QtCore import QEvent, QEventLoop, QObject, QTimer
from PySide6.QtWidgets import QApplication, QWidget

log = logging.getLogger(__name__)
#: The longest the start-up waits for the window system to paint the frame.
PAINT_WAIT_MS = 500

marks: dict[str, float] = {}
#: Called with (name, seconds) for every mark (the start-up benchmark listens here).
listeners: list[Callable[[str, float], None]] = []


def mark(name: str) -> None:
    """Records `name` once, at the time of the first call."""
    if name in marks:
        return
    marks[name] = when = time.time()
    for listener in list(listeners):
        listener(name, when)
    log.debug("start-up: %s", name)


class _PaintWatcher(QObject):
    def __init__(self, loop: QEventLoop) -> None:
        super().__init__()
        self.loop = loop

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint:
            mark("paint")
            self.loop.quit()  # the loop returns once this paint is done
        return False


def wait_for(qapp: QApplication, future: Future[Any], poll_ms: int = 2) -> None:
    """Runs Qt's events until `future` (work on another thread) is done, then returns its
    result or raises its error: before the asyncio loop exists, this is how start-up
    waits without freezing the window."""
    loop = QEventLoop()
    poll = QTimer()
    poll.setInterval(poll_ms)

    def quit_when_done() -> None:
        if future.done():
            loop.quit()

    poll.timeout.connect(quit_when_done)
    poll.start()
    if not future.done():
        loop.exec()
    poll.stop()
    future.result()


def wait_for_paint(qapp: QApplication, window: QWidget) -> None:
    """Runs Qt's events until `window` has painted once (or PAINT_WAIT_MS passed): the
    frame is on screen before the rest of start-up takes the thread."""
    loop = QEventLoop()
    watcher = _PaintWatcher(loop)
    window.installEventFilter(watcher)
    give_up = QTimer()
    give_up.setSingleShot(True)
    give_up.timeout.connect(loop.quit)
    give_up.start(PAINT_WAIT_MS)
    loop.exec()
    give_up.stop()
    window.removeEventFilter(watcher)
