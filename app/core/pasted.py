"""Content pasted into the message box, kept as files in the home's `pasted` folder so it
goes with the message like any attachment (and stays in the history with it).

No Qt here: the window turns a pasted image into PNG bytes; this module only checks and
writes them. Names are made here, never taken from the clipboard, so nothing is written
anywhere but `<home>/pasted/`.
"""

from __future__ import annotations

import os
import secrets
from datetime import datetime
from pathlib import Path

from app.core.atomic_file import atomic_write
from app.core.attachments import MAX_IMAGE_BYTES

PASTED_DIR = "pasted"
#: A text paste longer than this becomes a "Pasted text" attachment, not text in the box.
BIG_PASTE_CHARS = 2_000
_SUFFIXES = {".png", ".txt"}


class PasteRefused(ValueError):
    """The pasted content cannot be attached; the message says why, in plain words."""


def pasted_dir(home: Path) -> Path:
    return home / PASTED_DIR


def is_big_paste(text: str) -> bool:
    return len(text) > BIG_PASTE_CHARS


def text_label(text: str) -> str:
    """The chip's words for a pasted text: "Pasted text (N lines)"."""
    lines = max(1, len(text.splitlines()))
    return f"Pasted text ({lines} line{'' if lines == 1 else 's'})"


def save_pasted_image(home: Path, png: bytes) -> Path:
    """Keeps a pasted image (PNG bytes); one larger than attachments take is refused."""
    if len(png) > MAX_IMAGE_BYTES:
        raise PasteRefused(
            f"The pasted image is {len(png) / 1_000_000:.1f} MB; images up to "
            f"{MAX_IMAGE_BYTES // 1_000_000} MB can be attached."
        )
    return _save(home, png, ".png")


def save_pasted_text(home: Path, text: str) -> Path:
    return _save(home, text.encode("utf-8"), ".txt")


def _save(home: Path, payload: bytes, suffix: str) -> Path:
    """Writes atomically to `<home>/pasted/<date>-<short id><suffix>` (file 0600, folder
    0700: it may hold anything the user copied)."""
    if suffix not in _SUFFIXES:
        raise ValueError(f"unexpected suffix for a pasted file: {suffix}")
    folder = pasted_dir(home)
    if folder.is_symlink():
        raise PasteRefused("The folder for pasted content is a link; nothing was saved.")
    folder.mkdir(mode=0o700, exist_ok=True)
    if os.name == "posix":
        folder.chmod(0o700)
    day = datetime.now().strftime("%Y-%m-%d")
    path = folder / f"{day}-{secrets.token_hex(4)}{suffix}"
    while path.exists():
        path = folder / f"{day}-{secrets.token_hex(4)}{suffix}"
    atomic_write(path, payload, mode=0o600)
    return path
