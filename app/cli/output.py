"""How `deskhand ask` shows agent events: plain streamed text, or one JSON object per line.

A sub-agent's calls (`delegate_agent`) say whose they are: "[Researcher] fs_read_file …" on
stderr, `agent` and `parent_call_id` in `--json`, and its questions on the terminal
"Researcher wants to: …"."""

from __future__ import annotations

import asyncio
import json
import re
import sys
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
from app.core.untrusted import MARKER
from app.core.visible import one_line, visible


def _whose(agent: str, parent_call_id: str) -> dict[str, str]:
    """The fields a call made under another one adds — a sub-agent's, under its
    `delegate_agent` call — (none for the conversation's own calls)."""
    if not agent and not parent_call_id:
        return {}
    return {"agent": agent, "parent_call_id": parent_call_id}


def event_to_json(event: AgentEvent) -> dict[str, Any] | None:
    """The wire shape of each event (`ask --json`, `tools call --json`: docs/architecture.md §8)."""
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
            } | _whose(event.agent, event.parent_call_id)
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
            } | ({"agent": req.agent} if req.agent else {})
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
        #: call id → the `agent` and `parent_call_id` of a call made under another one:
        #: its question, progress, answer and result carry them too.
        self._whose: dict[str, dict[str, str]] = {}

    def handle(self, event: AgentEvent) -> None:
        if isinstance(event, Error):
            self.failed = True
        line = event_to_json(event)
        if line is not None and "id" in line:
            if isinstance(event, ToolCallStarted) and "parent_call_id" in line:
                self._whose[event.call_id] = _whose(event.agent, event.parent_call_id)
            line.update(self._whose.get(str(line["id"]), {}))
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
        #: call id → "[Researcher] ": a sub-agent's calls say whose they are.
        self._tags: dict[str, str] = {}

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
                if event.agent:
                    self._tags[event.call_id] = f"[{one_line(event.agent, 40)}] "
                who = self._tags.get(event.call_id, "")
                self.err.write(f"→ {who}{one_line(event.name, 80)} {one_line(args, 160)}\n")
            case ToolProgress():
                who = self._tags.get(event.call_id, "")
                self.err.write(f"  … {who}{one_line(event.message, 300)}\n")
            case ApprovalDecided(decision=Decision.DENY):
                who = self._tags.get(event.call_id, "")
                self.err.write(f"  ✗ {who}{one_line(event.tool, 80)} not approved\n")
            case ToolCallFinished(result=result):
                mark = "✓" if result.ok else "✗"
                first_line = _first_line(result.content)
                who = self._tags.pop(event.call_id, "")
                self.err.write(f"  {mark} {who}{one_line(first_line, 160)}\n")
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


#: A result wrapped as untrusted data for the model (`untrusted.label`): its first lines
#: say so to the model; a person reads what is inside.
_LABELLED = re.compile(rf"\[Untrusted data from [^\n]*\]\n<{MARKER} [^\n]*>\n(.*)", re.DOTALL)


def _first_line(content: str) -> str:
    """The line of a result worth showing: its first, or the first inside the label."""
    found = _LABELLED.match(content)
    body = found.group(1) if found is not None else content
    return body.splitlines()[0] if body else ""


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
    summary = one_line(request.summary or request.tool, 400)
    if request.agent:  # a sub-agent's call: who asks comes first
        summary = f"{one_line(request.agent, 40)} wants to: {summary}"
    lines = ["\n" + summary]
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
            _ANSWERS[c][1].format(narrow=one_line(narrow), source=one_line(source)) for c in choices
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
