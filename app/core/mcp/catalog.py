"""What MCP servers offer besides tools, as plain data (no SDK import): resources the user
can attach to a message and prompts offered as slash commands.

Everything here comes from a server and is untrusted: names, descriptions and prompt texts
are shown as text (never markup) and reach the model only as part of the user's message,
labelled with the server they came from.
"""

from __future__ import annotations

import mimetypes
import re
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.attachments import IMAGE_TYPES, MAX_TEXT_BYTES
from app.core.untrusted import label
from app.core.visible import visible
from tools.redact import TRIPWIRE
from tools.spec import ToolContext, ToolError

#: A resource's text is cut to this many bytes before it is labelled, so the attachment
#: reader's own cap (MAX_TEXT_BYTES) never cuts the closing marker off.
MAX_RESOURCE_TEXT = MAX_TEXT_BYTES - 4_000


@dataclass(frozen=True)
class ResourceEntry:
    server: str
    uri: str
    name: str
    description: str = ""
    mime_type: str | None = None

    @property
    def title(self) -> str:
        """The name to show (the URI when the server gave none), escaped."""
        return self.name or _text(self.uri, 120)

    @property
    def label(self) -> str:
        return f"{self.title} ({_text(self.server, 80)})"

    @property
    def origin(self) -> str:
        """Where its content comes from, in the words of the untrusted-data label."""
        return f"MCP server {self.server} (resource {self.uri})"


@dataclass(frozen=True)
class PromptArgument:
    name: str
    description: str = ""
    required: bool = False

    @property
    def label(self) -> str:
        """Its name as shown in the form (escaped), `*` when it must be filled in."""
        return _text(self.name, 80) + (" *" if self.required else "")


@dataclass(frozen=True)
class PromptEntry:
    server: str
    name: str
    description: str = ""
    arguments: tuple[PromptArgument, ...] = field(default_factory=tuple)

    @property
    def command(self) -> str:
        """The slash command that runs it: `/<server>:<prompt>` (spaces made dashes)."""
        return "/" + _word(self.server) + ":" + _word(self.name)


@dataclass(frozen=True)
class PromptMessage:
    role: str  # "user" or "assistant"
    text: str


def _word(text: str) -> str:
    return "-".join(visible(text, keep_newlines=False).split()) or "_"


def _text(value: Any, limit: int = 500) -> str:
    shown = visible(str(value or ""), keep_newlines=False).strip()
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def resource_entries(server: str, resources: list[Any]) -> list[ResourceEntry]:
    return [
        ResourceEntry(
            server=server,
            uri=str(r.uri),
            name=_text(getattr(r, "title", None) or getattr(r, "name", None), 120),
            description=_text(getattr(r, "description", None)),
            mime_type=getattr(r, "mime_type", None) or getattr(r, "mimeType", None),
        )
        for r in resources
    ]


def prompt_entries(server: str, prompts: list[Any]) -> list[PromptEntry]:
    return [
        PromptEntry(
            server=server,
            name=str(p.name),
            description=_text(getattr(p, "description", None)),
            arguments=tuple(
                PromptArgument(
                    name=str(a.name),
                    description=_text(getattr(a, "description", None)),
                    required=bool(getattr(a, "required", False)),
                )
                for a in (getattr(p, "arguments", None) or [])
            ),
        )
        for p in prompts
    ]


def prompt_messages(result: Any) -> list[PromptMessage]:
    """A `prompts/get` result's messages as text (images and other blocks are named, not
    inlined; embedded resources give their text)."""
    out: list[PromptMessage] = []
    for message in getattr(result, "messages", []) or []:
        content = message.content
        kind = getattr(content, "type", "")
        if kind == "text":
            text = content.text
        elif kind == "resource" and hasattr(content.resource, "text"):
            text = content.resource.text
        else:
            text = f"[{kind or 'content'} from the prompt, not shown]"
        out.append(PromptMessage(role=str(message.role), text=text))
    return out


# ---- resources attached to a message ------------------------------------------------------


@dataclass(frozen=True)
class ResourceAttachment:
    """A resource read for a message: the files to attach (the labelled text, saved images)
    and what of it could not be attached, in plain words."""

    entry: ResourceEntry
    paths: tuple[str, ...]
    skipped: tuple[str, ...] = ()


def labelled_resource(entry: ResourceEntry, text: str) -> str:
    """The resource's text as the model reads it: escaped, capped, then labelled as
    untrusted data from its server (app/core/untrusted.py)."""
    shown = visible(TRIPWIRE.text(text))  # masked before the cut
    raw = shown.encode("utf-8")
    if len(raw) > MAX_RESOURCE_TEXT:
        kept = raw[:MAX_RESOURCE_TEXT].decode("utf-8", errors="ignore")
        shown = kept + f"\n[cut: the resource is longer than {MAX_RESOURCE_TEXT // 1000} kB]"
    return label(shown, entry.origin)


