"""The "Knowledge" page: the folders whose documents the assistant searches by meaning and
cites (knowledge_search), each with what indexing is doing (files, MB, time left), Add
folder…, Remove (asks), Pause/Resume and Reindex; the files of the selected folder that
could not be read, each with why in plain words; and which embedder turns text into
vectors (saved with Save: changing it re-embeds in the background).

Folder changes take effect at once, through `runtime.knowledge` (app/core/knowledge/
service.py). Every call to it runs on a worker (`off_gui`): the first one opens the index
and loads the embedder. Progress comes from the indexing thread (`subscribe`) and is moved
to the GUI thread by a queued signal. Nothing is opened while knowledge was never used (no
knowledge.db): the list is just empty."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from app.core.runtime import KNOWLEDGE_DB, Runtime
from app.core.settings import Settings
from app.core.visible import one_line, visible
from app.ui.off_gui import off_gui
from app.ui.plain_text import plain_tooltip
from app.ui.removal import confirm_removal
from app.ui.settings.account_list import DETAIL_ROLE, TwoLineDelegate
from app.ui.settings.form import FormPage, SettingsForm
from app.ui.settings.widgets import muted_label, role_label, set_role

if TYPE_CHECKING:
    from pydantic import BaseModel

    from app.core.knowledge.index import Folder, FolderStats
    from app.core.knowledge.indexer import Progress

TAG_ROLE = Qt.ItemDataRole.UserRole + 3
ID_ROLE = Qt.ItemDataRole.UserRole + 4
#: The folder id of the re-embedding that follows a change of embedder (service.REEMBED).
REEMBED = 0
EMPTY = "No knowledge folders yet. Add a folder of documents the assistant may search."
NO_PROBLEMS = "Every document in this folder could be read."
#: States after which the folder's counts and problems are read again.
SETTLED = frozenset({"idle", "paused", "cancelled", "error"})
TAGS: dict[str, tuple[str, bool]] = {
    "scanning": ("Checking", False),
    "indexing": ("Indexing", True),
    "paused": ("Paused", False),
    "cancelled": ("Stopped", False),
    "error": ("Not indexing", False),
}


# ---- plain words (pure functions) ----------------------------------------------------------


def megabytes(size: int) -> str:
    """ "0.4 MB", "12 MB", "1,204 MB"; "under 0.1 MB" for a few small files."""
    value = size / 1_000_000
    if 0 < value < 0.05:
        return "under 0.1 MB"
    return f"{value:,.1f} MB" if value < 10 else f"{value:,.0f} MB"


def time_left(seconds: float | None) -> str:
    """ "about 3 min left"; "" when not known yet."""
    if seconds is None:
        return ""
    if seconds < 60:
        return "less than a minute left"
    if seconds < 3600:
        return f"about {round(seconds / 60)} min left"
    return f"about {seconds / 3600:.1f} h left"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def status_text(progress: Progress | None, stats: FolderStats | None, paused: bool) -> str:
    """What one folder's row says: what indexing is doing now, or what is indexed."""
    state = progress.state if progress is not None else ("paused" if paused else "idle")
    if progress is not None and state == "indexing":
        parts = [
            f"Indexing {progress.files_done:,} of {_count(progress.files_total, 'file')}",
            f"{megabytes(progress.bytes_done)} of {megabytes(progress.bytes_total)}",
        ]
        if left := time_left(progress.eta_seconds):
            parts.append(left)
        return " · ".join(parts)
    if state == "scanning":
        return "Looking for new and changed documents…"
    indexed = ""
    if stats is not None:
        indexed = f"{_count(stats.files, 'file')}, {megabytes(stats.bytes)}"
        if state != "idle":
            indexed += " searchable"
        if stats.problems:
            indexed += f" · {_count(stats.problems, 'problem')}"
    message = progress.message if progress is not None else ""
    head = {
        "paused": "Paused",
        "cancelled": "Stopped",
        "error": "Not indexing",
    }.get(state, "Up to date")
    part_way = progress is not None and 0 < progress.files_done < progress.files_total
    if progress is not None and part_way and state in ("paused", "cancelled"):
        head += f" at {progress.files_done:,} of {_count(progress.files_total, 'file')}"
    if message:
        head += f": {message}"
    return " · ".join(p for p in (head, indexed) if p)


