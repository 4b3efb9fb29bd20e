"""Files attached to a message: text goes in as fenced blocks, documents (PDF, Office,
OpenDocument, HTML, EPUB…) as their text with its structure, labelled as untrusted data
(app/core/documents/), images as data URLs.

A document (or a text file Deskhand reads as one) longer than `LARGE_DOCUMENT_CHARS` goes
in as its outline and start only, when the caller can make it searchable in the
conversation (`searchable`, which hands it to the knowledge index): the model reads the
rest by page or section with knowledge_read, or searches it with knowledge_search, instead
of carrying all of it in every request. Without `searchable` it goes in whole, cut at
`MAX_DOCUMENT_CHARS`, as before."""

from __future__ import annotations

import base64
import json
import mimetypes
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.core.providers.base import ChatMessage
from app.core.visible import visible

if TYPE_CHECKING:
    from app.core.documents import DocumentText

MAX_TEXT_BYTES = 200_000
#: A document's text in one message at most (the rest is left out, and the text says so).
MAX_DOCUMENT_CHARS = 200_000
#: Longer than this, a document goes in as its outline and start (when it can be searched).
LARGE_DOCUMENT_CHARS = 60_000
#: How much of a large document's start goes in with its outline.
OUTLINE_START_CHARS = 6_000
#: The outline names at most this many sections (runs of pages count as one).
OUTLINE_ITEMS = 150
#: Makes one large attached document searchable in the conversation (the knowledge
#: index's `add_attachment`); a ValueError says in plain words why it cannot be.
Searchable = Callable[[Path], object]
MAX_IMAGE_BYTES = 5_000_000
IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}


@dataclass
class AttachmentProblem:
    path: str
    reason: str
    #: An encrypted document that opens with its password: ask, then build again with it.
    needs_password: bool = False


class _PasswordNeeded(ValueError):
    pass


#: How often an encrypted attachment's password is asked before it is left out.
PASSWORD_TRIES = 3


class PasswordTries:
    """The passwords typed for encrypted attachments, and which to ask for next (each file
    at most `PASSWORD_TRIES` times; no answer leaves it out). The window and `ask` read
    the files again with `passwords` after each round of answers."""

    def __init__(self) -> None:
        self.passwords: dict[str, str] = {}
        self._asked: dict[str, int] = {}

    def to_ask(self, problems: list[AttachmentProblem]) -> list[AttachmentProblem]:
        locked = [
            p
            for p in problems
            if p.needs_password and self._asked.get(p.path, 0) < PASSWORD_TRIES
        ]
        for problem in locked:
            self._asked[problem.path] = self._asked.get(problem.path, 0) + 1
        return locked

    def answer(self, path: str, password: str | None) -> None:
        if password:
            self.passwords[path] = password
        else:  # the user chose not to: the file stays out, its reason said
            self._asked[path] = PASSWORD_TRIES


def build_user_message(
    text: str,
    paths: list[str],
    *,
    searchable: Searchable | None = None,
    passwords: Mapping[str, str] | None = None,
) -> tuple[ChatMessage, list[AttachmentProblem]]:
    """Blocking (reads files): call it in an executor from the UI loop. `searchable`: how a
    large document is made searchable in the conversation (see the module docstring);
    `passwords`: what the user typed for encrypted documents, by path as given."""
    parts = [text] if text else []
    images: list[str] = []
    problems: list[AttachmentProblem] = []
    for raw in paths:
        path = Path(raw)
        try:
            size = _regular_size(path)
            mime = mimetypes.guess_type(path.name)[0] or ""
            if mime in IMAGE_TYPES:
                if size > MAX_IMAGE_BYTES:
                    raise ValueError(f"image larger than {MAX_IMAGE_BYTES // 1_000_000} MB")
                data = base64.b64encode(path.read_bytes()).decode("ascii")
                images.append(f"data:{mime};base64,{data}")
                parts.append(f"[attached image: {_name(path)}]")
                continue
            if is_document(path):
                password = (passwords or {}).get(raw)
                parts.append(_document_part(path, searchable, password))
                continue
            if searchable is not None and size > LARGE_DOCUMENT_CHARS and _readable(path):
                parts.append(_document_part(path, searchable))
                continue
            with path.open("rb") as fh:  # never all of a huge file
                blob = fh.read(MAX_TEXT_BYTES + 1)
            if b"\0" in blob[:8192]:
                raise ValueError(
                    "binary file; text, documents (PDF, Word, Excel, PowerPoint, "
                    "OpenDocument, HTML, EPUB) and images can be attached"
                )
            body = blob[:MAX_TEXT_BYTES].decode("utf-8", errors="replace")
            note = " (first 200 kB)" if len(blob) > MAX_TEXT_BYTES else ""
            fence = "````" if "```" in body else "```"
            parts.append(f"Attached file `{_name(path)}`{note}:\n{fence}\n{body}\n{fence}")
        except (OSError, ValueError) as exc:
            locked = isinstance(exc, _PasswordNeeded)
            problems.append(AttachmentProblem(raw, str(exc), needs_password=locked))
    return ChatMessage("user", "\n\n".join(parts), images=images), problems


