"""A document cut into passages small enough to embed and to quote, each knowing where in
the document it is.

Sections (pages, sheets, slides, headings) are never mixed in one chunk: a chunk's location
is its section's label. Inside a section, paragraphs are packed up to about `size`
characters; a longer paragraph is cut at line ends, then sentence ends, then between words,
never inside a word. Table rows stay whole, and a table that runs on into the next chunk
repeats its header there (a header of more than half a chunk is not repeated: the chunks
of a document stay about as large as its text). Consecutive chunks of running text share
about `overlap` characters, so a sentence cut by a chunk boundary is found whole in one of
them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from app.core.documents.model import DocumentText

_BLANK_LINE = re.compile(r"\n[ \t]*\n\s*")
#: Where a too-long piece of text may be cut, best first: line ends, sentence ends, spaces.
_CUTS = (re.compile(r"(\n+)"), re.compile(r"((?<=[.!?…;:])\s+)"), re.compile(r"(\s+)"))
_TABLE_SEPARATOR = re.compile(r"^\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?$")
_SENTENCE_END = re.compile(r"[.!?…]\s+")
#: A table row longer than this many chunk sizes is cut between words after all.
_ROW_LIMIT = 4


@dataclass(frozen=True)
class Chunk:
    text: str
    location: str  # the section's label: "page 3", "sheet Budget", "heading: Costs", or ""
    ordinal: int  # its place in the document, from 0


@dataclass(frozen=True)
class _Unit:
    """The smallest piece packing moves: a paragraph, a line, a sentence or a table row."""

    text: str
    joiner: str  # what goes before it when it follows another piece in the same chunk
    header: str = ""  # for a table row: the table's header, repeated in a new chunk
    is_row: bool = False


def chunk_document(doc: DocumentText, *, size: int = 1200, overlap: int = 150) -> list[Chunk]:
    """The document's chunks in reading order."""
    if size < 1:
        raise ValueError("size must be at least 1 character")
    overlap = max(0, min(overlap, size // 2))
    chunks: list[Chunk] = []
    for section in doc.sections:
        for text in _pack(_units(section.text, size), size, overlap):
            chunks.append(Chunk(text=text, location=section.label, ordinal=len(chunks)))
    return chunks


def _units(text: str, size: int) -> Iterator[_Unit]:
    """The section's text as units, each at most `size` characters (rows excepted)."""
    for block in _BLANK_LINE.split(text.strip()):
        first = True
        for is_table, lines in _runs(block):
            joiner = "\n\n" if first else "\n"
            first = False
            if is_table:
                yield from _table_units(lines, joiner, size)
            else:
                pieces = _split("\n".join(lines).strip(), size)
                for i, (sep, piece) in enumerate(pieces):
                    yield _Unit(piece, joiner if i == 0 else sep)


def _runs(block: str) -> Iterator[tuple[bool, list[str]]]:
    """A paragraph block's lines grouped into runs of table lines and of other lines."""
    run: list[str] = []
    in_table = False
    for line in block.split("\n"):
        is_table = line.lstrip().startswith("|")
        if run and is_table != in_table:
            yield in_table, run
            run = []
        in_table = is_table
        run.append(line)
    if run and any(line.strip() for line in run):
        yield in_table, run


def _table_units(lines: list[str], joiner: str, size: int) -> Iterator[_Unit]:
    """One unit per row; the header row and its |---| line go as one."""
    rows = [line.strip() for line in lines if line.strip()]
    if len(rows) >= 2 and _TABLE_SEPARATOR.match(rows[1]):
        header, rows = f"{rows[0]}\n{rows[1]}", rows[2:]
    else:
        header = ""
    if len(header) > size // 2:
        # Repeated above every chunk's rows, a long header would be copied once per row or
        # two (a 1 MB header over 100,000 short rows: 100 GB): it goes in once, as text.
        for i, (sep, piece) in enumerate(_split(header, size)):
            yield _Unit(piece, joiner if i == 0 else sep)
        joiner, header = "\n", ""
    elif header:
        yield _Unit(header, joiner, header=header, is_row=True)
        joiner = "\n"
    for row in rows:
        if len(row) > size * _ROW_LIMIT:
            for i, (sep, piece) in enumerate(_split(row, size)):
                yield _Unit(piece, joiner if i == 0 else sep)
        else:
            yield _Unit(row, joiner, header=header, is_row=True)
        joiner = "\n"


def _split(text: str, size: int, level: int = 0) -> list[tuple[str, str]]:
    """`text` as (separator before, piece) pairs, each piece at most `size` characters, cut
    at the best kind of place that exists in it."""
    if len(text) <= size:
        return [("", text)]
    for depth in range(level, len(_CUTS)):
        parts = _CUTS[depth].split(text)
        if len(parts) < 3:
            continue
        out: list[tuple[str, str]] = []
        sep = ""
        for i in range(0, len(parts), 2):
            if parts[i]:
                inner = _split(parts[i], size, depth + 1)
                out.append((sep, inner[0][1]))
                out.extend(inner[1:])
            sep = parts[i + 1] if i + 1 < len(parts) else ""
        return out
    # One "word" longer than a chunk (a hash, base64, a URL): there is no better place.
    return [("", text[i : i + size]) for i in range(0, len(text), size)]


def _pack(units: Iterator[_Unit], size: int, overlap: int) -> Iterator[str]:
    """Units joined greedily into chunks of at most about `size` characters."""
    current = ""
    last: _Unit | None = None
    for unit in units:
        if not current:
            current = unit.text
        elif len(current) + len(unit.joiner) + len(unit.text) <= size:
            current += unit.joiner + unit.text
        else:
            yield current.strip()
            current = _opening(current, last, unit, size, overlap)
        last = unit
    if current.strip():
        yield current.strip()


def _opening(previous: str, last: _Unit | None, unit: _Unit, size: int, overlap: int) -> str:
    """How the chunk after `previous` starts with `unit`: a table row under its header,
    running text after the end of the previous chunk."""
    if unit.is_row:
        if unit.header and unit.text != unit.header:
            return f"{unit.header}\n{unit.text}"
        return unit.text
    if last is None or last.is_row or not overlap:
        return unit.text
    tail = _tail(previous, overlap)
    joiner = unit.joiner or " "
    if not tail or len(tail) + len(joiner) + len(unit.text) > size:
        return unit.text
    return tail + joiner + unit.text


def _tail(text: str, overlap: int) -> str:
    """At most `overlap` characters from the end of `text`, starting at a sentence start if
    there is one, else at a word start."""
    if len(text) <= overlap:
        return ""  # the whole chunk again would be a duplicate, not an overlap
    start = len(text) - overlap
    window = text[start:]
    sentence = _SENTENCE_END.search(window)
    if sentence:
        return window[sentence.end() :].strip()
    if not text[start - 1].isspace():
        space = re.search(r"\s", window)
        if space is None:
            return ""
        window = window[space.end() :]
    return window.strip()
