"""The conversation store: SQLite in WAL mode at `<home>/deskhand.db` (DESIGN.md §5).

One connection shared by threads behind a lock; every write is its own committed
transaction, so a crash loses at most the message still being streamed. The API is
synchronous (calls take well under a millisecond on small rows); run bulk work such as
`search` or `purge_deleted` in an executor from the event loop.

Schema changes are appended to `MIGRATIONS`; `PRAGMA user_version` records how many
have been applied. Never edit a released migration.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, cast

from app.core.history_marks import BranchInfo, Marker, MarkerKind
from app.core.providers.base import ChatMessage, Role, ToolCallRequest, Usage

DEFAULT_TITLE = "New chat"
TITLE_MAX = 60
#: Markers around matched terms in `SearchHit.snippet`: private-use characters (any in the
#: message itself are left out of its snippet), so a message's « » never pass for one.
HIGHLIGHT_START = "\ue000"
HIGHLIGHT_END = "\ue001"
_HIGHLIGHTS = (HIGHLIGHT_START, HIGHLIGHT_END)
#: A run's lease older than this (no message, no heartbeat) is stale: its run is gone.
LEASE_STALE_SECONDS = 600.0

ToolCallStatus = Literal["pending", "running", "ok", "error", "denied", "cancelled"]
ApprovalDecision = Literal[
    "allow_once",
    "allow_conversation",
    "always_allow",
    "always_allow_any",
    "trust_source",
    "deny",
    "auto_deny",
    "auto_allow",
]

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

#: MIGRATIONS[i] takes the schema from version i to i + 1. Append only.
MIGRATIONS: list[str] = [_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8]


class StoreError(Exception):
    """The database cannot be used. `str(err)` names the file and says what to do."""


class NotFoundError(StoreError, LookupError):
    """No such conversation or tool call."""


class ConversationBusyError(StoreError):
    """Another run is writing to the conversation: its history is not rewritten now."""

    def __init__(self, conv_id: str) -> None:
        super().__init__(
            f"conversation {conv_id} is being answered by another run (a scheduled task or "
            "`deskhand ask`); wait until it ends, then try again"
        )
        self.conversation_id = conv_id


@dataclass(frozen=True)
class Conversation:
    id: str
    title: str
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    message_count: int


@dataclass(frozen=True)
class StoredMessage:
    """A message with its storage identity, for paging through long conversations."""

    id: int
    seq: int
    message: ChatMessage
    usage: Usage | None
    created_at: datetime


@dataclass(frozen=True)
class ToolCallRecord:
    id: int
    call_id: str
    conversation_id: str
    name: str
    arguments: str
    status: ToolCallStatus
    content: str | None
    data: Any
    error: str | None
    started_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True)
class ApprovalRecord:
    id: int
    conversation_id: str | None
    call_id: str | None
    tool_name: str
    decision: ApprovalDecision
    decided_at: datetime
    #: "user", "rule", "yes" (approved by --yes) or "policy".
    how: str = "user"


@dataclass(frozen=True)
class SearchHit:
    conversation_id: str
    conversation_title: str
    message_id: int
    role: Role
    snippet: str


class Store:
    """The SQLite store. Thread-safe; `clock` (epoch seconds) is injectable for tests."""

    def __init__(self, path: str | Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.RLock()
        self._conn = _open(self.path)

    # ---- lifecycle ------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("PRAGMA optimize")
            self._conn.close()

    def __enter__(self) -> Store:
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

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    # ---- conversations --------------------------------------------------------------

    def create_conversation(self, title: str = DEFAULT_TITLE) -> str:
        conv_id = str(uuid.uuid4())
        now = self._clock()
        with self._write() as db:
            db.execute(
                "INSERT INTO conversations (id, title, created_at, updated_at) VALUES (?,?,?,?)",
                (conv_id, title, now, now),
            )
        return conv_id

    # ---- reminders --------------------------------------------------------------------

    def insert_reminder(self, row: dict[str, Any]) -> None:
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self._write() as db:
            db.execute(f"INSERT INTO reminders ({columns}) VALUES ({marks})", tuple(row.values()))

    def update_reminder(self, reminder_id: str, **changes: Any) -> bool:
        assignments = ", ".join(f"{name} = ?" for name in changes)
        with self._write() as db:
            cur = db.execute(
                f"UPDATE reminders SET {assignments} WHERE id = ?", (*changes.values(), reminder_id)
            )
        return cur.rowcount > 0

    def reminder_rows(self, where: str = "1", params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        rows = self._read(f"SELECT * FROM reminders WHERE {where} ORDER BY due_at", params)
        return [dict(r) for r in rows]

    # ---- integration accounts (non-secret fields only; secrets live in the keyring) ----

    def add_account(self, integration: str, label: str, fields: dict[str, str]) -> str:
        account_id = uuid.uuid4().hex[:12]
        with self._write() as db:
            db.execute(
                "INSERT INTO integration_accounts (id, integration, label, fields, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (account_id, integration, label, json.dumps(fields), self._clock()),
            )
        return account_id

    def list_accounts(self, integration: str) -> list[dict[str, Any]]:
        rows = self._read(
            "SELECT id, integration, label, fields FROM integration_accounts"
            " WHERE integration = ? ORDER BY created_at",
            (integration,),
        )
        return [
            {
                "id": r["id"],
                "integration": r["integration"],
                "label": r["label"],
                "fields": json.loads(r["fields"]),
            }
            for r in rows
        ]

    def remove_account(self, integration: str, account_id: str) -> bool:
        with self._write() as db:
            cur = db.execute(
                "DELETE FROM integration_accounts WHERE integration = ? AND id = ?",
                (integration, account_id),
            )
            db.execute(
                "DELETE FROM integration_active WHERE integration = ? AND account_id = ?",
                (integration, account_id),
            )
        return cur.rowcount > 0

    def set_active_account(self, integration: str, account_id: str) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO integration_active (integration, account_id) VALUES (?, ?)"
                " ON CONFLICT (integration) DO UPDATE SET account_id = excluded.account_id",
                (integration, account_id),
            )

    def active_account_id(self, integration: str) -> str | None:
        rows = self._read(
            "SELECT account_id FROM integration_active WHERE integration = ?", (integration,)
        )
        return rows[0]["account_id"] if rows else None

    # ---- privacy and memories ---------------------------------------------------------

    def set_private(self, conv_id: str, private: bool) -> None:
        """A private conversation is never a source of memories."""
        self._update_conversation(conv_id, "private = ?", (int(private),))

    def is_private(self, conv_id: str) -> bool:
        rows = self._read("SELECT private FROM conversations WHERE id = ?", (conv_id,))
        if not rows:
            raise NotFoundError(f"no conversation {conv_id}")
        return bool(rows[0][0])

    def add_memory(self, kind: str, content: str, source_conversation: str | None) -> int:
        now = self._clock()
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO memories (kind, content, source_conversation, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (kind, content, source_conversation, now, now),
            )
            return cast(int, cur.lastrowid)

    def update_memory(self, memory_id: int, **changes: Any) -> bool:
        """Change `content` and/or `kind`; False when there is no such memory."""
        changes = {k: v for k, v in changes.items() if k in ("content", "kind") and v is not None}
        assignments = ", ".join(f"{name} = ?" for name in [*changes, "updated_at"])
        with self._write() as db:
            cur = db.execute(
                f"UPDATE memories SET {assignments} WHERE id = ?",
                (*changes.values(), self._clock(), memory_id),
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
        where, params = ["1"], []
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
        """Memories matching `query`, best first (FTS5 bm25). `any_word`: OR instead of AND."""
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

    def rename_conversation(self, conv_id: str, title: str) -> None:
        self._update_conversation(conv_id, "title = ?", (title,))

    def delete_conversation(self, conv_id: str) -> None:
        """Soft delete: hidden from lists and search until restored or purged."""
        self._update_conversation(conv_id, "deleted_at = ?", (self._clock(),))

    def restore_conversation(self, conv_id: str) -> None:
        self._update_conversation(conv_id, "deleted_at = NULL", ())

    def _update_conversation(self, conv_id: str, assignment: str, params: tuple[Any, ...]) -> None:
        with self._write() as db:
            cur = db.execute(
                f"UPDATE conversations SET {assignment} WHERE id = ?", (*params, conv_id)
            )
            if cur.rowcount == 0:
                raise NotFoundError(f"no conversation {conv_id}")

    def purge_deleted(self, older_than: timedelta) -> int:
        """Permanently remove conversations soft-deleted more than `older_than` ago."""
        cutoff = self._clock() - older_than.total_seconds()
        with self._write() as db:
            cur = db.execute(
                "DELETE FROM conversations WHERE deleted_at IS NOT NULL AND deleted_at <= ?",
                (cutoff,),
            )
            return cur.rowcount

    def list_conversations(
        self, limit: int = 100, offset: int = 0, include_deleted: bool = False
    ) -> list[Conversation]:
        """Most recently active first."""
        where = "" if include_deleted else "WHERE c.deleted_at IS NULL"
        rows = self._read(
            f"""SELECT c.*, (SELECT count(*) FROM messages m WHERE m.conversation_id = c.id)
                       AS message_count
                FROM conversations c {where}
                ORDER BY c.updated_at DESC, c.rowid DESC LIMIT ? OFFSET ?""",
            (limit, offset),
        )
        return [_conversation(r) for r in rows]

    def get_conversation(self, conv_id: str) -> Conversation | None:
        """The conversation, deleted or not; None if it does not exist."""
        rows = self._read(
            """SELECT c.*, (SELECT count(*) FROM messages m WHERE m.conversation_id = c.id)
                      AS message_count
               FROM conversations c WHERE c.id = ?""",
            (conv_id,),
        )
        return _conversation(rows[0]) if rows else None

    def auto_title(self, conv_id: str, first_user_text: str) -> str:
        """Title the conversation after its first user message; returns the title."""
        title = make_title(first_user_text)
        self.rename_conversation(conv_id, title)
        return title

    # ---- messages -------------------------------------------------------------------

    def append_message(self, conv_id: str, msg: ChatMessage, usage: Usage | None = None) -> int:
        """Commit one complete message; returns its id. Bumps the conversation's updated_at."""
        with self._write() as db:
            return self._insert_message(db, conv_id, msg, usage)

    def _insert_message(
        self, db: sqlite3.Connection, conv_id: str, msg: ChatMessage, usage: Usage | None
    ) -> int:
        now = self._clock()
        tool_calls = (
            json.dumps(
                [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in msg.tool_calls]
            )
            if msg.tool_calls
            else None
        )
        usage_json = (
            json.dumps({"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens})
            if usage is not None
            else None
        )
        cur = db.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conv_id))
        if cur.rowcount == 0:
            raise NotFoundError(f"no conversation {conv_id}")
        cur = db.execute(
            """INSERT INTO messages (conversation_id, seq, role, content, tool_calls,
                                     tool_call_id, is_error, images, usage, created_at)
               VALUES (?, (SELECT coalesce(max(seq), 0) + 1 FROM messages
                           WHERE conversation_id = ?), ?, ?, ?, ?, ?, ?, ?, ?)""",
            (
                conv_id,
                conv_id,
                msg.role,
                msg.content,
                tool_calls,
                msg.tool_call_id,
                int(msg.is_error),
                json.dumps(msg.images) if msg.images else None,
                usage_json,
                now,
            ),
        )
        return cast(int, cur.lastrowid)

    def load_messages(self, conv_id: str) -> list[ChatMessage]:
        """Every message of the conversation, in order (ready to send to a provider)."""
        rows = self._read(
            "SELECT * FROM messages WHERE conversation_id = ? ORDER BY seq", (conv_id,)
        )
        return [_message(r) for r in rows]

    def count_messages(self, conv_id: str) -> int:
        rows = self._read("SELECT count(*) FROM messages WHERE conversation_id = ?", (conv_id,))
        return int(rows[0][0])

    def load_messages_page(
        self, conv_id: str, before_seq: int | None = None, limit: int = 50
    ) -> list[StoredMessage]:
        """Up to `limit` messages just before `before_seq` (None: the latest), oldest first."""
        rows = self._read(
            """SELECT * FROM (SELECT * FROM messages WHERE conversation_id = ? AND seq < ?
                              ORDER BY seq DESC LIMIT ?)
               ORDER BY seq""",
            (conv_id, before_seq if before_seq is not None else 2**62, limit),
        )
        return [
            StoredMessage(
                id=r["id"],
                seq=r["seq"],
                message=_message(r),
                usage=Usage(**json.loads(r["usage"])) if r["usage"] else None,
                created_at=_dt(r["created_at"]),
            )
            for r in rows
        ]

    # ---- branches: edited and regenerated turns ----------------------------------------
    #
    # Messages stay linear (seq 1..n). Forking at index i archives the live tail — messages
    # from i on, the branch points inside it and its markers — as one branch at i; switching
    # archives the live tail and puts an archived one back. Indices stay absolute: every
    # branch at i shares the same first i messages.

    def fork_messages(
        self, conv_id: str, index: int, *, take_markers_at_index: bool = False
    ) -> bool:
        """Archive `messages[index:]` as a branch at `index` and remove it from the live
        history; the next message stored starts the new (current, last) branch. False when
        there is nothing after `index`. `take_markers_at_index` also moves markers sitting
        right before `messages[index]` (a regenerate: they belong to the earlier answer).
        Raises ConversationBusyError while another run writes to the conversation."""
        with self._write() as db:
            return self._fork(db, conv_id, index, take_markers_at_index)

    def fork_and_append(self, conv_id: str, index: int, message: ChatMessage) -> None:
        """An edit, in one transaction: archive `messages[index:]` as a branch and store
        `message` as the first of the new one (never one without the other). Raises
        ConversationBusyError while another run writes to the conversation."""
        with self._write() as db:
            self._fork(db, conv_id, index, False)
            self._insert_message(db, conv_id, message, None)

    def _fork(
        self, db: sqlite3.Connection, conv_id: str, index: int, take_markers_at_index: bool
    ) -> bool:
        count = self._live_count(db, conv_id)
        if not 0 <= index <= count:
            raise ValueError(f"no message {index} in a conversation of {count}")
        self._refuse_if_busy(db, conv_id)
        if index == count:
            return False
        live = _live_branch_no(self._branch_numbers(db, conv_id, index))
        tail = self._take_tail(db, conv_id, index, markers_at_index=take_markers_at_index)
        self._archive(db, conv_id, index, live, tail)
        db.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (self._clock(), conv_id))
        return True

    def list_branches(self, conv_id: str) -> list[BranchInfo]:
        """Every branch point of the live history, in order. The live tail is one of the
        branches (`current`); numbers are 1-based and stable."""
        rows = self._read(
            "SELECT at_index, branch_no FROM message_branches WHERE conversation_id = ?"
            " ORDER BY at_index, branch_no",
            (conv_id,),
        )
        numbers: dict[int, list[int]] = {}
        for r in rows:
            numbers.setdefault(r["at_index"], []).append(r["branch_no"])
        return [
            BranchInfo(index, _live_branch_no(nums), len(nums) + 1)
            for index, nums in numbers.items()
        ]

    def switch_branch(self, conv_id: str, index: int, branch: int) -> bool:
        """Show branch `branch` (1-based) at `index`: the live tail is archived under its own
        number and the chosen one restored exactly. False when it is already shown.
        Raises ConversationBusyError while another run writes to the conversation."""
        with self._write() as db:
            self._refuse_if_busy(db, conv_id)
            numbers = self._branch_numbers(db, conv_id, index)
            if not numbers or not 1 <= branch <= len(numbers) + 1:
                raise ValueError(f"no branch {branch} at message {index}")
            live = _live_branch_no(numbers)
            if branch == live:
                return False
            row = db.execute(
                "SELECT id, tail_json FROM message_branches"
                " WHERE conversation_id = ? AND at_index = ? AND branch_no = ?",
                (conv_id, index, branch),
            ).fetchone()
            tail = self._take_tail(db, conv_id, index, markers_at_index=False)
            self._archive(db, conv_id, index, live, tail)
            db.execute("DELETE FROM message_branches WHERE id = ?", (row["id"],))
            self._put_tail(db, conv_id, index, json.loads(row["tail_json"]))
        return True

    def _live_count(self, db: sqlite3.Connection, conv_id: str) -> int:
        if db.execute("SELECT 1 FROM conversations WHERE id = ?", (conv_id,)).fetchone() is None:
            raise NotFoundError(f"no conversation {conv_id}")
        row = db.execute(
            "SELECT count(*) FROM messages WHERE conversation_id = ?", (conv_id,)
        ).fetchone()
        return int(row[0])

    def _branch_numbers(self, db: sqlite3.Connection, conv_id: str, index: int) -> list[int]:
        rows = db.execute(
            "SELECT branch_no FROM message_branches WHERE conversation_id = ? AND at_index = ?",
            (conv_id, index),
        ).fetchall()
        return [r[0] for r in rows]

    def _archive(
        self, db: sqlite3.Connection, conv_id: str, index: int, number: int, tail: dict[str, Any]
    ) -> None:
        db.execute(
            "INSERT INTO message_branches"
            " (conversation_id, at_index, branch_no, tail_json, created_at) VALUES (?,?,?,?,?)",
            (conv_id, index, number, json.dumps(tail), self._clock()),
        )

    def _take_tail(
        self, db: sqlite3.Connection, conv_id: str, index: int, *, markers_at_index: bool
    ) -> dict[str, Any]:
        """Remove and return everything of the live history from `index` on: messages (every
        column but the id), branch points after `index` (they belong to this tail) and
        markers after it (and at it when they open this branch, or when asked)."""
        messages = db.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND seq > ?"
            " ORDER BY seq",
            (conv_id, index),
        ).fetchall()
        branches = db.execute(
            "SELECT at_index, branch_no, tail_json, created_at FROM message_branches"
            " WHERE conversation_id = ? AND at_index > ? ORDER BY at_index, branch_no",
            (conv_id, index),
        ).fetchall()
        marker_where = (
            "conversation_id = ? AND (after_count > ? OR (after_count = ? AND"
            " (branch_start = 1 OR ?)))"
        )
        marker_params = (conv_id, index, index, int(markers_at_index))
        markers = db.execute(
            "SELECT after_count, kind, text, branch_start, created_at FROM conversation_markers"
            f" WHERE {marker_where} ORDER BY id",
            marker_params,
        ).fetchall()
        db.execute("DELETE FROM messages WHERE conversation_id = ? AND seq > ?", (conv_id, index))
        db.execute(
            "DELETE FROM message_branches WHERE conversation_id = ? AND at_index > ?",
            (conv_id, index),
        )
        db.execute(f"DELETE FROM conversation_markers WHERE {marker_where}", marker_params)
        return {
            "messages": [dict(r) for r in messages],
            "branches": [dict(r) for r in branches],
            "markers": [dict(r) for r in markers],
        }

    def _put_tail(
        self, db: sqlite3.Connection, conv_id: str, index: int, tail: dict[str, Any]
    ) -> None:
        """Restore an archived tail after the first `index` live messages."""
        for offset, msg in enumerate(tail["messages"], start=1):
            values = {**msg, "seq": index + offset, "conversation_id": conv_id}
            names = ", ".join(values)
            marks = ", ".join("?" for _ in values)
            db.execute(f"INSERT INTO messages ({names}) VALUES ({marks})", tuple(values.values()))
        for b in tail["branches"]:
            db.execute(
                "INSERT INTO message_branches"
                " (conversation_id, at_index, branch_no, tail_json, created_at)"
                " VALUES (?,?,?,?,?)",
                (conv_id, b["at_index"], b["branch_no"], b["tail_json"], b["created_at"]),
            )
        for m in tail["markers"]:
            opens = m["branch_start"] or m["after_count"] == index
            db.execute(
                "INSERT INTO conversation_markers"
                " (conversation_id, after_count, kind, text, branch_start, created_at)"
                " VALUES (?,?,?,?,?,?)",
                (conv_id, m["after_count"], m["kind"], m["text"], int(opens), m["created_at"]),
            )

    # ---- leases: the runs writing to a conversation ---------------------------------------

    def take_lease(self, conv_id: str, owner: str) -> None:
        """Run `owner` (unique per run) writes to the conversation from now on; taking it
        again renews it. Released with `release_lease`; a lease whose process is gone or
        that was not renewed for LEASE_STALE_SECONDS no longer counts."""
        with self._write() as db:
            db.execute(
                "INSERT INTO conversation_leases (conversation_id, owner, pid, heartbeat)"
                " VALUES (?,?,?,?) ON CONFLICT (conversation_id, owner)"
                " DO UPDATE SET heartbeat = excluded.heartbeat",
                (conv_id, owner, os.getpid(), self._clock()),
            )

    def renew_lease(self, conv_id: str, owner: str) -> None:
        """The run is still going (cheap: one small update)."""
        with self._write() as db:
            db.execute(
                "UPDATE conversation_leases SET heartbeat = ?"
                " WHERE conversation_id = ? AND owner = ?",
                (self._clock(), conv_id, owner),
            )

    def release_lease(self, conv_id: str, owner: str) -> None:
        with self._write() as db:
            db.execute(
                "DELETE FROM conversation_leases WHERE conversation_id = ? AND owner = ?",
                (conv_id, owner),
            )

    def conversation_busy(self, conv_id: str) -> bool:
        """True while a run (here or in another process) holds a live lease on it."""
        with self._lock:
            return bool(self._live_leases(self._conn, conv_id))

    def _live_leases(self, db: sqlite3.Connection, conv_id: str) -> list[str]:
        rows = db.execute(
            "SELECT owner, pid, heartbeat FROM conversation_leases WHERE conversation_id = ?",
            (conv_id,),
        ).fetchall()
        oldest = self._clock() - LEASE_STALE_SECONDS
        return [r["owner"] for r in rows if r["heartbeat"] >= oldest and _pid_alive(r["pid"])]

    def _refuse_if_busy(self, db: sqlite3.Connection, conv_id: str) -> None:
        if self._live_leases(db, conv_id):
            raise ConversationBusyError(conv_id)

    # ---- markers: where a turn failed or was stopped ------------------------------------

    def add_marker(self, conv_id: str, after: int, kind: MarkerKind, text: str) -> None:
        """A marker after the first `after` messages. One that follows the last message
        of a branch point whose live branch is still empty belongs to that branch."""
        with self._write() as db:
            count = self._live_count(db, conv_id)
            opens = after == count and bool(self._branch_numbers(db, conv_id, after))
            db.execute(
                "INSERT INTO conversation_markers"
                " (conversation_id, after_count, kind, text, branch_start, created_at)"
                " VALUES (?,?,?,?,?,?)",
                (conv_id, after, kind, text, int(opens), self._clock()),
            )

    def list_markers(self, conv_id: str) -> list[Marker]:
        rows = self._read(
            "SELECT after_count, kind, text FROM conversation_markers"
            " WHERE conversation_id = ? ORDER BY after_count, id",
            (conv_id,),
        )
        return [Marker(r["after_count"], r["kind"], r["text"]) for r in rows]

    # ---- the model a conversation talks to ----------------------------------------------

    def set_conversation_model(self, conv_id: str, account_id: str | None, model: str) -> None:
        """Remember the provider account (None: whichever is active) and model chosen."""
        self._update_conversation(conv_id, "provider_account = ?, model = ?", (account_id, model))

    def clear_conversation_model(self, conv_id: str) -> None:
        self._update_conversation(conv_id, "provider_account = NULL, model = NULL", ())

    def conversation_model(self, conv_id: str) -> tuple[str | None, str] | None:
        """(account id or None, model) chosen for the conversation; None if nothing was."""
        rows = self._read(
            "SELECT provider_account, model FROM conversations WHERE id = ?", (conv_id,)
        )
        if not rows:
            raise NotFoundError(f"no conversation {conv_id}")
        if rows[0]["model"] is None:
            return None
        return rows[0]["provider_account"], rows[0]["model"]

    # ---- tool calls and approvals ---------------------------------------------------

    def record_tool_call_started(
        self,
        conv_id: str,
        call_id: str,
        name: str,
        arguments: str,
        *,
        status: ToolCallStatus = "running",
    ) -> int:
        """Record a call the model made ("pending" while awaiting approval); returns its row id.

        Some local models reuse call ids, so updates target the newest unfinished row.
        """
        with self._write() as db:
            cur = db.execute(
                """INSERT INTO tool_calls (call_id, conversation_id, name, arguments, status,
                                           started_at) VALUES (?,?,?,?,?,?)""",
                (call_id, conv_id, name, arguments, status, self._clock()),
            )
            return cast(int, cur.lastrowid)

    def mark_tool_call_running(self, call_id: str, *, conversation_id: str | None = None) -> None:
        """An approved pending call starts running."""
        self._update_tool_call(call_id, conversation_id, "status = 'running'", ())

    def record_tool_call_finished(
        self,
        call_id: str,
        status: ToolCallStatus,
        content: str | None = None,
        data: Any = None,
        error: str | None = None,
        *,
        conversation_id: str | None = None,
    ) -> None:
        """Store the outcome (ok/error/denied/cancelled) of the newest unfinished call with
        this id (within `conversation_id` when given). `data` should be JSON-able; anything
        else is stored as its str()."""
        self._update_tool_call(
            call_id,
            conversation_id,
            "status = ?, content = ?, data = ?, error = ?, finished_at = ?",
            (
                status,
                content,
                json.dumps(data, default=str) if data is not None else None,
                error,
                self._clock(),
            ),
        )

    def _update_tool_call(
        self,
        call_id: str,
        conv_id: str | None,
        assignment: str,
        params: tuple[Any, ...],
    ) -> None:
        with self._write() as db:
            row = db.execute(
                """SELECT id FROM tool_calls
                   WHERE call_id = ? AND (? IS NULL OR conversation_id = ?)
                   ORDER BY finished_at IS NULL DESC, id DESC LIMIT 1""",
                (call_id, conv_id, conv_id),
            ).fetchone()
            if row is None:
                raise NotFoundError(f"no tool call {call_id!r} was recorded")
            db.execute(f"UPDATE tool_calls SET {assignment} WHERE id = ?", (*params, row[0]))

    def list_tool_calls(self, conv_id: str) -> list[ToolCallRecord]:
        rows = self._read(
            "SELECT * FROM tool_calls WHERE conversation_id = ? ORDER BY id", (conv_id,)
        )
        return [
            ToolCallRecord(
                id=r["id"],
                call_id=r["call_id"],
                conversation_id=r["conversation_id"],
                name=r["name"],
                arguments=r["arguments"],
                status=r["status"],
                content=r["content"],
                data=json.loads(r["data"]) if r["data"] is not None else None,
                error=r["error"],
                started_at=_dt(r["started_at"]),
                finished_at=_dt(r["finished_at"]) if r["finished_at"] is not None else None,
            )
            for r in rows
        ]

    def record_approval(
        self,
        conv_id: str | None,
        call_id: str | None,
        tool_name: str,
        decision: ApprovalDecision,
        how: str = "user",
    ) -> int:
        """Remember an approval decision (conversation/call are None for one-off CLI calls)."""
        with self._write() as db:
            cur = db.execute(
                """INSERT INTO approvals
                       (conversation_id, call_id, tool_name, decision, how, decided_at)
                   VALUES (?,?,?,?,?,?)""",
                (conv_id, call_id, tool_name, decision, how, self._clock()),
            )
            return cast(int, cur.lastrowid)

    def list_approvals(self, conv_id: str) -> list[ApprovalRecord]:
        rows = self._read(
            "SELECT * FROM approvals WHERE conversation_id = ? ORDER BY id", (conv_id,)
        )
        return [
            ApprovalRecord(
                id=r["id"],
                conversation_id=r["conversation_id"],
                call_id=r["call_id"],
                tool_name=r["tool_name"],
                decision=r["decision"],
                decided_at=_dt(r["decided_at"]),
                how=r["how"],
            )
            for r in rows
        ]

    # ---- search ---------------------------------------------------------------------

    def search(self, query: str, limit: int = 50) -> list[SearchHit]:
        """Full-text search over messages of conversations that are not deleted.

        Every word the user typed must occur (the last one as a prefix, for search as you
        type). Any text is safe: words are quoted, FTS5 syntax has no effect.
        """
        match = fts_query(query)
        if match is None:
            return []
        rows = self._read(
            """SELECT m.conversation_id, c.title, m.id, m.role,
                      snippet(messages_fts, 0, ?, ?, '…', 12) AS snippet,
                      snippet(messages_fts, 0, '', '', '…', 12) AS plain
               FROM messages_fts
               JOIN messages m ON m.id = messages_fts.rowid
               JOIN conversations c ON c.id = m.conversation_id
               WHERE messages_fts MATCH ? AND c.deleted_at IS NULL
               ORDER BY rank, m.id DESC LIMIT ?""",
            (HIGHLIGHT_START, HIGHLIGHT_END, match, limit),
        )
        return [
            SearchHit(
                conversation_id=r[0],
                conversation_title=r[1],
                message_id=r[2],
                role=r[3],
                snippet=_clean_snippet(r[4], r[5]),
            )
            for r in rows
        ]


