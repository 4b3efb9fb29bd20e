"""A `CallToolResult` → `ToolResult`: text joined, images saved as attachments (the agent
gives them to a model that takes images and adds a line saying so, or why not:
app/core/providers/vision.py), `isError` → ok=False. Content blocks are read duck-typed
(by their `type`)."""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
import uuid
from pathlib import Path
from typing import Any

from tools.spec import ToolResult

_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
}


def attachments_dir(home: Path) -> Path:
    return home / "attachments"


def _save_blob(home: Path, data: str, mime: str | None, stem: str) -> Path | None:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    ext = _EXTENSIONS.get(mime or "") or mimetypes.guess_extension(mime or "") or ".bin"
    folder = attachments_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}-{uuid.uuid4().hex[:12]}{ext}"
    path.write_bytes(raw)
    return path


def _resource_text(res: Any, home: Path, label: str, attachments: list[str]) -> str:
    text = getattr(res, "text", None)
    if text is not None:
        return f"[resource {res.uri}]\n{text}"
    path = _save_blob(home, getattr(res, "blob", ""), res.mime_type, label)
    if path is None:
        return f"[resource {res.uri} with undecodable data]"
    attachments.append(str(path))
    return f"[resource {res.uri} saved to {path}]"


def _block_text(block: Any, home: Path, label: str, attachments: list[str]) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        path = _save_blob(home, block.data, block.mime_type, label)
        if path is None:
            return f"[{kind} with undecodable data]"
        attachments.append(str(path))
        return f"[{kind} {block.mime_type} saved to {path}]"
    if kind == "resource":
        return _resource_text(block.resource, home, label, attachments)
    if kind == "resource_link":
        return f"[resource link {block.uri}: {block.name}]"
    return f"[unsupported content block {kind!r}]"


def convert(result: Any, home: Path, *, label: str = "mcp") -> ToolResult:
    """A tools/call result."""
    attachments: list[str] = []
    texts = [_block_text(b, home, label, attachments) for b in result.content or []]
    structured = getattr(result, "structured_content", None)
    content = "\n".join(texts)
    if not content and structured is not None:
        content = json.dumps(structured, ensure_ascii=False, default=str)
    if getattr(result, "is_error", False):
        message = content or "the MCP tool reported an error"
        return ToolResult(
            ok=False,
            content=f"Error: {message}",
            error=message,
            data=structured,
            attachments=attachments,
        )
    return ToolResult(ok=True, content=content or "Done.", data=structured, attachments=attachments)


def convert_resource(result: Any, home: Path, *, label: str = "mcp") -> ToolResult:
    """A resources/read result."""
    attachments: list[str] = []
    texts = [_resource_text(c, home, label, attachments) for c in result.contents]
    return ToolResult(
        ok=True, content="\n".join(texts) or "(empty resource)", attachments=attachments
    )
