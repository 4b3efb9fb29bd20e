"""What `deskhand mcp list` and the GUI show about each server (no SDK import)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from app.core.mcp.config import EntryProblem


class Status(StrEnum):
    DISABLED = "disabled"
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"
    STOPPED = "stopped"
    #: A remote server answered 401: the user must sign in (OAuth); never retried alone.
    NEEDS_SIGN_IN = "needs sign-in"
    #: The mcp.json entry itself is wrong (see `problems`); the server is never started.
    INVALID = "invalid"


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
    #: Tools the server lists that are not offered to the model (they need MCP tasks).
    hidden_tools: list[str] = field(default_factory=list)
    #: Why the mcp.json entry cannot be used (only when INVALID).
    problems: list[EntryProblem] = field(default_factory=list)
    #: The last lines the server wrote to stderr, redacted and made visible (see stderr.py);
    #: filled for a server that failed or is restarting.
    stderr: list[str] = field(default_factory=list)

    @classmethod
    def invalid(cls, name: str, problems: list[EntryProblem]) -> ServerState:
        """The state of an mcp.json entry that cannot be used."""
        error = "; ".join(p.message for p in problems) or None
        return cls(name, "unknown", Status.INVALID, error=error, problems=list(problems))

    def copy(self) -> ServerState:
        return replace(
            self,
            tools=list(self.tools),
            hidden_tools=list(self.hidden_tools),
            resources=list(self.resources),
            prompts=list(self.prompts),
            problems=list(self.problems),
            stderr=list(self.stderr),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.transport,
            "status": self.status.value,
            "error": self.error,
            "restarts": self.restarts,
            "tools": list(self.tools),
            "hidden_tools": list(self.hidden_tools),
            "resources": list(self.resources),
            "prompts": list(self.prompts),
            "problems": [p.to_json() for p in self.problems],
            "stderr": list(self.stderr),
        }
