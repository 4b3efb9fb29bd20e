"""How a `delegate_agent` call looks: the agent at work on a task, then its report.

The card says who works on what ("Researcher" — the task's first line), what the agent is
writing while it runs (the `ToolProgress` of the call, its newest words kept when the line
is too long), how long it has taken, and once it finished its report and a way to its own
conversation ("Open Researcher's conversation"). The agent's own calls are ordinary tool
cards in the rows after it, indented under a rail from this card (`nested_offset`,
`paint_rail`); "N steps" hides or shows them.

A delegation that waits for approval itself is drawn as any tool card (its buttons are
the approval bar's), so only the other states are laid out here.
"""

from __future__ import annotations

import math
import re
from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPainter, QPen, QTextDocument

from app.core import untrusted
from app.core.tool_names import tool_title
from app.core.visible import one_line
from app.ui.chat.layouts import (
    CARD_PAD,
    CARD_RADIUS,
    ITEM_PAD,
    SIDE,
    Hit,
    ItemLayout,
    PaintState,
    _layout_doc,
    _paint_toggle,
    _round_rect,
    _status_color,
    _status_icon,
    _text,
    column,
    draw_doc,
    format_seconds,
)
from app.ui.chat.model import STATUS_WORDS, ChatItem, DelegationCard, ToolCard, ToolStatus
from app.ui.chat.render import cap, render_markdown, render_plain
from app.ui.chat.style import ChatTheme, mix, with_alpha

#: How far a sub-agent's call is moved right of its delegation card.
NEST_INDENT = 36
#: Where the rail joining a delegation to its steps runs (under the card's status icon).
RAIL_X = CARD_PAD + 9
#: A longer report shows this many lines until "Show the whole report".
REPORT_LINES = 10
#: The badge beside the agent's name.
BADGE = "Sub-agent"

_LABELLED = re.compile(
    r"\[Untrusted data from [^\n]*\]\n"
    rf'<{untrusted.MARKER} origin="[^"\n]*" id="(n[0-9a-f]{{12}})">\n(.*)\n'
    rf'</{untrusted.MARKER} id="\1">',
    re.DOTALL,
)


def open_words(item: DelegationCard) -> str:
    """The words of the link to the agent's conversation."""
    return f"Open {item.title}’s conversation"


def report_text(result: str) -> str:
    """The report as people read it: a report written after untrusted content is wrapped
    as data for the parent's model; the card shows what is inside the wrapper."""
    found = _LABELLED.fullmatch(result.strip())
    return found.group(2) if found is not None else result


def progress_line(item: DelegationCard) -> str:
    """The progress message without the agent's name in front (the card says it)."""
    text = " ".join(item.progress.split())
    prefix = f"{item.title}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


def is_nested(item: ChatItem) -> bool:
    """A sub-agent's call placed under its delegation card."""
    return isinstance(item, ToolCard) and bool(item.parent_call_id)


def nested_width(width: int) -> int:
    """The row width a nested card is laid out for: its column is the delegation's,
    `NEST_INDENT` narrower (`column()` of it starts at `SIDE`)."""
    _, w = column(width)
    return int(w - NEST_INDENT + 2 * SIDE)


def nested_offset(width: int) -> float:
    """How far right of a row laid out at `nested_width(width)` a nested card is drawn."""
    x, _ = column(width)
    return x + NEST_INDENT - SIDE


def paint_rail(p: QPainter, theme: ChatTheme, height: float, last: bool, header_y: float) -> None:
    """The rail beside a nested card (its coordinates: the card starts at `SIDE`): down
    the whole row, or for the last step down to its header and across to it."""
    x = SIDE - NEST_INDENT + RAIL_X
    pen = QPen(mix(theme.card_border, theme.muted, 0.35), 1.5)
    p.save()
    p.setPen(pen)
    bottom = header_y if last else height
    p.drawLine(QPointF(x, 0), QPointF(x, bottom))
    p.drawLine(QPointF(x, header_y), QPointF(SIDE - 2, header_y))
    p.restore()


