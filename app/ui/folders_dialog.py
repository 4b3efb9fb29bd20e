"""The first-run folder question: which folders Deskhand's file tools may work in.

Shown as a card above the conversation (never a blocking dialog): the usual folders that
exist are suggested and ticked, the whole home folder never is; "Add folder…" adds others.
Saving writes `files.allowed_roots` and `files.folders_chosen = True`. Until it is answered,
file tools may touch no folder of the user's.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from app.core.runtime import Runtime
from app.core.settings import Settings
from app.ui.off_gui import run_off_gui

log = logging.getLogger(__name__)

#: Finds the suggested folders off the GUI thread (a plain thread, never qasync's QThread).


def suggested_folders(home: Path) -> list[Path]:
    """The usual folders that exist, as the file tools suggest them."""
    from tools.fs.sandbox import suggested_folders as from_sandbox

    return [Path(p) for p in from_sandbox(home) if Path(p) != home]  # never the whole home


def choose_folder(parent: QWidget) -> str | None:
    """The system folder picker (tests replace this)."""
    return QFileDialog.getExistingDirectory(parent, "Let Deskhand work in this folder") or None


class FoldersPrompt(QFrame):
    """The question as a card; `answered` fires after the choice was saved."""

    answered = Signal()

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self.setObjectName("setupCard")
        self.checks: dict[str, QCheckBox] = {}
        self.suggested = False
        self._suggesting = False
        title = QLabel("Which folders may Deskhand work in?")
        title.setObjectName("setupTitle")
        body = QLabel(
            "File tools can read and change files only inside the folders you tick. "
            "Your whole home folder is not included unless you add it. You can change this "
            "later in Settings → Tools."
        )
        body.setWordWrap(True)
        self._list = QVBoxLayout()
        self._list.setSpacing(4)
        self.add_button = QPushButton("Add folder…")
        self.add_button.clicked.connect(self._add_clicked)
        self.save_button = QPushButton("Save")
        self.save_button.setProperty("accent", True)
        self.save_button.clicked.connect(self.save)
        self.later_button = QPushButton("Not now")
        self.later_button.setToolTip("File tools stay without any folder until you choose")
        self.later_button.clicked.connect(self.hide)
        buttons = QHBoxLayout()
        buttons.addWidget(self.add_button)
        buttons.addStretch(1)
        buttons.addWidget(self.later_button)
        buttons.addWidget(self.save_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(22, 16, 22, 16)
        layout.setSpacing(8)
        layout.addWidget(title)
        layout.addWidget(body)
        layout.addLayout(self._list)
        layout.addLayout(buttons)
        self.suggested = False
        self._suggesting = False

    def suggest(self) -> None:
        """Ticks the usual folders that exist. Finding them loads the file tools' path rules
        and looks at the disk: on a worker thread while the event loop runs (the boxes are
        added here when it is done), else at once."""
        if self.suggested or self._suggesting:
            return
        self._suggesting = True
        home = Path.home()
        run_off_gui(lambda: suggested_folders(home), self._add_suggested, self._none_found)

    def _none_found(self, exc: BaseException) -> None:
        log.warning("could not look for the usual folders: %r", exc)
        self._add_suggested([])

    def _add_suggested(self, folders: list[Path]) -> None:
        if not isValid(self):  # the window closed meanwhile
            return
        for folder in folders:
            self.add_folder(str(folder), checked=True)
        self.suggested = True

    def add_folder(self, path: str, *, checked: bool = True) -> None:
        path = str(Path(path).expanduser())
        if path in self.checks:
            self.checks[path].setChecked(checked)
            return
        box = QCheckBox(path)
        box.setChecked(checked)
        self._list.addWidget(box)
        self.checks[path] = box

    def chosen(self) -> list[str]:
        return [path for path, box in self.checks.items() if box.isChecked()]

    def _add_clicked(self) -> None:
        folder = choose_folder(self)
        if folder:
            self.add_folder(folder)

    def save(self) -> None:
        roots = self.chosen()

        def apply(settings: Settings) -> None:
            settings.files.allowed_roots = roots
            settings.files.folders_chosen = True

        self.runtime.settings = self.runtime.settings_store.update(apply)
        self.hide()
        self.answered.emit()


def needs_asking(settings: Settings) -> bool:
    return not settings.files.folders_chosen and not settings.files.allowed_roots
