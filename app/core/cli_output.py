"""How `deskhand ask` shows agent events: plain streamed text, or one JSON object per line."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, TextIO

from app.core.approval import ApprovalRequest, Decision
from app.core.events import (
    AgentEvent,
    ApprovalDecided,
    ApprovalRequested,
    Error,
    Notice,
    ReasoningDelta,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
    TurnFinished,
)
from app.core.mcp.elicitation import (
    ElicitationAnswer,
    ElicitationRequest,
    ElicitField,
    Value,
    check_value,
)
from app.core.visible import one_line, visible


def event_to_json(event: AgentEvent) -> dict[str, Any] | None:
    """The wire shape of each event, as DESIGN.md §7 fixes it."""
    match event:
        case TextDelta(text=text):
            return {"type": "text", "delta": text}
        case ReasoningDelta(text=text):
            return {"type": "reasoning", "delta": text}
        case ToolCallStarted():
            return {
                "type": "tool_call",
                "id": event.call_id,
                "name": event.name,
                "arguments": event.arguments,
            }
        case ToolProgress():
            return {"type": "progress", "id": event.call_id, "message": event.message}
        case ApprovalRequested(request=req):
            return {
                "type": "approval_requested",
                "id": req.call_id,
                "name": req.tool,
                "operations": req.operations,
                "summary": req.summary,
                "target": req.target,
                "source": req.source_id,
                "trusted": req.trusted,
                "reason": req.reason,
                "choices": [c.value for c in req.choices()],
            }
        case ApprovalDecided():
            return {
                "type": "approval",
                "id": event.call_id,
                "name": event.tool,
                "decision": event.decision.value,
                "source": event.source,
            }
        case ToolCallFinished(result=result):
            return {
                "type": "tool_result",
                "id": event.call_id,
                "name": event.name,
                "ok": result.ok,
                "content": result.content,
            }
        case TurnFinished():
            return {"type": "done", "stop_reason": event.stop_reason, "usage": asdict(event.usage)}
        case Error():
            return {"type": "error", "message": event.message, "kind": event.kind}
        case Notice():
            return {"type": "warning", "message": event.message, "kind": event.kind}
    return None


class JsonPrinter:
    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.failed = False

    def handle(self, event: AgentEvent) -> None:
        if isinstance(event, Error):
            self.failed = True
        line = event_to_json(event)
        if line is not None:
            self.out.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
            self.out.flush()

    def error(self, message: str) -> None:
        self.handle(Error(message))

    def close(self) -> None:
        self.out.flush()


class TextPrinter:
    """Answer text to stdout; tool activity and errors to stderr, so pipes get the answer."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.failed = False
        self._line_open = False

    def handle(self, event: AgentEvent) -> None:
        match event:
            case TextDelta(text=text):
                # the model's text may carry terminal escapes (from a page it read): shown,
                # never obeyed
                self.out.write(visible(text))
                self.out.flush()
                self._line_open = not text.endswith("\n")
            case ToolCallStarted():
                self._break_line()
                args = json.dumps(event.arguments, ensure_ascii=False)
                self.err.write(f"→ {one_line(event.name, 80)} {one_line(args, 160)}\n")
            case ToolProgress():
                self.err.write(f"  … {one_line(event.message, 300)}\n")
            case ApprovalDecided(decision=Decision.DENY):
                self.err.write(f"  ✗ {one_line(event.tool, 80)} not approved\n")
            case ToolCallFinished(result=result):
                mark = "✓" if result.ok else "✗"
                first_line = result.content.splitlines()[0] if result.content else ""
                self.err.write(f"  {mark} {one_line(first_line, 160)}\n")
            case TurnFinished():
                self._break_line()
            case Error(message=message):
                self.error(message)
            case Notice(message=message):
                self._break_line()
                self.err.write(f"deskhand: warning: {one_line(message, 1000)}\n")
        self.err.flush()

    def error(self, message: str) -> None:
        self._break_line()
        self.failed = True
        self.err.write(f"deskhand: {one_line(message, 1000)}\n")
        self.err.flush()

    def close(self) -> None:
        self._break_line()

    def _break_line(self) -> None:
        if self._line_open:
            self.out.write("\n")
            self.out.flush()
            self._line_open = False


_prompt_lock = asyncio.Lock()


_ANSWERS = {
    Decision.ALLOW_ONCE: ("y", "[y] once"),
    Decision.ALLOW_CONVERSATION: ("c", "[c] for this conversation"),
    Decision.ALWAYS_ALLOW: ("a", "[a] always: {narrow}"),
    Decision.ALWAYS_ALLOW_ANY: ("A", "[A] always, any arguments"),
    Decision.TRUST_SOURCE: ("t", "[t] trust {source}"),
    Decision.DENY: ("n", "[N] deny"),
}


def approval_text(request: ApprovalRequest) -> str:
    """What the terminal shows: a summary line, where the call acts, why it asks, then
    everything that will happen — every part with control characters made visible, so
    nothing in it can move the cursor, erase a line or hide the question."""
    lines = ["\n" + one_line(request.summary or request.tool, 400)]
    where = f" · acts on {one_line(request.target)}" if request.target else ""
    lines.append(f"  {one_line(request.tool)} from {one_line(request.source)}{where}")
    if request.reason:
        lines.append(f"  Asking because {one_line(request.reason, 400)}.")
    if request.arguments_text:
        lines.append(visible(request.arguments_text))
    if request.preview:
        lines.append(visible(request.preview))
    return "\n".join(lines) + "\n"


