"""Geometry and painting of each kind of item at a given width.

`build_layout(item, theme, width)` renders what the item needs (documents, thumbnails)
and places it; the result is cached by the delegate until the item, the width or the
theme changes. `estimate_height` guesses a height without rendering anything, for
items that have never been on screen.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QBrush,
    QColor,
    QFont,
    QFontMetricsF,
    QImage,
    QImageReader,
    QPainter,
    QPalette,
    QPen,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
)

from app.core.approval import ApprovalRequest
from app.core.visible import one_line
from app.ui.chat.approval_bar import home_short
from app.ui.chat.model import (
    STATUS_WORDS,
    AssistantMessage,
    ChatItem,
    ErrorItem,
    MarkerItem,
    MessageItem,
    NoticeItem,
    PendingItem,
    ThinkingItem,
    ToolCard,
    ToolStatus,
    UserMessage,
)
from app.ui.chat.render import (
    Block,
    MessageDocs,
    PlainStream,
    cap,
    quote_bars,
    render_code,
    render_plain,
)
from app.ui.chat.style import ChatTheme, mix, with_alpha
from app.ui.chat.terminal import (
    TERMINAL_BG,
    TERMINAL_BORDER,
    TERMINAL_HEADER,
    TERMINAL_MUTED,
    TerminalOutput,
    is_shell_request,
    is_terminal_tool,
    render_terminal,
    terminal_badges,
)

COLUMN_MAX = 860  # the conversation is a centred column, like the big chat apps
SIDE = 24
ITEM_PAD = 8  # above and below every item
BLOCK_GAP = 10
CODE_HEADER = 30
CODE_PAD = 12
CARD_PAD = 14
CARD_RADIUS = 10
BUBBLE_PAD_X, BUBBLE_PAD_Y = 16, 10
THUMB_W, THUMB_H = 320, 200
THINK_INDENT = 22  # the reasoning text, right of the header's chevron
APPROVAL_BAR_H = 44
TERM_HEADER = 28
TERM_PAD = 10
#: Lines of a command's output a closed terminal card shows (its end, where results are).
TERM_TAIL = 14
#: Lines an opened terminal card shows at most (the model got all of it).
TERM_OPEN_MAX = 1_000
#: The row of actions (Copy, Edit, Regenerate, ‹ 1/2 ›) under a message.
ACTIONS_H = 26
ACTION_ICON = 14
#: `PaintState.copied` block index meaning "the whole message was copied".
WHOLE_MESSAGE = -1
#: Actions that change the conversation: not offered while a turn runs.
BUSY_ACTIONS = frozenset({"edit", "regenerate", "branch_prev", "branch_next"})
#: What a disabled action says, while a turn runs.
WAIT_WORDS = "Wait for the answer to finish (or stop it)"

#: A place in the conversation's text: (row, text block of the item, character).
TextPos = tuple[int, int, int]


@dataclass(frozen=True)
class Hit:
    # copy_code | toggle_args | toggle_result | toggle_thinking | retry | connect | open_file
    # | link | copy_message | edit | regenerate | branch_prev | branch_next
    action: str
    payload: Any = None
    rect: QRectF = field(default_factory=QRectF)
    #: Shown when the mouse rests on it.
    tip: str = ""
    #: A link's text as shown (its address is `payload`): whether the two differ is part
    #: of what a click decides (`app.core.links`).
    text: str = ""


@dataclass(frozen=True)
class Selection:
    """Selected text from `start` to `end` (ordered; `end` excluded)."""

    start: TextPos
    end: TextPos

    @staticmethod
    def between(a: TextPos, b: TextPos) -> Selection:
        return Selection(min(a, b), max(a, b))

    @property
    def empty(self) -> bool:
        return self.start == self.end

    def rows(self) -> range:
        return range(self.start[0], self.end[0] + 1)

    def span(self, row: int, block: int, length: int) -> tuple[int, int] | None:
        """The selected characters of one text block, or None."""
        here = (row, block)
        if here < self.start[:2] or here > self.end[:2]:
            return None
        first = self.start[2] if here == self.start[:2] else 0
        last = self.end[2] if here == self.end[:2] else length
        first, last = max(0, min(first, length)), max(0, min(last, length))
        return (first, last) if last > first else None


@dataclass
class PaintState:
    now: float = 0.0
    #: (item id, block index) of a code block whose "Copy" was just clicked
    #: (`WHOLE_MESSAGE` for a message's Copy).
    copied: tuple[int, int] | None = None
    hover: Hit | None = None
    #: The part of the item on screen (item coordinates); None paints everything.
    visible: QRectF | None = None
    selection: Selection | None = None
    #: The row being painted, the row under the mouse and the keyboard's current row.
    row: int = -1
    hover_row: int = -1
    current_row: int = -1
    #: The view has keyboard focus (the current row gets a focus frame).
    focused: bool = False
    #: A turn runs: Edit, Regenerate and the version switch are shown disabled.
    busy: bool = False

    def shows_actions(self) -> bool:
        return self.row >= 0 and self.row in (self.hover_row, self.current_row)


def column(width: int) -> tuple[float, float]:
    """x and width of the content column inside a row of `width`."""
    inner = max(120.0, min(COLUMN_MAX, width - 2 * SIDE))
    return max(SIDE, (width - inner) / 2), inner


def _layout_doc(doc: QTextDocument, width: float) -> float:
    if doc.textWidth() != width:
        doc.setTextWidth(width)
    return doc.size().height()


def draw_doc(
    p: QPainter,
    doc: QTextDocument,
    at: QPointF,
    theme: ChatTheme,
    color: QColor | None = None,
    visible: QRectF | None = None,
    selected: tuple[int, int] | None = None,
) -> None:
    """Draws `doc` at `at`; only its lines inside `visible` (long messages); the characters
    `selected` (first, end) in the palette's highlight colours."""
    clip = None
    if visible is not None:
        clip = visible.intersected(QRectF(at, doc.size()))
        if clip.isEmpty():
            return
        clip.translate(-at.x(), -at.y())
    p.save()
    p.translate(at)
    ctx = QAbstractTextDocumentLayout.PaintContext()
    palette = ctx.palette
    palette.setColor(QPalette.ColorRole.Text, color or theme.text)
    ctx.palette = palette
    if clip is not None:
        ctx.clip = clip
    if selected is not None:
        selection = QAbstractTextDocumentLayout.Selection()
        cursor = QTextCursor(doc)
        cursor.setPosition(selected[0])
        cursor.setPosition(selected[1], QTextCursor.MoveMode.KeepAnchor)
        selection.cursor = cursor
        fmt = QTextCharFormat()
        fmt.setBackground(QBrush(theme.highlight))
        fmt.setForeground(QBrush(theme.highlighted_text))
        selection.format = fmt
        ctx.selections = [selection]
    doc.documentLayout().draw(p, ctx)
    p.restore()


def doc_length(doc: QTextDocument) -> int:
    """Characters a cursor can select in `doc` (without the final paragraph mark)."""
    return max(0, doc.characterCount() - 1)


def _round_rect(p: QPainter, rect: QRectF, fill: QColor, border: QColor | None, r: float) -> None:
    p.setPen(QPen(border, 1) if border is not None else Qt.PenStyle.NoPen)
    p.setBrush(fill)
    p.drawRoundedRect(rect.adjusted(0.5, 0.5, -0.5, -0.5), r, r)


def _text(
    p: QPainter,
    rect: QRectF,
    text: str,
    font: QFont,
    color: QColor,
    align: Qt.AlignmentFlag = Qt.AlignmentFlag.AlignLeft,
) -> None:
    p.setFont(font)
    p.setPen(color)
    elided = QFontMetricsF(font).elidedText(text, Qt.TextElideMode.ElideRight, rect.width())
    p.drawText(rect, int(align | Qt.AlignmentFlag.AlignVCenter), elided)


