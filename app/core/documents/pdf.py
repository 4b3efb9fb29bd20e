"""PDF through PDFium (pypdfium2): the text layer, page by page."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.core.documents.limits import MAX_PDF_PAGES, Budget
from app.core.documents.model import ENCRYPTED, DocumentError, Reading, Section, fail

#: PDFium may not be called from two threads at once, not even for two documents.
_PDFIUM = threading.Lock()
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\ufffe\ufeff]")

NO_TEXT = (
    "it has no text layer (a scan?): attach its pages as images, or run it through text "
    "recognition (OCR) first"
)


def read(path: Path, budget: Budget) -> Reading:
    fh = path.open("rb")  # a file object, not the path: PDFium's own open fails on
    try:  # names outside ASCII on Windows
        if b"%PDF-" not in fh.read(1024):
            raise fail(
                path,
                "it is not a PDF inside (damaged, or another kind of file named .pdf): open "
                "it in the program that made it and save it as PDF again",
            )
        fh.seek(0)
        import pypdfium2 as pdfium
    except BaseException:
        fh.close()
        raise
    _PDFIUM.acquire()
    try:
        document = pdfium.PdfDocument(fh)
        total = len(document)
    except BaseException as exc:
        _PDFIUM.release()
        fh.close()
        if isinstance(exc, pdfium.PdfiumError):
            raise _load_error(path, exc.err_code) from None
        raise

    def close() -> None:
        try:
            document.close()
        finally:
            _PDFIUM.release()
            fh.close()

    return Reading("PDF", _pages(document, total), "page", total, close)


def _load_error(path: Path, code: int | None) -> DocumentError:
    import pypdfium2.raw as pdfium_c

    if code == pdfium_c.FPDF_ERR_PASSWORD:
        return fail(path, ENCRYPTED)
    if code == pdfium_c.FPDF_ERR_SECURITY:
        return fail(
            path,
            "it is protected in a way Deskhand cannot open: save a copy without protection",
        )
    return fail(
        path,
        "it is damaged or incomplete: open it in a PDF viewer and save a copy, or download "
        "it again",
    )


def _pages(document: Any, total: int) -> Iterator[Section]:
    for index in range(min(total, MAX_PDF_PAGES)):
        more = ""
        if index + 1 == MAX_PDF_PAGES < total:
            more = f"pages {MAX_PDF_PAGES + 1:,}–{total:,} (a PDF is read up to its first "
            more += f"{MAX_PDF_PAGES:,} pages)"
        yield Section(f"page {index + 1}", _page_text(document, index), more=more)


def _page_text(document: Any, index: int) -> str:
    page = document[index]
    try:
        textpage = page.get_textpage()
        try:
            raw = str(textpage.get_text_range())
        finally:
            textpage.close()
    finally:
        page.close()
    text = raw.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", text).strip()
