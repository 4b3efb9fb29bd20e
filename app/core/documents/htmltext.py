"""HTML as Markdown with the standard library's parser: headings, paragraphs, lists, tables
and preformatted text kept; scripts, styles and other invisible parts dropped."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import TextIO

from app.core.documents.limits import MAX_SHEET_COLUMNS, MAX_SHEET_ROWS, Budget
from app.core.documents.markdown import Block, flow_sections, heading, table
from app.core.documents.model import Reading
from app.core.documents.plaintext import open_text

_CHUNK = 64 * 1024
#: Text gathered without a block's end is handed on past this much (one endless paragraph).
_SPILL = 256 * 1024
_SKIP = {"script", "style", "noscript", "template", "svg", "math", "title", "iframe", "object"}
_BLOCKS = {
    "p", "div", "section", "article", "main", "header", "footer", "aside", "nav", "blockquote",
    "figure", "figcaption", "address", "form", "fieldset", "details", "summary", "dl", "dt",
    "dd", "hr", "body", "center", "caption", "legend",
}  # fmt: skip
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_SPACE = re.compile(r"\s+")


@dataclass
class _Table:
    rows: list[list[str]] = field(default_factory=list)
    row: list[str] | None = None
    cell: list[str] | None = None
    cell_size: int = 0

    def start_cell(self) -> None:
        self.end_cell()
        self.cell, self.cell_size = [], 0

    def add(self, text: str) -> None:
        if self.cell is not None and self.cell_size < _SPILL:
            self.cell.append(text)
            self.cell_size += len(text)

    def end_cell(self) -> None:
        if self.cell is not None:
            if self.row is None:
                self.row = []
            self.row.append("".join(self.cell))
            self.cell = None

    def end_row(self) -> None:
        self.end_cell()
        if self.row is not None:
            if len(self.rows) <= MAX_SHEET_ROWS:  # one more than shown: table() notes the cut
                self.rows.append(self.row[: MAX_SHEET_COLUMNS + 1])
            self.row = None


class MarkdownParser(HTMLParser):
    """Feed it HTML; `take()` hands over the blocks made so far."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._blocks: list[Block] = []
        self._text: list[str] = []
        self._skip: list[str] = []
        self._lists: list[list[int]] = []  # per open list: [ordered (0/1), next number]
        self._marker = ""  # a list item's marker, for its first line
        self._tables: list[_Table] = []
        self._pre = 0
        self._heading = 0
        self._pending = 0
        self.seen = 0  # characters of text met so far

    def take(self) -> list[Block]:
        blocks, self._blocks = self._blocks, []
        return blocks

    def close(self) -> None:
        super().close()
        while self._tables:
            self._end_table()
        self._flush()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skip:
            if tag == self._skip[-1]:
                self._skip.append(tag)
            return
        if tag in _SKIP:
            self._skip.append(tag)
        elif tag == "br":
            self._add("\n")
        elif tag == "img":
            alt = dict(attrs).get("alt")
            if alt and alt.strip():
                self._add(f"[image: {alt.strip()}]")
        elif tag in ("td", "th") and self._tables:
            self._tables[-1].start_cell()
        elif tag == "tr" and self._tables:
            self._tables[-1].end_row()
            self._tables[-1].row = []
        elif tag == "table":
            self._block_edge()
            self._tables.append(_Table())
        elif self._in_cell():
            if tag in _BLOCKS or tag in _HEADINGS or tag in ("li", "pre"):
                self._add(" ")
        else:
            self._start_block(tag, attrs)

    def _start_block(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HEADINGS:
            self._flush()
            self._heading = _HEADINGS[tag]
        elif tag in ("ul", "ol"):
            self._flush()
            start = dict(attrs).get("start") or "1"
            self._lists.append([int(tag == "ol"), int(start) if start.isdigit() else 1])
        elif tag == "li":
            self._flush()
            if not self._lists:
                self._lists.append([0, 1])
            ordered, number = self._lists[-1]
            self._marker = f"{number}. " if ordered else "- "
            self._lists[-1][1] += 1
        elif tag == "pre":
            self._flush()
            self._pre += 1
        elif tag in _BLOCKS:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if self._skip:
            if tag == self._skip[-1]:
                self._skip.pop()
            return
        if tag in ("td", "th") and self._tables:
            self._tables[-1].end_cell()
        elif tag == "tr" and self._tables:
            self._tables[-1].end_row()
        elif tag == "table" and self._tables:
            self._end_table()
        elif self._in_cell():
            return
        elif tag in _HEADINGS:
            self._flush()
            self._heading = 0
        elif tag in ("ul", "ol"):
            self._flush()
            if self._lists:
                self._lists.pop()
        elif tag == "pre":
            self._flush()
            self._pre = max(self._pre - 1, 0)
        elif tag in _BLOCKS or tag == "li":
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        self._add(data if self._pre else _SPACE.sub(" ", data))

    def _add(self, text: str) -> None:
        self.seen += len(text)
        if self._in_cell():
            self._tables[-1].add(text)
            return
        self._text.append(text)
        self._pending += len(text)
        if self._pending > _SPILL:
            self._flush()

    def _in_cell(self) -> bool:
        return bool(self._tables) and self._tables[-1].cell is not None

    def _block_edge(self) -> None:
        if self._in_cell():
            self._add(" ")
        else:
            self._flush()

    def _end_table(self) -> None:
        done = self._tables.pop()
        done.end_row()
        rendered = table(done.rows)
        if self._in_cell():  # a table inside a table's cell: its text, on one line
            self._add(" " + " ".join(" ".join(row) for row in done.rows) + " ")
        elif rendered:
            self._blocks.append(Block(rendered))

    def _flush(self) -> None:
        raw = "".join(self._text)
        self._text = []
        self._pending = 0
        if self._pre:
            code = raw.strip("\n")
            if code.strip():
                fence = "````" if "```" in code else "```"
                self._blocks.append(Block(f"{fence}\n{code}\n{fence}"))
            return
        lines = [line.strip() for line in raw.split("\n")]
        text = "\n".join(line for line in lines if line)
        if not text:
            return
        if self._heading:
            self._blocks.append(heading(text, self._heading))
            return
        if self._lists:
            indent = "   " * (len(self._lists) - 1)
            first, *rest = text.split("\n")
            lead = self._marker or "  "
            text = "\n".join([indent + lead + first, *(indent + "  " + r for r in rest)])
            self._marker = ""
        self._blocks.append(Block(text))


def html_blocks(stream: TextIO, budget: Budget) -> Iterator[Block]:
    """Blocks as the page is read, a chunk at a time. Reading stops once twice the budget's
    text was met (a table can hold it all before it ends) or time is up, and says so."""
    parser = MarkdownParser()
    stopped = False
    while chunk := stream.read(_CHUNK):
        parser.feed(chunk)
        yield from parser.take()
        if parser.seen > 2 * budget.chars or budget.expired():
            stopped = bool(stream.read(1))
            break
    parser.close()
    yield from parser.take()
    if stopped:
        yield Block("[The rest of this page was not read.]")


def read(path: Path, budget: Budget) -> Reading:
    stream = open_text(path, html=True)
    return Reading("HTML", flow_sections(html_blocks(stream, budget), budget), close=stream.close)
