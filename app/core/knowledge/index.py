"""The knowledge index: one SQLite file (apsw, WAL) holding the folders, their files, the
files' chunks with a full-text index (FTS5, BM25, porter stemming) and the chunks' vectors
(sqlite-vec, cosine).

Everything one file brings is written in one transaction: a kill mid-file leaves that
file's previous chunks, never half of the new ones. One lock guards the connection, so the
indexer thread and searches from the window or tools can share an index.

Vectors live in one table per embedder (`vectors_<gen>`, listed in `vector_tables`), and
each chunk records which table holds its vector. After a switch of embedder, searches use
the new embedder's table while `reembed` moves the other chunks over in batches; it can be
stopped and resumed at any time, and switching back only redoes what was moved.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.knowledge.chunks import Chunk

if TYPE_CHECKING:
    import apsw
    import numpy as np

    from app.core.knowledge.embedding import Embedder

SCHEMA_VERSION = 2
#: The most neighbours sqlite-vec returns from one KNN query.
_VEC_K_LIMIT = 4096
#: A query word in more than this share of all chunks is left out while rarer ones remain.
COMMON_SHARE = 0.2
#: How many words of a query go into the full-text search.
_MAX_QUERY_TERMS = 32
#: Words too common to search for alone: they match nearly every chunk and make a
#: full-text query slow without changing its ranking. Used only when other words remain.
_STOPWORDS = frozenset(
    str.split(
        "a an and are as at be but by can could did do does for from had has have how i if in "
        "into is it its me my no not of on or our should so than that the their them then there "
        "these they this those to was we were what when where which who whom why will with "
        "would you your must may might shall need about any some all also just"
    )
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS folders (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    conversation_id TEXT,
    paused INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS folders_unique ON folders(path, coalesce(conversation_id, ''));
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    folder_id INTEGER NOT NULL REFERENCES folders(id),
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    UNIQUE (folder_id, path)
);
CREATE INDEX IF NOT EXISTS files_path ON files(path);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id),
    folder_id INTEGER NOT NULL,
    ordinal INTEGER NOT NULL,
    location TEXT NOT NULL,
    text TEXT NOT NULL,
    gen INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_file ON chunks(file_id, ordinal);
CREATE INDEX IF NOT EXISTS chunks_gen ON chunks(gen);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    text, content='chunks', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2' -- as _TOKENIZER
);
CREATE TRIGGER IF NOT EXISTS chunks_fts_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER IF NOT EXISTS chunks_fts_delete AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TABLE IF NOT EXISTS problems (
    folder_id INTEGER NOT NULL,
    path TEXT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (folder_id, path)
);
CREATE TABLE IF NOT EXISTS vector_tables (
    gen INTEGER PRIMARY KEY,
    embedder TEXT NOT NULL,
    dim INTEGER NOT NULL,
    UNIQUE (embedder, dim)
);
"""


#: The steps from one schema version to the next (`_SCHEMA` is version 1), applied in order
#: when an index made by an older Deskhand is opened; each can run again harmlessly.
_UPGRADES: dict[int, str] = {
    # Counting a folder's chunks (stats) and removing a folder read only its own rows.
    2: "CREATE INDEX IF NOT EXISTS chunks_folder ON chunks(folder_id);",
}


class KnowledgeIndexError(Exception):
    """The index file cannot be used; the message says why."""


@dataclass(frozen=True)
class Folder:
    id: int
    path: str
    conversation_id: str | None
    paused: bool


@dataclass(frozen=True)
class FileState:
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Hit:
    chunk_id: int
    folder_id: int
    path: str
    location: str
    text: str
    score: float  # higher is better; comparable only within one list of hits


@dataclass(frozen=True)
class FolderStats:
    files: int
    chunks: int
    bytes: int
    problems: int


def _blob(vector: np.ndarray[Any, Any]) -> bytes:
    import numpy as np

    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


