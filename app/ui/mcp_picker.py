"""The composer's MCP pieces: the resource picker, a resource's chip, the
"/" completion of prompts and the small form a prompt's arguments are asked in.

Everything shown here comes from MCP servers and is untrusted: it is escaped by
`app.core.mcp.catalog` and shown as plain text only (labels in PlainText format, list items,
tooltips HTML-escaped). Nothing here talks to a server; the composer does, off the GUI
thread, and only after the user picked something.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from PySide6.QtCore import (
    QEvent,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QPoint,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import (
    QGuiApplication,
    QKeyEvent,
    QPainter,
    QPalette,
    QStandardItem,
    QStandardItemModel,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QCompleter,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QStackedWidget,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.core.visible import one_line
from app.ui.plain_text import plain_tooltip

if TYPE_CHECKING:
    from app.core.mcp.catalog import PromptEntry, ResourceEntry

T = TypeVar("T")

#: The role of a prompt completion holding its index in the composer's prompt list.
ENTRY_ROLE = Qt.ItemDataRole.UserRole + 1
#: The role the "/" completion matches the typed text against: the command without its "/",
#: so "/sum" finds "/notes:summarize".
COMMAND_ROLE = Qt.ItemDataRole.UserRole + 2
#: What `DetailDelegate` paints: the main text, and the detail in the muted colour.
MAIN_ROLE = Qt.ItemDataRole.UserRole + 3
DETAIL_ROLE = Qt.ItemDataRole.UserRole + 4
#: How wide a chip's name and its error may get (the whole text is in their tooltips).
CHIP_NAME_PX = 220
CHIP_STATUS_PX = 300

#: Frames of this module are styled from the palette, so they follow the theme.
_FRAME_STYLE = (
    "#{name} {{ background: palette(base); border: 1px solid palette(mid);"
    " border-radius: {radius}px; }}"
)


def plain_label(text: str = "", role: str = "") -> QLabel:
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    if role:
        label.setProperty("role", role)
    return label


def elide(label: QLabel, text: str, width: int) -> None:
    """Sets `text` on `label`, cut with "…" to `width` pixels."""
    metrics = label.fontMetrics()
    label.setText(metrics.elidedText(text, Qt.TextElideMode.ElideRight, width))


def _styled(frame: QFrame, name: str, radius: int) -> None:
    frame.setObjectName(name)
    frame.setStyleSheet(_FRAME_STYLE.format(name=name, radius=radius))


def place_above(popup: QWidget, top: QWidget, left: QWidget | None = None) -> None:
    """Shows `popup` just above `top` (the composer sits at the window's bottom), lined up
    with `left`, kept on the screen."""
    popup.adjustSize()
    size = popup.size()
    x = (left or top).mapToGlobal(QPoint(0, 0)).x()
    at = QPoint(x, top.mapToGlobal(QPoint(0, 0)).y() - size.height() - 4)
    screen = top.screen() or QGuiApplication.primaryScreen()
    if screen is not None:
        area = screen.availableGeometry()
        at.setX(max(area.left(), min(at.x(), area.right() - size.width())))
        at.setY(max(area.top(), at.y()))
    popup.move(at)
    popup.show()


class DetailDelegate(QStyledItemDelegate):
    """Paints an item's MAIN_ROLE text and, muted, its DETAIL_ROLE text: below it
    (`beside=False`) or in a column to its right at `column` pixels. Text only, elided."""

    def __init__(self, view: QAbstractItemView, *, beside: bool) -> None:
        super().__init__(view)
        self._view = view
        self.beside = beside
        self.column = 0

    def fit_column(self, texts: Sequence[str]) -> None:
        metrics = self._view.fontMetrics()
        widest = max((metrics.horizontalAdvance(t) for t in texts), default=0)
        self.column = min(280, widest + 24)

    def paint(
        self,
        painter: QPainter,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> None:
        main = index.data(MAIN_ROLE)
        if main is None:
            super().paint(painter, option, index)
            return
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        widget = opt.widget
        style = widget.style() if widget is not None else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        self._texts(painter, opt, str(main), str(index.data(DETAIL_ROLE) or ""))

    def _texts(self, painter: QPainter, opt: QStyleOptionViewItem, main: str, detail: str) -> None:
        rect = opt.rect.adjusted(8, 0, -8, 0)
        metrics = opt.fontMetrics
        palette = opt.palette
        left = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
        cut = Qt.TextElideMode.ElideRight
        if self.beside:
            first, second = rect.adjusted(0, 0, 0, 0), rect.adjusted(self.column, 0, 0, 0)
            first.setWidth(self.column - 8)
        else:
            half = rect.height() // 2
            first, second = rect.adjusted(0, 2, 0, -half), rect.adjusted(0, half, 0, -2)
        painter.save()
        painter.setPen(palette.color(QPalette.ColorRole.Text))
        painter.drawText(first, left, metrics.elidedText(main, cut, first.width()))
        painter.setPen(palette.color(QPalette.ColorRole.PlaceholderText))
        painter.drawText(second, left, metrics.elidedText(detail, cut, second.width()))
        painter.restore()

    def sizeHint(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> QSize:
        lines = 1 if self.beside else 2
        return QSize(200, option.fontMetrics.lineSpacing() * lines + 12)


# ---- resources -------------------------------------------------------------------------------


class ResourcePicker(QFrame):
    """A popup listing the ready servers' resources with a filter box; emits `picked`."""

    picked = Signal(object)  # ResourceEntry

    def __init__(self, entries: Sequence[ResourceEntry], parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Popup)
        _styled(self, "mcpPicker", 10)
        self.entries = list(entries)
        self.setFixedWidth(400)
        title = plain_label("Attach from an MCP server", "section")
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter by name, server or description")
        self.filter.setClearButtonEnabled(True)
        self.list = QListWidget()
        self.list.setObjectName("mcpResourceList")
        self.list.setItemDelegate(DetailDelegate(self.list, beside=False))
        self.empty = plain_label("", "muted")
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        for index, entry in enumerate(self.entries):
            item = QListWidgetItem(one_line(entry.title, 120) + "\n" + self._where(entry))
            item.setData(MAIN_ROLE, one_line(entry.title, 120))
            item.setData(DETAIL_ROLE, self._where(entry))
            item.setToolTip(plain_tooltip(entry.description or one_line(entry.uri, 300)))
            item.setData(ENTRY_ROLE, index)
            self.list.addItem(item)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 10, 10, 10)
        layout.setSpacing(8)
        layout.addWidget(title)
        layout.addWidget(self.filter)
        # the list, or in its place (same size: the popup never jumps) why it is empty
        self._stack = QStackedWidget()
        self._stack.addWidget(self.list)
        self._stack.addWidget(self.empty)
        layout.addWidget(self._stack)
        rows = max(1, min(6, len(self.entries)))
        row_height = self.list.sizeHintForRow(0) if self.entries else 40
        self._stack.setFixedHeight(rows * row_height + 2 * self.list.frameWidth() + 4)
        self.filter.textChanged.connect(self.apply_filter)
        self.filter.returnPressed.connect(self.pick_current)
        self.filter.installEventFilter(self)
        self.list.itemActivated.connect(lambda item: self.pick(item))
        self.list.itemClicked.connect(lambda item: self.pick(item))
        self.apply_filter("")

    @staticmethod
    def _where(entry: ResourceEntry) -> str:
        return f"{one_line(entry.server, 40)} · {one_line(entry.uri, 80)}"

    def visible_entries(self) -> list[ResourceEntry]:
        return [
            self.entries[self.list.item(i).data(ENTRY_ROLE)]
            for i in range(self.list.count())
            if not self.list.item(i).isHidden()
        ]

    def apply_filter(self, text: str) -> None:
        words = text.lower().split()
        first: QListWidgetItem | None = None
        for i in range(self.list.count()):
            item = self.list.item(i)
            entry = self.entries[item.data(ENTRY_ROLE)]
            hay = " ".join((entry.title, entry.server, entry.uri, entry.description)).lower()
            hidden = not all(word in hay for word in words)
            item.setHidden(hidden)
            if not hidden and first is None:
                first = item
        if first is not None:
            self.list.setCurrentItem(first)
        if not self.entries:
            self.empty.setText("The MCP servers that are ready offer no resources.")
        elif first is None:
            self.empty.setText("No resource matches.")
        self._stack.setCurrentWidget(self.list if first is not None else self.empty)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Up and Down in the filter box move through the list, so typing never stops."""
        if watched is self.filter and event.type() == QEvent.Type.KeyPress:
            assert isinstance(event, QKeyEvent)
            step = {Qt.Key.Key_Down: 1, Qt.Key.Key_Up: -1}.get(Qt.Key(event.key()))
            if step:
                self._move(step)
                return True
        return super().eventFilter(watched, event)

    def _move(self, step: int) -> None:
        rows = [i for i in range(self.list.count()) if not self.list.item(i).isHidden()]
        if not rows:
            return
        current = self.list.currentRow()
        at = rows.index(current) if current in rows else -1
        self.list.setCurrentRow(rows[max(0, min(len(rows) - 1, at + step))])

    def pick_current(self) -> None:
        item = self.list.currentItem()
        if item is not None and not item.isHidden():
            self.pick(item)

    def pick(self, item: QListWidgetItem) -> None:
        entry = self.entries[item.data(ENTRY_ROLE)]
        self.close()
        self.picked.emit(entry)

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        self.filter.setFocus()


class McpChip(QFrame):
    """An attached resource: "name · server", then "reading…", nothing, or the error."""

    removed = Signal(object)  # the chip

    def __init__(self, entry: ResourceEntry, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentChip")
        self.entry = entry
        self.paths: tuple[str, ...] = ()
        self.state = "reading"
        self.cancel = threading.Event()
        self.label = plain_label()
        elide(
            self.label, f"{one_line(entry.title, 200)} · {one_line(entry.server, 80)}", CHIP_NAME_PX
        )
        self.label.setToolTip(plain_tooltip(self._details()))
        self.status = plain_label("reading…", "muted")
        close = QToolButton()
        close.setText("×")
        close.setAutoRaise(True)
        close.setToolTip("Remove attachment")
        close.clicked.connect(self._remove)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 2, 4, 2)
        layout.setSpacing(6)
        layout.addWidget(self.label)
        layout.addWidget(self.status)
        layout.addWidget(close)

    def _details(self) -> str:
        lines = [f"From the MCP server {one_line(self.entry.server, 80)}", self.entry.uri]
        return "\n".join(one_line(line, 300) for line in lines if line) + (
            f"\n{self.entry.description}" if self.entry.description else ""
        )

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def set_ready(self, paths: Sequence[str], skipped: Sequence[str] = ()) -> None:
        self.state, self.paths = "ready", tuple(paths)
        self.status.setVisible(bool(skipped))
        if skipped:
            self.status.setText("partly attached")
            self.status.setToolTip(plain_tooltip("Left out: " + "; ".join(skipped)))

    def set_error(self, reason: str) -> None:
        self.state, self.paths = "error", ()
        text = f"Not attached: {one_line(reason, 2000)}"
        elide(self.status, text, CHIP_STATUS_PX)
        self.status.setToolTip(plain_tooltip(text))
        self.status.setProperty("role", "error")
        self.status.style().unpolish(self.status)
        self.status.style().polish(self.status)
        self.status.show()

    def _remove(self) -> None:
        self.cancel.set()
        self.removed.emit(self)


# ---- prompts -------------------------------------------------------------------------------------


def prompt_model(entries: Sequence[PromptEntry], parent: QObject) -> QStandardItemModel:
    """The "/" completions: each shows its command and description, matches on the command
    (what follows the "/" typed anywhere in it)."""
    model = QStandardItemModel(parent)
    for index, entry in enumerate(entries):
        shown = entry.command + (
            f"   {one_line(entry.description, 90)}" if entry.description else ""
        )
        item = QStandardItem(shown)
        item.setEditable(False)
        item.setData(entry.command.removeprefix("/"), COMMAND_ROLE)
        item.setData(index, ENTRY_ROLE)
        item.setData(entry.command, MAIN_ROLE)
        item.setData(one_line(entry.description, 200), DETAIL_ROLE)
        item.setToolTip(plain_tooltip(f"{entry.command}\n{entry.description}".strip()))
        model.appendRow(item)
    return model


def slash_completer(widget: QWidget) -> QCompleter:
    completer = QCompleter(widget)
    completer.setWidget(widget)
    completer.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)
    completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
    completer.setFilterMode(Qt.MatchFlag.MatchContains)
    completer.setCompletionRole(COMMAND_ROLE)
    completer.setMaxVisibleItems(8)
    popup = completer.popup()
    if popup is None:
        return completer
    popup.setObjectName("slashPopup")
    popup.setItemDelegate(DetailDelegate(popup, beside=True))
    return completer


def fit_popup(completer: QCompleter, entries: Sequence[PromptEntry]) -> None:
    """Lines the descriptions up after the longest command."""
    popup = completer.popup()
    delegate = popup.itemDelegate() if popup is not None else None
    if isinstance(delegate, DetailDelegate):
        delegate.fit_column([entry.command for entry in entries])


class PromptForm(QFrame):
    """Asks a prompt's arguments inline (required ones marked *); emits `submitted(values)`.
    While the prompt is fetched it says so; an error stays in the form in plain words."""

    submitted = Signal(dict)
    cancelled = Signal()

    def __init__(self, entry: PromptEntry, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        _styled(self, "promptForm", 8)
        self.entry = entry
        self.cancel = threading.Event()
        heading = plain_label(entry.command, "section")
        heading.setToolTip(plain_tooltip(f"From the MCP server {one_line(entry.server, 80)}"))
        about = plain_label(entry.description, "muted")
        about.setWordWrap(True)
        about.setVisible(bool(entry.description))
        self.fields: dict[str, QLineEdit] = {}
        grid = QGridLayout()
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(6)
        for row, argument in enumerate(entry.arguments):
            edit = QLineEdit()
            edit.setPlaceholderText(
                argument.description or ("required" if argument.required else "optional")
            )
            edit.setToolTip(plain_tooltip(argument.description))
            edit.returnPressed.connect(self._submit)
            grid.addWidget(plain_label(argument.label), row, 0)
            grid.addWidget(edit, row, 1)
            self.fields[argument.name] = edit
        self.message = plain_label("")
        self.message.setWordWrap(True)
        self.message.hide()
        self.insert_button = QPushButton("Insert")
        self.insert_button.setProperty("accent", True)
        self.insert_button.setToolTip("Put the prompt into the message box, to edit and send")
        self.insert_button.clicked.connect(self._submit)
        cancel = QPushButton("Cancel")
        cancel.clicked.connect(self._cancel)
        buttons = QHBoxLayout()
        buttons.addWidget(self.message, 1)
        buttons.addWidget(cancel)
        buttons.addWidget(self.insert_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 10, 12, 10)
        layout.setSpacing(6)
        top = QHBoxLayout()
        top.addWidget(heading)
        top.addWidget(plain_label(f"from {one_line(entry.server, 60)}", "muted"))
        top.addStretch(1)
        layout.addLayout(top)
        layout.addWidget(about)
        if self.fields:
            layout.addLayout(grid)
        layout.addLayout(buttons)

    def values(self) -> dict[str, str]:
        return {name: edit.text() for name, edit in self.fields.items()}

    def focus_first(self) -> None:
        first = next(iter(self.fields.values()), None)
        (first or self.insert_button).setFocus()

    def set_busy(self, busy: bool) -> None:
        for edit in self.fields.values():
            edit.setEnabled(not busy)
        self.insert_button.setEnabled(not busy)
        if busy:
            self._say(f"Getting the prompt from {one_line(self.entry.server, 60)}…", "muted")

    def show_error(self, reason: str) -> None:
        self._say(one_line(reason, 500), "error")

    def _say(self, text: str, role: str) -> None:
        self.message.setText(text)
        self.message.setProperty("role", role)
        self.message.style().unpolish(self.message)
        self.message.style().polish(self.message)
        self.message.show()

    def _submit(self) -> None:
        if self.insert_button.isEnabled():
            self.submitted.emit(self.values())

    def _cancel(self) -> None:
        self.cancel.set()
        self.cancelled.emit()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self._cancel()
            return
        super().keyPressEvent(event)
