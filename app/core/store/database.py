"""The SQLite file under the store: opening it (WAL, pragmas), the schema and its
migrations, and the transactions every aggregate of `Store` writes through.

One connection shared by threads behind a lock; every write is its own committed
transaction, so a crash loses at most the message still being streamed.

Schema changes are appended to `MIGRATIONS`; `PRAGMA user_version` records how many
have been applied. Never edit a released migration.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Self

#: What a column holds (what sqlite3 binds and returns).
SqlValue = str | int | float | bytes | None

_V1 = """
CREATE TABLE conversations (
    id          TEXT PRIMARY KEY,
    title       TEXT NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    deleted_at  REAL
);
CREATE INDEX conversations_recent ON conversations (deleted_at, updated_at);

CREATE TABLE messages (
    id              INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    role            TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content         TEXT NOT NULL DEFAULT '',
    tool_calls      TEXT,
    tool_call_id    TEXT,
    is_error        INTEGER NOT NULL DEFAULT 0,
    images          TEXT,
    usage           TEXT,
    created_at      REAL NOT NULL,
    UNIQUE (conversation_id, seq)
);

CREATE TABLE tool_calls (
    id              INTEGER PRIMARY KEY,
    call_id         TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN
                        ('pending', 'running', 'ok', 'error', 'denied', 'cancelled')),
    content         TEXT,
    data            TEXT,
    error           TEXT,
    started_at      REAL NOT NULL,
    finished_at     REAL
);
CREATE INDEX tool_calls_by_call ON tool_calls (conversation_id, call_id);

CREATE TABLE approvals (
    id              INTEGER PRIMARY KEY,
    conversation_id TEXT REFERENCES conversations (id) ON DELETE CASCADE,
    call_id         TEXT,
    tool_name       TEXT NOT NULL,
    decision        TEXT NOT NULL CHECK (decision IN
                        ('allow_once', 'always_allow', 'deny', 'auto_deny', 'auto_allow')),
    decided_at      REAL NOT NULL
);
CREATE INDEX approvals_by_conversation ON approvals (conversation_id);

CREATE VIRTUAL TABLE messages_fts USING fts5 (
    content, content = 'messages', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content)
        VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content)
        VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
END;
"""

_V2 = """
CREATE TABLE integration_accounts (
    id          TEXT PRIMARY KEY,
    integration TEXT NOT NULL,
    label       TEXT NOT NULL,
    fields      TEXT NOT NULL DEFAULT '{}',
    created_at  REAL NOT NULL
);
CREATE INDEX integration_accounts_by_integration ON integration_accounts (integration);
CREATE TABLE integration_active (
    integration TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL
);
"""

_V3 = """
CREATE TABLE reminders (
    id            TEXT PRIMARY KEY,
    message       TEXT NOT NULL,
    due_at        REAL NOT NULL,
    tz            TEXT NOT NULL,
    cron          TEXT,
    status        TEXT NOT NULL DEFAULT 'scheduled',
    created_at    REAL NOT NULL,
    fired_at      REAL,
    fired_count   INTEGER NOT NULL DEFAULT 0,
    conversation_id TEXT,
    source        TEXT NOT NULL DEFAULT 'user',
    source_ref    TEXT
);
CREATE INDEX reminders_due ON reminders (status, due_at);
"""

_V4 = """
ALTER TABLE conversations ADD COLUMN private INTEGER NOT NULL DEFAULT 0;
CREATE TABLE memories (
    id                  INTEGER PRIMARY KEY,
    kind                TEXT NOT NULL CHECK (kind IN ('fact', 'preference', 'task')),
    content             TEXT NOT NULL,
    source_conversation TEXT REFERENCES conversations (id) ON DELETE SET NULL,
    created_at          REAL NOT NULL,
    updated_at          REAL NOT NULL
);
CREATE INDEX memories_by_kind ON memories (kind, updated_at);
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    content, content = 'memories', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content)
        VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF content ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content)
        VALUES ('delete', old.id, old.content);
    INSERT INTO memories_fts (rowid, content) VALUES (new.id, new.content);
