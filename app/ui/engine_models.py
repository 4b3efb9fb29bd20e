"""The window's views of the built-in engine's models: a download control (button, progress
row, Cancel, the error under it) shared by the first-run card and Settings → Providers, and
the Providers page's panel listing the models with their state, Use and Remove.

What is done with the models is `LocalModels`' (app/core/engine/models.py): these views
call it on worker threads and show what comes back. Nothing from app/core/engine is
imported here at module level: the window opens without it.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import shiboken6
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.plain_units import duration_text, size_text
from app.core.visible import one_line
from app.ui.off_gui import run_off_gui
from app.ui.removal import confirm_removal
from app.ui.settings.widgets import muted_label, role_label

if TYPE_CHECKING:
    from app.core.engine.catalogue import CatalogueModel, Machine
    from app.core.engine.download import DownloadProgress
    from app.core.engine.models import LocalModels, ModelState
    from app.core.engine.store import LocalModel

log = logging.getLogger(__name__)

#: Where the models come from: the runtime's `LocalModels`, asked for only when needed
#: (building it is cheap, but its module is not imported while the window opens).
ModelsSource = Callable[[], "LocalModels"]

LOCAL_NOTE = "Downloaded once, then it runs here: what you type stays on this computer."
TOO_LITTLE_MEMORY = (
    "This computer has too little memory for the models Deskhand offers. Connect to a "
    "model server instead, or use a smaller model file you have."
)


# ---- words -------------------------------------------------------------------------------


def time_left_text(seconds: float | None) -> str:
    """ "about 39 s left", "about 3 min left"; "" while not known."""
    return "" if seconds is None else f"about {duration_text(seconds)} left"


def progress_text(progress: DownloadProgress) -> str:
    """ "412 of 1,117 MB · 18 MB/s · about 39 s left"."""
    parts = [f"{progress.done / 1e6:,.0f} of {progress.total / 1e6:,.0f} MB"]
    if progress.bytes_per_s > 0:
        parts.append(f"{progress.bytes_per_s / 1e6:,.0f} MB/s")
    if left := time_left_text(progress.eta_s):
        parts.append(left)
    return " · ".join(parts)


def state_text(state: ModelState) -> str:
    """ "Downloaded" or "Loaded · 1.2 GB in use", with what the engine chose and why it
    stopped the last time it died."""
    lines = [f"Loaded · {size_text(state.rss_bytes)} in use" if state.loaded else "Downloaded"]
    if state.loaded and state.choice:
        lines[0] += f" · {state.choice}"
    if state.last_exit:
        lines.append(f"Stopped last time: {state.last_exit}")
    return "\n".join(lines)


def source_text(model: LocalModel) -> str:
    """Where the file came from, and where it is when it is the user's own."""
    if not model.owned:
        return f"Your file: {model.path}"
    if model.repo:
        return f"Downloaded from {model.repo}"
    return "Downloaded"


@dataclass(frozen=True)
class Offer:
    """A model the user can download: `ref` is what `LocalModels.pull` takes (a catalogue
    id, or "owner/repo/file.gguf")."""

    ref: str
    name: str
    size: int | None = None
    #: Said next to it in the list (e.g. "recommended", "needs 5.5 GB of memory").
    note: str = ""
    fits: bool = True
    #: Part of it was downloaded before (kept after a Cancel or a cut connection).
    partial: bool = False

    @property
    def label(self) -> str:
        size = f" ({size_text(self.size)})" if self.size else ""
        verb = "Resume download of" if self.partial else "Download"
        return f"{verb} {one_line(self.name, 60)}{size}"

    @classmethod
    def of(
        cls,
        model: CatalogueModel,
        machine: Machine | None = None,
        models: LocalModels | None = None,
    ) -> Offer:
        """`machine`: mark it when it is too large for it; `models`: see whether a partial
        download of it is waiting (blocking)."""
        fits = machine is None or model.ram_bytes <= machine.ram_total
        note = "" if fits else f"needs {size_text(model.ram_bytes)} of memory: too much here"
        partial = models is not None and models.has_partial(model.file)
        return cls(model.id, model.name, model.size, note, fits, partial)


