"""Memory tool bodies, on the memory service the app hands in as `ctx.service("memory")`."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

from tools.memory.manifest import ListMemory, MemoryRef, SearchMemory, StoreMemory, UpdateMemory
from tools.memory.policy import private_read, untrusted_origin
from tools.redact import TRIPWIRE, Redactor
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


#: memory_search looks through at most this many notes (the most recently updated).
MAX_SEARCHED = 1000


def memory_search(args: SearchMemory, ctx: ToolContext) -> ToolResult:
    """Searches the notes as the model would see them: candidates are fetched without the
    query touching their raw text, known secrets are masked, and only then are the words
    matched and ranked — so no answer (which note, in which order) depends on the
    characters of a secret (`[redacted]` is all a search can find of one)."""
    notes = _guard(_memory(ctx).list, args.kind, MAX_SEARCHED)
    redactor = TRIPWIRE.redactor(ctx.secret_values())
    found = _ranked(notes, args.query, redactor)[: args.limit]
    return _listing(found, f"Nothing remembered matches {args.query!r}.")


def _tokens(text: str) -> list[str]:
    """Words as the store's FTS5 index (`unicode61 remove_diacritics 2`) splits them: runs
    of letters and digits (`_`, `-` and every other character separate), case-folded,
    accents removed."""
    plain = "".join(
        c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)
    )
    return [w for w in _SEPARATORS.split(plain.casefold()) if w]


_SEPARATORS = re.compile(r"[\W_]+")


def _count(tokens: list[str], phrase: list[str], prefix: bool) -> int:
    """How often `phrase` occurs in `tokens` (its last word as a prefix: `prefix`)."""
    size = len(phrase)
    hits = 0
    for i in range(len(tokens) - size + 1):
        head, last = tokens[i : i + size - 1], tokens[i + size - 1]
        if head == phrase[:-1] and (
            last.startswith(phrase[-1]) if prefix else last == phrase[-1]
        ):
            hits += 1
    return hits


def _ranked(notes: Sequence[MemoryView], query: str, redactor: Redactor) -> list[MemoryView]:
    """The store's search on masked text: every word of the query (each a phrase of
    tokens, the last one a prefix) or, when no note has them all, any of them; best first
    (more query words, then more occurrences), then most recently updated."""
    words = [w for w in query.split() if any(ch.isalnum() for ch in w)]
    phrases = [(p, i == len(words) - 1) for i, w in enumerate(words) if (p := _tokens(w))]
    if not phrases:
        return []
    scored: list[tuple[int, int, int, MemoryView]] = []
    for order, note in enumerate(notes):
        shown = note.to_json()
        text = redactor.text(f"{shown.get('content') or ''} {shown.get('origin') or ''}")
        tokens = _tokens(text)
        counts = [_count(tokens, phrase, prefix) for phrase, prefix in phrases]
        matched = sum(1 for c in counts if c)
        if matched:
            scored.append((matched, sum(counts), order, note))
    every = [s for s in scored if s[0] == len(phrases)]
    if not every:  # any word will do
        return [n for *_, n in sorted(scored, key=lambda s: (-s[0], -s[1], s[2]))]
    return [n for *_, n in sorted(every, key=lambda s: (-s[1], s[2]))]


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
