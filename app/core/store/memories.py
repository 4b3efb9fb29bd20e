"""Memory rows (what the assistant remembers across conversations) and their full-text
index. The rules (kinds, origins, private conversations) live in app.core.memory."""

from __future__ import annotations

from typing import Any, cast

from app.core.store.database import Database, SqlValue, assignments, checked_columns
from app.core.store.search import fts_query

#: The columns `update_memory` may change.
_SETTABLE = frozenset({"content", "kind"})


class Memories(Database):
    """The `memories` table and `memories_fts`. Rows are plain dicts of its columns."""

    def add_memory(self, kind: str, content: str, source_conversation: str | None) -> int:
        now = self._clock()
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO memories (kind, content, source_conversation, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (kind, content, source_conversation, now, now),
            )
            return cast(int, cur.lastrowid)

    def update_memory(self, memory_id: int, **changes: str | None) -> bool:
        """Change `content` and/or `kind` (None: keep it); False when there is no such
        memory. ValueError for any other column."""
        names = checked_columns("memories", changes, _SETTABLE)
        values: dict[str, SqlValue] = {n: changes[n] for n in names if changes[n] is not None}
        values["updated_at"] = self._clock()
        with self._write() as db:
            cur = db.execute(
                f"UPDATE memories SET {assignments(values)} WHERE id = ?",
                (*values.values(), memory_id),
            )
        return cur.rowcount > 0

    def delete_memory(self, memory_id: int) -> bool:
        with self._write() as db:
            cur = db.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
        return cur.rowcount > 0

    def memory_rows(
        self, kind: str | None = None, limit: int = 50, ids: tuple[int, ...] = ()
    ) -> list[dict[str, Any]]:
        """Memories, most recently updated first (optionally of one kind, or these ids)."""
        where, params = ["1"], list[SqlValue]()
        if kind is not None:
            where.append("kind = ?")
            params.append(kind)
        if ids:
            where.append(f"id IN ({', '.join('?' for _ in ids)})")
            params.extend(ids)
        rows = self._read(
            f"SELECT * FROM memories WHERE {' AND '.join(where)}"
            " ORDER BY updated_at DESC, id DESC LIMIT ?",
            (*params, limit),
        )
        return [dict(r) for r in rows]

    def search_memory_rows(
        self, query: str, kind: str | None = None, limit: int = 20, any_word: bool = False
    ) -> list[dict[str, Any]]:
        """Memories matching `query`, best first (FTS5 bm25), with their `score`.
        `any_word`: OR instead of AND."""
        match = fts_query(query, any_word=any_word)
        if match is None:
            return []
        rows = self._read(
            """SELECT m.*, bm25(memories_fts) AS score FROM memories_fts
               JOIN memories m ON m.id = memories_fts.rowid
               WHERE memories_fts MATCH ? AND (? IS NULL OR m.kind = ?)
               ORDER BY score, m.updated_at DESC LIMIT ?""",
            (match, kind, kind, limit),
        )
        return [dict(r) for r in rows]
