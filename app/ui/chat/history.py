"""Stored messages → chat items: user/assistant text, tool calls as cards with results,
the stored error and "Stopped" markers in their places, and where branches are.

Every message item knows its position in the stored messages (`index`), which edit,
regenerate and branch switching need; `assign_indices` gives it to items streamed live.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.compaction import is_summary
from app.core.history_marks import BranchInfo, Marker
from app.core.providers.base import ChatMessage
from app.core.store import ToolCallRecord
from app.ui.chat.model import (
    AssistantMessage,
    ChatItem,
    ErrorItem,
    MarkerItem,
    MessageItem,
    NoticeItem,
    ToolCard,
    ToolStatus,
    UserMessage,
)

#: What the card says for a call the user refused (never the words sent to the model).
YOU_DENIED = "You denied this"
DENIED_BY_RULE = "Denied by a rule"
#: Where a compaction summary stands in for earlier messages (the model reads the summary).
SUMMARISED = (
    "Deskhand summarised the messages above for the model, to save space. You still see them all."
)
#: How attached files' text starts in a stored user message (`build_user_message`).
_ATTACHED = ("Attached file `", "[attached image: ")

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
    items: list[ChatItem] = _marker_items(after.get(0, ()), 0)
    cards: dict[str, ToolCard] = {}
    for index, message in enumerate(messages):
        if is_summary(message):
            # the model's own summary of what came before: not something the user typed
            items.append(NoticeItem(message=SUMMARISED))
        elif message.role == "user":
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
        items += _marker_items(after.get(index + 1, ()), index + 1)
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


def _marker_items(markers: Iterable[Marker], at: int) -> list[ChatItem]:
    return [
        MarkerItem(text=m.text or "Stopped", after=at)
        if m.kind == "stopped"
        else ErrorItem(message=m.text, kind="stored", after=at)
        for m in markers
    ]


def place_branches(items: Sequence[ChatItem], branches: Iterable[BranchInfo]) -> None:
    """Puts each branch's "‹ 2/3 ›" on the first message item at or after its index; when
    no message is there (a regenerate stopped or failed before any text), on the first
    "Stopped" or error row at or after it, so the other versions stay reachable."""
    wanted = sorted((b for b in branches if b.count > 1), key=lambda b: b.index)
    if not wanted:
        return
    messages = [i for i in items if isinstance(i, MessageItem) and i.index is not None]
    rows = _placed_rows(items)
    shown = {i.branch.index for i in items if isinstance(i, _SWITCHABLE) and i.branch}
    k = 0
    for info in wanted:
        if info.index in shown:  # already on a row (a later turn must not add another)
            continue
        while k < len(messages) and (messages[k].index or 0) < info.index:
            k += 1
        if k < len(messages):
            if messages[k].branch is None:
                messages[k].branch = info
            continue
        row = next((r for at, r in rows if at >= info.index), None)
        if row is not None and row.branch is None:
            row.branch = info


#: Rows that can carry the version switch.
_SWITCHABLE = (MessageItem, MarkerItem, ErrorItem)


def _placed_rows(items: Sequence[ChatItem]) -> list[tuple[int, MarkerItem | ErrorItem]]:
    """Marker and error rows with the stored position they stand at: their own `after`,
    or (live rows) just after the message item before them."""
    rows: list[tuple[int, MarkerItem | ErrorItem]] = []
    here: int | None = 0
    for item in items:
        if isinstance(item, MessageItem):
            here = None if item.index is None else item.index + 1
        elif isinstance(item, MarkerItem | ErrorItem):
            at = item.after if item.after is not None else here
            if at is not None:
                rows.append((at, item))
    return rows


@dataclass(frozen=True)
class _Slot:
    """A stored message (or one of its tool calls) a live item may stand for."""

    kind: str  # user | assistant | tool
    index: int
    key: str  # the text (user, assistant) or the call id (tool)


def assign_indices(items: Sequence[ChatItem], messages: Sequence[ChatMessage]) -> list[ChatItem]:
    """Gives live message items their position in `messages`; returns the items whose
    index changed.

    An item only takes the index of a message that says what it shows (the typed text, a
    piece of the answer, the tool call's id); otherwise it stays without one (no Edit or
    Regenerate) rather than pointing at another message. Compaction summaries are stored
    user messages the live view never shows: they are skipped. Starts at the last item
    that already has an index, so a long conversation costs only its newest turn. An
    answer streamed in pieces (reasoning between them) is one message.
    """
    start, first = _resume_point(items)
    slots = _slots(messages, first)
    walk = list(items[start:])
    head = walk[0] if walk else None
    resumed = isinstance(head, MessageItem) and head.index is not None
    lo = _past(slots, head) if isinstance(head, MessageItem) and resumed else 0
    users = _match_users(walk[1:] if resumed else walk, slots, lo)
    bounds = _next_bounds(walk, users, len(slots))
    changed: list[ChatItem] = []
    last: _Slot | None = None  # the answer the previous piece belonged to
    for pos, item in enumerate(walk):
        found: _Slot | None = None
        if pos == 0 and resumed:
            assert isinstance(item, MessageItem)
            last = _slot_at(slots, item) if isinstance(item, AssistantMessage) else None
            continue
        if isinstance(item, UserMessage):
            k = users.get(id(item))
            if k is not None:
                found, lo = slots[k], k + 1
            last = None
        elif isinstance(item, ToolCard):
            k = _find(slots, lo, bounds[pos], "tool", _equals(item.call_id))
            if k is not None:
                lo = k + 1
            last = None
        elif isinstance(item, AssistantMessage):
            piece = item.text.strip()
            if not piece:
                continue
            if last is not None and piece in last.key:
                found = last
            else:
                k = _find(slots, lo, bounds[pos], "assistant", _holds(piece))
                if k is not None:
                    found = last = slots[k]
                    lo = k + 1
        if found is not None and isinstance(item, MessageItem) and found.index != item.index:
            item.index = found.index
            changed.append(item)
    return changed


def _slots(messages: Sequence[ChatMessage], first: int) -> list[_Slot]:
    slots: list[_Slot] = []
    for index in range(first, len(messages)):
        message = messages[index]
        if message.role == "user" and not is_summary(message):
            slots.append(_Slot("user", index, message.content))
        elif message.role == "assistant":
            if message.content.strip():
                slots.append(_Slot("assistant", index, message.content))
            slots += [_Slot("tool", index, call.id) for call in message.tool_calls]
    return slots


def _past(slots: Sequence[_Slot], item: MessageItem) -> int:
    """Where the walk goes on after an item whose index is known (an answer's tool calls,
    stored in the same message, still follow it)."""
    for k, slot in enumerate(slots):
        if slot.index > (item.index or 0) or (slot.index == item.index and slot.kind == "tool"):
            return k
    return len(slots)


def _slot_at(slots: Sequence[_Slot], item: MessageItem) -> _Slot | None:
    return next((s for s in slots if s.index == item.index and s.kind == "assistant"), None)


def _match_users(walk: Sequence[ChatItem], slots: Sequence[_Slot], lo: int) -> dict[int, int]:
    """Each live user message → the first later stored user message with its text (they
    bound the turns the answers and tool calls between them are looked for in)."""
    found: dict[int, int] = {}
    for item in walk:
        if isinstance(item, UserMessage):
            k = _find(slots, lo, len(slots), "user", _said_in(item.text))
            if k is not None:
                found[id(item)] = k
                lo = k + 1
    return found


def _next_bounds(walk: Sequence[ChatItem], users: dict[int, int], end: int) -> list[int]:
    """For each walked item, the slot of the next matched user message (an answer never
    belongs to a later turn)."""
    bounds = [end] * len(walk)
    bound = end
    for pos in range(len(walk) - 1, -1, -1):
        bounds[pos] = bound
        k = users.get(id(walk[pos]))
        if k is not None:
            bound = k
    return bounds


def _find(
    slots: Sequence[_Slot], lo: int, hi: int, kind: str, matches: Callable[[str], bool]
) -> int | None:
    for k in range(lo, min(hi, len(slots))):
        if slots[k].kind == kind and matches(slots[k].key):
            return k
    return None


def _said(text: str, content: str) -> bool:
    """Whether stored user message `content` is what was typed as `text` (attached files'
    text follows it, as `build_user_message` writes it)."""
    if not text:
        return not content or content.startswith(_ATTACHED)
    return content == text or content.startswith(text + "\n\n")


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


def _equals(expected: str) -> Callable[[str], bool]:
    return lambda key: key == expected


def _holds(piece: str) -> Callable[[str], bool]:
    return lambda key: piece in key


def _said_in(text: str) -> Callable[[str], bool]:
    return lambda key: _said(text, key)
