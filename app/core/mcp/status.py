"""What `deskhand mcp list` and the GUI show about each server (no SDK import)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    DISABLED = "disabled"
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"
    STOPPED = "stopped"


@dataclass
class ServerState:
    name: str
    transport: str
    status: Status = Status.STOPPED
    error: str | None = None
    restarts: int = 0
    tools: list[str] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)

    def copy(self) -> ServerState:
        return replace(
            self, tools=list(self.tools), resources=list(self.resources), prompts=list(self.prompts)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.transport,
            "status": self.status.value,
            "error": self.error,
            "restarts": self.restarts,
            "tools": list(self.tools),
            "resources": list(self.resources),
            "prompts": list(self.prompts),
        }
