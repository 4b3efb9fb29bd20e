"""Helpers for chat view tests: points of characters on screen and real mouse events."""

from __future__ import annotations

import asyncio
from typing import Any

from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QMouseEvent, QTextDocument
from PySide6.QtWidgets import QApplication

from app.ui.chat.view import ChatView
from tests.fixtures_qt import wait_until


def _busy(view: ChatView) -> bool:
    """Streamed text not yet shown, or a flush, settle or relayout pass still due."""
    timers = (view._flush_timer, view._settle_timer, view._relayout_timer)
    return bool(view._pending or view._pending_reasoning or any(t.isActive() for t in timers))


async def _idle(view: ChatView, what: str) -> None:
    await asyncio.sleep(0)  # one turn of the loop: what was just posted runs
    await wait_until(lambda: not _busy(view), what=what)


async def settled(view: ChatView) -> None:
    """Lets pending flushes, layouts and the post-paint height pass run (waits for the
    view's timers, not for a fixed time)."""
    await _idle(view, "the view's pending flushes and layouts")
    view.executeDelayedItemsLayout()
    view.grab()  # paints (and so renders) what is on screen
    await _idle(view, "the post-paint height pass")


def row_point(view: ChatView, item: Any, local: QPointF) -> QPoint:
    rect = view.visualRect(view.chat_model.index(item.row, 0))
    return (view.chat_delegate.origin(rect) + local).toPoint()


def char_point(view: ChatView, item: Any, block: int, char: int) -> QPoint:
    """The viewport point in the middle of the line of character `char` of text block
    `block` of `item`, just right of the character's left edge."""
    rect, doc = view.chat_delegate.layout(item).texts[block]
    return row_point(view, item, rect.topLeft() + _in_doc(doc, char))


def _in_doc(doc: QTextDocument, char: int) -> QPointF:
    text_block = doc.findBlock(char)
    layout = text_block.layout()
    offset = char - text_block.position()
    line = layout.lineForTextPosition(offset)
    x = line.cursorToX(offset)
    x = x[0] if isinstance(x, tuple) else x
    return layout.position() + QPointF(x + 1, line.y() + line.height() / 2)


def mouse(
    view: ChatView,
    kind: QEvent.Type,
    pos: QPoint,
    buttons: Qt.MouseButton = Qt.MouseButton.LeftButton,
) -> None:
    """Sends one mouse event to the view's viewport (held buttons included, unlike a
    plain QTest move)."""
    button = Qt.MouseButton.NoButton if kind == QEvent.Type.MouseMove else buttons
    held = Qt.MouseButton.NoButton if kind == QEvent.Type.MouseButtonRelease else buttons
    viewport = view.viewport()
    event = QMouseEvent(
        kind,
        QPointF(pos),
        QPointF(viewport.mapToGlobal(pos)),
        button,
        held,
        Qt.KeyboardModifier.NoModifier,
    )
    QApplication.sendEvent(viewport, event)


def drag(view: ChatView, start: QPoint, end: QPoint, steps: int = 4) -> None:
    mouse(view, QEvent.Type.MouseButtonPress, start)
    for i in range(1, steps + 1):
        point = start + (end - start) * (i / steps)
        mouse(view, QEvent.Type.MouseMove, point)
    mouse(view, QEvent.Type.MouseButtonRelease, end)


def click(view: ChatView, pos: QPoint) -> None:
    mouse(view, QEvent.Type.MouseButtonPress, pos)
    mouse(view, QEvent.Type.MouseButtonRelease, pos)


def double_click(view: ChatView, pos: QPoint) -> None:
    click(view, pos)
    mouse(view, QEvent.Type.MouseButtonDblClick, pos)
    mouse(view, QEvent.Type.MouseButtonRelease, pos)
