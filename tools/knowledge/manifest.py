"""Knowledge tools: cheap declarations. The bodies (tools.knowledge.actions) load on first call
and read only the index (app/core/knowledge), never a file."""

from __future__ import annotations

from pydantic import Field

from tools.spec import DeferredParams, Operation, ToolManifest

IMPL = "tools.knowledge.actions"


class SearchKnowledge(DeferredParams):
    query: str = Field(
        ..., min_length=1, max_length=1000, description="What to look for, in your own words"
    )
    limit: int = Field(8, ge=1, le=20, description="At most this many passages")


class ReadKnowledge(DeferredParams):
    path: str = Field(
        ...,
        min_length=1,
        max_length=4096,
        description="The document's path, as knowledge_search gives it",
    )
    location: str | None = Field(
        None,
        max_length=200,
        description=(
            'A section as knowledge_search or the outline names it ("page 3", "sheet '
            'Budget", "slide 4", "heading: Costs"); empty: the outline and the start'
        ),
    )
    part: int = Field(1, ge=1, le=1000, description="Which part of a long section (1 first)")


MANIFESTS = [
    ToolManifest(
        name="knowledge_search",
        category="knowledge",
        description=(
            "Search the user's documents (knowledge folders and large attached files) by "
            "meaning and words. Returns numbered passages, each with its file, page or "
            "section and a link; cite them as [n](link)."
        ),
        params=SearchKnowledge,
        operations=frozenset({Operation.READ}),
        impl=f"{IMPL}:knowledge_search",
        timeout=30,
    ),
    ToolManifest(
        name="knowledge_read",
        category="knowledge",
        description=(
            "Read an indexed document by page or section (a large attachment is read this "
            "way, not all at once). Without a location: its outline and first part."
        ),
        params=ReadKnowledge,
        operations=frozenset({Operation.READ}),
        impl=f"{IMPL}:knowledge_read",
        timeout=30,
    ),
]
