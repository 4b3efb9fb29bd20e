"""Plain text and Markdown, and the decoding every text format shares: UTF-8 (with or without
a BOM), UTF-16 by its BOM, else Windows-1252 so any byte still reads as something."""

from __future__ import annotations

import codecs
import io
import re
from collections.abc import Iterator
from pathlib import Path

from app.core.documents.containers import size_words
from app.core.documents.detect import looks_like_text
from app.core.documents.limits import Budget
from app.core.documents.markdown import Block, flow_sections, heading
from app.core.documents.model import Reading, Section, fail

_SAMPLE = 64 * 1024
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+|$)(.*)")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.I)


def encoding_of(head: bytes, *, html: bool = False) -> str:
    """The encoding the first bytes show (an HTML page's own <meta charset> first)."""
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    if html and (found := _META_CHARSET.search(head[:4096])):
        try:
            return codecs.lookup(found.group(1).decode("ascii")).name
        except LookupError:
            pass
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return "cp1252"
    return "utf-8"


def decode(data: bytes, *, html: bool = False) -> str:
    """Bytes held in memory (a part of an EPUB) as text."""
    return data.decode(encoding_of(data[:_SAMPLE], html=html), errors="replace")


def open_text(path: Path, *, html: bool = False) -> io.TextIOWrapper:
    """The file as text, newlines untouched (the csv module wants them so); refused when it
    looks binary."""
    fh = path.open("rb")
    try:
        head = fh.read(_SAMPLE)
        fh.seek(0)
        if not looks_like_text(head):
            raise fail(
                path,
                "it looks like a binary file, not text: attach it only if it is one of the "
                "document types Deskhand reads, under its usual name",
            )
    except BaseException:
        fh.close()
        raise
    return io.TextIOWrapper(fh, encoding_of(head, html=html), errors="replace", newline="")


def read(path: Path, budget: Budget, kind: str) -> Reading:
    """A text or Markdown file, read up to the budget."""
    with open_text(path) as stream:
        text = stream.read(budget.chars)
        more = ""
        if stream.read(1):
            left = max(path.stat().st_size - len(text.encode(stream.encoding, "replace")), 0)
            more = "the rest of the file" + (f" (about {size_words(left)})" if left else "")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if kind == "Markdown":
        sections = list(flow_sections(markdown_blocks(text), budget))
        if more and sections and not sections[-1].more:
            last = sections[-1]
            sections[-1] = Section(last.label, last.text, last.bare, more)
    else:
        sections = [Section("text", text, bare=True, more=more)]
    return Reading(kind, iter(sections))


def _title(text: str) -> str:
    """A heading's words without its closing run of #s ('C#' keeps its #)."""
    text = text.rstrip(" \t")
    bare = text.rstrip("#")
    return bare.rstrip(" \t") if not bare or bare.endswith((" ", "\t")) else text


def markdown_blocks(text: str) -> Iterator[Block]:
    """The text as it is, split before each heading outside code fences."""
    lines: list[str] = []
    fence = ""
    for line in text.split("\n"):
        marker = _FENCE.match(line)
        if marker and (not fence or marker.group(1) == fence):
            fence = "" if fence else marker.group(1)
        found = None if fence else _ATX.fullmatch(line)
        if found:
            if lines:
                yield Block("\n".join(lines).strip("\n"))
            lines = []
            yield heading(_title(found.group(2)), len(found.group(1)))
        else:
            lines.append(line)
    if lines:
        yield Block("\n".join(lines).strip("\n"))
