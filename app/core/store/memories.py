"""Memory rows (what the assistant remembers across conversations), their full-text index
and their vectors. The rules (kinds, origins, private conversations) live in
app.core.memory; what goes into a vector and how they are ranked, in app.core.memory_search.

A vector is kept as float32 bytes in the row with the name of the embedder that made it
(vectors of different embedders cannot be compared); both NULL until the note is embedded
(they are always written together)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from app.core.store.database import Database, SqlValue, assignments, checked_columns
from app.core.store.search import fts_query

#: The columns `update_memory` may change.
_SETTABLE = frozenset({"content", "kind"})
#: What a memory row reads as (the vector is read only where it is ranked).
_COLUMNS = "id, kind, content, source_conversation, created_at, updated_at"
_M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))

#: A note's vector as stored: (float32 bytes, the embedder's name).
StoredVector = tuple[bytes, str]


class Memories(Database):
    """The `memories` table and `memories_fts`. Rows are plain dicts of its columns."""

    #: Memory writes through this connection (see `memories_version`).
    _memory_writes = 0

    def _memory_written(self) -> None:
        """Count a write (called inside its transaction, under the lock)."""
        self._memory_writes += 1

    def memories_version(self) -> tuple[int, int]:
        """Changes whenever a memory may have changed: a write here, or a commit by any
        other connection to the file (`PRAGMA data_version`). Cheap; for caches."""
        with self._lock:
            data_version = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
            return data_version, self._memory_writes

    def add_memory(
        self,
        kind: str,
        content: str,
        source_conversation: str | None,
        vector: StoredVector | None = None,
    ) -> int:
        now = self._clock()
        blob, embedder = vector if vector is not None else (None, None)
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO memories (kind, content, source_conversation, created_at,"
                " updated_at, embedding, embedder) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (kind, content, source_conversation, now, now, blob, embedder),
            )
            self._memory_written()
            return cast(int, cur.lastrowid)

    def update_memory(
        self, memory_id: int, *, vector: StoredVector | None = None, **changes: str | None
    ) -> bool:
        """Change `content` and/or `kind` (None: keep it); False when there is no such
        memory. ValueError for any other column. New content takes `vector` with it, or
        none (the old one described the old text)."""
        names = checked_columns("memories", changes, _SETTABLE)
        values: dict[str, SqlValue] = {n: changes[n] for n in names if changes[n] is not None}
        values["updated_at"] = self._clock()
        if "content" in values:
            values["embedding"], values["embedder"] = vector if vector else (None, None)
        with self._write() as db:
            cur = db.execute(
                f"UPDATE memories SET {assignments(values)} WHERE id = ?",
                (*values.values(), memory_id),
            )
            self._memory_written()
        return cur.rowcount > 0

    def delete_memory(self, memory_id: int) -> bool:
        with self._write() as db:
            cur = db.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
            self._memory_written()
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
            f"SELECT {_COLUMNS} FROM memories WHERE {' AND '.join(where)}"
            " ORDER BY updated_at DESC, id DESC LIMIT ?",
            (*params, limit),
        )
        return [dict(r) for r in rows]

    def memory_contents(self, kind: str | None = None, limit: int = 50) -> list[tuple[int, str]]:
        """(id, content) of memories, most recently updated first (what a search reads)."""
        rows = self._read(
            "SELECT id, content FROM memories WHERE ? IS NULL OR kind = ?"
            " ORDER BY updated_at DESC, id DESC LIMIT ?",
            (kind, kind, limit),
        )
        return [(int(r[0]), str(r[1])) for r in rows]

    def search_memory_rows(
        self, query: str, kind: str | None = None, limit: int = 20, any_word: bool = False
    ) -> list[dict[str, Any]]:
        """Memories matching `query`, best first (FTS5 bm25), with their `score`.
        `any_word`: OR instead of AND."""
        match = fts_query(query, any_word=any_word)
        if match is None:
            return []
        rows = self._read(
            f"""SELECT {_M_COLUMNS}, bm25(memories_fts) AS score FROM memories_fts
               JOIN memories m ON m.id = memories_fts.rowid
               WHERE memories_fts MATCH ? AND (? IS NULL OR m.kind = ?)
               ORDER BY score, m.updated_at DESC LIMIT ?""",
            (match, kind, kind, limit),
        )
        return [dict(r) for r in rows]

    # ---- vectors -------------------------------------------------------------------------

    def memory_vectors(self, embedder: str) -> list[tuple[int, str, bytes]]:
        """(id, kind, vector bytes) of the memories `embedder` has embedded."""
        rows = self._read(
            "SELECT id, kind, embedding FROM memories WHERE embedder = ?", (embedder,)
        )
        return [(int(r[0]), str(r[1]), bytes(r[2])) for r in rows if r[2] is not None]

    def memories_to_embed(self, embedder: str, limit: int) -> list[tuple[int, str]]:
        """(id, content) of up to `limit` memories with no vector from `embedder` yet."""
        # (IS NOT cannot seek the index; these three ranges do, without reading a vector)
        rows = self._read(
            "SELECT id, content FROM memories WHERE id IN (SELECT id FROM memories"
            " WHERE embedder IS NULL OR embedder < ? OR embedder > ? LIMIT ?)",
            (embedder, embedder, limit),
        )
        return [(int(r[0]), str(r[1])) for r in rows]

    def set_memory_vectors(
        self, embedder: str, vectors: Sequence[tuple[int, str, bytes]]
    ) -> int:
        """Keep (id, the content it was made from, vector bytes) for each memory whose
        content is still that (one changed meanwhile keeps its newer state); how many were
        kept. Neither the content nor `updated_at` changes."""
        kept = 0
        with self._write() as db:
            for memory_id, content, blob in vectors:
                cur = db.execute(
                    "UPDATE memories SET embedding = ?, embedder = ? WHERE id = ? AND content = ?",
                    (blob, embedder, memory_id, content),
                )
                kept += cur.rowcount
            self._memory_written()
        return kept