def header_middle(theme: ChatTheme) -> float:
    """Where a tool card's header row is, vertically (for the rail's elbow)."""
    return ITEM_PAD + CARD_PAD + max(theme.line_height, 22.0) / 2


class DelegationLayout(ItemLayout):
    def __init__(
        self, key: tuple[Any, ...], item: DelegationCard, theme: ChatTheme, width: int
    ) -> None:
        super().__init__(key)
        self.item = item
        x, w = column(width)
        inner_x, inner_w = x + CARD_PAD, w - 2 * CARD_PAD
        self.toggle_h = QFontMetricsF(theme.small_font).height() + 10
        #: boxed documents: outer rect, document rect, document, fill, border, text colour
        self.sections: list[tuple[QRectF, QRectF, QTextDocument, Any, Any, Any]] = []
        #: The report's box is cut to this (its first lines) until it is opened whole.
        self.report_clip: QRectF | None = None
        y = self._head(item, theme, inner_x, ITEM_PAD + CARD_PAD, inner_w)
        if item.error and item.status != ToolStatus.DENIED:
            doc = render_plain(item.error, theme, color=theme.error)
            fill = mix(theme.card, theme.error, 0.07)
            y = self._box(doc, inner_x, y + 10, inner_w, fill, with_alpha(theme.error, 0.35))
        elif item.result and item.finished and item.status != ToolStatus.DENIED:
            y = self._report(item, theme, inner_x, y + 10, inner_w)
        y = self._links(item, theme, inner_x, y, inner_w)
        y += CARD_PAD
        self.card = QRectF(x, ITEM_PAD, w, y - ITEM_PAD)
        self.frame = self.card
        self.rail_x = x + RAIL_X
        self.height = math.ceil(y + ITEM_PAD)

    def _head(self, item: DelegationCard, theme: ChatTheme, x: float, y: float, w: float) -> float:
        """The agent's name and status, the task's first line, what it is writing."""
        small = QFontMetricsF(theme.small_font)
        row_h = max(theme.line_height, 22.0)
        text_x, text_w = x + 26, w - 26
        self.header = QRectF(x, y, w, row_h)
        self.title = item.title
        name_w = QFontMetricsF(theme.bold_font).horizontalAdvance(self.title)
        self.name_rect = QRectF(text_x, y, min(name_w + 2, w * 0.5), row_h)
        bw = small.horizontalAdvance(BADGE) + 14
        badge_y = y + (row_h - small.height() - 4) / 2
        self.badge = QRectF(self.name_rect.right() + 8, badge_y, bw, small.height() + 4)
        y += row_h
        self.task = item.task_line()
        self.task_rect = QRectF(text_x, y, text_w, theme.line_height + 2)
        if self.task:
            y = self.task_rect.bottom()
        self.progress = progress_line(item) if item.status == ToolStatus.RUNNING else ""
        self.progress_rect = QRectF(text_x, y + 4, text_w, small.height())
        return self.progress_rect.bottom() if self.progress else y

    def _links(self, item: DelegationCard, theme: ChatTheme, x: float, y: float, w: float) -> float:
        """ "Open Researcher's conversation", Details (the whole task) and "N steps"."""
        self.open_rect: QRectF | None = None
        if item.conversation_id and item.finished:
            words = open_words(item) + "  →"
            link_w = QFontMetricsF(theme.font).horizontalAdvance(words) + 4
            self.open_rect = QRectF(x, y + 8, min(link_w, w), theme.line_height + 4)
            tip = "See everything the agent did, in its own conversation"
            self.hits.append(Hit("open_conversation", item.conversation_id, self.open_rect, tip))
            y = self.open_rect.bottom()
        self.args_toggle = QRectF(x, y + 6, w, self.toggle_h)
        self.hits.append(Hit("toggle_args", None, self.args_toggle, "Show the whole task"))
        y = self.args_toggle.bottom()
        if item.args_open:
            name_doc = render_plain(f"Tool name: {item.name}", theme, color=theme.muted)
            name_doc.setDefaultFont(theme.small_font)
            clear = QColor(0, 0, 0, 0)
            y = self._box(name_doc, x - 10, y - 4, w, clear, clear, theme.muted)
            task = render_plain(cap(item.task or item.arguments), theme)
            y = self._box(task, x, y, w, theme.code_bg, theme.code_border)
        self.steps_toggle: QRectF | None = None
        if item.steps:
            self.steps_toggle = QRectF(x, y, w, self.toggle_h)
            tip = "Show the agent's calls" if item.collapsed else "Hide the agent's calls"
            self.hits.append(Hit("toggle_steps", None, self.steps_toggle, tip))
            y = self.steps_toggle.bottom()
        return y

    def _report(
        self, item: DelegationCard, theme: ChatTheme, x: float, y: float, w: float
    ) -> float:
        """The agent's report (Markdown, as answers are shown), its first `REPORT_LINES`
        lines until it is opened whole."""
        doc = render_markdown(cap(report_text(item.result)), theme)
        y = self._box(doc, x, y, w, mix(theme.card, theme.background, 0.6), theme.card_border)
        rect, inner, *_ = self.sections[-1]
        self.docs.append((inner, doc))
        limit = REPORT_LINES * theme.line_height
        if inner.height() <= limit + theme.line_height:
            return y
        if not item.result_open:
            cut = inner.height() - limit
            rect.setHeight(rect.height() - cut)
            self.report_clip = QRectF(inner.x(), inner.y(), inner.width(), limit)
            self.docs[-1] = (self.report_clip, doc)
            y -= cut
        self.report_toggle = QRectF(x, y + 4, w, self.toggle_h)
        self.hits.append(Hit("toggle_result", None, self.report_toggle))
        return self.report_toggle.bottom()

    def _box(
        self,
        doc: QTextDocument,
        x: float,
        y: float,
        w: float,
        fill: Any,
        border: Any,
        color: Any = None,
    ) -> float:
        h = _layout_doc(doc, w - 2 * 10)
        rect = QRectF(x, y, w, h + 2 * 8)
        self.sections.append((rect, QRectF(x + 10, y + 8, w - 20, h), doc, fill, border, color))
        return rect.bottom()

    def tooltip_at(self, pos: QPointF) -> str:
        if self.header.contains(pos) and pos.x() < self.header.x() + self.header.width() * 0.7:
            return self.item.name
        return super().tooltip_at(pos)

    def paint(self, p: QPainter, theme: ChatTheme, state: PaintState) -> None:
        item = self.item
        status = item.status
        border = with_alpha(theme.error, 0.6) if status == ToolStatus.ERROR else theme.card_border
        if item.steps and not item.collapsed:  # the rail down to the first step
            p.setPen(QPen(mix(theme.card_border, theme.muted, 0.35), 1.5))
            p.drawLine(QPointF(self.rail_x, self.card.bottom()), QPointF(self.rail_x, self.height))
        _round_rect(p, self.card, theme.card, border, CARD_RADIUS)
        icon = QRectF(self.header.x(), self.header.y(), 18, self.header.height())
        _status_icon(p, icon, status, theme)
        _text(p, self.name_rect, self.title, theme.bold_font, theme.text)
        _round_rect(p, self.badge, theme.badge_bg, None, self.badge.height() / 2)
        _text(p, self.badge, BADGE, theme.small_font, theme.muted, Qt.AlignmentFlag.AlignHCenter)
        self._paint_status(p, theme)
        if self.task:
            _text(p, self.task_rect, self.task, theme.font, theme.text)
        if self.progress:
            _elided_left(p, self.progress_rect, self.progress, theme.small_font, theme.muted)
        self._paint_sections(p, theme, state)
        if hasattr(self, "report_toggle"):
            words = "Show less" if item.result_open else "Show the whole report"
            _paint_toggle(p, theme, self.report_toggle, words, item.result_open, "", state)
        if self.open_rect is not None:
            self._paint_open(p, theme, state)
        summary = " ".join(f"{item.name} {item.task[:400]}".split())
        _paint_toggle(p, theme, self.args_toggle, "Details", item.args_open, summary, state)
        if self.steps_toggle is not None:
            count = len(item.steps)
            words = f"{count} step{'s' if count != 1 else ''}"
            names = [tool_title(step.name) for step in item.steps[-3:]]
            shown = ", ".join(names) if item.collapsed else ""
            is_open = not item.collapsed
            _paint_toggle(p, theme, self.steps_toggle, words, is_open, one_line(shown, 200), state)
        self.paint_focus(p, theme, state)

    def _paint_status(self, p: QPainter, theme: ChatTheme) -> None:
        item = self.item
        running = not item.finished
        right = (
            ""
            if item.finished and item.seconds is None
            else format_seconds(item.elapsed(), running)
        )
        words = item.decision or STATUS_WORDS[item.status]
        color = _status_color(item.status, theme) if not item.decision else theme.muted
        small = QFontMetricsF(theme.small_font)
        time_w = small.horizontalAdvance(right) + 4
        header = self.header
        _text(
            p,
            QRectF(header.right() - time_w, header.y(), time_w, header.height()),
            right,
            theme.small_font,
            theme.muted,
            Qt.AlignmentFlag.AlignRight,
        )
        left = self.badge.right() + 12
        words_rect = QRectF(left, header.y(), header.right() - time_w - 12 - left, header.height())
        _text(p, words_rect, words, theme.small_font, color, Qt.AlignmentFlag.AlignRight)

    def _paint_sections(self, p: QPainter, theme: ChatTheme, state: PaintState) -> None:
        for rect, inner, doc, fill, border, color in self.sections:
            _round_rect(p, rect, fill, border, 6)
            clip = self.report_clip
            if clip is not None and doc is self.docs[-1][1]:
                p.save()
                p.setClipRect(clip)
                draw_doc(p, doc, inner.topLeft(), theme, color, state.visible)
                p.restore()
            else:
                draw_doc(p, doc, inner.topLeft(), theme, color, state.visible)

    def _paint_open(self, p: QPainter, theme: ChatTheme, state: PaintState) -> None:
        rect = self.open_rect
        assert rect is not None
        hovered = state.hover is not None and state.hover.rect == rect
        font = QFont(theme.font)
        font.setUnderline(hovered and not state.busy)
        color = theme.muted if state.busy else theme.link
        _text(p, rect, open_words(self.item) + "  →", font, color)


