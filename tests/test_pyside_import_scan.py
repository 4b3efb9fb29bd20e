"""PySide6 asks of every module imported after it whether it uses PySide6; our answer
reads the file without keeping its source in linecache (13 MiB at start-up otherwise)."""

from __future__ import annotations

import linecache
import sys
import types
from pathlib import Path

import app.ui  # noqa: F401  (installs the scan)
from app.ui.pyside_import_scan import FEATURE_MODULES, MARK, install, uses_pyside


def _feature() -> types.ModuleType:
    return next(sys.modules[n] for n in FEATURE_MODULES if n in sys.modules)


def test_the_scan_is_installed_once_and_gives_pysides_answer(tmp_path: Path, monkeypatch):
    check = _feature()._mod_uses_pyside
    assert getattr(check, MARK) is True
    assert install() is True
    assert _feature()._mod_uses_pyside is check  # not wrapped twice
    qt_user = tmp_path / "qt_user_mod.py"
    qt_user.write_text("from PySide6.QtCore import QObject\n", "utf-8")
    plain = tmp_path / "plain_mod.py"
    plain.write_text("VALUE = 1\n", "utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import plain_mod  # noqa: F401
    import qt_user_mod  # noqa: F401

    flags = _feature().pyside_feature_dict
    assert flags["qt_user_mod"] == 0  # uses PySide6: "no feature selected"
    assert flags["plain_mod"] == -1  # ignored by PySide6's feature switching
    assert str(qt_user) not in linecache.cache and str(plain) not in linecache.cache


def test_modules_without_a_source_file_get_pysides_own_answer():
    asked: list[str] = []

    def fallback(module: types.ModuleType) -> bool:
        asked.append(module.__name__)
        return False

    assert uses_pyside(sys, fallback) is False  # a builtin module
    missing = types.ModuleType("gone")
    missing.__file__ = "/nonexistent/gone.py"
    assert uses_pyside(missing, fallback) is False
    assert asked == ["sys", "gone"]
