"""EPUB books: the chapters in their reading order (the OPF spine), each read as HTML."""

from __future__ import annotations

import io
import posixpath
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote
from zipfile import ZipFile

from app.core.documents.containers import open_checked, parse_xml, read_member
from app.core.documents.htmltext import html_blocks
from app.core.documents.limits import Budget
from app.core.documents.model import Reading, Section, fail
from app.core.documents.plaintext import decode

_CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_OPF = "{http://www.idpf.org/2007/opf}"
_ENC = "{http://www.w3.org/2001/04/xmlenc#}"
_PAGES = {"application/xhtml+xml", "text/html"}


def read(path: Path, budget: Budget) -> Reading:
    fh, archive = open_checked(path, "EPUB")
    try:
        chapters = _spine(archive, path)
        _refuse_drm(archive, path, set(chapters))
    except BaseException:
        archive.close()
        fh.close()
        raise

    def close() -> None:
        archive.close()
        fh.close()

    sections = _chapters(archive, chapters, path, budget)
    return Reading("EPUB", sections, "chapter", len(chapters), close)


def _spine(archive: ZipFile, path: Path) -> list[str]:
    """The archive names of the book's pages in reading order."""
    container = parse_xml(
        read_member(archive, "META-INF/container.xml", path, "table of parts"), path
    )
    rootfile = container.find(f"{_CONTAINER}rootfiles/{_CONTAINER}rootfile")
    opf_name = rootfile.get("full-path", "") if rootfile is not None else ""
    if not opf_name:
        raise fail(path, "it is damaged: it does not say where its contents are. Get it again")
    opf = parse_xml(read_member(archive, opf_name, path, "list of contents"), path)
    base = posixpath.dirname(opf_name)
    items = {
        item.get("id", ""): (item.get("href", ""), item.get("media-type", ""))
        for item in opf.iter(f"{_OPF}item")
    }
    pages = []
    for ref in opf.iter(f"{_OPF}itemref"):
        href, media = items.get(ref.get("idref", ""), ("", ""))
        if href and media in _PAGES:
            pages.append(posixpath.normpath(posixpath.join(base, unquote(href.split("#")[0]))))
    if not pages:
        raise fail(path, "it lists no chapters to read: it may be damaged. Get it again")
    return pages


def _refuse_drm(archive: ZipFile, path: Path, pages: set[str]) -> None:
    """Chapters encrypted by DRM (fonts obfuscated by the publisher are fine)."""
    try:
        data = archive.read("META-INF/encryption.xml")
    except KeyError:
        return
    for ref in parse_xml(data, path).iter(f"{_ENC}CipherReference"):
        if unquote(ref.get("URI", "")) in pages:
            raise fail(
                path,
                "it is protected by DRM: Deskhand can read only books without copy protection",
            )


def _chapters(
    archive: ZipFile, chapters: list[str], path: Path, budget: Budget
) -> Iterator[Section]:
    for number, name in enumerate(chapters, 1):
        html = decode(read_member(archive, name, path, f"chapter {number}"), html=True)
        parts: list[str] = []
        size = 0
        more = ""
        for block in html_blocks(io.StringIO(html), budget):
            if size > budget.chars or budget.expired():
                more = "the rest of this chapter"
                break
            parts.append(block.text)
            size += len(block.text) + 2
        yield Section(f"chapter {number}", "\n\n".join(parts), more=more)
