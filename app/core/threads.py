"""Which thread is the GUI's, and a guard for work that must never run on it.

The window's event loop runs on the GUI thread; parsing kubeconfig YAML, reading the
keyring, scanning the skill folders or building the system prompt there stalls painting
and input (the window hands such work to `app.ui.off_gui.run_off_gui`). Functions that do
it are marked `@off_gui_thread`: called on the GUI thread they raise `GuiThreadError` when
checks are strict (the tests turn them on with DESKHAND_STRICT_THREADS=1), else they log
once and go on — a slow frame is better than a broken feature for a user.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

_gui_thread: int | None = None
_warned: set[str] = set()


class GuiThreadError(RuntimeError):
    """Blocking work was called on the GUI thread."""


def mark_gui_thread() -> None:
    """Called by the window once, on the thread that runs Qt's event loop."""
    global _gui_thread
    _gui_thread = threading.get_ident()


def forget_gui_thread() -> None:
    global _gui_thread
    _gui_thread = None


def on_gui_thread() -> bool:
    return _gui_thread is not None and threading.get_ident() == _gui_thread


def strict() -> bool:
    return os.environ.get("DESKHAND_STRICT_THREADS") == "1"


def off_gui_thread(fn: Callable[P, R]) -> Callable[P, R]:
    """Marks `fn` as blocking: it must run in a worker thread, never on the GUI thread."""
    name = f"{fn.__module__}.{fn.__qualname__}"

    @functools.wraps(fn)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        if on_gui_thread():
            if strict():
                raise GuiThreadError(f"{name} blocks; run it in a worker thread")
            if name not in _warned:
                _warned.add(name)
                log.warning("%s ran on the GUI thread (it blocks); please report this", name)
        return fn(*args, **kwargs)

    return checked
