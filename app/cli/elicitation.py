"""MCP servers asking the user for values (elicitation), answered on the terminal."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TextIO

from app.core.mcp.elicitation import (
    ElicitationAnswer,
    ElicitationRequest,
    ElicitField,
    Value,
    check_value,
)
from app.core.visible import one_line, visible

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