def format_seconds(seconds: float, running: bool) -> str:
    if running:
        seconds = int(seconds)
    if seconds < 1 and not running:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{int(seconds)} s" if running else f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs:02d} s"


def link_tooltip(url: str) -> str:
    """Where a link really goes, as a click would open it (`app.core.links`): the link's
    text may say something else."""
    from app.core.links import decide
    from app.ui.plain_text import plain_tooltip

    decision = decide(url, None)
    if decision.action == "refuse":
        return plain_tooltip(f"{decision.shown}\n(not opened: {decision.reasons[0]})")
    return plain_tooltip(decision.shown)


def link_text(doc: QTextDocument, local: QPointF) -> str:
    """The whole text of the link at `local` (document coordinates): the run of adjacent
    fragments of its block that carry the same address."""
    at = doc.documentLayout().hitTest(local, Qt.HitTestAccuracy.ExactHit)
    if at < 0:
        return ""
    block = doc.findBlock(at)
    runs: list[tuple[str, int, int, list[str]]] = []  # href, start, end, texts
    it = block.begin()
    while not it.atEnd():
        fragment = it.fragment()
        it += 1
        if not fragment.isValid():
            continue
        fmt = fragment.charFormat()
        href = fmt.anchorHref() if fmt.isAnchor() else ""
        start, end = fragment.position(), fragment.position() + fragment.length()
        if runs and runs[-1][0] == href and runs[-1][2] == start:
            runs[-1] = (href, runs[-1][1], end, [*runs[-1][3], fragment.text()])
        else:
            runs.append((href, start, end, [fragment.text()]))
    for href, start, end, texts in runs:
        if href and start <= at < end:
            return "".join(texts)
    return ""


# ---- base --------------------------------------------------------------------------------


class ItemLayout:
    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key
        self.height = 0
        self.hits: list[Hit] = []
        #: Documents that may hold links: (rect in item coordinates, document).
        self.docs: list[tuple[QRectF, QTextDocument]] = []
        #: Selectable text, in reading order: (rect in item coordinates, document).
        self.texts: list[tuple[QRectF, QTextDocument]] = []
        self.approval_rect: QRectF | None = None
        #: Where the inline editor of a user message goes.
        self.edit_rect: QRectF | None = None
        #: What a focus frame surrounds (the keyboard's current item).
        self.frame: QRectF | None = None

    @property
    def widget_rect(self) -> QRectF | None:
        """Where the row's widget (approval buttons or message editor) is placed."""
        return self.approval_rect or self.edit_rect

    def paint(self, p: QPainter, theme: ChatTheme, state: PaintState) -> None:
        raise NotImplementedError

    def hit(self, pos: QPointF) -> Hit | None:
        for hit in self.hits:
            if hit.rect.contains(pos):
                return hit
        for rect, doc in self.docs:
            if rect.contains(pos):
                href = doc.documentLayout().anchorAt(pos - rect.topLeft())
                if href:
                    return Hit("link", href, rect, text=link_text(doc, pos - rect.topLeft()))
        return None

    def code_at(self, pos: QPointF) -> str | None:
        return None

    def tooltip_at(self, pos: QPointF) -> str:
        hit = self.hit(pos)
        if hit is not None and hit.action == "link":
            return link_tooltip(str(hit.payload))
        return hit.tip if hit is not None else ""

    # ---- text selection -------------------------------------------------------------------

    def over_text(self, pos: QPointF) -> bool:
        return any(rect.contains(pos) for rect, _ in self.texts)

    def position_at(self, pos: QPointF) -> tuple[int, int]:
        """(text block, character) nearest to `pos`; before the first block is its start,
        past the last its end."""
        if not self.texts:
            return (0, 0)
        for i, (rect, doc) in enumerate(self.texts):
            if pos.y() < rect.top():
                return (i, 0)
            if pos.y() <= rect.bottom():
                local = pos - rect.topLeft()
                local.setY(max(0.0, min(local.y(), rect.height() - 1)))
                hit = doc.documentLayout().hitTest(local, Qt.HitTestAccuracy.FuzzyHit)
                return (i, max(0, hit))
        last = len(self.texts) - 1
        return (last, doc_length(self.texts[last][1]))

    def unit_at(self, pos: QPointF, paragraph: bool) -> tuple[int, int, int] | None:
        """(block, first, end) of the word (or paragraph) at `pos`."""
        if not self.over_text(pos):
            return None
        block, at = self.position_at(pos)
        cursor = QTextCursor(self.texts[block][1])
        cursor.setPosition(at)
        if paragraph:
            cursor.movePosition(QTextCursor.MoveOperation.StartOfBlock)
            cursor.movePosition(
                QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor
            )
        else:
            cursor.select(QTextCursor.SelectionType.WordUnderCursor)
        return (block, cursor.selectionStart(), cursor.selectionEnd())

    def selected_text(self, selection: Selection, row: int) -> list[str]:
        """The selected text of each of this item's blocks (code exactly, with its newlines)."""
        parts: list[str] = []
        for i, (_, doc) in enumerate(self.texts):
            span = selection.span(row, i, doc_length(doc))
            if span is None:
                continue
            cursor = QTextCursor(doc)
            cursor.setPosition(span[0])
            cursor.setPosition(span[1], QTextCursor.MoveMode.KeepAnchor)
            parts.append(cursor.selection().toPlainText())
        return parts

    def block_count(self) -> int:
        return len(self.texts)

    def draw_text(
        self,
        p: QPainter,
        theme: ChatTheme,
        state: PaintState,
        block: int,
        color: QColor | None = None,
    ) -> None:
        """Draws selectable text block `block` with its part of the selection."""
        rect, doc = self.texts[block]
        selected = None
        if state.selection is not None:
            selected = state.selection.span(state.row, block, doc_length(doc))
        draw_doc(p, doc, rect.topLeft(), theme, color, state.visible, selected)

    def paint_focus(self, p: QPainter, theme: ChatTheme, state: PaintState) -> None:
        """A frame around the keyboard's current item (only while the view has focus)."""
        if self.frame is None or not state.focused or state.row != state.current_row:
            return
        p.save()
        pen = QPen(with_alpha(theme.accent, 0.7), 1.5)
        pen.setStyle(Qt.PenStyle.DotLine)
        p.setPen(pen)
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRoundedRect(self.frame.adjusted(-4, -3, 4, 3), 8, 8)
        p.restore()


# ---- messages ----------------------------------------------------------------------------


