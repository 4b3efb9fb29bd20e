"""The layers hold without circles: among the modules of app, tools and integrations, no
import made while a module loads leads back to it.

Counted: imports at module level (inside a top-level `if`/`try` or class body too), not
those under `if TYPE_CHECKING:` and not those inside a function (they run later, once
every module they name has loaded). An edge goes to the module an import names: for
`from package import name`, to `package.name` when that is a module, else to `package`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "tools", "integrations")


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the checked packages, by dotted name."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _load_time_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _load_time_imports(node.body)
            yield from _load_time_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _load_time_imports(block)
            for handler in node.handlers:
                yield from _load_time_imports(handler.body)
        elif isinstance(node, ast.With | ast.ClassDef):
            yield from _load_time_imports(node.body)


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def load_time_edges(
    name: str, path: Path, modules: dict[str, Path], *, anywhere: bool = False
) -> set[str]:
    """The checked modules `name` imports while it loads (`anywhere`: or at any time,
    inside functions and under `if TYPE_CHECKING:` too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    found = (
        (n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom))
        if anywhere
        else _load_time_imports(tree.body)
    )
    for node in found:
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            targets.add(sub if sub in modules else base)
    return {target for target in targets if target in modules and target != name}


def import_graph(root: Path = ROOT, *, anywhere: bool = False) -> dict[str, set[str]]:
    modules = module_files(root)
    return {
        name: load_time_edges(name, path, modules, anywhere=anywhere)
        for name, path in modules.items()
    }


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_no_import_circle_among_the_modules():
    assert circles(import_graph()) == []


def test_the_core_tools_and_integrations_never_reach_the_command_line_or_the_window():
    """Relative imports and imports inside functions count too."""
    below = ("app.core", "tools", "integrations")
    above = ("app.cli", "app.ui")

    def within(name: str, packages: tuple[str, ...]) -> bool:
        return any(name == p or name.startswith(p + ".") for p in packages)

    reaching = [
        f"{name} imports {target}"
        for name, targets in sorted(import_graph(anywhere=True).items())
        if within(name, below)
        for target in sorted(targets)
        if within(target, above)
    ]
    assert reaching == []


def test_a_circle_is_reported_with_its_modules_names(tmp_path: Path):
    (tmp_path / "app" / "core").mkdir(parents=True)
    (tmp_path / "tools").mkdir()
    (tmp_path / "integrations").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "core" / "__init__.py").write_text("")
    (tmp_path / "app" / "core" / "a.py").write_text("from app.core import b\n")
    (tmp_path / "app" / "core" / "b.py").write_text("from .c import thing\n")
    (tmp_path / "app" / "core" / "c.py").write_text("import app.core.a\nthing = 1\n")
    (tmp_path / "tools" / "t.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import tools.u\n"
        "def f():\n    import tools.u\n"
    )
    (tmp_path / "tools" / "u.py").write_text("import tools.t\n")
    assert circles(import_graph(tmp_path)) == [["app.core.a", "app.core.b", "app.core.c"]]
    everywhere = circles(import_graph(tmp_path, anywhere=True))
    assert everywhere == [["app.core.a", "app.core.b", "app.core.c"], ["tools.t", "tools.u"]]
