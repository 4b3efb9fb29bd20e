"""Which models take images, and how images reach them (docs/architecture.md §4).

* `takes_images(kind, model)`: an allow-list of model names known to take images. A model
  not on it takes none: it gets a text note instead of an image it would refuse or ignore
  (the safe side). `model_takes_images(config)` adds the provider account's `images`
  setting ("on"/"off" override the list).
* `tool_images(...)`: the image files a tool call's result carries (a browser screenshot,
  an MCP server's image) as data URLs, read only where Deskhand itself saved them, size-
  capped; and the lines the result's text gets (given to the model, or why not).
* `request_view(...)`: the history as a model is sent it: a tool result's images only in the
  request right after it (later ones get a note instead), no image for a model without
  images (a note instead).
* `labelled(...)`: a tool result's images between the untrusted-data markers, as the parts
  the wire formats turn into their own blocks.
"""

from __future__ import annotations

import base64
import mimetypes
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from app.core import untrusted
from app.core.attachments import IMAGE_TYPES, MAX_IMAGE_BYTES

from .base import ChatMessage, ProviderConfig

#: Where tools save the images they return, under the Deskhand home: browser screenshots
#: (tools/browser/capture.py SCREENSHOT_DIR) and MCP content (app/core/mcp/results.py).
TOOL_IMAGE_FOLDERS = ("screenshots", "attachments")
#: One round of tool calls gives the next request at most this much image data, and at
#: most this many images (providers refuse requests much over 20-30 MB).
MAX_ROUND_IMAGE_BYTES = 20_000_000
MAX_ROUND_IMAGES = 20

NOT_SHOWN = "[image not shown: this model does not take images]"
#: The `Notice.kind` telling the user their attached images were not sent.
IMAGES_NOT_SENT = "images_not_sent"
#: How a tool result's text says an image came with it (replaced in later requests).
GIVEN = "[image given to the model with this result: {name}]"
EARLIER = "[image given to the model earlier: {name}; not sent again]"
NOT_GIVEN = "[image not given to the model: {why}]"
NO_IMAGES = "this model does not take images"
_GIVEN_LINE = re.compile(r"\[image given to the model with this result: ([^\]\n]*)\]")

# ---- which models take images ---------------------------------------------------------

#: Model names (the part after any "vendor/" prefix, lower case) known to take images.
_VISION = re.compile(
    r"""
    (?:^|[.:])(?:                         # "us.anthropic.claude-…", "ft:gpt-4o-…"
        claude-(?!(?:1|2|instant)(?:\b|[.-]))   # Claude 3 and later
      | (?:chatgpt-)?gpt-4o(?!.*(?:audio|realtime|transcribe|tts))
      | gpt-4\.1 | gpt-4\.5 | gpt-4-turbo | gpt-4-vision | gpt-5
      | gemini | gemma-?3(?![n\d])(?![-:_](?:1b|270m)\b)        # not the text-only small ones
      | llava | bakllava | llama-?3\.2.*vision | llama-?4(?!\d)
      | qwen[\d.]*-?vl | minicpm-?v | moondream | pixtral
      | mistral-small-?3\.[1-9] | mistral-small-25\d\d | mistral-medium-?3
      | granite.*vision | internvl | phi-?3(?:\.5)?-vision | phi-?4-multimodal
      | smolvlm | idefics | molmo | glm-4(?:\.\d)?v | grok-(?:2-vision|4) | kimi-vl
      | deepseek-vl | cogvlm
    )
    """,
    re.VERBOSE,
)
#: OpenAI's reasoning models that take images (o1-mini, o1-preview and o3-mini do not).
_O_SERIES = re.compile(r"^(?:o1(?!-mini|-preview)|o3(?!-mini)|o4)(?:$|[-:])")
#: Any other name that says it is a vision-language model ("…-vision-…", "…-vl2").
_SAYS_VISION = re.compile(r"(?:^|[-_.:])(?:vision|vl|vlm)(?:$|[-_.:\d])")


def takes_images(kind: str, model: str) -> bool:
    """Whether `model` on a server of `kind` is known to take images. Every Claude the
    Anthropic API serves does, except the old ones; other servers speaking that API (some
    serve their own models) go by the list like any other."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    if kind == "anthropic" and name.startswith("claude"):
        return not re.match(r"claude-(?:1|2|instant)(?:\b|[.-])", name)
    return bool(_VISION.search(name) or _O_SERIES.match(name) or _SAYS_VISION.search(name))


def model_takes_images(config: ProviderConfig) -> bool:
    """The account's setting when it says "on" or "off", else the list."""
    if config.images != "auto":
        return config.images == "on"
    return takes_images(config.kind, config.model)


# ---- a tool result's images -------------------------------------------------------------


@dataclass
class ImageBudget:
    """What is left of one round's image allowance (shared by its calls)."""

    bytes: int = MAX_ROUND_IMAGE_BYTES
    count: int = MAX_ROUND_IMAGES


