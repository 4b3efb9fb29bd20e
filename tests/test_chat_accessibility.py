"""Screen readers and the keyboard: what the conversation's rows say, moving between
messages, copying and opening from the keyboard, real approval buttons, and Edit, Regenerate
and the versions reached through the context menu."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible, QContextMenuEvent, QGuiApplication
from PySide6.QtWidgets import QApplication, QMenu, QPushButton

from app.core.approval import ApprovalRequest
from app.core.events import ApprovalRequested, TextDelta, ToolCallStarted, TurnFinished
from app.core.history_marks import BranchInfo
from app.core.providers.base import ChatMessage, Usage
from app.ui.chat.model import ToolCard
from app.ui.chat.view import ChatView
from tests.chat_helpers import settled

pytestmark = pytest.mark.gui


@pytest.fixture
def view(qtbot: Any, qloop: asyncio.AbstractEventLoop) -> Iterator[ChatView]:
    widget = ChatView()
    qtbot.addWidget(widget)
    widget.resize(900, 700)
    widget.show()
    yield widget


def run(loop: asyncio.AbstractEventLoop, body: Coroutine[Any, Any, None]) -> None:
    loop.run_until_complete(asyncio.wait_for(body, 20))


def _request() -> ApprovalRequest:
    return ApprovalRequest(
        "c1",
        "fs_write_file",
        "fs",
        ["update"],
        {"path": "a.txt"},
        summary="Replace one line of a.txt",
        reason="it would change something",
        arguments_text='{"path": "a.txt"}',
        conversation_id="conv-1",
    )


def _spoken(view: ChatView) -> list[tuple[str, str]]:
    """(name, description) of every row, as the accessibility interface gives them."""
    interface = QAccessible.queryAccessibleInterface(view)
    assert interface is not None
    rows = []
    for i in range(interface.childCount()):
        child = interface.child(i)
        if child.role() == QAccessible.Role.ColumnHeader:
            continue
        rows.append((child.text(QAccessible.Text.Name), child.text(QAccessible.Text.Description)))
    return rows


def test_rows_tell_a_screen_reader_who_said_what(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        view.add_user_message("Please fix a.txt")
        view.handle_event(TextDelta("I will change **one** line."))
        view.handle_event(ToolCallStarted("c1", "fs_write_file", {"path": "a"}, "fs", ["update"]))
        view.handle_event(ApprovalRequested(_request()))
        await settled(view)
        spoken = _spoken(view)
        assert spoken[0] == ("You said: Please fix a.txt", "You said")
        assert spoken[1] == ("Deskhand answered: I will change **one** line.", "Deskhand answered")
        name, description = spoken[2]
        assert name == "Tool: Write file — needs approval: Replace one line of a.txt"
        assert description.startswith("Tool: Write file — needs approval")
        assert "fs_write_file" in description  # the machine name, for whoever needs it
        view.set_waiting(True)
        assert _spoken(view)[-1][0] == "Thinking…"

    run(qloop, body())


def test_the_approval_buttons_are_real_focusable_named_buttons(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        view.handle_event(ApprovalRequested(_request()))
        await settled(view)
        bar = view.bar("c1")
        assert bar is not None
        for button in bar.buttons.values():
            assert isinstance(button, QPushButton)
            assert button.focusPolicy() == Qt.FocusPolicy.StrongFocus
            interface = QAccessible.queryAccessibleInterface(button)
            assert interface.role() == QAccessible.Role.Button
            name = interface.text(QAccessible.Text.Name)
            assert name.endswith(": Write file") and name.split(":")[0] in button.text()
        # Tab from the conversation reaches them
        assert bar.first() in bar.focus_chain()

    run(qloop, body())


def test_the_keyboard_moves_between_messages_copies_and_opens_cards(
    view: ChatView, qloop: asyncio.AbstractEventLoop, qtbot: Any
) -> None:
    async def body() -> None:
        view.load_history(
            [ChatMessage("user", "first"), ChatMessage("assistant", "second **answer**")]
        )
        view.handle_event(ToolCallStarted("c1", "fs_list", {"path": "."}, "fs", ["read"]))
        view.handle_event(TurnFinished(Usage(), "end_turn"))
        await settled(view)
        view.setFocus()
        view.setCurrentIndex(view.chat_model.index(0, 0))
        qtbot.keyClick(view, Qt.Key.Key_Down)
        assert view.currentIndex().row() == 1
        assert view.chat_delegate.state.current_row == 1  # its actions show
        QGuiApplication.clipboard().setText("before")
        qtbot.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
        assert QGuiApplication.clipboard().text() == "second answer"  # as it reads
        qtbot.keyClick(view, Qt.Key.Key_Down)
        card = view.chat_model.items[view.currentIndex().row()]
        assert isinstance(card, ToolCard) and not card.args_open
        qtbot.keyClick(view, Qt.Key.Key_Return)
        assert card.args_open
        qtbot.keyClick(view, Qt.Key.Key_Return)
        assert not card.args_open
        qtbot.keyClick(view, Qt.Key.Key_Up)
        assert view.currentIndex().row() == 1

    run(qloop, body())


# ---- message actions: Edit, Regenerate and the version switch are painted buttons (Tab
# never reaches them), so the context menu (Menu key / Shift+F10) offers them


def _keyboard_menu(view: ChatView, row: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The words of the context menu the Menu key opens on row `row`."""
    seen: list[str] = []

    class RecordingMenu(QMenu):
        def exec(self, *args: Any) -> None:  # type: ignore[override]
            seen.extend(a.text() for a in self.actions() if a.text())

    monkeypatch.setattr("app.ui.chat.view.QMenu", RecordingMenu)
    view.setFocus()
    view.setCurrentIndex(view.chat_model.index(row, 0))
    center = view.visualRect(view.chat_model.index(row, 0)).center()
    event = QContextMenuEvent(
        QContextMenuEvent.Reason.Keyboard, center, view.viewport().mapToGlobal(center)
    )
    QApplication.sendEvent(view.viewport(), event)
    return seen


def test_the_keyboard_reaches_edit_regenerate_and_the_versions(
    view: ChatView, qloop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def body() -> tuple[list[str], list[str]]:
        view.load_history(
            [ChatMessage("user", "first"), ChatMessage("assistant", "second answer")],
            branches=[BranchInfo(1, 2, 2)],
        )
        await settled(view)
        return _keyboard_menu(view, 0, monkeypatch), _keyboard_menu(view, 1, monkeypatch)

    on_question, on_answer = qloop.run_until_complete(asyncio.wait_for(body(), 20))
    assert on_question and on_answer  # the menu opened
    assert any("Edit" in w for w in on_question), on_question
    assert any("Regenerate" in w for w in on_answer), on_answer
    assert any("version" in w.lower() for w in on_answer), on_answer
