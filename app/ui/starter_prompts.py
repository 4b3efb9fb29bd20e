"""Starter prompts on an empty chat: a few concrete things Deskhand can do, as cards.
Choosing one fills the message box (it is not sent), so the user can adjust it first."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPaintEvent, QPalette, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractButton,
    QGridLayout,
    QLabel,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.ui.icons import paint_line_icon


@dataclass(frozen=True)
class Starter:
    title: str  # a few words on the card
    prompt: str  # what goes into the message box
    icon: str  # a name from app.ui.icons.LINE_ICONS


STARTERS: tuple[Starter, ...] = (
    Starter(
        "Tidy up Downloads",
        "Find the 10 largest files in my Downloads folder and suggest which I can delete.",
        "folder",
    ),
    Starter(
        "Check my containers",
        "List my Docker containers and tell me which ones stopped with an error.",
        "container",
    ),
    Starter(
        "Plan my week",
        "What is on my calendar this week? Remind me 30 minutes before each meeting.",
        "bell",
    ),
    Starter(
        "Look something up",
        "Open python.org and tell me what the latest Python release is and what's new in it.",
        "globe",
    ),
)
HEADING = "What can I do for you?"
#: Two columns from this width on, else one.
TWO_COLUMNS_FROM = 460
CARD_MAX_WIDTH, CARD_MIN_WIDTH = 300, 180
PAD, ICON, GAP, SPACING = 12, 16, 8, 10


class StarterCard(QAbstractButton):
    """One starter: icon, title and the prompt's text, painted from the palette."""

    def __init__(self, starter: Starter, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.starter = starter
        self.setObjectName("starterCard")
        self.setText(starter.title)
        self.setToolTip(starter.prompt)
        self.setAccessibleName(starter.title)
        self.setAccessibleDescription(starter.prompt)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setAttribute(Qt.WidgetAttribute.WA_Hover)
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    def _title_font(self) -> QFont:
        font = QFont(self.font())
        font.setWeight(QFont.Weight.DemiBold)
        return font

    def _text_rect(self, width: int) -> QRect:
        return QRect(PAD, PAD + QFontMetrics(self._title_font()).height() + 4, width - 2 * PAD, 0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        rect = self._text_rect(width)
        flags = int(Qt.TextFlag.TextWordWrap)
        body = self.fontMetrics().boundingRect(
            QRect(0, 0, rect.width(), 10_000), flags, self.starter.prompt
        )
        return rect.top() + body.height() + PAD

    def sizeHint(self) -> QSize:
        width = CARD_MAX_WIDTH - 20
        return QSize(width, self.heightForWidth(width))

    def minimumSizeHint(self) -> QSize:
        return QSize(CARD_MIN_WIDTH, self.heightForWidth(CARD_MIN_WIDTH))

    def paintEvent(self, event: QPaintEvent) -> None:
        pal = self.palette()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        hot = self.underMouse() or self.isDown()
        border = pal.color(
            QPalette.ColorRole.Highlight if hot or self.hasFocus() else QPalette.ColorRole.Mid
        )
        painter.setPen(border)
        painter.setBrush(
            pal.color(QPalette.ColorRole.AlternateBase if hot else QPalette.ColorRole.Base)
        )
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 10, 10)
        if self.hasFocus():
            ring = QColor(border)
            ring.setAlpha(90)
            painter.setPen(ring)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(QRectF(self.rect()).adjusted(1.5, 1.5, -1.5, -1.5), 9, 9)
        title_h = QFontMetrics(self._title_font()).height()
        icon_rect = QRect(PAD, PAD + (title_h - ICON) // 2, ICON, ICON)
        paint_line_icon(
            painter, icon_rect, self.starter.icon, pal.color(QPalette.ColorRole.Highlight)
        )
        painter.setFont(self._title_font())
        painter.setPen(pal.color(QPalette.ColorRole.Text))
        title_rect = QRect(PAD + ICON + GAP, PAD, self.width() - 2 * PAD - ICON - GAP, title_h)
        metrics = QFontMetrics(self._title_font())
        painter.drawText(
            title_rect,
            int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
            metrics.elidedText(self.starter.title, Qt.TextElideMode.ElideRight, title_rect.width()),
        )
        painter.setFont(self.font())
        painter.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
        body = self._text_rect(self.width())
        body.setBottom(self.height() - PAD)
        painter.drawText(body, int(Qt.TextFlag.TextWordWrap), self.starter.prompt)
        painter.end()


class StarterPrompts(QWidget):
    """The cards and a heading; `chosen(prompt)` when one is clicked (or Enter/Space)."""

    chosen = Signal(str)

    def __init__(
        self, starters: tuple[Starter, ...] = STARTERS, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("starterPrompts")
        # cards are sized to the room given (`_fit_cards`): they must not widen the window
        self.setMinimumSize(1, 1)
        self.heading = QLabel(HEADING)
        self.heading.setObjectName("starterHeading")
        self.heading.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        self.cards = [StarterCard(starter) for starter in starters]
        for card in self.cards:
            card.clicked.connect(lambda _=False, c=card: self.chosen.emit(c.starter.prompt))
        box = QWidget()  # the cards keep together in the middle however wide the chat is
        self._grid = QGridLayout(box)
        self._grid.setContentsMargins(0, 0, 0, 0)
        self._grid.setSpacing(SPACING)
        self._columns = 0
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 16, 16, 16)
        layout.setSpacing(14)
        layout.addStretch(1)
        layout.addWidget(self.heading)
        layout.addWidget(box, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addStretch(2)
        self._arrange(2)
        self._fit_cards(self.width())

    def _arrange(self, columns: int) -> None:
        if columns == self._columns:
            return
        self._columns = columns
        for card in self.cards:
            self._grid.removeWidget(card)
        for i, card in enumerate(self.cards):
            self._grid.addWidget(card, i // columns, i % columns)
        self._chain_tab_order()

    def _chain_tab_order(self) -> None:
        for first, second in zip(self.cards, self.cards[1:], strict=False):
            QWidget.setTabOrder(first, second)

    @property
    def columns(self) -> int:
        return self._columns

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        width = event.size().width()
        self._arrange(2 if width >= TWO_COLUMNS_FROM else 1)
        self._fit_cards(width)

    def _fit_cards(self, width: int) -> None:
        """Gives every card the same width and the height its text needs at that width."""
        if not self.cards:
            return
        layout = self.layout()
        if layout is None:
            return
        margins = layout.contentsMargins()
        room = width - margins.left() - margins.right() - SPACING * (self._columns - 1)
        card_width = max(CARD_MIN_WIDTH, min(CARD_MAX_WIDTH, room // self._columns))
        height = max(card.heightForWidth(card_width) for card in self.cards)
        for card in self.cards:
            card.setFixedSize(card_width, height)
