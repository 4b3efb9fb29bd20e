"""`read_document`: check a file (its size, its kind), hand it to its format's reader, gather
sections until the budget is spent, and turn every failure into a DocumentError."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

from app.core.documents.containers import size_words
from app.core.documents.detect import OTHER_FORMATS, SUPPORTED_WORDS, kind_of
from app.core.documents.limits import (
    DEFAULT_MAX_CHARS,
    MAX_FILE_BYTES,
    MAX_READ_SECONDS,
    Budget,
)
from app.core.documents.model import (
    DocumentError,
    DocumentText,
    Reading,
    Section,
    fail,
    units_range,
)

log = logging.getLogger(__name__)
#: Kinds whose file may hold no text at all without anything being wrong.
_MAY_BE_EMPTY = {"Text", "Markdown", "CSV", "TSV"}


def read_document(
    path: Path,
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    time_limit: float = MAX_READ_SECONDS,
    password: str | None = None,
) -> DocumentText:
    """The file's text with its structure kept, reading no more than about `max_chars`
    characters and for no longer than `time_limit` seconds. Blocking: call it off the GUI
    thread. Raises DocumentError, whose message is for the user (`needs_password` when an
    encrypted PDF would open with its password: ask, then call again with `password`)."""
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    kind = _check(path)
    budget = Budget.start(max_chars, time_limit)
    try:
        reading = _open(kind, path, budget, password)
        try:
            document = _gather(reading, path, budget)
        finally:
            reading.close()
    except DocumentError:
        raise
    except MemoryError:
        raise fail(path, "it is too large to read into memory: attach a smaller part") from None
    except OSError as exc:
        raise fail(path, f"it could not be read ({exc.strerror or exc})") from exc
    except Exception as exc:  # a parser given a damaged file may raise anything
        log.info("could not read a %s file", kind, exc_info=True)
        raise fail(
            path,
            f"it is damaged or not really {_article(kind)} file: open it in the program that "
            "made it and save it again",
        ) from exc
    if not any(s.text.strip() for s in document.sections) and kind not in _MAY_BE_EMPTY:
        if kind == "PDF":
            from app.core.documents.pdf import NO_TEXT

            raise fail(path, NO_TEXT)
        raise fail(path, "it has no text in it: check that it is the file you meant")
    return document


def _check(path: Path) -> str:
    """The file's kind, once it is known to be a readable file of a size and kind we read."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise fail(path, "there is no such file (moved or deleted?): pick it again") from None
    except OSError as exc:
        raise fail(path, f"it cannot be opened ({exc.strerror or exc})") from exc
    if stat.S_ISDIR(info.st_mode):
        raise fail(path, "it is a folder, not a document: pick the files in it instead")
    if not stat.S_ISREG(info.st_mode):
        raise fail(path, "it is not a regular file (a device or a pipe?): pick a document")
    if info.st_size > MAX_FILE_BYTES:
        raise fail(
            path,
            f"it is {size_words(info.st_size)}, more than the {size_words(MAX_FILE_BYTES)} "
            "Deskhand reads from one file: attach a smaller part of it (a few pages or one "
            "sheet saved as a new file)",
        )
    try:
        kind = kind_of(path)
    except OSError as exc:
        raise fail(path, f"it cannot be read ({exc.strerror or exc})") from exc
    if kind is None:
        suffix = path.suffix.lower()
        if suffix in OTHER_FORMATS:
            raise fail(path, f"it is {OTHER_FORMATS[suffix]}. Deskhand reads {SUPPORTED_WORDS}")
        named = f" ({suffix} files)" if suffix else ""
        raise fail(
            path, f"Deskhand cannot read this kind of file{named}. It reads {SUPPORTED_WORDS}"
        )
    return kind


def _open(kind: str, path: Path, budget: Budget, password: str | None = None) -> Reading:
    """The format's reader; each imports its library only now."""
    if kind == "PDF":
        from app.core.documents import pdf

        return pdf.read(path, budget, password)
    if kind == "DOCX":
        from app.core.documents import word

        return word.read(path, budget)
    if kind == "XLSX":
        from app.core.documents import spreadsheet

        return spreadsheet.read_xlsx(path, budget)
    if kind in ("CSV", "TSV"):
        from app.core.documents import spreadsheet

        return spreadsheet.read_delimited(path, budget, kind)
    if kind == "PPTX":
        from app.core.documents import slides

        return slides.read(path, budget)
    if kind == "ODT":
        from app.core.documents import odt

        return odt.read(path, budget)
    if kind == "HTML":
        from app.core.documents import htmltext

        return htmltext.read(path, budget)
    if kind == "EPUB":
        from app.core.documents import epub

        return epub.read(path, budget)
    from app.core.documents import plaintext

    return plaintext.read(path, budget, kind)


def _gather(reading: Reading, path: Path, budget: Budget) -> DocumentText:
    """Sections until the budget is spent; what was never reached is named."""
    sections: list[Section] = []
    size = 0
    not_read = ""
    for section in reading.sections:
        if sections and (size > budget.chars or budget.expired()):
            if reading.unit and reading.total is not None:
                not_read = units_range(reading.unit, len(sections) + 1, reading.total)
            else:
                not_read = f"everything from {section.label} on"
            if budget.expired():
                not_read += " (reading took too long)"
            break
        sections.append(section)
        size += len(section.text)
    return DocumentText(
        path.name,
        reading.kind,
        tuple(sections),
        budget.chars,
        reading.unit,
        reading.total,
        not_read,
    )


def _article(kind: str) -> str:
    """'an XLSX', 'a PDF', 'a Markdown'."""
    vowel_sound = kind[0] in ("AEFHILMNORSX" if kind.isupper() else "AEIOU")
    return f"an {kind}" if vowel_sound else f"a {kind}"