class AssistantLayout(ItemLayout):
    def __init__(
        self, key: tuple[Any, ...], item: AssistantMessage, theme: ChatTheme, width: int
    ) -> None:
        super().__init__(key)
        self.item_id = id(item)
        docs = item.docs
        if docs is None or docs.theme is not theme:
            docs = item.docs = MessageDocs(theme)
        docs.update(item.text, final=not item.streaming)
        x, w = column(width)
        y = float(ITEM_PAD)
        self.blocks: list[tuple[Block, QRectF, QRectF]] = []  # block, outer, doc rect
        self.bars: list[QRectF] = []  # beside block quotes
        for i, block in enumerate(docs.blocks()):
            if i:
                y += BLOCK_GAP
            if block.kind == "code":
                h = _layout_doc(block.doc, w - 2 * CODE_PAD)
                outer = QRectF(x, y, w, CODE_HEADER + 2 * CODE_PAD + h)
                inner = QRectF(x + CODE_PAD, y + CODE_HEADER + CODE_PAD, w - 2 * CODE_PAD, h)
                copy = QRectF(outer.right() - 84, y, 84, CODE_HEADER)
                self.hits.append(Hit("copy_code", (i, block.code), copy, "Copy this code"))
            else:
                h = _layout_doc(block.doc, w)
                outer = inner = QRectF(x, y, w, h)
                self.docs.append((inner, block.doc))
                if block.quotes:
                    self.bars.extend(r.translated(x, y) for r in quote_bars(block.doc))
            self.blocks.append((block, outer, inner))
            self.texts.append((inner, block.doc))
            y = outer.bottom()
        self.footer = "…" if item.streaming and not item.text else ""
        if self.footer:
            self.footer_rect = QRectF(x, y, w, theme.line_height)
            y = self.footer_rect.bottom()
        self.frame = QRectF(x, ITEM_PAD, w, max(theme.line_height, y - ITEM_PAD))
        self.streaming = item.streaming
        self.actions = MessageActions(self, item, theme, x, w, y + 2, right=False)
        y = self.actions.rect.bottom()
        self.height = math.ceil(y + ITEM_PAD)

    def paint(self, p: QPainter, theme: ChatTheme, state: PaintState) -> None:
        visible = state.visible
        for i, (block, outer, _inner) in enumerate(self.blocks):
            if visible is not None and not outer.intersects(visible):
                continue
            if block.kind == "code":
                _paint_code_frame(
                    p,
                    theme,
                    outer,
                    block.lang,
                    state.copied == (self.item_id, i),
                    state.hover is not None and state.hover.rect == self.hits_rect(i),
                )
            self.draw_text(p, theme, state, i)
        for bar in self.bars:
            _round_rect(p, bar, theme.card_border, None, 1.5)
        if self.footer:
            _text(p, self.footer_rect, self.footer, theme.small_font, theme.muted)
        if not self.streaming:
            self.actions.paint(p, theme, state)
        self.paint_focus(p, theme, state)

    def hits_rect(self, index: int) -> QRectF | None:
        for hit in self.hits:
            if hit.action == "copy_code" and hit.payload[0] == index:
                return hit.rect
        return None

    def hit(self, pos: QPointF) -> Hit | None:
        found = super().hit(pos)
        if found is not None and self.streaming and found in self.actions.hits:
            return None
        return found

    def code_at(self, pos: QPointF) -> str | None:
        for block, outer, _ in self.blocks:
            if block.kind == "code" and outer.contains(pos):
                return block.code
        return None


# ---- message actions ---------------------------------------------------------------------

_ACTIONS = {
    "copy_message": ("Copy", "Copy this message"),
    "edit": ("Edit", "Change this message and send it again"),
    "regenerate": ("Regenerate", "Write this answer again"),
}


class MessageActions:
    """The small buttons under a message: Copy, Edit (yours) or Regenerate (answers), and
    "‹ 2/3 ›" where the message has other versions. Shown while the mouse is over the
    message or it is the keyboard's current one; the version switch always shows. A
    "Stopped" or error row where a regenerate ended before any text has only the switch."""

    def __init__(
        self,
        layout: ItemLayout,
        item: MessageItem | MarkerItem | ErrorItem,
        theme: ChatTheme,
        x: float,
        w: float,
        y: float,
        right: bool,
    ) -> None:
        self.item_id = id(item)
        self.rect = QRectF(x, y, w, ACTIONS_H)
        small = QFontMetricsF(theme.small_font)
        names: list[str] = []
        branch = item.branch
        if isinstance(item, MessageItem):
            names.append("copy_message")
            if item.index is not None:
                names.append("edit" if isinstance(item, UserMessage) else "regenerate")
            else:
                branch = None
        #: (hit, label) of each button, left to right
        self.buttons: list[tuple[Hit | None, str, QRectF]] = []
        widths: list[float] = []
        for name in names:
            label = max(_ACTIONS[name][0], "Copied", key=len) if name == "copy_message" else ""
            widths.append(
                ACTION_ICON + 5 + small.horizontalAdvance(label or _ACTIONS[name][0]) + 14
            )
        self.branch_label = ""
        if branch is not None:
            self.branch_label = f"{branch.current}/{branch.count}"
            widths += [22.0, small.horizontalAdvance(self.branch_label) + 6, 22.0]
        total = sum(widths) + 2 * (len(widths) - 1)
        cx = x + w - total if right else x - 7
        self.hits: list[Hit] = []
        kinds = list(names)
        if branch is not None:
            kinds += ["branch_prev", "branch_label", "branch_next"]
        for kind, width in zip(kinds, widths, strict=True):
            rect = QRectF(cx, y + 1, width, ACTIONS_H - 2)
            cx = rect.right() + 2
            hit: Hit | None = None
            if kind in _ACTIONS:
                hit = Hit(kind, getattr(item, "index", None), rect, _ACTIONS[kind][1])
            elif kind == "branch_prev" and branch is not None and branch.current > 1:
                hit = Hit(kind, (branch.index, branch.current - 1), rect, "Previous version")
            elif kind == "branch_next" and branch is not None and branch.current < branch.count:
                hit = Hit(kind, (branch.index, branch.current + 1), rect, "Next version")
            if hit is not None:
                self.hits.append(hit)
                layout.hits.append(hit)
            self.buttons.append((hit, kind, rect))

    def paint(self, p: QPainter, theme: ChatTheme, state: PaintState) -> None:
        copied = state.copied == (self.item_id, WHOLE_MESSAGE)
        shown = state.shows_actions() or copied
        for hit, kind, rect in self.buttons:
            is_branch = kind.startswith("branch")
            if not shown and not is_branch:
                continue
            disabled = state.busy and kind in BUSY_ACTIONS
            hovered = hit is not None and state.hover is not None and state.hover.rect == rect
            hovered = hovered and not disabled
            if hovered:
                _round_rect(p, rect, theme.badge_bg, None, 6)
            color = theme.text if hovered else theme.muted
            if disabled or (is_branch and hit is None and kind != "branch_label"):
                color = with_alpha(theme.muted, 0.35)
            if kind == "branch_label":
                _text(
                    p,
                    rect,
                    self.branch_label,
                    theme.small_font,
                    theme.muted,
                    Qt.AlignmentFlag.AlignHCenter,
                )
                continue
            if is_branch:
                _chevron(p, rect.center(), kind == "branch_prev", color)
                continue
            done = kind == "copy_message" and copied
            icon = QRectF(
                rect.x() + 7, rect.center().y() - ACTION_ICON / 2, ACTION_ICON, ACTION_ICON
            )
            _action_icon(
                p,
                "check" if done else kind,
                icon,
                theme.ok if done else color,
                theme.badge_bg if hovered else theme.background,
            )
            label = "Copied" if done else _ACTIONS[kind][0]
            text_rect = QRectF(
                icon.right() + 5, rect.y(), rect.right() - icon.right() - 5, rect.height()
            )
            _text(p, text_rect, label, theme.small_font, theme.ok if done else color)


def _chevron(p: QPainter, c: QPointF, left: bool, color: QColor) -> None:
    p.save()
    pen = QPen(color, 1.6)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
    p.setPen(pen)
    d = 1.0 if left else -1.0
    p.drawPolyline(
        [
            QPointF(c.x() + 2 * d, c.y() - 4),
            QPointF(c.x() - 2 * d, c.y()),
            QPointF(c.x() + 2 * d, c.y() + 4),
        ]
    )
    p.restore()