@dataclass
class ToolImages:
    #: Data URLs for the model.
    urls: list[str] = field(default_factory=list)
    #: One line per image file, for the result's text (what the model and the card say).
    notes: list[str] = field(default_factory=list)


def tool_images(
    paths: Iterable[str], home: Path, *, takes: bool, budget: ImageBudget
) -> ToolImages:
    """The images among a tool result's attachments (files the tool saved: never a path the
    model named), read for a model that takes images. Blocking: run it off the loop."""
    found = ToolImages()
    for raw in paths:
        name = Path(raw).name
        if mimetypes.guess_type(name)[0] not in IMAGE_TYPES:
            continue  # audio, documents: not images
        if not takes:
            found.notes.append(NOT_GIVEN.format(why=f"{NO_IMAGES} ({name})"))
            continue
        try:
            found.urls.append(_read_image(Path(raw), home, budget))
        except ValueError as exc:
            found.notes.append(NOT_GIVEN.format(why=str(exc)))
            continue
        found.notes.append(GIVEN.format(name=name))
    return found


def with_notes(content: str, notes: list[str]) -> str:
    """A result's text with the image lines after it (on its line when it has one)."""
    if not notes:
        return content
    joined = "\n".join(notes)
    if not content:
        return joined
    sep = " " if "\n" not in content and len(notes) == 1 else "\n"
    return f"{content}{sep}{joined}"


def _saved_by_deskhand(path: Path, home: Path) -> bool:
    """A file right inside one of the folders tools save images to, reached by no link."""
    if not path.is_absolute() or path.is_symlink():
        return False
    parent = Path(os.path.realpath(path)).parent
    return any(parent == Path(os.path.realpath(home / f)) for f in TOOL_IMAGE_FOLDERS)


def _read_image(path: Path, home: Path, budget: ImageBudget) -> str:
    """A data URL of the image at `path`, with its type from its bytes; ValueError saying
    why it cannot be given (nothing is read from a file outside Deskhand's folders)."""
    if not _saved_by_deskhand(path, home):
        raise ValueError(f"{path.name} is not a file Deskhand saved for this call")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise ValueError(f"{path.name} could not be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path.name} is not a regular file")
        if info.st_size > MAX_IMAGE_BYTES:
            raise ValueError(f"{path.name} is larger than {MAX_IMAGE_BYTES // 1_000_000} MB")
        if budget.count <= 0 or info.st_size > budget.bytes:
            raise ValueError(f"{path.name} left out: this round's images already fill one request")
        data = handle.read(MAX_IMAGE_BYTES + 1)
    mime = _image_type(data)
    if mime is None or len(data) > MAX_IMAGE_BYTES:
        raise ValueError(f"{path.name} is not a PNG, JPEG, GIF or WebP image")
    budget.count -= 1
    budget.bytes -= len(data)
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _image_type(data: bytes) -> str | None:
    """The image type by its first bytes (a file's name can say anything)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


# ---- the request ------------------------------------------------------------------------


def request_view(
    messages: list[ChatMessage], *, takes: bool, fresh: Mapping[str, list[str]]
) -> list[ChatMessage]:
    """`messages` as the model is sent them. `fresh`: the last round's tool images by call
    id, given to the tool results that end the history (the ones the model has not answered
    yet); any earlier tool image is a note. A model without images gets notes only."""
    tail = len(messages)
    while tail and messages[tail - 1].role == "tool":
        tail -= 1
    view: list[ChatMessage] = []
    for index, message in enumerate(messages):
        if message.role == "tool":
            urls = fresh.get(message.tool_call_id or "") if takes and index >= tail else None
            if urls:
                message = replace(message, images=list(urls))
            elif _GIVEN_LINE.search(message.content):
                content = _GIVEN_LINE.sub(lambda m: EARLIER.format(name=m[1]), message.content)
                message = replace(message, content=content, images=[])
        elif message.images and not takes:
            count = len(message.images)
            note = NOT_SHOWN if count == 1 else NOT_SHOWN.replace("image", f"{count} images", 1)
            text = f"{message.content}\n\n{note}" if message.content else note
            message = replace(message, content=text, images=[])
        view.append(message)
    return view


ImagePart = tuple[Literal["text", "image"], str]


def labelled(urls: list[str], call_id: str | None) -> list[ImagePart]:
    """A tool result's images between the untrusted-data markers (what a page or a server
    shows is information, not orders), as text and image parts in order."""
    where = untrusted.clean_origin(f"the images of the result of tool call {call_id or '?'}")
    nonce = untrusted.new_nonce()
    opening = untrusted.REMINDER.format(origin=where, nonce=nonce)
    parts: list[ImagePart] = [
        ("text", f'{opening}\n<{untrusted.MARKER} origin="{where}" id="{nonce}">')
    ]
    parts += [("image", url) for url in urls]
    parts.append(("text", f'</{untrusted.MARKER} id="{nonce}">'))
    return parts
