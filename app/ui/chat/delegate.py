"""The delegate: sizes and paints items from cached layouts.

A layout is built (documents rendered) only when an item is painted, or when its size is
asked for and the item is live (`eager`). Items never on screen answer size queries with
an estimate, so a 10,000-message conversation costs 10,000 cheap guesses, not renders.
When a painted item's real height differs from what the view assumed, `heights_stale` is
called so the view can correct its row heights after the paint.

A sub-agent's call is laid out narrower and drawn further right than other rows, under a
rail from its delegation card (`delegation_card`): `item_width` and `origin(rect, item)`
say where, and every caller placing or hit-testing a row goes through them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QPointF, QRect, QRectF, QSize
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QAbstractItemView, QStyledItemDelegate, QStyleOptionViewItem, QWidget

from app.ui.chat import delegation_card
from app.ui.chat.delegation_card import DelegationLayout, is_nested
from app.ui.chat.layouts import (
    ItemLayout,
    PaintState,
    ToolCardLayout,
    build_layout,
    estimate_height,
)
from app.ui.chat.model import (
    AssistantMessage,
    ChatItem,
    ChatModel,
    DelegationCard,
    ThinkingItem,
    ToolStatus,
)
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

    def origin(self, rect: QRect, item: ChatItem | None = None) -> QPointF:
        """Where a row's layout starts: layouts are made for `width()`, which leaves out the
        scroll bar; while it is hidden the row is wider, so the content is centred in it.
        A sub-agent's call (`item`) starts right of its delegation's column."""
        x: float = rect.x() + max(0, rect.width() - self.width()) // 2
        if item is not None and is_nested(item):
            x += delegation_card.nested_offset(self.width())
        return QPointF(x, rect.y())

    def item_width(self, item: ChatItem, width: int | None = None) -> int:
        """The width `item`'s layout is made for (narrower for a sub-agent's call)."""
        width = width or self.width()
        return delegation_card.nested_width(width) if is_nested(item) else width

    def width_changed(self) -> None:
        self._width = None

    # ---- layouts -------------------------------------------------------------------------

    def cached(self, item: ChatItem, width: int | None = None) -> ItemLayout | None:
        layout = item.layout
        key = (self.item_width(item, width), item.revision, self.theme)
        return layout if layout is not None and layout.key == key else None

    def layout(self, item: ChatItem, width: int | None = None) -> ItemLayout:
        """The exact layout (rendering the item if needed)."""
        layout = self.cached(item, width)
        if layout is None:
            key = (self.item_width(item, width), item.revision, self.theme)
            layout = item.layout = _build(item, self.theme, key[0], key)
            self.layouts_built += 1
        item.eager = False
        self._keep(item)
        return layout

    def height(self, item: ChatItem, width: int | None = None) -> int:
        item_width = self.item_width(item, width)
        layout = item.layout
        if layout is not None and layout.key == (item_width, item.revision, self.theme):
            return layout.height
        if item.eager:
            return self.layout(item, width).height
        guess = item.guess
        if guess is None or guess[:3] != (item_width, self.theme, item.revision):
            height = _estimate(item, self.theme, item_width)
            guess = item.guess = (item_width, self.theme, item.revision, height)
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
        top_left = self.origin(rect, item)
        self.state.visible = QRectF(self._view.viewport().rect()).translated(-top_left)
        self.state.row = item.row
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.translate(top_left)
        if is_nested(item):
            last = not self._next_is_sibling(item)
            middle = delegation_card.header_middle(self.theme)
            delegation_card.paint_rail(painter, self.theme, layout.height, last, middle)
        layout.paint(painter, self.theme, self.state)
        self.state.visible = None
        self.state.row = -1
        painter.restore()

    def updateEditorGeometry(
        self, editor: QWidget, option: QStyleOptionViewItem, index: _Index
    ) -> None:
        item = self._model.items[index.row()]
        layout = self.layout(item)
        area = layout.widget_rect
        rect = option.rect
        if area is None:
            editor.setGeometry(rect.x(), rect.y(), 0, 0)
            return
        editor.setGeometry(
            int(self.origin(rect, item).x() + area.x()),
            int(rect.y() + area.y()),
            int(area.width()),
            int(area.height()),
        )

    def createEditor(self, parent: QWidget, option: QStyleOptionViewItem, index: _Index) -> Any:
        return None  # approval buttons and the message editor are index widgets

    def _next_is_sibling(self, item: ChatItem) -> bool:
        """Whether the row after `item` is another call of the same delegation (the rail
        then goes on down)."""
        items = self._model.items
        after = items[item.row + 1] if 0 <= item.row < len(items) - 1 else None
        parent = getattr(item, "parent_call_id", "")
        return after is not None and getattr(after, "parent_call_id", "") == parent


def _build(item: ChatItem, theme: ChatTheme, width: int, key: tuple[Any, ...]) -> ItemLayout:
    """A delegation's own layout, except while it waits for approval (then it is a tool
    card with the approval's parts, like any other call)."""
    if isinstance(item, DelegationCard):
        if item.status == ToolStatus.AWAITING and item.approval is not None:
            return ToolCardLayout(key, item, theme, width)
        return DelegationLayout(key, item, theme, width)
    return build_layout(item, theme, width, key)


def _estimate(item: ChatItem, theme: ChatTheme, width: int) -> int:
    if isinstance(item, DelegationCard):
        return delegation_card.estimate(item, theme, width)
    return estimate_height(item, theme, width)
