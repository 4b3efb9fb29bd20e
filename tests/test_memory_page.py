"""Settings → Memory against the real store: memories listed with their kind, source
conversation and date, searched, edited and deleted (pytest-qt, offscreen)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.core.memory import MemoryService
from app.core.runtime import Runtime
from app.ui.settings import memory_page
from app.ui.settings.memory_page import MemoryPage
from tests import test_settings_dialog as base
from tests.fixtures_qt import wait_until
from tests.test_settings_dialog import run

runtime = base.runtime

pytestmark = pytest.mark.gui

#: Where to save screenshots to look at (DESKHAND_SHOTS=folder); none by default.
SHOTS = os.environ.get("DESKHAND_SHOTS")


@pytest.fixture
def memories(runtime: Runtime) -> None:
    store = runtime.store
    conv = store.create_conversation("Planning the trip")
    service = MemoryService(store)
    service.for_conversation(conv).remember("The cat is called Mia")
    service.remember("Prefers green tea in the afternoon", kind="preference")
    service.remember("File the tax return by May", kind="task")


@pytest.fixture
def page(runtime: Runtime, memories: None, qtbot: Any) -> MemoryPage:
    page = MemoryPage(runtime)
    qtbot.addWidget(page)
    page.resize(760, 440)
    page.show()  # the first show reads the memories
    return page


def row(page: MemoryPage, memory_id: int) -> list[str]:
    for i in range(page.tree.topLevelItemCount()):
        item = page.tree.topLevelItem(i)
        if item.data(0, Qt.ItemDataRole.UserRole) == memory_id:
            return [item.text(c) for c in range(4)]
    raise AssertionError(f"memory {memory_id} is not listed")


def by_text(runtime: Runtime, text: str) -> int:
    return next(m.id for m in MemoryService(runtime.store).list() if text in m.content)


def test_lists_memories_with_kind_source_and_date(page: MemoryPage, runtime: Runtime) -> None:
    assert len(page.ids()) == 3
    cat = row(page, by_text(runtime, "Mia"))
    assert cat[0] == "Fact" and cat[1] == "The cat is called Mia"
    assert cat[2] == "Planning the trip"
    assert len(cat[3]) == len("2026-01-01 12:00")
    tea = row(page, by_text(runtime, "green tea"))
    assert tea[0] == "Preference" and tea[2] == "—"
    page.tree.setCurrentItem(page.tree.topLevelItem(0))
    if SHOTS:
        page.grab().save(str(Path(SHOTS) / "memory_page.png"))


def test_search_box_filters(page: MemoryPage, runtime: Runtime, qtbot: Any, qloop: Any) -> None:
    qtbot.keyClicks(page.search, "tea")

    async def body() -> None:
        await wait_until(lambda: len(page.ids()) == 1, what="the search result")

    run(qloop, body())
    assert page.ids() == [by_text(runtime, "green tea")]
    page.search.clear()
    run(qloop, _wait(page, 3))
    qtbot.keyClicks(page.search, "nothing-like-this")
    run(qloop, _wait(page, 0))
    assert page.empty_label.isVisible() and page.empty_label.text() == "Nothing found."


async def _wait(page: MemoryPage, count: int) -> None:
    await wait_until(lambda: len(page.ids()) == count, what=f"{count} memories")


def test_edit_one(page: MemoryPage, runtime: Runtime, qtbot: Any) -> None:
    memory_id = by_text(runtime, "Mia")
    page.select(memory_id)
    assert page.text_edit.toPlainText() == "The cat is called Mia"
    page.text_edit.setPlainText("The cat is called Mila")
    page.kind_combo.setCurrentIndex(page.kind_combo.findData("preference"))
    qtbot.mouseClick(page.save_button, Qt.MouseButton.LeftButton)
    stored = runtime.store.memory_rows(ids=(memory_id,))[0]
    assert stored["content"] == "The cat is called Mila" and stored["kind"] == "preference"
    assert row(page, memory_id)[:2] == ["Preference", "The cat is called Mila"]
    assert page.selected_id() == memory_id and page.status.text() == "Saved."
    # empty text is refused, nothing changes
    page.text_edit.setPlainText("   ")
    qtbot.mouseClick(page.save_button, Qt.MouseButton.LeftButton)
    assert "some text" in page.status.text()
    assert runtime.store.memory_rows(ids=(memory_id,))[0]["content"] == "The cat is called Mila"


def test_delete_one_after_confirming(
    page: MemoryPage, runtime: Runtime, qtbot: Any, monkeypatch: Any
) -> None:
    asked: list[str] = []
    answer = [False]
    monkeypatch.setattr(
        memory_page, "confirm", lambda parent, title, text: asked.append(text) or answer[0]
    )
    memory_id = by_text(runtime, "tax return")
    page.select(memory_id)
    qtbot.mouseClick(page.delete_button, Qt.MouseButton.LeftButton)
    assert asked and "tax return" in asked[0]
    assert len(runtime.store.memory_rows()) == 3  # No: kept
    answer[0] = True
    qtbot.mouseClick(page.delete_button, Qt.MouseButton.LeftButton)
    assert runtime.store.memory_rows(ids=(memory_id,)) == []
    assert memory_id not in page.ids() and len(page.ids()) == 2
    assert not page.delete_button.isEnabled()  # nothing selected any more


def test_memory_turned_off_still_shows_memories(
    runtime: Runtime, memories: None, qtbot: Any
) -> None:
    runtime.settings.memory.enabled = False
    page = MemoryPage(runtime)
    qtbot.addWidget(page)
    page.show()
    assert len(page.ids()) == 3
    page.patch()(runtime.settings)  # the page changes nothing in settings.json
