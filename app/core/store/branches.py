"""What a conversation has besides its live messages: branches (edited and regenerated
turns), markers (where a turn failed or was stopped) and the leases of runs writing to it.

Messages stay linear (seq 1..n). Forking at index i archives the live tail — messages
from i on, the branch points inside it and its markers — as one branch at i; switching
archives the live tail and puts an archived one back. Indices stay absolute: every
branch at i shares the same first i messages.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from typing import TypedDict, cast

from app.core.history_marks import BranchInfo, Marker, MarkerKind
from app.core.providers.base import ChatMessage
from app.core.store.conversations import Conversations
from app.core.store.database import NotFoundError, SqlValue, StoreError

#: A run's lease older than this (no message, no heartbeat) is stale: its run is gone.
LEASE_STALE_SECONDS = 600.0

#: Every column of a message but its id: what an archived branch keeps of each message.
_MESSAGE_COLUMNS = (
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "is_error",
    "images",
    "usage",
    "created_at",
)


class ConversationBusyError(StoreError):
    """Another run is writing to the conversation: its history is not rewritten now."""

    def __init__(self, conv_id: str) -> None:
        super().__init__(
            f"conversation {conv_id} is being answered by another run (a scheduled task or "
            "`deskhand ask`); wait until it ends, then try again"
        )
        self.conversation_id = conv_id


class _Tail(TypedDict):
    """An archived branch: its rows as they were in the live history."""

    messages: list[dict[str, SqlValue]]
    branches: list[dict[str, SqlValue]]
    markers: list[dict[str, SqlValue]]


class Branches(Conversations):
    """The `message_branches`, `conversation_markers` and `conversation_leases` tables.
    Built on `Conversations`: an edit forks the history and appends to it in one step."""

    # ---- branches: edited and regenerated turns ----------------------------------------

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
            numbers = _branch_numbers(db, conv_id, index)
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
            tail = _take_tail(db, conv_id, index, markers_at_index=False)
            self._archive(db, conv_id, index, live, tail)
            db.execute("DELETE FROM message_branches WHERE id = ?", (row["id"],))
            _put_tail(db, conv_id, index, cast(_Tail, json.loads(row["tail_json"])))
        return True

    def _fork(
        self, db: sqlite3.Connection, conv_id: str, index: int, take_markers_at_index: bool
    ) -> bool:
        count = _live_count(db, conv_id)
        if not 0 <= index <= count:
            raise ValueError(f"no message {index} in a conversation of {count}")
        self._refuse_if_busy(db, conv_id)
        if index == count:
            return False
        live = _live_branch_no(_branch_numbers(db, conv_id, index))
        tail = _take_tail(db, conv_id, index, markers_at_index=take_markers_at_index)
        self._archive(db, conv_id, index, live, tail)
        db.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (self._clock(), conv_id))
        return True

    def _archive(
        self, db: sqlite3.Connection, conv_id: str, index: int, number: int, tail: _Tail
    ) -> None:
        db.execute(
            "INSERT INTO message_branches"
            " (conversation_id, at_index, branch_no, tail_json, created_at) VALUES (?,?,?,?,?)",
            (conv_id, index, number, json.dumps(tail), self._clock()),
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
            count = _live_count(db, conv_id)
            opens = after == count and bool(_branch_numbers(db, conv_id, after))
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


def _live_count(db: sqlite3.Connection, conv_id: str) -> int:
    if db.execute("SELECT 1 FROM conversations WHERE id = ?", (conv_id,)).fetchone() is None:
        raise NotFoundError(f"no conversation {conv_id}")
    row = db.execute("SELECT count(*) FROM messages WHERE conversation_id = ?", (conv_id,))
    return int(row.fetchone()[0])


def _branch_numbers(db: sqlite3.Connection, conv_id: str, index: int) -> list[int]:
    rows = db.execute(
        "SELECT branch_no FROM message_branches WHERE conversation_id = ? AND at_index = ?",
        (conv_id, index),
    ).fetchall()
    return [int(r[0]) for r in rows]


def _live_branch_no(archived: list[int]) -> int:
    """The live branch's number: the one of 1..len(archived) + 1 no archived branch has."""
    taken = set(archived)
    return next(n for n in range(1, len(archived) + 2) if n not in taken)


def _take_tail(
    db: sqlite3.Connection, conv_id: str, index: int, *, markers_at_index: bool
) -> _Tail:
    """Remove and return everything of the live history from `index` on: messages (every
    column but the id), branch points after `index` (they belong to this tail) and
    markers after it (and at it when they open this branch, or when asked)."""
    messages = db.execute(
        f"SELECT {', '.join(_MESSAGE_COLUMNS)} FROM messages"
        " WHERE conversation_id = ? AND seq > ? ORDER BY seq",
        (conv_id, index),
    ).fetchall()
    branches = db.execute(
        "SELECT at_index, branch_no, tail_json, created_at FROM message_branches"
        " WHERE conversation_id = ? AND at_index > ? ORDER BY at_index, branch_no",
        (conv_id, index),
    ).fetchall()
    marker_where = (
        "conversation_id = ? AND (after_count > ? OR (after_count = ? AND (branch_start = 1 OR ?)))"
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


def _put_tail(db: sqlite3.Connection, conv_id: str, index: int, tail: _Tail) -> None:
    """Restore an archived tail after the first `index` live messages. Column names come
    from `_MESSAGE_COLUMNS`, never from the archived JSON."""
    for offset, msg in enumerate(tail["messages"], start=1):
        names = [c for c in _MESSAGE_COLUMNS if c in msg]
        values = [msg[c] for c in names]
        db.execute(
            f"INSERT INTO messages (conversation_id, seq, {', '.join(names)})"
            f" VALUES (?, ?{', ?' * len(names)})",
            (conv_id, index + offset, *values),
        )
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
            (conv_id, m["after_count"], m["kind"], m["text"], int(bool(opens)), m["created_at"]),
        )


def _pid_alive(pid: int) -> bool:
    """Whether process `pid` still runs (a lease of a crashed process is stale)."""
    if pid == os.getpid():
        return True
    if pid <= 0:
        return False
    if sys.platform == "win32":
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
    if sys.platform != "win32":  # lets type checkers on other systems skip the Windows API
        raise OSError("only on Windows")
    import ctypes

    kernel32 = ctypes.windll.kernel32
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
