"""Splitting (streaming) markdown into top-level segments: prose chunks and fenced code.

A streamed message only grows at its end, so a segment once *finished* never changes:
its document is rendered and laid out once, and only the tail is rendered again as text
arrives. A prose chunk is finished at a blank line (outside a code fence) once the next
block has started and does not continue it (indented continuation, or another item of the
same list). A code fence in column 0 is its own segment, finished by its closing fence.

Pure Python (no Qt), so it is cheap to test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

_FENCE = re.compile(r"^(`{3,}|~{3,})([^`]*)$")
_CLOSE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*$")
_LIST = re.compile(r"^([-*+]|\d{1,9}[.)])(\s|$)")


@dataclass(frozen=True)
class Segment:
    kind: Literal["md", "code"]
    #: Markdown source of a prose chunk, or the body of a code block (without fences).
    text: str
    lang: str = ""
    #: For code: whether the closing fence has been seen.
    closed: bool = True


class Segmenter:
    """Incremental splitter. `update(text)` rescans only what follows the finished part."""

    def __init__(self) -> None:
        self.finished: list[Segment] = []
        self._consumed = 0  # characters of the text covered by `finished`

    def update(self, text: str, final: bool = False) -> list[Segment]:
        """Extends `finished` from `text` and returns the tail (unfinished) segments.

        With `final`, everything is finished and the returned tail is empty.
        """
        added = final and not text.endswith("\n")
        if added:
            text += "\n"  # the last line is complete: let it end a block too
        tail = self._scan(text)
        if added and tail and tail[-1].kind == "code":
            tail[-1] = replace(tail[-1], text=tail[-1].text[:-1])
        if final:
            self.finished.extend(tail)
            self._consumed = len(text)
            return []
        return tail

    def _finish(self, segment: Segment | None, end: int) -> None:
        if segment is not None:
            self.finished.append(segment)
        self._consumed = end

    def _scan(self, text: str) -> list[Segment]:
        pos = self._consumed
        chunk_start = pos  # start of the prose chunk being collected
        fence: tuple[str, str, int] | None = None  # (marker, lang, body start)
        after_blank = False
        block_is_list = False
        while True:
            newline = text.find("\n", pos)
            if newline < 0:
                break  # the last, partial line belongs to the tail
            line = text[pos:newline]
            line_end = newline + 1
            if fence is not None:
                close = _CLOSE.match(line)
                marker = fence[0]
                if close and close.group(1)[0] == marker[0] and len(close.group(1)) >= len(marker):
                    self._finish(Segment("code", text[fence[2] : pos], fence[1]), line_end)
                    fence, chunk_start, after_blank, block_is_list = None, line_end, False, False
                pos = line_end
                continue
            opening = _FENCE.match(line)
            if opening:
                self._finish(_prose(text[chunk_start:pos]), pos)
                fence = (opening.group(1), opening.group(2).strip().split(" ")[0], line_end)
                pos = line_end
                continue
            if not line.strip():
                after_blank = True
                pos = line_end
                continue
            indented = line[0] in " \t"
            is_item = bool(_LIST.match(line))
            if after_blank and text[chunk_start:pos].strip():
                continues = indented or (is_item and block_is_list)
                if not continues:
                    self._finish(_prose(text[chunk_start:pos]), pos)
                    chunk_start = pos
            if is_item:
                block_is_list = True
            elif after_blank and not indented:
                block_is_list = False
            after_blank = False
            pos = line_end
        if fence is not None:
            return [Segment("code", text[fence[2] :], fence[1], closed=False)]
        rest = _prose(text[chunk_start:])
        return [rest] if rest is not None else []


def _prose(source: str) -> Segment | None:
    stripped = source.strip("\n")
    return Segment("md", stripped) if stripped.strip() else None


def split_segments(text: str) -> list[Segment]:
    """All segments of a complete message."""
    segmenter = Segmenter()
    segmenter.update(text, final=True)
    return segmenter.finished
