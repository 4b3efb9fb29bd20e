"""The tray icon: Open / New chat / Reminders / Tasks / Quit, and tray balloons (where no
native notification server answers).

QSystemTrayIcon messages carry no buttons, so the last reminder's Snooze and Done live in
the tray menu ("Last reminder"), enabled once a reminder has been shown. Native
notifications with buttons go through `app.ui.notify_bridge`, which falls back to this.

Without a tray (stock GNOME), `KeepRunningDialog` asks on the first close whether Deskhand
keeps running in the background.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction, QIcon
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QMenu,
    QPushButton,
    QSystemTrayIcon,
    QVBoxLayout,
    QWidget,
)

SNOOZE_MINUTES = (5, 15, 60)
MENU_TEXT_MAX = 40


def snooze_label(minutes: int) -> str:
    return f"Snooze {minutes} min" if minutes < 60 else f"Snooze {minutes // 60} h"


class Tray(QObject):
    openRequested = Signal()
    newChatRequested = Signal()
    remindersRequested = Signal()
    tasksRequested = Signal()
    quitRequested = Signal()
    #: The user clicked the notification that was shown with this key (see `notify`).
    notificationClicked = Signal(str)
    snoozeRequested = Signal(str, int)  # reminder id, minutes
    doneRequested = Signal(str)  # reminder id

    def __init__(self, icon: QIcon, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.available = QSystemTrayIcon.isSystemTrayAvailable()
        self.icon = QSystemTrayIcon(icon, self)
        self.icon.setToolTip("Deskhand")
        self.menu = QMenu()
        for text, signal in (
            ("Open Deskhand", self.openRequested),
            ("New chat", self.newChatRequested),
            ("Reminders…", self.remindersRequested),
            ("Tasks…", self.tasksRequested),
        ):
            action = QAction(text, self.menu)
            action.triggered.connect(signal)
            self.menu.addAction(action)
        self._build_reminder_menu()
        self.menu.addSeparator()
        quit_action = QAction("Quit", self.menu)
        quit_action.triggered.connect(self.quitRequested)
        self.menu.addAction(quit_action)
        self.icon.setContextMenu(self.menu)
        self.icon.activated.connect(self._activated)
        self.icon.messageClicked.connect(self._message_clicked)
        #: Notifications sent (title, message) — what the user was told, also for tests.
        self.sent: list[tuple[str, str]] = []
        #: The key of the notification on screen (only one is shown at a time).
        self.last_key = ""
        self.last_reminder_id: str | None = None
        if self.available:
            self.icon.show()

    def _build_reminder_menu(self) -> None:
        self.reminder_menu = QMenu("Last reminder", self.menu)
        self.reminder_menu.setEnabled(False)
        self.snooze_actions: dict[int, QAction] = {}
        for minutes in SNOOZE_MINUTES:
            action = QAction(snooze_label(minutes), self.reminder_menu)
            action.triggered.connect(lambda _=False, m=minutes: self._snooze(m))
            self.reminder_menu.addAction(action)
            self.snooze_actions[minutes] = action
        self.reminder_menu.addSeparator()
        self.done_action = QAction("Done", self.reminder_menu)
        self.done_action.triggered.connect(self._done)
        self.reminder_menu.addAction(self.done_action)
        self.menu.addMenu(self.reminder_menu)

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason in (
            QSystemTrayIcon.ActivationReason.Trigger,
            QSystemTrayIcon.ActivationReason.DoubleClick,
        ):
            self.openRequested.emit()

    def _message_clicked(self) -> None:
        if self.last_key:
            self.notificationClicked.emit(self.last_key)
        else:
            self.openRequested.emit()

    def notify(self, title: str, message: str, timeout_ms: int = 8000, key: str = "") -> None:
        """Shows a message; `key` comes back through `notificationClicked` if it is clicked."""
        self.sent.append((title, message))
        self.last_key = key
        if self.available and QSystemTrayIcon.supportsMessages():
            self.icon.showMessage(title, message, self.icon.icon(), timeout_ms)

    # ---- the last reminder ----------------------------------------------------------------

    def set_last_reminder(self, reminder_id: str | None, message: str = "") -> None:
        """What "Last reminder" acts on; None disables the submenu (e.g. once it is done)."""
        self.last_reminder_id = reminder_id
        self.reminder_menu.setEnabled(reminder_id is not None)
        title = "Last reminder"
        if reminder_id is not None and message:
            short = message if len(message) <= MENU_TEXT_MAX else message[: MENU_TEXT_MAX - 1] + "…"
            title = f"Last reminder: {short.replace('&', '&&')}"  # & marks a mnemonic
        self.reminder_menu.setTitle(title)

    def _snooze(self, minutes: int) -> None:
        if self.last_reminder_id is not None:
            self.snoozeRequested.emit(self.last_reminder_id, minutes)

    def _done(self) -> None:
        if self.last_reminder_id is not None:
            self.doneRequested.emit(self.last_reminder_id)

    def hide(self) -> None:
        self.icon.hide()


KEEP_RUNNING_QUESTION = "Keep Deskhand running in the background for reminders and scheduled tasks?"
KEEP_RUNNING_DETAIL = (
    "Your desktop shows no tray icon.\n\n"
    "Keep running: the window closes and Deskhand stays on. Start Deskhand again to open "
    "this window; quit from its menu (File → Quit).\n\n"
    "Quit: reminders and scheduled tasks won't fire until Deskhand is started again."
)


class KeepRunningDialog(QDialog):
    """Asked when the window closes and there is no tray to keep Deskhand in. Answers
    through `chosen(keep_running, remember)`; Esc or closing it answers nothing (the
    window stays open)."""

    chosen = Signal(bool, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keep Deskhand running?")
        self.setWindowModality(Qt.WindowModality.WindowModal)
        question = QLabel(KEEP_RUNNING_QUESTION)
        font = question.font()
        font.setBold(True)
        question.setFont(font)
        detail = QLabel(KEEP_RUNNING_DETAIL)
        for label in (question, detail):
            label.setTextFormat(Qt.TextFormat.PlainText)
            label.setWordWrap(True)
        self.remember = QCheckBox("Remember my choice")
        buttons = QDialogButtonBox()
        self.keep_button = QPushButton("Keep running")
        self.keep_button.setDefault(True)
        self.quit_button = QPushButton("Quit")
        buttons.addButton(self.keep_button, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(self.quit_button, QDialogButtonBox.ButtonRole.DestructiveRole)
        self.keep_button.clicked.connect(lambda: self._choose(True))
        self.quit_button.clicked.connect(lambda: self._choose(False))
        layout = QVBoxLayout(self)
        layout.addWidget(question)
        layout.addWidget(detail)
        layout.addWidget(self.remember)
        layout.addWidget(buttons)
        self.setMaximumWidth(520)

    def _choose(self, keep_running: bool) -> None:
        self.accept()
        self.chosen.emit(keep_running, self.remember.isChecked())
