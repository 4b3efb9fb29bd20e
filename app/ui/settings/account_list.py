"""How the providers page lists accounts: name, kind and host, and an "Active" pill."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

DETAIL_ROLE = Qt.ItemDataRole.UserRole + 1
ACTIVE_ROLE = Qt.ItemDataRole.UserRole + 2


class AccountDelegate(QStyledItemDelegate):
    """Two lines per account (name, then kind and host in muted text) and an "Active" pill."""

    HEIGHT = 54

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
        state = option.state
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
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

        inner = rect.adjusted(10, 7, -10, -7)
        name_font = QFont(option.font)
        name_font.setWeight(QFont.Weight.DemiBold)
        pill_width = 0
        if index.data(ACTIVE_ROLE):
            pill_font = QFont(option.font)
            pill_font.setPointSizeF(max(7.0, pill_font.pointSizeF() - 1.5))
            pill_font.setWeight(QFont.Weight.DemiBold)
            metrics = QFontMetrics(pill_font)
            pill_width = metrics.horizontalAdvance("Active") + 14
            pill = QRect(inner.right() - pill_width, inner.top(), pill_width, metrics.height() + 4)
            painter.setBrush(pal.color(QPalette.ColorRole.Highlight))
            painter.drawRoundedRect(pill, pill.height() / 2, pill.height() / 2)
            painter.setFont(pill_font)
            painter.setPen(pal.color(QPalette.ColorRole.HighlightedText))
            painter.drawText(pill, Qt.AlignmentFlag.AlignCenter, "Active")
            pill_width += 8

        half = inner.height() // 2
        top = QRect(inner.left(), inner.top(), inner.width() - pill_width, half)
        bottom = QRect(inner.left(), inner.top() + half, inner.width(), inner.height() - half)
        painter.setFont(name_font)
        painter.setPen(pal.color(QPalette.ColorRole.Text))
        name = QFontMetrics(name_font).elidedText(
            str(index.data(Qt.ItemDataRole.DisplayRole) or ""),
            Qt.TextElideMode.ElideRight,
            top.width(),
        )
        painter.drawText(top, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, name)
        detail_font = QFont(option.font)
        painter.setFont(detail_font)
        painter.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
        detail = QFontMetrics(detail_font).elidedText(
            str(index.data(DETAIL_ROLE) or ""), Qt.TextElideMode.ElideRight, bottom.width()
        )
        painter.drawText(bottom, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, detail)
        painter.restore()
