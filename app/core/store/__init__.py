"""The conversation store: SQLite in WAL mode at `<home>/deskhand.db` (docs/architecture.md §6).

`Store` is composed of one class per aggregate, each in its own module over the shared
`Database` (connection, lock, clock, transactions): conversations and messages, branches
with markers and run leases, search, tool calls and approvals, integration accounts,
reminders, memories, and what each conversation read (taint). No SQL lives here. The API
is synchronous (calls take well under a millisecond on small rows); run bulk work such as
`search` or `purge_deleted` in an executor from the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.store.accounts import AccountRow, Accounts
from app.core.store.branches import LEASE_STALE_SECONDS, Branches, ConversationBusyError
from app.core.store.conversations import (
    DEFAULT_TITLE,
    TITLE_MAX,
    ConversationRow,
    Conversations,
    StoredMessage,
    make_title,
)
from app.core.store.database import MIGRATIONS, Database, NotFoundError, SqlValue, StoreError
from app.core.store.memories import Memories
from app.core.store.reminders import NewReminder, ReminderRow, Reminders
from app.core.store.search import HIGHLIGHT_END, HIGHLIGHT_START, Search, SearchHit, fts_query
from app.core.store.taint import TaintKind, Taints
from app.core.store.tool_calls import (
    ApprovalDecision,
    ApprovalRecord,
    ToolCallRecord,
    ToolCalls,
    ToolCallStatus,
)

__all__ = [
    "DEFAULT_TITLE",
    "HIGHLIGHT_END",
    "HIGHLIGHT_START",
    "LEASE_STALE_SECONDS",
    "MIGRATIONS",
    "TITLE_MAX",
    "AccountRow",
    "ApprovalDecision",
    "ApprovalRecord",
    "ConversationBusyError",
    "ConversationRow",
    "Database",
    "NewReminder",
    "NotFoundError",
    "ReminderRow",
    "SearchHit",
    "SqlValue",
    "Store",
    "StoreError",
    "StoredMessage",
    "TaintKind",
    "ToolCallRecord",
    "ToolCallStatus",
    "fts_query",
    "make_title",
]


class Store(Branches, Conversations, Search, ToolCalls, Accounts, Reminders, Memories, Taints):
    """The SQLite store. Thread-safe; `clock` (epoch seconds) is injectable for tests."""

    def _migrations(self) -> Sequence[str]:
        # Looked up here at open time, so `app.core.store.MIGRATIONS` is the one that counts.
        return MIGRATIONS