def _action_icon(p: QPainter, kind: str, rect: QRectF, color: QColor, fill: QColor) -> None:
    """Small line icons, painted (no icon font or emoji needed)."""
    p.save()
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    pen = QPen(color, 1.3)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
    p.setPen(pen)
    p.setBrush(Qt.BrushStyle.NoBrush)
    c, k = rect.center(), rect.width() / 14
    if kind == "copy_message":
        p.drawRoundedRect(QRectF(c.x() - 5.5 * k, c.y() - 5.5 * k, 7 * k, 8 * k), 1.5, 1.5)
        p.setBrush(fill)
        p.drawRoundedRect(QRectF(c.x() - 1.5 * k, c.y() - 2.5 * k, 7 * k, 8 * k), 1.5, 1.5)
    elif kind == "check":
        p.drawPolyline(
            [
                QPointF(c.x() - 5 * k, c.y()),
                QPointF(c.x() - 1.5 * k, c.y() + 3.5 * k),
                QPointF(c.x() + 5 * k, c.y() - 4 * k),
            ]
        )
    elif kind == "edit":
        p.drawPolygon(
            [
                QPointF(c.x() - 5 * k, c.y() + 5 * k),
                QPointF(c.x() - 5 * k, c.y() + 2 * k),
                QPointF(c.x() + 2.5 * k, c.y() - 5.5 * k),
                QPointF(c.x() + 5.5 * k, c.y() - 2.5 * k),
                QPointF(c.x() - 2 * k, c.y() + 5 * k),
            ]
        )
    elif kind == "regenerate":
        box = QRectF(c.x() - 5 * k, c.y() - 5 * k, 10 * k, 10 * k)
        p.drawArc(box, 90 * 16, 290 * 16)
        top = QPointF(c.x(), c.y() - 5 * k)
        p.drawPolyline(
            [
                QPointF(top.x() - 2.5 * k, top.y() - 2.5 * k),
                top,
                QPointF(top.x() - 2.5 * k, top.y() + 2.5 * k),
            ]
        )
    p.restore()


def _paint_code_frame(
    p: QPainter, theme: ChatTheme, outer: QRectF, lang: str, copied: bool, hovered: bool
) -> None:
    _round_rect(p, outer, theme.code_bg, theme.code_border, 8)
    header = QRectF(outer.x(), outer.y(), outer.width(), CODE_HEADER)
    p.save()
    p.setClipRect(header)
    _round_rect(p, outer, theme.code_header, theme.code_border, 8)
    p.restore()
    p.setPen(QPen(theme.code_border, 1))
    p.drawLine(
        QPointF(outer.x() + 1, header.bottom() - 0.5),
        QPointF(outer.right() - 1, header.bottom() - 0.5),
    )
    _text(p, header.adjusted(CODE_PAD, 0, -90, 0), lang or "code", theme.small_font, theme.muted)
    label = "Copied ✓" if copied else "Copy"
    color = theme.ok if copied else (theme.text if hovered else theme.muted)
    _text(
        p,
        header.adjusted(0, 0, -CODE_PAD, 0),
        label,
        theme.small_font,
        color,
        Qt.AlignmentFlag.AlignRight,
    )


class UserLayout(ItemLayout):
    def __init__(
        self, key: tuple[Any, ...], item: UserMessage, theme: ChatTheme, width: int
    ) -> None:
        super().__init__(key)
        x, w = column(width)
        top = ITEM_PAD + 8.0  # a turn starts with a little more air
        self.editing = item.editing
        if item.editing:  # the editor widget covers the column where the bubble was
            self.edit_rect = QRectF(x, top, w, max(item.editor_height, 60))
            self.height = math.ceil(self.edit_rect.bottom() + ITEM_PAD)
            return
        max_w = max(160.0, w * 0.78)
        self.doc = render_plain(item.text, theme, color=theme.bubble_text)
        h = _layout_doc(self.doc, max_w - 2 * BUBBLE_PAD_X)
        ideal = min(self.doc.idealWidth(), max_w - 2 * BUBBLE_PAD_X)
        _layout_doc(self.doc, ideal + 1)
        h = self.doc.size().height()
        bubble_w = ideal + 1 + 2 * BUBBLE_PAD_X
        self.bubble = QRectF(x + w - bubble_w, top, bubble_w, h + 2 * BUBBLE_PAD_Y)
        self.doc_at = QPointF(self.bubble.x() + BUBBLE_PAD_X, top + BUBBLE_PAD_Y)
        self.docs.append((QRectF(self.doc_at, self.doc.size()), self.doc))
        self.texts.append((QRectF(self.doc_at, self.doc.size()), self.doc))
        self.frame = self.bubble
        y = self.bubble.bottom()
        self.attachments = ""
        if item.attachments:
            names = ", ".join(Path(a).name for a in item.attachments)
            self.attachments = f"Attached: {names}"
            if item.attachments_note:
                self.attachments += f" · {item.attachments_note}"
            self.attach_rect = QRectF(x + w * 0.22, y + 4, w * 0.78, theme.line_height)
            y = self.attach_rect.bottom()
        self.actions = MessageActions(self, item, theme, x, w, y + 2, right=True)
        self.height = math.ceil(self.actions.rect.bottom() + ITEM_PAD)

    def paint(self, p: QPainter, theme: ChatTheme, state: PaintState) -> None:
        if self.editing:
            return
        _round_rect(p, self.bubble, theme.bubble, None, 16)
        self.draw_text(p, theme, state, 0, theme.bubble_text)
        if self.attachments:
            _text(
                p,
                self.attach_rect,
                self.attachments,
                theme.small_font,
                theme.muted,
                Qt.AlignmentFlag.AlignRight,
            )
        self.actions.paint(p, theme, state)
        self.paint_focus(p, theme, state)


class NoticeLayout(ItemLayout):
    def __init__(
        self, key: tuple[Any, ...], item: NoticeItem, theme: ChatTheme, width: int
    ) -> None:
        super().__init__(key)
        x, w = column(width)
        self.doc = render_plain(item.message, theme, color=theme.muted)
        self.doc.setDefaultFont(theme.small_font)
        option = self.doc.defaultTextOption()
        option.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        self.doc.setDefaultTextOption(option)
        h = _layout_doc(self.doc, w)
        self.at = QPointF(x, ITEM_PAD)
        self.frame = QRectF(self.at, self.doc.size())
        self.height = math.ceil(ITEM_PAD * 2 + h)

    def paint(self, p: QPainter, theme: ChatTheme, state: PaintState) -> None:
        draw_doc(p, self.doc, self.at, theme, theme.muted, state.visible)
        self.paint_focus(p, theme, state)


class MarkerLayout(ItemLayout):
    """A neutral line across the column with a word in it: "—— Stopped ——"."""

    def __init__(
        self, key: tuple[Any, ...], item: MarkerItem, theme: ChatTheme, width: int
    ) -> None:
        super().__init__(key)
        x, w = column(width)
        self.text = one_line(item.text, 200)
        small = QFontMetricsF(theme.small_font)
        text_w = min(w * 0.6, small.horizontalAdvance(self.text) + 8)
        self.rect = QRectF(x, ITEM_PAD, w, small.height() + 8)
        self.text_rect = QRectF(x + (w - text_w) / 2, ITEM_PAD, text_w, self.rect.height())
        self.frame = self.text_rect
        bottom = self.rect.bottom()
        self.actions: MessageActions | None = None
        if item.branch is not None:  # the earlier answer is a version away
            self.actions = MessageActions(self, item, theme, x, w, bottom + 2, right=False)
            bottom = self.actions.rect.bottom()
        self.height = math.ceil(bottom + ITEM_PAD)

    def paint(self, p: QPainter, theme: ChatTheme, state: PaintState) -> None:
        if self.actions is not None:
            self.actions.paint(p, theme, state)
        y = self.rect.center().y()
        p.setPen(QPen(theme.card_border, 1))
        gap = 10.0
        p.drawLine(QPointF(self.rect.x(), y), QPointF(self.text_rect.x() - gap, y))
        p.drawLine(QPointF(self.text_rect.right() + gap, y), QPointF(self.rect.right(), y))
        _text(
            p,
            self.text_rect,
            self.text,
            theme.small_font,
            theme.muted,
            Qt.AlignmentFlag.AlignHCenter,
        )
        self.paint_focus(p, theme, state)