END;
"""

# The trust core's finer answers (this conversation, any arguments, trust the source) and
# how each was reached (the user, a rule, --yes, nobody to ask).
_V5 = """
CREATE TABLE approvals_v5 (
    id              INTEGER PRIMARY KEY,
    conversation_id TEXT REFERENCES conversations (id) ON DELETE CASCADE,
    call_id         TEXT,
    tool_name       TEXT NOT NULL,
    decision        TEXT NOT NULL CHECK (decision IN
                        ('allow_once', 'allow_conversation', 'always_allow', 'always_allow_any',
                         'trust_source', 'deny', 'auto_deny', 'auto_allow')),
    how             TEXT NOT NULL DEFAULT 'user',
    decided_at      REAL NOT NULL
);
INSERT INTO approvals_v5 (id, conversation_id, call_id, tool_name, decision, decided_at)
    SELECT id, conversation_id, call_id, tool_name, decision, decided_at FROM approvals;
DROP TABLE approvals;
ALTER TABLE approvals_v5 RENAME TO approvals;
CREATE INDEX approvals_by_conversation ON approvals (conversation_id);
"""

# Branches (edited or regenerated turns) and the markers shown between messages. The live
# branch is in `messages`; an earlier one is archived whole as JSON (its messages, the branch
# points and markers inside it), so search, compaction and providers only see the live one.
_V6 = """
CREATE TABLE message_branches (
    id              INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    at_index        INTEGER NOT NULL,
    branch_no       INTEGER NOT NULL,
    tail_json       TEXT NOT NULL,
    created_at      REAL NOT NULL,
    UNIQUE (conversation_id, at_index, branch_no)
);
CREATE TABLE conversation_markers (
    id              INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    after_count     INTEGER NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('error', 'stopped')),
    text            TEXT NOT NULL,
    branch_start    INTEGER NOT NULL DEFAULT 0,
    created_at      REAL NOT NULL
);
CREATE INDEX conversation_markers_by_conversation
    ON conversation_markers (conversation_id, after_count);
"""

# The provider account and model a conversation talks to (NULL: the active account's).
_V7 = """
ALTER TABLE conversations ADD COLUMN provider_account TEXT;
ALTER TABLE conversations ADD COLUMN model TEXT;
"""

# The agent runs writing to a conversation now (this or another process): while one holds
# a live lease, the history is not rewritten under it (edit, regenerate, branch switch).
# One row per run, so two runs of one conversation (a task's and the window's) both count.
_V8 = """
CREATE TABLE conversation_leases (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    owner           TEXT NOT NULL,
    pid             INTEGER NOT NULL,
    heartbeat       REAL NOT NULL,
    PRIMARY KEY (conversation_id, owner)
);
"""

# What a conversation has read that outlives the process (§5.8, §5.10): private data
# ('private') and untrusted content ('untrusted'), in plain words, with the tool call whose
# result brought it (NULL: not a call's result, e.g. a remembered note taken from untrusted
# content). A row counts while that call's result is in the live history.
_V9 = """
CREATE TABLE conversation_taint (
    id              INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    kind            TEXT NOT NULL CHECK (kind IN ('private', 'untrusted')),
    what            TEXT NOT NULL,
    call_id         TEXT,
    created_at      REAL NOT NULL
);
CREATE INDEX conversation_taint_by_conversation ON conversation_taint (conversation_id, id);
CREATE INDEX messages_by_tool_call ON messages (conversation_id, tool_call_id);
"""

# Child conversations: a sub-agent's run (delegate_agent) is a conversation of its own,
# linked to the conversation that delegated it and named after the agent (both NULL for an
# ordinary conversation). Purging a parent removes its children with it.
_V10 = """
ALTER TABLE conversations ADD COLUMN parent_id TEXT
    REFERENCES conversations (id) ON DELETE CASCADE;
