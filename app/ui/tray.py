"""The tray icon: Open / New chat / Quit, and notifications (approvals, reminders)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QIcon
from PySide6.QtWidgets import QMenu, QSystemTrayIcon


class Tray(QObject):
    openRequested = Signal()
    newChatRequested = Signal()
    quitRequested = Signal()

    def __init__(self, icon: QIcon, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.available = QSystemTrayIcon.isSystemTrayAvailable()
        self.icon = QSystemTrayIcon(icon, self)
        self.icon.setToolTip("Deskhand")
        self.menu = QMenu()
        for text, signal in (
            ("Open Deskhand", self.openRequested),
            ("New chat", self.newChatRequested),
        ):
            action = QAction(text, self.menu)
            action.triggered.connect(signal)
            self.menu.addAction(action)
        self.menu.addSeparator()
        quit_action = QAction("Quit", self.menu)
        quit_action.triggered.connect(self.quitRequested)
        self.menu.addAction(quit_action)
        self.icon.setContextMenu(self.menu)
        self.icon.activated.connect(self._activated)
        self.icon.messageClicked.connect(self.openRequested)
        #: Notifications sent (title, message) — what the user was told, also for tests.
        self.sent: list[tuple[str, str]] = []
        if self.available:
            self.icon.show()

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason in (
            QSystemTrayIcon.ActivationReason.Trigger,
            QSystemTrayIcon.ActivationReason.DoubleClick,
        ):
            self.openRequested.emit()

    def notify(self, title: str, message: str, timeout_ms: int = 8000) -> None:
        self.sent.append((title, message))
        if self.available and QSystemTrayIcon.supportsMessages():
            self.icon.showMessage(title, message, self.icon.icon(), timeout_ms)

    def hide(self) -> None:
        self.icon.hide()
