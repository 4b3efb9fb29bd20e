"""The chat list on its own: search matches highlighted as plain text, Esc in the search,
renaming in place (Enter, Esc, empty titles), Delete. Real Store, real widgets."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit

from app.core.providers.base import ChatMessage
from app.core.store import HIGHLIGHT_END, HIGHLIGHT_START, Store
from app.ui.plain_text import plain_tooltip
from app.ui.sidebar import (
    DETAIL_ROLE,
    SPANS_ROLE,
    TITLE_ROLE,
    Sidebar,
    highlight_parts,
)

pytestmark = pytest.mark.gui


@pytest.fixture
def store(tmp_path: Path):
    s = Store(tmp_path / "deskhand.db")
    yield s
    s.close()


@pytest.fixture
def sidebar(store: Store, qtbot):
    widget = Sidebar(store)
    qtbot.addWidget(widget)
    widget.resize(260, 400)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def chat(store: Store, title: str, text: str) -> str:
    conv = store.create_conversation(title)
    store.append_message(conv, ChatMessage("user", text))
    return conv


def test_highlight_parts_marks_matches_and_keeps_everything_else_plain():
    text, spans = highlight_parts(
        f"how do I {HIGHLIGHT_START}drain{HIGHLIGHT_END} a  node\n safely"
    )
    assert text == "how do I drain a node safely"
    assert [text[s : s + n] for s, n in spans] == ["drain"]
    text, spans = highlight_parts(f"{HIGHLIGHT_START}two words{HIGHLIGHT_END} then\x1b[31m red")
    assert [text[s : s + n] for s, n in spans] == ["two words"]
    assert "\x1b" not in text and "⟨U+001B⟩" in text  # a control character is shown, not run
    assert highlight_parts("a » b « c") == ("a » b « c", [])  # unpaired: plain text


def test_search_results_show_the_matches_as_plain_text(store, sidebar, qtbot):
    chat(store, "<b>Kubernetes</b> notes", "how do I drain a node safely")
    chat(store, "Pasta", "a recipe")
    sidebar.refresh()
    qtbot.keyClicks(sidebar.search, "drain")
    qtbot.waitUntil(lambda: sidebar.list.count() == 1)
    item = sidebar.list.item(0)
    assert item.data(TITLE_ROLE) == "<b>Kubernetes</b> notes"
    assert item.text().startswith("<b>Kubernetes</b> notes\n")  # shown as typed, not bold
    detail = item.data(DETAIL_ROLE)
    assert HIGHLIGHT_START not in detail and [
        detail[s : s + n] for s, n in item.data(SPANS_ROLE)
    ] == ["drain"]
    assert "&lt;b&gt;" in plain_tooltip(item.data(TITLE_ROLE))
    assert "<b>Kubernetes" not in item.toolTip()
    sidebar.grab()  # paints (the delegate draws the highlighted layout) without errors


def test_esc_clears_the_search_then_leaves_it(store, sidebar, qtbot):
    chat(store, "One", "alpha")
    chat(store, "Two", "beta")
    sidebar.refresh()
    left: list[bool] = []
    sidebar.searchDismissed.connect(lambda: left.append(True))
    sidebar.search.setFocus()
    qtbot.keyClicks(sidebar.search, "alpha")
    qtbot.waitUntil(lambda: sidebar.list.count() == 1)
    qtbot.keyClick(sidebar.search, Qt.Key.Key_Escape)
    assert sidebar.search.text() == "" and sidebar.list.count() == 2 and left == []
    qtbot.keyClick(sidebar.search, Qt.Key.Key_Escape)
    assert left == [True]


def editor_of(sidebar: Sidebar) -> QLineEdit:
    editor = sidebar.rename_editor()
    assert editor is not None and editor.isVisible()
    return editor


def test_rename_in_place_enter_saves_esc_cancels_empty_is_refused(store, sidebar, qtbot):
    conv = chat(store, "Old title", "hello")
    sidebar.refresh()
    renamed: list[tuple[str, str]] = []
    sidebar.titleChanged.connect(lambda c, t: renamed.append((c, t)))

    assert sidebar.start_rename(conv)
    editor = editor_of(sidebar)
    assert editor.text() == "Old title" and editor.selectedText() == "Old title"
    qtbot.keyClicks(editor, "Trip plans")
    qtbot.keyClick(editor, Qt.Key.Key_Escape)
    assert not sidebar.editing
    assert store.get_conversation(conv).title == "Old title" and renamed == []

    item = sidebar.list.item(0)
    rect = sidebar.list.visualItemRect(item)
    qtbot.mouseClick(sidebar.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.mouseDClick(sidebar.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    editor = editor_of(sidebar)
    editor.clear()
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    assert sidebar.editing and editor.property("invalid") is True  # refused, still editing
    assert store.get_conversation(conv).title == "Old title"
    qtbot.keyClicks(editor, "  Trip plans  ")
    assert editor.property("invalid") is False
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not sidebar.editing)  # the view commits on its next turn
    assert store.get_conversation(conv).title == "Trip plans"
    assert renamed == [(conv, "Trip plans")]
    assert sidebar.list.item(0).text().startswith("Trip plans\n")


def test_the_list_waits_for_an_edit_before_it_refreshes(store, sidebar, qtbot):
    conv = chat(store, "Editing me", "hello")
    sidebar.refresh()
    sidebar.context_menu(conv).actions()[0].trigger()  # Rename, from the context menu
    editor = editor_of(sidebar)
    chat(store, "Arrived meanwhile", "hi")
    sidebar.refresh()  # e.g. a turn finished in another chat
    assert sidebar.rename_editor() is editor and sidebar.list.count() == 1
    qtbot.keyClicks(editor, "Edited")
    qtbot.keyClick(editor, Qt.Key.Key_Enter)
    qtbot.waitUntil(lambda: sidebar.list.count() == 2)
    assert store.get_conversation(conv).title == "Edited"


def test_rename_falls_back_to_the_window_when_not_listed(store, sidebar):
    conv = chat(store, "Hidden by the search", "x")
    sidebar.refresh()
    asked: list[str] = []
    sidebar.renameRequested.connect(asked.append)
    sidebar.hide()
    sidebar.context_menu(conv).actions()[0].trigger()
    assert asked == [conv]


def test_delete_key_in_the_list_asks_to_delete(store, sidebar, qtbot):
    conv = chat(store, "Remove me", "x")
    sidebar.refresh()
    deleted: list[str] = []
    sidebar.deleteRequested.connect(deleted.append)
    sidebar.list.setFocus()
    sidebar.list.setCurrentRow(0)
    qtbot.keyClick(sidebar.list, Qt.Key.Key_Delete)
    assert deleted == [conv]