ALTER TABLE conversations ADD COLUMN agent TEXT;
CREATE INDEX conversations_by_parent ON conversations (parent_id);
"""

# Memories found by meaning: each note's vector (float32 bytes of its redacted text, never
# its origin) and the embedder that made it, both NULL until embedded: notes written before
# this version are embedded lazily, in batches, off the window's thread
# (app.core.memory_search). The index finds the notes still to embed without reading vectors.
_V11 = """
ALTER TABLE memories ADD COLUMN embedding BLOB;
ALTER TABLE memories ADD COLUMN embedder TEXT;
CREATE INDEX memories_by_embedder ON memories (embedder);
"""

#: MIGRATIONS[i] takes the schema from version i to i + 1. Append only.
MIGRATIONS: list[str] = [_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8, _V9, _V10, _V11]


class StoreError(Exception):
    """The database cannot be used. `str(err)` names the file and says what to do."""


class NotFoundError(StoreError, LookupError):
    """No such conversation or tool call."""


class Database:
    """The connection, its lock and the clock that every aggregate of `Store` shares.
    Thread-safe; `clock` (epoch seconds) is injectable for tests."""

    def __init__(self, path: str | Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.RLock()
        self._conn = open_database(self.path, self._migrations())

    def _migrations(self) -> Sequence[str]:
        """The schema this code understands (`Store` reads it from the package, where tests
        swap it)."""
        return MIGRATIONS

    def close(self) -> None:
        with self._lock:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("PRAGMA optimize")
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One committed transaction (the connection is in autocommit mode otherwise)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _read(self, sql: str, params: Sequence[SqlValue] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, tuple(params)).fetchall()


def checked_columns(table: str, names: Iterable[str], allowed: frozenset[str]) -> list[str]:
    """`names` when every one is a column callers may set in `table`; else ValueError.
    Column names reach SQL only through such a fixed allow-list, never from a caller."""
    names = list(names)
    unknown = sorted(set(names) - allowed)
    if unknown:
        raise ValueError(
            f"cannot set {', '.join(unknown)} of {table}: only {', '.join(sorted(allowed))}"
        )
    return names


def assignments(names: Iterable[str]) -> str:
    """`a = ?, b = ?` for allow-listed column names (see `checked_columns`)."""
    return ", ".join(f"{name} = ?" for name in names)


def utc(ts: float) -> datetime:
    """A stored epoch timestamp as an aware UTC datetime."""
    return datetime.fromtimestamp(ts, UTC)


def open_database(path: Path, migrations: Sequence[str]) -> sqlite3.Connection:
    """Connect, configure and migrate; clear errors for foreign or newer files."""
    created = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the Deskhand database {path}: {exc}") from exc
    try:
        if created and os.name == "posix":
            os.chmod(path, 0o600)  # conversations are private; -wal/-shm inherit this mode
        conn.row_factory = sqlite3.Row
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"cannot switch {path} to WAL mode (got {mode!r})")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        _migrate(conn, path, migrations)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StoreError(
            f"{path} is not a usable Deskhand database ({exc}). The file was left "
            "untouched; move it away (or point DESKHAND_HOME elsewhere) to start afresh."
        ) from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _migrate(conn: sqlite3.Connection, path: Path, migrations: Sequence[str]) -> None:
    known = len(migrations)
    while True:
        # Each step is one transaction that re-reads the version under the write lock,
        # so two processes opening a fresh file cannot both apply the same migration.
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > known:
                raise StoreError(
                    f"{path} was written by a newer Deskhand (schema version {version}; this "
                    f"version understands up to {known}). Update Deskhand to open it."
                )
            if version == known:
                conn.execute("COMMIT")
                return
            try:
                for statement in _statements(migrations[version]):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {version + 1}")
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(
                    f"could not upgrade {path} to schema version {version + 1}: {exc}. "
                    "Nothing was changed."
                ) from exc
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def _statements(script: str) -> Iterator[str]:
    """Split a migration into statements (sqlite3.complete_statement understands triggers)."""
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            yield buf
            buf = ""
    if buf.strip():
        yield buf
