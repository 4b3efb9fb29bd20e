"""The GUI's answers for the encrypted secret store (app/core/keyring_fallback.py): explain
once why there is no system keyring, and ask for the passphrase once per session.

Keyring calls run in worker threads; the dialogs must run on the GUI thread. A small
QObject living on the GUI thread receives each question through a blocking queued
connection, so the worker waits for the answer while the UI stays responsive.
Call `install_gui_prompts()` once the QApplication exists (at start-up).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal, Slot
from PySide6.QtWidgets import QApplication, QInputDialog, QLineEdit, QMessageBox, QWidget

from app.core.keyring_fallback import FallbackError, Prompts, install_prompts

TITLE = "Deskhand: encrypted secret store"


@dataclass
class _Question:
    kind: str  # "passphrase" or "consent"
    arg: Any
    answer: Any = None


class _Prompter(QObject):
    asked = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.asked.connect(self._answer, Qt.ConnectionType.BlockingQueuedConnection)

    def ask(self, question: _Question) -> Any:
        if QThread.currentThread() is self.thread():
            self._answer(question)
        else:
            self.asked.emit(question)  # blocks this worker until answered on the GUI thread
        return question.answer

    @Slot(object)
    def _answer(self, question: _Question) -> None:
        parent = QApplication.activeWindow()
        if question.kind == "consent":
            question.answer = ask_consent(parent, question.arg)
        else:
            question.answer = ask_passphrase(parent, creating=question.arg)


def ask_consent(parent: QWidget | None, explanation: str) -> bool:
    answer = QMessageBox.question(
        parent,
        TITLE,
        f"{explanation}\n\nUse an encrypted file for Deskhand's credentials?",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No,
    )
    return answer == QMessageBox.StandardButton.Yes


def ask_passphrase(parent: QWidget | None, *, creating: bool) -> str | None:
    """A password-mode input; when creating the store, asked twice to confirm."""
    prompt = (
        "Choose a passphrase for Deskhand's encrypted secret store.\n"
        "You will be asked for it once each time Deskhand starts."
        if creating
        else "Passphrase for Deskhand's encrypted secret store:"
    )
    first, ok = QInputDialog.getText(parent, TITLE, prompt, QLineEdit.EchoMode.Password)
    if not ok or not first:
        return None
    if creating:
        again, ok = QInputDialog.getText(
            parent, TITLE, "Repeat the passphrase:", QLineEdit.EchoMode.Password
        )
        if not ok:
            return None
        if again != first:
            raise FallbackError("the two passphrases differ; nothing was set up")
    return first


def install_gui_prompts() -> Prompts:
    """Route passphrase and consent questions to dialogs; returns the previous prompts."""
    app = QCoreApplication.instance()
    if app is None:
        raise RuntimeError("install_gui_prompts() needs a QApplication")
    prompter = _Prompter()
    prompter.moveToThread(app.thread())
    prompter.setParent(app)  # lives as long as the application
    return install_prompts(
        Prompts(
            passphrase=lambda creating: prompter.ask(_Question("passphrase", creating)),
            consent=lambda explanation: bool(prompter.ask(_Question("consent", explanation))),
        )
    )