async def interactive_approver(request: ApprovalRequest) -> Decision:
    """Asks on the terminal; concurrent calls queue up, one question at a time."""
    choices = request.choices()
    narrow = request.proposals[0].label if request.proposals else ""
    source = request.source
    async with _prompt_lock:
        err = sys.stderr
        err.write(approval_text(request))
        labels = [
            _ANSWERS[c][1].format(narrow=one_line(narrow), source=one_line(source))
            for c in choices
        ]
        err.write("Allow? " + "  ".join(labels) + ": ")
        err.flush()
        loop = asyncio.get_running_loop()
        answer = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
    words = {"yes": Decision.ALLOW_ONCE, "always": Decision.ALWAYS_ALLOW, "no": Decision.DENY}
    if answer.lower() in words and words[answer.lower()] in choices:
        return words[answer.lower()]
    for choice in choices:  # exact keys first: "A" is not "a"
        if answer == _ANSWERS[choice][0]:
            return choice
    for choice in choices:
        if answer.lower() == _ANSWERS[choice][0]:
            return choice
    return Decision.DENY


# ---- elicitation: an MCP server asks the user for values --------------------------------------

_elicit_lock = threading.Lock()


def terminal_elicitation(
    inp: TextIO | None = None, err: TextIO | None = None
) -> Callable[[ElicitationRequest], ElicitationAnswer]:
    """An elicitation handler for the CLI (`McpManager.set_elicitation_handler`): on a
    terminal it shows who asks and why, then asks field by field (Accept / Decline /
    Cancel); without a terminal it declines. A URL is only printed; the manager opens it
    when this returns accept, i.e. after the user agreed."""

    def ask(request: ElicitationRequest) -> ElicitationAnswer:
        src, out = inp or sys.stdin, err or sys.stderr
        if not (_isatty(src) and _isatty(out)):
            return ElicitationAnswer("decline")
        with _elicit_lock:  # one question at a time, even from several servers
            try:
                return _ask_terminal(request, src, out)
            except EOFError:
                return ElicitationAnswer("cancel")

    return ask


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _ask_terminal(request: ElicitationRequest, src: TextIO, out: TextIO) -> ElicitationAnswer:
    def read(prompt: str) -> str:
        out.write(prompt)
        out.flush()
        line = src.readline()
        if not line or request.cancelled.is_set():
            raise EOFError
        return line.strip()

    server = one_line(request.server, 80)
    out.write(f"\nThe MCP server {server!r} asks:\n{visible(request.message)}\n")
    if request.mode == "url":
        out.write(f"  It wants you to open {one_line(request.url or '', 500)}\n")
        out.write(f"  (on the site {one_line(request.site or '', 200)})\n")
        answer = read("Open it in your browser? [y] open  [N] decline  [c] cancel: ").lower()
        if answer in {"y", "yes", "o", "open"}:
            return ElicitationAnswer("accept")
        return ElicitationAnswer("cancel" if answer in {"c", "cancel"} else "decline")
    answer = read("Answer? [y] fill in  [N] decline  [c] cancel: ").lower()
    if answer in {"c", "cancel"}:
        return ElicitationAnswer("cancel")
    if answer not in {"y", "yes", "a", "accept"}:
        return ElicitationAnswer("decline")
    content: dict[str, Value] = {}
    for spec in request.fields:
        value = _ask_field(spec, read, out)
        if value is not None:
            content[spec.name] = value
    shown = ", ".join(f"{one_line(k, 40)}={one_line(str(v), 80)}" for k, v in content.items())
    answer = read(f"Send {shown or 'nothing'} to {server!r}? [y] send  [N] decline  [c] cancel: ")
    if answer.lower() in {"y", "yes", "s", "send"}:
        return ElicitationAnswer("accept", content)
    return ElicitationAnswer("cancel" if answer.lower() in {"c", "cancel"} else "decline")


def _ask_field(spec: ElicitField, read: Callable[[str], str], out: TextIO) -> Value | None:
    """One field: asked until the answer fits (empty: the default, or skipped if optional)."""
    if spec.description:
        out.write(f"  {spec.description}\n")
    for number, choice in enumerate(spec.choices, 1):
        out.write(f"    {number}. {choice.label}\n")
    hint = {"boolean": " [y/n]", "choices": " (numbers, comma separated)"}.get(spec.kind, "")
    default = f" [{one_line(str(spec.default), 60)}]" if spec.default is not None else ""
    optional = "" if spec.required else " (optional)"
    while True:
        text = read(f"  {spec.title}{optional}{hint}{default}: ")
        if not text:
            if spec.default is not None:
                return spec.default
            if not spec.required:
                return None
            out.write("  An answer is needed.\n")
            continue
        value = _parse(spec, text)
        problem = "not understood" if value is None else check_value(spec, value)
        if problem is None:
            return value
        out.write(f"  {one_line(problem, 200)}\n")


def _parse(spec: ElicitField, text: str) -> Value | None:
    if spec.kind == "boolean":
        return {"y": True, "yes": True, "n": False, "no": False}.get(text.lower())
    if spec.kind in {"number", "integer"}:
        try:
            return int(text) if spec.kind == "integer" else float(text)
        except ValueError:
            return None
    if spec.kind == "choice":
        return _pick(spec, text)
    if spec.kind == "choices":
        picked = [_pick(spec, part.strip()) for part in text.split(",") if part.strip()]
        return None if None in picked else [p for p in picked if p is not None]
    return text


def _pick(spec: ElicitField, text: str) -> str | None:
    if text.isdigit() and 1 <= int(text) <= len(spec.choices):
        return spec.choices[int(text) - 1].value
    return next((c.value for c in spec.choices if text in {c.value, c.label}), None)
