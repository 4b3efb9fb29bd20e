"""A lighter answer to PySide6's question "does this module use PySide6?".

Once QtCore is imported, PySide6 asks that of every module imported after it (for its
opt-in `from __feature__ import snake_case`), by reading the module's source with
`inspect.getsource`. That leaves the source of every module in `linecache` for the life of
the process: about 13 MiB of RSS and 50 ms of start-up for Deskhand's ~450 modules.
`install` gives PySide6 the same answer from a plain read of the file, which nothing keeps.
Modules without a readable .py file get PySide6's own answer. Deskhand uses no
`__feature__`, so the answer does not change its behaviour either way.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType

#: Where PySide6 (6.4 and later) keeps the check; nothing is changed when it is absent.
FEATURE_MODULES = ("shibokensupport.feature", "PySide6.support.feature")
MARK = "_deskhand_plain_read"


def uses_pyside(module: ModuleType, fallback: Callable[[ModuleType], bool]) -> bool:
    """True when the module's source file names PySide6 (what PySide6 itself checks)."""
    path = getattr(module, "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return fallback(module)
    try:
        with open(path, "rb") as source:
            return b"PySide6" in source.read()
    except OSError:
        return fallback(module)


def install() -> bool:
    """Swaps PySide6's check for `uses_pyside`; True when it was (or already is) in place."""
    import PySide6.QtCore  # noqa: F401  (sets up the feature module)

    for name in FEATURE_MODULES:
        feature = sys.modules.get(name)
        original = getattr(feature, "_mod_uses_pyside", None)
        if feature is None or not callable(original):
            continue
        if getattr(original, MARK, False):
            return True

        def check(module: ModuleType, _original: Callable[[ModuleType], bool] = original) -> bool:
            return uses_pyside(module, _original)

        setattr(check, MARK, True)
        feature._mod_uses_pyside = check  # type: ignore[attr-defined]
        return True
    return False