# ---- helpers -------------------------------------------------------------------------


def _clean_snippet(marked: str, plain: str) -> str:
    """`marked` (the snippet with the match markers) without the marker characters that
    came from the message itself. `plain` is the same snippet without markers: walking
    both tells the characters of the text from the markers SQLite added."""
    out: list[str] = []
    j = 0
    for ch in marked:
        if j < len(plain) and ch == plain[j]:
            j += 1
            if ch not in _HIGHLIGHTS:
                out.append(ch)
        else:
            out.append(ch)
    return "".join(out)


def _pid_alive(pid: int) -> bool:
    """Whether process `pid` still runs (a lease of a crashed process is stale)."""
    if pid == os.getpid():
        return True
    if pid <= 0:
        return False
    if os.name == "nt":
        return _windows_pid_alive(pid)
    try:
        os.kill(pid, 0)  # signal 0: only checks (never use this on Windows: it kills)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, someone else's
    except OSError:
        return False
    return True


def _windows_pid_alive(pid: int) -> bool:
    import ctypes

    kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
    handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        return bool(kernel32.GetLastError() == 5)  # ERROR_ACCESS_DENIED: it exists
    try:
        code = ctypes.c_ulong()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return False
        return code.value == 259  # STILL_ACTIVE
    finally:
        kernel32.CloseHandle(handle)


