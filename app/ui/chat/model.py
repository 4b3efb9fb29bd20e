"""What the conversation shows: `ChatItem`s in a flat `QAbstractListModel`.

Items are plain dataclasses. Each carries a `revision` (bumped on every change) and a
`layout` slot where the delegate caches its rendered layout keyed by (width, revision,
theme), so an unchanged item is never rendered twice and an unseen one never at all.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from PySide6.QtCore import QAbstractListModel, QModelIndex, QObject, QPersistentModelIndex, Qt

from app.core.approval import ApprovalRequest
from app.core.history_marks import BranchInfo
from app.core.tool_names import category_title, tool_title
from app.core.visible import one_line
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

    def spoken_role(self) -> str:
        """Who or what this is, for screen readers ("You said", "Tool: Write file")."""
        return ""


@dataclass(eq=False)
class MessageItem(ChatItem):
    """A user message or an answer: selectable text with actions (Copy, Edit, Regenerate)."""

    text: str = ""
    #: Position in the conversation's stored messages; None until known (live items get it
    #: from `ChatView.sync_indices`). Actions that need it are hidden until then.
    index: int | None = None
    #: The branches at this message (an edited or regenerated turn), if any.
    branch: BranchInfo | None = None

    def plain_text(self) -> str:
        return self.text


@dataclass(eq=False)
class UserMessage(MessageItem):
    attachments: list[str] = field(default_factory=list)
    #: Said after the attachments' names ("images not sent: …").
    attachments_note: str = ""
    #: The inline editor is open over this message (its height, for the layout).
    editing: bool = False
    editor_height: int = 0

    def spoken_role(self) -> str:
        return "You said"


@dataclass(eq=False)
class AssistantMessage(MessageItem):
    streaming: bool = False
    #: The user stopped the turn while this message was streaming.
    stopped: bool = False
    #: The incremental render state (render.MessageDocs), owned by the delegate.
    docs: Any = field(default=None, repr=False)

    def spoken_role(self) -> str:
        return "Deskhand answered"

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


STATUS_WORDS = {
    ToolStatus.RUNNING: "Running",
    ToolStatus.AWAITING: "Needs approval",
    ToolStatus.OK: "Done",
    ToolStatus.ERROR: "Failed",
    ToolStatus.DENIED: "Denied",
    ToolStatus.CANCELLED: "Cancelled",
    ToolStatus.NOT_RUN: "Not run",
}


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
    #: The sub-agent making this call ("Researcher"); "" for the conversation's own.
    agent: str = ""
    #: For a sub-agent's call: the `delegate_agent` call it belongs to (shown under it).
    parent_call_id: str = ""

    @property
    def finished(self) -> bool:
        return self.status not in (ToolStatus.RUNNING, ToolStatus.AWAITING)

    @property
    def title(self) -> str:
        """The plain name shown on the card ("Write file"); `name` stays the identity. A
        sub-agent's call says whose it is ("Researcher · Read file")."""
        plain = tool_title(self.name) if self.name else "Tool"
        return f"{one_line(self.agent, 40)} · {plain}" if self.agent else plain

    @property
    def category_label(self) -> str:
        return category_title(self.category) if self.category else ""

    def spoken_role(self) -> str:
        return f"Tool: {self.title} — {STATUS_WORDS[self.status].lower()}"

    def elapsed(self) -> float:
        return self.seconds if self.seconds is not None else time.monotonic() - self.started

    def plain_text(self) -> str:
        parts = [f"{self.title} ({STATUS_WORDS[self.status].lower()})", self.arguments]
        if self.status == ToolStatus.DENIED:  # what the model was told is not for people
            return "\n".join(p for p in (*parts, self.decision) if p)
        if self.error:
            parts.append(f"Error: {self.error}")
        if self.result:
            parts.append(self.result)
        return "\n".join(p for p in parts if p)


#: The tool that hands a task to a sub-agent: its card is a `DelegationCard`.
DELEGATE_TOOL = "delegate_agent"


@dataclass(eq=False)
class DelegationCard(ToolCard):
    """A `delegate_agent` call: the agent at work on a task; its own calls are cards of
    their own, placed right after this one (`steps`) and hidden with it (`collapsed`)."""

    #: The agent it was handed to ("Researcher") and the task, from the call's arguments.
    sub_agent: str = ""
    task: str = ""
    #: The child conversation (once the call finished), for "Open Researcher's conversation".
    conversation_id: str | None = None
    #: The agent's calls, in the order they started (live only: a stored delegation's
    #: calls are in its agent's conversation).
    steps: list[ToolCard] = field(default_factory=list, repr=False)
    collapsed: bool = False

    @property
    def title(self) -> str:
        return one_line(self.sub_agent, 40) or "Sub-agent"

    def spoken_role(self) -> str:
        return f"Sub-agent {self.title} — {STATUS_WORDS[self.status].lower()}"

    def task_line(self) -> str:
        """The task's first line (the card shows it under the agent's name)."""
        first = next((line for line in self.task.splitlines() if line.strip()), "")
        return one_line(first.strip(), 300)

    def set_arguments(self, arguments: dict[str, Any] | str) -> None:
        """The agent and task from the call's arguments (a dict, or the model's JSON)."""
        value: Any = arguments
        if isinstance(arguments, str):
            try:
                value = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                value = {}
        if isinstance(value, dict):
            agent, task = value.get("agent"), value.get("task")
            self.sub_agent = agent.strip() if isinstance(agent, str) else self.sub_agent
            self.task = task if isinstance(task, str) else self.task

    def set_data(self, data: Any) -> None:
        """What the finished call's `result.data` says (its child conversation)."""
        if not isinstance(data, dict):
            return
        conversation, agent = data.get("conversation_id"), data.get("agent")
        self.conversation_id = conversation if isinstance(conversation, str) else None
        if isinstance(agent, str) and agent:
            self.sub_agent = agent

    def plain_text(self) -> str:
        head = f"{self.title} ({STATUS_WORDS[self.status].lower()})"
        parts = [head, self.task]
        if self.status == ToolStatus.DENIED:
            return "\n".join(p for p in (*parts, self.decision) if p)
        parts += [f"Error: {self.error}" if self.error else "", self.result]
        return "\n".join(p for p in parts if p)


