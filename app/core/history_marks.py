"""What a conversation shows besides its messages: error and "Stopped" markers, and where
its branches (edited or regenerated turns) are. Stored by `Store`, shown by the chat view."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MarkerKind = Literal["error", "stopped"]


@dataclass(frozen=True)
class Marker:
    #: How many of the conversation's messages come before the marker (it follows
    #: `messages[after - 1]`; 0 puts it before the first message).
    after: int
    kind: MarkerKind
    #: Plain words for the user (never text meant for the model).
    text: str


@dataclass(frozen=True)
class BranchInfo:
    #: The index in the conversation's messages of the first message that differs between
    #: branches (a user message for an edit, the first answer message for a regenerate).
    index: int
    #: Which branch is shown, 1-based, and how many there are.
    current: int
    count: int
