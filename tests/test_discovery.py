"""Progressive disclosure: the model sees a small core set and activates more by browsing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import BaseModel

from tools.registry import ToolRegistry
from tools.runner import ToolRunner
from tools.session import CORE_TOOLS, DIRECT_BUDGET, ToolSession
from tools.spec import Operation, ToolContext, ToolManifest


class P(BaseModel):
    pass


def many_tools(n: int) -> list[ToolManifest]:
    return [
        ToolManifest(
            name=f"widget_{i}",
            category="widgets" if i % 2 else "gadgets",
            description=f"Handle widget number {i}. More text here.",
            params=P,
            operations=frozenset({Operation.READ if i % 3 else Operation.DELETE}),
            impl=lambda a, c: "ok",
        )
        for i in range(n)
    ]


def make(n: int, exposure="auto", disabled=()) -> tuple[ToolRegistry, ToolSession]:
    from tools.core.manifest import MANIFESTS as CORE

    registry = ToolRegistry()
    registry.add(CORE)
    registry.add(many_tools(n))
    return registry, ToolSession(registry, frozenset(disabled), exposure)


def call(registry, session, name, args, tmp_path: Path):
    runner = ToolRunner(registry)
    ctx = ToolContext(home=tmp_path, registry=registry, session=session)
    try:
        return asyncio.run(runner.run(name, args, ctx))
    finally:
        runner.shutdown()


def test_small_tool_sets_are_sent_whole():
    registry, session = make(0)
    assert len(session.visible()) == len(registry.manifests()) <= DIRECT_BUDGET


def test_large_sets_show_only_core_until_browsed(tmp_path):
    registry, session = make(60)
    assert sorted(m.name for m in session.visible()) == sorted(CORE_TOOLS)
    result = call(
        registry, session, "browse_tools", {"category": "widgets", "operation": "delete"}, tmp_path
    )
    names = [t["name"] for t in result.data["tools"]]
    assert names and all(n.startswith("widget_") for n in names)
    assert all(int(n.split("_")[1]) % 3 == 0 and int(n.split("_")[1]) % 2 for n in names)
    assert "parameters" in result.data["tools"][0]
    visible = {m.name for m in session.visible()}
    assert set(names) <= visible and "widget_2" not in visible


def test_browse_without_arguments_lists_categories(tmp_path):
    registry, session = make(60)
    result = call(registry, session, "browse_tools", {}, tmp_path)
    cats = {c["category"]: c["tools"] for c in result.data["categories"]}
    assert cats["widgets"] == 30 and cats["gadgets"] == 30


def test_disabled_tools_cannot_be_found_or_activated(tmp_path):
    registry, session = make(60, disabled={"widget_1", "gadgets"})
    result = call(registry, session, "browse_tools", {"query": "widget"}, tmp_path)
    names = {t["name"] for t in result.data["tools"]}
    assert "widget_1" not in names and "widget_0" not in names and "widget_3" in names
    details = call(
        registry, session, "get_tool_details", {"names": ["widget_1", "widget_5"]}, tmp_path
    )
    assert [t["name"] for t in details.data["tools"]] == ["widget_5"]
    assert "Unknown: widget_1" in details.content


def test_exposure_all_and_browse(tmp_path):
    assert len(make(60, exposure="all")[1].visible()) == 62
    _, small = make(0, exposure="browse")
    assert sorted(m.name for m in small.visible()) == sorted(CORE_TOOLS)