def short_path(path: str) -> str:
    """The path with the home folder as ~."""
    home = str(Path.home())
    if path == home or path.startswith(home.rstrip("/") + "/"):
        return "~" + path[len(home.rstrip("/")) :]
    return path


def problem_file(folder: str, path: str) -> str:
    """A problem file's path as shown: relative to its folder."""
    try:
        return str(Path(path).relative_to(folder)) or Path(path).name
    except ValueError:
        return path


# ---- questions (tests replace these) -------------------------------------------------------


def choose_folder(parent: QWidget) -> str | None:
    """The folder to add, from the system's folder dialog; None when cancelled."""
    chosen = QFileDialog.getExistingDirectory(
        parent, "Add a knowledge folder", str(Path.home()), QFileDialog.Option.ShowDirsOnly
    )
    return chosen or None


def confirm_remove(parent: QWidget, path: str) -> bool:
    return confirm_removal(
        parent,
        "knowledge folder",
        short_path(path),
        "The assistant can no longer search it. What was indexed from it is forgotten; the "
        "documents themselves stay where they are.",
    )


# ---- the lists ------------------------------------------------------------------------------


class FolderDelegate(TwoLineDelegate):
    """A folder: its path, then what indexing is doing; a tag while it is not up to date."""

    def tag(self, index: QModelIndex | QPersistentModelIndex) -> tuple[str, bool] | None:
        value = index.data(TAG_ROLE)
        return (str(value[0]), bool(value[1])) if value else None


@dataclass
class FolderRow:
    """One folder as the page shows it."""

    folder: Folder
    stats: FolderStats | None = None
    problems: list[tuple[str, str]] = field(default_factory=list)
    progress: Progress | None = None

    @property
    def state(self) -> str:
        if self.progress is not None:
            return self.progress.state
        return "paused" if self.folder.paused else "idle"

    def text(self) -> str:
        return status_text(self.progress, self.stats, self.folder.paused)

    def tag(self) -> tuple[str, bool] | None:
        return TAGS.get(self.state)


def _knowledge(settings: Settings) -> BaseModel:
    return settings.knowledge


#: How many rows a list shows before it scrolls: (at least, at most).
FOLDER_ROWS = (3, 6)
PROBLEM_ROWS = (1, 5)


def _fit_rows(view: QListWidget, rows: tuple[int, int]) -> None:
    """As tall as its rows (within `rows`), so the page has no empty box in it."""
    low, high = rows
    shown = max(low, min(high, view.count()))
    view.setFixedHeight(shown * TwoLineDelegate.HEIGHT + 2 * view.frameWidth() + 6)


# ---- the page ----------------------------------------------------------------------------------


