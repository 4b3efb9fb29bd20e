"""The whole question of a scheduled run (Review… on its notification): what the call is,
where the tool comes from, what it acts on, why it asks, the preview and the full
arguments — all plain text — with Allow once / Deny. Closing it answers nothing: the run
keeps waiting until its budget ends."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.approval import Decision
from app.core.visible import visible

if TYPE_CHECKING:
    from app.core.task_approvals import Pending

TEXT_HEIGHT = 140


def _label(text: str, *, bold: bool = False) -> QLabel:
    label = QLabel(visible(text))
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if bold:
        font = label.font()
        font.setBold(True)
        label.setFont(font)
    return label


def _box(text: str) -> QPlainTextEdit:
    box = QPlainTextEdit(visible(text))
    box.setReadOnly(True)
    box.setMaximumHeight(TEXT_HEIGHT)
    return box


class TaskQuestionDialog(QDialog):
    answered = Signal(object)  # Decision.ALLOW_ONCE or Decision.DENY

    def __init__(self, pending: Pending, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        request = pending.request
        self.setWindowTitle(visible(f"Task “{pending.task_title}” asks"))
        self.setMinimumWidth(520)
        layout = QVBoxLayout(self)
        layout.addWidget(_label(f"The scheduled task “{pending.task_title}” asks to:"))
        layout.addWidget(_label(request.summary or request.tool, bold=True))
        trust = "" if request.trusted else " — a source you have not trusted"
        layout.addWidget(_label(f"{request.tool} from {request.source}{trust}"))
        if request.target:
            layout.addWidget(_label(f"Acts on {request.target}"))
        if request.reason:
            layout.addWidget(_label(f"Why it asks: {request.reason}"))
        if request.preview:
            layout.addWidget(_label("Preview"))
            layout.addWidget(_box(request.preview))
        layout.addWidget(_label("Arguments"))
        self.arguments = _box(request.arguments_text)
        layout.addWidget(self.arguments)
        layout.addWidget(
            _label(
                "Allow once runs this call only; no rule is made. If you do not answer, "
                "the call is denied when the run's time budget ends."
            )
        )
        row = QHBoxLayout()
        row.addStretch(1)
        self.deny_button = QPushButton("Deny")
        self.allow_button = QPushButton("Allow once")
        self.deny_button.setDefault(True)  # Enter never allows by accident
        row.addWidget(self.deny_button)
        row.addWidget(self.allow_button)
        layout.addLayout(row)
        self.deny_button.clicked.connect(lambda: self._answer(Decision.DENY))
        self.allow_button.clicked.connect(lambda: self._answer(Decision.ALLOW_ONCE))

    def _answer(self, decision: Decision) -> None:
        self.answered.emit(decision)
        self.accept()


class TaskQuestionBar(QFrame):
    """Above the composer of a task's conversation while one of its runs waits for an
    answer: what it asks, and Review… (the whole question)."""

    reviewRequested = Signal(str)  # the question's key

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("undoBar")  # the same quiet bar as "Chat deleted · Undo"
        self.label = QLabel()
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setWordWrap(True)
        self.button = QPushButton("Review…")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 6, 8, 6)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.button)
        self.key = ""
        self.button.clicked.connect(lambda: self.reviewRequested.emit(self.key))
        self.hide()

    def show_question(self, key: str, text: str) -> None:
        self.key = key
        self.label.setText(visible(text))
        self.show()

    def clear(self) -> None:
        self.key = ""
        self.hide()
