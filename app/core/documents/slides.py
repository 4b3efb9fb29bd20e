"""PowerPoint (python-pptx): per slide its title, text, bullet points and tables, top to
bottom, then the speaker's notes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from app.core.documents.containers import open_checked
from app.core.documents.limits import Budget
from app.core.documents.markdown import inline, table
from app.core.documents.model import Reading, Section

if TYPE_CHECKING:
    from pptx.presentation import Presentation
    from pptx.shapes.base import BaseShape
    from pptx.slide import Slide
    from pptx.text.text import TextFrame


def read(path: Path, budget: Budget) -> Reading:
    fh, archive = open_checked(path, "PPTX")
    archive.close()
    try:
        import pptx

        presentation = pptx.Presentation(fh)
    finally:
        fh.close()
    return Reading("PPTX", _slides(presentation), "slide", len(presentation.slides))


def _slides(presentation: Presentation) -> Iterator[Section]:
    for number, slide in enumerate(presentation.slides, 1):
        yield Section(f"slide {number}", _slide(slide))


def _slide(slide: Slide) -> str:
    parts = list(_shapes(slide.shapes))
    if slide.has_notes_slide:
        notes = slide.notes_slide.notes_text_frame
        if notes is not None and (said := inline(notes.text)):
            parts.append("Notes: " + said)
    return "\n\n".join(p for p in parts if p.strip())


def _shapes(shapes: Iterable[BaseShape]) -> Iterator[str]:
    from pptx.enum.shapes import PP_PLACEHOLDER
    from pptx.shapes.autoshape import Shape
    from pptx.shapes.graphfrm import GraphicFrame
    from pptx.shapes.group import GroupShape

    titles = {PP_PLACEHOLDER.TITLE, PP_PLACEHOLDER.CENTER_TITLE}
    bulleted = {PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT}
    for shape in sorted(shapes, key=lambda s: (s.top or 0, s.left or 0)):
        if isinstance(shape, GroupShape):
            yield from _shapes(shape.shapes)
        elif isinstance(shape, GraphicFrame) and shape.has_table:
            yield table([cell.text for cell in row.cells] for row in shape.table.rows)
        elif isinstance(shape, Shape) and shape.has_text_frame:
            kind = shape.placeholder_format.type if shape.is_placeholder else None
            if kind in titles:
                title = " ".join(shape.text_frame.text.split())
                yield f"### {title}" if title else ""
            else:
                yield _text(shape.text_frame, bullets=kind in bulleted)


def _text(frame: TextFrame, *, bullets: bool) -> str:
    lines = []
    for paragraph in frame.paragraphs:
        text = inline(paragraph.text.replace("\v", "\n"))
        if not text:
            continue
        if bullets:
            indent = "   " * paragraph.level
            text = indent + "- " + text.replace("\n", "\n" + indent + "  ")
        lines.append(text)
    return "\n".join(lines)
