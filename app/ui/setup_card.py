"""Shown in the chat area while no model provider is configured: offers to run a model on
this computer (download the recommended one, or use a GGUF file), local servers found on
this machine, an address to type, or the Providers page."""

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
from app.ui.engine_models import (
    LOCAL_NOTE,
    TOO_LITTLE_MEMORY,
    DownloadControl,
    ModelsSource,
    Offer,
    choose_model_file,
    recommended_offer,
)
from app.ui.off_gui import run_off_gui
from app.ui.settings.connection import TEST_DEADLINE, classify_failure, list_models, probe_config
from app.ui.settings.presets import host, preset_for, url_problem
from app.ui.settings.widgets import plural, role_label

if TYPE_CHECKING:
    from app.core.engine.models import LocalModels
    from app.core.engine.store import LocalModel
    from app.core.local_servers import LocalServer

NO_MODELS = "The server lists no models. Load or download one there, then Connect again."
NEEDS_KEY = "This server wants an API key: add it in Providers settings."


def local_ports() -> str:
    """ "Ollama on 127.0.0.1:11434, LM Studio on 127.0.0.1:1234": where first run looks."""
    return ", ".join(f"{p.name} on {host(p.base_url)}" for p in local_presets())


class SetupCard(QFrame):
    """`useServerRequested(LocalServer)`: a found server's button, or an address typed in
    and checked with Connect (it answered with its models). `modelReady(LocalModel)`: a
    model was downloaded, or a model file checked and added, to run on this computer.
    `modelsRequested()`: "Other models…" (Settings → Providers)."""

    useServerRequested = Signal(object)  # a LocalServer
    settingsRequested = Signal()
    modelReady = Signal(object)  # a LocalModel
    modelsRequested = Signal()

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
        self._models: ModelsSource | None = None
        self.local_heading = QLabel("Run a model on this computer")
        self.local_heading.setProperty("role", "section")
        self.local_note = QLabel("")
        self.local_note.setObjectName("setupStatus")
        self.local_note.setWordWrap(True)
        self.local_note.hide()
        self.download = DownloadControl(self._local_models)
        self.download.set_offer(None)
        self.download.downloaded.connect(self.modelReady)
        self.download.textChanged.connect(self._fit_labels)
        self.file_button = QPushButton("Use a model file…")
        self.file_button.setToolTip("A GGUF model file you already have; it stays where it is")
        self.file_button.clicked.connect(self.use_model_file)
        self.other_button = QPushButton("Other models…")
        self.other_button.setObjectName("linkButton")
        self.other_button.setToolTip("Choose another model in Settings → Providers")
        self.other_button.clicked.connect(self.modelsRequested)
        self.file_error = role_label("", "error", wrap=True)
        self.file_error.setTextFormat(Qt.TextFormat.PlainText)
        self.file_error.hide()
        local_buttons = QHBoxLayout()
        local_buttons.setSpacing(8)
        local_buttons.addWidget(self.file_button)
        local_buttons.addWidget(self.other_button)
        local_buttons.addStretch(1)
        self.server_heading = QLabel("Or connect to a model server")
        self.server_heading.setProperty("role", "section")
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
        layout.addSpacing(4)
        layout.addWidget(self.local_heading)
        layout.addWidget(self.local_note)
        layout.addWidget(self.download)
        layout.addLayout(local_buttons)
        layout.addWidget(self.file_error)
        layout.addSpacing(4)
        layout.addWidget(self.server_heading)
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
        labels = (self.title, self.body, self.local_note, self.file_error, self.status)
        for label in (*labels, *self.download.labels(), self.url_error):
            label.setMinimumHeight(label.heightForWidth(inner) if label.text() else 0)

    # -- a model on this computer --

    def set_models_source(self, source: ModelsSource) -> None:
        """Where the built-in engine's models are (the runtime's `LocalModels`)."""
        self._models = source

    def _local_models(self) -> LocalModels:
        assert self._models is not None, "set_models_source first"
        return self._models()

    def look_for_model(self) -> None:
        """Find the catalogue's model for this computer (on a worker) and offer it."""
        if self._models is None or self.download.busy():
            return
        source = self._models
        run_off_gui(lambda: recommended_offer(source()), self._offer_found, self._offer_failed)

    def _offer_found(self, offer: Offer | None) -> None:
        if shiboken6.isValid(self):
            self.show_offer(offer)

    def _offer_failed(self, exc: BaseException) -> None:
        from app.core.engine.models import ModelError

        if not shiboken6.isValid(self):
            return
        self.download.set_offer(None)
        if isinstance(exc, ModelError):  # the engine is not installed: say how to install
            self.file_button.setVisible(False)
            self.show_local_note(str(exc))
        else:
            self.show_local_note(f"The models Deskhand offers could not be read: {exc}")

    def show_offer(self, offer: Offer | None) -> None:
        """The download button for `offer`; None: this computer has too little memory."""
        if self.download.busy():
            return
        self.download.set_offer(offer)
        self.show_local_note(LOCAL_NOTE if offer is not None else TOO_LITTLE_MEMORY)

    def show_local_note(self, text: str) -> None:
        self.local_note.setText(text)
        self.local_note.setVisible(bool(text))
        self._fit_labels()

    def show_file_error(self, text: str) -> None:
        """Why the chosen model file cannot be used, under its button (empty: nothing)."""
        self.file_error.setText(text)
        self.file_error.setVisible(bool(text))
        self.file_button.setAccessibleDescription(text)
        self._fit_labels()

    def use_model_file(self) -> None:
        """A GGUF file the user has: checked (on a worker) and added where it is."""
        path = choose_model_file(self)
        if path is None or self._models is None:
            return
        self.show_file_error("")
        self.file_button.setEnabled(False)
        source = self._models
        run_off_gui(lambda: source().add_file(path), self._file_added, self._file_failed)

    def _file_added(self, model: LocalModel) -> None:
        if shiboken6.isValid(self):
            self.file_button.setEnabled(True)
            self.modelReady.emit(model)

    def _file_failed(self, exc: BaseException) -> None:
        if shiboken6.isValid(self):
            self.file_button.setEnabled(True)
            self.show_file_error(str(exc))

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
