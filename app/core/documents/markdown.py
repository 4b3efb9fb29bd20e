"""Markdown pieces every format shares: tables, headings, and text split at its headings."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from app.core.documents.limits import MAX_SHEET_COLUMNS, MAX_SHEET_ROWS, Budget
from app.core.documents.model import Section

_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")


@dataclass(frozen=True)
class Block:
    """A paragraph, list item, table or heading of a flowing document, as Markdown."""

    text: str
    level: int = 0  # a heading's level; 0 for everything else
    title: str = ""  # a heading's words, for its section's label


def heading(title: str, level: int) -> Block:
    title = " ".join(title.split())
    if not title:
        return Block("")
    level = min(max(level, 1), 6)
    return Block(f"{'#' * level} {title}", level, title)


def cell(value: str) -> str:
    """One table cell on one line, its pipes escaped."""
    return " ".join(value.split()).replace("|", "\\|")


def table(rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table, the first row as its header; empty rows and trailing empty columns
    dropped. Past MAX_SHEET_ROWS rows or MAX_SHEET_COLUMNS columns it is cut and says so."""
    kept: list[list[str]] = []
    more_rows = False
    for row in rows:
        if len(kept) == MAX_SHEET_ROWS:
            more_rows = True
            break
        values = [cell(v) for v in row[: MAX_SHEET_COLUMNS + 1]]
        if any(values):
            kept.append(values)
    if not kept:
        return ""
    width = max((i + 1 for row in kept for i, v in enumerate(row) if v), default=0)
    more_columns = width > MAX_SHEET_COLUMNS
    width = min(width, MAX_SHEET_COLUMNS)
    kept = [row[:width] + [""] * (width - len(row)) for row in kept]
    lines = [_row(kept[0]), "|" + " --- |" * width]
    lines += [_row(row) for row in kept[1:]]
    if more_rows:
        lines.append(f"[Only the first {MAX_SHEET_ROWS:,} rows are shown.]")
    if more_columns:
        lines.append(f"[Only the first {MAX_SHEET_COLUMNS} columns are shown.]")
    return "\n".join(lines)


def _row(values: Sequence[str]) -> str:
    return "| " + " | ".join(values) + " |"


def inline(text: str) -> str:
    """Runs of spaces and tabs as one space, each line trimmed, blank lines collapsed."""
    lines = [_SPACES.sub(" ", line).strip() for line in text.splitlines()]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


def flow_sections(blocks: Iterable[Block], budget: Budget) -> Iterator[Section]:
    """Sections that start at each heading ('heading: Results'); what comes before the first
    one is 'beginning' (or 'text' when there is no heading at all). A section stops growing
    past the budget: the rest of the document is then left unread and it says so."""
    label = ""
    parts: list[str] = []
    size = 0
    for block in blocks:
        if not block.text.strip():
            continue
        if block.level:
            if parts:
                yield _flow_section(label, parts, headed=True)
            label, parts, size = f"heading: {block.title}", [], 0
        if size > budget.chars or budget.expired():
            yield _flow_section(label, parts, more="the rest of the document")
            return
        parts.append(block.text)
        size += len(block.text) + 2
    if parts:
        yield _flow_section(label, parts)


def _flow_section(label: str, parts: list[str], *, headed: bool = False, more: str = "") -> Section:
    # Text before the first heading is the document's 'beginning' once a heading follows.
    label = label or ("beginning" if headed else "text")
    return Section(label, "\n\n".join(parts), bare=True, more=more)