class KnowledgeIndex:
    def __init__(self, db_path: Path, *, embedder_name: str, dim: int) -> None:
        if dim < 1:
            raise ValueError("dim must be at least 1")
        self._lock = threading.RLock()  # the writer connection's
        self._embedder_name = embedder_name
        self._dim = dim
        self._path = db_path
        self._readers: list[apsw.Connection] = []  # idle ones, for any thread to take
        self._opened: list[apsw.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False
        self._db = _connect(db_path)
        try:
            with self._write():
                self._create_schema()
                self._gen = self._vector_table_for(embedder_name, dim)
                self._set_meta("embedder", embedder_name)
                self._set_meta("dim", str(dim))
        except BaseException:
            self._db.close()
            raise

    # ------------------------------------------------------------------ set-up

    def _create_schema(self) -> None:
        found = self._meta("schema_version")
        if found is not None and int(found) > SCHEMA_VERSION:
            raise KnowledgeIndexError(
                "The knowledge index was made by a newer Deskhand: update Deskhand, or "
                "remove the knowledge folders and add them again."
            )
        self._db.execute(_SCHEMA)
        for version in range(int(found or 1) + 1, SCHEMA_VERSION + 1):
            self._db.execute(_UPGRADES[version])
        self._set_meta("schema_version", str(SCHEMA_VERSION))

    def _meta(self, key: str) -> str | None:
        if not self._has_table("meta"):
            return None
        row = _one(self._db, "SELECT value FROM meta WHERE key = ?", (key,))
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def _has_table(self, name: str) -> bool:
        row = _one(
            self._db,
            "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?",
            (name,),
        )
        return row is not None

    def _vector_table_for(self, embedder: str, dim: int) -> int:
        """The generation number of `embedder`'s vector table, made if new."""
        row = _one(
            self._db,
            "SELECT gen FROM vector_tables WHERE embedder = ? AND dim = ?",
            (embedder, dim),
        )
        if row is not None:
            gen = int(row[0])
        else:
            self._db.execute(
                "INSERT INTO vector_tables(embedder, dim) VALUES (?, ?)", (embedder, dim)
            )
            gen = int(self._db.last_insert_rowid())
        self._db.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS vectors_{gen} USING vec0("
            f"folder_id INTEGER, embedding float[{dim}] distance_metric=cosine)"
        )
        return gen

    @contextmanager
    def _read(self) -> Iterator[apsw.Connection]:
        """A connection of its own for one read: reads see the last committed state and
        neither wait for a write in progress nor for each other (WAL)."""
        with self._readers_lock:
            if self._closed:
                raise KnowledgeIndexError("The knowledge index is closed.")
            db = self._readers.pop() if self._readers else None
        if db is None:
            db = _connect(self._path, reader=True)
            with self._readers_lock:
                self._opened.append(db)
        try:
            yield db
        finally:
            with self._readers_lock:
                self._readers.append(db)

    @contextmanager
    def _write(self) -> Iterator[apsw.Connection]:
        """One write transaction under the lock: all of it or, on any error, none of it."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # ------------------------------------------------------------------ embedder

    @property
    def embedder_name(self) -> str:
        return self._embedder_name

    @property
    def dim(self) -> int:
        return self._dim

    def needs_reembed(self) -> bool:
        """Whether some chunks hold vectors from another embedder than this index's."""
        with self._read() as db:
            row = _one(db, "SELECT 1 FROM chunks WHERE gen != ? LIMIT 1", (self._gen,))
        return row is not None

    def reembed_remaining(self) -> int:
        """How many chunks still hold vectors from another embedder."""
        with self._read() as db:
            row = _one(db, "SELECT count(*) FROM chunks WHERE gen != ?", (self._gen,))
        return int(row[0])

    def reembed(
        self,
        embedder: Embedder,
        *,
        batch: int = 256,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        """Give every chunk a vector from `embedder` (this index's embedder), `batch` chunks
        per transaction, from their stored text. Returns when done or when `should_stop`
        says so; what was done stays done."""
        if embedder.name != self._embedder_name or embedder.dim != self._dim:
            raise ValueError(
                f"This index is for {self._embedder_name} ({self._dim} dimensions), "
                f"not {embedder.name} ({embedder.dim})."
            )
        while not (should_stop and should_stop()):
            with self._read() as db:
                rows = _all(
                    db,
                    "SELECT id, text, gen FROM chunks WHERE gen != ? ORDER BY id LIMIT ?",
                    (self._gen, max(1, batch)),
                )
            if not rows:
                break
            vectors = embedder.embed([str(text) for _, text, _ in rows])
            with self._write() as db:
                for (chunk_id, _, gen), vector in zip(rows, vectors, strict=True):
                    self._move_vector(db, int(chunk_id), int(gen), vector)
        with self._write():
            self._drop_unused_vector_tables()

    def _move_vector(
        self, db: apsw.Connection, chunk_id: int, old_gen: int, vector: np.ndarray[Any, Any]
    ) -> None:
        row = _one(db, "SELECT gen, folder_id FROM chunks WHERE id = ?", (chunk_id,))
        if row is None or int(row[0]) != old_gen:
            return  # replaced or removed while it was being embedded
        db.execute(f"DELETE FROM vectors_{old_gen} WHERE rowid = ?", (chunk_id,))
        db.execute(
            f"INSERT INTO vectors_{self._gen}(rowid, folder_id, embedding) VALUES (?, ?, ?)",
            (chunk_id, int(row[1]), _blob(vector)),
        )
        db.execute("UPDATE chunks SET gen = ? WHERE id = ?", (self._gen, chunk_id))

    def _drop_unused_vector_tables(self) -> None:
        unused = _all(
            self._db,
            "SELECT gen FROM vector_tables WHERE gen != ? "
            "AND NOT EXISTS (SELECT 1 FROM chunks WHERE chunks.gen = vector_tables.gen)",
            (self._gen,),
        )
        for (gen,) in unused:
            self._db.execute(f"DROP TABLE IF EXISTS vectors_{int(gen)}")
            self._db.execute("DELETE FROM vector_tables WHERE gen = ?", (int(gen),))

    # ------------------------------------------------------------------ folders

    def add_folder(self, path: str, conversation_id: str | None = None) -> Folder:
        """The folder as knowledge, globally or for one conversation; the same folder added
        twice is the same folder."""
        with self._write() as db:
            db.execute(
                "INSERT OR IGNORE INTO folders(path, conversation_id) VALUES (?, ?)",
                (path, conversation_id),
            )
            row = _one(
                db,
                "SELECT id, path, conversation_id, paused FROM folders "
                "WHERE path = ? AND coalesce(conversation_id, '') = ?",
                (path, conversation_id or ""),
            )
        return _folder(row)

    def folders(
        self, conversation_id: str | None = None, *, all_conversations: bool = False
    ) -> list[Folder]:
        """The global folders and `conversation_id`'s own; every folder with
        `all_conversations` (what the indexer watches)."""
        sql = "SELECT id, path, conversation_id, paused FROM folders"
        args: tuple[Any, ...] = ()
        if not all_conversations:
            sql += " WHERE conversation_id IS NULL OR conversation_id = ?"
            args = (conversation_id,)
        with self._read() as db:
            rows = _all(db, sql + " ORDER BY id", args)
        return [_folder(row) for row in rows]

    def remove_folder(self, folder_id: int) -> None:
        """The folder and everything indexed from it: files, chunks, vectors, problems."""
        with self._write() as db:
            self._delete_chunks(db, "folder_id = ?", (folder_id,))
            db.execute("DELETE FROM files WHERE folder_id = ?", (folder_id,))
            db.execute("DELETE FROM problems WHERE folder_id = ?", (folder_id,))
            db.execute("DELETE FROM folders WHERE id = ?", (folder_id,))

    def set_paused(self, folder_id: int, paused: bool) -> None:
        with self._write() as db:
            db.execute("UPDATE folders SET paused = ? WHERE id = ?", (int(paused), folder_id))

    # ------------------------------------------------------------------ files

    def file_states(self, folder_id: int) -> dict[str, FileState]:
        with self._read() as db:
            rows = _all(
                db, "SELECT path, size, mtime_ns FROM files WHERE folder_id = ?", (folder_id,)
            )
        return {str(path): FileState(int(size), int(mtime)) for path, size, mtime in rows}

    def replace_file(
        self,
        folder_id: int,
        path: str,
        state: FileState,
        chunks: Sequence[Chunk],
        vectors: np.ndarray[Any, Any],
    ) -> None:
        """The file's chunks and vectors instead of what was indexed for it before, in one
        transaction; its recorded problem, if any, is cleared."""
        if (
            vectors.ndim != 2
            or vectors.shape[0] != len(chunks)
            or (len(chunks) and vectors.shape[1] != self._dim)
        ):
            raise ValueError(
                f"{len(chunks)} chunks need {len(chunks)} vectors of {self._dim} numbers, "
                f"not an array of shape {vectors.shape}."
            )
        with self._write() as db:
            file_id = self._file_id(db, folder_id, path)
            if file_id is not None:
                self._delete_chunks(db, "file_id = ?", (file_id,))
                db.execute(
                    "UPDATE files SET size = ?, mtime_ns = ? WHERE id = ?",
                    (state.size, state.mtime_ns, file_id),
                )
            else:
                db.execute(
                    "INSERT INTO files(folder_id, path, size, mtime_ns) VALUES (?, ?, ?, ?)",
                    (folder_id, path, state.size, state.mtime_ns),
                )
                file_id = int(db.last_insert_rowid())
            for chunk, vector in zip(chunks, vectors, strict=True):
                db.execute(
                    "INSERT INTO chunks(file_id, folder_id, ordinal, location, text, gen) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (file_id, folder_id, chunk.ordinal, chunk.location, chunk.text, self._gen),
                )
                db.execute(
                    f"INSERT INTO vectors_{self._gen}(rowid, folder_id, embedding) "
                    "VALUES (?, ?, ?)",
                    (db.last_insert_rowid(), folder_id, _blob(vector)),
                )
            db.execute("DELETE FROM problems WHERE folder_id = ? AND path = ?", (folder_id, path))

    def remove_file(self, folder_id: int, path: str) -> None:
        with self._write() as db:
            file_id = self._file_id(db, folder_id, path)
            if file_id is not None:
                self._delete_chunks(db, "file_id = ?", (file_id,))
                db.execute("DELETE FROM files WHERE id = ?", (file_id,))
            db.execute("DELETE FROM problems WHERE folder_id = ? AND path = ?", (folder_id, path))

    @staticmethod
    def _file_id(db: apsw.Connection, folder_id: int, path: str) -> int | None:
        row = _one(db, "SELECT id FROM files WHERE folder_id = ? AND path = ?", (folder_id, path))
        return None if row is None else int(row[0])

    @staticmethod
    def _delete_chunks(db: apsw.Connection, where: str, args: tuple[Any, ...]) -> None:
        """Chunks matching `where`, with their vectors (the FTS rows go by trigger)."""
        rows = _all(db, f"SELECT id, gen FROM chunks WHERE {where}", args)
        for chunk_id, gen in rows:
            db.execute(f"DELETE FROM vectors_{int(gen)} WHERE rowid = ?", (chunk_id,))
        db.execute(f"DELETE FROM chunks WHERE {where}", args)

    # ------------------------------------------------------------------ problems

    def record_problem(self, folder_id: int, path: str, reason: str) -> None:
        """Noted only while the folder exists (one removed meanwhile, by another process
        too, keeps no problem)."""
        with self._write() as db:
            db.execute(
                "INSERT OR REPLACE INTO problems(folder_id, path, reason) "
                "SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM folders WHERE id = ?)",
                (folder_id, path, reason, folder_id),
            )

    def clear_problem(self, folder_id: int, path: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM problems WHERE folder_id = ? AND path = ?", (folder_id, path))

    def problems(self, folder_id: int) -> list[tuple[str, str]]:
        with self._read() as db:
            rows = _all(
                db,
                "SELECT path, reason FROM problems WHERE folder_id = ? ORDER BY path",
                (folder_id,),
            )
        return [(str(path), str(reason)) for path, reason in rows]

    def stats(self, folder_id: int) -> FolderStats:
        """Counts from the folder's rows alone (`files` by its unique key, the chunks by
        `chunks_folder`), never the chunks themselves: 4 ms over 300,000 chunks."""
        with self._read() as db:
            files, size = _one(
                db,
                "SELECT count(*), coalesce(sum(size), 0) FROM files WHERE folder_id = ?",
                (folder_id,),
            )
            chunks = _one(db, "SELECT count(*) FROM chunks WHERE folder_id = ?", (folder_id,))[0]
            problems = _one(db, "SELECT count(*) FROM problems WHERE folder_id = ?", (folder_id,))[
                0
            ]
        return FolderStats(int(files), int(chunks), int(size), int(problems))

    # ------------------------------------------------------------------ search

    def search_text(self, query: str, k: int, folder_ids: Sequence[int] | None = None) -> list[Hit]:
        """The `k` chunks best matching the query's words (BM25; "invoices" finds
        "invoice"). Any text is a valid query: it never raises on FTS syntax."""
        if k < 1 or (folder_ids is not None and not folder_ids):
            return []
        with self._read() as db:
            match = self._match(db, query)
            if not match:
                return []
            if folder_ids is None:
                sql = "SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ?"
                args: list[Any] = [match]
            else:
                sql = (
                    "SELECT t.rowid, t.rank FROM chunks_fts t JOIN chunks c ON c.id = t.rowid "
                    f"WHERE chunks_fts MATCH ? AND c.folder_id IN ({_marks(folder_ids)})"
                )
                args = [match, *(int(i) for i in folder_ids)]
            # Ids first, text only for the k kept: reading every match's text is slow.
            found = _all(db, sql + " ORDER BY rank LIMIT ?", [*args, k])
            return self._hits(db, [(int(i), -float(rank)) for i, rank in found])

    def _match(self, db: apsw.Connection, query: str) -> str:
        """The MATCH expression for a query: its words as FTS5 itself splits them, each
        quoted (so quotes, NEAR, AND, *, parentheses are only words), joined by OR; stop
        words and words found in most chunks are left out while rarer ones remain (they
        barely change BM25's order and cost the most to rank). "" for no words."""
        import apsw

        raw = query.encode("utf-8", "replace")
        found: Iterable[Any] = _tokenizer(db)(raw, apsw.FTS5_TOKENIZE_QUERY, None)
        terms: dict[str, str] = {}  # stem -> the word as typed
        for start, end, stem, *_ in found:
            terms.setdefault(str(stem), raw[int(start) : int(end)].decode("utf-8", "replace"))
        kept = {s: w for s, w in terms.items() if w.lower() not in _STOPWORDS} or terms
        stems = list(kept)[:_MAX_QUERY_TERMS]
        if len(stems) > 1:
            stems = self._rarest(db, stems)
        return " OR ".join('"' + kept[stem].replace('"', '""') + '"' for stem in stems)

    def _rarest(self, db: apsw.Connection, stems: list[str]) -> list[str]:
        """`stems` without those in no chunk and, while rarer ones remain, those in more
        than COMMON_SHARE of the chunks."""
        docs = dict(
            _all(
                db,
                f"SELECT term, doc FROM temp.chunks_vocab WHERE term IN ({_marks(stems)})",
                stems,
            )
        )
        present = [stem for stem in stems if docs.get(stem, 0) > 0]
        if len(present) <= 1:
            return present
        total = int(_one(db, "SELECT count(*) FROM chunks")[0])
        rare = [stem for stem in present if docs[stem] <= COMMON_SHARE * total]
        return rare or sorted(present, key=lambda stem: docs[stem])[:2]

    def search_vector(
        self,
        vector: np.ndarray[Any, Any],
        k: int,
        folder_ids: Sequence[int] | None = None,
    ) -> list[Hit]:
        """The `k` chunks nearest to `vector` (a query embedded by this index's embedder);
        score is the cosine similarity."""
        import numpy as np

        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape[0] != self._dim:
            raise ValueError(f"The query vector has {query.shape[0]} numbers, not {self._dim}.")
        if k < 1 or (folder_ids is not None and not folder_ids) or not np.any(query):
            return []
        sql = f"SELECT rowid, distance FROM vectors_{self._gen} WHERE embedding MATCH ? AND k = ?"
        args: list[Any] = [_blob(query), min(k, _VEC_K_LIMIT)]
        if folder_ids is not None:
            sql += f" AND folder_id IN ({_marks(folder_ids)})"
            args += [int(i) for i in folder_ids]
        with self._read() as db:
            found = _all(db, sql + " ORDER BY distance", args)
            return self._hits(db, [(int(i), 1.0 - float(distance)) for i, distance in found])

    @staticmethod
    def _hits(db: apsw.Connection, scored: list[tuple[int, float]]) -> list[Hit]:
        """Hits for (chunk id, score) pairs, in their order; chunks gone meanwhile left out."""
        if not scored:
            return []
        ids = [chunk_id for chunk_id, _ in scored]
        rows = _all(
            db,
            "SELECT c.id, c.folder_id, f.path, c.location, c.text FROM chunks c "
            f"JOIN files f ON f.id = c.file_id WHERE c.id IN ({_marks(ids)})",
            ids,
        )
        by_id = {int(row[0]): row for row in rows}
        return [_hit(by_id[i], score) for i, score in scored if i in by_id]

    def chunks_of(self, path: str, folder_ids: Sequence[int] | None = None) -> list[Hit]:
        """The document's chunks in reading order, from the first folder that holds it
        (of `folder_ids`, when given: a copy in a folder not asked for is never read)."""
        if folder_ids is not None and not folder_ids:
            return []
        sql = "SELECT id FROM files WHERE path = ?"
        args: list[Any] = [path]
        if folder_ids is not None:
            sql += f" AND folder_id IN ({_marks(folder_ids)})"
            args += [int(i) for i in folder_ids]
        with self._read() as db:
            file_row = _one(db, sql + " ORDER BY folder_id LIMIT 1", args)
            if file_row is None:
                return []
            rows = _all(
                db,
                "SELECT c.id, c.folder_id, f.path, c.location, c.text FROM chunks c "
                "JOIN files f ON f.id = c.file_id WHERE c.file_id = ? ORDER BY c.ordinal",
                (int(file_row[0]),),
            )
        return [_hit(row, 0.0) for row in rows]

    def rewrite_chunks(
        self, changes: Sequence[tuple[int, str, str]], vectors: np.ndarray[Any, Any]
    ) -> None:
        """Chunks' text and vectors replaced in one transaction, each given as (id, the text
        it holds, its new text) with its new vector: a secret learned after they were
        indexed, masked. A chunk whose text changed meanwhile (or is gone) is left alone."""
        with self._write() as db:
            for (chunk_id, old, text), vector in zip(changes, vectors, strict=True):
                row = _one(db, "SELECT text, gen, folder_id FROM chunks WHERE id = ?", (chunk_id,))
                if row is None or str(row[0]) != old:
                    continue
                gen, folder_id = int(row[1]), int(row[2])
                db.execute(
                    "INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', ?, ?)",
                    (chunk_id, old),
                )
                db.execute(
                    "UPDATE chunks SET text = ?, gen = ? WHERE id = ?", (text, self._gen, chunk_id)
                )
                db.execute("INSERT INTO chunks_fts(rowid, text) VALUES (?, ?)", (chunk_id, text))
                db.execute(f"DELETE FROM vectors_{gen} WHERE rowid = ?", (chunk_id,))
                db.execute(
                    f"INSERT INTO vectors_{self._gen}(rowid, folder_id, embedding) "
                    "VALUES (?, ?, ?)",
                    (chunk_id, folder_id, _blob(vector)),
                )

    def close(self) -> None:
        with self._readers_lock:
            self._closed = True
            opened, self._opened, self._readers = self._opened, [], []
        for db in opened:
            db.close(True)
        with self._lock:
            self._db.close()


#: How much of the file a reader maps into memory (address space; the pages touched count
#: in RSS as shared file pages). Capped so a task manager does not show the whole index as
#: Deskhand's memory; the vector scan keeps its gain (see docs/architecture.md).
_READER_MMAP = 256 << 20
#: FTS5's own tokenizer, as the chunks' text is indexed: the query is split the same way.
_TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])


def _tokenizer(db: apsw.Connection) -> apsw.FTS5Tokenizer:
    return db.fts5_tokenizer(*_TOKENIZER)


def _connect(db_path: Path, *, reader: bool = False) -> apsw.Connection:
    """The writer's connection (which also makes the file WAL), or a reader's, which also
    gets a view of the full-text index's words and how many chunks hold each."""
    import apsw
    import sqlite_vec

    db_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        db = apsw.Connection(str(db_path))
        db.set_busy_timeout(10_000)
        db.enable_load_extension(True)
        db.load_extension(sqlite_vec.loadable_path())
        db.enable_load_extension(False)
        if reader:
            # Vector search reads every vector: mapped, the pages are not copied through
            # SQLite's page cache first (about 35% faster over 100,000 chunks).
            db.execute(f"PRAGMA mmap_size = {_READER_MMAP}")
            db.execute(
                "CREATE VIRTUAL TABLE temp.chunks_vocab USING fts5vocab(main, chunks_fts, 'row')"
            )
        else:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute("PRAGMA foreign_keys = ON")
    except apsw.Error as e:
        raise KnowledgeIndexError(
            f"The knowledge index {db_path.name} cannot be opened: {e}"
        ) from e
    return db


def _one(db: apsw.Connection, sql: str, args: Any = ()) -> Any:
    """The first row of a query, or None."""
    return db.execute(sql, args).fetchone()


def _all(db: apsw.Connection, sql: str, args: Any = ()) -> list[Any]:
    return db.execute(sql, args).fetchall()


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" * len(values))


def _folder(row: Any) -> Folder:
    folder_id, path, conversation_id, paused = row
    return Folder(int(folder_id), str(path), conversation_id, bool(paused))


def _hit(row: Any, score: float) -> Hit:
    chunk_id, folder_id, path, location, text = row
    return Hit(int(chunk_id), int(folder_id), str(path), str(location), str(text), score)