#: How often the pending indicator's dots move (ms).
PENDING_STEP_MS = 350


class PendingLayout(ItemLayout):
    """ "Thinking" and three dots that light up in turn, where the answer will appear."""

    def __init__(
        self, key: tuple[Any, ...], item: PendingItem, theme: ChatTheme, width: int
    ) -> None:
        super().__init__(key)
        x, _ = column(width)
        self.word = "Thinking"
        word_w = QFontMetricsF(theme.font).horizontalAdvance(self.word) + 2
        self.word_rect = QRectF(x, ITEM_PAD, word_w, theme.line_height)
        self.dots = QRectF(self.word_rect.right() + 4, ITEM_PAD, 30, theme.line_height)
        self.height = math.ceil(self.word_rect.bottom() + ITEM_PAD)

    def paint(self, p: QPainter, theme: ChatTheme, state: PaintState) -> None:
        _text(p, self.word_rect, self.word, theme.font, theme.muted)
        step = int(state.now * 1000 / PENDING_STEP_MS) % 4
        p.save()
        p.setPen(Qt.PenStyle.NoPen)
        for i in range(3):
            p.setBrush(theme.muted if i < step else with_alpha(theme.muted, 0.28))
            c = QPointF(self.dots.x() + 3 + i * 8, self.dots.center().y() + 3)
            p.drawEllipse(c, 2.2, 2.2)
        p.restore()


class ErrorLayout(ItemLayout):
    def __init__(self, key: tuple[Any, ...], item: ErrorItem, theme: ChatTheme, width: int) -> None:
        super().__init__(key)
        x, w = column(width)
        self.show_retry = item.retryable and not item.retried
        self.show_connect = item.kind == "setup"
        bold = QFontMetricsF(theme.bold_font)
        retry_w = bold.horizontalAdvance("Retry") + 26 if self.show_retry else 0.0
        connect_w = bold.horizontalAdvance(CONNECT_WORDS) + 8 if self.show_connect else 0.0
        actions_w = retry_w + connect_w + (12 if retry_w and connect_w else 0)
        self.doc = render_plain(item.message, theme)
        h = _layout_doc(self.doc, w - 2 * CARD_PAD - 28 - actions_w)
        h = max(h, theme.line_height)
        self.box = QRectF(x, ITEM_PAD, w, h + 2 * 12)
        self.doc_at = QPointF(x + CARD_PAD + 28, ITEM_PAD + 12)
        self.icon = QRectF(x + CARD_PAD, ITEM_PAD + 12, 18, theme.line_height)
        self.texts.append((QRectF(self.doc_at, self.doc.size()), self.doc))
        self.frame = self.box
        right = self.box.right() - CARD_PAD
        if self.show_retry:
            rect = QRectF(right - retry_w, ITEM_PAD + 12, retry_w, theme.line_height)
            self.hits.append(Hit("retry", None, rect, "Send the last message again"))
            right = rect.x() - 12
        if self.show_connect:
            rect = QRectF(right - connect_w, ITEM_PAD + 12, connect_w, theme.line_height)
            self.hits.append(Hit("connect", None, rect, "Open Settings → Providers"))
        self.links = list(self.hits)
        bottom = self.box.bottom()
        self.actions: MessageActions | None = None
        if item.branch is not None:  # the earlier answer is a version away
            self.actions = MessageActions(self, item, theme, x, w, bottom + 4, right=False)
            bottom = self.actions.rect.bottom()
        self.height = math.ceil(bottom + ITEM_PAD)

    def paint(self, p: QPainter, theme: ChatTheme, state: PaintState) -> None:
        _round_rect(
            p,
            self.box,
            mix(theme.background, theme.error, 0.08),
            with_alpha(theme.error, 0.45),
            CARD_RADIUS,
        )
        _status_icon(p, self.icon, ToolStatus.ERROR, theme)
        self.draw_text(p, theme, state, 0)
        if self.actions is not None:
            self.actions.paint(p, theme, state)
        for hit in self.links:
            hovered = state.hover is not None and state.hover.rect == hit.rect
            font = QFont(theme.bold_font)
            font.setUnderline(hovered)
            if hit.action == "retry":
                icon = QRectF(hit.rect.x(), hit.rect.center().y() - 7, 14, 14)
                _action_icon(p, "regenerate", icon, theme.link, theme.background)
                label_rect = hit.rect.adjusted(20, 0, 0, 0)
                _text(p, label_rect, "Retry", font, theme.link, Qt.AlignmentFlag.AlignRight)
            else:
                _text(p, hit.rect, CONNECT_WORDS, font, theme.link, Qt.AlignmentFlag.AlignRight)
        self.paint_focus(p, theme, state)


#: The action of a setup error: opens Settings → Providers.
CONNECT_WORDS = "Connect a model"

# ---- tool cards --------------------------------------------------------------------------

_STATUS_WORDS = STATUS_WORDS


def _status_color(status: ToolStatus, theme: ChatTheme) -> QColor:
    return {
        ToolStatus.RUNNING: theme.accent,
        ToolStatus.AWAITING: theme.warn,
        ToolStatus.OK: theme.ok,
        ToolStatus.ERROR: theme.error,
    }.get(status, theme.muted)


def _status_icon(p: QPainter, rect: QRectF, status: ToolStatus, theme: ChatTheme) -> None:
    """A small drawn glyph (no emoji font needed): ✓, ✕, !, …, or a ring while running."""
    color = _status_color(status, theme)
    d = min(rect.width(), rect.height(), 16.0)
    c = rect.center()
    box = QRectF(c.x() - d / 2, c.y() - d / 2, d, d)
    p.save()
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    if status == ToolStatus.RUNNING:
        p.setPen(QPen(color, 2))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawArc(box.adjusted(2, 2, -2, -2), 90 * 16, -270 * 16)
        p.restore()
        return
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(color)
    p.drawEllipse(box)
    pen = QPen(theme.background, 1.8)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    p.setPen(pen)
    k = d / 16
    if status == ToolStatus.OK:
        p.drawPolyline(
            [
                QPointF(c.x() - 4 * k, c.y()),
                QPointF(c.x() - 1 * k, c.y() + 3 * k),
                QPointF(c.x() + 4 * k, c.y() - 3 * k),
            ]
        )
    elif status == ToolStatus.ERROR:
        p.drawLine(QPointF(c.x() - 3 * k, c.y() - 3 * k), QPointF(c.x() + 3 * k, c.y() + 3 * k))
        p.drawLine(QPointF(c.x() + 3 * k, c.y() - 3 * k), QPointF(c.x() - 3 * k, c.y() + 3 * k))
    elif status == ToolStatus.AWAITING:
        p.drawLine(QPointF(c.x(), c.y() - 4 * k), QPointF(c.x(), c.y() + 1 * k))
        p.drawPoint(QPointF(c.x(), c.y() + 4 * k))
    else:
        p.drawLine(QPointF(c.x() - 3.5 * k, c.y()), QPointF(c.x() + 3.5 * k, c.y()))
    p.restore()


_THUMBS: OrderedDict[tuple[str, int, int], QImage] = OrderedDict()


def thumbnail(path: str) -> QImage | None:
    """A scaled-down image (decoded at the small size), cached by path."""
    key = (path, THUMB_W, THUMB_H)
    image = _THUMBS.get(key)
    if image is None:
        reader = QImageReader(path)
        size = reader.size()
        if not size.isValid():
            return None
        reader.setScaledSize(
            size.scaled(QSize(THUMB_W, THUMB_H), Qt.AspectRatioMode.KeepAspectRatio)
            if size.width() > THUMB_W or size.height() > THUMB_H
            else size
        )
        image = reader.read()
        if image.isNull():
            return None
        _THUMBS[key] = image
        if len(_THUMBS) > 64:
            _THUMBS.popitem(last=False)
    return image


