"""What the conversation shows: `ChatItem`s in a flat `QAbstractListModel`.

Items are plain dataclasses. Each carries a `revision` (bumped on every change) and a
`layout` slot where the delegate caches its rendered layout keyed by (width, revision,
theme), so an unchanged item is never rendered twice and an unseen one never at all.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from PySide6.QtCore import QAbstractListModel, QModelIndex, QObject, QPersistentModelIndex, Qt

from app.core.approval import ApprovalRequest
from app.ui.chat.terminal import TerminalOutput

ITEM_ROLE = Qt.ItemDataRole.UserRole + 1

_Index = QModelIndex | QPersistentModelIndex


@dataclass(eq=False)
class ChatItem:
    row: int = field(default=-1, init=False)
    revision: int = field(default=0, init=False)
    #: Render exactly on the next size query instead of estimating (set on live changes).
    eager: bool = field(default=False, init=False)
    #: The delegate's cached layout (see delegate.py).
    layout: Any = field(default=None, init=False, repr=False)
    #: (width, theme, revision, height): the estimate for an item not rendered (or the
    #: exact height of one whose documents were dropped to save memory).
    guess: Any = field(default=None, init=False, repr=False)

    def plain_text(self) -> str:
        """What "Copy message" copies and what accessibility tools read."""
        return ""

    def markdown(self) -> str:
        return self.plain_text()


@dataclass(eq=False)
class UserMessage(ChatItem):
    text: str = ""
    attachments: list[str] = field(default_factory=list)

    def plain_text(self) -> str:
        return self.text


@dataclass(eq=False)
class AssistantMessage(ChatItem):
    text: str = ""
    streaming: bool = False
    #: The user stopped the turn while this message was streaming.
    stopped: bool = False
    #: The incremental render state (render.MessageDocs), owned by the delegate.
    docs: Any = field(default=None, repr=False)

    def plain_text(self) -> str:
        return self.text

    def markdown(self) -> str:
        return self.text


@dataclass(eq=False)
class ThinkingItem(ChatItem):
    """The model's reasoning before an answer: a header that opens to the text.

    Not an answer (so not in "Copy message" of the answer, which is another item) and not
    stored: only live turns have one.
    """

    text: str = ""
    streaming: bool = False
    #: Shown expanded (the header was clicked).
    open: bool = False
    started: float = field(default_factory=time.monotonic)
    #: How long the model thought; None while it still does.
    seconds: float | None = None
    #: The incremental render state (render.PlainStream), owned by the delegate.
    docs: Any = field(default=None, repr=False)

    def label(self) -> str:
        """The header: "Thinking…" while it streams, then "Thought for N s"."""
        if self.streaming or self.seconds is None:
            return "Thinking…"
        seconds = max(1, round(self.seconds))
        if seconds < 60:
            return f"Thought for {seconds} s"
        minutes, secs = divmod(seconds, 60)
        return f"Thought for {minutes} min {secs:02d} s"

    def plain_text(self) -> str:
        return self.text


class ToolStatus(StrEnum):
    RUNNING = "running"
    AWAITING = "awaiting"
    OK = "ok"
    ERROR = "error"
    DENIED = "denied"
    CANCELLED = "cancelled"
    NOT_RUN = "not_run"


@dataclass(eq=False)
class ToolCard(ChatItem):
    call_id: str = ""
    name: str = ""
    category: str = ""
    operations: list[str] = field(default_factory=list)
    #: The arguments as shown (pretty JSON, secrets already redacted by the agent).
    arguments: str = ""
    status: ToolStatus = ToolStatus.RUNNING
    started: float = field(default_factory=time.monotonic)
    #: Final duration; None while it runs (elapsed time is then computed when painting).
    seconds: float | None = None
    progress: str = ""
    fraction: float | None = None
    approval: ApprovalRequest | None = None
    #: Height of the approval widget (preview, arguments, buttons) placed over the card.
    panel_height: int = 0
    #: A question a running tool asks ("<call id>~<n>"), not a call of its own.
    question: bool = False
    #: "Allowed once", "Always allowed", "Denied" (+ " by rule"), shown in the header.
    decision: str = ""
    result: str = ""
    error: str = ""
    attachments: list[str] = field(default_factory=list)
    args_open: bool = False
    result_open: bool = False
    #: A built-in terminal tool's output (app/ui/chat/terminal.py), shown as a terminal.
    terminal: TerminalOutput | None = None

    @property
    def finished(self) -> bool:
        return self.status not in (ToolStatus.RUNNING, ToolStatus.AWAITING)

    def elapsed(self) -> float:
        return self.seconds if self.seconds is not None else time.monotonic() - self.started

    def plain_text(self) -> str:
        parts = [f"{self.name} ({self.status.value})", self.arguments]
        if self.error:
            parts.append(f"Error: {self.error}")
        if self.result:
            parts.append(self.result)
        return "\n".join(p for p in parts if p)


@dataclass(eq=False)
class ErrorItem(ChatItem):
    message: str = ""
    retryable: bool = False
    #: Retry was clicked (the link is hidden so it cannot fire twice).
    retried: bool = False

    def plain_text(self) -> str:
        return self.message


@dataclass(eq=False)
class NoticeItem(ChatItem):
    message: str = ""

    def plain_text(self) -> str:
        return self.message


class ChatModel(QAbstractListModel):
    """A flat list of items. Rows only grow (or everything is replaced)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.items: list[ChatItem] = []

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.items)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        item = self.items[index.row()]
        if role == ITEM_ROLE:
            return item
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.AccessibleTextRole):
            return _spoken(item)
        return None

    # flags() is not overridden: QAbstractListModel's C++ one says ItemNeverHasChildren, so
    # the view's layout pass asks Python nothing but each row's size.

    def append(self, item: ChatItem) -> int:
        row = len(self.items)
        self.beginInsertRows(QModelIndex(), row, row)
        item.row = row
        self.items.append(item)
        self.endInsertRows()
        return row

    def replace_all(self, items: list[ChatItem]) -> None:
        self.beginResetModel()
        for row, item in enumerate(items):
            item.row = row
        self.items = items
        self.endResetModel()

    def changed(self, item: ChatItem) -> None:
        """`item` changed: a new revision, and one row's dataChanged."""
        item.revision += 1
        item.eager = True
        index = self.index(item.row, 0)
        self.dataChanged.emit(index, index, [ITEM_ROLE])


def _spoken(item: ChatItem) -> str:
    if isinstance(item, ThinkingItem):  # what is on screen: the header, the text if open
        state = "expanded" if item.open else "collapsed"
        item_text = f": {item.text}" if item.open else ""
        text = f"{item.label()} ({state}){item_text}"
        return text[:500] + "…" if len(text) > 500 else text
    text = item.plain_text()
    if len(text) > 500:
        text = text[:500] + "…"
    who = {
        UserMessage: "You",
        AssistantMessage: "Assistant",
        ToolCard: "Tool",
        ErrorItem: "Error",
        NoticeItem: "Notice",
    }.get(type(item), "")
    return f"{who}: {text}" if who else text
