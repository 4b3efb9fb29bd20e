"""Shown in the chat area while no model provider is configured: offers local servers
found on this machine, or the Providers page."""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING

import shiboken6
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.providers.kinds import ADDRESS_KIND, local_presets, what_deskhand_talks_to
from app.core.visible import one_line
from app.ui.settings.connection import TEST_DEADLINE, classify_failure, list_models, probe_config
from app.ui.settings.presets import host, preset_for, url_problem
from app.ui.settings.widgets import plural, role_label

if TYPE_CHECKING:
    from app.core.local_servers import LocalServer

NO_MODELS = "The server lists no models. Load or download one there, then Connect again."
NEEDS_KEY = "This server wants an API key: add it in Providers settings."


def local_ports() -> str:
    """ "Ollama on 127.0.0.1:11434, LM Studio on 127.0.0.1:1234": where first run looks."""
    return ", ".join(f"{p.name} on {host(p.base_url)}" for p in local_presets())


class SetupCard(QFrame):
    """`useServerRequested(LocalServer)`: a found server's button, or an address typed in
    and checked with Connect (it answered with its models)."""

    useServerRequested = Signal(object)  # a LocalServer
    settingsRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("setupCard")
        self.setFixedWidth(560)  # wrapped labels get their height for this exact width
        self.title = QLabel("Connect a model to get started")
        self.title.setObjectName("setupTitle")
        self.body = QLabel(
            f"Deskhand talks to {what_deskhand_talks_to()}. Your history and settings work "
            "without one."
        )
        self.body.setWordWrap(True)
        self.status = QLabel("Looking for a local model server…")
        self.status.setObjectName("setupStatus")
        self.status.setWordWrap(True)
        self._servers = QVBoxLayout()
        self._servers.setSpacing(6)
        #: The longest Connect waits for the server, in seconds.
        self.connect_timeout = TEST_DEADLINE
        self._connecting: asyncio.Task[None] | None = None
        self.url_edit = QLineEdit()
        self.url_edit.setPlaceholderText("Or type a server address, e.g. 192.168.1.20:11434")
        self.url_edit.setAccessibleName("Server address")
        self.url_edit.textEdited.connect(lambda _: self.show_error(""))
        self.url_edit.returnPressed.connect(self.connect_clicked)
        self.connect_button = QPushButton("Connect")
        self.connect_button.clicked.connect(self.connect_clicked)
        self.url_error = role_label("", "error", wrap=True)
        self.url_error.setTextFormat(Qt.TextFormat.PlainText)
        self.url_error.hide()
        address = QHBoxLayout()
        address.setSpacing(8)
        address.addWidget(self.url_edit, 1)
        address.addWidget(self.connect_button)
        self.settings_button = QPushButton("Open Providers settings…")
        self.settings_button.clicked.connect(self.settingsRequested)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(28, 24, 28, 24)
        layout.setSpacing(12)
        layout.addWidget(self.title)
        layout.addWidget(self.body)
        layout.addWidget(self.status)
        layout.addLayout(self._servers)
        layout.addLayout(address)
        layout.addWidget(self.url_error)
        layout.addWidget(self.settings_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.buttons: list[QPushButton] = []
        self._fit_labels()

    def _fit_labels(self) -> None:
        """Wrapped labels inside a stacked page do not get their height-for-width from the
        layout; give each the height its text needs at the card's fixed width."""
        layout = self.layout()
        assert layout is not None
        margins = layout.contentsMargins()
        inner = self.width() - margins.left() - margins.right()
        for label in (self.title, self.body, self.status, self.url_error):
            label.setMinimumHeight(label.heightForWidth(inner) if label.text() else 0)

    # -- connecting to a typed address --

    def show_error(self, text: str) -> None:
        """What went wrong with the typed address, under it (empty: nothing)."""
        self.url_error.setText(text)
        self.url_error.setVisible(bool(text))
        self.url_edit.setAccessibleDescription(text)
        self._fit_labels()

    def _done_connecting(self) -> None:
        self.connect_button.setText("Connect")
        self.url_edit.setEnabled(True)
        self.url_edit.setFocus()

    def connect_clicked(self) -> None:
        """Connect, or Cancel while connecting."""
        if self._connecting is not None and not self._connecting.done():
            self._connecting.cancel()
            return
        try:
            self._connecting = asyncio.ensure_future(self.connect_to(self.url_edit.text()))
        except RuntimeError:  # no event loop (closing)
            self._connecting = None

    async def connect_to(self, url: str) -> None:
        """Ask the server at `url` (no key) for its models; use it if it has some."""
        self.show_error("")
        if problem := url_problem(url):
            self.show_error(problem)
            return
        config = probe_config(ADDRESS_KIND, url, None)
        self.url_edit.setText(config.base_url)
        self.connect_button.setText("Cancel")
        self.url_edit.setEnabled(False)
        try:
            models = await list_models(config, self.connect_timeout)
        except asyncio.CancelledError:
            if not shiboken6.isValid(self):
                raise
            self._done_connecting()
            self.show_error("Stopped. Nothing was connected.")
            return
        except Exception as exc:
            self._done_connecting()
            failure = classify_failure(exc, stage="list", key=None)
            self.show_error(NEEDS_KEY if failure.field == "key" else failure.text)
            return
        self._done_connecting()
        if not models:
            self.show_error(NO_MODELS)
            return
        preset = preset_for(config.base_url)
        name = preset.name if preset is not None else host(config.base_url)
        from app.core.local_servers import LocalServer  # httpx: off the start-up path

        self.useServerRequested.emit(LocalServer(name, config.base_url, models, config.kind))

    def _use_server(self, server: LocalServer) -> None:
        self.useServerRequested.emit(server)

    def show_servers(self, servers: list[LocalServer]) -> None:
        for button in self.buttons:
            button.deleteLater()
        self.buttons.clear()
        if not servers:
            self.status.setText(
                f"No local server answered ({local_ports()}). "
                "Start one, or add a provider in settings."
            )
            self._fit_labels()
            return
        self.status.setText("Found on this machine:")
        self._fit_labels()
        for server in servers:
            models = len(server.models)
            first = f" — {one_line(server.models[0], 60)}" if server.models else ""
            # a button's text is plain, but "&" marks a shortcut key: show it as itself
            shown = f"Use {one_line(server.name, 60)} ({plural(models, 'model')}{first})"
            button = QPushButton(shown.replace("&", "&&"))
            button.setObjectName("primaryButton")
            button.clicked.connect(functools.partial(self._use_server, server))
            self._servers.addWidget(button)
            self.buttons.append(button)