class ToolCardLayout(ItemLayout):
    def __init__(self, key: tuple[Any, ...], item: ToolCard, theme: ChatTheme, width: int) -> None:
        super().__init__(key)
        self.item = item
        x, w = column(width)
        pad = CARD_PAD
        inner_x, inner_w = x + pad, w - 2 * pad
        small = QFontMetricsF(theme.small_font)
        row_h = max(theme.line_height, 22.0)
        y: float = ITEM_PAD + pad
        self.header = QRectF(inner_x, y, inner_w, row_h)
        self.title = one_line(item.title, 120)
        self.category = one_line(item.category_label, 60)
        name_w = QFontMetricsF(theme.bold_font).horizontalAdvance(self.title)
        self.name_rect = QRectF(inner_x + 26, y, min(name_w + 2, inner_w * 0.6), row_h)
        self.badge = None
        if self.category:
            bw = min(small.horizontalAdvance(self.category) + 14, inner_w * 0.3)
            self.badge = QRectF(
                self.name_rect.right() + 8,
                y + (row_h - small.height() - 4) / 2,
                bw,
                small.height() + 4,
            )
        self.machine_name = one_line(item.name, 200)
        self.frame = QRectF(x, ITEM_PAD, w, 0)  # its height is set at the end
        y += row_h
        self.progress_rect = None
        self.term: _TerminalBlock | None = None
        terminal = _terminal_of(item)
        shell = is_terminal_tool(item.name, item.category)
        command = _command_argument(item.arguments) if item.name == "shell_run" else None
        if shell and item.status == ToolStatus.RUNNING and (command or item.progress):
            y = self._running_terminal(item, command, theme, inner_x, y + 8, inner_w)
        elif item.status == ToolStatus.RUNNING and (item.progress or item.fraction is not None):
            y += 6
            self.progress_rect = QRectF(inner_x + 26, y, inner_w - 26, small.height())
            y += small.height()
            if item.fraction is not None:
                y += 6
                self.bar = QRectF(inner_x + 26, y, inner_w - 26, 4)
                y += 4
        #: boxed documents: outer rect, document rect, document, fill, border, text colour
        self.sections: list[tuple[QRectF, QRectF, QTextDocument, QColor, QColor, QColor | None]]
        self.sections = []
        # details: the machine name and the arguments (the approval area shows them instead)
        toggle_h = small.height() + 10
        awaiting = item.status == ToolStatus.AWAITING and item.approval is not None
        if (item.arguments or not item.question) and not awaiting:
            y += 8
            rect = QRectF(inner_x, y, inner_w, toggle_h)
            self.hits.append(Hit("toggle_args", None, rect, "Show what the model asked for"))
            self.args_toggle = rect
            y += toggle_h
            if item.args_open:
                name_doc = render_plain(f"Tool name: {self.machine_name}", theme, color=theme.muted)
                name_doc.setDefaultFont(theme.small_font)
                clear = QColor(0, 0, 0, 0)
                y = self._box(name_doc, inner_x - 10, y - 4, inner_w, clear, clear, theme.muted)
                if item.arguments:
                    y = self._box(
                        render_code(cap(item.arguments), "json", theme),
                        inner_x,
                        y,
                        inner_w,
                        theme.code_bg,
                        theme.code_border,
                    )
        self.meta: QTextDocument | None = None
        if awaiting and item.approval is not None:
            request = item.approval
            y += 10
            summary = request.summary or approval_question(request.operations)
            self.summary_doc = render_plain(one_line(summary, 400), theme)
            self.summary_doc.setDefaultFont(theme.bold_font)
            h = _layout_doc(self.summary_doc, inner_w)
            self.summary_at = QPointF(inner_x, y)
            self.docs.append((QRectF(self.summary_at, self.summary_doc.size()), self.summary_doc))
            y += h
            self.meta = approval_meta(request, theme)
            y += 4
            h = _layout_doc(self.meta, inner_w)
            self.meta_at = QPointF(inner_x, y)
            y += h + 8
            height = item.panel_height or APPROVAL_BAR_H - 8
            self.approval_rect = QRectF(inner_x, y, inner_w, height)
            y += height
        denied = item.status == ToolStatus.DENIED  # what the model was told is not shown
        if terminal is not None and item.finished:
            y = self._finished_terminal(item, terminal, theme, inner_x, y + 10, inner_w)
        elif item.error and not denied:
            y += 10
            doc = render_plain(item.error, theme, color=theme.error)
            y = self._box(
                doc,
                inner_x,
                y,
                inner_w,
                mix(theme.card, theme.error, 0.07),
                with_alpha(theme.error, 0.35),
                theme.error,
            )
        self.result_summary = ""
        if (
            terminal is None
            and not denied
            and item.result
            and item.finished
            and item.result.strip() != item.error.strip()
        ):
            y += 8
            rect = QRectF(inner_x, y, inner_w, toggle_h)
            self.hits.append(Hit("toggle_result", None, rect))
            self.result_toggle = rect
            first = item.result.strip().split("\n", 1)[0]
            self.result_summary = first
            y += toggle_h
            if item.result_open:
                y = self._box(
                    render_plain(item.result, theme, mono=True),
                    inner_x,
                    y,
                    inner_w,
                    theme.code_bg,
                    theme.code_border,
                )
        self.thumbs: list[tuple[QRectF, QImage]] = []
        if item.attachments:
            y += 10
            tx, row_bottom = inner_x, y
            for path in item.attachments:
                image = thumbnail(path)
                if image is None:
                    continue
                tw, th = float(image.width()), float(image.height())
                if tx > inner_x and tx + tw > inner_x + inner_w:
                    tx, y = inner_x, row_bottom + 8
                rect = QRectF(tx, y, min(tw, inner_w), th)
                self.thumbs.append((rect, image))
                self.hits.append(Hit("open_file", path, rect))
                tx = rect.right() + 8
                row_bottom = max(row_bottom, rect.bottom())
            y = row_bottom
        y += pad
        self.card = QRectF(x, ITEM_PAD, w, y - ITEM_PAD)
        self.frame = self.card
        self.height = math.ceil(y + ITEM_PAD)

    def tooltip_at(self, pos: QPointF) -> str:
        if self.header.contains(pos) and pos.x() < self.header.x() + self.header.width() * 0.7:
            return self.machine_name
        return super().tooltip_at(pos)

    def _running_terminal(
        self, item: ToolCard, command: str | None, theme: ChatTheme, x: float, y: float, w: float
    ) -> float:
        """A running command: its prompt line and the newest lines it printed."""
        doc, _, _ = render_terminal(item.progress, theme.mono_font, command=command, tail=8)
        h = _layout_doc(doc, w - 2 * TERM_PAD)
        outer = QRectF(x, y, w, h + 2 * TERM_PAD)
        self.term = _TerminalBlock(outer, None, QPointF(x + TERM_PAD, y + TERM_PAD), doc, [])
        return outer.bottom()

    def _finished_terminal(
        self, item: ToolCard, out: TerminalOutput, theme: ChatTheme, x: float, y: float, w: float
    ) -> float:
        """The output as a terminal shows it: a header (folder, exit code, sandbox), the
        command and the end of its output; "All output" opens the rest."""
        tail = TERM_OPEN_MAX if item.result_open else TERM_TAIL
        doc, total, hidden = render_terminal(
            out.output, theme.mono_font, command=out.command, tail=tail
        )
        h = _layout_doc(doc, w - 2 * TERM_PAD)
        outer = QRectF(x, y, w, TERM_HEADER + h + 2 * TERM_PAD)
        header = QRectF(x, y, w, TERM_HEADER)
        at = QPointF(x + TERM_PAD, y + TERM_HEADER + TERM_PAD)
        self.term = _TerminalBlock(outer, header, at, doc, terminal_badges(out))
        self.term_folder = one_line(home_short(out.folder), 300)
        y = outer.bottom()
        if total > TERM_TAIL:
            toggle_h = QFontMetricsF(theme.small_font).height() + 10
            rect = QRectF(x, y + 6, w, toggle_h)
            self.hits.append(Hit("toggle_result", None, rect))
            self.term_toggle = rect
            shown = f"{total - hidden:,} of {total:,}" if hidden else f"{total:,}"
            self.term_toggle_label = f"All output ({shown} lines)"
            y = rect.bottom()
        return y

    def _paint_terminal(self, p: QPainter, theme: ChatTheme, state: PaintState) -> None:
        term = self.term
        if term is None:
            return
        _round_rect(p, term.outer, TERMINAL_BG, TERMINAL_BORDER, 6)
        if term.header is not None:
            header = term.header
            p.save()
            p.setClipRect(header)
            _round_rect(p, term.outer, TERMINAL_HEADER, TERMINAL_BORDER, 6)
            p.restore()
            p.setPen(QPen(TERMINAL_BORDER, 1))
            p.drawLine(
                QPointF(header.x() + 1, header.bottom() - 0.5),
                QPointF(header.right() - 1, header.bottom() - 0.5),
            )
            right = header.right() - TERM_PAD
            small = QFontMetricsF(theme.small_font)
            for text, fg, bg in reversed(term.badges):
                bw = small.horizontalAdvance(text) + 14
                pill = QRectF(right - bw, header.center().y() - 9, bw, 18)
                _round_rect(p, pill, bg, None, 9)
                _text(p, pill, text, theme.small_font, fg, Qt.AlignmentFlag.AlignHCenter)
                right = pill.x() - 6
            folder = QRectF(header.x() + TERM_PAD, header.y(), right - header.x() - 16, 0)
            folder.setHeight(header.height())
            _text(p, folder, self.term_folder, theme.small_font, TERMINAL_MUTED)
        draw_doc(p, term.doc, term.at, theme, None, state.visible)
        if hasattr(self, "term_toggle"):
            label = self.term_toggle_label
            _paint_toggle(p, theme, self.term_toggle, label, self.item.result_open, "", state)

    def _box(
        self,
        doc: QTextDocument,
        x: float,
        y: float,
        w: float,
        fill: QColor,
        border: QColor,
        color: QColor | None = None,
    ) -> float:
        h = _layout_doc(doc, w - 2 * 10)
        rect = QRectF(x, y, w, h + 2 * 8)
        self.sections.append((rect, QRectF(x + 10, y + 8, w - 20, h), doc, fill, border, color))
        return rect.bottom()

    def paint(self, p: QPainter, theme: ChatTheme, state: PaintState) -> None:
        item = self.item
        status = item.status
        border = (
            theme.warn
            if status == ToolStatus.AWAITING
            else (with_alpha(theme.error, 0.6) if status == ToolStatus.ERROR else theme.card_border)
        )
        _round_rect(p, self.card, theme.card, border, CARD_RADIUS)
        _status_icon(
            p, QRectF(self.header.x(), self.header.y(), 18, self.header.height()), status, theme
        )
        _text(p, self.name_rect, self.title, theme.bold_font, theme.text)
        if self.badge is not None:
            _round_rect(p, self.badge, theme.badge_bg, None, self.badge.height() / 2)
            _text(
                p,
                self.badge,
                self.category,
                theme.small_font,
                theme.muted,
                Qt.AlignmentFlag.AlignHCenter,
            )
        right = (
            ""
            if item.finished and item.seconds is None
            else format_seconds(item.elapsed(), not item.finished)
        )
        words = item.decision or _STATUS_WORDS[status]
        status_color = _status_color(status, theme) if not item.decision else theme.muted
        small = QFontMetricsF(theme.small_font)
        time_w = small.horizontalAdvance(right) + 4
        left = (self.badge or self.name_rect).right() + 12
        _text(
            p,
            QRectF(self.header.right() - time_w, self.header.y(), time_w, self.header.height()),
            right,
            theme.small_font,
            theme.muted,
            Qt.AlignmentFlag.AlignRight,
        )
        words_rect = QRectF(
            left, self.header.y(), self.header.right() - time_w - 12 - left, self.header.height()
        )
        _text(p, words_rect, words, theme.small_font, status_color, Qt.AlignmentFlag.AlignRight)
        self._paint_terminal(p, theme, state)
        if self.progress_rect is not None:
            _text(p, self.progress_rect, item.progress, theme.small_font, theme.muted)
            if item.fraction is not None:
                _round_rect(p, self.bar, theme.badge_bg, None, 2)
                done = QRectF(self.bar)
                done.setWidth(self.bar.width() * max(0.0, min(1.0, item.fraction)))
                _round_rect(p, done, theme.accent, None, 2)
        if hasattr(self, "args_toggle"):
            summary = " ".join(f"{self.machine_name} {item.arguments[:400]}".split())
            _paint_toggle(p, theme, self.args_toggle, "Details", item.args_open, summary, state)
        if self.meta is not None:
            draw_doc(p, self.summary_doc, self.summary_at, theme, None, state.visible)
            draw_doc(p, self.meta, self.meta_at, theme, theme.muted, state.visible)
        if hasattr(self, "result_toggle"):
            _paint_toggle(
                p, theme, self.result_toggle, "Result", item.result_open, self.result_summary, state
            )
        for rect, inner, doc, fill, sec_border, color in self.sections:
            _round_rect(p, rect, fill, sec_border, 6)
            draw_doc(p, doc, inner.topLeft(), theme, color, state.visible)
        for rect, image in self.thumbs:
            p.drawImage(rect, image)
            p.setPen(QPen(theme.card_border, 1))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(rect.adjusted(0.5, 0.5, -0.5, -0.5))
        self.paint_focus(p, theme, state)


