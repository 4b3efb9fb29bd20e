"""Stored messages → chat items: user/assistant text, tool calls as cards with results."""

from __future__ import annotations

import json
from typing import Any

from app.core.providers.base import ChatMessage
from app.core.store import ToolCallRecord
from app.ui.chat.model import AssistantMessage, ChatItem, ToolCard, ToolStatus, UserMessage

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
    messages: list[ChatMessage], tool_calls: list[ToolCallRecord] | None = None
) -> list[ChatItem]:
    records = {r.call_id: r for r in tool_calls or ()}
    items: list[ChatItem] = []
    cards: dict[str, ToolCard] = {}
    for message in messages:
        if message.role == "user":
            images = [f"image {i + 1}" for i in range(len(message.images))]
            items.append(UserMessage(text=message.content, attachments=images))
        elif message.role == "assistant":
            if message.content.strip():
                items.append(AssistantMessage(text=message.content))
            for call in message.tool_calls:
                card = _card(call.id, call.name, call.arguments, records.get(call.id))
                cards[call.id] = card
                items.append(card)
        elif message.role == "tool" and message.tool_call_id in cards:
            card = cards[message.tool_call_id]
            card.result = message.content
            if message.is_error:
                if card.status == ToolStatus.OK:
                    card.status = ToolStatus.ERROR
                card.error = card.error or message.content.removeprefix("Error: ")
    return items


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
        card.error = record.error or ""
        if record.finished_at is not None:
            card.seconds = (record.finished_at - record.started_at).total_seconds()
    return card