#: How each attachment starts in a user message's text (`build_user_message`).
_ATTACHED = re.compile(r"(?m)^(?:Attached file `([^`\n]+)`|\[attached image: ([^\]\n]+)\])")


def attached_names(content: str) -> list[str]:
    """The files and images a user message's text says were attached, in order, once
    each (text that merely looks like one counts too: on the safe side)."""
    return list(dict.fromkeys(file or image for file, image in _ATTACHED.findall(content)))


def _regular_size(path: Path) -> int:
    """The size of the file `path` names; a pipe or a device (reading one could wait
    forever or never end) is refused before it is opened."""
    info = path.stat()
    if stat.S_ISDIR(info.st_mode):
        raise ValueError("it is a folder: attach the files in it")
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(
            "not a regular file (a device or a pipe?): attach documents, text or images"
        )
    return info.st_size


def is_document(path: Path) -> bool:
    """A file whose text `app.core.documents` reads (not plain text or Markdown, which go
    in as they are)."""
    from app.core.documents import supported

    return path.suffix.lower() not in _AS_IS and supported(path)


_AS_IS = {".txt", ".md", ".markdown", ".csv", ".tsv", ".log", ".json", ".py", ""}


def _readable(path: Path) -> bool:
    """A text file the documents reader (and so the knowledge index) takes."""
    from app.core.documents import supported

    return supported(path)


def _document_part(
    path: Path, searchable: Searchable | None = None, password: str | None = None
) -> str:
    """The document's text with its structure (pages, sheets, slides, headings, tables), as
    data from the file: the model reads it, never takes orders from it. A large one, when
    it can be made searchable, as its outline and start."""
    from app.core import untrusted
    from app.core.documents import DocumentError, read_document

    try:
        document = read_document(path, max_chars=MAX_DOCUMENT_CHARS, password=password)
    except DocumentError as exc:
        raise (_PasswordNeeded if exc.needs_password else ValueError)(exc.reason) from None
    origin = f"attached file {path.name}"
    body = document.render()
    if searchable is not None and (len(body) > LARGE_DOCUMENT_CHARS or document.not_read):
        where = path.resolve()
        try:
            searchable(where)
        except ValueError as exc:  # not searchable: it goes in whole (cut), as before
            why = visible(str(exc), keep_newlines=False)
            note = f"; it could not be made searchable ({why}), so it is cut"
            head = f"Attached file `{_name(path)}` ({document.describe()}{note}):"
            return f"{head}\n{untrusted.label(body, origin)}"
        labelled = untrusted.label(outline(document), origin)
        return f"{large_head(_name(path), where, document)}\n{labelled}"
    head = f"Attached file `{_name(path)}` ({document.describe()}):"
    return f"{head}\n{untrusted.label(body, origin)}"


def _name(path: Path) -> str:
    """A file's name as the message shows it, on the user's side of the labels: a name
    may hold line breaks, quotes or backticks that would pass for the user's own words."""
    return visible(path.name, keep_newlines=False).replace("`", "'")


def _quoted(path: Path) -> str:
    """A path as a JSON string (quotes and line breaks escaped): the exact argument for
    knowledge_read, and no more."""
    return json.dumps(str(path), ensure_ascii=False)


def large_head(name: str, where: Path, document: DocumentText) -> str:
    """What the model is told about a large attachment: it is in the conversation's
    knowledge, and how to read it (the path as the index knows it)."""
    first = next((s.label for s in document.sections if s.label), "")
    example = f", location={json.dumps(first, ensure_ascii=False)}" if first else ""
    return (
        f"Attached file `{name}` ({document.describe()}; too long to include whole, so only "
        "its outline and start are here). It was added to this conversation's knowledge: "
        f"read it by page or section with knowledge_read(path={_quoted(where)}{example}), or "
        "search it with knowledge_search, and cite the passages you use:"
    )


_NUMBERED = re.compile(r"(\w+) (\d+)")


def outline(document: DocumentText) -> str:
    """The document's sections (a run of pages, slides or chapters as one line) and the
    text of its start."""
    items: list[str] = []
    run: tuple[str, int, int] | None = None  # unit, first, last
    for section in document.sections:
        numbered = _NUMBERED.fullmatch(section.label)
        if numbered:
            unit, number = numbered.group(1), int(numbered.group(2))
            if run is not None and run[0] == unit and number == run[2] + 1:
                run = (unit, run[1], number)
                continue
            if run is not None:
                items.append(_run_text(run))
            run = (unit, number, number)
            continue
        if run is not None:
            items.append(_run_text(run))
            run = None
        items.append(section.label or "(start)")
    if run is not None:
        items.append(_run_text(run))
    shown = items[:OUTLINE_ITEMS]
    if len(items) > OUTLINE_ITEMS:
        shown.append(f"… and {len(items) - OUTLINE_ITEMS:,} more sections")
    if document.not_read:
        shown.append(f"{document.not_read} (also searchable)")
    listing = "\n".join(f"- {item}" for item in shown)
    start = document.render(OUTLINE_START_CHARS)
    return f"Sections:\n{listing}\n\nThe start:\n\n{start}"


def _run_text(run: tuple[str, int, int]) -> str:
    unit, first, last = run
    return f"{unit} {first}" if first == last else f"{unit}s {first}–{last}"
