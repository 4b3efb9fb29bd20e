"""The conversation view: model, rendering and painting of messages and tool cards."""

from __future__ import annotations

import sys


def keep_none_alive() -> bool:
    """Works around a PySide6 binding bug; returns whether it had to.

    PySide6 6.12 wheels on CPython 3.11 return `None` from every void method (setPen,
    save, update, …) and `True`/`False` from bool methods without a new reference. From
    3.12 on these objects are immortal so nothing shows, but on 3.11 each call costs one
    reference and after a few thousand calls the process aborts with "Fatal Python error:
    none_dealloc: deallocating None" (or bool_dealloc) — a chat view painting a few
    frames is enough. When a probe shows the leak, the singletons get a reference count
    no program can use up (what 3.12 does by design).
    """
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    from PySide6.QtCore import QObject

    probe = QObject()
    before = sys.getrefcount(None), sys.getrefcount(False)
    for _ in range(16):
        probe.setObjectName("probe")
        probe.signalsBlocked()
    if sys.getrefcount(None) >= before[0] and sys.getrefcount(False) >= before[1]:
        return False
    import ctypes

    for singleton in (None, True, False, NotImplemented, Ellipsis):
        ctypes.c_ssize_t.from_address(id(singleton)).value += 1 << 48
    return True


NONE_REFCOUNT_PATCHED = keep_none_alive()
