"""Which kind of document a file is: by its extension, and by its first bytes where that is
cheap (a PDF or an Office file saved without an extension)."""

from __future__ import annotations

import codecs
import zipfile
from pathlib import Path

_TEXT = (".txt", ".text", ".log", ".rst", ".json", ".yaml", ".yml", ".toml", ".ini")
#: For file dialogs and messages: a description and its name patterns.
SUPPORTED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("PDF", ("*.pdf",)),
    ("Word", ("*.docx",)),
    ("Excel", ("*.xlsx", "*.xlsm")),
    ("CSV and TSV", ("*.csv", "*.tsv", "*.tab")),
    ("PowerPoint", ("*.pptx",)),
    ("OpenDocument text", ("*.odt",)),
    ("HTML", ("*.html", "*.htm", "*.xhtml")),
    ("EPUB", ("*.epub",)),
    ("Markdown", ("*.md", "*.markdown")),
    ("Text", tuple(f"*{ext}" for ext in _TEXT)),
)
#: The same in words, for messages.
SUPPORTED_WORDS = (
    "PDF, Word (.docx), Excel (.xlsx), CSV, TSV, PowerPoint (.pptx), OpenDocument text "
    "(.odt), HTML, EPUB, Markdown and plain text"
)

#: Extension -> kind, the name `DocumentText.kind` carries.
EXTENSIONS: dict[str, str] = {
    ".pdf": "PDF",
    ".docx": "DOCX",
    ".xlsx": "XLSX",
    ".xlsm": "XLSX",
    ".csv": "CSV",
    ".tsv": "TSV",
    ".tab": "TSV",
    ".pptx": "PPTX",
    ".odt": "ODT",
    ".html": "HTML",
    ".htm": "HTML",
    ".xhtml": "HTML",
    ".epub": "EPUB",
    ".md": "Markdown",
    ".markdown": "Markdown",
    **dict.fromkeys(_TEXT, "Text"),
}
#: Formats Deskhand does not read, with what to do instead.
OTHER_FORMATS = {
    ".doc": "the old Word format (.doc): save it as .docx",
    ".xls": "the old Excel format (.xls): save it as .xlsx",
    ".ppt": "the old PowerPoint format (.ppt): save it as .pptx",
    ".rtf": "RTF: save it as .docx",
    ".ods": "an OpenDocument spreadsheet (.ods): save it as .xlsx",
    ".odp": "an OpenDocument presentation (.odp): save it as .pptx",
}
ZIP_MAGIC = b"PK\x03\x04"
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # old Office files, and encrypted new ones
_ZIP_MIMETYPES = {
    b"application/vnd.oasis.opendocument.text": "ODT",
    b"application/epub+zip": "EPUB",
}
_ZIP_MARKERS = {
    "word/document.xml": "DOCX",
    "xl/workbook.xml": "XLSX",
    "ppt/presentation.xml": "PPTX",
}
_HEAD = 8192


def supported(path: Path) -> bool:
    """Whether `read_document` can read this file: by extension, else by its first bytes."""
    try:
        return kind_of(path) is not None
    except OSError:
        return False


def kind_of(path: Path) -> str | None:
    """The file's kind, or None when it is none Deskhand reads."""
    suffix = path.suffix.lower()
    if suffix in EXTENSIONS:
        return EXTENSIONS[suffix]
    if suffix in OTHER_FORMATS or not path.is_file():
        return None
    with path.open("rb") as fh:
        head = fh.read(_HEAD)
    return sniff(path, head)


def sniff(path: Path, head: bytes) -> str | None:
    """The kind the first bytes show: a PDF, an Office or ODT/EPUB zip, HTML, or text."""
    if b"%PDF-" in head[:1024]:
        return "PDF"
    if head.startswith(ZIP_MAGIC):
        return _zip_kind(path)
    start = head.lstrip()[:20].lower()
    if start.startswith((b"<!doctype html", b"<html")):
        return "HTML"
    return "Text" if looks_like_text(head) else None


def _zip_kind(path: Path) -> str | None:
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            if "mimetype" in names and zf.getinfo("mimetype").file_size < 100:
                return _ZIP_MIMETYPES.get(zf.read("mimetype").strip())
    except (zipfile.BadZipFile, OSError, ValueError):
        return None
    return next((kind for marker, kind in _ZIP_MARKERS.items() if marker in names), None)


def looks_like_text(head: bytes) -> bool:
    """Text, not binary: a Unicode BOM, or no NUL and next to no control characters."""
    if head.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return True
    if b"\0" in head:
        return False
    controls = sum(1 for b in head if b < 32 and b not in b"\t\n\r\f\x1b")
    return controls <= len(head) // 100
