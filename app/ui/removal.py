"""The one question before the user removes something (a task, an agent): plain text,
Cancel the default, the button saying what it does."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QWidget

from app.core.visible import one_line


def confirm_removal(parent: QWidget, kind: str, name: str, consequence: str) -> bool:
    """ "Remove the <kind> “<name>”?" with `consequence` below; True for Remove."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Question)
    box.setWindowTitle(f"Remove {kind} — Deskhand")
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setText(f"Remove the {kind} “{one_line(name, 80)}”?")
    box.setInformativeText(consequence)
    box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(QMessageBox.StandardButton.Cancel)
    box.button(QMessageBox.StandardButton.Yes).setText("Remove")
    return box.exec() == QMessageBox.StandardButton.Yes
