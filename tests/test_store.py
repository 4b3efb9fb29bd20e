"""The SQLite conversation store: round trips, ordering, soft delete, search,
migrations, refusal of foreign/newer files, and durability across SIGKILL."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from app.core import store as store_mod
from app.core.paths import db_path
from app.core.providers.base import ChatMessage, ToolCallRequest, Usage
from app.core.store import (
    HIGHLIGHT_END,
    HIGHLIGHT_START,
    NotFoundError,
    Store,
    StoreError,
    fts_query,
    make_title,
)

REPO = Path(__file__).resolve().parents[1]
PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


class Clock:
    """A controllable clock: every reading advances one second, so order is deterministic."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(home: Path, clock: Clock) -> Iterator[Store]:
    s = Store(db_path(home), clock=clock)
    yield s
    s.close()


@contextlib.contextmanager
def _raw(path: Path) -> Iterator[sqlite3.Connection]:
    """A second, independent connection (autocommit), closed afterwards."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


def _all_kinds() -> list[ChatMessage]:
    return [
        ChatMessage("system", "You are Deskhand."),
        ChatMessage("user", "What's in this picture? 🖼️\nSecond line", images=[PNG, PNG]),
        ChatMessage(
            "assistant",
            "Let me look.",
            tool_calls=[
                ToolCallRequest("call_1", "fs_list_dir", '{"path": "~/Pictures"}'),
                ToolCallRequest("call_2", "docker_list_containers", "{}"),
            ],
        ),
        ChatMessage("tool", '["a.png", "b.png"]', tool_call_id="call_1"),
        ChatMessage("tool", "Docker is not running", tool_call_id="call_2", is_error=True),
        ChatMessage(
            "assistant", "", tool_calls=[ToolCallRequest("c3", "x", '{"q": "\\"quoted\\""}')]
        ),
        ChatMessage("tool", "", tool_call_id="c3"),
        ChatMessage("assistant", "Done — two images, ünïcödé and all."),
    ]


# ---- messages ----------------------------------------------------------------------------


def test_round_trip_of_every_message_kind(home: Path, store: Store) -> None:
    conv = store.create_conversation()
    messages = _all_kinds()
    ids = [store.append_message(conv, m) for m in messages]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert store.load_messages(conv) == messages
    store.close()

    with Store(db_path(home)) as reopened:
        assert reopened.load_messages(conv) == messages
        assert reopened.count_messages(conv) == len(messages)


def test_usage_is_kept_per_message(store: Store) -> None:
    conv = store.create_conversation()
    store.append_message(conv, ChatMessage("user", "hi"))
    store.append_message(conv, ChatMessage("assistant", "hello"), Usage(12, 34))
    page = store.load_messages_page(conv)
    assert [m.usage for m in page] == [None, Usage(12, 34)]
    assert [m.seq for m in page] == [1, 2]


def test_messages_stay_in_order_per_conversation(store: Store) -> None:
    a, b = store.create_conversation(), store.create_conversation()
    for i in range(10):
        store.append_message(a, ChatMessage("user", f"a{i}"))
        store.append_message(b, ChatMessage("user", f"b{i}"))
    assert [m.content for m in store.load_messages(a)] == [f"a{i}" for i in range(10)]
    assert [m.content for m in store.load_messages(b)] == [f"b{i}" for i in range(10)]
    assert store.count_messages(a) == 10


def test_concurrent_appends_get_distinct_consecutive_seqs(store: Store) -> None:
    conv = store.create_conversation()

    def writer(n: int) -> None:
        for i in range(25):
            store.append_message(conv, ChatMessage("user", f"{n}-{i}"))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    page = store.load_messages_page(conv, limit=1000)
    assert [m.seq for m in page] == list(range(1, 101))
    for n in range(4):  # each thread's own messages kept their order
        mine = [m.message.content for m in page if m.message.content.startswith(f"{n}-")]
        assert mine == [f"{n}-{i}" for i in range(25)]


def test_paging_through_a_long_conversation(store: Store) -> None:
    conv = store.create_conversation()
    for i in range(120):
        store.append_message(conv, ChatMessage("user" if i % 2 else "assistant", f"m{i}"))
    pages = []
    before = None
    while page := store.load_messages_page(conv, before_seq=before, limit=50):
        pages.append(page)
        before = page[0].seq
    assert [len(p) for p in pages] == [50, 50, 20]
    assert [m.seq for m in pages[0]] == list(range(71, 121))  # the latest, oldest first
    flat = [m.message for p in reversed(pages) for m in p]
    assert flat == store.load_messages(conv)


def test_append_to_unknown_conversation_fails(store: Store) -> None:
    with pytest.raises(NotFoundError):
        store.append_message("nope", ChatMessage("user", "hi"))


# ---- conversations -----------------------------------------------------------------------


def test_list_newest_activity_first_with_counts(store: Store) -> None:
    first = store.create_conversation("first")
    second = store.create_conversation("second")
    third = store.create_conversation("third")
    assert [c.title for c in store.list_conversations()] == ["third", "second", "first"]

    store.append_message(first, ChatMessage("user", "bump"))
    store.append_message(first, ChatMessage("assistant", "ok"))
    listed = store.list_conversations()
    assert [c.id for c in listed] == [first, third, second]
    assert [c.message_count for c in listed] == [2, 0, 0]
    assert listed[0].updated_at > listed[0].created_at

    assert [c.id for c in store.list_conversations(limit=1, offset=1)] == [third]


def test_rename_and_get(store: Store) -> None:
    conv = store.create_conversation()
    got = store.get_conversation(conv)
    assert got is not None and got.title == "New chat" and got.deleted_at is None
    store.rename_conversation(conv, "Trip to Lisbon")
    got = store.get_conversation(conv)
    assert got is not None and got.title == "Trip to Lisbon"
    assert store.get_conversation("missing") is None
    with pytest.raises(NotFoundError):
        store.rename_conversation("missing", "x")


def test_soft_delete_and_restore(store: Store) -> None:
    keep, gone = store.create_conversation("keep"), store.create_conversation("gone")
    store.append_message(gone, ChatMessage("user", "remember the zanzibar plan"))

    store.delete_conversation(gone)
    assert [c.id for c in store.list_conversations()] == [keep]
    assert {c.id for c in store.list_conversations(include_deleted=True)} == {keep, gone}
    deleted = store.get_conversation(gone)
    assert deleted is not None and deleted.deleted_at is not None
    assert store.search("zanzibar") == []
    assert store.load_messages(gone)  # nothing lost: the UI can undo

    store.restore_conversation(gone)
    assert {c.id for c in store.list_conversations()} == {keep, gone}
    assert [h.conversation_id for h in store.search("zanzibar")] == [gone]


def test_purge_deleted_respects_age_and_cascades(home: Path, store: Store, clock: Clock) -> None:
    old, recent, alive = (store.create_conversation(t) for t in ("old", "recent", "alive"))
    for conv in (old, recent, alive):
        store.append_message(conv, ChatMessage("user", "purgeable words"))
        store.record_tool_call_started(conv, f"call-{conv}", "fs_read", "{}")
        store.record_approval(conv, f"call-{conv}", "fs_read", "allow_once")
    store.delete_conversation(old)
    clock.now += timedelta(days=10).total_seconds()
    store.delete_conversation(recent)

    assert store.purge_deleted(timedelta(days=5)) == 1
    assert store.get_conversation(old) is None
    assert store.load_messages(old) == [] and store.list_tool_calls(old) == []
    assert store.list_approvals(old) == []
    assert store.get_conversation(recent) is not None

    assert store.purge_deleted(timedelta(0)) == 1
    assert [c.id for c in store.list_conversations(include_deleted=True)] == [alive]
    with _raw(db_path(home)) as raw:
        assert raw.execute("SELECT count(*) FROM messages").fetchone()[0] == 1
        raw.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("Plan my week", "Plan my week"),
        ("\n\n   Fix   the\tdocker  setup  \nmore details here", "Fix the docker setup"),
        ("", "New chat"),
        ("   \n  ", "New chat"),
        ("x" * 200, "x" * 59 + "…"),
    ],
)
def test_make_title(text: str, title: str) -> None:
    assert make_title(text) == title


def test_auto_title_is_short_and_stored(store: Store) -> None:
    conv = store.create_conversation()
    text = "Please summarise every unread email from my manager and draft polite replies to each"
    title = store.auto_title(conv, text + "\nThanks!")
    assert len(title) <= 60 and title.endswith("…")
    assert text.startswith(title.removesuffix("…"))
    got = store.get_conversation(conv)
    assert got is not None and got.title == title


# ---- tool calls and approvals ---------------------------------------------------------------


def test_tool_call_lifecycle(store: Store) -> None:
    conv = store.create_conversation()
    store.record_tool_call_started(conv, "c1", "fs_write", '{"path": "a"}', status="pending")
    store.record_approval(conv, "c1", "fs_write", "allow_once")
    store.mark_tool_call_running("c1", conversation_id=conv)
    assert store.list_tool_calls(conv)[0].status == "running"
    store.record_tool_call_finished("c1", "ok", "wrote 3 bytes", {"bytes": 3, "path": "a"}, None)

    store.record_tool_call_started(conv, "c2", "docker_rm", "{}", status="pending")
    store.record_approval(conv, "c2", "docker_rm", "deny")
    store.record_tool_call_finished("c2", "denied", error="The user declined.")

    calls = store.list_tool_calls(conv)
    assert [(c.call_id, c.status) for c in calls] == [("c1", "ok"), ("c2", "denied")]
    assert calls[0].data == {"bytes": 3, "path": "a"}
    assert calls[0].arguments == '{"path": "a"}' and calls[0].content == "wrote 3 bytes"
    assert calls[0].finished_at is not None and calls[0].finished_at > calls[0].started_at
    assert calls[1].error == "The user declined." and calls[1].data is None
    assert [(a.call_id, a.decision) for a in store.list_approvals(conv)] == [
        ("c1", "allow_once"),
        ("c2", "deny"),
    ]


def test_reused_call_ids_update_the_newest_open_call(store: Store) -> None:
    a, b = store.create_conversation(), store.create_conversation()
    store.record_tool_call_started(a, "call_0", "t", "{}")
    store.record_tool_call_finished("call_0", "ok", "first")
    store.record_tool_call_started(a, "call_0", "t", "{}")  # a local model reusing ids
    store.record_tool_call_started(b, "call_0", "t", "{}")
    store.record_tool_call_finished("call_0", "error", "in a", conversation_id=a)
    assert [c.content for c in store.list_tool_calls(a)] == ["first", "in a"]
    assert store.list_tool_calls(b)[0].status == "running"


def test_unknown_tool_call_and_bad_status_are_rejected(store: Store) -> None:
    conv = store.create_conversation()
    with pytest.raises(NotFoundError):
        store.record_tool_call_finished("never-started", "ok")
    with pytest.raises(sqlite3.IntegrityError):
        store.record_tool_call_started(conv, "c", "t", "{}", status="exploded")  # type: ignore[arg-type]
    assert store.list_tool_calls(conv) == []  # the failed write left nothing behind


def test_object_data_is_stored_as_text(store: Store) -> None:
    conv = store.create_conversation()
    store.record_tool_call_started(conv, "c", "t", "{}")
    store.record_tool_call_finished("c", "ok", "", {"path": Path("/tmp/x")})
    assert store.list_tool_calls(conv)[0].data == {"path": "/tmp/x"}


def test_approval_without_conversation(store: Store) -> None:
    assert store.record_approval(None, None, "fs_write", "auto_deny") > 0


# ---- search ---------------------------------------------------------------------------------


@pytest.fixture
def corpus(store: Store) -> dict[str, str]:
    docker = store.create_conversation("Docker help")
    store.append_message(docker, ChatMessage("user", "How do I list running docker containers?"))
    store.append_message(docker, ChatMessage("assistant", "Use docker ps to list containers."))
    cafe = store.create_conversation("Café")
    store.append_message(cafe, ChatMessage("user", "Find a café near the office"))
    syntax = store.create_conversation("Syntax")
    store.append_message(
        syntax, ChatMessage("user", 'Explain AND( vs OR in SQL and the "quote" char')
    )
    return {"docker": docker, "cafe": cafe, "syntax": syntax}


def test_search_finds_messages_with_snippets(store: Store, corpus: dict[str, str]) -> None:
    hits = store.search("docker")
    assert {h.conversation_id for h in hits} == {corpus["docker"]}
    assert {h.role for h in hits} == {"user", "assistant"}
    assert all(h.conversation_title == "Docker help" for h in hits)
    assert all(f"{HIGHLIGHT_START}docker{HIGHLIGHT_END}" in h.snippet for h in hits)
    msg_ids = {h.message_id for h in hits}
    assert len(msg_ids) == 2


def test_search_needs_every_word_and_prefixes_the_last(
    store: Store, corpus: dict[str, str]
) -> None:
    hits = store.search("running contain")
    assert len(hits) == 1 and hits[0].role == "user"
    assert f"{HIGHLIGHT_START}containers{HIGHLIGHT_END}" in hits[0].snippet
    assert store.search("docker banana") == []


def test_search_ignores_case_and_accents(store: Store, corpus: dict[str, str]) -> None:
    assert [h.conversation_id for h in store.search("CAFE")] == [corpus["cafe"]]


def test_search_snippet_is_short_for_long_messages(store: Store) -> None:
    conv = store.create_conversation()
    long_text = " ".join(["filler"] * 500 + ["needle"] + ["filler"] * 500)
    store.append_message(conv, ChatMessage("tool", long_text, tool_call_id="c"))
    (hit,) = store.search("needle")
    assert f"{HIGHLIGHT_START}needle{HIGHLIGHT_END}" in hit.snippet
    assert len(hit.snippet) < 200 and "…" in hit.snippet


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '""',
        '"unbalanced',
        "AND(",
        "NEAR(a b",
        "a OR",
        "NOT",
        ")",
        "*",
        "^",
        "content:docker",
        "messages_fts:docker",
        "'; DROP TABLE messages; --",
        "docker*)",
        "",
        "   \t\n ",
        "{a b}",
        "\x00",
        "-",
        "+docker",
    ],
)
def test_hostile_queries_do_not_crash(store: Store, corpus: dict[str, str], query: str) -> None:
    hits = store.search(query)
    assert isinstance(hits, list)
    assert store.count_messages(corpus["docker"]) == 2  # and nothing was harmed


@pytest.mark.parametrize(
    ("query", "key"), [("AND(", "syntax"), ('"quote"', "syntax"), ("+docker", "docker")]
)
def test_operators_are_searched_as_plain_words(
    store: Store, corpus: dict[str, str], query: str, key: str
) -> None:
    assert {h.conversation_id for h in store.search(query)} == {corpus[key]}


def test_fts_query_quotes_every_word() -> None:
    assert fts_query('say "hi" AND(') == '"say" """hi""" "AND("*'
    assert fts_query("  ") is None and fts_query('" ( *') is None


def test_index_follows_edits_and_deletes(home: Path, store: Store) -> None:
    conv = store.create_conversation()
    msg_id = store.append_message(conv, ChatMessage("user", "original wording"))
    with _raw(db_path(home)) as raw:
        raw.execute("UPDATE messages SET content = 'revised phrasing' WHERE id = ?", (msg_id,))
    assert store.search("original") == []
    assert [h.message_id for h in store.search("revised")] == [msg_id]
    with _raw(db_path(home)) as raw:
        raw.execute("DELETE FROM messages WHERE id = ?", (msg_id,))
    assert store.search("revised") == []


# ---- the file: pragmas, migrations, refusals, durability ---------------------------------------


def test_wal_normal_sync_and_private_file(home: Path, store: Store) -> None:
    path = db_path(home)
    with _raw(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert store._conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_migrates_an_empty_version_0_database(home: Path) -> None:
    path = db_path(home)
    with _raw(path) as raw:
        raw.execute("PRAGMA user_version = 0")
        raw.execute("CREATE TABLE unrelated (x)")  # a real, non-empty file at version 0
    with Store(path) as s:
        conv = s.create_conversation()
        s.append_message(conv, ChatMessage("user", "hello"))
    with _raw(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == len(store_mod.MIGRATIONS)
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"conversations", "messages", "tool_calls", "approvals", "messages_fts"} <= tables


def test_later_migrations_apply_in_order_and_keep_data(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = db_path(home)
    with Store(path) as s:
        conv = s.create_conversation("kept")
        s.append_message(conv, ChatMessage("user", "still here"))
    v1 = len(store_mod.MIGRATIONS)
    monkeypatch.setattr(
        store_mod,
        "MIGRATIONS",
        [
            *store_mod.MIGRATIONS,
            "CREATE TABLE future_things (id INTEGER PRIMARY KEY, text TEXT NOT NULL);",
            "ALTER TABLE future_things ADD COLUMN due_at REAL;\n"
            "INSERT INTO future_things (text, due_at) VALUES ('migrated', 1.0);",
        ],
    )
    with Store(path) as s:
        assert [m.content for m in s.load_messages(conv)] == ["still here"]
    with _raw(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == v1 + 2
        assert raw.execute("SELECT text, due_at FROM future_things").fetchall() == [
            ("migrated", 1.0)
        ]


def test_a_failing_migration_changes_nothing(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = db_path(home)
    Store(path).close()
    v1 = len(store_mod.MIGRATIONS)
    broken = "CREATE TABLE half_done (x);\nCREATE TABLE conversations (dup);"
    monkeypatch.setattr(store_mod, "MIGRATIONS", [*store_mod.MIGRATIONS, broken])
    with pytest.raises(StoreError, match=f"schema version {v1 + 1}"):
        Store(path)
    with _raw(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == v1
        names = {r[0] for r in raw.execute("SELECT name FROM sqlite_master")}
    assert "half_done" not in names


def test_refuses_a_newer_schema(home: Path) -> None:
    path = db_path(home)
    Store(path).close()
    with _raw(path) as raw:
        raw.execute("PRAGMA user_version = 99")
    with pytest.raises(StoreError, match="newer") as err:
        Store(path)
    assert str(path) in str(err.value)
    with _raw(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 99


def test_refuses_a_file_that_is_not_a_database(home: Path) -> None:
    path = db_path(home)
    junk = b"these are my notes, not a database\n" * 200
    path.write_bytes(junk)
    with pytest.raises(StoreError) as err:
        Store(path)
    assert str(path) in str(err.value)
    assert path.read_bytes() == junk  # left untouched


def test_committed_messages_survive_sigkill(home: Path) -> None:
    """A writer killed mid-session loses nothing it had appended."""
    path = db_path(home)
    n = 60
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        from app.core.providers.base import ChatMessage, ToolCallRequest
        from app.core.store import Store

        store = Store(sys.argv[1])
        conv = store.create_conversation("crash test")
        print(conv, flush=True)
        for i in range({n}):
            calls = [ToolCallRequest(f"c{{i}}", "t", "{{}}")] if i % 3 == 0 else []
            store.append_message(conv, ChatMessage("assistant", f"message {{i}}", tool_calls=calls))
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    conv = proc.stdout.strip()
    assert Path(f"{path}-wal").exists()  # killed before any clean checkpoint

    with _raw(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with Store(path) as s:
        messages = s.load_messages(conv)
        assert [m.content for m in messages] == [f"message {i}" for i in range(n)]
        assert [bool(m.tool_calls) for m in messages] == [i % 3 == 0 for i in range(n)]
        assert len(s.search("message", limit=n + 10)) == n  # the index survived too


def test_approvals_of_a_version_4_history_survive_the_trust_core_upgrade(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = db_path(home)
    monkeypatch.setattr(store_mod, "MIGRATIONS", store_mod.MIGRATIONS[:4])
    with Store(path) as s:
        conv = s.create_conversation("before")
    with _raw(path) as raw:  # a row as version 4 wrote it
        raw.execute(
            "INSERT INTO approvals (conversation_id, call_id, tool_name, decision, decided_at)"
            " VALUES (?, 'c1', 'fs_write_file', 'always_allow', 1.0)",
            (conv,),
        )
        raw.commit()
    monkeypatch.undo()
    with Store(path) as s:
        [old] = s.list_approvals(conv)
        assert (old.tool_name, old.decision, old.how) == ("fs_write_file", "always_allow", "user")
        s.record_approval(conv, "c2", "fs_write_file", "always_allow_any", "user")
        s.record_approval(conv, "c3", "docker_remove_container", "allow_once", "yes")
        assert [(a.decision, a.how) for a in s.list_approvals(conv)][1:] == [
            ("always_allow_any", "user"),
            ("allow_once", "yes"),
        ]
        with pytest.raises(sqlite3.IntegrityError):
            s.record_approval(conv, "c4", "x", "made_up")  # type: ignore[arg-type]
