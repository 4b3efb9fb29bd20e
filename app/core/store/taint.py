"""What a conversation has read that outlives the process: private data of the user and
untrusted content (app.core.untrusted decides what counts; the call pipeline records it).

Each row names the tool call whose result brought it. A row counts while that result is in
the conversation's live history: compaction never removes a message from it (a summary is
written from what it covers, so the taint stays), an edit or regenerate that archives the
result as a branch stops it counting, and switching back to that branch brings it back. A
row without a call (a remembered note taken from untrusted content) always counts.
"""

from __future__ import annotations

from typing import Literal

from app.core.store.database import Database

TaintKind = Literal["private", "untrusted"]
_KINDS: frozenset[str] = frozenset({"private", "untrusted"})


class Taints(Database):
    """The `conversation_taint` table (read against the live `messages`)."""

    def add_taint(
        self, conv_id: str, kind: TaintKind, what: str, call_id: str | None = None
    ) -> None:
        """Record that `conv_id` read `what` (once per conversation, kind, text and call)."""
        if kind not in _KINDS:
            raise ValueError(f"unknown taint kind {kind!r}")
        with self._write() as db:
            db.execute(
                "INSERT INTO conversation_taint (conversation_id, kind, what, call_id, created_at)"
                " SELECT ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM conversation_taint"
                " WHERE conversation_id = ? AND kind = ? AND what = ? AND call_id IS ?)",
                (conv_id, kind, what, call_id, self._clock(), conv_id, kind, what, call_id),
            )

    def conversation_taint(self, conv_id: str) -> list[tuple[TaintKind, str]]:
        """(kind, what) of every row that counts now (see the module docstring), oldest
        first."""
        rows = self._read(
            "SELECT t.kind, t.what FROM conversation_taint t WHERE t.conversation_id = ?"
            " AND (t.call_id IS NULL OR EXISTS (SELECT 1 FROM messages m"
            " WHERE m.conversation_id = t.conversation_id AND m.tool_call_id = t.call_id))"
            " ORDER BY t.id",
            (conv_id,),
        )
        return [(row["kind"], row["what"]) for row in rows]
