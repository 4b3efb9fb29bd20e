"""Conversations and their live messages: create, rename, soft delete, list, title, the
private flag and the model each talks to; append (one commit per message), load and page.

A child conversation is a sub-agent's run, linked to the conversation that delegated it
(`parent_id`, `agent`): left out of lists unless asked for, private when its parent is,
and deleted, restored and purged with its parent."""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from app.core.providers.base import ChatMessage, ToolCallRequest, Usage
from app.core.store.database import (
    Database,
    NotFoundError,
    SqlValue,
    assignments,
    checked_columns,
    utc,
)
from tools.redact import TRIPWIRE

DEFAULT_TITLE = "New chat"
TITLE_MAX = 60

#: The columns of `conversations` that methods here change (never a caller's string).
_SETTABLE = frozenset({"title", "provider_account", "model"})


@dataclass(frozen=True)
class ConversationRow:
    """A stored conversation as listed (its messages are not loaded); the live state of an
    open conversation is `app.core.agent.Conversation`."""

    id: str
    title: str
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    message_count: int
    #: The conversation that delegated this one to a sub-agent (None: an ordinary one).
    parent_id: str | None = None
    #: That sub-agent's name, e.g. "Researcher" (None for an ordinary conversation).
    agent: str | None = None


@dataclass(frozen=True)
class StoredMessage:
    """A message with its storage identity, for paging through long conversations."""

    id: int
    seq: int
    message: ChatMessage
    usage: Usage | None
    created_at: datetime


