"""Compaction of long conversations: older turns become one summary message.

Before a model call, when the history that would be sent passes the budget
(`settings.conversation.compact_after_chars`), the oldest turns are summarised by the same
provider (a separate call without tools). The summary is an ordinary "user" message that
starts with a header naming how many earlier messages it replaces; it is stored like any
other message (so the UI shows it), and nothing is deleted: `request_view` builds what the
model sees (latest summary + the messages after it covers), the store keeps everything.

A cut always falls just before an assistant message, so a tool call is never separated
from its results and the request keeps alternating user → assistant.

Compaction never clears what the conversation read (private data, untrusted content; kept
in the store, app/core/store/taint.py): the summary is written from the summarised results
and keeps their facts, names and numbers, so their taint stays with it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.core import untrusted
from app.core.providers.base import ChatMessage, Provider, TextChunk

SUMMARY_PREFIX = "[Summary of earlier conversation"
_HEADER = SUMMARY_PREFIX + " — replaces the first {count} messages]"
_HEADER_RE = re.compile(
    r"\A\[Summary of earlier conversation — replaces the first (\d+) messages\]"
)
#: Characters an image counts for (its data URL would overstate it; tokens are per tile).
IMAGE_CHARS = 3000
#: Summary requests per model call at most (each summarises about one budget's worth).
MAX_ROUNDS = 8
#: A tool result longer than this is shortened in the text given to the summariser.
TRANSCRIPT_ITEM_CAP = 4000
SUMMARISER_SYSTEM = (
    "You compress conversations. Write a faithful summary of the transcript you are given so "
    "that the assistant can continue the conversation without it: the user's goals and "
    "requests, decisions made, facts learned, files, names, numbers and results that may "
    "matter later, and what is still open. Use concise bullet points. Do not add anything."
)


def summary_covers(msg: ChatMessage) -> int | None:
    """How many leading messages a summary message replaces; None if it is not one."""
    if msg.role != "user":
        return None
    match = _HEADER_RE.match(msg.content)
    return int(match.group(1)) if match else None


def is_summary(msg: ChatMessage) -> bool:
    return summary_covers(msg) is not None


def _latest_summary(messages: Sequence[ChatMessage]) -> tuple[ChatMessage, int] | None:
    for msg in reversed(messages):
        covers = summary_covers(msg)
        if covers is not None:
            return msg, covers
    return None


def request_view(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """What the model is sent: the latest summary, then every later non-summary message."""
    latest = _latest_summary(messages)
    if latest is None:
        return list(messages)
    summary, covers = latest
    return [summary, *(m for m in messages[covers:] if not is_summary(m))]


def message_chars(msg: ChatMessage) -> int:
    calls = sum(len(c.name) + len(c.arguments) for c in msg.tool_calls)
    return len(msg.content) + calls + IMAGE_CHARS * len(msg.images)


def history_chars(messages: Sequence[ChatMessage]) -> int:
    return sum(message_chars(m) for m in messages)


@dataclass(frozen=True)
class Plan:
    """Summarise `messages[start:cut]` (non-summary ones), after `previous` if there is one."""

    start: int
    cut: int
    previous: ChatMessage | None


def plan(messages: Sequence[ChatMessage], budget: int) -> Plan | None:
    """None while the request fits `budget` characters (or nothing more can be summarised).

    The cut keeps the most recent messages that fit in half the budget (the rest is room
    for the summary and the next turns). The part summarised in one go is at most about
    `budget` characters, so the summary request fits the model too; the agent repeats
    compaction until the request fits.
    """
    if budget <= 0 or history_chars(request_view(messages)) <= budget:
        return None
    latest = _latest_summary(messages)
    previous, start = latest if latest is not None else (None, 0)
    # Cutting just before an assistant message never separates a tool call from its results.
    cuts = [i for i in range(start + 1, len(messages)) if messages[i].role == "assistant"]
    if not cuts:
        return None
    target = budget // 2
    cut = next(
        (
            c
            for c in cuts
            if history_chars([m for m in messages[c:] if not is_summary(m)]) <= target
        ),
        cuts[-1],
    )
    fitting = [
        c for c in cuts if c <= cut and _segment_chars(previous, messages[start:c]) <= budget
    ]
    return Plan(start, fitting[-1] if fitting else cuts[0], previous)


def _segment_chars(previous: ChatMessage | None, part: Sequence[ChatMessage]) -> int:
    """About how long the summariser's transcript of `part` will be."""
    own = sum(min(message_chars(m), TRANSCRIPT_ITEM_CAP) for m in part if not is_summary(m))
    return own + (len(previous.content) if previous is not None else 0)


def transcript(plan_: Plan, messages: Sequence[ChatMessage], cap: int) -> str:
    """The part to summarise as plain text, at most `cap` characters (oldest cut first)."""
    parts: list[str] = []
    if plan_.previous is not None:
        parts.append("Earlier summary:\n" + plan_.previous.content)
    for msg in messages[plan_.start : plan_.cut]:
        if is_summary(msg):
            continue
        text = msg.content
        if len(text) > TRANSCRIPT_ITEM_CAP:
            text = text[:TRANSCRIPT_ITEM_CAP] + " […]"
        if msg.role == "tool":
            parts.append(f"Tool result{' (error)' if msg.is_error else ''}: {text}")
            continue
        if text:
            parts.append(f"{msg.role.capitalize()}: {text}")
        if msg.images:
            parts.append(f"({len(msg.images)} image(s) attached)")
        for call in msg.tool_calls:
            args = call.arguments[:TRANSCRIPT_ITEM_CAP]
            parts.append(f"Assistant called {call.name}({args})")
    text = "\n\n".join(parts)
    return text if len(text) <= cap else text[:cap] + " […]"


async def summarise(
    provider: Provider, plan_: Plan, messages: Sequence[ChatMessage], budget: int
) -> ChatMessage:
    """Ask the provider (no tools) for a summary; the summary message to store.

    Raises ProviderError when the model cannot be reached; the caller then keeps the
    full history rather than dropping anything."""
    prompt = "Summarise this earlier part of our conversation:\n\n" + transcript(
        plan_, messages, max(1000, budget)
    )
    chunks: list[str] = []
    async for event in provider.stream([ChatMessage("user", prompt)], [], system=SUMMARISER_SYSTEM):
        if isinstance(event, TextChunk):
            chunks.append(event.text)
    summary = "".join(chunks).strip() or "(the model returned an empty summary)"
    limit = max(500, budget // 4)  # the summary must leave room for the recent turns
    if len(summary) > limit:
        summary = summary[:limit] + " […]"
    if _held_untrusted(plan_, messages):
        summary = untrusted.label(summary, SUMMARY_ORIGIN)
    return ChatMessage("user", _HEADER.format(count=plan_.cut) + "\n" + summary)


#: Where a summary says its words come from when what it summarised held outside content.
SUMMARY_ORIGIN = "a summary of earlier turns that held content from outside (pages, files, tools)"


def _held_untrusted(plan_: Plan, messages: Sequence[ChatMessage]) -> bool:
    """The summarised part (or the summary before it) held content labelled as untrusted:
    words injected there may survive into the summary, which is a "user" message, so it is
    labelled as untrusted data too (never as the user's own words). A saved note taken
    from untrusted content, as a memory tool shows it, counts too."""
    markers = (untrusted.MARKER, untrusted.BROWSER_MARKER, untrusted.NOTE_FROM_UNTRUSTED)
    part = [m for m in messages[plan_.start : plan_.cut] if m.role == "tool"]
    if plan_.previous is not None:
        part.append(plan_.previous)
    return any(marker in m.content for m in part for marker in markers)