@dataclass
class _TerminalBlock:
    outer: QRectF
    header: QRectF | None
    at: QPointF
    doc: QTextDocument
    #: (text, text colour, fill) of the pills in the header, left to right
    badges: list[tuple[str, QColor, QColor]]


def _terminal_of(item: ToolCard) -> TerminalOutput | None:
    """The card's terminal output (set by the view from a built-in terminal tool's result)."""
    terminal = item.terminal
    if isinstance(terminal, TerminalOutput) and is_terminal_tool(item.name, item.category):
        return terminal
    return None


def _command_argument(arguments: str) -> str | None:
    """The "command" argument of a card's arguments (pretty JSON), if there is one."""
    try:
        value = json.loads(arguments) if arguments.strip() else None
    except ValueError:
        return None
    command = value.get("command") if isinstance(value, dict) else None
    return command if isinstance(command, str) else None


def _toggle_font(theme: ChatTheme) -> QFont:
    font = QFont(theme.small_font)
    font.setWeight(QFont.Weight.DemiBold)
    return font


def _paint_toggle(
    p: QPainter,
    theme: ChatTheme,
    rect: QRectF,
    label: str,
    is_open: bool,
    summary: str,
    state: PaintState,
) -> None:
    """A disclosure header: a chevron, a label, and (closed) a one-line mono summary."""
    hovered = state.hover is not None and state.hover.rect == rect
    color = theme.text if hovered else theme.muted
    p.save()
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(color)
    c = QPointF(rect.x() + 8, rect.center().y())
    if is_open:
        p.drawPolygon(
            [
                QPointF(c.x() - 4, c.y() - 2),
                QPointF(c.x() + 4, c.y() - 2),
                QPointF(c.x(), c.y() + 3),
            ]
        )
    else:
        p.drawPolygon(
            [
                QPointF(c.x() - 2, c.y() - 4),
                QPointF(c.x() - 2, c.y() + 4),
                QPointF(c.x() + 3, c.y()),
            ]
        )
    p.restore()
    font = _toggle_font(theme)
    label_w = QFontMetricsF(font).horizontalAdvance(label) + 4
    _text(p, QRectF(rect.x() + 22, rect.y(), label_w, rect.height()), label, font, color)
    if summary and not is_open:
        mono = QFont(theme.mono_font)
        mono.setPointSizeF(theme.small_font.pointSizeF())
        _text(
            p,
            QRectF(rect.x() + 30 + label_w, rect.y(), rect.width() - 30 - label_w, rect.height()),
            summary,
            mono,
            theme.muted,
        )


