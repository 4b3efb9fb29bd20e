"""The small question shown before a link from the conversation opens: the link's real
target in full and why Deskhand asks (both decided by `app.core.links`), with Open, Copy
address and Cancel. Cancel is the default: Enter or Esc never opens a link."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase, QGuiApplication, QTextOption
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.links import LinkDecision


class LinkPrompt(QDialog):
    """Asks before opening `decision.url`; emits `openRequested(url)` on Open."""

    openRequested = Signal(str)

    def __init__(self, decision: LinkDecision, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.decision = decision
        self.setWindowTitle("Open this link?")
        self.setObjectName("linkPrompt")
        self.setMinimumWidth(460)
        layout = QVBoxLayout(self)

        heading = QLabel(
            "This link opens your mail program with:"
            if decision.url.startswith("mailto:")
            else "This link opens in your browser:"
        )
        heading.setTextFormat(Qt.TextFormat.PlainText)
        layout.addWidget(heading)

        #: The full target, wrapped anywhere (an address has no spaces), selectable.
        self.target = QPlainTextEdit(decision.shown)
        self.target.setObjectName("linkTarget")
        self.target.setReadOnly(True)
        self.target.setWordWrapMode(QTextOption.WrapMode.WrapAnywhere)
        self.target.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.target.setTabChangesFocus(True)
        metrics = self.target.fontMetrics()
        per_line = max(20, (self.minimumWidth() - 40) // max(1, metrics.horizontalAdvance("m")))
        lines = max(1, min(8, -(-len(decision.shown) // per_line)))  # longer: it scrolls
        height = metrics.lineSpacing() * lines + 14
        self.target.setFixedHeight(height)
        self.target.setAccessibleName("Link address")
        layout.addWidget(self.target)

        #: Why it asks, one plain-text line each.
        self.reasons: list[QLabel] = []
        for reason in decision.reasons:
            label = QLabel("• " + reason)
            label.setTextFormat(Qt.TextFormat.PlainText)
            label.setWordWrap(True)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            layout.addWidget(label)
            self.reasons.append(label)

        buttons = QDialogButtonBox(self)
        self.open_button = QPushButton("Open")
        self.copy_button = QPushButton("Copy address")
        self.cancel_button = QPushButton("Cancel")
        buttons.addButton(self.open_button, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.cancel_button, QDialogButtonBox.ButtonRole.RejectRole)
        self.open_button.setAutoDefault(False)
        self.copy_button.setAutoDefault(False)
        self.cancel_button.setDefault(True)
        self.open_button.clicked.connect(self._open)
        self.copy_button.clicked.connect(self._copy)
        self.cancel_button.clicked.connect(self.reject)
        layout.addWidget(buttons)
        self.cancel_button.setFocus()

    def _open(self) -> None:
        self.accept()
        self.openRequested.emit(self.decision.url)

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.decision.url)
        self.copy_button.setText("Copied")
