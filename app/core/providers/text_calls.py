"""Tool calls and thinking that local models write into the answer text.

Models served without a tool-call parsing template put their calls in the text:
Hermes/Qwen `<tool_call>{…}</tool_call>`, Llama 3 `<|python_tag|>{"name", "parameters"}`,
Mistral `[TOOL_CALLS][{…}]`, or a reply that is nothing but `{"name": …, "arguments": …}`.
Many also think aloud in `<think>…</think>`. `TextCallFilter` sits on the streamed text.

What the model writes may quote what it read (a web page, a file), so a call in the text runs
only when it is plainly the model's own (docs/architecture.md §5.10):

* in its dialect's markers, with the marker starting a line, outside code fences (``` or
  ~~~), and at the END of the reply: nothing but whitespace (or more such calls) after it;
* or as a bare JSON call that is the whole reply (thinking aside).

A call quoted in prose ("the page says: <tool_call>{…}</tool_call> — should I?"), in a code
fence or followed by more text stays visible as text. Ordinary text streams at once (only a
possible marker's first characters are held back); from a marker on, the text is held until
what follows shows whether it ends the reply. Thinking becomes `ReasoningChunk`s. Calls
become real tool calls only for tools that were offered; anything else stays visible, so
nothing is silently dropped.
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
#: Llama's end-of-message tokens, when a server leaves them in the text.
_LLAMA_ENDS = ("<|eom_id|>", "<|eot_id|>")
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_FENCE_LINE = re.compile(r"\s*(`{3,}|~{3,})")


@dataclass
class _State:
    # text | think | call (inside <tool_call>) | held (after closed calls: what follows?)
    # | tail (a Llama/Mistral tag: the rest of the reply decides) | json (maybe a bare call)
    mode: str = "text"
    buffer: str = ""
    emitted_text: bool = False
    calls: list[ToolCallRequest] = field(default_factory=list)
    #: The held calls exactly as written (shown as text if they turn out to be quoted).
    held: str = ""
    bodies: list[str] = field(default_factory=list)
    tail_marker: str = ""
    #: The visible text's current line and open code fence (e.g. "```"), if any.
    line: str = ""
    fence: str | None = None


class TextCallFilter:
    def __init__(self, tool_names: set[str], make_id: Callable[[], str]) -> None:
        self.tool_names = tool_names
        self._make_id = make_id
        self._s = _State()

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
                if not s.emitted_text and self.tool_names and not s.line.strip():
                    start = _json_start(s.buffer)
                    if start == "maybe":
                        return events  # too early to tell
                    if start == "yes":
                        s.mode = "json"
                        return events
                progressed = self._scan_text(events)
            elif s.mode == "think":
                progressed = self._scan_think(events)
            elif s.mode == "call":
                progressed = self._scan_call()
            elif s.mode == "held":
                progressed = self._scan_held(events)
            # "tail" and "json": hold everything until the message ends
        return events

    def _scan_text(self, events: list[ProviderEvent]) -> bool:
        s = self._s
        found = [(s.buffer.find(m), m) for m in MARKERS if m in s.buffer]
        if not found:
            keep = _partial_marker_length(s.buffer)
            self._text(events, s.buffer[: len(s.buffer) - keep])
            s.buffer = s.buffer[len(s.buffer) - keep :]
            return False
        index, marker = min(found)
        self._text(events, s.buffer[:index])
        s.buffer = s.buffer[index + len(marker) :]
        if self._quoted():  # inside a code fence or after text on its line: just text
            self._text(events, marker)
        elif marker == THINK_OPEN:
            s.mode = "think"
        elif marker == HERMES_OPEN:
            s.mode, s.held = "call", marker
        else:
            s.mode, s.held, s.tail_marker = "tail", marker, marker
        return True

    def _quoted(self) -> bool:
        """Would a marker here be part of the text rather than start a call?"""
        s = self._s
        return s.fence is not None or bool(s.line.strip())

    def _scan_think(self, events: list[ProviderEvent]) -> bool:
        s = self._s
        end = s.buffer.find(THINK_CLOSE)
        if end < 0:  # thinking streams as it comes, minus a possible partial close tag
            keep = _partial_suffix(s.buffer, THINK_CLOSE)
            if len(s.buffer) > keep:
                events.append(ReasoningChunk(s.buffer[: len(s.buffer) - keep]))
                s.buffer = s.buffer[len(s.buffer) - keep :]
            return False
        if end:
            events.append(ReasoningChunk(s.buffer[:end]))
        s.buffer = s.buffer[end + len(THINK_CLOSE) :]
        s.mode = "text"
        return True

    def _scan_call(self) -> bool:
        s = self._s
        end = s.buffer.find(HERMES_CLOSE)
        if end < 0:
            return False
        body, s.buffer = s.buffer[:end], s.buffer[end + len(HERMES_CLOSE) :]
        s.held += body + HERMES_CLOSE
        s.bodies.append(body)
        s.mode = "held"
        return True

    def _scan_held(self, events: list[ProviderEvent]) -> bool:
        """After closed calls: whitespace waits, another call joins them, anything else
        means they were quoted — they become text."""
        s = self._s
        rest = s.buffer.lstrip()
        s.held += s.buffer[: len(s.buffer) - len(rest)]
        s.buffer = rest
        if not rest or (len(rest) < len(HERMES_OPEN) and HERMES_OPEN.startswith(rest)):
            return False
        if rest.startswith(HERMES_OPEN):
            s.held += HERMES_OPEN
            s.buffer = rest[len(HERMES_OPEN) :]
            s.mode = "call"
            return True
        self._release_held(events)
        return True

    def _release_held(self, events: list[ProviderEvent]) -> None:
        s = self._s
        held, s.held, s.bodies, s.mode = s.held, "", [], "text"
        self._text(events, held)

    def _text(self, events: list[ProviderEvent], text: str) -> None:
        if not text:
            return
        s = self._s
        s.emitted_text = s.emitted_text or bool(text.strip())
        events.append(TextChunk(text))
        s.line += text
        while "\n" in s.line:
            done, s.line = s.line.split("\n", 1)
            s.fence = _fence_after(done, s.fence)

    # ---- end of message ------------------------------------------------------------------

    def finish(self) -> list[ProviderEvent]:
        s = self._s
        events: list[ProviderEvent] = []
        rest, s.buffer = s.buffer, ""
        if s.mode == "think":
            if rest:
                events.append(ReasoningChunk(rest))
        elif s.mode == "call":  # never closed, but nothing follows it: still try
            s.bodies.append(rest)
            self._run_held(events)
        elif s.mode == "held":
            if rest.strip():  # the start of something else, not only whitespace
                s.held += rest
                self._release_held(events)
            else:
                self._run_held(events)
        elif s.mode == "tail":
            self._tail(rest, events)
        elif s.mode == "json":
            if not self._bare_json_call(rest):
                self._text(events, rest)
        else:
            self._text(events, rest)
        s.mode = "text"
        return events

    def _run_held(self, events: list[ProviderEvent]) -> None:
        s = self._s
        bodies, s.held, s.bodies = s.bodies, "", []
        for body in bodies:
            self._add_calls(body, events, wrapper=(HERMES_OPEN, HERMES_CLOSE))

    def _tail(self, body: str, events: list[ProviderEvent]) -> None:
        """A Llama/Mistral tag: a call only when the rest of the reply is nothing but calls
        (or looks like a broken one, which the model is then told about)."""
        s = self._s
        text = body.rstrip()
        for end in _LLAMA_ENDS:
            text = text.removesuffix(end).rstrip()
        if _only_json_values(text) or (text.lstrip()[:1] in ("{", "[") and _unparsed(text)):
            s.held = ""
            self._add_calls(text, events, wrapper=(s.tail_marker, ""))
        else:
            self._text(events, s.held + body)
            s.held = ""

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


_DECODER = json.JSONDecoder()


def _json_values(text: str) -> list[Any] | None:
    """The JSON values `text` consists of (apart from whitespace and Llama's ';' between
    calls), or None when anything else is in it."""
    values: list[Any] = []
    index = 0
    while True:
        while index < len(text) and (text[index].isspace() or text[index] == ";"):
            index += 1
        if index >= len(text):
            return values or None
        try:
            value, index = _DECODER.raw_decode(text, index)
        except ValueError:
            return None
        values.append(value)


def _only_json_values(text: str) -> bool:
    return _json_values(text) is not None


def _unparsed(text: str) -> bool:
    """Broken from its first character (a malformed call), rather than a complete JSON value
    followed by prose (a quoted one)."""
    try:
        _DECODER.raw_decode(text.lstrip())
    except ValueError:
        return True
    return False


def _fence_after(line: str, fence: str | None) -> str | None:
    """The code fence open after a complete line of visible text."""
    match = _FENCE_LINE.match(line)
    if fence is None:
        return match.group(1) if match else None
    if (
        match
        and match.group(1)[0] == fence[0]
        and len(match.group(1)) >= len(fence)
        and not line[match.end() :].strip()
    ):
        return None
    return fence


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