def fts_query(text: str, *, any_word: bool = False) -> str | None:
    """Turn free text into a safe FTS5 MATCH expression, or None if nothing is searchable.

    Each whitespace-separated word becomes a quoted string (quotes doubled), so
    operators (`AND`, `NEAR(`), column filters (`content:`) and stray `"` are literal.
    With `any_word` the words are OR-ed (for ranking by relevance) instead of all required.
    """
    words = [w for w in text.split() if any(ch.isalnum() for ch in w)]
    if not words:
        return None
    quoted = ['"' + w.replace('"', '""') + '"' for w in words]
    if any_word:
        return " OR ".join(dict.fromkeys(quoted))
    quoted[-1] += "*"
    return " ".join(quoted)


def make_title(text: str) -> str:
    """The first non-empty line, whitespace collapsed, at most TITLE_MAX characters."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = re.sub(r"\s+", " ", line).strip()
    if not line:
        return DEFAULT_TITLE
    if len(line) <= TITLE_MAX:
        return line
    cut = line[: TITLE_MAX - 1]
    if " " in cut[TITLE_MAX // 2 :]:  # end on a word boundary when one is near
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip() + "…"


#: Every column of a message but its id: what an archived branch keeps of each message.
_MESSAGE_COLUMNS = "role, content, tool_calls, tool_call_id, is_error, images, usage, created_at"


def _live_branch_no(archived: list[int]) -> int:
    """The live branch's number: the one of 1..len(archived) + 1 no archived branch has."""
    taken = set(archived)
    return next(n for n in range(1, len(archived) + 2) if n not in taken)


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _conversation(r: sqlite3.Row) -> Conversation:
    return Conversation(
        id=r["id"],
        title=r["title"],
        created_at=_dt(r["created_at"]),
        updated_at=_dt(r["updated_at"]),
        deleted_at=_dt(r["deleted_at"]) if r["deleted_at"] is not None else None,
        message_count=r["message_count"],
    )


def _message(r: sqlite3.Row) -> ChatMessage:
    calls = json.loads(r["tool_calls"]) if r["tool_calls"] else []
    return ChatMessage(
        role=r["role"],
        content=r["content"],
        tool_calls=[ToolCallRequest(c["id"], c["name"], c["arguments"]) for c in calls],
        tool_call_id=r["tool_call_id"],
        is_error=bool(r["is_error"]),
        images=json.loads(r["images"]) if r["images"] else [],
    )


def _open(path: Path) -> sqlite3.Connection:
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
        _migrate(conn, path)
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


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    known = len(MIGRATIONS)
    while True:
        # Each step is one transaction that re-reads the version under the write lock,
        # so two processes opening a fresh file cannot both apply the same migration.
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > known:
                raise StoreError(
                    f"{path} was written by a newer Deskhand (schema version {version}; this "
                    f"version understands up to {known}). Update Deskhand to open it."
                )
            if version == known:
                conn.execute("COMMIT")
                return
            try:
                for statement in _statements(MIGRATIONS[version]):
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
