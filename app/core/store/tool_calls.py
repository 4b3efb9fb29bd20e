"""The record of tool calls the model made and of the approval decisions about them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

from app.core.store.database import (
    Database,
    NotFoundError,
    SqlValue,
    assignments,
    checked_columns,
    utc,
)

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

#: The columns of `tool_calls` that change after a call was recorded.
_SETTABLE = frozenset({"status", "content", "data", "error", "finished_at"})


@dataclass(frozen=True)
class ToolCallRecord:
    id: int
    call_id: str
    conversation_id: str
    name: str
    arguments: str
    status: ToolCallStatus
    content: str | None
    #: The call's structured result as JSON gave it back (None when there was none).
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


class ToolCalls(Database):
    """The `tool_calls` and `approvals` tables."""

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
        self._update_tool_call(call_id, conversation_id, status="running")

    def record_tool_call_finished(
        self,
        call_id: str,
        status: ToolCallStatus,
        content: str | None = None,
        data: object = None,
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
            status=status,
            content=content,
            data=json.dumps(data, default=str) if data is not None else None,
            error=error,
            finished_at=self._clock(),
        )

    def _update_tool_call(self, call_id: str, conv_id: str | None, **changes: SqlValue) -> None:
        names = checked_columns("tool_calls", changes, _SETTABLE)
        with self._write() as db:
            row = db.execute(
                """SELECT id FROM tool_calls
                   WHERE call_id = ? AND (? IS NULL OR conversation_id = ?)
                   ORDER BY finished_at IS NULL DESC, id DESC LIMIT 1""",
                (call_id, conv_id, conv_id),
            ).fetchone()
            if row is None:
                raise NotFoundError(f"no tool call {call_id!r} was recorded")
            db.execute(
                f"UPDATE tool_calls SET {assignments(names)} WHERE id = ?",
                (*changes.values(), row[0]),
            )

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
                started_at=utc(r["started_at"]),
                finished_at=utc(r["finished_at"]) if r["finished_at"] is not None else None,
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
                decided_at=utc(r["decided_at"]),
                how=r["how"],
            )
            for r in rows
        ]
