"""Discovery tools: how the model finds and activates the rest (progressive disclosure)."""

from __future__ import annotations

from pydantic import Field

from tools.spec import DeferredParams, Operation, ToolManifest


class BrowseTools(DeferredParams):
    category: str | None = Field(None, description="Only this category, e.g. 'fs' or 'docker'")
    query: str | None = Field(None, description="Words that must appear in the tool's name or text")
    operation: Operation | None = Field(
        None,
        description="Only tools that perform this operation (read/create/update/delete/execute)",
    )


class GetToolDetails(DeferredParams):
    names: list[str] = Field(..., min_length=1, max_length=20, description="Tool names")


MANIFESTS = [
    ToolManifest(
        name="browse_tools",
        category="core",
        description=(
            "Find tools by category, words or operation and make them callable in this chat. "
            "Call with no arguments to see the categories. Returns names, one-line "
            "descriptions and parameter schemas."
        ),
        params=BrowseTools,
        operations=frozenset({Operation.READ}),
        impl="tools.core.discovery:browse_tools",
        timeout=10,
    ),
    ToolManifest(
        name="get_tool_details",
        category="core",
        description=(
            "Show the full description, operations and parameter schema of named tools, "
            "and make them callable in this chat."
        ),
        params=GetToolDetails,
        operations=frozenset({Operation.READ}),
        impl="tools.core.discovery:get_tool_details",
        timeout=10,
    ),
]
