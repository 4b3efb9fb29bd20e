"""The app icon (SVG from resources, with a painted fallback when the SVG plugin is absent)."""

from __future__ import annotations

import importlib.resources

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QIcon, QLinearGradient, QPainter, QPixmap


def app_icon() -> QIcon:
    path = importlib.resources.files("resources").joinpath("icons/deskhand.svg")
    icon = QIcon(str(path))
    if not icon.isNull() and not icon.pixmap(32, 32).isNull():
        return icon
    return QIcon(_painted(64))


def _painted(size: int) -> QPixmap:
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    gradient = QLinearGradient(0, 0, size, size)
    gradient.setColorAt(0, QColor("#6d7cff"))
    gradient.setColorAt(1, QColor("#3a47c9"))
    painter.setBrush(QBrush(gradient))
    painter.setPen(Qt.PenStyle.NoPen)
    painter.drawRoundedRect(QRectF(4, 4, size - 8, size - 8), size * 0.22, size * 0.22)
    painter.setBrush(QColor("white"))
    painter.drawRoundedRect(QRectF(size * 0.25, size * 0.33, size * 0.5, size * 0.33), 6, 6)
    painter.end()
    return pixmap
