"""Memory tools: short notes kept across conversations (facts, preferences, tasks)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tools.spec import DeferredParams, Operation, ToolManifest

IMPL = "tools.memory.actions"
#: Writing a note right after reading untrusted content asks, naming where it came from.
AFTER_UNTRUSTED = "tools.memory.policy:after_untrusted"
Kind = Literal["fact", "preference", "task"]


class StoreMemory(DeferredParams):
    content: str = Field(
        ..., min_length=1, max_length=2000, description="One short, self-contained statement"
    )
    kind: Kind = Field("fact", description="fact, preference (how the user likes things) or task")


class SearchMemory(DeferredParams):
    query: str = Field(
        ..., min_length=1, description="What to look for: words, or what the note is about"
    )
    kind: Kind | None = Field(None, description="Only this kind")
    limit: int = Field(10, ge=1, le=50)


class UpdateMemory(DeferredParams):
    id: int = Field(..., description="Memory id from memory_search or memory_list")
    content: str | None = Field(None, min_length=1, max_length=2000, description="New text")
    kind: Kind | None = Field(None, description="New kind")


class MemoryRef(DeferredParams):
    id: int = Field(..., description="Memory id from memory_search or memory_list")


class ListMemory(DeferredParams):
    kind: Kind | None = Field(None, description="Only this kind")
    limit: int = Field(50, ge=1, le=200)


def _tool(
    name: str,
    description: str,
    params: type[BaseModel],
    op: Operation,
    *,
    writes_text: bool = False,
) -> ToolManifest:
    return ToolManifest(
        name=name,
        category="memory",
        description=description,
        params=params,
        operations=frozenset({op}),
        impl=f"{IMPL}:{name}",
        timeout=20,
        escalate=AFTER_UNTRUSTED if writes_text else None,
        summary_line=None
        if op is Operation.READ
        else f"tools.memory.approval:summary_{name.removeprefix('memory_')}",
    )


MANIFESTS = [
    _tool(
        "memory_store",
        "Remember a fact, preference or task about the user for future conversations. "
        "Store only what the user would want kept; never secrets.",
        StoreMemory,
        Operation.CREATE,
        writes_text=True,
    ),
    _tool(
        "memory_search",
        "Search remembered facts, preferences and tasks by meaning and by words, "
        "best matches first.",
        SearchMemory,
        Operation.READ,
    ),
    _tool(
        "memory_update",
        "Change the text or kind of a remembered item.",
        UpdateMemory,
        Operation.UPDATE,
        writes_text=True,
    ),
    _tool("memory_delete", "Forget a remembered item.", MemoryRef, Operation.DELETE),
    _tool(
        "memory_list",
        "List remembered items, most recently changed first.",
        ListMemory,
        Operation.READ,
    ),
]
