"""The message composer: multi-line input, send/stop button, file attachments."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QKeyEvent, QResizeEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

MAX_LINES_VISIBLE = 10


class ComposerEdit(QPlainTextEdit):
    """Enter sends and Shift+Enter breaks the line (or Ctrl+Enter sends, by setting)."""

    submitted = Signal()
    filesDropped = Signal(list)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.send_key = "enter"
        self.setAcceptDrops(True)
        self.setTabChangesFocus(True)
        self.setPlaceholderText(
            "Ask Deskhand to do something…  (Enter to send, Shift+Enter for a new line)"
        )
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.document().contentsChanged.connect(self._fit_height)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self._fit_height()

    def set_send_key(self, send_key: str) -> None:
        self.send_key = send_key
        hint = "Enter" if send_key == "enter" else "Ctrl+Enter"
        other = "Shift+Enter" if send_key == "enter" else "Enter"
        self.setPlaceholderText(
            f"Ask Deskhand to do something…  ({hint} to send, {other} for a new line)"
        )

    def _fit_height(self) -> None:
        """Grows with the text from one line up to MAX_LINES_VISIBLE, then scrolls."""
        lines = max(1, min(MAX_LINES_VISIBLE, int(self.document().size().height())))
        margins = self.contentsMargins().top() + self.contentsMargins().bottom()
        doc_margin = int(self.document().documentMargin() * 2)
        self.setFixedHeight(self.fontMetrics().lineSpacing() * lines + margins + doc_margin + 6)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_height()  # wrapping changes the line count

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            mods = event.modifiers()
            ctrl = bool(mods & Qt.KeyboardModifier.ControlModifier)
            shift = bool(mods & Qt.KeyboardModifier.ShiftModifier)
            sends = (self.send_key == "enter" and not shift and not ctrl) or (
                self.send_key == "ctrl_enter" and ctrl
            )
            if sends:
                self.submitted.emit()
                return
            if self.send_key == "enter" and shift:
                self.insertPlainText("\n")
                return
        super().keyPressEvent(event)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return source.hasUrls() or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        files = [u.toLocalFile() for u in source.urls() if u.isLocalFile()]
        if files:
            self.filesDropped.emit(files)
            return
        super().insertFromMimeData(source)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        files = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if files:
            self.filesDropped.emit(files)
            event.acceptProposedAction()
        else:
            super().dropEvent(event)


class AttachmentChip(QFrame):
    removed = Signal(str)

    def __init__(self, path: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.path = path
        self.setObjectName("attachmentChip")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 2, 4, 2)
        layout.setSpacing(4)
        label = QLabel(Path(path).name)
        label.setToolTip(path)
        close = QToolButton()
        close.setText("×")
        close.setAutoRaise(True)
        close.setToolTip("Remove attachment")
        close.clicked.connect(lambda: self.removed.emit(self.path))
        layout.addWidget(label)
        layout.addWidget(close)


class Composer(QFrame):
    """Emits `sendRequested(text, attachments)`; the Send button turns into Stop while busy."""

    sendRequested = Signal(str, list)
    stopRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        self._busy = False
        self.attachments: list[str] = []
        self.edit = ComposerEdit()
        self.attach_button = QToolButton()
        self.attach_button.setText("+")
        self.attach_button.setObjectName("attachButton")
        self.attach_button.setToolTip("Attach files (or drop them here)")
        self.attach_button.setAutoRaise(True)
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("sendButton")
        self.send_button.setDefault(False)
        self.send_button.setToolTip("Send (Enter)")
        self._chips = QHBoxLayout()
        self._chips.setContentsMargins(0, 0, 0, 0)
        self._chips.setSpacing(6)
        self._chips.addStretch(1)
        chips_box = QWidget()
        chips_box.setLayout(self._chips)
        self._chips_box = chips_box
        chips_box.hide()

        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(8)
        row.addWidget(self.attach_button, 0, Qt.AlignmentFlag.AlignBottom)
        row.addWidget(self.edit, 1)
        row.addWidget(self.send_button, 0, Qt.AlignmentFlag.AlignBottom)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.setSpacing(6)
        layout.addWidget(chips_box)
        layout.addLayout(row)

        self.edit.submitted.connect(self.submit)
        self.edit.filesDropped.connect(self.add_attachments)
        self.send_button.clicked.connect(self._on_button)
        self.attach_button.clicked.connect(self._pick_files)

    # ---- state --------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._busy

    def set_busy(self, busy: bool) -> None:
        self._busy = busy
        self.send_button.setText("Stop" if busy else "Send")
        self.send_button.setToolTip("Stop generating (Esc)" if busy else "Send (Enter)")
        self.send_button.setProperty("stop", busy)
        self.send_button.style().unpolish(self.send_button)
        self.send_button.style().polish(self.send_button)

    def text(self) -> str:
        return self.edit.toPlainText()

    def set_text(self, text: str) -> None:
        self.edit.setPlainText(text)
        cursor = self.edit.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        self.edit.setTextCursor(cursor)

    # ---- actions ------------------------------------------------------------------------

    def submit(self) -> None:
        if self._busy:
            return
        text = self.text().strip()
        if not text and not self.attachments:
            return
        files = list(self.attachments)
        self.sendRequested.emit(text, files)
        self.edit.clear()
        self.clear_attachments()

    def _on_button(self) -> None:
        if self._busy:
            self.stopRequested.emit()
        else:
            self.submit()

    def _pick_files(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Attach files")
        self.add_attachments(files)

    def add_attachments(self, files: list[str]) -> None:
        for path in files:
            if path and path not in self.attachments and Path(path).is_file():
                self.attachments.append(path)
                chip = AttachmentChip(path)
                chip.removed.connect(self.remove_attachment)
                self._chips.insertWidget(self._chips.count() - 1, chip)
        self._chips_box.setVisible(bool(self.attachments))

    def remove_attachment(self, path: str) -> None:
        if path in self.attachments:
            self.attachments.remove(path)
        for i in reversed(range(self._chips.count())):
            widget = self._chips.itemAt(i).widget()
            if isinstance(widget, AttachmentChip) and widget.path == path:
                widget.deleteLater()
                self._chips.takeAt(i)
        self._chips_box.setVisible(bool(self.attachments))

    def clear_attachments(self) -> None:
        for path in list(self.attachments):
            self.remove_attachment(path)
