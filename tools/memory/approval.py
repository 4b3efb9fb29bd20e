"""Approval hooks of the memory tools: one plain line saying what a call will keep or forget.
Written from the arguments only; changes nothing."""

from __future__ import annotations

from typing import Any

from tools.integrations.approval import quoted
from tools.spec import ToolContext


def summary_store(args: Any, ctx: ToolContext) -> str:
    return f"Remember the {args.kind} {quoted(args.content)} for future conversations"


def summary_update(args: Any, ctx: ToolContext) -> str:
    changes = []
    if args.content is not None:
        changes.append(f"text to {quoted(args.content)}")
    if args.kind is not None:
        changes.append(f"kind to {args.kind}")
    return f"Change the remembered item #{args.id}: {', '.join(changes) or 'nothing given'}"


def summary_delete(args: Any, ctx: ToolContext) -> str:
    return f"Forget the remembered item #{args.id}"
