"""Edit, Regenerate and versions in the chat view: live indices that stay right after
compaction, the inline editor's own keys, nothing offered while a turn runs, an edit
that is kept until the window takes it, the keyboard's way to every action, copying what
is shown, links that cannot act for the app, and versions reachable from a "Stopped" row."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QAction, QGuiApplication, QHelpEvent, QKeySequence
from PySide6.QtWidgets import QApplication, QMainWindow, QMenu, QToolTip

from app.core.compaction import SUMMARY_PREFIX
from app.core.events import Error, TextDelta, ToolCallFinished, ToolCallStarted, TurnFinished
from app.core.history_marks import BranchInfo, Marker
from app.core.providers.base import ChatMessage, ToolCallRequest, Usage
from app.ui.chat.layouts import WAIT_WORDS
from app.ui.chat.message_editor import WAIT_TIP
from app.ui.chat.model import (
    AssistantMessage,
    ChatItem,
    ErrorItem,
    MarkerItem,
    UserMessage,
)
from app.ui.chat.view import EDIT_NOT_SENT, ChatView
from tests.chat_helpers import click, mouse, row_point, settled
from tools.spec import ToolResult

pytestmark = pytest.mark.gui


@pytest.fixture
def window(qtbot: Any, qloop: asyncio.AbstractEventLoop) -> Iterator[QMainWindow]:
    """A window holding the view, with the real window's Esc (Stop) and F2 (Rename)."""
    win = QMainWindow()
    qtbot.addWidget(win)
    view = ChatView()
    win.setCentralWidget(view)
    win.fired = []  # type: ignore[attr-defined]
    for name, key in (("stop", "Esc"), ("rename", "F2"), ("reminders", "Ctrl+R")):
        action = QAction(name, win)
        action.setShortcut(QKeySequence(key))
        action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        action.triggered.connect(lambda _=False, n=name: win.fired.append(n))  # type: ignore[attr-defined]
        win.addAction(action)
    win.resize(900, 700)
    win.show()
    yield win


@pytest.fixture
def view(window: QMainWindow) -> ChatView:
    widget = window.centralWidget()
    assert isinstance(widget, ChatView)
    return widget


def run(loop: asyncio.AbstractEventLoop, body: Coroutine[Any, Any, None]) -> None:
    loop.run_until_complete(asyncio.wait_for(body, 20))


def summary(covers: int) -> ChatMessage:
    return ChatMessage("user", f"{SUMMARY_PREFIX} — replaces the first {covers} messages]\n- …")


def live_turn(view: ChatView, question: str, answer: str) -> None:
    view.add_user_message(question)
    view.handle_event(TextDelta(answer))
    view.handle_event(TurnFinished(Usage(), "end_turn"))
    view.finish_streaming()


def messages_of(view: ChatView) -> list[UserMessage | AssistantMessage]:
    return [i for i in view.chat_model.items if isinstance(i, UserMessage | AssistantMessage)]


def action_hit(view: ChatView, item: ChatItem, action: str) -> Any:
    return next(h for h in view.chat_delegate.layout(item).hits if h.action == action)


def press(view: ChatView, item: ChatItem, action: str) -> None:
    point = row_point(view, item, action_hit(view, item, action).rect.center())
    mouse(view, QEvent.Type.MouseMove, point, Qt.MouseButton.NoButton)
    click(view, point)


HISTORY = [
    ChatMessage("user", "What is 2+2?"),
    ChatMessage("assistant", "It is **4**."),
    ChatMessage("user", "And 3+3?"),
    ChatMessage("assistant", "6."),
]


# ---- indices -----------------------------------------------------------------------------


