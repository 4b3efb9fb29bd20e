"""PDF through PDFium (pypdfium2): the text layer, page by page.

A page without a text layer (a scan) is read by text recognition when a local tesseract is
installed: PDFium renders the page to a grey bitmap and tesseract reads that bitmap from its
standard input, so the OCR engine never parses the file itself. Deskhand bundles no OCR.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.core.documents.limits import MAX_PDF_PAGES, Budget
from app.core.documents.model import (
    ENCRYPTED,
    WRONG_PASSWORD,
    DocumentError,
    Reading,
    Section,
    fail,
)

#: PDFium may not be called from two threads at once, not even for two documents.
_PDFIUM = threading.Lock()
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\ufffe\ufeff]")

NO_TEXT = (
    "it has no text layer (a scan?): attach its pages as images, or run it through text "
    "recognition (OCR) first; with tesseract installed Deskhand does that itself"
)
#: Scans are read at this resolution; tesseract does best at about 300 dpi.
OCR_DPI = 300
#: A page is rendered for text recognition at no more pixels than this (25 MB of grey: an
#: A3 page still gets its 300 dpi); a larger page (a poster, a page size a file made up)
#: is rendered smaller, so its bitmap cannot take gigabytes.
MAX_OCR_PIXELS = 25_000_000
#: A page of text recognition takes seconds: past this many pages the rest is left unread.
MAX_OCR_PAGES = 50
OCR_SECONDS = 60


def read(path: Path, budget: Budget, password: str | None = None) -> Reading:
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
        document = pdfium.PdfDocument(fh, password=password or None)
        total = len(document)
    except BaseException as exc:
        _PDFIUM.release()
        fh.close()
        if isinstance(exc, pdfium.PdfiumError):
            raise _load_error(path, exc.err_code, password) from None
        raise

    def close() -> None:
        try:
            document.close()
        finally:
            _PDFIUM.release()
            fh.close()

    return Reading("PDF", _pages(document, total), "page", total, close)


def _load_error(path: Path, code: int | None, password: str | None) -> DocumentError:
    import pypdfium2.raw as pdfium_c

    if code == pdfium_c.FPDF_ERR_PASSWORD:
        return fail(path, WRONG_PASSWORD if password else ENCRYPTED, needs_password=True)
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
    recognised = 0
    for index in range(min(total, MAX_PDF_PAGES)):
        more = ""
        if index + 1 == MAX_PDF_PAGES < total:
            more = f"pages {MAX_PDF_PAGES + 1:,}–{total:,} (a PDF is read up to its first "
            more += f"{MAX_PDF_PAGES:,} pages)"
        text = _page_text(document, index)
        if not text and recognised < MAX_OCR_PAGES and (tesseract := ocr_engine()):
            recognised += 1
            text = _recognise(document, index, tesseract)
        yield Section(f"page {index + 1}", text, more=more)


def ocr_engine() -> str | None:
    """The local tesseract program, if installed."""
    return shutil.which("tesseract")


def _recognise(document: Any, index: int, tesseract: str) -> str:
    """A scanned page's text by OCR ("" when tesseract fails or finds none)."""
    page = document[index]
    try:
        bitmap = page.render(scale=ocr_scale(*page.get_size()), grayscale=True)
        try:
            image = _pgm(bytes(bitmap.buffer), bitmap.width, bitmap.height, bitmap.stride)
        finally:
            bitmap.close()
    finally:
        page.close()
    # PDFium is idle while tesseract works: let other readings use it meanwhile.
    _PDFIUM.release()
    try:
        done = subprocess.run(
            [tesseract, "stdin", "stdout"],
            input=image,
            capture_output=True,
            timeout=OCR_SECONDS,
            env={**os.environ, "OMP_THREAD_LIMIT": "1"},  # leave a core to the window
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    finally:
        _PDFIUM.acquire()
    if done.returncode != 0:
        return ""
    return _CONTROL.sub("", done.stdout.decode("utf-8", "replace")).strip()


def ocr_scale(width: float, height: float) -> float:
    """Pixels per point to render a page of this size (in points) at: OCR_DPI, or less
    where that would pass MAX_OCR_PIXELS."""
    scale = OCR_DPI / 72
    area = max(width, 1.0) * max(height, 1.0)
    return min(scale, math.sqrt(MAX_OCR_PIXELS / area))


def _pgm(pixels: bytes, width: int, height: int, stride: int) -> bytes:
    """A grey bitmap as a binary PGM image, the simplest format tesseract reads."""
    rows = b"".join(pixels[row * stride : row * stride + width] for row in range(height))
    return b"P5\n%d %d\n255\n" % (width, height) + rows


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
