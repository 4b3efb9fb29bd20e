"""The app icon (SVG from resources, with a painted fallback when the SVG plugin is absent),
and small line icons painted with QPainter.

Line icons (`line_icon("plus")`) are drawn each time they are painted, in the application
palette's button-text colour, so they follow the light and dark themes without being
rebuilt, and need no font to have a glyph (a "＋" or "×" character renders as a box where
the font lacks it).
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable

from PySide6.QtCore import QPointF, QRect, QRectF, QSize, Qt
from PySide6.QtGui import (
    QBrush,
    QColor,
    QGuiApplication,
    QIcon,
    QIconEngine,
    QLinearGradient,
    QPainter,
    QPainterPath,
    QPalette,
    QPen,
    QPixmap,
)


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


# ---- line icons --------------------------------------------------------------------------

#: Draws one icon on a 16×16 grid (the painter is already scaled and has the pen set).
Drawer = Callable[[QPainter], None]


def _plus(p: QPainter) -> None:
    p.drawLine(QPointF(8, 3), QPointF(8, 13))
    p.drawLine(QPointF(3, 8), QPointF(13, 8))


def _close(p: QPainter) -> None:
    p.drawLine(QPointF(4, 4), QPointF(12, 12))
    p.drawLine(QPointF(12, 4), QPointF(4, 12))


def _compose(p: QPainter) -> None:
    """A square with a pencil: "new chat"."""
    path = QPainterPath()
    path.moveTo(8, 2.5)
    path.lineTo(4, 2.5)
    path.quadTo(2.5, 2.5, 2.5, 4)
    path.lineTo(2.5, 12)
    path.quadTo(2.5, 13.5, 4, 13.5)
    path.lineTo(12, 13.5)
    path.quadTo(13.5, 13.5, 13.5, 12)
    path.lineTo(13.5, 8)
    p.drawPath(path)
    p.drawLine(QPointF(7, 9), QPointF(13, 3))
    p.drawLine(QPointF(7, 9), QPointF(6.5, 9.5))


def _sidebar(p: QPainter) -> None:
    p.drawRoundedRect(QRectF(2, 3, 12, 10), 1.5, 1.5)
    p.drawLine(QPointF(6, 3), QPointF(6, 13))


def _search(p: QPainter) -> None:
    p.drawEllipse(QRectF(2.5, 2.5, 8, 8))
    p.drawLine(QPointF(9.5, 9.5), QPointF(13.5, 13.5))


def _folder(p: QPainter) -> None:
    path = QPainterPath()
    path.moveTo(2, 4)
    path.lineTo(6, 4)
    path.lineTo(7.5, 5.5)
    path.lineTo(14, 5.5)
    path.lineTo(14, 13)
    path.lineTo(2, 13)
    path.closeSubpath()
    p.drawPath(path)


def _container(p: QPainter) -> None:
    """A box in three layers, like stacked containers."""
    p.drawRoundedRect(QRectF(2.5, 2.5, 11, 11), 1.5, 1.5)
    p.drawLine(QPointF(2.5, 6.2), QPointF(13.5, 6.2))
    p.drawLine(QPointF(2.5, 9.8), QPointF(13.5, 9.8))


def _bell(p: QPainter) -> None:
    path = QPainterPath()
    path.moveTo(3, 11.5)
    path.lineTo(4.5, 10)
    path.lineTo(4.5, 7)
    path.cubicTo(4.5, 2.5, 11.5, 2.5, 11.5, 7)
    path.lineTo(11.5, 10)
    path.lineTo(13, 11.5)
    path.closeSubpath()
    p.drawPath(path)
    p.drawLine(QPointF(6.8, 13.8), QPointF(9.2, 13.8))


def _globe(p: QPainter) -> None:
    p.drawEllipse(QRectF(2.5, 2.5, 11, 11))
    p.drawEllipse(QRectF(5.5, 2.5, 5, 11))
    p.drawLine(QPointF(2.5, 8), QPointF(13.5, 8))


LINE_ICONS: dict[str, Drawer] = {
    "plus": _plus,
    "close": _close,
    "compose": _compose,
    "sidebar": _sidebar,
    "search": _search,
    "folder": _folder,
    "container": _container,
    "bell": _bell,
    "globe": _globe,
}


def icon_color(mode: QIcon.Mode = QIcon.Mode.Normal, palette: QPalette | None = None) -> QColor:
    """The colour a line icon is drawn in for `mode`, from `palette` (default: the app's)."""
    pal = palette if palette is not None else QGuiApplication.palette()
    if mode == QIcon.Mode.Disabled:
        return pal.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText)
    if mode == QIcon.Mode.Selected:
        return pal.color(QPalette.ColorGroup.Active, QPalette.ColorRole.HighlightedText)
    return pal.color(QPalette.ColorGroup.Active, QPalette.ColorRole.ButtonText)


def paint_line_icon(painter: QPainter, rect: QRect | QRectF, name: str, color: QColor) -> None:
    """Draws icon `name` into `rect` (square, centred) in `color`."""
    r = QRectF(rect)
    side = min(r.width(), r.height())
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.translate(r.center().x() - side / 2, r.center().y() - side / 2)
    painter.scale(side / 16, side / 16)
    pen = QPen(color, 1.5 if side < 24 else 1.3)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
    painter.setPen(pen)
    painter.setBrush(Qt.BrushStyle.NoBrush)
    LINE_ICONS[name](painter)
    painter.restore()


class LineIconEngine(QIconEngine):
    """Paints a line icon at any size, in the palette's colour at the time it is painted."""

    def __init__(self, name: str) -> None:
        super().__init__()
        if name not in LINE_ICONS:
            raise KeyError(f"no line icon named {name!r}")
        self.name = name

    def paint(self, painter: QPainter, rect: QRect, mode: QIcon.Mode, state: QIcon.State) -> None:
        paint_line_icon(painter, rect, self.name, icon_color(mode))

    def pixmap(self, size: QSize, mode: QIcon.Mode, state: QIcon.State) -> QPixmap:
        return self.scaledPixmap(size, mode, state, 1.0)

    def scaledPixmap(
        self, size: QSize, mode: QIcon.Mode, state: QIcon.State, scale: float
    ) -> QPixmap:
        pixmap = QPixmap(max(1, round(size.width() * scale)), max(1, round(size.height() * scale)))
        pixmap.setDevicePixelRatio(scale)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        self.paint(painter, QRect(0, 0, size.width(), size.height()), mode, state)
        painter.end()
        return pixmap

    def clone(self) -> QIconEngine:
        engine = LineIconEngine(self.name)
        _ENGINES.append(engine)  # Qt owns the clone; keep its Python side alive with it
        return engine

    def key(self) -> str:
        return "deskhand-line"


#: Engines handed to Qt: their Python objects must outlive the icons that use them.
_ENGINES: list[LineIconEngine] = []
_ICONS: dict[str, QIcon] = {}


def line_icon(name: str) -> QIcon:
    """A small line icon (one of LINE_ICONS) that follows the palette (light and dark)."""
    found = _ICONS.get(name)
    if found is None:
        engine = LineIconEngine(name)
        _ENGINES.append(engine)
        found = _ICONS[name] = QIcon(engine)
    return QIcon(found)
