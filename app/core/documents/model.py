"""A document read into text: its sections with where each is, rendered for the model with a
note whenever it did not see all of it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from app.core.documents.limits import DEFAULT_MAX_CHARS

ENCRYPTED = "it is encrypted: open it, or save a copy without a password"
WRONG_PASSWORD = "that password does not open it: check it and try again"
#: A cut lands on a line break when one is this close before the limit.
_LINE_SLACK = 2_000


class DocumentError(ValueError):
    """A file that cannot be read. The message names the file, says what is wrong and what
    to do; `reason` is the same without the file's name."""

    def __init__(self, message: str, *, reason: str = "", needs_password: bool = False) -> None:
        super().__init__(message)
        self.reason = reason or message
        #: An encrypted file that opens with the right password: ask the user for it.
        self.needs_password = needs_password


def fail(path: Path, reason: str, *, needs_password: bool = False) -> DocumentError:
    return DocumentError(f"{path.name}: {reason}", reason=reason, needs_password=needs_password)


@dataclass(frozen=True)
class Section:
    """One part of a document: a page, a sheet, a slide, a chapter, or the text under a
    heading."""

    label: str  # where it is: "page 3", "sheet Budget", "heading: Results"
    text: str  # Markdown: headings, lists and tables kept
    # Render adds no heading: the text opens with its own, or is the top of the document.
    bare: bool = False
    more: str = ""  # what of it was not read, e.g. "rows 10,001 on (limit 10,000 rows)"


@dataclass(frozen=True)
class DocumentText:
    name: str  # the file's name, for notes
    kind: str  # "PDF", "XLSX", ...
    sections: tuple[Section, ...]
    max_chars: int = DEFAULT_MAX_CHARS
    unit: str = ""  # what a section counts: "page", "sheet", "slide", "chapter"
    total: int | None = None  # how many of them the file has, when known
    not_read: str = ""  # sections reading never reached, e.g. "pages 40–300 of 300"

    def describe(self) -> str:
        """'PDF, 12 pages': for a line above the text."""
        if self.unit and self.total is not None:
            return f"{self.kind}, {_count(self.total, self.unit)}"
        return self.kind

    def render(self, max_chars: int | None = None) -> str:
        """The text with a heading per section, cut at `max_chars` with a note saying how
        much was left out and where it stopped."""
        limit = self.max_chars if max_chars is None else max_chars
        body, starts = self._body()
        if len(body) <= limit:
            return body + (f"\n\n[Not read: {self.not_read}.]" if self.not_read else "")
        cut = body.rfind("\n", 0, limit + 1)
        if cut < limit - _LINE_SLACK or cut <= 0:
            cut = limit
        where = max((i for i, (start, _) in enumerate(starts) if start <= cut), default=0)
        start, label = starts[where]
        line = body.count("\n", start, cut) + 1
        cut_in, *after = self.sections[where:]
        unread = [cut_in.more] if cut_in.more else []
        unread += [f"in {s.label}, {s.more}" for s in after if s.more]
        unread += [self.not_read] if self.not_read else []
        note = f" Not read: {'; '.join(unread)}." if unread else ""
        return (
            f"{body[:cut].rstrip()}\n\n[Cut: only the first {cut:,} characters of "
            f"{self.name} are shown; it stops in {label}, line {line}. Left out: "
            f"{len(body) - cut:,} more characters.{note}]"
        )

    def _body(self) -> tuple[str, list[tuple[int, str]]]:
        """The whole text and, per section, where its text starts in it."""
        parts: list[str] = []
        starts: list[tuple[int, str]] = []
        pos = 0
        for section in self.sections:
            heading = "" if section.bare else f"## {section.label}\n\n"
            text = section.text.strip("\n") or "(no text)"
            if section.more:
                text += f"\n\n[Not read: {section.more}.]"
            if parts:
                pos += 2  # the blank line between sections
            starts.append((pos + len(heading), section.label))
            parts.append(heading + text)
            pos += len(parts[-1])
        return "\n\n".join(parts), starts


def _count(n: int, unit: str) -> str:
    return f"{n:,} {unit}" + ("" if n == 1 else "s")


@dataclass
class Reading:
    """What a format's reader hands back: sections made one at a time (so reading can stop
    early) and how to let go of the file."""

    kind: str
    sections: Iterator[Section]
    unit: str = ""
    total: int | None = None
    close: Callable[[], None] = field(default=lambda: None)


def units_range(unit: str, first: int, total: int) -> str:
    """'pages 13–300 of 300', 'slide 9 of 9'."""
    if first == total:
        return f"{unit} {first} of {total}"
    return f"{unit}s {first:,}–{total:,} of {total:,}"
