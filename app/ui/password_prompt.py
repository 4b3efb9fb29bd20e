"""Asks for an encrypted attachment's password (a PDF with a user password), without a
nested event loop: the dialog opens window-modal and the answer is awaited."""

from __future__ import annotations

import asyncio

from PySide6.QtWidgets import QDialog, QInputDialog, QLineEdit, QWidget

from app.core.documents.model import WRONG_PASSWORD


async def ask_file_password(parent: QWidget, name: str, reason: str) -> str | None:
    """The password the user typed for `name`, or None when they cancelled. It is used for
    this message only: never stored, never shown."""
    dialog = QInputDialog(parent)
    dialog.setObjectName("filePassword")
    dialog.setWindowTitle("Password needed")
    if reason == WRONG_PASSWORD:
        dialog.setLabelText(f"That password does not open {name}. Try again:")
    else:
        dialog.setLabelText(
            f"{name} is encrypted. Type its password to attach it\n"
            "(used for this message only, never saved):"
        )
    dialog.setTextEchoMode(QLineEdit.EchoMode.Password)
    dialog.setOkButtonText("Attach")
    dialog.setCancelButtonText("Leave it out")
    answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

    def finished(result: int) -> None:
        if not answer.done():
            accepted = result == QDialog.DialogCode.Accepted
            answer.set_result(dialog.textValue() if accepted else None)

    dialog.finished.connect(finished)
    dialog.open()
    try:
        return await answer
    finally:
        dialog.setTextValue("")
        dialog.deleteLater()
