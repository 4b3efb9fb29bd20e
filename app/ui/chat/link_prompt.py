"""The small question shown before a link from the conversation opens: the link's real
target in full and why Deskhand asks (both decided by `app.core.links`), with Open, Copy
address and Cancel. Cancel is the default: Enter or Esc never opens a link.

`open_file_link` opens a document link (a knowledge citation) once decided: checked again
on the disk, at its page where the PDF viewer takes one, else with the system's opener."""

from __future__ import annotations

import logging

from PySide6.QtCore import QProcess, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QFontDatabase, QGuiApplication, QTextOption
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core import links
from app.core.links import FileTarget, LinkDecision
from app.ui.off_gui import run_off_gui

log = logging.getLogger(__name__)


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

        heading = QLabel(_heading(decision.url))
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
        # the box's frame, margins and a scroll bar take about 64 px of the width
        per_line = max(20, (self.minimumWidth() - 64) // max(1, metrics.horizontalAdvance("m")))
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


def _heading(url: str) -> str:
    if url.startswith("mailto:"):
        return "This link opens your mail program with:"
    if url.startswith("file:"):
        return "This link opens a document on this computer:"
    return "This link opens in your browser:"


def open_file_link(decision: LinkDecision) -> str | None:
    """Opens the document of a decided `file:` link; else (nothing opened) says why: the
    disk no longer agrees it may be opened (moved, replaced by a program). A PDF page is
    handed to the PDF viewer when it takes one (finding out which runs a program: off the
    GUI thread); otherwise the file opens with the system's opener, at its start."""
    target = links.file_target(decision.url)
    if isinstance(target, str):
        return target
    if target.page is None:
        _open_plain(target)
        return None

    def find() -> list[str] | None:
        return links.page_command(target, links.pdf_viewer())

    run_off_gui(find, lambda command: _open_at_page(target, command), lambda _: _open_plain(target))
    return None


def _open_at_page(target: FileTarget, command: list[str] | None) -> None:
    if command is not None:
        started, _pid = QProcess.startDetached(command[0], command[1:])
        if started:  # a known viewer, a checked path, no shell
            return
        log.info("the PDF viewer %s did not start; opening the file plainly", command[0])
    _open_plain(target)


def _open_plain(target: FileTarget) -> None:
    QDesktopServices.openUrl(QUrl.fromLocalFile(str(target.path)))
