"""Memory tool bodies, on the memory service the app hands in as `ctx.service("memory")`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

from tools.memory.manifest import ListMemory, MemoryRef, SearchMemory, StoreMemory, UpdateMemory
from tools.memory.policy import private_read, untrusted_origin
from tools.spec import ToolContext, ToolError, ToolResult
from tools.views import MemoryServiceView, MemoryView

P = ParamSpec("P")
T = TypeVar("T")


def _memory(ctx: ToolContext) -> MemoryServiceView:
    return ctx.service("memory")


def _guard(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    try:
        return fn(*args, **kwargs)
    except ValueError as exc:  # MemoryRefused: private conversation, unknown id, bad kind
        raise ToolError(str(exc)) from None


def _listing(memories: Sequence[MemoryView], empty: str) -> ToolResult:
    if not memories:
        return ToolResult(ok=True, content=empty, data={"memories": []})
    return ToolResult(
        ok=True,
        content="\n".join(m.line() for m in memories),
        data={"memories": [m.to_json() for m in memories]},
    )


def memory_store(args: StoreMemory, ctx: ToolContext) -> ToolResult:
    memory = _guard(
        _memory(ctx).remember, args.content, args.kind, untrusted_origin(ctx), private_read(ctx)
    )
    return ToolResult(ok=True, content="Remembered: " + memory.line(), data=memory.to_json())


def memory_search(args: SearchMemory, ctx: ToolContext) -> ToolResult:
    """By meaning and by words, on the notes as the model would see them: the service
    masks known secrets before any word is matched or any vector compared, so no answer
    (which note, in which order) depends on the characters of a secret."""
    found = _guard(_memory(ctx).search, args.query, args.kind, args.limit)
    return _listing(found, f"Nothing remembered matches {args.query!r}.")


def memory_update(args: UpdateMemory, ctx: ToolContext) -> ToolResult:
    if args.content is None and args.kind is None:
        raise ToolError("give a new `content` or `kind`")
    memory = _guard(
        _memory(ctx).update,
        args.id,
        args.content,
        args.kind,
        untrusted_origin(ctx),
        private_read(ctx),
    )
    return ToolResult(ok=True, content="Updated: " + memory.line(), data=memory.to_json())


def memory_delete(args: MemoryRef, ctx: ToolContext) -> ToolResult:
    memory = _guard(_memory(ctx).delete, args.id)
    return ToolResult(ok=True, content="Forgot: " + memory.line(), data=memory.to_json())


def memory_list(args: ListMemory, ctx: ToolContext) -> ToolResult:
    return _listing(_guard(_memory(ctx).list, args.kind, args.limit), "Nothing is remembered yet.")
