"""The window's one way to run blocking work (keyring, files, imports, building an agent)
without freezing it: `run_off_gui(fn, on_done, on_error)` runs `fn` on a worker thread and
calls back on the GUI thread.

Workers are plain Python threads, not qasync's QThreads (a QThread still running when the
application quits aborts the process). Results come back through a queued Qt signal, so
the callbacks run on the GUI thread whether or not an asyncio loop runs there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from PySide6.QtCore import QCoreApplication, QObject, Signal, Slot

log = logging.getLogger(__name__)
T = TypeVar("T")

#: A few at once: a turn's agent may build while the accounts line reads kubeconfig.
WORKERS = 4
_POOL = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="deskhand-off-gui")


class _Relay(QObject):
    """Lives on the GUI thread; a callable emitted from a worker runs there."""

    call = Signal(object)

    def __init__(self) -> None:
        super().__init__()
        self.call.connect(self._run)

    @Slot(object)
    def _run(self, callback: Callable[[], None]) -> None:
        callback()


_relay: _Relay | None = None


def _gui_relay() -> _Relay:
    global _relay
    if _relay is None:
        _relay = _Relay()
        app = QCoreApplication.instance()
        if app is not None:
            _relay.moveToThread(app.thread())
    return _relay


def _log_error(exc: BaseException) -> None:
    log.warning("background work failed: %r", exc, exc_info=exc)


def run_off_gui(
    fn: Callable[[], T],
    on_done: Callable[[T], Any] | None = None,
    on_error: Callable[[BaseException], Any] | None = None,
) -> Future[T]:
    """Runs `fn` on a worker; then `on_done(result)` or `on_error(exception)` on the GUI
    thread (an error without `on_error` is logged). Returns the worker's future, which a
    coroutine on the GUI thread may await with `asyncio.wrap_future`."""
    relay = _gui_relay()
    failed = on_error or _log_error

    def finished(future: Future[T]) -> None:
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            relay.call.emit(lambda: failed(exc))
        elif on_done is not None:
            result = future.result()
            relay.call.emit(lambda: on_done(result))

    future = _POOL.submit(fn)
    future.add_done_callback(finished)
    return future


async def off_gui(fn: Callable[..., T], *args: Any) -> T:
    """`await off_gui(fn, *args)`: the same workers, for a coroutine on the GUI thread."""
    return await asyncio.wrap_future(_POOL.submit(fn, *args))
