"""Child conversations (a sub-agent's run, linked to the conversation that delegated it):
stored with their parent and agent, kept out of the chat list and search unless asked for,
deleted, restored and purged with their parent, private when it is, and added to existing
databases in place."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.core import store as store_mod
from app.core.paths import db_path
from app.core.providers.base import ChatMessage
from app.core.store import ConversationRow, NotFoundError, Store


class Ticks:
    """A clock that advances one second per reading, so every stamp differs."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture
def clock() -> Ticks:
    return Ticks()


@pytest.fixture
def store(home: Path, clock: Ticks) -> Iterator[Store]:
    with Store(db_path(home), clock=clock) as s:
        yield s


@contextlib.contextmanager
def _raw(path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


def _ids(rows: list[ConversationRow]) -> list[str]:
    return [r.id for r in rows]


# ---- creating and reading ------------------------------------------------------------------


def test_a_child_records_its_parent_and_agent(store: Store) -> None:
    parent = store.create_conversation("Plan the trip")
    child = store.create_conversation("Find trains", parent_id=parent, agent="Researcher")

    got = store.get_conversation(child)
    assert got is not None
    assert (got.title, got.parent_id, got.agent) == ("Find trains", parent, "Researcher")
    ordinary = store.get_conversation(parent)
    assert ordinary is not None and (ordinary.parent_id, ordinary.agent) == (None, None)


def test_a_child_of_an_unknown_conversation_is_refused(store: Store) -> None:
    with pytest.raises(NotFoundError, match="no conversation missing"):
        store.create_conversation("Orphan", parent_id="missing", agent="Researcher")
    assert store.list_conversations(include_deleted=True, include_children=True) == []


def test_a_row_built_without_the_new_fields_is_an_ordinary_conversation() -> None:
    when = datetime(2025, 1, 1, tzinfo=UTC)
    row = ConversationRow("c1", "Title", when, when, None, 0)
    assert (row.parent_id, row.agent) == (None, None)


def test_children_are_listed_oldest_first_without_deleted_ones(store: Store) -> None:
    parent, other = store.create_conversation("Parent"), store.create_conversation("Other")
    first = store.create_conversation("first", parent_id=parent, agent="Researcher")
    gone = store.create_conversation("gone", parent_id=parent, agent="Reviewer")
    second = store.create_conversation("second", parent_id=parent, agent="Reviewer")
    store.create_conversation("elsewhere", parent_id=other, agent="Researcher")
    store.append_message(first, ChatMessage("user", "find the timetable"))
    store.append_message(first, ChatMessage("assistant", "the 8:15 train"))
    store.delete_conversation(gone)

    children = store.child_conversations(parent)
    assert _ids(children) == [first, second]  # created order, though first was active later
    assert [(c.agent, c.message_count) for c in children] == [("Researcher", 2), ("Reviewer", 0)]
    assert store.child_conversations(first) == []
    assert store.child_conversations("missing") == []


# ---- the chat list and search --------------------------------------------------------------


def test_the_chat_list_leaves_children_out_unless_asked(store: Store) -> None:
    parent = store.create_conversation("Parent")
    child = store.create_conversation("Child", parent_id=parent, agent="Researcher")
    store.append_message(child, ChatMessage("user", "newest activity is the child's"))
    alone = store.create_conversation("Alone")

    assert _ids(store.list_conversations()) == [alone, parent]
    assert _ids(store.list_conversations(limit=1)) == [alone]  # the limit counts chats only
    assert _ids(store.list_conversations(include_children=True)) == [alone, child, parent]

    store.delete_conversation(alone)
    assert _ids(store.list_conversations(include_deleted=True)) == [alone, parent]
    assert set(_ids(store.list_conversations(include_deleted=True, include_children=True))) == {
        alone,
        child,
        parent,
    }


def test_search_leaves_children_out_unless_asked(store: Store) -> None:
    parent = store.create_conversation("Parent")
    child = store.create_conversation("Child", parent_id=parent, agent="Researcher")
    store.append_message(parent, ChatMessage("user", "look up the zanzibar ferry"))
    store.append_message(child, ChatMessage("assistant", "the zanzibar ferry leaves at noon"))

    assert [h.conversation_id for h in store.search("zanzibar")] == [parent]
    found = {h.conversation_id for h in store.search("zanzibar", include_children=True)}
    assert found == {parent, child}
    assert [h.conversation_id for h in store.search("noon", include_children=True)] == [child]


# ---- delete, restore, purge ----------------------------------------------------------------


def test_deleting_a_parent_deletes_its_children_and_restoring_brings_them_back(
    store: Store,
) -> None:
    parent = store.create_conversation("Parent")
    a = store.create_conversation("a", parent_id=parent, agent="Researcher")
    b = store.create_conversation("b", parent_id=parent, agent="Reviewer")
    store.append_message(b, ChatMessage("user", "kept while deleted"))

    store.delete_conversation(parent)
    assert store.child_conversations(parent) == []
    for conv in (parent, a, b):
        got = store.get_conversation(conv)
        assert got is not None and got.deleted_at is not None
    assert store.load_messages(b) == [ChatMessage("user", "kept while deleted")]

    store.restore_conversation(parent)
    assert _ids(store.child_conversations(parent)) == [a, b]
    assert _ids(store.list_conversations()) == [parent]


def test_a_child_deleted_on_its_own_stays_deleted_when_the_parent_comes_back(
    store: Store,
) -> None:
    parent = store.create_conversation("Parent")
    early = store.create_conversation("deleted first", parent_id=parent, agent="Researcher")
    later = store.create_conversation("deleted with it", parent_id=parent, agent="Researcher")
    store.delete_conversation(early)
    assert _ids(store.list_conversations()) == [parent]  # deleting a child leaves the parent
    assert _ids(store.child_conversations(parent)) == [later]

    store.delete_conversation(parent)
    store.delete_conversation(parent)  # deleting again keeps the children with it
    store.restore_conversation(parent)
    assert _ids(store.child_conversations(parent)) == [later]
    early_row = store.get_conversation(early)
    assert early_row is not None and early_row.deleted_at is not None


def test_purging_a_parent_removes_its_children_and_their_messages(
    home: Path, store: Store, clock: Ticks
) -> None:
    parent, kept = store.create_conversation("Parent"), store.create_conversation("Kept")
    child = store.create_conversation("Child", parent_id=parent, agent="Researcher")
    kept_child = store.create_conversation("Kept child", parent_id=kept, agent="Researcher")
    for conv in (parent, child, kept, kept_child):
        store.append_message(conv, ChatMessage("user", "purgeable words"))
        store.record_tool_call_started(conv, f"call-{conv}", "fs_read_file", "{}")
    store.delete_conversation(parent)
    clock.now += timedelta(days=10).total_seconds()

    assert store.purge_deleted(timedelta(days=5)) == 2  # the parent and its child
    assert store.get_conversation(parent) is None and store.get_conversation(child) is None
    assert store.load_messages(child) == [] and store.list_tool_calls(child) == []
    assert _ids(store.child_conversations(kept)) == [kept_child]
    with _raw(db_path(home)) as raw:
        assert raw.execute("SELECT count(*) FROM messages").fetchone()[0] == 2
        raw.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")


def test_a_child_started_after_its_parent_was_deleted_is_purged_with_it(
    store: Store, clock: Ticks
) -> None:
    parent = store.create_conversation("Parent")
    store.delete_conversation(parent)
    late = store.create_conversation("Late", parent_id=parent, agent="Researcher")
    store.append_message(late, ChatMessage("assistant", "finished after the delete"))
    clock.now += timedelta(days=1).total_seconds()

    assert store.purge_deleted(timedelta(0)) == 2  # the child was never deleted itself
    assert store.get_conversation(late) is None
    assert store.load_messages(late) == []


# ---- privacy -------------------------------------------------------------------------------


def test_children_of_a_private_conversation_are_private(store: Store) -> None:
    parent = store.create_conversation("Parent")
    before = store.create_conversation("before", parent_id=parent, agent="Researcher")
    store.set_private(parent, True)
    after = store.create_conversation("after", parent_id=parent, agent="Researcher")
    other = store.create_conversation("Other")

    assert [store.is_private(c) for c in (parent, before, after, other)] == [
        True,
        True,
        True,
        False,
    ]
    store.set_private(parent, False)
    assert [store.is_private(c) for c in (parent, before, after)] == [False, False, False]
    with pytest.raises(NotFoundError):
        store.set_private("missing", True)


# ---- the schema upgrade --------------------------------------------------------------------


def test_a_database_of_the_previous_version_gains_the_columns_and_keeps_its_data(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = db_path(home)
    previous = 9  # the version before the child columns (_V10)
    monkeypatch.setattr(store_mod, "MIGRATIONS", store_mod.MIGRATIONS[:previous])
    Store(path).close()
    old = "old-conversation"
    with _raw(path) as raw:  # a row as the previous version wrote it
        raw.execute(
            "INSERT INTO conversations (id, title, created_at, updated_at, private)"
            " VALUES (?, 'Written before children existed', 1.0, 1.0, 1)",
            (old,),
        )
    with Store(path) as s:
        s.append_message(old, ChatMessage("user", "an old message"))
    with _raw(path) as raw:
        columns = {r[1] for r in raw.execute("PRAGMA table_info(conversations)")}
        assert raw.execute("PRAGMA user_version").fetchone()[0] == previous
    assert not {"parent_id", "agent"} & columns
    monkeypatch.undo()

    with Store(path) as s:
        row = s.get_conversation(old)
        assert row is not None and row.title == "Written before children existed"
        assert (row.parent_id, row.agent, row.message_count) == (None, None, 1)
        assert s.load_messages(old) == [ChatMessage("user", "an old message")]
        assert s.is_private(old)
        child = s.create_conversation("New", parent_id=old, agent="Researcher")
        assert _ids(s.child_conversations(old)) == [child]
        assert _ids(s.list_conversations()) == [old]
    with _raw(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == len(store_mod.MIGRATIONS)
        indexes = {r[1] for r in raw.execute("PRAGMA index_list(conversations)")}
        assert raw.execute("PRAGMA foreign_key_check").fetchall() == []
    assert "conversations_by_parent" in indexes
