"""The conversation list: new chat, search across all conversations, rename, delete, and
marking a chat private (nothing is remembered from it; marked "(private)" in the list)."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from PySide6.QtCore import QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.store import HIGHLIGHT_END, HIGHLIGHT_START, NotFoundError

log = logging.getLogger(__name__)
ID_ROLE = Qt.ItemDataRole.UserRole
LIST_LIMIT = 500
#: Shown after a private chat's title (an emoji lock renders as a box without an emoji font).
PRIVATE_MARK = "(private)"
PRIVATE_ACTION = "Private chat (nothing is remembered)"


def _when(moment: datetime) -> str:
    if moment.tzinfo is not None:
        moment = moment.astimezone()
        now = datetime.now(moment.tzinfo)
    else:
        now = datetime.now()
    if moment.date() == now.date():
        return moment.strftime("%H:%M")
    if moment.year == now.year:
        return moment.strftime("%d %b")
    return moment.strftime("%d %b %Y")


class Sidebar(QWidget):
    conversationSelected = Signal(str)
    newChatRequested = Signal()
    renameRequested = Signal(str)
    deleteRequested = Signal(str)
    #: (conversation id, private) after the user turned "Private chat" on or off
    privateChanged = Signal(str, bool)

    def __init__(self, store: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sidebar")
        self.store = store
        self.new_button = QPushButton("＋  New chat")
        self.new_button.setObjectName("newChatButton")
        self.new_button.setToolTip("New chat (Ctrl+N)")
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search all chats  (Ctrl+K)")
        self.search.setClearButtonEnabled(True)
        self.list = QListWidget()
        self.list.setObjectName("conversationList")
        self.list.setUniformItemSizes(False)
        self.list.setWordWrap(True)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.empty_label = QLabel("No chats yet")
        self.empty_label.setObjectName("sidebarHint")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 12, 10, 10)
        layout.setSpacing(8)
        layout.addWidget(self.new_button)
        layout.addWidget(self.search)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.empty_label)

        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(150)
        self._search_timer.timeout.connect(self._search_when_typing_stops)
        self.search.textChanged.connect(lambda _: self._search_timer.start())
        self.new_button.clicked.connect(self.newChatRequested)
        self.list.itemActivated.connect(self._activate)
        self.list.itemClicked.connect(self._activate)
        self.list.customContextMenuRequested.connect(self._menu)
        self._current: str | None = None

    # ---- content ------------------------------------------------------------------------

    @property
    def searching(self) -> bool:
        return bool(self.search.text().strip())

    def refresh(self) -> None:
        if self.searching:
            self._run_search()
            return
        self.list.clear()
        for conv in self.store.list_conversations(limit=LIST_LIMIT):
            private = self._is_private(conv.id)
            title = f"{conv.title} {PRIVATE_MARK}" if private else conv.title
            item = QListWidgetItem(f"{title}\n{_when(conv.updated_at)}")
            item.setData(ID_ROLE, conv.id)
            item.setToolTip(
                f"{conv.title}\nPrivate: nothing is remembered" if private else conv.title
            )
            self.list.addItem(item)
            if conv.id == self._current:
                item.setSelected(True)
                self.list.setCurrentItem(item)
        self.empty_label.setText("No chats yet")
        self.empty_label.setVisible(self.list.count() == 0)

    def _search_when_typing_stops(self) -> None:
        """The debounced search: a store closed meanwhile (quitting) is not an error."""
        try:
            self._run_search()
        except Exception as exc:
            log.warning("search failed: %s", exc)

    def _run_search(self) -> None:
        query = self.search.text().strip()
        if not query:
            self.refresh()
            return
        self.list.clear()
        for hit in self.store.search(query, limit=100):
            snippet = hit.snippet.replace(HIGHLIGHT_START, "").replace(HIGHLIGHT_END, "")
            snippet = " ".join(snippet.split())
            title = hit.conversation_title
            if self._is_private(hit.conversation_id):
                title = f"{title} {PRIVATE_MARK}"
            item = QListWidgetItem(f"{title}\n{snippet}")
            item.setData(ID_ROLE, hit.conversation_id)
            item.setToolTip(snippet)
            self.list.addItem(item)
        self.empty_label.setText("Nothing found")
        self.empty_label.setVisible(self.list.count() == 0)

    def select(self, conversation_id: str | None) -> None:
        self._current = conversation_id
        self.list.clearSelection()
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(ID_ROLE) == conversation_id:
                self.list.setCurrentItem(item)
                item.setSelected(True)
                return

    def focus_search(self) -> None:
        self.search.setFocus()
        self.search.selectAll()

    # ---- interaction --------------------------------------------------------------------

    def _activate(self, item: QListWidgetItem) -> None:
        conv_id = item.data(ID_ROLE)
        if conv_id and conv_id != self._current:
            self._current = conv_id
            self.conversationSelected.emit(conv_id)

    def _is_private(self, conv_id: str) -> bool:
        try:
            return bool(self.store.is_private(conv_id))
        except NotFoundError:
            return False

    def set_private(self, conv_id: str, private: bool) -> None:
        """Mark a conversation private (or not), show it in the list, tell the window."""
        try:
            self.store.set_private(conv_id, private)
        except NotFoundError:
            self.refresh()
            return
        self.refresh()
        self.privateChanged.emit(conv_id, private)

    def context_menu(self, conv_id: str) -> QMenu:
        """The menu for one conversation (built apart from showing it, for tests)."""
        menu = QMenu(self)
        rename = QAction("Rename…", menu)
        private = QAction(PRIVATE_ACTION, menu)
        private.setCheckable(True)
        private.setChecked(self._is_private(conv_id))
        private.setToolTip("Memories are neither saved nor changed from this chat")
        delete = QAction("Delete", menu)
        rename.triggered.connect(lambda: self.renameRequested.emit(conv_id))
        private.triggered.connect(lambda checked: self.set_private(conv_id, checked))
        delete.triggered.connect(lambda: self.deleteRequested.emit(conv_id))
        menu.addAction(rename)
        menu.addAction(private)
        menu.addSeparator()
        menu.addAction(delete)
        return menu

    def _menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None:
            return
        menu = self.context_menu(item.data(ID_ROLE))
        menu.exec(self.list.viewport().mapToGlobal(pos))
        menu.deleteLater()
