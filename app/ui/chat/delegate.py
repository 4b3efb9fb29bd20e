"""The delegate: sizes and paints items from cached layouts.

A layout is built (documents rendered) only when an item is painted, or when its size is
asked for and the item is live (`eager`). Items never on screen answer size queries with
an estimate, so a 10,000-message conversation costs 10,000 cheap guesses, not renders.
When a painted item's real height differs from what the view assumed, `heights_stale` is
called so the view can correct its row heights after the paint.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QPointF, QRect, QRectF, QSize
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QAbstractItemView, QStyledItemDelegate, QStyleOptionViewItem, QWidget

from app.ui.chat.layouts import ItemLayout, PaintState, build_layout, estimate_height
from app.ui.chat.model import AssistantMessage, ChatItem, ChatModel, ThinkingItem
from app.ui.chat.style import ChatTheme, theme_from_palette

_Index = QModelIndex | QPersistentModelIndex

#: Items whose rendered documents are kept; older ones keep only their height.
MAX_KEPT_LAYOUTS = 300


class ChatDelegate(QStyledItemDelegate):
    def __init__(self, view: QAbstractItemView, model: ChatModel) -> None:
        super().__init__(view)
        self._view = view
        self._model = model
        #: The chat text size the user chose in points (0: derived from the UI font).
        self.text_points = 0.0
        self.theme: ChatTheme = theme_from_palette(view.palette(), view.font())
        #: What `theme` was made from: a window being put together sends a dozen palette,
        #: font and style changes that change nothing (each a millisecond of colour math).
        self._theme_key = self._theme_source()
        self.state = PaintState()
        self.layouts_built = 0
        self._width: int | None = None
        self.heights_stale: Callable[[], None] = lambda: None
        self._kept: OrderedDict[int, ChatItem] = OrderedDict()

    def update_theme(self) -> None:
        key = self._theme_source()
        if key == self._theme_key:
            return
        self._theme_key = key
        self.theme = theme_from_palette(self._view.palette(), self._view.font(), self.text_points)

    def _theme_source(self) -> tuple[int, str, float]:
        return (self._view.palette().cacheKey(), self._view.font().key(), self.text_points)

    def width(self) -> int:
        """The row width (the viewport's); cached, since size queries come 10,000 at a time."""
        if self._width is None:
            # Whether or not the scroll bar shows: its appearing must not re-lay out all rows.
            view = self._view
            bar = view.verticalScrollBar().sizeHint().width()
            self._width = max(1, view.maximumViewportSize().width() - bar)
        return self._width

    def origin(self, rect: QRect) -> QPointF:
        """Where a row's layout starts: layouts are made for `width()`, which leaves out the
        scroll bar; while it is hidden the row is wider, so the content is centred in it."""
        return QPointF(rect.x() + max(0, rect.width() - self.width()) // 2, rect.y())

    def width_changed(self) -> None:
        self._width = None

    # ---- layouts -------------------------------------------------------------------------

    def cached(self, item: ChatItem, width: int | None = None) -> ItemLayout | None:
        layout = item.layout
        key = (width or self.width(), item.revision, self.theme)
        return layout if layout is not None and layout.key == key else None

    def layout(self, item: ChatItem, width: int | None = None) -> ItemLayout:
        """The exact layout (rendering the item if needed)."""
        width = width or self.width()
        layout = self.cached(item, width)
        if layout is None:
            key = (width, item.revision, self.theme)
            layout = item.layout = build_layout(item, self.theme, width, key)
            self.layouts_built += 1
        item.eager = False
        self._keep(item)
        return layout

    def height(self, item: ChatItem, width: int | None = None) -> int:
        width = width or self.width()
        layout = item.layout
        if layout is not None and layout.key == (width, item.revision, self.theme):
            return layout.height
        if item.eager:
            return self.layout(item, width).height
        guess = item.guess
        if guess is None or guess[:3] != (width, self.theme, item.revision):
            height = estimate_height(item, self.theme, width)
            guess = item.guess = (width, self.theme, item.revision, height)
        return guess[3]

    def _keep(self, item: ChatItem) -> None:
        """Remembers `item` as recently laid out; forgets the documents of the oldest ones
        (keeping their exact height), so scrolling through 10,000 messages keeps a bounded
        number of documents in memory."""
        kept = self._kept
        key = id(item)
        if key in kept:
            kept.move_to_end(key)
            return
        kept[key] = item
        while len(kept) > MAX_KEPT_LAYOUTS:
            _, old = kept.popitem(last=False)
            layout = old.layout
            if layout is None or getattr(old, "streaming", False):
                continue
            width, revision, theme = layout.key
            old.guess = (width, theme, revision, layout.height)
            old.layout = None
            if isinstance(old, AssistantMessage | ThinkingItem):
                old.docs = None

    def forget_all(self) -> None:
        self._kept.clear()

    # ---- QStyledItemDelegate -------------------------------------------------------------

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:
        width = self.width()
        return QSize(width, self.height(self._model.items[index.row()], width))

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        item = self._model.items[index.row()]
        layout = self.layout(item)
        rect = option.rect
        if layout.height != rect.height():
            self.heights_stale()
        top_left = self.origin(rect)
        self.state.visible = QRectF(self._view.viewport().rect()).translated(-top_left)
        self.state.row = item.row
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.translate(top_left)
        layout.paint(painter, self.theme, self.state)
        self.state.visible = None
        self.state.row = -1
        painter.restore()

    def updateEditorGeometry(
        self, editor: QWidget, option: QStyleOptionViewItem, index: _Index
    ) -> None:
        layout = self.layout(self._model.items[index.row()])
        area = layout.widget_rect
        rect = option.rect
        if area is None:
            editor.setGeometry(rect.x(), rect.y(), 0, 0)
            return
        editor.setGeometry(
            int(self.origin(rect).x() + area.x()),
            int(rect.y() + area.y()),
            int(area.width()),
            int(area.height()),
        )

    def createEditor(self, parent: QWidget, option: QStyleOptionViewItem, index: _Index) -> Any:
        return None  # approval buttons and the message editor are index widgets
