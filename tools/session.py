"""Which tools a conversation currently shows the model (progressive disclosure)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from tools.registry import ToolRegistry
from tools.spec import ToolManifest

#: Always offered: the discovery tools themselves.
CORE_TOOLS = ("browse_tools", "get_tool_details")
#: With exposure "auto", every enabled tool is sent directly while there are at most this many.
DIRECT_BUDGET = 24

Exposure = Literal["auto", "all", "browse"]


@dataclass
class ToolSession:
    registry: ToolRegistry
    disabled: frozenset[str] = frozenset()
    exposure: Exposure = "auto"
    active: set[str] = field(default_factory=set)
    #: Per-conversation state tools may keep (e.g. the browser's visited sites).
    notes: dict[str, Any] = field(default_factory=dict)
    #: Set by the call pipeline once the conversation has read private data (files, mail,
    #: calendar, chat history, secrets-bearing tools): a destination "visited before" is then
    #: no longer enough for data to leave the machine. Holds what was read, in plain words.
    private_data_read: str | None = None
    #: Set by the call pipeline after a result carrying untrusted external content (web
    #: pages, MCP results, files, logs, a saved note taken from such content): where the
    #: latest such content came from.
    last_untrusted_origin: str | None = None
    #: A sub-agent's session: only these tools exist for it (None: every enabled tool).
    only: frozenset[str] | None = None
    # Both are kept with the conversation in the store (app/core/store/taint.py) and given
    # back to any session of a stored conversation (`untrusted.restore`): opening it, and
    # before each call. Only the visited sites in `notes` live in this process alone (a
    # later process then asks about them again).

    def enabled(self, name: str) -> bool:
        manifest = self.registry.get(name)
        if manifest is None or name in self.disabled or manifest.category in self.disabled:
            return False
        if self.only is not None and name not in self.only:
            return False
        return self.registry.unavailable_reason(manifest) is None

    def enabled_manifests(self) -> list[ToolManifest]:
        return [m for m in self.registry.manifests() if self.enabled(m.name)]

    def activate(self, names: Iterable[str]) -> list[str]:
        added = [n for n in names if self.enabled(n) and n not in self.active]
        self.active.update(added)
        return added

    def visible(self) -> list[ToolManifest]:
        """The tools whose schemas go to the model on the next request."""
        enabled = self.enabled_manifests()
        everything = self.exposure == "all" or (
            self.exposure == "auto" and len(enabled) <= DIRECT_BUDGET
        )
        if everything:
            return enabled
        wanted = set(CORE_TOOLS) | self.active
        return [m for m in enabled if m.name in wanted]