def read_for_message(
    manager: Any, entry: ResourceEntry, cancel: threading.Event | None = None
) -> ResourceAttachment:
    """Blocking: read `entry` through the MCP manager and make it attachable. Text is saved,
    labelled, as `<home>/attachments/mcp-<id>/<name> (MCP <server>).txt`; images the server
    sent are the files the manager saved. Raises ToolError (in plain words) when the read
    fails or nothing in it can be attached."""
    ctx = ToolContext(home=Path(manager.home), cancel_event=cancel)
    result = manager.read_resource(entry.server, entry.uri, ctx)
    if not result.ok:
        raise ToolError(result.error or "the server could not read it")
    images, skipped = _split_files(result.attachments)
    text = _without_file_lines(result.content, result.attachments)
    paths = list(images)
    if text.strip():
        paths.insert(0, str(_save_text(Path(manager.home), entry, labelled_resource(entry, text))))
    if not paths:
        what = ", ".join(skipped) or "nothing"
        raise ToolError(f"it holds {what}; only text and images can be attached")
    return ResourceAttachment(entry, tuple(paths), tuple(skipped))


def _split_files(files: list[str]) -> tuple[list[str], list[str]]:
    images: list[str] = []
    skipped: list[str] = []
    for path in files:
        mime = mimetypes.guess_type(path)[0] or ""
        if mime in IMAGE_TYPES:
            images.append(path)
        else:
            skipped.append(f"a binary part ({mime or 'unknown type'})")
    return images, skipped


def _without_file_lines(content: str, files: list[str]) -> str:
    """The result's text without the manager's "[resource … saved to <file>]" lines."""
    ends = tuple(f" saved to {path}]" for path in files)
    lines = content.splitlines()
    return "\n".join(line for line in lines if not (ends and line.endswith(ends)))


_UNSAFE_FILE_CHARS = re.compile(r"[^\w .()+,-]+")


def _file_part(text: str, limit: int) -> str:
    """`text` as part of a file name: no separators, controls or leading dots."""
    return _UNSAFE_FILE_CHARS.sub("_", text)[:limit].strip(" ._") or "resource"


def _save_text(home: Path, entry: ResourceEntry, text: str) -> Path:
    from app.core.mcp.results import attachments_dir

    folder = attachments_dir(home) / f"mcp-{uuid.uuid4().hex[:12]}"
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{_file_part(entry.name or entry.uri, 60)} (MCP {_file_part(entry.server, 40)}).txt"
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


# ---- prompts offered as slash commands --------------------------------------------------------


def check_arguments(entry: PromptEntry, values: dict[str, str]) -> dict[str, str]:
    """The arguments to send: trimmed, empty optional ones left out. Raises ToolError naming
    the required ones that are missing."""
    out = {a.name: values.get(a.name, "").strip() for a in entry.arguments}
    missing = [_text(a.name, 80) for a in entry.arguments if a.required and not out[a.name]]
    if missing:
        raise ToolError(f"{entry.command} needs a value for: {', '.join(missing)}")
    return {name: value for name, value in out.items() if value}


def prompt_text(entry: PromptEntry, messages: list[PromptMessage]) -> str:
    """A prompt's messages as the composer's text, under a line saying where it came from:
    user messages as they are, assistant messages quoted as context. Control characters
    are made visible."""
    parts = [f"[Prompt {entry.command} from the MCP server {_text(entry.server, 80)}]"]
    for message in messages:
        text = visible(message.text).strip()
        if not text:
            continue
        if message.role == "assistant":
            quoted = "\n".join(f"> {line}" if line else ">" for line in text.splitlines())
            parts.append("> (assistant, from the prompt)\n" + quoted)
        else:
            parts.append(text)
    return "\n\n".join(parts)


def fill_prompt(
    manager: Any,
    entry: PromptEntry,
    values: dict[str, str],
    cancel: threading.Event | None = None,
) -> str:
    """Blocking: get `entry` from its server with `values` and return it as composer text.
    Raises ToolError (in plain words) for a missing argument or a failed request."""
    arguments = check_arguments(entry, values)
    ctx = ToolContext(home=Path(manager.home), cancel_event=cancel)
    messages = manager.get_prompt(entry.server, entry.name, arguments, ctx)
    if not messages:
        raise ToolError(f"{entry.command} came back empty")
    return prompt_text(entry, messages)
