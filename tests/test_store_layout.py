"""The store package: one module per aggregate, `Store` composed of them with no SQL of its
own, and column names that only ever come from the store's allow-lists."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

import app.core.store as store_pkg
from app.core.paths import db_path
from app.core.store import Store

PACKAGE = Path(store_pkg.__file__).parent
SQL_WORD = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|PRAGMA)\b")
TABLE_REF = re.compile(r"\b(?:FROM|INTO|UPDATE|JOIN)\s+([a-z_]+)")

#: The tables each aggregate's SQL may name.
TABLES = {
    "conversations": {"conversations", "messages"},
    "branches": {
        "conversations",
        "messages",
        "message_branches",
        "conversation_markers",
        "conversation_leases",
    },
    "search": {"messages_fts", "messages", "conversations"},
    "tool_calls": {"tool_calls", "approvals"},
    "accounts": {"integration_accounts", "integration_active"},
    "reminders": {"reminders"},
    "memories": {"memories", "memories_fts"},
}

#: A method of each reason to change, and the module that owns it.
OWNERS = {
    "close": "database",
    "create_conversation": "conversations",
    "append_message": "conversations",
    "set_private": "conversations",
    "conversation_model": "conversations",
    "fork_and_append": "branches",
    "add_marker": "branches",
    "take_lease": "branches",
    "search": "search",
    "record_tool_call_finished": "tool_calls",
    "record_approval": "tool_calls",
    "set_active_account": "accounts",
    "update_reminder": "reminders",
    "reminder_rows_with_status": "reminders",
    "update_memory": "memories",
    "search_memory_rows": "memories",
}


def _strings(module: str) -> list[str]:
    """Every string literal of `app/core/store/<module>.py` (f-string parts included)."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    return [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


@pytest.fixture
def store(home: Path):
    with Store(db_path(home)) as s:
        yield s


def _reminder(store: Store) -> str:
    store.insert_reminder(
        {
            "id": "r1",
            "message": "Water the plants",
            "due_at": 100.0,
            "tz": "UTC",
            "cron": None,
            "status": "scheduled",
            "created_at": 1.0,
            "source": "user",
            "source_ref": None,
            "conversation_id": None,
        }
    )
    return "r1"


# ---- typed methods: column names come from the store, never from callers ----------------


def test_update_reminder_refuses_an_unknown_column(store: Store) -> None:
    reminder_id = _reminder(store)
    with pytest.raises(ValueError, match=r"cannot set status = 'x' --.* of reminders"):
        store.update_reminder(reminder_id, **{"status = 'x' --": "done"})
    with pytest.raises(ValueError, match="cannot set nickname of reminders"):
        store.update_reminder(reminder_id, nickname="plants")
    with pytest.raises(ValueError, match="cannot set id of reminders"):
        store.update_reminder(reminder_id, id="r2")
    row = store.reminder_row(reminder_id)
    assert row is not None and (row["id"], row["status"]) == ("r1", "scheduled")
    assert store.update_reminder(reminder_id, status="done", fired_count=1)
    assert store.reminder_rows_with_status(["done"])[0]["fired_count"] == 1
    assert not store.update_reminder("no-such-reminder", status="done")


def test_insert_reminder_refuses_an_unknown_column(store: Store) -> None:
    row = {"id": "r9", "message": "m", "due_at": 1.0, "tz": "UTC", "cron": None}
    row |= {"status": "scheduled", "created_at": 0.0, "source": "user", "source_ref": None}
    row |= {"conversation_id": None, "fired_count": 5}
    with pytest.raises(ValueError, match="cannot set fired_count of reminders"):
        store.insert_reminder(row)  # a caller bypassing the NewReminder type
    assert store.reminder_row("r9") is None


def test_reminders_are_read_by_id_and_by_status(store: Store) -> None:
    _reminder(store)
    assert store.reminder_row("nope") is None
    assert [r["id"] for r in store.reminder_rows_with_status(["scheduled", "fired"])] == ["r1"]
    assert store.reminder_rows_with_status(["cancelled"]) == []
    assert store.reminder_rows_with_status([]) == []


