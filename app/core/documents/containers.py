"""Zip containers (DOCX, XLSX, PPTX, ODT, EPUB) checked before any library unpacks them, and
the small XML files inside them parsed without entity tricks."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import IO
from xml.etree import ElementTree

from app.core.documents.detect import OLE_MAGIC
from app.core.documents.limits import (
    MAX_UNZIPPED_BYTES,
    MAX_XML_PART_BYTES,
    MAX_ZIP_MEMBERS,
    MAX_ZIP_RATIO,
    ZIP_RATIO_FLOOR,
)
from app.core.documents.model import DocumentError, fail

_NAMES = {"DOCX": ".docx", "XLSX": ".xlsx", "PPTX": ".pptx", "ODT": ".odt", "EPUB": ".epub"}


def open_checked(path: Path, kind: str) -> tuple[IO[bytes], zipfile.ZipFile]:
    """The open file and its archive, once the archive is known to unpack within limits."""
    fh = path.open("rb")
    try:
        try:
            archive = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, EOFError, ValueError):
            fh.seek(0)
            raise _not_a_zip(path, kind, fh.read(len(OLE_MAGIC))) from None
        check_archive(archive, path)
    except BaseException:
        fh.close()
        raise
    return fh, archive


def check_archive(archive: zipfile.ZipFile, path: Path) -> None:
    """Refuse what would unpack to too much (a zip bomb), by the sizes the archive declares
    (Python's zipfile never unpacks a member past its declared size)."""
    infos = archive.infolist()
    if len(infos) > MAX_ZIP_MEMBERS:
        raise fail(
            path,
            f"it holds {len(infos):,} parts, more than the {MAX_ZIP_MEMBERS:,} a document "
            "may have (damaged, or made to overload whatever opens it): do not open it",
        )
    unpacked = sum(info.file_size for info in infos)
    packed = sum(info.compress_size for info in infos)
    if unpacked > MAX_UNZIPPED_BYTES:
        raise _bomb(path, f"it would unpack to {size_words(unpacked)}")
    for info in infos:
        if _too_compressed(info.file_size, info.compress_size):
            raise _bomb(path, f"one part would unpack to {size_words(info.file_size)}")
    if _too_compressed(unpacked, packed):
        raise _bomb(path, f"it would unpack to {size_words(unpacked)}")
    for info in infos:
        if info.file_size > MAX_XML_PART_BYTES and _parsed_whole(info.filename):
            raise fail(
                path,
                f"one part of it ({info.filename}) is {size_words(info.file_size)} of markup, "
                f"more than the {size_words(MAX_XML_PART_BYTES)} Deskhand reads at once: "
                "split it into smaller files",
            )


def _parsed_whole(name: str) -> bool:
    """Markup a library parses in one piece (worksheets are read row by row instead)."""
    lower = name.lower()
    if lower.startswith("xl/worksheets/"):
        return False
    return lower.endswith((".xml", ".rels", ".xhtml", ".html", ".htm", ".opf", ".ncx"))


def _too_compressed(unpacked: int, packed: int) -> bool:
    return unpacked > ZIP_RATIO_FLOOR and unpacked > MAX_ZIP_RATIO * max(packed, 1)


def _bomb(path: Path, what: str) -> DocumentError:
    return fail(
        path,
        f"{what} from {size_words(path.stat().st_size)} on disk, more than a document "
        f"should (at most {size_words(MAX_UNZIPPED_BYTES)}, at most {MAX_ZIP_RATIO} times "
        "its packed size): it looks like a zip bomb, so it was not opened. If you trust it, "
        "copy the text you need into a new file",
    )


def _not_a_zip(path: Path, kind: str, head: bytes) -> DocumentError:
    ext = _NAMES.get(kind, kind)
    if head.startswith(OLE_MAGIC):
        return fail(
            path,
            f"it is password-protected or in an older format, not {ext}: open it and save a "
            f"copy as {ext} without a password",
        )
    return fail(
        path,
        f"it is damaged or incomplete (not a valid {ext} file): open it in the program that "
        "made it and save it again",
    )


def read_member(archive: zipfile.ZipFile, name: str, path: Path, what: str) -> bytes:
    """One part of the archive, or a plain error naming what is missing."""
    try:
        return archive.read(name)
    except KeyError:
        raise fail(
            path, f"it is damaged or incomplete: its {what} is missing. Save it again"
        ) from None


def parse_xml(data: bytes, path: Path) -> ElementTree.Element:
    """An XML part, refused if it declares entities (they could expand without end)."""
    if b"<!ENTITY" in data:
        raise fail(path, "it declares XML entities, which documents never need: not opened")
    return ElementTree.fromstring(data)


def size_words(n: int) -> str:
    """'3.2 MB', '410 kB', '12 bytes'."""
    if n >= 1024 * 1024 * 1024:
        return f"{n / 1024**3:.1f} GB"
    if n >= 1024 * 1024:
        return f"{n // 1024**2} MB" if n % 1024**2 == 0 else f"{n / 1024**2:.1f} MB"
    if n >= 1024:
        return f"{n // 1024:,} kB"
    return f"{n} bytes"
