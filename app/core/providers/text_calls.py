"""Tool calls and thinking that local models write into the answer text.

Models served without a tool-call parsing template put their calls in the text:
Hermes/Qwen `<tool_call>{…}</tool_call>`, Llama 3 `<|python_tag|>{"name", "parameters"}`,
Mistral `[TOOL_CALLS][{…}]`, or a reply that is nothing but `{"name": …, "arguments": …}`.
Many also think aloud in `<think>…</think>`. `TextCallFilter` sits on the streamed text:
ordinary text passes through at once (only a possible marker's first characters are held
back), thinking becomes `ReasoningChunk`s, and calls become real tool calls — only for tools
that were offered; anything else stays visible so nothing is silently dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .base import ProviderEvent, ReasoningChunk, TextChunk, ToolCallRequest

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"
LLAMA_TAG = "<|python_tag|>"
MISTRAL_TAG = "[TOOL_CALLS]"
MARKERS = (THINK_OPEN, HERMES_OPEN, LLAMA_TAG, MISTRAL_TAG)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


@dataclass
class _State:
    mode: str = "text"  # text | think | hermes | tail (rest of message is a call) | json
    buffer: str = ""
    emitted_text: bool = False
    calls: list[ToolCallRequest] = field(default_factory=list)


class TextCallFilter:
    def __init__(self, tool_names: set[str], make_id: Callable[[], str]) -> None:
        self.tool_names = tool_names
        self._make_id = make_id
        self._s = _State()
        self._tail_marker = ""

    @property
    def calls(self) -> list[ToolCallRequest]:
        return self._s.calls

    # ---- streaming ---------------------------------------------------------------------

    def feed(self, text: str) -> list[ProviderEvent]:
        s = self._s
        s.buffer += text
        events: list[ProviderEvent] = []
        progressed = True
        while progressed and s.buffer:
            progressed = False
            if s.mode == "text":
                if not s.emitted_text and self.tool_names:
                    start = _json_start(s.buffer)
                    if start == "maybe":
                        return events  # too early to tell
                    if start == "yes":
                        s.mode = "json"
                        return events
                progressed = self._scan_text(events)
            elif s.mode == "think":
                progressed = self._scan_until(THINK_CLOSE, events, reasoning=True)
            elif s.mode == "hermes":
                progressed = self._scan_until(HERMES_CLOSE, events, reasoning=False)
            # "tail" and "json": hold everything until the message ends
        return events

    def _scan_text(self, events: list[ProviderEvent]) -> bool:
        s = self._s
        found = [(s.buffer.find(m), m) for m in MARKERS if m in s.buffer]
        if found:
            index, marker = min(found)
            self._text(events, s.buffer[:index])
            s.buffer = s.buffer[index + len(marker) :]
            if marker == THINK_OPEN:
                s.mode = "think"
            elif marker == HERMES_OPEN:
                s.mode = "hermes"
            else:
                s.mode, self._tail_marker = "tail", marker
            return True
        keep = _partial_marker_length(s.buffer)
        self._text(events, s.buffer[: len(s.buffer) - keep])
        s.buffer = s.buffer[len(s.buffer) - keep :]
        return False

    def _scan_until(self, close: str, events: list[ProviderEvent], *, reasoning: bool) -> bool:
        s = self._s
        end = s.buffer.find(close)
        if end < 0:
            if reasoning:  # thinking streams as it comes, minus a possible partial close tag
                keep = _partial_suffix(s.buffer, close)
                if len(s.buffer) > keep:
                    events.append(ReasoningChunk(s.buffer[: len(s.buffer) - keep]))
                    s.buffer = s.buffer[len(s.buffer) - keep :]
            return False
        body, s.buffer = s.buffer[:end], s.buffer[end + len(close) :]
        if reasoning:
            if body:
                events.append(ReasoningChunk(body))
        else:
            self._add_calls(body, events, wrapper=(HERMES_OPEN, HERMES_CLOSE))
        s.mode = "text"
        return True

    def _text(self, events: list[ProviderEvent], text: str) -> None:
        if text:
            self._s.emitted_text = self._s.emitted_text or bool(text.strip())
            events.append(TextChunk(text))

    # ---- end of message ------------------------------------------------------------------

    def finish(self) -> list[ProviderEvent]:
        s = self._s
        events: list[ProviderEvent] = []
        rest, s.buffer = s.buffer, ""
        if s.mode == "think":
            if rest:
                events.append(ReasoningChunk(rest))
        elif s.mode == "hermes":  # never closed: still try
            self._add_calls(rest, events, wrapper=(HERMES_OPEN, ""))
        elif s.mode == "tail":
            self._add_calls(rest, events, wrapper=(self._tail_marker, ""))
        elif s.mode == "json":
            if not self._bare_json_call(rest):
                self._text(events, rest)
        else:
            self._text(events, rest)
        s.mode = "text"
        return events

    def _bare_json_call(self, text: str) -> bool:
        """A reply that is only a call object naming an offered tool."""
        candidate = text.strip()
        fenced = _FENCE.match(candidate)
        if fenced:
            candidate = fenced.group(1)
        try:
            value = json.loads(candidate)
        except ValueError:
            return False
        items = value if isinstance(value, list) else [value]
        parsed = [_call_parts(item) for item in items]
        if not items or any(p is None or p[0] not in self.tool_names for p in parsed):
            return False
        for name, arguments in parsed:  # type: ignore[misc]
            self._s.calls.append(ToolCallRequest(self._make_id(), name, arguments))
        return True

    def _add_calls(
        self, body: str, events: list[ProviderEvent], *, wrapper: tuple[str, str]
    ) -> None:
        """Parses one or more calls; what cannot be parsed reaches the model as an invalid
        call it can correct (and the user sees it), never silently dropped."""
        for chunk in _split_calls(body):
            try:
                value = json.loads(chunk)
            except ValueError:
                value = None
            items = value if isinstance(value, list) else [value]
            for item in items:
                parts = _call_parts(item)
                if parts is None:
                    name = _guess_name(chunk) or "unparsed_tool_call"
                    self._s.calls.append(ToolCallRequest(self._make_id(), name, chunk))
                    continue
                name, arguments = parts
                if name not in self.tool_names and self.tool_names:
                    # Not one of ours: keep it as text rather than invent a call.
                    self._text(events, f"{wrapper[0]}{chunk}{wrapper[1]}")
                    continue
                self._s.calls.append(ToolCallRequest(self._make_id(), name, arguments))


_JSON_STARTS = ("{", "[{", "```json", "```\n{", "```{")


def _json_start(buffer: str) -> str:
    """Does the reply open like a bare JSON call? "yes", "no", or "maybe" (too short yet)."""
    head = buffer.lstrip()
    if not head:
        return "maybe"
    if any(head.startswith(start) for start in _JSON_STARTS):
        return "yes"
    if any(start.startswith(head) for start in _JSON_STARTS):
        return "maybe"
    return "no"


def _partial_suffix(text: str, marker: str) -> int:
    """Length of the longest end of `text` that begins `marker`."""
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0


def _partial_marker_length(text: str) -> int:
    return max(_partial_suffix(text, m) for m in MARKERS)


def _split_calls(body: str) -> list[str]:
    """Llama 3 may chain calls with ';'; others send one JSON value."""
    body = body.strip()
    if not body:
        return []
    try:
        json.loads(body)
        return [body]
    except ValueError:
        parts = [p.strip() for p in body.split(";") if p.strip()]
        return parts or [body]


def _call_parts(item: Any) -> tuple[str, str] | None:
    """(name, JSON arguments) from {"name", "arguments"|"parameters"} or OpenAI's
    {"function": {...}} shape."""
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict):
        item = item["function"]
    name = item.get("name")
    if not isinstance(name, str) or not name:
        return None
    args = item.get("arguments", item.get("parameters", {}))
    if isinstance(args, str):
        return name, args or "{}"
    return name, json.dumps(args if args is not None else {})


def _guess_name(text: str) -> str | None:
    match = re.search(r'"name"\s*:\s*"([A-Za-z0-9_.-]+)"', text)
    return match.group(1) if match else None
