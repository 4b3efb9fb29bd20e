"""browse_tools / get_tool_details: search the registry and activate tools in the session."""

from __future__ import annotations

from collections import Counter
from typing import Any, TypedDict

from tools.core.manifest import BrowseTools, GetToolDetails
from tools.registry import ToolRegistry
from tools.session import ToolSession
from tools.spec import Operation, ToolContext, ToolError, ToolManifest, ToolResult

MAX_LISTED = 40


class _Details(TypedDict):
    name: str
    category: str
    description: str
    operations: list[Operation]
    parameters: dict[str, Any]  # a JSON schema


def _registry(ctx: ToolContext) -> ToolRegistry:
    if ctx.registry is None:
        raise ToolError("tool discovery is not available here")
    return ctx.registry


def _usable(ctx: ToolContext, manifest: ToolManifest) -> bool:
    session: ToolSession | None = ctx.session
    if session is not None:
        return session.enabled(manifest.name)
    return _registry(ctx).unavailable_reason(manifest) is None


def _activate(ctx: ToolContext, names: list[str]) -> None:
    if ctx.session is not None:
        ctx.session.activate(names)


def browse_tools(args: BrowseTools, ctx: ToolContext) -> ToolResult:
    registry = _registry(ctx)
    if args.category is None and args.query is None and args.operation is None:
        counts = Counter(m.category for m in registry.manifests() if _usable(ctx, m))
        listing = [{"category": c, "tools": n} for c, n in sorted(counts.items())]
        lines = [f"- {c['category']}: {c['tools']} tools" for c in listing]
        return ToolResult(
            ok=True,
            content="Tool categories (call browse_tools with a category or query):\n"
            + "\n".join(lines),
            data={"categories": listing},
        )
    found = [
        m
        for m in registry.search(category=args.category, query=args.query, operation=args.operation)
        if _usable(ctx, m)
    ]
    if not found:
        cats = ", ".join(registry.categories())
        return ToolResult(
            ok=True, content=f"No tools match. Categories: {cats}.", data={"tools": []}
        )
    shown = found[:MAX_LISTED]
    _activate(ctx, [m.name for m in shown])
    tools = [
        {
            "name": m.name,
            "summary": m.summary,
            "operations": sorted(m.operations),
            "parameters": m.json_schema(),
        }
        for m in shown
    ]
    lines = [f"- {t['name']}: {t['summary']}" for t in tools]
    more = (
        f"\n({len(found) - len(shown)} more; narrow the search)" if len(found) > len(shown) else ""
    )
    return ToolResult(
        ok=True,
        content="These tools are now callable:\n" + "\n".join(lines) + more,
        data={"tools": tools},
    )


def get_tool_details(args: GetToolDetails, ctx: ToolContext) -> ToolResult:
    registry = _registry(ctx)
    details: list[_Details] = []
    missing: list[str] = []
    for name in args.names:
        manifest = registry.get(name)
        if manifest is None or not _usable(ctx, manifest):
            missing.append(name)
            continue
        details.append(
            {
                "name": manifest.name,
                "category": manifest.category,
                "description": manifest.description,
                "operations": sorted(manifest.operations),
                "parameters": manifest.json_schema(),
            }
        )
    _activate(ctx, [d["name"] for d in details])
    if not details:
        raise ToolError(f"no such tool(s): {', '.join(missing)}; use browse_tools to search")
    blocks = [
        f"{d['name']} ({d['category']}; {'/'.join(d['operations'])})\n{d['description']}"
        for d in details
    ]
    note = f"\nUnknown: {', '.join(missing)}" if missing else ""
    return ToolResult(ok=True, content="\n\n".join(blocks) + note, data={"tools": details})
