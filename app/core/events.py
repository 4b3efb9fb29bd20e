"""What the agent loop tells its consumers (the GUI controller, the CLI, tests)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.core.approval import ApprovalRequest, Decision
from app.core.providers.base import Usage
from tools.spec import ToolResult


@dataclass
class TextDelta:
    text: str


@dataclass
class ReasoningDelta:
    """The model's thinking, shown collapsed; not part of the answer."""

    text: str


@dataclass
class ToolCallStarted:
    call_id: str
    name: str
    arguments: dict[str, Any] | str
    category: str = ""
    operations: list[str] = field(default_factory=list)
    #: The sub-agent making the call ("Researcher"); "" for the conversation's own.
    agent: str = ""
    #: For a sub-agent's call: the `delegate_agent` call it belongs to.
    parent_call_id: str = ""


@dataclass
class ToolProgress:
    call_id: str
    message: str
    fraction: float | None = None


@dataclass
class ApprovalRequested:
    request: ApprovalRequest


@dataclass
class ApprovalDecided:
    call_id: str
    tool: str
    decision: Decision
    #: "user" (answered on a card or a terminal), "rule" (a deny rule) or "yes" (--yes).
    source: str = "user"


@dataclass
class ToolCallFinished:
    call_id: str
    name: str
    result: ToolResult
    seconds: float = 0.0


@dataclass
class TurnFinished:
    usage: Usage
    stop_reason: str
    steps: int = 0


@dataclass
class Error:
    message: str
    kind: str = "error"
    retryable: bool = False


@dataclass
class Notice:
    """Something the user should know that does not end the turn (e.g. history not saved)."""

    message: str
    kind: str = "notice"


AgentEvent = (
    TextDelta
    | ReasoningDelta
    | ToolCallStarted
    | ToolProgress
    | ApprovalRequested
    | ApprovalDecided
    | ToolCallFinished
    | TurnFinished
    | Error
    | Notice
)