# ---- thinking ----------------------------------------------------------------------------


class ThinkingLayout(ItemLayout):
    """ "▸ Thinking…" / "▸ Thought for 12 s"; open, the reasoning beside a thin bar."""

    def __init__(
        self, key: tuple[Any, ...], item: ThinkingItem, theme: ChatTheme, width: int
    ) -> None:
        super().__init__(key)
        self.item = item
        x, w = column(width)
        self.label = item.label()
        small = QFontMetricsF(theme.small_font)
        row_h = small.height() + 10
        label_w = QFontMetricsF(_toggle_font(theme)).horizontalAdvance(self.label) + 4
        y = float(ITEM_PAD)
        # only the chevron and the words are clickable, not the empty row beside them
        self.header = QRectF(x, y, min(w, THINK_INDENT + label_w + 8), row_h)
        self.hits.append(Hit("toggle_thinking", None, self.header))
        self.frame = self.header
        y += row_h
        self.doc_rect: QRectF | None = None
        if item.open and item.text:
            stream = item.docs
            if not isinstance(stream, PlainStream) or stream.theme is not theme:
                stream = item.docs = PlainStream(theme, theme.small_font, theme.muted)
            stream.update(item.text)
            self.doc = stream.doc
            y += 2
            h = _layout_doc(self.doc, w - THINK_INDENT)
            self.doc_rect = QRectF(x + THINK_INDENT, y, w - THINK_INDENT, h)
            self.bar = QRectF(x + 7, y + 2, 2, max(0.0, h - 4))
            y += h + 6
        self.height = math.ceil(y + ITEM_PAD)

    def paint(self, p: QPainter, theme: ChatTheme, state: PaintState) -> None:
        _paint_toggle(p, theme, self.header, self.label, self.item.open, "", state)
        if self.doc_rect is not None:
            _round_rect(p, self.bar, theme.card_border, None, 1)
            draw_doc(p, self.doc, self.doc_rect.topLeft(), theme, theme.muted, state.visible)
        self.paint_focus(p, theme, state)


# ---- dispatch ----------------------------------------------------------------------------

_Builder = Callable[[tuple[Any, ...], Any, ChatTheme, int], ItemLayout]
_BUILDERS: dict[type, _Builder] = {
    AssistantMessage: AssistantLayout,
    UserMessage: UserLayout,
    ToolCard: ToolCardLayout,
    ErrorItem: ErrorLayout,
    NoticeItem: NoticeLayout,
    ThinkingItem: ThinkingLayout,
    MarkerItem: MarkerLayout,
    PendingItem: PendingLayout,
}


def build_layout(item: ChatItem, theme: ChatTheme, width: int, key: tuple[Any, ...]) -> ItemLayout:
    return _BUILDERS[type(item)](key, item, theme, width)


def estimate_height(item: ChatItem, theme: ChatTheme, width: int) -> int:
    """A guess without rendering: text length over the line width, plus fixed chrome."""
    _, w = column(width)
    lh = theme.line_height

    def lines(text: str, avail: float, char_w: float) -> float:
        per_line = max(8.0, avail / char_w)
        return len(text) / per_line + text.count("\n") * 0.55 + 1

    if isinstance(item, AssistantMessage):
        fences = item.text.count("```") // 2
        return int(
            lines(item.text, w, theme.char_width) * lh * 1.15
            + fences * (CODE_HEADER + CODE_PAD + BLOCK_GAP)
            + 2 * ITEM_PAD
            + ACTIONS_H
            + 2
        )
    if isinstance(item, UserMessage):
        return int(
            lines(item.text, w * 0.78 - 2 * BUBBLE_PAD_X, theme.char_width) * lh
            + 2 * BUBBLE_PAD_Y
            + 2 * ITEM_PAD
            + 8
            + ACTIONS_H
            + 2
        )
    if isinstance(item, ToolCard):
        base = 2 * CARD_PAD + 2 * ITEM_PAD + max(lh, 22.0)
        extra = (lh + 18) * (1 + bool(item.result)) + (lh + 24) * bool(item.error)
        if item.attachments:
            extra += THUMB_H + 10
        if _terminal_of(item) is not None:  # its header, command and last lines
            mono = QFontMetricsF(theme.mono_font).lineSpacing()
            extra += TERM_HEADER + 2 * TERM_PAD + (TERM_TAIL + 1) * mono - (lh + 18)
        return int(base + extra)
    switch = ACTIONS_H + 4 if getattr(item, "branch", None) is not None else 0
    if isinstance(item, ErrorItem):
        text_h = lines(item.message, w - 140, theme.char_width) * lh
        return int(text_h + 24 + 2 * ITEM_PAD + switch)
    if isinstance(item, ThinkingItem):
        header = lh + 10 + 2 * ITEM_PAD
        if not item.open:
            return int(header)
        return int(header + lines(item.text, w - THINK_INDENT, theme.char_width) * lh * 0.9 + 8)
    return int(lh + 2 * ITEM_PAD + switch)


_VERBS = {"create": "create", "update": "change", "delete": "delete", "execute": "run"}


def approval_meta(request: ApprovalRequest, theme: ChatTheme) -> QTextDocument:
    """What the call acts on, where the tool comes from, and why it asks — in plain words,
    every value shown as text (control characters visible), nothing interpreted."""
    warn, muted = theme.warn.name(), theme.muted.name()

    def line(label: str, value: str, color: str = "") -> str:
        style = f' style="color:{color}"' if color else ""
        return (
            f'<tr><td style="color:{muted}; padding-right:10px">{escape(label)}</td>'
            f"<td{style}>{escape(value)}</td></tr>"
        )

    rows = []
    if request.target and not is_shell_request(request):  # the command box shows the folder
        rows.append(line("On", one_line(request.target, 200)))
    source = one_line(request.source, 200)
    reason = one_line(request.reason or "", 300)
    if request.trusted:
        rows.append(line("From", source))
    else:
        state = "changed since you trusted it" if "changed" in reason else "not trusted yet"
        rows.append(line("From", f"{source} — {state}", warn))
        if request.source and request.source in (request.reason or ""):
            reason = ""  # the line above says it already
    if reason:
        rows.append(line("Asks because", reason))
    if request.never_covered:
        rows.append(line("Note", "No rule can allow this: Deskhand asks every time.", warn))
    doc = QTextDocument()
    doc.setDocumentMargin(0)
    doc.setDefaultFont(theme.small_font)
    doc.setHtml(f'<table cellspacing="0" cellpadding="1">{"".join(rows)}</table>')
    return doc


def approval_question(operations: list[str]) -> str:
    """ "Allow Deskhand to create or change something? This is exactly what will happen:"."""
    verbs = [_VERBS[o] for o in ("create", "update", "delete", "execute") if o in operations]
    if not verbs:
        verbs = ["change"]
    said = verbs[0] if len(verbs) == 1 else ", ".join(verbs[:-1]) + " or " + verbs[-1]
    return f"Allow Deskhand to {said} something? This is exactly what will happen:"
