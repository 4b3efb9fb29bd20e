"""Long-term memory: short notes (facts, preferences, tasks) kept in the store across
conversations, found again by full-text search (FTS5 ranking).

The memory tools reach a `MemoryService` through `ctx.service("memory")`; the agent binds it
to the conversation the call comes from (`for_conversation`), so a memory records its source
and nothing is remembered from a conversation the user marked private.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, cast, get_args

MemoryKind = Literal["fact", "preference", "task"]
KINDS: tuple[str, ...] = get_args(MemoryKind)
MAX_CONTENT = 2000
INJECT_HEADER = "What you remember about the user (from earlier conversations):"


class MemoryRefused(ValueError):
    """A memory request that cannot be done; the message is meant for the model."""


@dataclass(frozen=True)
class Memory:
    id: int
    kind: MemoryKind
    content: str
    source_conversation: str | None
    created_at: datetime
    updated_at: datetime

    def line(self) -> str:
        return f"[{self.id}] ({self.kind}) {self.content}"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "content": self.content,
            "source_conversation": self.source_conversation,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


def _memory(row: dict[str, Any]) -> Memory:
    return Memory(
        id=int(row["id"]),
        kind=cast(MemoryKind, row["kind"]),
        content=row["content"],
        source_conversation=row["source_conversation"],
        created_at=datetime.fromtimestamp(row["created_at"], UTC),
        updated_at=datetime.fromtimestamp(row["updated_at"], UTC),
    )


def _check_kind(kind: str | None) -> None:
    if kind is not None and kind not in KINDS:
        raise MemoryRefused(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")


def _check_content(content: str) -> str:
    text = " ".join(content.split())
    if not text:
        raise MemoryRefused("a memory needs some text")
    if len(text) > MAX_CONTENT:
        raise MemoryRefused(f"a memory is at most {MAX_CONTENT} characters; keep it short")
    return text


class MemoryService:
    """Memories over the store (`Store.add_memory`, `search_memory_rows`, …)."""

    def __init__(
        self, store: Any, conversation_id: str | None = None, *, enabled: bool = True
    ) -> None:
        self.store = store
        self.conversation_id = conversation_id
        self.enabled = enabled

    def for_conversation(self, conversation_id: str | None) -> MemoryService:
        return MemoryService(self.store, conversation_id, enabled=self.enabled)

    # ---- guards ------------------------------------------------------------------------

    def _require_enabled(self) -> None:
        if not self.enabled:
            raise MemoryRefused("memory is turned off in Deskhand's settings")

    def private(self) -> bool:
        return self.conversation_id is not None and bool(
            self.store.is_private(self.conversation_id)
        )

    def _refuse_if_private(self) -> None:
        if self.private():
            raise MemoryRefused(
                "this conversation is private: nothing from it may be remembered. "
                "Do not try again in this conversation."
            )

    def _get(self, memory_id: int) -> Memory:
        rows = self.store.memory_rows(ids=(memory_id,), limit=1)
        if not rows:
            raise MemoryRefused(f"there is no memory {memory_id}; use memory_list or search")
        return _memory(rows[0])

    # ---- operations --------------------------------------------------------------------

    def remember(self, content: str, kind: str = "fact") -> Memory:
        self._require_enabled()
        _check_kind(kind)
        self._refuse_if_private()
        memory_id = self.store.add_memory(kind, _check_content(content), self.conversation_id)
        return self._get(memory_id)

    def update(self, memory_id: int, content: str | None = None, kind: str | None = None) -> Memory:
        self._require_enabled()
        _check_kind(kind)
        self._refuse_if_private()
        text = _check_content(content) if content is not None else None
        if not self.store.update_memory(memory_id, content=text, kind=kind):
            raise MemoryRefused(f"there is no memory {memory_id}; use memory_list or search")
        return self._get(memory_id)

    def delete(self, memory_id: int) -> Memory:
        memory = self._get(memory_id)
        self.store.delete_memory(memory_id)
        return memory

    def search(self, query: str, kind: str | None = None, limit: int = 10) -> list[Memory]:
        """Best matches first; every word must occur, else any word does (ranked)."""
        self._require_enabled()
        _check_kind(kind)
        rows = self.store.search_memory_rows(query, kind, limit) or self.store.search_memory_rows(
            query, kind, limit, any_word=True
        )
        return [_memory(r) for r in rows]

    def list(self, kind: str | None = None, limit: int = 50) -> list[Memory]:
        self._require_enabled()
        _check_kind(kind)
        return [_memory(r) for r in self.store.memory_rows(kind, limit)]

    # ---- injection into a new conversation -------------------------------------------

    def relevant(self, query: str, budget: int) -> list[Memory]:
        """What to tell the model at the start of a conversation, within `budget` characters
        of `Memory.line()`s: preferences first (most relevant to `query`, then most recent),
        then facts and tasks the same way."""
        if not self.enabled or budget <= 0:
            return []
        chosen: list[Memory] = []
        used = len(INJECT_HEADER)
        for kinds in (("preference",), ("fact", "task")):
            for memory in self._ranked(query, kinds):
                cost = len(memory.line()) + 1
                if used + cost <= budget:
                    chosen.append(memory)
                    used += cost
        return chosen

    def _ranked(self, query: str, kinds: tuple[str, ...]) -> Iterator[Memory]:
        seen: set[int] = set()
        for kind in kinds:
            for row in self.store.search_memory_rows(query, kind, 50, any_word=True):
                seen.add(int(row["id"]))
                yield _memory(row)
        recent = sorted(
            (_memory(r) for kind in kinds for r in self.store.memory_rows(kind, 200)),
            key=lambda m: m.updated_at,
            reverse=True,
        )
        yield from (m for m in recent if m.id not in seen)

    def prompt_block(self, query: str, budget: int) -> str:
        """The memories for a new conversation as a system-prompt section ("" when none)."""
        memories = self.relevant(query, budget)
        if not memories:
            return ""
        return "\n".join([INJECT_HEADER, *(m.line() for m in memories)])


class ConversationServices(dict):  # type: ignore[type-arg]
    """The app's services as one conversation's tools see them: a service with a
    `for_conversation(id)` method is bound to that conversation on first access."""

    def __init__(self, services: Mapping[str, Any], conversation_id: str | None) -> None:
        super().__init__()
        self._services = services
        self._conversation_id = conversation_id

    def __missing__(self, name: str) -> Any:
        service = self._services[name]  # KeyError → ToolContext says "not available here"
        bind = getattr(service, "for_conversation", None)
        value = bind(self._conversation_id) if callable(bind) else service
        self[name] = value
        return value
