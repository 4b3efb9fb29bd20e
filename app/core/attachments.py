"""Files attached to a message: text goes in as fenced blocks, documents (PDF, Office,
OpenDocument, HTML, EPUB…) as their text with its structure, labelled as untrusted data
(app/core/documents/), images as data URLs."""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass
from pathlib import Path

from app.core.providers.base import ChatMessage

MAX_TEXT_BYTES = 200_000
#: A document's text in one message at most (the rest is left out, and the text says so).
MAX_DOCUMENT_CHARS = 200_000
MAX_IMAGE_BYTES = 5_000_000
IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}


@dataclass
class AttachmentProblem:
    path: str
    reason: str


def build_user_message(text: str, paths: list[str]) -> tuple[ChatMessage, list[AttachmentProblem]]:
    """Blocking (reads files): call it in an executor from the UI loop."""
    parts = [text] if text else []
    images: list[str] = []
    problems: list[AttachmentProblem] = []
    for raw in paths:
        path = Path(raw)
        try:
            size = path.stat().st_size
            mime = mimetypes.guess_type(path.name)[0] or ""
            if mime in IMAGE_TYPES:
                if size > MAX_IMAGE_BYTES:
                    raise ValueError(f"image larger than {MAX_IMAGE_BYTES // 1_000_000} MB")
                data = base64.b64encode(path.read_bytes()).decode("ascii")
                images.append(f"data:{mime};base64,{data}")
                parts.append(f"[attached image: {path.name}]")
                continue
            if is_document(path):
                parts.append(_document_part(path))
                continue
            blob = path.read_bytes()[: MAX_TEXT_BYTES + 1]
            if b"\0" in blob[:8192]:
                raise ValueError(
                    "binary file; text, documents (PDF, Word, Excel, PowerPoint, "
                    "OpenDocument, HTML, EPUB) and images can be attached"
                )
            body = blob[:MAX_TEXT_BYTES].decode("utf-8", errors="replace")
            note = " (first 200 kB)" if len(blob) > MAX_TEXT_BYTES else ""
            fence = "````" if "```" in body else "```"
            parts.append(f"Attached file `{path.name}`{note}:\n{fence}\n{body}\n{fence}")
        except (OSError, ValueError) as exc:
            problems.append(AttachmentProblem(raw, str(exc)))
    return ChatMessage("user", "\n\n".join(parts), images=images), problems


def is_document(path: Path) -> bool:
    """A file whose text `app.core.documents` reads (not plain text or Markdown, which go
    in as they are)."""
    from app.core.documents import supported

    return path.suffix.lower() not in _AS_IS and supported(path)


_AS_IS = {".txt", ".md", ".markdown", ".csv", ".tsv", ".log", ".json", ".py", ""}


def _document_part(path: Path) -> str:
    """The document's text with its structure (pages, sheets, slides, headings, tables), as
    data from the file: the model reads it, never takes orders from it."""
    from app.core import untrusted
    from app.core.documents import DocumentError, read_document

    try:
        document = read_document(path, max_chars=MAX_DOCUMENT_CHARS)
    except DocumentError as exc:
        raise ValueError(exc.reason) from None
    head = f"Attached file `{path.name}` ({document.describe()}):"
    return f"{head}\n{untrusted.label(document.render(), f'attached file {path.name}')}"

