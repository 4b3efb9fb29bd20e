"""Messages are text: selecting with the mouse (drag, double- and triple-click), select
all, copying as plain text, and the painted highlight."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QColor, QGuiApplication

from app.core.events import TextDelta, TurnFinished
from app.core.providers.base import ChatMessage, ToolCallRequest, Usage
from app.ui.chat.model import AssistantMessage, UserMessage
from app.ui.chat.view import ChatView
from tests.chat_helpers import char_point, click, double_click, drag, mouse, row_point, settled

pytestmark = pytest.mark.gui

ANSWER = """Here is a **summary** with `inline code` and a [link](https://example.org/docs).

```python
def add(a: int, b: int) -> int:
    return a + b
```

| name | value |
|------|-------|
| a    | 1     |

Last words here."""


@pytest.fixture
def view(qtbot: Any, qloop: asyncio.AbstractEventLoop) -> Iterator[ChatView]:
    widget = ChatView()
    qtbot.addWidget(widget)
    widget.resize(900, 800)
    widget.show()
    yield widget


def run(loop: asyncio.AbstractEventLoop, body: Coroutine[Any, Any, None]) -> None:
    loop.run_until_complete(asyncio.wait_for(body, 20))


def _conversation() -> list[ChatMessage]:
    return [
        ChatMessage("user", "First question"),
        ChatMessage("assistant", ANSWER),
        ChatMessage("user", "Second question, alpha beta gamma\nand a second line"),
    ]


def _items(view: ChatView) -> tuple[UserMessage, AssistantMessage, UserMessage]:
    first, answer, second = view.chat_model.items
    assert isinstance(first, UserMessage) and isinstance(answer, AssistantMessage)
    assert isinstance(second, UserMessage)
    return first, answer, second


def test_a_drag_selects_across_paragraphs_code_table_and_messages(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        view.load_history(_conversation())
        await settled(view)
        _, answer, second = _items(view)
        text0 = view.chat_delegate.layout(answer).texts[0][1].toPlainText()
        start = char_point(view, answer, 0, text0.index("summary"))
        end = char_point(view, second, 0, len("Second q"))
        drag(view, start, end)
        assert view.has_selection()
        selected = view.selected_text()
        assert selected.startswith("summary with inline code and a link.\n\n")
        # the code exactly, with its newlines and indentation, a blank line around it
        assert "\n\ndef add(a: int, b: int) -> int:\n    return a + b\n\n" in selected
        assert "name" in selected and "value" in selected  # the table's cells
        assert "Last words here.\n\nSecond q" in selected
        assert selected.endswith("Second q")
        QGuiApplication.clipboard().setText("before")
        view.copy()
        assert QGuiApplication.clipboard().text() == selected

    run(qloop, body())


def test_the_selection_is_painted_in_the_palettes_highlight_colour(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    def has(image: Any, point: QPoint, color: QColor) -> bool:
        return any(
            QColor(image.pixel(point.x() + dx, point.y() + dy)).rgb() == color.rgb()
            for dx in range(-3, 4)
            for dy in range(-3, 4)
        )

    async def body() -> None:
        view.load_history(_conversation())
        await settled(view)
        first, _, _ = _items(view)
        highlight = view.chat_delegate.theme.highlight
        point = char_point(view, first, 0, 2)
        assert not has(view.viewport().grab().toImage(), point, highlight)
        drag(view, char_point(view, first, 0, 0), char_point(view, first, 0, 10))
        assert view.selected_text() == "First ques"
        assert has(view.viewport().grab().toImage(), point, highlight)
        # clicking elsewhere clears it
        click(view, QPoint(5, view.viewport().height() - 5))
        assert not view.has_selection()
        assert not has(view.viewport().grab().toImage(), point, highlight)

    run(qloop, body())


def test_double_click_selects_a_word_and_triple_click_a_paragraph(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        view.load_history(_conversation())
        await settled(view)
        _, answer, second = _items(view)
        text = second.text
        word = char_point(view, second, 0, text.index("beta") + 1)
        double_click(view, word)
        assert view.selected_text() == "beta"
        mouse(view, QEvent.Type.MouseButtonPress, word)  # the third click
        mouse(view, QEvent.Type.MouseButtonRelease, word)
        assert view.selected_text() == "Second question, alpha beta gamma"
        # in an answer, a double-click on a code identifier selects it
        code = view.chat_delegate.layout(answer).texts[1][1].toPlainText()
        double_click(view, char_point(view, answer, 1, code.index("add") + 1))
        assert view.selected_text() == "add"

    run(qloop, body())


def test_select_all_copies_the_whole_conversation_as_plain_text(
    view: ChatView, qloop: asyncio.AbstractEventLoop, qtbot: Any
) -> None:
    messages = [
        ChatMessage("user", "Hi there"),
        ChatMessage(
            "assistant",
            "Sure.",
            tool_calls=[ToolCallRequest("c1", "fs_list", '{"path": "."}')],
        ),
        ChatMessage("tool", "a.txt", tool_call_id="c1"),
        ChatMessage("assistant", "First *para*.\n\n```py\nx = 1\n\ny = 2\n```\n\nLast para."),
    ]

    async def body() -> None:
        view.load_history(messages)
        await settled(view)
        view.setFocus()
        qtbot.keyClick(view, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
        assert view.has_selection()
        QGuiApplication.clipboard().setText("before")
        qtbot.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
        # tool cards are not message text; code keeps its blank line
        assert QGuiApplication.clipboard().text() == (
            "Hi there\n\nSure.\n\nFirst para.\n\nx = 1\n\ny = 2\n\nLast para."
        )
        qtbot.keyClick(view, Qt.Key.Key_Escape)
        assert not view.has_selection()

    run(qloop, body())


def test_select_all_in_a_long_conversation_lays_out_nothing_new(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    messages = [
        ChatMessage("user", f"question {i}")
        if i % 2 == 0
        else ChatMessage("assistant", f"**a{i}**")
        for i in range(4000)
    ]

    async def body() -> None:
        view.load_history(messages)
        await settled(view)
        built = view.chat_delegate.layouts_built
        view.selectAll()
        text = view.selected_text()
        assert view.chat_delegate.layouts_built - built <= 2  # only the first row, if at all
        assert text.startswith("question 0\n\na1\n\nquestion 2")
        assert text.endswith("question 3998\n\na3999")

    run(qloop, body())


def test_a_drag_that_starts_on_a_link_selects_and_a_click_still_opens_it(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    opened: list[str] = []
    view.linkActivated.connect(opened.append)

    async def body() -> None:
        view.handle_event(TextDelta("Read [the docs](https://example.org/x) now, please."))
        view.handle_event(TurnFinished(Usage(), "end_turn"))
        await settled(view)
        item = view.chat_model.items[0]
        doc = view.chat_delegate.layout(item).texts[0][1]
        on_link = char_point(view, item, 0, doc.toPlainText().index("docs"))
        drag(view, on_link, char_point(view, item, 0, doc.toPlainText().index("please")))
        assert opened == []
        assert view.selected_text() == "docs now, "
        click(view, on_link)
        assert opened == ["https://example.org/x"]
        assert not view.has_selection()

    run(qloop, body())


def test_the_mouse_pointer_is_an_i_beam_over_text_and_a_hand_over_buttons(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    def shape_at(point: QPoint) -> Qt.CursorShape:
        mouse(view, QEvent.Type.MouseMove, point, Qt.MouseButton.NoButton)
        return view.viewport().cursor().shape()

    async def body() -> None:
        view.load_history(_conversation())
        await settled(view)
        first, answer, _ = _items(view)
        assert shape_at(char_point(view, first, 0, 3)) == Qt.CursorShape.IBeamCursor
        layout = view.chat_delegate.layout(answer)
        copy = next(h for h in layout.hits if h.action == "copy_code")
        assert shape_at(row_point(view, answer, copy.rect.center())) == (
            Qt.CursorShape.PointingHandCursor
        )
        assert shape_at(row_point(view, first, QPointF(2, 2))) == Qt.CursorShape.ArrowCursor

    run(qloop, body())