def delegation_card(card: ToolCard, data: Any = None) -> DelegationCard:
    """`card` (a stored `delegate_agent` call from the history) as a delegation card."""
    values = {f.name: getattr(card, f.name) for f in fields(ToolCard) if f.init}
    found = DelegationCard(**values)
    found.set_arguments(card.arguments)
    found.set_data(data)
    return found


@dataclass(eq=False)
class ErrorItem(ChatItem):
    message: str = ""
    retryable: bool = False
    #: Retry was clicked (the link is hidden so it cannot fire twice).
    retried: bool = False
    #: The agent's error kind; "setup" offers "Connect a model".
    kind: str = "error"
    #: Stored messages before it (errors from the history); None for live ones.
    after: int | None = None
    #: The version switch, when a regenerate failed before its answer had any text.
    branch: BranchInfo | None = None

    def plain_text(self) -> str:
        return self.message

    def spoken_role(self) -> str:
        return "Error"


@dataclass(eq=False)
class NoticeItem(ChatItem):
    message: str = ""

    def plain_text(self) -> str:
        return self.message

    def spoken_role(self) -> str:
        return "Notice"


@dataclass(eq=False)
class MarkerItem(ChatItem):
    """A neutral line in the conversation: "Stopped" where the user stopped a turn."""

    text: str = "Stopped"
    #: Stored messages before it (markers from the history); None for live ones.
    after: int | None = None
    #: The version switch, when a regenerate was stopped before its answer had any text.
    branch: BranchInfo | None = None

    def plain_text(self) -> str:
        return self.text

    def spoken_role(self) -> str:
        return "Marker"


@dataclass(eq=False)
class PendingItem(ChatItem):
    """ "Thinking…" while the model has not said anything yet (always the last row)."""

    def plain_text(self) -> str:
        return "Thinking…"

    def spoken_role(self) -> str:
        return "Deskhand is working"


class ChatModel(QAbstractListModel):
    """A flat list of items. Rows only grow (or everything is replaced); only a sub-agent's
    call is inserted (after its delegation), moving the rows below it."""

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
        if role == Qt.ItemDataRole.AccessibleDescriptionRole:
            return _description(item)
        if role == Qt.ItemDataRole.ToolTipRole and isinstance(item, ToolCard):
            return item.name
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

    def insert(self, row: int, item: ChatItem) -> None:
        """Puts `item` at `row` (a sub-agent's call after its delegation's rows); the rows
        after it move down one."""
        row = max(0, min(row, len(self.items)))
        self.beginInsertRows(QModelIndex(), row, row)
        self.items.insert(row, item)
        for at in range(row, len(self.items)):
            self.items[at].row = at
        self.endInsertRows()

    def remove_last(self) -> ChatItem:
        """Removes the last row (the pending indicator; no other row ever moves)."""
        row = len(self.items) - 1
        self.beginRemoveRows(QModelIndex(), row, row)
        item = self.items.pop()
        self.endRemoveRows()
        item.row = -1
        return item

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
    """What a screen reader reads for the row: who or what, then the text."""
    if isinstance(item, ThinkingItem):  # what is on screen: the header, the text if open
        state = "expanded" if item.open else "collapsed"
        item_text = f": {item.text}" if item.open else ""
        text = f"{item.label()} ({state}){item_text}"
        return text[:500] + "…" if len(text) > 500 else text
    if isinstance(item, ToolCard):
        text = item.decision or item.progress or item.error or item.result
        if item.status == ToolStatus.DENIED:
            text = item.decision
        if item.approval is not None:
            text = item.approval.summary
    elif isinstance(item, PendingItem | MarkerItem):
        return item.plain_text()
    else:
        text = item.plain_text()
    text = " ".join(text.split())
    if len(text) > 500:
        text = text[:500] + "…"
    role = item.spoken_role()
    return f"{role}: {text}" if role and text else role or text


def _description(item: ChatItem) -> str:
    """The role alone; for a tool card also its machine name (what rules and logs use)."""
    if isinstance(item, ToolCard):
        kind = f" ({item.category_label})" if item.category else ""
        return f"{item.spoken_role()}. Tool name {item.name}{kind}"
    branch = getattr(item, "branch", None)
    if isinstance(branch, BranchInfo):
        return f"{item.spoken_role()}, version {branch.current} of {branch.count}"
    return item.spoken_role()
