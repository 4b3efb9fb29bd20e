"""Qt test set-up: an offscreen QApplication with a qasync loop, and an async wait helper.

pytest-qt's waitUntil spins Qt but asyncio sees no running loop, so GUI tests run their
body with `qloop.run_until_complete(body())` and wait with `wait_until` inside it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(autouse=True)
def collect_garbage_on_the_main_thread(request: pytest.FixtureRequest) -> Iterator[None]:
    """As the app does (app/ui/gc_guard.py): no automatic collection, which could free Qt
    objects from a worker thread; collect here, on the main thread, after each test."""
    import gc

    from app.ui.gc_guard import collect_if_due

    gc.disable()
    yield
    if {"qapp", "qtbot", "qloop"} & set(request.fixturenames):
        gc.collect()
    else:
        collect_if_due()


@pytest.fixture
def qloop(qapp: Any) -> Iterator[asyncio.AbstractEventLoop]:
    import qasync

    loop = qasync.QEventLoop(qapp)
    asyncio.set_event_loop(loop)
    try:
        yield loop
    finally:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        asyncio.set_event_loop(None)
        loop.close()


async def wait_until(
    predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition"
) -> Any:
    """Polls `predicate` while the Qt+asyncio loop keeps running; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.01)


Look = tuple[str, Any, str]


def saved_look(app: Any) -> Look:
    """The application's style name, palette and style sheet (to put back with
    `restore_look`)."""
    from PySide6.QtGui import QPalette

    return app.style().name(), QPalette(app.palette()), app.styleSheet()


def restore_look(app: Any, look: Look) -> None:
    """Puts back what a test changed of the application's look, and only that: setting a
    style again re-polishes every widget, which takes seconds on a loaded machine."""
    style, palette, sheet = look
    if app.styleSheet() != sheet:
        app.setStyleSheet(sheet)
    if app.palette() != palette:
        app.setPalette(palette)
    if app.style().name().lower() != style.lower():
        app.setStyle(style)
