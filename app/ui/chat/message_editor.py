"""The inline editor of a user message: its text in an edit box, Send and Cancel.

Placed by the chat view over the message it edits (an index widget). Enter or Ctrl+Enter
sends, Shift+Enter starts a new line, Esc cancels: the editor takes these keys before the
window's shortcuts (Esc there stops a running answer). While a turn runs, Send waits.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QObject, QSize, Qt, Signal
from PySide6.QtGui import QFontMetricsF, QKeyEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.ui.chat.style import ChatTheme

EDITOR_MIN_LINES = 2
EDITOR_MAX_LINES = 10
SEND_TIP = "Send the changed message; the answers after it are redone"
#: Send's tooltip while a turn runs.
WAIT_TIP = "Wait for the answer to finish (or stop it)"
#: The keys the editor handles itself, before any window shortcut.
_OWN_KEYS = (Qt.Key.Key_Escape, Qt.Key.Key_Return, Qt.Key.Key_Enter)


class MessageEditor(QWidget):
    sent = Signal(str)
    cancelled = Signal()
    #: The editor wants another height (its text grew or shrank).
    heightChanged = Signal(int)

    def __init__(self, text: str, theme: ChatTheme, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("messageEditor")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground)
        self._theme = theme
        self._busy = False
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 10, 10, 10)
        layout.setSpacing(8)
        self.edit = QPlainTextEdit(self)
        self.edit.setObjectName("messageEditorText")
        self.edit.setPlainText(text)
        self.edit.setFont(theme.font)
        self.edit.setTabChangesFocus(True)
        self.edit.setAccessibleName("Edit your message")
        self.edit.installEventFilter(self)
        layout.addWidget(self.edit)
        row = QHBoxLayout()
        row.setSpacing(8)
        self.problem = QLabel(self)
        self.problem.setObjectName("messageEditorProblem")
        self.problem.setTextFormat(Qt.TextFormat.PlainText)
        self.problem.setMinimumWidth(1)  # a narrow editor clips it rather than the buttons
        self.problem.hide()
        row.addWidget(self.problem)
        row.addStretch(1)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setToolTip("Keep the message as it was (Esc)")
        self.cancel_button.clicked.connect(self.cancelled.emit)
        self.send_button = QPushButton("Send", self)
        self.send_button.setProperty("accent", True)
        self.send_button.setToolTip(SEND_TIP)
        self.send_button.clicked.connect(self.send)
        row.addWidget(self.cancel_button)
        row.addWidget(self.send_button)
        layout.addLayout(row)
        self.setStyleSheet(
            f"QWidget#messageEditor {{ background: {theme.bubble.name()};"
            f" border: 1px solid {theme.accent.name()}; border-radius: 12px; }}"
            f" QPlainTextEdit#messageEditorText {{ background: {theme.background.name()};"
            f" color: {theme.text.name()}; border: 1px solid {theme.card_border.name()};"
            " border-radius: 6px; padding: 4px; }"
            f" QLabel#messageEditorProblem {{ color: {theme.error.name()}; }}"
        )
        self.edit.textChanged.connect(self._changed)
        self._changed()

    def text(self) -> str:
        return self.edit.toPlainText()

    def send(self) -> None:
        if self._busy:  # Enter while a turn runs (the button is disabled)
            self.show_problem(WAIT_TIP)
        elif self.text().strip():
            self.sent.emit(self.text())

    def set_busy(self, busy: bool) -> None:
        """While a turn runs the edit cannot be sent: Send is disabled and says why."""
        self._busy = busy
        if not busy and self.problem.text() == WAIT_TIP:
            self.show_problem("")
        self._changed()

    def show_problem(self, text: str) -> None:
        """Says, next to Send, why the edit was not sent (the text stays)."""
        self.problem.setText(text)
        self.problem.setToolTip(text)
        self.problem.setVisible(bool(text))

    def start(self) -> None:
        """Focuses the text with the cursor at its end."""
        self.edit.setFocus(Qt.FocusReason.OtherFocusReason)
        cursor = self.edit.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        self.edit.setTextCursor(cursor)

    def wanted_height(self) -> int:
        metrics = QFontMetricsF(self._theme.font)
        lines = self.edit.document().blockCount()
        width = max(100, self.edit.viewport().width() or 500)
        for block in self.text().split("\n"):
            lines += int(metrics.horizontalAdvance(block) // width)
        shown = max(EDITOR_MIN_LINES, min(EDITOR_MAX_LINES, lines))
        box = shown * metrics.lineSpacing() + 2 * self.edit.document().documentMargin() + 14
        buttons = self.send_button.sizeHint().height()
        return math.ceil(box + buttons + 8 + 20)

    def sizeHint(self) -> QSize:
        # The tree view makes a row at least as tall as its index widget's size hint: the
        # text box's own hint (many lines) would leave a gap under the editor.
        return QSize(super().sizeHint().width(), self.wanted_height())

    def minimumSizeHint(self) -> QSize:
        return QSize(super().minimumSizeHint().width(), min(self.wanted_height(), 60))

    def _changed(self) -> None:
        self.send_button.setEnabled(bool(self.text().strip()) and not self._busy)
        self.send_button.setToolTip(WAIT_TIP if self._busy else SEND_TIP)
        wanted = self.wanted_height()
        if wanted != self.height():
            self.heightChanged.emit(wanted)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.edit and event.type() == QEvent.Type.ShortcutOverride:
            assert isinstance(event, QKeyEvent)
            if event.key() in _OWN_KEYS:
                event.accept()  # ours, not the window's Esc (Stop)
                return True
        if watched is self.edit and event.type() == QEvent.Type.KeyPress:
            assert isinstance(event, QKeyEvent)
            if event.key() == Qt.Key.Key_Escape:
                self.cancelled.emit()
                return True
            enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
            if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self.send()
                return True
        return super().eventFilter(watched, event)
