"""Review of issue 17's branches in the real window, against the scripted model server:
a regenerate that is stopped or fails must leave the earlier answer reachable, and the
messages' positions must stay right when the history holds a compaction summary."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.core.settings import Settings
from app.ui.chat.model import AssistantMessage, MessageItem, UserMessage
from app.ui.main_window import MainWindow
from tests.fakellm import hang, text
from tests.fixtures_qt import wait_until
from tests.fixtures_runtime import RuntimeFactory

pytestmark = pytest.mark.gui


@pytest.fixture
def make_window(make_runtime: RuntimeFactory, qtbot, qloop):
    made: list[MainWindow] = []

    def make(budget: int = 0) -> MainWindow:
        def configure(settings: Settings) -> None:
            if budget:
                settings.conversation.compact_after_chars = budget

        win = MainWindow(make_runtime(configure=configure))
        qtbot.addWidget(win)
        win.resize(1000, 760)
        win.show()
        made.append(win)
        return win

    yield make
    for win in made:
        win.stop_background_work()


def _send(qtbot, win: MainWindow, message: str) -> None:
    win.composer.edit.setFocus()
    qtbot.keyClicks(win.composer.edit, message)
    qtbot.keyClick(win.composer.edit, Qt.Key.Key_Return)


def _answers(win: MainWindow) -> list[AssistantMessage]:
    return [i for i in win.chat_view.chat_model.items if isinstance(i, AssistantMessage)]


def test_a_regenerate_stopped_before_any_text_keeps_the_earlier_answer_reachable(
    make_window, llm, qtbot, qloop
):
    """Regenerate, then Stop before the new answer starts: the earlier answer went into a
    branch; the view must still offer a way back to it (a version switch somewhere, or the
    answer itself) — now and after reopening the chat."""
    window = make_window()
    llm.add(text("A careful answer worth keeping."))
    llm.add(hang(""))

    async def body():
        _send(qtbot, window, "Explain it")
        await wait_until(lambda: not window.controller.busy, what="the first turn")
        answer = _answers(window)[-1]
        assert answer.index == 1
        window.chat_view.regenerateRequested.emit(answer.index)
        await wait_until(lambda: len(llm.requests) == 2, what="the regenerate request")
        window.controller.stop()
        await wait_until(lambda: not window.controller.busy, what="the stop")

    qloop.run_until_complete(body())

    def reachable() -> bool:
        items = window.chat_view.chat_model.items
        shown = any("worth keeping" in i.plain_text() for i in items)
        switch = any(isinstance(i, MessageItem) and i.branch is not None for i in items)
        return shown or switch

    assert window.controller.branches(), "the earlier answer is archived as a branch"
    assert reachable(), "the earlier answer is archived but nothing in the view leads to it"
    conversation = window.controller.conversation_id
    window.new_chat()
    window.open_conversation(conversation)
    assert reachable(), "after reopening, nothing in the view leads to the earlier answer"


def test_after_compaction_regenerate_redoes_the_answer_it_was_pressed_on(
    make_window, llm, qtbot, qloop
):
    """A compaction summary is a stored user message the live view never shows. The
    indices given to live items after a turn must still point at the right messages, or
    Regenerate on the newest answer rewinds an older turn (and hides the newest question)."""
    window = make_window(budget=2000)
    llm.add(text("Long first answer. " * 160))  # ~3000 characters
    llm.add(text("Summary one."))  # compaction before the second answer
    llm.add(text("Second answer."))
    llm.add(text("Summary two."))  # compaction before the third answer
    llm.add(text("Third answer."))
    llm.add(text("Third answer, again."))

    async def body():
        for question in ("First question", "Second question", "Third question"):
            _send(qtbot, window, question)
            await wait_until(lambda: not window.controller.busy, what=question)
        stored = [m.content for m in window.controller.conversation.messages]
        assert sum(s.startswith("[Summary of earlier conversation") for s in stored) == 2
        items = window.chat_view.chat_model.items
        newest_question = [i for i in items if isinstance(i, UserMessage)][-1]
        newest_answer = _answers(window)[-1]
        assert newest_answer.text == "Third answer."
        messages = window.controller.conversation.messages
        assert newest_question.index is not None and newest_answer.index is not None
        seen["edit opens"] = messages[newest_question.index].content
        window.chat_view.regenerateRequested.emit(newest_answer.index)
        await wait_until(lambda: not window.controller.busy, what="the regenerate")

    seen: dict[str, str] = {}
    qloop.run_until_complete(body())
    stored = [m.content for m in window.controller.conversation.messages]
    assert "Third question" in stored, (
        "Regenerate on the newest answer rewound an older turn; the history is now "
        f"{[m[:30] for m in stored]}"
    )
    assert seen["edit opens"] == "Third question", "Edit on the newest question edits another"
