"""What every settings page shares: the base class, the patch it produces, and a way to
run blocking calls (keyring, file I/O) off the GUI thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget

from app.core.settings import Settings

T = TypeVar("T")
Patch = Callable[[Settings], None]


class SettingsPage(QWidget):
    """One page of the dialog: loads from settings, validates, produces a patch.

    The dialog enables Save only when a page has changes: `has_changes()` says so, or
    (None, the default) the dialog applies `patch()` to a copy of the settings and compares.
    A page that writes elsewhere too (`commit`, keys) should say so in `has_changes()`.
    Pages that emit `edited` on every change set `reports_edits`; the dialog watches the
    inputs of the others. A page starts its tasks with `start_task` (or adds the running
    one to `_tasks`): closing the dialog calls `cancel_tasks()`."""

    title = ""
    subtitle = ""
    #: Emitted when the user changed something on the page.
    edited = Signal()
    reports_edits = False

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        #: Tasks this page started and that have not ended.
        self._tasks: set[asyncio.Task[Any]] = set()

    def start_task(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T] | None:
        """Run `coro` as a task of this page (cancelled when the dialog closes); None
        when the loop is gone (the app is closing)."""
        return spawn(self._tasks, coro)

    def cancel_tasks(self) -> None:
        """The dialog closes: cancel every task this page started."""
        for task in list(self._tasks):
            task.cancel()

    def problem(self) -> str | None:
        """What keeps the page from being saved, in plain words (shown on the page)."""
        return None

    def has_changes(self) -> bool | None:
        """Whether anything would be saved; None: the dialog compares `patch()`'s result."""
        return None

    def patch(self) -> Patch:
        raise NotImplementedError

    def mark_saved(self, settings: Settings) -> None:
        """The patch was written: the saved state is the new baseline."""


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run a blocking call (keyring, file I/O) off the GUI thread."""
    # qasync may step a task Qt started before the loop "runs" (e.g. from a showEvent):
    # the loop set for this thread is the one that steps it either way
    return await asyncio.get_event_loop().run_in_executor(None, fn, *args)


def spawn(tasks: set[asyncio.Task[Any]], coro: Coroutine[Any, Any, T]) -> asyncio.Task[T] | None:
    """Run `coro` as a task kept in `tasks` until it ends (so a page can cancel what it
    started when the dialog closes); None when the loop is gone (the app is closing)."""
    try:
        task = asyncio.ensure_future(coro)
    except RuntimeError:  # no event loop any more
        coro.close()
        return None
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return task
