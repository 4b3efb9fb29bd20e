"""Files attached to a message: text goes in as fenced blocks, images as data URLs."""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass
from pathlib import Path

from app.core.providers.base import ChatMessage

MAX_TEXT_BYTES = 200_000
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
            blob = path.read_bytes()[: MAX_TEXT_BYTES + 1]
            if b"\0" in blob[:8192]:
                raise ValueError("binary file; only text and images can be attached")
            body = blob[:MAX_TEXT_BYTES].decode("utf-8", errors="replace")
            note = " (first 200 kB)" if len(blob) > MAX_TEXT_BYTES else ""
            fence = "````" if "```" in body else "```"
            parts.append(f"Attached file `{path.name}`{note}:\n{fence}\n{body}\n{fence}")
        except (OSError, ValueError) as exc:
            problems.append(AttachmentProblem(raw, str(exc)))
    return ChatMessage("user", "\n\n".join(parts), images=images), problems
