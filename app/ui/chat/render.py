"""Text → `QTextDocument`: markdown (Qt's importer), highlighted code, plain text, diffs.

One document per top-level segment of a message (see `segments.py`). `MessageDocs` keeps
the documents of finished segments and re-renders only the tail as a message streams in;
an open code block at the tail is extended line by line instead of re-rendered.
`STATS` counts renders so tests and benchmarks can check that work is skipped.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from PySide6.QtCore import QRectF
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextFrameFormat,
    QTextLength,
    QTextListFormat,
    QTextOption,
    QTextTable,
)

from app.ui.chat.segments import Segment, Segmenter, split_segments
from app.ui.chat.style import ChatTheme, token_colors

QUOTE_INDENT = 16.0
#: Longest text shown in one collapsible tool section; the rest is summarised.
MAX_SECTION_CHARS = 20_000


@dataclass
class RenderStats:
    markdown: int = 0
    code: int = 0
    plain: int = 0

    @property
    def total(self) -> int:
        return self.markdown + self.code + self.plain

    def reset(self) -> None:
        self.markdown = self.code = self.plain = 0


STATS = RenderStats()

#: How model text is read as Markdown: GitHub's dialect, raw HTML shown as the text it is
#: (never hidden, styled or turned into links), so what is copied is what was shown.
MARKDOWN = (
    QTextDocument.MarkdownFeature.MarkdownDialectGitHub
    | QTextDocument.MarkdownFeature.MarkdownNoHTML
)


def _new_doc(theme: ChatTheme, font: QFont | None = None) -> QTextDocument:
    doc = QTextDocument()
    doc.setUndoRedoEnabled(False)
    doc.setDocumentMargin(0)
    doc.setDefaultFont(font or theme.font)
    option = doc.defaultTextOption()
    option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    doc.setDefaultTextOption(option)
    return doc


# ---- markdown ----------------------------------------------------------------------------


def render_markdown(text: str, theme: ChatTheme) -> QTextDocument:
    STATS.markdown += 1
    doc = _new_doc(theme)
    doc.setMarkdown(text, MARKDOWN)
    _restyle(doc, theme)
    return doc


def _restyle(doc: QTextDocument, theme: ChatTheme) -> None:
    """Theme colours for links and inline code, a code look for (nested) code blocks,
    muted quotes and bordered tables: Qt's importer bakes in the application palette's
    colours. (The bar beside a quote is painted by the layout: see `quote_bars`.)"""
    cursor = QTextCursor(doc)
    link = QTextCharFormat()
    link.setForeground(QBrush(theme.link))
    link.setFontUnderline(True)
    inline_code = QTextCharFormat()
    inline_code.setBackground(QBrush(theme.inline_code_bg))
    code_block = QTextBlockFormat()
    code_block.setBackground(QBrush(theme.code_bg))
    code_block.setLeftMargin(10)
    code_block.setRightMargin(10)
    quote = QTextCharFormat()
    quote.setForeground(QBrush(theme.muted))
    block = doc.begin()
    while block.isValid():
        block_fmt = block.blockFormat()
        if block_fmt.hasProperty(QTextFormat.Property.BlockCodeLanguage):
            cursor.setPosition(block.position())
            cursor.mergeBlockFormat(code_block)
        else:
            level = block_fmt.intProperty(QTextFormat.Property.BlockQuoteLevel)
            if level > 0:
                indent = QTextBlockFormat()
                indent.setLeftMargin(QUOTE_INDENT * level)
                indent.setRightMargin(0)
                cursor.setPosition(block.position())
                cursor.mergeBlockFormat(indent)
                cursor.setPosition(
                    block.position() + block.length() - 1, QTextCursor.MoveMode.KeepAnchor
                )
                cursor.mergeCharFormat(quote)
            it = block.begin()
            while not it.atEnd():
                fragment = it.fragment()
                fmt = fragment.charFormat()
                special = link if fmt.isAnchor() else inline_code if fmt.fontFixedPitch() else None
                if special is not None:
                    cursor.setPosition(fragment.position())
                    cursor.setPosition(
                        fragment.position() + fragment.length(), QTextCursor.MoveMode.KeepAnchor
                    )
                    cursor.mergeCharFormat(special)
                it += 1
        block = block.next()
    for frame in doc.rootFrame().childFrames():
        if isinstance(frame, QTextTable):
            _style_table(frame, theme)


def _style_table(table: QTextTable, theme: ChatTheme) -> None:
    fmt = table.format()
    fmt.setBorder(1)
    fmt.setBorderBrush(QBrush(theme.card_border))
    fmt.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
    fmt.setBorderCollapse(True)
    fmt.setCellPadding(6)
    fmt.setCellSpacing(0)
    fmt.setTopMargin(4)
    fmt.setBottomMargin(4)
    fmt.setWidth(QTextLength(QTextLength.Type.VariableLength, 0))
    table.setFormat(fmt)
    for row in range(table.rows()):
        for column in range(table.columns()):
            cell = table.cellAt(row, column)
            cell_fmt = cell.format()
            # cells holding inline code are taller: centre every cell on its row
            cell_fmt.setVerticalAlignment(QTextCharFormat.VerticalAlignment.AlignMiddle)
            if row == 0:
                cell_fmt.setBackground(QBrush(theme.code_bg))
            cell.setFormat(cell_fmt)


# ---- code --------------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _lexer(lang: str) -> Any:
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(lang.lower(), stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


#: Lexers warmed before the first answer (`warm_lexers`): what answers show most.
COMMON_LEXERS = ("python", "bash", "json", "javascript", "yaml", "diff")


def warm_lexers() -> None:
    """Builds the common lexers (any thread): their first use compiles their patterns."""
    for lang in COMMON_LEXERS:
        lexer = _lexer(lang)
        if lexer is not None:
            list(lexer.get_tokens("x = 1\n"))


_TOKENS_CACHE: OrderedDict[tuple[str, str], list[tuple[Any, str]]] = OrderedDict()


def _tokens(code: str, lang: str) -> list[tuple[Any, str]]:
    """Pygments tokens of `code`, cached by text (history is re-rendered on resize/theme)."""
    key = (lang, code)
    cached = _TOKENS_CACHE.get(key)
    if cached is not None:
        _TOKENS_CACHE.move_to_end(key)
        return cached
    lexer = _lexer(lang) if lang else None
    tokens = list(lexer.get_tokens(code)) if lexer is not None else [(None, code)]
    _TOKENS_CACHE[key] = tokens
    if len(_TOKENS_CACHE) > 256:
        _TOKENS_CACHE.popitem(last=False)
    return tokens


def _format_for(
    token: Any,
    colors: dict[object, tuple[str, bool, bool]],
    base: QTextCharFormat,
    cache: dict[Any, QTextCharFormat],
) -> QTextCharFormat:
    fmt = cache.get(token)
    if fmt is not None:
        return fmt
    spec = None
    t = token
    while t is not None and spec is None:
        spec = colors.get(t)
        t = t.parent if t is not None else None
    fmt = QTextCharFormat(base)
    if spec is not None:
        fmt.setForeground(QBrush(QColor(spec[0])))
        if spec[1]:
            fmt.setFontWeight(QFont.Weight.Bold)
        if spec[2]:
            fmt.setFontItalic(True)
    cache[token] = fmt
    return fmt


def _insert_highlighted(cursor: QTextCursor, code: str, lang: str, theme: ChatTheme) -> None:
    base = QTextCharFormat()
    base.setForeground(QBrush(theme.text))
    colors = token_colors(theme.pygments_style, theme.code_bg.rgb())
    formats: dict[Any, QTextCharFormat] = {}
    run: list[str] = []
    run_fmt: QTextCharFormat | None = None
    for token, value in _tokens(code, lang):
        fmt = base if token is None else _format_for(token, colors, base, formats)
        if fmt is not run_fmt and run:
            cursor.insertText("".join(run), base if run_fmt is None else run_fmt)
            run = []
        run_fmt = fmt
        run.append(value)
    if run and run_fmt is not None:
        cursor.insertText("".join(run), run_fmt)


def render_code(code: str, lang: str, theme: ChatTheme) -> QTextDocument:
    STATS.code += 1
    doc = _new_doc(theme, theme.mono_font)
    _insert_highlighted(QTextCursor(doc), code.removesuffix("\n"), lang, theme)
    return doc


class StreamingCode:
    """An open code block at the tail of a streaming message, extended line by line.

    Complete new lines are highlighted on their own (multi-line constructs may be coloured
    approximately until the block closes and is rendered whole); the partial last line is
    plain text, replaced on the next update. Qt re-lays out only the changed blocks.
    """

    def __init__(self, lang: str, theme: ChatTheme) -> None:
        STATS.code += 1
        self.lang = lang
        self.theme = theme
        self.doc = _new_doc(theme, theme.mono_font)
        self.code = ""
        self._done = 0  # characters of complete lines already in the document
        self._partial_at = 0  # document position where the partial line starts

    def extends(self, lang: str, code: str) -> bool:
        return lang == self.lang and code.startswith(self.code[: self._done])

    def update(self, code: str) -> None:
        cursor = QTextCursor(self.doc)
        cursor.setPosition(self._partial_at)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        last_newline = code.rfind("\n")
        if last_newline >= self._done:
            lines = code[self._done : last_newline]
            if self._done:
                cursor.insertText("\n")
            _insert_highlighted(cursor, lines, self.lang, self.theme)
            self._done = last_newline + 1
        self._partial_at = cursor.position()
        partial = code[self._done :]
        if partial:
            plain = QTextCharFormat()
            plain.setForeground(QBrush(self.theme.text))
            cursor.insertText(("\n" if self._done else "") + partial, plain)
        self.code = code


# ---- plain text and diffs ----------------------------------------------------------------


def cap(text: str, limit: int = MAX_SECTION_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit:,} more characters)"


def render_plain(
    text: str, theme: ChatTheme, *, mono: bool = False, color: QColor | None = None
) -> QTextDocument:
    STATS.plain += 1
    doc = _new_doc(theme, theme.mono_font if mono else theme.font)
    fmt = QTextCharFormat()
    fmt.setForeground(QBrush(color or theme.text))
    QTextCursor(doc).insertText(cap(text), fmt)
    return doc


def render_diff(text: str, theme: ChatTheme) -> QTextDocument:
    """A unified diff (or any preview text): added/removed lines coloured on a band."""
    STATS.plain += 1
    doc = _new_doc(theme, theme.mono_font)
    cursor = QTextCursor(doc)
    for i, line in enumerate(cap(text).split("\n")):
        fmt = QTextCharFormat()
        block = QTextBlockFormat()
        if line.startswith("+") and not line.startswith("+++"):
            fmt.setForeground(QBrush(theme.diff_add))
            block.setBackground(QBrush(theme.diff_add_bg))
        elif line.startswith("-") and not line.startswith("---"):
            fmt.setForeground(QBrush(theme.diff_del))
            block.setBackground(QBrush(theme.diff_del_bg))
        elif line.startswith("@@"):
            fmt.setForeground(QBrush(theme.accent))
        elif line.startswith(("+++", "---")):
            fmt.setForeground(QBrush(theme.muted))
            fmt.setFontWeight(QFont.Weight.Bold)
        else:
            fmt.setForeground(QBrush(theme.text))
        if i:
            cursor.insertBlock(block, fmt)
        else:
            cursor.setBlockFormat(block)
        cursor.insertText(line, fmt)
    return doc


# ---- messages ----------------------------------------------------------------------------


@dataclass(eq=False)
class Block:
    """One rendered segment of a message."""

    kind: str  # "md" | "code"
    doc: QTextDocument
    lang: str = ""
    code: str = ""
    #: Whether the markdown has a block quote (whose bar the layout paints).
    quotes: bool = False


def quote_bars(doc: QTextDocument) -> list[QRectF]:
    """Rectangles (document coordinates) of the bars beside block quotes."""
    bars: list[QRectF] = []
    layout = doc.documentLayout()
    block = doc.begin()
    while block.isValid():
        level = block.blockFormat().intProperty(QTextFormat.Property.BlockQuoteLevel)
        if level > 0:
            rect = layout.blockBoundingRect(block)
            x = (level - 1) * QUOTE_INDENT + 1.0
            bar = QRectF(x, rect.top(), 3, rect.height())
            if bars and bars[-1].x() == x and rect.top() - bars[-1].bottom() < QUOTE_INDENT:
                bars[-1] = bars[-1].united(bar)
            else:
                bars.append(bar)
        block = block.next()
    return bars


class MessageDocs:
    """The documents of one markdown message, updated incrementally while it streams."""

    def __init__(self, theme: ChatTheme) -> None:
        self.theme = theme
        self.segmenter = Segmenter()
        self.finished: list[Block] = []
        self.tail: list[Block] = []
        self._stream: StreamingCode | None = None
        self.text = ""

    def update(self, text: str, final: bool) -> None:
        if text == self.text and (not final or not self.tail):
            return
        self.text = text
        tail = self.segmenter.update(text, final)
        if len(self.segmenter.finished) > len(self.finished):
            self._stream = None
        for segment in self.segmenter.finished[len(self.finished) :]:
            self.finished.append(self._render(segment))
        self.tail = [self._render_tail(segment) for segment in tail]

    def blocks(self) -> list[Block]:
        return self.finished + self.tail

    def _render(self, segment: Segment) -> Block:
        if segment.kind == "code":
            return Block(
                "code",
                render_code(segment.text, segment.lang, self.theme),
                segment.lang,
                segment.text,
            )
        quotes = segment.text.startswith(">") or "\n>" in segment.text
        return Block("md", render_markdown(segment.text, self.theme), quotes=quotes)

    def _render_tail(self, segment: Segment) -> Block:
        if segment.kind != "code":
            return self._render(segment)
        stream = self._stream
        if stream is None or not stream.extends(segment.lang, segment.text):
            stream = self._stream = StreamingCode(segment.lang, self.theme)
        stream.update(segment.text)
        return Block("code", stream.doc, segment.lang, segment.text)


#: Longest reasoning shown; models can think for pages, the rest is summarised.
MAX_REASONING_CHARS = 100_000


class PlainStream:
    """A plain-text document that grows with its text (a model's reasoning as it streams):
    new characters are appended, the document is never rebuilt while the text only grows."""

    def __init__(self, theme: ChatTheme, font: QFont, color: QColor) -> None:
        STATS.plain += 1
        self.theme = theme
        self.doc = _new_doc(theme, font)
        self._format = QTextCharFormat()
        self._format.setForeground(QBrush(color))
        self.text = ""
        self._capped = False

    def update(self, text: str) -> None:
        if text == self.text:
            return
        if not text.startswith(self.text):  # not a continuation: start over
            STATS.plain += 1
            self.doc.clear()
            self.text, self._capped = "", False
        if not self._capped:
            shown = text[len(self.text) : MAX_REASONING_CHARS]
            if len(text) > MAX_REASONING_CHARS:
                shown += "\n… (the rest is not shown)"
                self._capped = True
            cursor = QTextCursor(self.doc)
            cursor.movePosition(QTextCursor.MoveOperation.End)
            cursor.insertText(shown, self._format)
        self.text = text


_BULLETS = {
    QTextListFormat.Style.ListDisc: "•",
    QTextListFormat.Style.ListCircle: "◦",
    QTextListFormat.Style.ListSquare: "▪",
}
_CHECKS = {
    QTextBlockFormat.MarkerType.Checked: "[x] ",
    QTextBlockFormat.MarkerType.Unchecked: "[ ] ",
}


def doc_text(doc: QTextDocument) -> str:
    """A rendered document's text as it reads: like `toPlainText`, with the list numbers,
    bullets and task boxes it shows (which `toPlainText` leaves out: "1. Run it" would be
    copied as "Run it")."""
    lines: list[str] = []
    block = doc.begin()
    while block.isValid():
        line = block.text()
        listed = block.textList()
        if listed is not None:
            style = listed.format().style()
            marker = _BULLETS.get(style) or listed.itemText(block)
            check = _CHECKS.get(block.blockFormat().marker(), "")
            depth = max(0, listed.format().indent() - 1)
            line = f"{'  ' * depth}{marker} {check}{line}".rstrip()
        lines.append(line)
        block = block.next()
    text = "\n".join(lines)
    return text.replace("\u2028", "\n").replace("\u2029", "\n").replace("\xa0", " ")


def message_plain(text: str) -> str:
    """A whole answer as it reads on screen, without laying anything out: each markdown
    segment as text, code exactly; blocks separated by a blank line (what copying a
    message that was never painted gives)."""
    parts: list[str] = []
    doc = QTextDocument()
    for segment in split_segments(text):
        if segment.kind == "code":
            parts.append(segment.text.removesuffix("\n"))
        else:
            doc.setMarkdown(segment.text, MARKDOWN)
            parts.append(doc_text(doc))
    return "\n\n".join(parts)
