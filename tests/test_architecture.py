"""The import direction of docs/architecture.md: app.ui → app.core → tools → integrations; the
command line (app.cli) sits beside the window, and app.core reaches neither.

Checked statically over every module, so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: package → top-level imports it must never make
FORBIDDEN = {
    "app/core": ("app.ui", "app.cli", "PySide6", "qasync", "shiboken6"),
    "tools": ("app", "PySide6", "qasync", "shiboken6"),
    "integrations": ("app", "tools", "PySide6", "qasync", "shiboken6"),
}


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def violations(package: str, banned: tuple[str, ...]) -> list[str]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name in imports_of(path):
            if any(name == b or name.startswith(b + ".") for b in banned):
                found.append(f"{path.relative_to(ROOT)} imports {name}")
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_import_direction(package: str):
    assert violations(package, FORBIDDEN[package]) == []


def test_only_app_ui_imports_qt():
    places = ("app/core", "tools", "integrations", "resources")
    outside = [v for place in places for v in violations(place, ("PySide6", "shiboken6"))]
    assert outside == []


def test_the_checker_sees_lazy_imports(tmp_path: Path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from PySide6 import QtCore\n    import app.ui.main\n")
    assert imports_of(module) == ["PySide6", "app.ui.main"]
