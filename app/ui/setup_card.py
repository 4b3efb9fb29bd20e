"""Shown in the chat area while no model provider is configured: offers local servers
found on this machine, or the Providers page."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QLabel, QPushButton, QVBoxLayout, QWidget


class SetupCard(QFrame):
    useServerRequested = Signal(object)  # a LocalServer
    settingsRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("setupCard")
        self.setFixedWidth(560)  # wrapped labels get their height for this exact width
        self.title = QLabel("Connect a model to get started")
        self.title.setObjectName("setupTitle")
        self.body = QLabel(
            "Deskhand talks to any OpenAI-compatible server (Ollama, LM Studio, llama.cpp, "
            "vLLM, OpenAI, OpenRouter) or to Anthropic. Your history and settings work "
            "without one."
        )
        self.body.setWordWrap(True)
        self.status = QLabel("Looking for a local model server…")
        self.status.setObjectName("setupStatus")
        self.status.setWordWrap(True)
        self._servers = QVBoxLayout()
        self._servers.setSpacing(6)
        self.settings_button = QPushButton("Open Providers settings…")
        self.settings_button.clicked.connect(self.settingsRequested)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(28, 24, 28, 24)
        layout.setSpacing(12)
        layout.addWidget(self.title)
        layout.addWidget(self.body)
        layout.addWidget(self.status)
        layout.addLayout(self._servers)
        layout.addWidget(self.settings_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.buttons: list[QPushButton] = []
        self._fit_labels()

    def _fit_labels(self) -> None:
        """Wrapped labels inside a stacked page do not get their height-for-width from the
        layout; give each the height its text needs at the card's fixed width."""
        margins = self.layout().contentsMargins()
        inner = self.width() - margins.left() - margins.right()
        for label in (self.title, self.body, self.status):
            label.setMinimumHeight(label.heightForWidth(inner))

    def show_servers(self, servers: list[Any]) -> None:
        for button in self.buttons:
            button.deleteLater()
        self.buttons.clear()
        if not servers:
            self.status.setText(
                "No local server answered on 127.0.0.1 (Ollama :11434, LM Studio :1234). "
                "Start one, or add a provider in settings."
            )
            self._fit_labels()
            return
        self.status.setText("Found on this machine:")
        self._fit_labels()
        for server in servers:
            models = len(server.models)
            first = f" — {server.models[0]}" if server.models else ""
            button = QPushButton(f"Use {server.name} ({models} models{first})")
            button.setObjectName("primaryButton")
            button.clicked.connect(lambda _=False, s=server: self.useServerRequested.emit(s))
            self._servers.addWidget(button)
            self.buttons.append(button)
