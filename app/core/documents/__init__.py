"""Documents as text for the model: PDF, Word, Excel, CSV/TSV, PowerPoint, OpenDocument
text, HTML, EPUB, Markdown and plain text, with their structure kept (pages, sheets, slides,
headings, tables) and every failure in plain words.

Light to import: each format's library loads only when a file of that format is read."""

from __future__ import annotations

from app.core.documents.detect import SUPPORTED, SUPPORTED_WORDS, supported
from app.core.documents.limits import DEFAULT_MAX_CHARS, MAX_FILE_BYTES
from app.core.documents.model import DocumentError, DocumentText, Section
from app.core.documents.reader import read_document

__all__ = [
    "DEFAULT_MAX_CHARS",
    "MAX_FILE_BYTES",
    "SUPPORTED",
    "SUPPORTED_WORDS",
    "DocumentError",
    "DocumentText",
    "Section",
    "read_document",
    "supported",
]
