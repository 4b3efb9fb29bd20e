"""Review of issue 17's message actions for keyboard-only use: Edit, Regenerate and the
version switch are painted buttons (Tab never reaches them), so the keyboard needs
another way to them — the context menu (Menu key / Shift+F10) or a key on the current
message."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtGui import QContextMenuEvent
from PySide6.QtWidgets import QApplication, QMenu

from app.core.history_marks import BranchInfo
from app.core.providers.base import ChatMessage
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
