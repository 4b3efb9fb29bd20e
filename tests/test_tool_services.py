"""Every service a tool category reaches with `ctx.service(name)` is typed by name (a
Protocol of tools/views.py), handed out by the runtime, and checked by mypy against the
app's class in app/core/tool_services.py: a name missing from one of them is caught here."""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path

import pytest

from app.core.runtime import _LazyServices
from app.core.tool_services import SERVICES
from tools.spec import ToolContext, ToolError

ROOT = Path(__file__).resolve().parent.parent


def _names_used_by_tools() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "tools").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "service"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                found.add(str(node.args[0].value))
    return found


def _typed_names() -> set[str]:
    """The names `ToolContext.service` has an overload for (its Literal argument)."""
    names: set[str] = set()
    for overload in typing.get_overloads(ToolContext.service):
        literal = re.fullmatch(r"Literal\[[\"'](\w+)[\"']\]", overload.__annotations__["name"])
        if literal is not None:
            names.add(literal[1])
    return names


def _checked_names() -> set[str]:
    """The services app/core/tool_services.py checks (one `_<name>` function each)."""
    tree = ast.parse((ROOT / "app/core/tool_services.py").read_text("utf-8"))
    return {
        node.name.removeprefix("_")
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name.startswith("_")
    }


def test_the_tools_use_only_services_the_runtime_hands_out() -> None:
    used = _names_used_by_tools()
    assert used, "no ctx.service(...) call found: the scan is broken"
    assert used <= set(SERVICES)
    assert set(_LazyServices.NAMES) == set(SERVICES)


def test_every_service_is_typed_and_checked_against_the_app_class() -> None:
    assert _typed_names() == set(SERVICES)
    assert _checked_names() == set(SERVICES)


def test_a_service_the_app_does_not_provide_is_a_plain_tool_error(tmp_path: Path) -> None:
    ctx = ToolContext(home=tmp_path, services={})
    with pytest.raises(ToolError, match="the reminders service is not available here"):
        ctx.service("reminders")
