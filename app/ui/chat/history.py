"""Stored messages → chat items: user/assistant text, tool calls as cards with results,
the stored error and "Stopped" markers in their places, and where branches are.

Every message item knows its position in the stored messages (`index`), which edit,
regenerate and branch switching need; `assign_indices` gives it to items streamed live.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from app.core.history_marks import BranchInfo, Marker
from app.core.providers.base import ChatMessage
from app.core.store import ToolCallRecord
from app.ui.chat.model import (
    AssistantMessage,
    ChatItem,
    ErrorItem,
    MarkerItem,
    MessageItem,
    ToolCard,
    ToolStatus,
    UserMessage,
)

#: What the card says for a call the user refused (never the words sent to the model).
YOU_DENIED = "You denied this"
DENIED_BY_RULE = "Denied by a rule"

_STATUS = {
    "ok": ToolStatus.OK,
    "error": ToolStatus.ERROR,
    "denied": ToolStatus.DENIED,
    "cancelled": ToolStatus.CANCELLED,
    "pending": ToolStatus.NOT_RUN,
    "running": ToolStatus.CANCELLED,  # a stored "running" call was interrupted
}


def pretty_arguments(arguments: dict[str, Any] | str) -> str:
    """Indented JSON for display (arguments arrive as a dict or as the model's raw text)."""
    value: Any = arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return arguments
    if value in ({}, None):
        return ""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def category_of(name: str) -> str:
    """The category shown for a stored call: known only for MCP tools (mcp__server__tool)."""
    if name.startswith("mcp__"):
        return "mcp:" + name.split("__")[1] if name.count("__") >= 2 else "mcp"
    return ""


def history_items(
    messages: list[ChatMessage],
    tool_calls: list[ToolCallRecord] | None = None,
    markers: Iterable[Marker] = (),
    branches: Iterable[BranchInfo] = (),
) -> list[ChatItem]:
    records = {r.call_id: r for r in tool_calls or ()}
    after: dict[int, list[Marker]] = {}
    for marker in markers:
        after.setdefault(max(0, min(marker.after, len(messages))), []).append(marker)
    items: list[ChatItem] = _marker_items(after.get(0, ()))
    cards: dict[str, ToolCard] = {}
    for index, message in enumerate(messages):
        if message.role == "user":
            images = [f"image {i + 1}" for i in range(len(message.images))]
            items.append(UserMessage(text=message.content, attachments=images, index=index))
        elif message.role == "assistant":
            if message.content.strip():
                items.append(AssistantMessage(text=message.content, index=index))
            for call in message.tool_calls:
                card = _card(call.id, call.name, call.arguments, records.get(call.id))
                cards[call.id] = card
                items.append(card)
        elif message.role == "tool" and message.tool_call_id in cards:
            _fill_result(cards[message.tool_call_id], message)
        items += _marker_items(after.get(index + 1, ()))
    place_branches(items, branches)
    return items


def _fill_result(card: ToolCard, message: ChatMessage) -> None:
    if card.status == ToolStatus.DENIED:  # the result is what the model was told
        card.decision = DENIED_BY_RULE if "deny rule" in message.content else YOU_DENIED
        card.error = ""
        return
    card.result = message.content
    if message.is_error:
        if card.status == ToolStatus.OK:
            card.status = ToolStatus.ERROR
        card.error = card.error or message.content.removeprefix("Error: ")


def _marker_items(markers: Iterable[Marker]) -> list[ChatItem]:
    return [
        MarkerItem(text=m.text or "Stopped")
        if m.kind == "stopped"
        else ErrorItem(message=m.text, kind="stored")
        for m in markers
    ]


def place_branches(items: Sequence[ChatItem], branches: Iterable[BranchInfo]) -> None:
    """Puts each branch's "‹ 2/3 ›" on the first message item at or after its index."""
    wanted = sorted((b for b in branches if b.count > 1), key=lambda b: b.index)
    if not wanted:
        return
    messages = [i for i in items if isinstance(i, MessageItem) and i.index is not None]
    k = 0
    for info in wanted:
        while k < len(messages) and (messages[k].index or 0) < info.index:
            k += 1
        if k < len(messages) and messages[k].branch is None:
            messages[k].branch = info


def assign_indices(items: Sequence[ChatItem], messages: Sequence[ChatMessage]) -> list[ChatItem]:
    """Gives live message items their position in `messages` (the walk of `history_items`);
    returns the items whose index changed.

    Starts at the last item that already has an index, so a long conversation costs only
    its newest turn. An answer streamed in pieces (reasoning between them) is one message.
    """
    start, first = _resume_point(items)
    slots: list[tuple[str, int, str]] = []  # (kind, message index, text or call id)
    for index in range(first, len(messages)):
        message = messages[index]
        if message.role == "user":
            slots.append(("user", index, message.content))
        elif message.role == "assistant":
            if message.content.strip():
                slots.append(("assistant", index, message.content))
            slots += [("tool", index, call.id) for call in message.tool_calls]
    changed: list[ChatItem] = []
    j = 0
    last: tuple[int, str] | None = None  # the answer the previous piece belonged to
    for item in items[start:]:
        if isinstance(item, ToolCard):
            last = None
            continue
        if not isinstance(item, MessageItem):
            continue
        kind = "user" if isinstance(item, UserMessage) else "assistant"
        piece = item.text.strip()
        found: int | None = None
        if kind == "assistant" and last is not None and piece and piece in last[1]:
            found = last[0]
        else:
            k = j
            while k < len(slots) and slots[k][0] != kind:
                if kind == "assistant" and slots[k][0] == "user":
                    k = len(slots)  # an answer never belongs to a later turn
                    break
                k += 1
            if k < len(slots):
                found, j = slots[k][1], k + 1
                last = (slots[k][1], slots[k][2]) if kind == "assistant" else None
        if found is not None and found != item.index:
            item.index = found
            changed.append(item)
    return changed


def _resume_point(items: Sequence[ChatItem]) -> tuple[int, int]:
    """(item position, message index) of the last message item with a known index."""
    for pos in range(len(items) - 1, -1, -1):
        item = items[pos]
        if isinstance(item, MessageItem) and item.index is not None:
            return pos, item.index
    return 0, 0


def _card(call_id: str, name: str, arguments: str, record: ToolCallRecord | None) -> ToolCard:
    card = ToolCard(
        call_id=call_id,
        name=name,
        category=category_of(name),
        arguments=pretty_arguments(record.arguments if record else arguments),
        status=ToolStatus.OK,
    )
    if record is not None:
        card.status = _STATUS.get(record.status, ToolStatus.OK)
        card.error = "" if card.status == ToolStatus.DENIED else record.error or ""
        if record.finished_at is not None:
            card.seconds = (record.finished_at - record.started_at).total_seconds()
    return card
