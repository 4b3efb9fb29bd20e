"""The conversation list: new chat, search across all conversations, rename in place, delete,
and marking a chat private (nothing is remembered from it; marked "(private)" in the list).

Titles and search snippets are untrusted text (a model names conversations, messages quote
web pages): the list paints them as plain text with `QTextLayout` formats for the matched
words, never as rich text.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from PySide6.QtCore import (
    QAbstractItemModel,
    QEvent,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QPoint,
    QPointF,
    QRect,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import (
    QAction,
    QColor,
    QFont,
    QFontMetrics,
    QKeyEvent,
    QKeySequence,
    QPainter,
    QPalette,
    QShortcut,
    QTextCharFormat,
    QTextLayout,
    QTextOption,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QLineEdit,
    QListView,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from app.core.store import HIGHLIGHT_END, HIGHLIGHT_START, NotFoundError
from app.core.visible import visible
from app.ui.icons import line_icon
from app.ui.plain_text import plain_tooltip

log = logging.getLogger(__name__)
ID_ROLE = Qt.ItemDataRole.UserRole
#: The conversation's stored title (what the rename editor starts from).
TITLE_ROLE = Qt.ItemDataRole.UserRole + 1
#: The line under the title: the time, or the search snippet (plain text, markers removed).
DETAIL_ROLE = Qt.ItemDataRole.UserRole + 2
#: (start, length) ranges of DETAIL_ROLE that matched the search.
SPANS_ROLE = Qt.ItemDataRole.UserRole + 3
LIST_LIMIT = 500
#: Shown after a private chat's title (an emoji lock renders as a box without an emoji font).
PRIVATE_MARK = "(private)"
PRIVATE_ACTION = "Private chat (nothing is remembered)"
EMPTY_TITLE = "A chat needs a title."
#: Lines of a search snippet shown under the title.
SNIPPET_LINES = 2
PAD_X, PAD_Y, LINE_GAP = 8, 7, 2


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


def flat(text: str) -> str:
    """One line of untrusted text: whitespace runs as one space, controls made visible."""
    return visible(" ".join(text.split()), keep_newlines=False)


def highlight_parts(snippet: str) -> tuple[str, list[tuple[int, int]]]:
    """The store's snippet as plain text and the (start, length) of each marked match.

    Markers that do not pair up are shown as text rather than guessed at."""
    text, spans = "", []
    rest = snippet
    while True:
        start = rest.find(HIGHLIGHT_START)
        end = rest.find(HIGHLIGHT_END, start + 1) if start >= 0 else -1
        if start < 0 or end < 0:
            text += rest
            break
        before, word = rest[:start], rest[start + 1 : end]
        text += before
        spans.append((len(text), len(word)))
        text += word
        rest = rest[end + 1 :]
    return _flatten_spans(text, spans)


def _flatten_spans(text: str, spans: list[tuple[int, int]]) -> tuple[str, list[tuple[int, int]]]:
    """`flat` applied to `text`, with the spans moved to where their words ended up."""
    out: list[str] = []
    mapping: list[int] = []  # position in `text` → position in the result
    pos, pending_space = 0, False
    for ch in text:
        if ch.isspace():
            pending_space = pos > 0
            mapping.append(pos)
            continue
        if pending_space:
            out.append(" ")
            pos += 1
            pending_space = False
        mapping.append(pos)
        shown = visible(ch, keep_newlines=False)
        out.append(shown)
        pos += len(shown)
    result = "".join(out)
    mapping.append(len(result))
    moved = []
    for start, length in spans:
        if length <= 0:
            continue
        first = mapping[start]
        last = mapping[start + length - 1]
        end = last + len(visible(text[start + length - 1], keep_newlines=False))
        end = min(end, len(result))
        if end > first:
            moved.append((first, end - first))
    return result, moved


class _ItemDelegate(QStyledItemDelegate):
    """Paints a title line and a muted detail line (with matches highlighted); edits titles."""

    def __init__(self, sidebar: Sidebar) -> None:
        super().__init__(sidebar.list)
        self.sidebar = sidebar

    # ---- painting ----------------------------------------------------------------------

    def _detail_font(self, option: QStyleOptionViewItem) -> QFont:
        font = QFont(option.font)
        if font.pointSizeF() > 0:
            font.setPointSizeF(font.pointSizeF() * 0.92)
        return font

    def _text_width(self, option: QStyleOptionViewItem) -> int:
        widget = option.widget
        width = option.rect.width()
        if isinstance(widget, QAbstractItemView):
            width = widget.viewport().width() - 4
        return max(40, width - 2 * PAD_X)

    def _detail_layout(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex, width: int
    ) -> tuple[QTextLayout, int]:
        """The detail text laid out in at most SNIPPET_LINES lines; returns it and its height."""
        text = str(index.data(DETAIL_ROLE) or "")
        font = self._detail_font(option)
        layout = QTextLayout(text, font)
        wrap = QTextOption()
        wrap.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        layout.setTextOption(wrap)
        formats = []
        palette = option.palette
        for start, length in index.data(SPANS_ROLE) or []:
            fmt = QTextCharFormat()
            fmt.setFontWeight(QFont.Weight.Bold)
            fmt.setForeground(palette.color(QPalette.ColorRole.Text))
            tint = QColor(palette.color(QPalette.ColorRole.Highlight))
            tint.setAlpha(70)
            fmt.setBackground(tint)
            span = QTextLayout.FormatRange()
            span.start, span.length, span.format = start, length, fmt
            formats.append(span)
        layout.setFormats(formats)
        layout.beginLayout()
        height, lines = 0.0, 0
        while lines < SNIPPET_LINES:
            line = layout.createLine()
            if not line.isValid():
                break
            line.setLineWidth(width)
            line.setPosition(QPointF(0, height))
            height += line.height()
            lines += 1
        layout.endLayout()
        return layout, int(height + 0.999)

    def sizeHint(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> QSize:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        width = self._text_width(opt)
        title_h = QFontMetrics(opt.font).height()
        _, detail_h = self._detail_layout(opt, index, width)
        return QSize(width + 2 * PAD_X, title_h + LINE_GAP + detail_h + 2 * PAD_Y + 2)

    def paint(
        self,
        painter: QPainter,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        widget = opt.widget
        style = widget.style() if widget is not None else None
        if style is not None:  # the background: hover, selection (the stylesheet's)
            style.drawPrimitive(QStyle.PrimitiveElement.PE_PanelItemViewItem, opt, painter, widget)
        rect = opt.rect.adjusted(PAD_X, PAD_Y, -PAD_X, -PAD_Y)
        palette = opt.palette
        painter.save()
        painter.setClipRect(opt.rect)
        metrics = QFontMetrics(opt.font)
        title = str(index.data(Qt.ItemDataRole.DisplayRole) or "").split("\n", 1)[0]
        painter.setFont(opt.font)
        painter.setPen(palette.color(QPalette.ColorRole.Text))
        title_rect = QRect(rect.left(), rect.top(), rect.width(), metrics.height())
        painter.drawText(
            title_rect,
            int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
            metrics.elidedText(title, Qt.TextElideMode.ElideRight, rect.width()),
        )
        layout, _ = self._detail_layout(opt, index, rect.width())
        painter.setPen(palette.color(QPalette.ColorRole.PlaceholderText))
        layout.draw(painter, QPointF(rect.left(), title_rect.bottom() + 1 + LINE_GAP))
        painter.restore()

    # ---- editing the title -------------------------------------------------------------

    def createEditor(
        self,
        parent: QWidget,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> QWidget:
        self.sidebar._editing = QPersistentModelIndex(index)
        editor = QLineEdit(parent)
        editor.setObjectName("renameEditor")
        editor.setAccessibleName("Chat title")
        editor.setToolTip("Enter saves, Esc cancels")
        editor.textEdited.connect(lambda _: _mark_invalid(editor, False))
        return editor

    def setEditorData(self, editor: QWidget, index: QModelIndex | QPersistentModelIndex) -> None:
        if isinstance(editor, QLineEdit):
            editor.setText(str(index.data(TITLE_ROLE) or ""))
            editor.selectAll()

    def setModelData(
        self, editor: QWidget, model: QAbstractItemModel, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        if isinstance(editor, QLineEdit):
            self.sidebar._commit_rename(str(index.data(ID_ROLE) or ""), editor.text())

    def updateEditorGeometry(
        self,
        editor: QWidget,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> None:
        rect = option.rect.adjusted(2, 2, -2, -2)
        height = min(rect.height(), max(editor.sizeHint().height(), 28))
        editor.setGeometry(QRect(rect.left(), rect.top(), rect.width(), height))

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        """Enter on an empty title says why instead of closing the editor."""
        if (
            isinstance(obj, QLineEdit)
            and event.type() == QEvent.Type.KeyPress
            and isinstance(event, QKeyEvent)
            and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
            and not obj.text().strip()
        ):
            _mark_invalid(obj, True)
            QToolTip.showText(obj.mapToGlobal(QPoint(0, obj.height())), EMPTY_TITLE, obj)
            return True
        return super().eventFilter(obj, event)


def _mark_invalid(editor: QLineEdit, invalid: bool) -> None:
    if bool(editor.property("invalid")) == invalid:
        return
    editor.setProperty("invalid", invalid)
    editor.style().unpolish(editor)
    editor.style().polish(editor)


class Sidebar(QWidget):
    conversationSelected = Signal(str)
    newChatRequested = Signal()
    #: Rename asked for where the title cannot be edited in place (the window asks).
    renameRequested = Signal(str)
    deleteRequested = Signal(str)
    #: (conversation id, private) after the user turned "Private chat" on or off
    privateChanged = Signal(str, bool)
    #: (conversation id, new title) after a title was edited in place and stored
    titleChanged = Signal(str, str)
    #: Esc in the empty search field: the user is done searching (focus the composer).
    searchDismissed = Signal()

    def __init__(self, store: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sidebar")
        self.setMinimumWidth(180)
        self.store = store
        self.new_button = QPushButton("New chat")
        self.new_button.setIcon(line_icon("compose"))
        self.new_button.setObjectName("newChatButton")
        self.new_button.setToolTip("New chat (Ctrl+N)")
        self.search = QLineEdit()
        self.search.setObjectName("sidebarSearch")
        self.search.setPlaceholderText("Search chats")
        self.search.setToolTip("Search all chats (Ctrl+K). Esc clears the search.")
        self.search.setAccessibleName("Search chats")
        self.search.setClearButtonEnabled(True)
        self.search.installEventFilter(self)
        self.list = QListWidget()
        self.list.setObjectName("conversationList")
        self.list.setAccessibleName("Chats")
        self.list.setUniformItemSizes(False)
        self.list.setResizeMode(QListView.ResizeMode.Adjust)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked)
        self.delegate = _ItemDelegate(self)
        self.list.setItemDelegate(self.delegate)
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
        self.delegate.closeEditor.connect(self._editor_closed)
        delete = QShortcut(QKeySequence.StandardKey.Delete, self.list)
        delete.setContext(Qt.ShortcutContext.WidgetShortcut)
        delete.activated.connect(self._delete_current_item)
        self._current: str | None = None
        #: The row whose title is being edited, and whether a refresh waits for it to end.
        self._editing: QPersistentModelIndex | None = None
        self._refresh_waiting = False

    # ---- content ------------------------------------------------------------------------

    @property
    def searching(self) -> bool:
        return bool(self.search.text().strip())

    @property
    def editing(self) -> bool:
        """True while a title is being edited in place."""
        return self._editing is not None and self._editing.isValid()

    def _add_item(
        self, conv_id: str, title: str, detail: str, spans: list[tuple[int, int]], tip: str
    ) -> QListWidgetItem:
        shown = flat(title)
        if self._is_private(conv_id):
            shown = f"{shown} {PRIVATE_MARK}"
            tip = f"{tip}\nPrivate: nothing is remembered"
        item = QListWidgetItem(f"{shown}\n{detail}")
        item.setData(ID_ROLE, conv_id)
        item.setData(TITLE_ROLE, title)
        item.setData(DETAIL_ROLE, detail)
        item.setData(SPANS_ROLE, spans)
        item.setToolTip(plain_tooltip(tip))
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
        self.list.addItem(item)
        return item

    def refresh(self) -> None:
        if self.editing:  # rebuilding the list would throw the user's edit away
            self._refresh_waiting = True
            return
        if self.searching:
            self._run_search()
            return
        self.list.clear()
        for conv in self.store.list_conversations(limit=LIST_LIMIT):
            item = self._add_item(conv.id, conv.title, _when(conv.updated_at), [], conv.title)
            if conv.id == self._current:
                item.setSelected(True)
                self.list.setCurrentItem(item)
        self.empty_label.setText("No chats yet")
        self.empty_label.setVisible(self.list.count() == 0)

    def _search_when_typing_stops(self) -> None:
        """The debounced search: a store closed meanwhile (quitting) is not an error."""
        if self.editing:
            self._refresh_waiting = True
            return
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
            snippet, spans = highlight_parts(hit.snippet)
            self._add_item(hit.conversation_id, hit.conversation_title, snippet, spans, snippet)
        self.empty_label.setText("Nothing found")
        self.empty_label.setVisible(self.list.count() == 0)

    def select(self, conversation_id: str | None) -> None:
        self._current = conversation_id
        self.list.clearSelection()
        item = self._item(conversation_id)
        if item is not None:
            self.list.setCurrentItem(item)
            item.setSelected(True)

    def _item(self, conversation_id: str | None) -> QListWidgetItem | None:
        for i in range(self.list.count()):
            item = self.list.item(i)
            if conversation_id and item.data(ID_ROLE) == conversation_id:
                return item
        return None

    def focus_search(self) -> None:
        self.search.setFocus()
        self.search.selectAll()

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        """Esc in the search field clears it; Esc in the empty field leaves it."""
        plain = (Qt.KeyboardModifier.NoModifier, Qt.KeyboardModifier.KeypadModifier)
        if (
            obj is self.search
            and isinstance(event, QKeyEvent)
            and event.key() == Qt.Key.Key_Escape
            and event.modifiers() in plain
        ):
            if event.type() == QEvent.Type.ShortcutOverride:
                event.accept()  # ours, not the window's Esc (Stop)
                return True
            if event.type() == QEvent.Type.KeyPress:
                self.escape_search()
                return True
        return super().eventFilter(obj, event)

    def escape_search(self) -> None:
        """What Esc does in the search field: clear it, or if empty, leave it."""
        if self.search.text():
            self.search.clear()
            self._search_timer.stop()
            self.refresh()
        else:
            self.searchDismissed.emit()

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

    def start_rename(self, conversation_id: str | None) -> bool:
        """Edits the conversation's title in place (Enter saves, Esc cancels). False when it
        is not in the list as shown (sidebar hidden, filtered out by a search)."""
        item = self._item(conversation_id)
        if item is None or not self.list.isVisible():
            return False
        if self.editing:
            return True
        self.list.setCurrentItem(item)
        self.list.scrollToItem(item)
        self.list.editItem(item)  # the delegate's createEditor notes the row
        editor = self.rename_editor()
        if editor is None:  # the view refused (e.g. not shown yet)
            return False
        editor.setFocus()
        return True

    def rename_editor(self) -> QLineEdit | None:
        """The line edit of the title being edited, if any."""
        if not self.editing or self._editing is None:
            return None
        editor = self.list.indexWidget(self._editing)
        if editor is None:
            found = self.list.findChild(QLineEdit, "renameEditor")
            return found if isinstance(found, QLineEdit) and found.isVisible() else None
        return editor if isinstance(editor, QLineEdit) else None

    def rename_to(self, conversation_id: str, title: str) -> bool:
        """Stores a new title (stripped; an empty one is refused) and shows it."""
        title = title.strip()
        if not title:
            return False
        try:
            self.store.rename_conversation(conversation_id, title)
        except NotFoundError:
            return False
        item = self._item(conversation_id)
        if item is not None:
            shown = flat(title)
            if self._is_private(conversation_id):
                shown = f"{shown} {PRIVATE_MARK}"
            item.setData(TITLE_ROLE, title)
            item.setText(f"{shown}\n{item.data(DETAIL_ROLE) or ''}")
            item.setToolTip(plain_tooltip(title))
        self.titleChanged.emit(conversation_id, title)
        return True

    def _commit_rename(self, conversation_id: str, title: str) -> None:
        item = self._item(conversation_id)
        if item is not None and title.strip() == str(item.data(TITLE_ROLE) or ""):
            return  # unchanged
        self.rename_to(conversation_id, title)

    def _editor_closed(self, *_: object) -> None:
        self._editing = None
        if self._refresh_waiting:
            self._refresh_waiting = False
            QTimer.singleShot(0, self.refresh)  # after the view has finished with the editor

    def _delete_current_item(self) -> None:
        item = self.list.currentItem()
        if item is not None and not self.editing:
            self.deleteRequested.emit(item.data(ID_ROLE))

    def context_menu(self, conv_id: str) -> QMenu:
        """The menu for one conversation (built apart from showing it, for tests)."""
        menu = QMenu(self)
        rename = QAction("Rename", menu)
        rename.setShortcut(QKeySequence("F2"))
        rename.setShortcutVisibleInContextMenu(True)
        private = QAction(PRIVATE_ACTION, menu)
        private.setCheckable(True)
        private.setChecked(self._is_private(conv_id))
        private.setToolTip("Memories are neither saved nor changed from this chat")
        delete = QAction("Delete", menu)
        delete.setShortcut(QKeySequence.StandardKey.Delete)
        delete.setShortcutVisibleInContextMenu(True)
        rename.triggered.connect(lambda: self._rename_from_menu(conv_id))
        private.triggered.connect(lambda checked: self.set_private(conv_id, checked))
        delete.triggered.connect(lambda: self.deleteRequested.emit(conv_id))
        menu.addAction(rename)
        menu.addAction(private)
        menu.addSeparator()
        menu.addAction(delete)
        return menu

    def _rename_from_menu(self, conv_id: str) -> None:
        if not self.start_rename(conv_id):
            self.renameRequested.emit(conv_id)

    def _menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None and self.list.hasFocus():  # the keyboard's menu key
            item = self.list.currentItem()
            if item is not None:
                pos = self.list.visualItemRect(item).center()
        if item is None:
            return
        menu = self.context_menu(item.data(ID_ROLE))
        menu.exec(self.list.viewport().mapToGlobal(pos))
        menu.deleteLater()
