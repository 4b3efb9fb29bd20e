"""The "Memory" page: whether memory is on and how much of it goes with a conversation
(built from the settings model, saved with Save), then what the assistant remembers (kind,
text, the conversation it came from, when it changed), a search box, and editing or deleting
one memory.

Edits and deletions of memories are written to the store right away (quick SQLite calls),
not on Save.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.memory import KINDS, Memory, MemoryRefused, MemoryService
from app.core.runtime import Runtime
from app.core.settings import MemorySettings, Settings
from app.ui.qt_values import top_level_items
from app.ui.settings.form import FormPage
from app.ui.settings.widgets import muted_label, role_label, set_role

ID_ROLE = Qt.ItemDataRole.UserRole
LIST_LIMIT = 1000
COLUMNS = ("Kind", "Memory", "From", "Changed")


def confirm(parent: QWidget, title: str, text: str) -> bool:
    """A Yes/No question (tests replace this)."""
    answer = QMessageBox.question(
        parent,
        title,
        text,
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No,
    )
    return answer == QMessageBox.StandardButton.Yes


class MemoryPage(FormPage):
    title = "Memory"
    subtitle = (
        "What the assistant remembers across conversations; nothing is remembered from a "
        "private chat. Edits to the memories below are kept at once."
    )

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(runtime, parent)
        self._loaded = False
        self._memories: dict[int, Memory] = {}
        self._titles: dict[str, str] = {}
        self._build()

    @property
    def service(self) -> MemoryService:
        # Always enabled here: the user may look at and delete memories with memory off.
        return MemoryService(self.runtime.store, enabled=True)

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(10)
        self.form = self.add_form(layout, "Settings", _memory)
        layout.addSpacing(6)
        layout.addWidget(role_label("Memories", "section"))
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search memories")
        self.search.setClearButtonEnabled(True)
        layout.addWidget(self.search)

        self.tree = QTreeWidget()
        self.tree.setObjectName("memoryList")
        self.tree.setColumnCount(len(COLUMNS))
        self.tree.setHeaderLabels(list(COLUMNS))
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(False)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.setColumnWidth(2, 150)
        self.tree.setMinimumHeight(160)
        layout.addWidget(self.tree, 1)
        self.empty_label = muted_label("Nothing remembered yet.")
        layout.addWidget(self.empty_label)

        editor = QHBoxLayout()
        editor.setSpacing(8)
        self.kind_combo = QComboBox()
        for kind in KINDS:
            self.kind_combo.addItem(kind.capitalize(), kind)
        self.text_edit = QPlainTextEdit()
        self.text_edit.setPlaceholderText("Select a memory to edit it")
        self.text_edit.setFixedHeight(64)
        buttons = QVBoxLayout()
        buttons.setSpacing(6)
        self.save_button = QPushButton("Save changes")
        self.delete_button = QPushButton("Delete")
        for b in (self.save_button, self.delete_button):
            b.setAutoDefault(False)
            buttons.addWidget(b)
        buttons.addStretch(1)
        kind_column = QVBoxLayout()
        kind_column.addWidget(self.kind_combo)
        kind_column.addStretch(1)
        editor.addLayout(kind_column)
        editor.addWidget(self.text_edit, 1)
        editor.addLayout(buttons)
        layout.addLayout(editor)
        self.status = role_label("", "muted", wrap=True)
        layout.addWidget(self.status)

        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(150)
        self._search_timer.timeout.connect(self.reload)
        self.search.textChanged.connect(lambda _: self._search_timer.start())
        self.tree.currentItemChanged.connect(lambda *_: self._show_selected())
        self.save_button.clicked.connect(self.save_selected)
        self.delete_button.clicked.connect(self.delete_selected)
        self._show_selected()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._loaded:
            self.reload()

    # -- listing --

    def _title(self, conversation_id: str | None) -> str:
        if not conversation_id:
            return "—"
        if conversation_id not in self._titles:
            conv = self.runtime.store.get_conversation(conversation_id)
            if conv is None:
                title = "(gone)"
            else:
                title = conv.title + (" (deleted)" if conv.deleted_at is not None else "")
            self._titles[conversation_id] = title
        return self._titles[conversation_id]

    def reload(self) -> None:
        """Read the memories (matching the search box, if any) and show them."""
        self._loaded = True
        selected = self.selected_id()
        query = self.search.text().strip()
        try:
            if query:
                memories = self.service.search(query, limit=LIST_LIMIT)
            else:
                memories = self.service.list(limit=LIST_LIMIT)
        except Exception as exc:  # a broken database: say so, keep the page usable
            self._show(f"Could not read the memories: {exc}", "error")
            memories = []
        self._titles.clear()
        self._memories = {m.id: m for m in memories}
        self.tree.clear()
        for memory in memories:
            when = memory.updated_at.astimezone().strftime("%Y-%m-%d %H:%M")
            item = QTreeWidgetItem([memory.kind.capitalize(), memory.content, "", when])
            source = self._title(memory.source_conversation)
            item.setText(2, source)
            item.setData(0, ID_ROLE, memory.id)
            item.setToolTip(1, memory.content)
            item.setToolTip(2, source)
            item.setToolTip(3, f"Created {memory.created_at.astimezone():%Y-%m-%d %H:%M}")
            self.tree.addTopLevelItem(item)
            if memory.id == selected:
                self.tree.setCurrentItem(item)
        self.empty_label.setText("Nothing found." if query else "Nothing remembered yet.")
        self.empty_label.setVisible(not memories)
        self._show_selected()

    def ids(self) -> list[int]:
        return [int(item.data(0, ID_ROLE)) for item in top_level_items(self.tree)]

    def select(self, memory_id: int) -> None:
        for item in top_level_items(self.tree):
            if item.data(0, ID_ROLE) == memory_id:
                self.tree.setCurrentItem(item)
                return

    def selected_id(self) -> int | None:
        item = self.tree.currentItem()
        return int(item.data(0, ID_ROLE)) if item is not None else None

    def _show_selected(self) -> None:
        memory = self._memories.get(self.selected_id() or -1)
        for w in (self.kind_combo, self.text_edit, self.save_button, self.delete_button):
            w.setEnabled(memory is not None)
        if memory is None:
            self.text_edit.setPlainText("")
            return
        self.kind_combo.setCurrentIndex(self.kind_combo.findData(memory.kind))
        self.text_edit.setPlainText(memory.content)

    # -- changes (written at once) --

    def save_selected(self) -> None:
        memory_id = self.selected_id()
        if memory_id is None:
            return
        try:
            self.service.update(
                memory_id, content=self.text_edit.toPlainText(), kind=self.kind_combo.currentData()
            )
        except MemoryRefused as exc:
            self._show(str(exc), "error")
            return
        self.reload()
        self._show("Saved.", "ok")

    def delete_selected(self) -> None:
        memory_id = self.selected_id()
        memory = self._memories.get(memory_id or -1)
        if memory is None:
            return
        if not confirm(self, "Delete memory", f"Forget “{_short(memory.content)}”?"):
            return
        try:
            self.service.delete(memory.id)
        except MemoryRefused as exc:
            self._show(str(exc), "error")
            return
        self.reload()
        count = len(self._memories)
        self._show(f"Deleted. {count} {'memory' if count == 1 else 'memories'} left.", "ok")

    def _show(self, text: str, role: str) -> None:
        self.status.setText(text)
        set_role(self.status, role)


def _memory(settings: Settings) -> MemorySettings:
    return settings.memory


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
