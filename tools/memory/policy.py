"""Approval hooks of the memory tools (run before a call; never change anything)."""

from __future__ import annotations

from typing import Any

from tools.spec import Escalation, ToolContext


def untrusted_origin(ctx: ToolContext) -> str | None:
    """The untrusted content this conversation read last (set by the call pipeline, also
    in an earlier process, or by a saved note taken from untrusted content)."""
    return getattr(ctx.session, "last_untrusted_origin", None) or None


def private_read(ctx: ToolContext) -> str | None:
    """The private data of the user this conversation has read (set by the call pipeline,
    also in an earlier process, or by a saved note that may hold some): a note written now
    may hold it, so it is kept with the note."""
    return getattr(ctx.session, "private_data_read", None) or None


def after_untrusted(args: Any, ctx: ToolContext) -> Escalation | None:
    """A note written after the conversation read untrusted content may be that content's
    words rather than the user's; once saved it would reach every later conversation. So it
    asks, naming where the text may come from (and the origin is kept with the memory)."""
    origin = untrusted_origin(ctx)
    if origin is None:
        return None
    return Escalation(
        f"This conversation has read {origin}, which neither you nor Deskhand wrote: the note "
        "to remember may come from there rather than from you, and every later conversation "
        "would see it."
    )