def test_live_indices_skip_compaction_summaries(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        view.load_history(HISTORY[:2])
        stored = list(HISTORY[:2])
        live_turn(view, "Second question", "Second answer.")
        # compaction ran before the second answer: its summary is stored, never shown
        stored += [ChatMessage("user", "Second question"), summary(2)]
        stored += [ChatMessage("assistant", "Second answer.")]
        view.sync_indices(stored)
        live_turn(view, "Third question", "Third answer.")
        stored += [ChatMessage("user", "Third question"), summary(4)]
        stored += [ChatMessage("assistant", "Third answer.")]
        view.sync_indices(stored)
        indices = [(i.text, i.index) for i in messages_of(view)[2:]]
        assert indices == [
            ("Second question", 2),
            ("Second answer.", 4),
            ("Third question", 5),
            ("Third answer.", 7),
        ]
        assert all(stored[i].content == t for t, i in indices)

    run(qloop, body())


def test_an_item_whose_message_does_not_match_stays_without_an_index(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        view.load_history(HISTORY[:2])
        view.add_user_message("Read notes.txt")  # the file's text is stored after it
        view.handle_event(TextDelta("Reading."))
        view.handle_event(ToolCallStarted("c9", "fs_read", {"path": "a"}, "fs", ["read"]))
        view.handle_event(ToolCallFinished("c9", "fs_read", ToolResult(True, "x"), 0.1))
        view.handle_event(TextDelta("It says hello, my key is sk-123."))
        view.handle_event(TurnFinished(Usage(), "end_turn"))
        view.add_user_message("Something never stored")
        stored = [
            *HISTORY[:2],
            ChatMessage("user", "Read notes.txt\n\nAttached file `notes.txt`:\n```\nhi\n```"),
            ChatMessage("assistant", "Reading.", tool_calls=[ToolCallRequest("c9", "fs_read", "")]),
            ChatMessage("tool", "x", tool_call_id="c9"),
            # the stored answer was redacted: it is not what the live item shows
            ChatMessage("assistant", "It says hello, my key is [REDACTED]."),
        ]
        view.sync_indices(stored)
        question, reading, answer, never = messages_of(view)[2:]
        assert (question.index, reading.index) == (2, 3)
        assert answer.index is None  # no Regenerate rather than the wrong one
        assert never.index is None
        assert {h.action for h in view.chat_delegate.layout(answer).hits} == {"copy_message"}

    run(qloop, body())


# ---- the editor's keys -------------------------------------------------------------------


def test_esc_and_enter_in_the_editor_are_the_editors_not_the_windows(
    window: Any, view: ChatView, qloop: asyncio.AbstractEventLoop, qtbot: Any
) -> None:
    edited: list[tuple[int, str]] = []
    view.editRequested.connect(lambda index, text: edited.append((index, text)))

    async def body() -> None:
        view.load_history(HISTORY)
        await settled(view)
        editor = view.start_edit(view.chat_model.items[2])
        assert editor is not None
        qtbot.keyClick(editor.edit, Qt.Key.Key_Escape)
        assert view.editor() is None and window.fired == []  # cancelled; Stop not pressed
        editor = view.start_edit(view.chat_model.items[2])
        assert editor is not None
        editor.edit.setPlainText("And 4+4?")
        qtbot.keyClick(editor.edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        assert edited == [(2, "And 4+4?")] and window.fired == []

    run(qloop, body())


# ---- while a turn runs -------------------------------------------------------------------


def test_nothing_that_changes_the_conversation_is_offered_while_a_turn_runs(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    regenerated: list[int] = []
    switched: list[tuple[int, int]] = []
    view.regenerateRequested.connect(regenerated.append)
    view.branchRequested.connect(lambda index, branch: switched.append((index, branch)))

    async def body() -> None:
        view.load_history(HISTORY, branches=[BranchInfo(3, 2, 2)])
        await settled(view)
        first, _, _, last = view.chat_model.items
        view.set_busy(True)
        press(view, last, "regenerate")
        press(view, last, "branch_prev")
        press(view, first, "edit")
        assert regenerated == [] and switched == [] and view.editor() is None
        # the mouse resting on a disabled action says why
        hit = action_hit(view, last, "regenerate")
        point = row_point(view, last, hit.rect.center())
        event = QHelpEvent(QEvent.Type.ToolTip, point, view.viewport().mapToGlobal(point))
        QApplication.sendEvent(view.viewport(), event)
        assert QToolTip.text() == WAIT_WORDS
        QToolTip.hideText()
        # Copy still works; after the turn everything is offered again
        press(view, last, "copy_message")
        assert QGuiApplication.clipboard().text() == "6."
        view.set_busy(False)
        press(view, last, "regenerate")
        press(view, last, "branch_prev")
        assert regenerated == [3] and switched == [(3, 1)]

    run(qloop, body())


def test_an_open_editor_waits_for_the_turn_and_closes_only_when_the_edit_is_taken(
    view: ChatView, qloop: asyncio.AbstractEventLoop, qtbot: Any
) -> None:
    taken: list[tuple[int, str]] = []
    answers = [False, True]

    def submit(index: int, text: str) -> bool:
        taken.append((index, text))
        return answers.pop(0)

    async def body() -> None:
        view.load_history(HISTORY)
        await settled(view)
        editor = view.start_edit(view.chat_model.items[2])
        assert editor is not None
        view.set_busy(True)  # a turn started while the editor is open: it stays
        editor.edit.setPlainText("A carefully rewritten question")
        assert view.editor() is editor and not editor.send_button.isEnabled()
        assert editor.send_button.toolTip() == WAIT_TIP
        qtbot.keyClick(editor.edit, Qt.Key.Key_Return)  # Enter does not send either
        assert view.editor() is editor and editor.problem.text() == WAIT_TIP
        assert editor.problem.isVisible()
        view.set_busy(False)
        assert editor.send_button.isEnabled() and not editor.problem.isVisible()
        view.submit_edit = submit
        qtbot.mouseClick(editor.send_button, Qt.MouseButton.LeftButton)  # not taken
        assert view.editor() is editor and editor.text() == "A carefully rewritten question"
        assert editor.problem.text() == EDIT_NOT_SENT and editor.problem.isVisible()
        qtbot.mouseClick(editor.send_button, Qt.MouseButton.LeftButton)  # taken
        assert view.editor() is None
        assert taken == [(2, "A carefully rewritten question")] * 2

    run(qloop, body())


# ---- the keyboard ------------------------------------------------------------------------


def _menu_words(view: ChatView, monkeypatch: pytest.MonkeyPatch, qtbot: Any) -> dict[str, bool]:
    """Shift+F10 on the current row: the menu's entries and whether each is enabled."""
    seen: dict[str, bool] = {}

    class RecordingMenu(QMenu):
        def exec(self, *args: Any) -> None:  # type: ignore[override]
            seen.update({a.text(): a.isEnabled() for a in self.actions() if a.text()})

    monkeypatch.setattr("app.ui.chat.view.QMenu", RecordingMenu)
    qtbot.keyClick(view, Qt.Key.Key_F10, Qt.KeyboardModifier.ShiftModifier)
    return seen


def test_the_keyboard_reaches_every_action_of_a_message(
    window: Any,
    view: ChatView,
    qloop: asyncio.AbstractEventLoop,
    qtbot: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    regenerated: list[int] = []
    view.regenerateRequested.connect(regenerated.append)

    async def body() -> None:
        view.load_history(HISTORY, branches=[BranchInfo(3, 2, 2)])
        await settled(view)
        view.setFocus()
        view.setCurrentIndex(view.chat_model.index(2, 0))
        on_question = _menu_words(view, monkeypatch, qtbot)
        assert on_question["Edit and resend…"] and "Regenerate" not in on_question
        view.setCurrentIndex(view.chat_model.index(3, 0))
        on_answer = _menu_words(view, monkeypatch, qtbot)
        assert on_answer["Regenerate"] and on_answer["Previous version"]
        assert not on_answer["Next version"]  # 2 of 2: there is no next one
        assert "Copy as Markdown (source)" in on_answer
        view.set_busy(True)
        busy = _menu_words(view, monkeypatch, qtbot)
        assert not busy["Regenerate"] and not busy["Previous version"]
        qtbot.keyClick(
            view,
            Qt.Key.Key_R,
            Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
        )
        assert regenerated == []
        view.set_busy(False)
        qtbot.keyClick(
            view,
            Qt.Key.Key_R,
            Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
        )
        assert regenerated == [3]
        # F2 on your message edits it (the window's F2, Rename, is not pressed)
        view.setCurrentIndex(view.chat_model.index(2, 0))
        qtbot.keyClick(view, Qt.Key.Key_F2)
        editor = view.editor()
        assert editor is not None and editor.text() == "And 3+3?"
        assert window.fired == []
        qtbot.keyClick(editor.edit, Qt.Key.Key_Escape)
        # elsewhere F2 and Ctrl+R stay the window's
        view.setFocus()
        view.setCurrentIndex(view.chat_model.index(3, 0))
        qtbot.keyClick(view, Qt.Key.Key_F2)
        qtbot.keyClick(view, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
        assert window.fired == ["rename", "reminders"] and view.editor() is None

    run(qloop, body())


# ---- copying and links -------------------------------------------------------------------


def test_html_in_an_answer_is_shown_as_text_and_copied_as_shown(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    source = 'Fine <span style="display:none">rm -rf ~</span> and <b>bold</b>.'

    async def body() -> None:
        view.load_history([ChatMessage("user", "hi"), ChatMessage("assistant", source)])
        await settled(view)
        answer = view.chat_model.items[1]
        shown = view.chat_delegate.layout(answer).texts[0][1].toPlainText()
        assert shown == source  # nothing hidden, nothing styled by the model's markup
        press(view, answer, "copy_message")
        assert QGuiApplication.clipboard().text() == shown

    run(qloop, body())


def test_copy_keeps_the_numbers_and_bullets_a_list_shows(
    view: ChatView, qloop: asyncio.AbstractEventLoop, qtbot: Any
) -> None:
    source = "Steps:\n\n1. Run `ls`\n2. Check:\n   - it lists\n   - [x] done\n"

    async def body() -> None:
        view.load_history([ChatMessage("user", "hi"), ChatMessage("assistant", source)])
        await settled(view)
        answer = view.chat_model.items[1]
        press(view, answer, "copy_message")
        expected = "Steps:\n\n1. Run ls\n2. Check:\n  • it lists\n  • [x] done"
        assert QGuiApplication.clipboard().text() == expected
        view.setFocus()
        view.setCurrentIndex(view.chat_model.index(1, 0))
        QGuiApplication.clipboard().setText("before")
        qtbot.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
        assert QGuiApplication.clipboard().text() == expected

    run(qloop, body())


def test_a_link_in_model_text_is_only_ever_a_link(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    links: list[str] = []
    connects: list[bool] = []
    view.linkActivated.connect(links.append)
    view.connectRequested.connect(lambda: connects.append(True))

    async def body() -> None:
        text = "Read [the docs](deskhand:connect-model) first."
        view.load_history([ChatMessage("user", "hi"), ChatMessage("assistant", text)])
        await settled(view)
        answer = view.chat_model.items[1]
        rect, doc = view.chat_delegate.layout(answer).docs[0]
        spot = next(
            QPointF(x, y)
            for y in range(0, int(rect.height()), 3)
            for x in range(0, int(rect.width()), 3)
            if doc.documentLayout().anchorAt(QPointF(x, y))
        )
        click(view, row_point(view, answer, rect.topLeft() + spot))
        assert links == ["deskhand:connect-model"] and connects == []
        view.handle_event(Error("No model is set up yet.", kind="setup", retryable=True))
        await settled(view)
        setup = view.chat_model.items[-1]
        press(view, setup, "connect")
        assert connects == [True] and links == ["deskhand:connect-model"]

    run(qloop, body())


# ---- versions on a row without an answer -------------------------------------------------


def test_a_regenerate_stopped_before_any_text_keeps_the_switch_on_its_stopped_row(
    view: ChatView, qloop: asyncio.AbstractEventLoop, qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    switched: list[tuple[int, int]] = []
    view.branchRequested.connect(lambda index, branch: switched.append((index, branch)))
    stored = [ChatMessage("user", "Explain it")]
    branch = BranchInfo(1, 2, 2)

    async def body() -> None:
        # live: the fork emptied the tail, the turn was stopped before any text
        view.load_history(stored, branches=[branch])
        view.set_waiting(True)
        view.set_waiting(False)
        view.finish_streaming()
        view.sync_indices(stored, [branch])
        marker = view.chat_model.items[-1]
        assert isinstance(marker, MarkerItem) and marker.branch == branch
        await settled(view)
        press(view, marker, "branch_prev")
        assert switched == [(1, 1)]
        description = view.chat_model.data(
            view.chat_model.index(marker.row, 0), Qt.ItemDataRole.AccessibleDescriptionRole
        )
        assert description == "Marker, version 2 of 2"
        view.setFocus()
        view.setCurrentIndex(view.chat_model.index(marker.row, 0))
        assert _menu_words(view, monkeypatch, qtbot)["Previous version"]
        # a later turn does not put a second switch on its question
        live_turn(view, "Next question", "Next answer.")
        later = [*stored, ChatMessage("user", "Next question")]
        view.sync_indices([*later, ChatMessage("assistant", "Next answer.")], [branch])
        assert [i for i in view.chat_model.items if getattr(i, "branch", None)] == [marker]
        # reopened: the stored marker (or error) carries it
        view.load_history(stored, markers=[Marker(1, "error", "Server down")], branches=[branch])
        error = view.chat_model.items[-1]
        assert isinstance(error, ErrorItem) and error.branch == branch
        await settled(view)
        press(view, error, "branch_prev")
        assert switched == [(1, 1), (1, 1)]
        # a marker before the fork point (an earlier turn's) never gets it
        view.load_history(stored, markers=[Marker(0, "stopped", "Stopped")], branches=[branch])
        assert all(getattr(i, "branch", None) is None for i in view.chat_model.items)

    run(qloop, body())


def test_the_switch_on_a_stopped_row_fits_and_reads(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        view.load_history(
            [ChatMessage("user", "Explain it")],
            markers=[Marker(1, "stopped", "Stopped")],
            branches=[BranchInfo(1, 2, 2)],
        )
        await settled(view)
        marker = view.chat_model.items[-1]
        layout = view.chat_delegate.layout(marker)
        rect = view.visualRect(view.chat_model.index(marker.row, 0))
        assert layout.height == rect.height()
        for hit in layout.hits:
            assert hit.rect.top() >= 0 and hit.rect.bottom() <= layout.height
        assert view.viewport().rect().contains(rect.topLeft() + QPoint(1, 1))

    run(qloop, body())


def test_a_reopened_summary_is_a_notice_not_a_message_to_edit(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    from app.ui.chat.history import SUMMARISED
    from app.ui.chat.model import NoticeItem

    async def body() -> None:
        stored = [*HISTORY[:2], ChatMessage("user", "Second question"), summary(2)]
        stored.append(ChatMessage("assistant", "Second answer."))
        view.load_history(stored)
        notices = [i for i in view.chat_model.items if isinstance(i, NoticeItem)]
        assert [n.message for n in notices] == [SUMMARISED]
        shown = [(i.text, i.index) for i in messages_of(view)]
        assert ("Second answer.", 4) in shown
        assert not any(t.startswith(SUMMARY_PREFIX) for t, _ in shown)

    run(qloop, body())