def test_update_memory_refuses_an_unknown_column(store: Store) -> None:
    memory_id = store.add_memory("fact", "The cat is called Mila", None)
    with pytest.raises(ValueError, match="cannot set source_conversation of memories"):
        store.update_memory(memory_id, source_conversation="someone else's")
    with pytest.raises(ValueError, match="cannot set created_at of memories"):
        store.update_memory(memory_id, content="x", created_at="0")
    [row] = store.memory_rows()
    assert (row["content"], row["source_conversation"]) == ("The cat is called Mila", None)
    assert store.update_memory(memory_id, content="The cat is Mila", kind=None)
    assert store.memory_rows()[0]["content"] == "The cat is Mila"


def test_conversation_updates_refuse_an_unknown_column(store: Store) -> None:
    conv = store.create_conversation("Kept")
    with pytest.raises(ValueError, match="cannot set updated_at of conversations"):
        store._update_conversation(conv, updated_at=0.0)
    conversation = store.get_conversation(conv)
    assert conversation is not None and conversation.title == "Kept"


def test_no_public_method_takes_sql() -> None:
    assert not hasattr(Store, "reminder_rows")
    for name, method in inspect.getmembers(Store, inspect.isfunction):
        if name.startswith("_"):
            continue
        params = set(inspect.signature(method).parameters)
        assert not params & {"where", "sql", "assignment", "columns", "order_by"}, name


# ---- the layout ------------------------------------------------------------------------


def test_the_package_init_defines_no_sql() -> None:
    source = (PACKAGE / "__init__.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    found = [s for s in _strings("__init__") if SQL_WORD.search(s)]
    assert found == []
    calls = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    assert "execute" not in calls and "_write" not in calls and "_read" not in calls
    store_class = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Store")
    assert [f.name for f in store_class.body if isinstance(f, ast.FunctionDef)] == ["_migrations"]


@pytest.mark.parametrize("module", sorted(TABLES))
def test_each_aggregate_touches_only_its_tables(module: str) -> None:
    named = {t for s in _strings(module) for t in TABLE_REF.findall(s)}
    assert named, f"{module} names no table"
    assert named <= TABLES[module]


@pytest.mark.parametrize(("method", "module"), sorted(OWNERS.items()))
def test_each_method_lives_in_its_aggregate(method: str, module: str) -> None:
    owner = next(k for k in Store.__mro__ if method in vars(k))
    assert owner.__module__ == f"app.core.store.{module}"
    aggregate = importlib.import_module(f"app.core.store.{module}")
    assert issubclass(Store, getattr(aggregate, owner.__name__))


def test_every_aggregate_is_built_on_the_shared_database() -> None:
    database = importlib.import_module("app.core.store.database").Database
    for module in TABLES:
        aggregate = importlib.import_module(f"app.core.store.{module}")
        classes = [
            c
            for c in vars(aggregate).values()
            if inspect.isclass(c) and c.__module__ == aggregate.__name__
        ]
        built = [c for c in classes if issubclass(c, database)]
        assert len(built) == 1, module
        assert issubclass(Store, built[0])


def test_the_public_names_are_importable_from_the_package() -> None:
    names = [
        "Store",
        "StoreError",
        "NotFoundError",
        "ConversationBusyError",
        "ConversationRow",
        "StoredMessage",
        "ToolCallRecord",
        "ApprovalRecord",
        "SearchHit",
        "fts_query",
        "make_title",
        "HIGHLIGHT_START",
        "HIGHLIGHT_END",
        "DEFAULT_TITLE",
        "LEASE_STALE_SECONDS",
        "MIGRATIONS",
        "ToolCallStatus",
        "ApprovalDecision",
        "ReminderRow",
        "NewReminder",
        "AccountRow",
    ]
    assert [n for n in names if not hasattr(store_pkg, n)] == []
    assert set(names) <= set(store_pkg.__all__)