class KnowledgePage(FormPage):
    title = "Knowledge"
    subtitle = (
        "Folders of documents the assistant can search by meaning and cite, with links that "
        "open the file at the page. Deskhand only reads them and keeps up with changes by "
        "itself. Folder changes are kept at once."
    )
    #: A Progress from the indexing thread; handled on the GUI thread (queued).
    progressed = Signal(object)

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(runtime, parent)
        self.rows: dict[int, FolderRow] = {}
        self._unsubscribe: Callable[[], None] | None = None
        #: Per folder: how many refreshes were asked for (the last one wins).
        self._refreshes: dict[int, int] = {}
        self._busy = False
        #: The last reload (tests await it).
        self.loading: asyncio.Task[Any] | None = None
        self.progressed.connect(self._on_progress, Qt.ConnectionType.QueuedConnection)
        self._build()
        self.loading = self.start_task(self.reload())

    # ---- layout --------------------------------------------------------------------------

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        layout.addWidget(role_label("Folders", "section"))
        self.list = QListWidget()
        self.list.setObjectName("knowledgeFolders")
        self.list.setAccessibleName("Knowledge folders")
        self.list.setItemDelegate(FolderDelegate(self.list))
        self.list.setMouseTracking(True)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.currentRowChanged.connect(lambda *_: self._on_selection())
        layout.addWidget(self.list)
        self.empty_label = muted_label(EMPTY)
        layout.addWidget(self.empty_label)

        buttons = QHBoxLayout()
        buttons.setSpacing(6)
        self.add_button = QPushButton("Add folder…")
        self.add_button.setToolTip("Choose a folder inside the folders Deskhand may use")
        self.add_button.clicked.connect(self.add_folder)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self.remove_selected)
        self.pause_button = QPushButton("Pause")
        self.pause_button.clicked.connect(self.pause_or_resume)
        self.reindex_button = QPushButton("Reindex")
        self.reindex_button.setToolTip("Read every document of the folder again")
        self.reindex_button.clicked.connect(self.reindex_selected)
        for button in (self.add_button, self.remove_button, self.pause_button):
            button.setAutoDefault(False)
            buttons.addWidget(button)
        self.reindex_button.setAutoDefault(False)
        buttons.addWidget(self.reindex_button)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        self.status = role_label("", "muted", wrap=True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.hide()
        layout.addWidget(self.status)

        layout.addSpacing(6)
        self.problems_title = role_label("Documents that could not be read", "section")
        layout.addWidget(self.problems_title)
        self.problem_list = QListWidget()
        self.problem_list.setObjectName("knowledgeProblems")
        self.problem_list.setAccessibleName("Documents that could not be read")
        self.problem_list.setItemDelegate(TwoLineDelegate(self.problem_list))
        self.problem_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        layout.addWidget(self.problem_list)
        self.no_problems = muted_label(NO_PROBLEMS)
        layout.addWidget(self.no_problems)

        layout.addSpacing(6)
        self.embedder_form: SettingsForm[Any] = self.add_form(
            layout, "Embeddings", _knowledge, fields=("embedder", "model")
        )
        layout.addStretch(1)
        self.embedder_form.changed.connect(self._fit_embedder)
        self._fit_embedder()
        _fit_rows(self.list, FOLDER_ROWS)
        self._on_selection()

    def _fit_embedder(self) -> None:
        """The model name only matters for a provider's or the engine's embeddings."""
        chosen = self.embedder_form.raw().get("embedder")
        model = self.embedder_form.editor("model", QLineEdit)
        model.setEnabled(chosen in ("provider", "engine"))
        model.setPlaceholderText(
            "One of the built-in engine's models, e.g. nomic-embed-text-v1.5"
            if chosen == "engine"
            else "The active provider's embedding model, e.g. nomic-embed-text"
        )

    def problem(self) -> str | None:
        found = super().problem()
        if found:
            return found
        raw = self.embedder_form.raw()
        if raw.get("embedder") == "provider" and not str(raw.get("model") or "").strip():
            return (
                "Embedding model: name the provider's embedding model (e.g. nomic-embed-text) "
                "to search with its embeddings"
            )
        if raw.get("embedder") == "engine" and not str(raw.get("model") or "").strip():
            return (
                "Embedding model: name one of the built-in engine's models (Settings → "
                "Providers → Built-in engine, or `deskhand models pull nomic-embed-text-v1.5`)"
            )
        return None

    # ---- loading -----------------------------------------------------------------------

    def _has_index(self) -> bool:
        return (self.runtime.home / KNOWLEDGE_DB).exists()

    async def reload(self) -> None:
        """Reads the folders, their counts, problems and progress (on a worker) and shows
        them; listens to progress from then on."""
        if not self._has_index():
            self._show_rows([])
            return
        runtime = self.runtime

        def read() -> list[FolderRow]:
            service = runtime.knowledge
            service.start()  # indexing and watching (nothing when it already runs)
            progress = service.progress()
            return [
                FolderRow(f, service.stats(f.id), service.problems(f.id), progress.get(f.id))
                for f in service.folders(None)
            ]

        try:
            rows = await off_gui(read)
        except Exception as exc:  # an unreadable index: say so, keep the page usable
            self._say(f"The knowledge index could not be read: {exc}", "error")
            return
        await self._listen()
        self._show_rows(rows)

    async def _listen(self) -> None:
        if self._unsubscribe is not None:
            return
        runtime = self.runtime
        self._unsubscribe = await off_gui(lambda: runtime.knowledge.subscribe(self._heard))

    def _heard(self, progress: Progress) -> None:
        """(the indexing thread) Moves the news to the GUI thread."""
        if isValid(self):
            self.progressed.emit(progress)

    def cancel_tasks(self) -> None:
        """The dialog closes: stop listening, too."""
        super().cancel_tasks()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def _show_rows(self, rows: Sequence[FolderRow]) -> None:
        keep = self.selected_id()
        self.rows = {row.folder.id: row for row in rows}
        self.list.blockSignals(True)
        self.list.clear()
        selected = 0
        for i, row in enumerate(rows):
            item = QListWidgetItem()
            item.setData(ID_ROLE, row.folder.id)
            self._fill(item, row)
            self.list.addItem(item)
            if row.folder.id == keep:
                selected = i
        self.list.blockSignals(False)
        if rows:
            self.list.setCurrentRow(selected)
        _fit_rows(self.list, FOLDER_ROWS)
        self.empty_label.setVisible(not rows)
        self._on_selection()

    def _fill(self, item: QListWidgetItem, row: FolderRow) -> None:
        name = visible(short_path(row.folder.path), keep_newlines=False)
        text = row.text()
        item.setText(name)
        item.setData(DETAIL_ROLE, text)
        item.setData(TAG_ROLE, row.tag())
        item.setToolTip(plain_tooltip(f"{visible(row.folder.path, keep_newlines=False)}\n{text}"))
        item.setData(Qt.ItemDataRole.AccessibleDescriptionRole, text)

    # ---- progress (GUI thread) ---------------------------------------------------------

    def _on_progress(self, progress: Progress) -> None:
        if progress.folder_id == REEMBED:
            self._show_reembedding(progress)
            return
        row = self.rows.get(progress.folder_id)
        if row is None:
            return  # another conversation's attachment, or a folder just removed
        before = row.progress.state if row.progress is not None else None
        row.progress = progress
        item = self._item(progress.folder_id)
        if item is not None:
            self._fill(item, row)
        if progress.state in SETTLED and progress.state != before:
            self.start_task(self._refresh(progress.folder_id))
        if progress.folder_id == self.selected_id():
            self._update_buttons()

    def _show_reembedding(self, progress: Progress) -> None:
        if progress.state == "indexing":
            self._say(
                f"Re-embedding with the new embedder: {progress.files_done:,} of "
                f"{_count(progress.files_total, 'passage')}",
                "muted",
            )
        elif progress.state == "error":
            self._say(f"The embedder cannot be used: {progress.message}", "error")
        elif progress.state == "idle":
            self._say("Every passage is embedded with the embedder chosen below.", "ok")

    async def _refresh(self, folder_id: int) -> None:
        """A folder settled: its counts and problems again (only the last refresh asked
        for is shown, should two overlap)."""
        runtime = self.runtime
        self._refreshes[folder_id] = turn = self._refreshes.get(folder_id, 0) + 1

        def read() -> tuple[FolderStats, list[tuple[str, str]], Progress | None]:
            service = runtime.knowledge
            progress = service.progress().get(folder_id)
            return service.stats(folder_id), service.problems(folder_id), progress

        try:
            stats, problems, progress = await off_gui(read)
        except Exception:  # removed meanwhile
            return
        row = self.rows.get(folder_id)
        if row is None or self._refreshes.get(folder_id) != turn:
            return
        row.stats, row.problems = stats, problems
        if row.progress is None or (progress is not None and progress.state in SETTLED):
            row.progress = progress
        item = self._item(folder_id)
        if item is not None:
            self._fill(item, row)
        if folder_id == self.selected_id():
            self._on_selection()

    def _item(self, folder_id: int) -> QListWidgetItem | None:
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item is not None and item.data(ID_ROLE) == folder_id:
                return item
        return None

    # ---- selection -----------------------------------------------------------------------

    def selected_id(self) -> int | None:
        item = self.list.currentItem()
        return int(item.data(ID_ROLE)) if item is not None else None

    def selected(self) -> FolderRow | None:
        folder_id = self.selected_id()
        return self.rows.get(folder_id) if folder_id is not None else None

    def _on_selection(self) -> None:
        row = self.selected()
        self.problem_list.clear()
        folder = row.folder.path if row is not None else ""
        for path, reason in row.problems if row is not None else ():
            shown = problem_file(folder, path)
            item = QListWidgetItem(visible(shown, keep_newlines=False))
            item.setData(DETAIL_ROLE, one_line(reason, 300))
            shown_path = visible(path, keep_newlines=False)
            item.setToolTip(plain_tooltip(f"{shown_path}\n{reason}"))
            self.problem_list.addItem(item)
        _fit_rows(self.problem_list, PROBLEM_ROWS)
        has_problems = row is not None and bool(row.problems)
        self.problems_title.setVisible(row is not None)
        self.problem_list.setVisible(has_problems)
        self.no_problems.setVisible(row is not None and not has_problems)
        self._update_buttons()

    def _update_buttons(self) -> None:
        row = self.selected()
        chosen = row is not None and not self._busy
        self.add_button.setEnabled(not self._busy)
        for button in (self.remove_button, self.pause_button, self.reindex_button):
            button.setEnabled(chosen)
        stopped = row is not None and row.state in ("paused", "cancelled")
        self.pause_button.setText("Resume" if stopped else "Pause")
        self.pause_button.setToolTip(
            "Go on indexing this folder" if stopped else "Stop indexing this folder for now"
        )

    # ---- actions ---------------------------------------------------------------------------

    def add_folder(self) -> asyncio.Task[Any] | None:
        """Asks which folder (the system's dialog), then adds it on a worker."""
        if self._busy:
            return None
        path = choose_folder(self)
        if not path:
            return None
        return self.start_task(self._add(path))

    async def _add(self, path: str) -> None:
        runtime = self.runtime

        def add() -> Folder:
            service = runtime.knowledge
            folder = service.add_folder(path)
            service.start()
            return folder

        self._set_busy(True)
        try:
            await self._listen()
            folder = await off_gui(add)
        except ValueError as exc:
            self._say(f"Not added: {exc}", "error")
            return
        finally:
            self._set_busy(False)
        if folder.id not in self.rows:
            rows = [*self.rows.values(), FolderRow(folder)]
            self._show_rows(rows)
        self._select(folder.id)
        self._say(f"Added {short_path(folder.path)}: its documents are being indexed.", "ok")
        await self._refresh(folder.id)  # news that came before its row was there

    def remove_selected(self) -> asyncio.Task[Any] | None:
        """Asks, then removes the selected folder on a worker."""
        row = self.selected()
        if row is None or self._busy or not confirm_remove(self, row.folder.path):
            return None
        return self.start_task(self._act(row, "remove"))

    def pause_or_resume(self) -> asyncio.Task[Any] | None:
        row = self.selected()
        if row is None or self._busy:
            return None
        stopped = row.state in ("paused", "cancelled")
        return self.start_task(self._act(row, "resume" if stopped else "pause"))

    def reindex_selected(self) -> asyncio.Task[Any] | None:
        row = self.selected()
        if row is None or self._busy:
            return None
        return self.start_task(self._act(row, "reindex"))

    async def _act(self, row: FolderRow, action: str) -> None:
        runtime = self.runtime
        folder_id = row.folder.id

        def run() -> None:
            service = runtime.knowledge
            getattr(service, {"remove": "remove_folder"}.get(action, action))(folder_id)
            if action in ("resume", "reindex"):
                service.start()

        self._set_busy(True)
        try:
            await off_gui(run)
        except Exception as exc:
            self._say(f"That did not work: {exc}", "error")
            return
        finally:
            self._set_busy(False)
        where = short_path(row.folder.path)
        if action == "remove":
            self._show_rows([r for r in self.rows.values() if r.folder.id != folder_id])
            self._say(f"Removed {where} from the knowledge folders.", "ok")
            return
        row.folder = replace(row.folder, paused=action == "pause")
        if action == "pause":
            row.progress = row.progress and replace(row.progress, state="paused")
        else:  # the worker reports from here on
            row.progress = None
        self._say(
            {
                "pause": f"Paused {where}.",
                "resume": f"Indexing {where} again.",
                "reindex": f"Reading every document of {where} again.",
            }[action],
            "ok",
        )
        item = self._item(folder_id)
        if item is not None:
            self._fill(item, row)
        self._update_buttons()

    def _select(self, folder_id: int) -> None:
        item = self._item(folder_id)
        if item is not None:
            self.list.setCurrentItem(item)

    def _set_busy(self, busy: bool) -> None:
        if isValid(self):
            self._busy = busy
            self._update_buttons()

    def _say(self, text: str, role: str) -> None:
        if isValid(self):
            self.status.setText(text)
            self.status.setVisible(bool(text))
            set_role(self.status, role)