def recommended_offer(models: LocalModels) -> Offer | None:
    """The catalogue's model for this computer, as an offer (blocking: call off the GUI);
    ModelError when the engine is not installed."""
    from app.core.engine.models import ModelError, engine_missing

    missing = engine_missing()
    if missing:
        raise ModelError(f"{missing[0].upper()}{missing[1:]}.")
    entry = models.recommended()
    return Offer.of(entry, models=models) if entry is not None else None


def catalogue_offers(models: LocalModels) -> list[Offer]:
    """The catalogue's chat models, the recommended one first and said so, the ones too
    large for this computer marked (blocking: call off the GUI)."""
    offers = []
    for found in models.offers(purpose="chat"):
        model = found.model
        note = (
            "recommended"
            if found.recommended
            else ""
            if found.fits
            else f"needs {size_text(model.ram_bytes)} of memory: too much here"
        )
        offers.append(Offer(model.id, model.name, model.size, note, found.fits, found.partial))
    return offers


# ---- downloading -------------------------------------------------------------------------


class Download(QObject):
    """One `LocalModels.pull` on a thread of its own (a download can take many minutes: it
    does not hold one of the window's few workers). Its signals are delivered queued, on
    the GUI thread; nothing here touches a widget from the worker."""

    progressed = Signal(object)  # DownloadProgress
    succeeded = Signal(object)  # LocalModel
    #: (message, cancelled, resumable)
    failed = Signal(str, bool, bool)

    def __init__(self, models: LocalModels, ref: str) -> None:
        super().__init__()
        self.models = models
        self.ref = ref
        self.cancel_event = threading.Event()
        self._thread = threading.Thread(target=self._run, name="deskhand-download", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        self.cancel_event.set()

    def running(self) -> bool:
        return self._thread.is_alive()

    def _emit(self, signal: Any, *args: Any) -> None:
        if shiboken6.isValid(self):  # the window may be gone by now
            signal.emit(*args)

    def _run(self) -> None:
        from app.core.engine.download import DownloadCancelled, DownloadError
        from app.core.engine.models import ModelError

        try:
            model = self.models.pull(
                self.ref,
                progress=lambda p: self._emit(self.progressed, p),
                cancel=self.cancel_event,
            )
        except DownloadCancelled as exc:
            self._emit(self.failed, str(exc), True, True)
        except DownloadError as exc:
            self._emit(self.failed, str(exc), False, exc.resumable)
        except (ModelError, OSError) as exc:
            self._emit(self.failed, str(exc), False, False)
        except Exception as exc:  # a bug must not end silently in a thread
            log.exception("downloading %s failed", self.ref)
            self._emit(self.failed, f"The download failed: {exc}", False, False)
        else:
            self._emit(self.succeeded, model)


class DownloadControl(QWidget):
    """ "Download <name> (<size>)", then a progress bar with "412 of 1,117 MB · 18 MB/s ·
    about 39 s left" and Cancel; after Cancel "Resume download" (the partial file is kept),
    after a failure the reason under it and the button to try again.
    `downloaded(LocalModel)` when the model is in place."""

    downloaded = Signal(object)  # LocalModel
    #: A text under the button changed (a fixed-width card fits its labels again).
    textChanged = Signal()

    def __init__(self, source: ModelsSource, *, primary: bool = True) -> None:
        super().__init__()
        self._source = source
        self.offer: Offer | None = None
        self.download: Download | None = None
        self.button = QPushButton("Download")
        if primary:
            self.button.setObjectName("primaryButton")
        self.button.clicked.connect(self.start)
        self.bar = QProgressBar()
        self.bar.setTextVisible(False)
        self.bar.setFixedHeight(8)
        self.bar.setAccessibleName("Download progress")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the download; what came so far is kept")
        self.cancel_button.clicked.connect(self.cancel)
        self.status = muted_label("", wrap=True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.error = role_label("", "error", wrap=True)
        self.error.setTextFormat(Qt.TextFormat.PlainText)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.progress_row = QWidget()
        row = QHBoxLayout(self.progress_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(10)
        row.addWidget(self.bar, 1)
        row.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.progress_row)
        layout.addWidget(self.status)
        layout.addWidget(self.error)
        self.progress_row.hide()
        self.status.hide()
        self.error.hide()

    def set_offer(self, offer: Offer | None) -> None:
        """What the button downloads (None: nothing to offer: the button is hidden)."""
        if self.busy():
            return
        self.offer = offer
        self.button.setVisible(offer is not None)
        self.button.setText(offer.label.replace("&", "&&") if offer else "Download")
        self.show_error("")

    def labels(self) -> tuple[QLabel, ...]:
        """Its wrapped labels."""
        return (self.status, self.error)

    def busy(self) -> bool:
        return self.download is not None and self.download.running()

    def show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.setVisible(bool(text))
        self.button.setAccessibleDescription(text)
        self.textChanged.emit()

    def start(self) -> None:
        if self.offer is None or self.busy():
            return
        self.show_error("")
        download = self.download = Download(self._source(), self.offer.ref)
        queued = Qt.ConnectionType.QueuedConnection
        download.progressed.connect(self._on_progress, queued)
        download.succeeded.connect(self._on_done, queued)
        download.failed.connect(self._on_failed, queued)
        self.button.hide()
        self.bar.setRange(0, 0)  # busy until the first report says how large it is
        self.status.setText(f"Starting the download of {one_line(self.offer.name, 60)}…")
        self.progress_row.show()
        self.status.show()
        self.cancel_button.setEnabled(True)
        self.cancel_button.setFocus()
        self.textChanged.emit()
        download.start()

    def cancel(self) -> None:
        if self.download is not None:
            self.download.cancel()
            self.cancel_button.setEnabled(False)
            self.status.setText("Stopping…")

    def _on_progress(self, progress: DownloadProgress) -> None:
        if progress.total > 0:
            self.bar.setRange(0, 1000)
            self.bar.setValue(int(1000 * progress.done / progress.total))
        self.status.setText(progress_text(progress))

    def _finish(self) -> None:
        self.progress_row.hide()
        self.status.hide()
        self.button.show()
        self.download = None

    def _on_done(self, model: LocalModel) -> None:
        self._finish()
        self.downloaded.emit(model)

    def _on_failed(self, message: str, cancelled: bool, resumable: bool) -> None:
        self._finish()
        name = one_line(self.offer.name, 60) if self.offer is not None else "the model"
        if cancelled:
            self.button.setText("Resume download")
            self.show_error("")
            self.status.setText(f"The download of {name} stopped. What came so far is kept.")
            self.status.show()
            self.textChanged.emit()
            return
        self.button.setText("Resume download" if resumable else "Try again")
        self.show_error(message)


def choose_model_file(parent: QWidget) -> Path | None:
    """The file dialog for a GGUF model the user already has; None when cancelled."""
    path, _ = QFileDialog.getOpenFileName(
        parent, "Use a model file", str(Path.home()), "GGUF models (*.gguf);;All files (*)"
    )
    return Path(path) if path else None


# ---- the Providers page's panel ----------------------------------------------------------


class ModelRow(QFrame):
    """One local model: its name and size, its state, Use and Remove."""

    def __init__(self, state: ModelState, chosen: bool) -> None:
        super().__init__()
        self.setObjectName("engineModelRow")
        self.state = state
        model = state.model
        self.name = QLabel(f"{one_line(model.name, 60)}  ·  {size_text(model.size)}")
        self.name.setTextFormat(Qt.TextFormat.PlainText)
        self.state_label = muted_label(state_text(state))
        self.state_label.setTextFormat(Qt.TextFormat.PlainText)
        self.source = muted_label(source_text(model))
        self.source.setTextFormat(Qt.TextFormat.PlainText)
        self.use_button = QPushButton("Use")
        self.use_button.setToolTip("Send your messages to this model")
        self.use_button.setVisible(not chosen)
        self.chosen_note = muted_label("✓ Chosen", wrap=False)
        self.chosen_note.setVisible(chosen)
        self.remove_button = QPushButton("Remove")
        texts = QVBoxLayout()
        texts.setSpacing(2)
        texts.addWidget(self.name)
        texts.addWidget(self.state_label)
        texts.addWidget(self.source)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 6, 0, 6)
        row.setSpacing(8)
        row.addLayout(texts, 1)
        row.addWidget(self.chosen_note, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.use_button, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.remove_button, 0, Qt.AlignmentFlag.AlignTop)


def removal_consequence(model: LocalModel) -> str:
    if model.owned:
        return f"The downloaded file ({size_text(model.size)}) is deleted."
    return f"Your file stays where it is: {model.path}"


class EngineModelsPanel(QWidget):
    """The built-in engine's account in Settings → Providers: instead of an address and a
    key, the models this computer has (state, Use, Remove) and "Download a model…".

    Removing and downloading change the models folder at once (files, not settings);
    Use and Make active change the account like the page's other edits (saved with Save):
    `useRequested(model id)`, `activeRequested()`. `changed()` after the list was read."""

    useRequested = Signal(str)
    activeRequested = Signal()
    changed = Signal()
    #: A model was removed (its id): the page forgets it as the account's model.
    removed = Signal(str)

    def __init__(self, source: ModelsSource, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._source = source
        self.chosen = ""
        self.rows: list[ModelRow] = []
        self.offers: list[Offer] = []
        self._reads = 0
        self.active_button = QPushButton("Make active")
        self.active_button.setToolTip("Send new messages to the built-in engine")
        self.active_button.clicked.connect(self.activeRequested)
        self.active_note = muted_label(
            "✓ Active: your messages go to the built-in engine.", wrap=False
        )
        active_row = QHBoxLayout()
        active_row.setSpacing(0)
        active_row.addWidget(self.active_button)
        active_row.addWidget(self.active_note)
        active_row.addStretch(1)
        self.intro = muted_label(
            "Deskhand runs these models itself, on this computer: nothing leaves it. A model "
            "is loaded when you send a message and unloaded after a while unused."
        )
        self.heading = role_label("Models on this computer", "section")
        self.empty = muted_label("No model yet: download one below, or use a GGUF file you have.")
        self._list = QVBoxLayout()
        self._list.setSpacing(4)
        self.error = role_label("", "error", wrap=True)
        self.error.setTextFormat(Qt.TextFormat.PlainText)
        self.error.hide()
        self.download_button = QPushButton("Download a model…")
        self.download_button.clicked.connect(self.show_catalogue)
        self.file_button = QPushButton("Use a model file…")
        self.file_button.clicked.connect(self.use_file)
        buttons = QHBoxLayout()
        buttons.setSpacing(8)
        buttons.addWidget(self.download_button)
        buttons.addWidget(self.file_button)
        buttons.addStretch(1)
        self.catalogue_box = QWidget()
        box = QVBoxLayout(self.catalogue_box)
        box.setContentsMargins(0, 4, 0, 0)
        box.setSpacing(8)
        self.catalogue_combo = QComboBox()
        self.catalogue_combo.setAccessibleName("Model to download")
        self.catalogue_combo.currentIndexChanged.connect(self._on_offer_picked)
        self.download = DownloadControl(source, primary=False)
        self.download.downloaded.connect(self._on_downloaded)
        box.addWidget(self.catalogue_combo)
        box.addWidget(self.download)
        self.catalogue_box.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(10)
        layout.addLayout(active_row)
        layout.addWidget(self.intro)
        layout.addWidget(self.heading)
        layout.addWidget(self.empty)
        layout.addLayout(self._list)
        layout.addWidget(self.error)
        layout.addLayout(buttons)
        layout.addWidget(self.catalogue_box)
        layout.addStretch(1)

    def set_account(self, model: str, active: bool) -> None:
        """The account's chosen model, and whether it is the active account."""
        self.chosen = model
        self.active_button.setVisible(not active)
        self.active_note.setVisible(active)
        for row in self.rows:
            self._mark_chosen(row)

    def _mark_chosen(self, row: ModelRow) -> None:
        chosen = row.state.model.id == self.chosen
        row.use_button.setVisible(not chosen)
        row.chosen_note.setVisible(chosen)

    def show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.setVisible(bool(text))

    # -- the list --

    def refresh(self) -> None:
        """Read the models and their state on a worker, then show them."""
        self._reads += 1
        read = self._reads
        source = self._source
        run_off_gui(
            lambda: source().states(),
            lambda states: self._show(read, states),
            lambda exc: self._read_failed(read, exc),
        )

    def _read_failed(self, read: int, exc: BaseException) -> None:
        if shiboken6.isValid(self) and read == self._reads:
            self.show_error(f"The models could not be read: {exc}")

    def _show(self, read: int, states: list[ModelState]) -> None:
        if not shiboken6.isValid(self) or read != self._reads:
            return  # closed, or a newer read is on its way
        for row in self.rows:
            self._list.removeWidget(row)
            row.deleteLater()
        self.rows = []
        for state in states:
            row = ModelRow(state, state.model.id == self.chosen)
            row.use_button.clicked.connect(functools.partial(self._use, state.model.id))
            row.remove_button.clicked.connect(functools.partial(self.remove, state.model))
            self._list.addWidget(row)
            self.rows.append(row)
        self.empty.setVisible(not states)
        self.changed.emit()

    def _use(self, model_id: str) -> None:
        self.useRequested.emit(model_id)

    def model_ids(self) -> list[str]:
        return [row.state.model.id for row in self.rows]

    # -- changing --

    def remove(self, model: LocalModel) -> None:
        """Remove a model after asking; a user's own file stays where it is."""
        if not confirm_removal(self, "model", model.name, removal_consequence(model)):
            return
        source = self._source
        self.show_error("")

        def removed(_: object) -> None:
            if shiboken6.isValid(self):
                self.removed.emit(model.id)
                self.refresh()

        def failed(exc: BaseException) -> None:
            if shiboken6.isValid(self):
                self.show_error(f"{model.name} could not be removed: {exc}")

        run_off_gui(lambda: source().remove(model.id), removed, failed)

    def use_file(self) -> None:
        """A GGUF file the user has: checked, added (left where it is), then listed."""
        path = choose_model_file(self)
        if path is None:
            return
        self.show_error("")
        source = self._source
        run_off_gui(lambda: source().add_file(path), self._on_downloaded, self._file_failed)

    def _file_failed(self, exc: BaseException) -> None:
        if shiboken6.isValid(self):
            self.show_error(str(exc))

    def _on_downloaded(self, model: LocalModel) -> None:
        if not shiboken6.isValid(self):
            return
        if not self.chosen:
            self.useRequested.emit(model.id)  # the first model is the one to use
        self.refresh()

    # -- the catalogue --

    def show_catalogue(self) -> None:
        """The catalogue's models to choose from, with the download control under them."""
        self.catalogue_box.show()
        if self.offers:
            return
        source = self._source
        run_off_gui(lambda: catalogue_offers(source()), self._show_offers, self._file_failed)

    def _show_offers(self, offers: list[Offer]) -> None:
        if not shiboken6.isValid(self):
            return
        self.offers = offers
        self.catalogue_combo.clear()
        for offer in offers:
            size = f" — {size_text(offer.size)}" if offer.size else ""
            note = f" ({offer.note})" if offer.note else ""
            self.catalogue_combo.addItem(f"{offer.name}{size}{note}", offer.ref)
        self._on_offer_picked(self.catalogue_combo.currentIndex())

    def _on_offer_picked(self, index: int) -> None:
        self.download.set_offer(self.offers[index] if 0 <= index < len(self.offers) else None)
