"""Compiled bytecode for Deskhand's own modules, as an installed copy has it.

An installer (pip, the packaged app) writes every module's `.pyc`. A checkout may not have
them: with PYTHONDONTWRITEBYTECODE set (common in containers and CI), a module changed
since it was last compiled is compiled from source on every import, holding the
interpreter lock for milliseconds (about 6 ms for a 500-line module) — a cost no user pays. Each
benchmark calls `compile_project()` first, so it measures what an installed Deskhand does.
"""

from __future__ import annotations

import compileall
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "tools", "integrations", "resources", "bench", "tests")


def compile_project() -> None:
    """Writes the missing or stale `.pyc` of the project's packages (py_compile writes them
    whatever PYTHONDONTWRITEBYTECODE says)."""
    for name in PACKAGES:
        folder = REPO / name
        if folder.is_dir():
            compileall.compile_dir(folder, quiet=1, workers=1)
