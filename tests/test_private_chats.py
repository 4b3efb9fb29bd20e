"""Marking a chat private from the sidebar's context menu: the store records it, the list
shows a lock, the window hears of it, and the memory tools refuse in that conversation."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QAction

from app.core.memory import MemoryService
from app.core.store import Store
from app.ui.sidebar import PRIVATE_ACTION, PRIVATE_MARK, Sidebar
from tools.registry import ToolRegistry
from tools.runner import ToolRunner
from tools.spec import ToolContext

pytestmark = pytest.mark.gui

#: Where to save screenshots to look at (DESKHAND_SHOTS=folder); none by default.
SHOTS = os.environ.get("DESKHAND_SHOTS")


@pytest.fixture
def store(tmp_path: Path):
    s = Store(tmp_path / "deskhand.db")
    yield s
    s.close()


@pytest.fixture
def runner():
    r = ToolRunner(ToolRegistry.default(None, entry_points=False))
    yield r
    r.shutdown()


def action(sidebar: Sidebar, conv_id: str, text: str) -> QAction:
    menu = sidebar.context_menu(conv_id)
    found = [a for a in menu.actions() if a.text() == text]
    assert found, [a.text() for a in menu.actions()]
    return found[0]


def item_text(sidebar: Sidebar, conv_id: str) -> str:
    for i in range(sidebar.list.count()):
        item = sidebar.list.item(i)
        if item.data(256) == conv_id:  # Qt.ItemDataRole.UserRole
            return item.text()
    raise AssertionError(f"{conv_id} is not listed")


def test_private_toggle_in_the_context_menu(store: Store, runner, tmp_path: Path, qtbot):
    secret = store.create_conversation("Salary talk")
    other = store.create_conversation("Groceries")
    sidebar = Sidebar(store)
    qtbot.addWidget(sidebar)
    sidebar.resize(260, 300)
    sidebar.refresh()
    toggle = action(sidebar, secret, PRIVATE_ACTION)
    assert toggle.isCheckable() and not toggle.isChecked()
    changes: list[tuple[str, bool]] = []
    sidebar.privateChanged.connect(lambda conv, private: changes.append((conv, private)))

    toggle.trigger()
    assert store.is_private(secret) is True and store.is_private(other) is False
    assert changes == [(secret, True)]
    assert item_text(sidebar, secret).startswith(f"Salary talk {PRIVATE_MARK}\n")
    assert PRIVATE_MARK not in item_text(sidebar, other)
    assert action(sidebar, secret, PRIVATE_ACTION).isChecked()  # the menu shows the state
    sidebar.show()
    if SHOTS:
        sidebar.grab().save(str(Path(SHOTS) / "sidebar_private.png"))

    # the memory tool refuses in the private chat, and works in the other one
    memory = MemoryService(store)
    result = asyncio.run(
        runner.run(
            "memory_store",
            {"content": "Asked for a raise"},
            ToolContext(home=tmp_path, services={"memory": memory.for_conversation(secret)}),
        )
    )
    assert not result.ok and "private" in result.content
    assert store.memory_rows() == []
    fine = asyncio.run(
        runner.run(
            "memory_store",
            {"content": "Buys oat milk"},
            ToolContext(home=tmp_path, services={"memory": memory.for_conversation(other)}),
        )
    )
    assert fine.ok and [r["content"] for r in store.memory_rows()] == ["Buys oat milk"]

    # and turning it off again
    action(sidebar, secret, PRIVATE_ACTION).trigger()
    assert store.is_private(secret) is False and changes[-1] == (secret, False)
    assert PRIVATE_MARK not in item_text(sidebar, secret)


def test_search_hits_show_the_lock_and_a_vanished_chat_is_harmless(store: Store, qtbot: Any):
    from app.core.providers.base import ChatMessage

    conv = store.create_conversation("Doctor visit")
    store.append_message(conv, ChatMessage("user", "appointment on tuesday"))
    store.set_private(conv, True)
    sidebar = Sidebar(store)
    qtbot.addWidget(sidebar)
    sidebar.search.setText("appointment")
    sidebar._run_search()
    assert sidebar.list.count() == 1 and sidebar.list.item(0).text().startswith(
        f"Doctor visit {PRIVATE_MARK}"
    )
    sidebar.set_private("no-such-conversation", True)  # deleted meanwhile: no error
