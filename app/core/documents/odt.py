"""OpenDocument text: content.xml read with the standard library, headings, lists and tables
kept as Markdown."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from xml.etree.ElementTree import Element

from app.core.documents.containers import open_checked, parse_xml, read_member
from app.core.documents.limits import MAX_SHEET_COLUMNS, MAX_SHEET_ROWS, Budget
from app.core.documents.markdown import Block, flow_sections, heading, inline, table
from app.core.documents.model import ENCRYPTED, Reading, fail

_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_SKIP = {f"{_TEXT}note", f"{_TEXT}tracked-changes", f"{_OFFICE}annotation"}
_ROW_GROUPS = {f"{_TABLE}table-header-rows", f"{_TABLE}table-rows", f"{_TABLE}table-row-group"}


def read(path: Path, budget: Budget) -> Reading:
    fh, archive = open_checked(path, "ODT")
    try:
        manifest = read_member(archive, "META-INF/manifest.xml", path, "list of parts")
        if b"encryption-data" in manifest:
            raise fail(path, ENCRYPTED)
        root = parse_xml(read_member(archive, "content.xml", path, "content"), path)
    finally:
        archive.close()
        fh.close()
    body = root.find(f"{_OFFICE}body/{_OFFICE}text")
    if body is None:
        raise fail(path, "it is not a text document (no text body inside): save it as .odt")
    return Reading("ODT", flow_sections(_blocks(body), budget))


def _blocks(element: Element) -> Iterator[Block]:
    for child in element:
        tag = child.tag
        if tag == f"{_TEXT}h":
            level = child.get(f"{_TEXT}outline-level", "1")
            yield heading(_inline(child), int(level) if level.isdigit() else 1)
        elif tag == f"{_TEXT}p":
            yield Block(inline(_inline(child)))
        elif tag == f"{_TEXT}list":
            yield from _list(child, 0)
        elif tag == f"{_TABLE}table":
            yield Block(table(_rows(child)))
        elif tag not in _SKIP:
            yield from _blocks(child)  # sections, frames and other wrappers


def _list(element: Element, depth: int) -> Iterator[Block]:
    indent = "   " * depth
    for item in element:
        lead = "- "
        for child in item:
            if child.tag == f"{_TEXT}list":
                yield from _list(child, depth + 1)
            elif child.tag in (f"{_TEXT}p", f"{_TEXT}h"):
                text = inline(_inline(child))
                if text:
                    yield Block(indent + lead + text.replace("\n", "\n" + indent + "  "))
                    lead = "  "


def _rows(element: Element) -> Iterator[list[str]]:
    for child in element:
        if child.tag in _ROW_GROUPS:
            yield from _rows(child)
        elif child.tag == f"{_TABLE}table-row":
            row = _cells(child)
            repeat = _repeat(child, "rows") if any(row) else 1
            for _ in range(min(repeat, MAX_SHEET_ROWS)):
                yield row


def _cells(row: Element) -> list[str]:
    cells: list[str] = []
    for cell in row:
        if len(cells) > MAX_SHEET_COLUMNS:
            break
        text = " ".join(inline(_inline(p)) for p in cell if p.tag in (f"{_TEXT}p", f"{_TEXT}h"))
        cells += [text] * min(_repeat(cell, "columns"), MAX_SHEET_COLUMNS + 1)
    return cells


def _repeat(element: Element, what: str) -> int:
    value = element.get(f"{_TABLE}number-{what}-repeated", "1")
    return int(value) if value.isdigit() else 1


def _inline(element: Element) -> str:
    """The words of a paragraph: spans, links and spacing elements included, notes not."""
    parts = [element.text or ""]
    for child in element:
        tag = child.tag
        if tag == f"{_TEXT}s":
            count = child.get(f"{_TEXT}c", "1")
            parts.append(" " * min(int(count) if count.isdigit() else 1, 100))
        elif tag == f"{_TEXT}tab":
            parts.append("\t")
        elif tag == f"{_TEXT}line-break":
            parts.append("\n")
        elif tag not in _SKIP:
            parts.append(_inline(child))
        parts.append(child.tail or "")
    return "".join(parts)
