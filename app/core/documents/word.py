"""Word documents (python-docx): paragraphs and tables in their order, headings and lists kept
as Markdown."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from app.core.documents.containers import open_checked
from app.core.documents.limits import Budget
from app.core.documents.markdown import Block, flow_sections, heading, inline, table
from app.core.documents.model import Reading

if TYPE_CHECKING:
    from docx.document import Document
    from docx.text.paragraph import Paragraph

_LEVEL = re.compile(r"(\d+)\s*$")


def read(path: Path, budget: Budget) -> Reading:
    fh, archive = open_checked(path, "DOCX")
    archive.close()
    try:
        import docx

        document = docx.Document(fh)
    finally:
        fh.close()
    return Reading("DOCX", flow_sections(_blocks(document), budget))


def _blocks(document: Document) -> Iterator[Block]:
    from docx.table import Table

    for item in document.iter_inner_content():
        if isinstance(item, Table):
            yield Block(table([cell.text for cell in row.cells] for row in item.rows))
        else:
            yield _paragraph(item)


def _paragraph(paragraph: Paragraph) -> Block:
    style = paragraph.style.name if paragraph.style is not None else ""
    style = style or ""
    text = inline(paragraph.text)
    if style == "Title":
        return heading(text, 1)
    if style.startswith("Heading") and (level := _LEVEL.search(style)):
        return heading(text, int(level.group(1)))
    if style.startswith("List") or _numbered(paragraph):
        found = _LEVEL.search(style)
        indent = "   " * (int(found.group(1)) - 1 if found else 0)
        marker = "1." if "Number" in style else "-"
        return Block(indent + f"{marker} " + text.replace("\n", "\n" + indent + "  "))
    return Block(text)


def _numbered(paragraph: Paragraph) -> bool:
    """A list paragraph by direct numbering rather than by a list style."""
    properties = paragraph._p.pPr
    return properties is not None and properties.numPr is not None