class Conversations(Database):
    """The `conversations` and `messages` tables."""

    # ---- conversations --------------------------------------------------------------

    def create_conversation(
        self, title: str = DEFAULT_TITLE, *, parent_id: str | None = None, agent: str | None = None
    ) -> str:
        """A new conversation; with `parent_id`, a sub-agent's run under that conversation
        (private when the parent is, so nothing the child reads is remembered either)."""
        conv_id = str(uuid.uuid4())
        now = self._clock()
        # Only the columns set are named, so an ordinary conversation is written the same
        # way under every schema version (tests build histories at older ones).
        values: dict[str, SqlValue] = {
            "id": conv_id,
            "title": title,
            "created_at": now,
            "updated_at": now,
        }
        if agent is not None:
            values["agent"] = agent
        with self._write() as db:
            if parent_id is not None:
                parent = db.execute(
                    "SELECT private FROM conversations WHERE id = ?", (parent_id,)
                ).fetchone()
                if parent is None:
                    raise NotFoundError(f"no conversation {parent_id} to be the parent")
                values |= {"parent_id": parent_id, "private": parent[0]}
            db.execute(
                f"INSERT INTO conversations ({', '.join(values)}) "
                f"VALUES ({', '.join('?' * len(values))})",
                tuple(values.values()),
            )
        return conv_id

    def rename_conversation(self, conv_id: str, title: str) -> None:
        self._update_conversation(conv_id, title=title)

    def delete_conversation(self, conv_id: str) -> None:
        """Soft delete: hidden from lists and search until restored or purged. Its children
        are deleted with it, at the same moment (that is how a restore knows them)."""
        self._set_deleted(conv_id, self._clock())

    def restore_conversation(self, conv_id: str) -> None:
        """Undo a soft delete, with the children deleted with it (not ones deleted before)."""
        self._set_deleted(conv_id, None)

    def _set_deleted(self, conv_id: str, stamp: float | None) -> None:
        """Set `deleted_at` of the conversation and of its children that share its current
        one (NULL: the live ones), so they stay deleted and restored together."""
        with self._write() as db:
            row = db.execute(
                "SELECT deleted_at FROM conversations WHERE id = ?", (conv_id,)
            ).fetchone()
            if row is None:
                raise NotFoundError(f"no conversation {conv_id}")
            db.execute(
                "UPDATE conversations SET deleted_at = ? WHERE id = ? OR "
                "(parent_id = ? AND deleted_at IS ?)",
                (stamp, conv_id, conv_id, row[0]),
            )

    def purge_deleted(self, older_than: timedelta) -> int:
        """Permanently remove conversations soft-deleted more than `older_than` ago, with
        their children (deleted with the parent, they are as old; the schema cascades to any
        other). Returns how many conversations went, children included."""
        cutoff = self._clock() - older_than.total_seconds()
        count = "SELECT count(*) FROM conversations"
        with self._write() as db:
            before = int(db.execute(count).fetchone()[0])
            db.execute(
                "DELETE FROM conversations WHERE deleted_at IS NOT NULL AND deleted_at <= ?",
                (cutoff,),
            )
            return before - int(db.execute(count).fetchone()[0])

    def list_conversations(
        self,
        limit: int = 100,
        offset: int = 0,
        include_deleted: bool = False,
        *,
        include_children: bool = False,
    ) -> list[ConversationRow]:
        """Most recently active first; sub-agents' runs only with `include_children` (the
        chat list must not fill up with them)."""
        conditions = [] if include_deleted else ["c.deleted_at IS NULL"]
        if not include_children:
            conditions.append("c.parent_id IS NULL")
        where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
        rows = self._read(
            f"""SELECT c.*, (SELECT count(*) FROM messages m WHERE m.conversation_id = c.id)
                       AS message_count
                FROM conversations c {where}
                ORDER BY c.updated_at DESC, c.rowid DESC LIMIT ? OFFSET ?""",
            (limit, offset),
        )
        return [_conversation(r) for r in rows]

    def child_conversations(self, parent_id: str) -> list[ConversationRow]:
        """The sub-agent runs of a conversation that are not deleted, oldest first."""
        rows = self._read(
            """SELECT c.*, (SELECT count(*) FROM messages m WHERE m.conversation_id = c.id)
                      AS message_count
               FROM conversations c WHERE c.parent_id = ? AND c.deleted_at IS NULL
               ORDER BY c.created_at, c.rowid""",
            (parent_id,),
        )
        return [_conversation(r) for r in rows]

    def get_conversation(self, conv_id: str) -> ConversationRow | None:
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

    # ---- privacy ----------------------------------------------------------------------

    def set_private(self, conv_id: str, private: bool) -> None:
        """A private conversation is never a source of memories; its sub-agents' runs
        follow it."""
        with self._write() as db:
            cur = db.execute(
                "UPDATE conversations SET private = ? WHERE id = ? OR parent_id = ?",
                (int(private), conv_id, conv_id),
            )
            if cur.rowcount == 0:
                raise NotFoundError(f"no conversation {conv_id}")

    def is_private(self, conv_id: str) -> bool:
        rows = self._read("SELECT private FROM conversations WHERE id = ?", (conv_id,))
        if not rows:
            raise NotFoundError(f"no conversation {conv_id}")
        return bool(rows[0][0])

    # ---- the model a conversation talks to ----------------------------------------------

    def set_conversation_model(self, conv_id: str, account_id: str | None, model: str) -> None:
        """Remember the provider account (None: whichever is active) and model chosen."""
        self._update_conversation(conv_id, provider_account=account_id, model=model)

    def clear_conversation_model(self, conv_id: str) -> None:
        self._update_conversation(conv_id, provider_account=None, model=None)

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

    def _update_conversation(self, conv_id: str, **changes: SqlValue) -> None:
        names = checked_columns("conversations", changes, _SETTABLE)
        with self._write() as db:
            cur = db.execute(
                f"UPDATE conversations SET {assignments(names)} WHERE id = ?",
                (*changes.values(), conv_id),
            )
            if cur.rowcount == 0:
                raise NotFoundError(f"no conversation {conv_id}")

    # ---- messages -------------------------------------------------------------------

    def append_message(self, conv_id: str, msg: ChatMessage, usage: Usage | None = None) -> int:
        """Commit one complete message; returns its id. Bumps the conversation's updated_at."""
        with self._write() as db:
            return self._insert_message(db, conv_id, msg, usage)

    def _insert_message(
        self, db: sqlite3.Connection, conv_id: str, msg: ChatMessage, usage: Usage | None
    ) -> int:
        """Store `msg` after the last live message, inside the caller's transaction."""
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
                created_at=utc(r["created_at"]),
            )
            for r in rows
        ]


def make_title(text: str) -> str:
    """The first non-empty line, whitespace collapsed, at most TITLE_MAX characters — of
    the text with known secrets masked first (a cut must not keep part of one), and masked
    again once whitespace is folded (folding must not join a secret back together)."""
    text = TRIPWIRE.text(text)
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = TRIPWIRE.text(re.sub(r"\s+", " ", line).strip())
    if not line:
        return DEFAULT_TITLE
    if len(line) <= TITLE_MAX:
        return line
    cut = line[: TITLE_MAX - 1]
    if " " in cut[TITLE_MAX // 2 :]:  # end on a word boundary when one is near
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip() + "…"


def _conversation(r: sqlite3.Row) -> ConversationRow:
    return ConversationRow(
        id=r["id"],
        title=r["title"],
        created_at=utc(r["created_at"]),
        updated_at=utc(r["updated_at"]),
        deleted_at=utc(r["deleted_at"]) if r["deleted_at"] is not None else None,
        message_count=r["message_count"],
        parent_id=r["parent_id"],
        agent=r["agent"],
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
