"""What the window shows for the moment between its first paint and the chat being built:
the shape of the real window (the chat list's column, the header's rule, the message box)
in the theme's colours, so start-up paints at once and nothing jumps when the parts arrive.

Light on purpose: only QtCore/QtGui/QtWidgets and the theme's colours, no core module.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import QApplication, QWidget

from app.ui.theme import colors, current_theme

HEADER_HEIGHT = 44
#: The real composer's bar, and where its text box starts and ends (after the + button,
#: before Send), so nothing jumps when it replaces this.
COMPOSER_HEIGHT = 50
BOX_LEFT, BOX_RIGHT = 64, 93


class StartPlaceholder(QWidget):
    """Paints the window's outline; `sidebar_width` 0 when the chat list is hidden."""

    def __init__(
        self, sidebar_width: int, parent: QWidget | None = None, *, composer: bool = True
    ) -> None:
        super().__init__(parent)
        self.sidebar_width = max(0, sidebar_width)
        self.composer = composer  # paint the message box (else the real one is below)
        self.setObjectName("startPlaceholder")
        self.setAccessibleName("Deskhand is starting")

    def paintEvent(self, event: QPaintEvent) -> None:
        app = QApplication.instance()
        theme = current_theme(app) if isinstance(app, QApplication) else None
        c = colors(theme or "light")
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        width, height = self.width(), self.height()
        painter.fillRect(self.rect(), QColor(c.window))
        side = min(self.sidebar_width, width // 2)
        if side:
            painter.fillRect(0, 0, side, height, QColor(c.sidebar))
        painter.fillRect(side, 0, width - side, HEADER_HEIGHT, QColor(c.surface))
        painter.fillRect(side, HEADER_HEIGHT, width - side, 1, QColor(c.border))
        if not self.composer:
            painter.end()
            return
        # the message box where the real one will be (a bar with a top rule, the box
        # between the + button and Send)
        bar_top = height - COMPOSER_HEIGHT
        painter.fillRect(side, bar_top, width - side, 1, QColor(c.border))
        box = QRectF(
            side + BOX_LEFT,
            bar_top + 8,
            max(0, width - side - BOX_LEFT - BOX_RIGHT),
            COMPOSER_HEIGHT - 10,
        )
        painter.setPen(QColor(c.border_strong))
        painter.setBrush(QColor(c.surface))
        painter.drawRoundedRect(box, 6, 6)
        painter.setPen(QColor(c.muted))
        painter.drawText(
            box.adjusted(14, 0, -14, 0),
            int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft),
            "Starting…",
        )
        painter.end()