def _elided_left(p: QPainter, rect: QRectF, text: str, font: QFont, color: Any) -> None:
    """One line; when it is too long its start gives way (the newest words stay)."""
    p.setFont(font)
    p.setPen(color)
    shown = QFontMetricsF(font).elidedText(text, Qt.TextElideMode.ElideLeft, rect.width())
    p.drawText(rect, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), shown)


def estimate(item: DelegationCard, theme: ChatTheme, width: int) -> int:
    """A guess without rendering (the card's rows, a report of its length)."""
    _, w = column(width)
    lh = theme.line_height
    small = QFontMetricsF(theme.small_font).height()
    height = 2 * ITEM_PAD + 2 * CARD_PAD + max(lh, 22.0) + lh + 2 + 6 + small + 10
    if item.status == ToolStatus.RUNNING and item.progress:
        height += small + 4
    if item.finished and (item.result or item.error):
        per_line = max(8.0, (w - 2 * CARD_PAD - 20) / theme.char_width)
        text = item.error or report_text(item.result)
        lines = len(text) / per_line + text.count("\n") * 0.55 + 1
        if not item.result_open:
            lines = min(lines, REPORT_LINES + 2)
        height += 10 + 16 + lines * lh * 1.1
    if item.conversation_id:
        height += 8 + lh + 4
    if item.steps:
        height += small + 10
    return int(height)
