"""Two-line rows of the settings pages' lists: a name, a muted detail line, and a small tag
at the top right — the providers page's accounts ("Active", filled) and the agents page's
agents ("Built in", outlined)."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

DETAIL_ROLE = Qt.ItemDataRole.UserRole + 1
ACTIVE_ROLE = Qt.ItemDataRole.UserRole + 2


class TwoLineDelegate(QStyledItemDelegate):
    """Name, then the DETAIL_ROLE text muted; `tag(index)` says what tag a row shows."""

    HEIGHT = 54

    def tag(self, index: QModelIndex | QPersistentModelIndex) -> tuple[str, bool] | None:
        """(its text, filled) for a row with a tag; None for none."""
        return None

    def sizeHint(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> QSize:
        return QSize(option.rect.width(), self.HEIGHT)

    def paint(
        self,
        painter: QPainter,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> None:
        pal = option.palette
        rect = option.rect.adjusted(4, 2, -4, -2)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        _paint_row(painter, option, rect)
        inner = rect.adjusted(10, 7, -10, -7)
        tag = self.tag(index)
        tag_width = _paint_tag(painter, option, inner, *tag) if tag else 0
        half = inner.height() // 2
        top = QRect(inner.left(), inner.top(), inner.width() - tag_width, half)
        bottom = QRect(inner.left(), inner.top() + half, inner.width(), inner.height() - half)
        name_font = QFont(option.font)
        name_font.setWeight(QFont.Weight.DemiBold)
        painter.setFont(name_font)
        painter.setPen(pal.color(QPalette.ColorRole.Text))
        name = QFontMetrics(name_font).elidedText(
            str(index.data(Qt.ItemDataRole.DisplayRole) or ""),
            Qt.TextElideMode.ElideRight,
            top.width(),
        )
        painter.drawText(top, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, name)
        painter.setFont(option.font)
        painter.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
        detail = QFontMetrics(option.font).elidedText(
            str(index.data(DETAIL_ROLE) or ""), Qt.TextElideMode.ElideRight, bottom.width()
        )
        painter.drawText(bottom, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, detail)
        painter.restore()


class AccountDelegate(TwoLineDelegate):
    """An account: its name, then kind and host; "Active" on the one in use."""

    def tag(self, index: QModelIndex | QPersistentModelIndex) -> tuple[str, bool] | None:
        return ("Active", True) if index.data(ACTIVE_ROLE) else None


def _paint_row(painter: QPainter, option: QStyleOptionViewItem, rect: QRect) -> None:
    """The row's rounded background (selected, hovered) and, with the keyboard focus on the
    selected row, its outline."""
    pal, state = option.palette, option.state
    if state & QStyle.StateFlag.State_Selected:
        fill = QColor(pal.color(QPalette.ColorRole.Highlight))
        fill.setAlphaF(0.16)
    elif state & QStyle.StateFlag.State_MouseOver:
        fill = QColor(pal.color(QPalette.ColorRole.AlternateBase))
    else:
        fill = QColor(Qt.GlobalColor.transparent)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(fill)
    painter.drawRoundedRect(rect, 6, 6)
    if state & QStyle.StateFlag.State_HasFocus and state & QStyle.StateFlag.State_Selected:
        painter.setPen(pal.color(QPalette.ColorRole.Highlight))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(rect, 6, 6)


def _paint_tag(
    painter: QPainter, option: QStyleOptionViewItem, inner: QRect, text: str, filled: bool
) -> int:
    """A pill at the top right: filled (it calls out) or outlined (it only marks); returns
    the width it takes."""
    pal = option.palette
    font = QFont(option.font)
    font.setPointSizeF(max(7.0, font.pointSizeF() - 1.5))
    font.setWeight(QFont.Weight.DemiBold)
    metrics = QFontMetrics(font)
    width = metrics.horizontalAdvance(text) + 14
    pill = QRect(inner.right() - width, inner.top(), width, metrics.height() + 4)
    radius = pill.height() / 2
    if filled:
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(pal.color(QPalette.ColorRole.Highlight))
        painter.drawRoundedRect(pill, radius, radius)
        painter.setPen(pal.color(QPalette.ColorRole.HighlightedText))
    else:
        painter.setPen(pal.color(QPalette.ColorRole.Dark))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(pill.adjusted(0, 0, -1, -1), radius, radius)
        painter.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
    painter.setFont(font)
    painter.drawText(pill, Qt.AlignmentFlag.AlignCenter, text)
    return width + 8
