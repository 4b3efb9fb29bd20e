"""The curated models Deskhand offers to download, and which one suits this machine.

The list is data (catalogue.json next to this file): every entry pins a Hugging Face
repository, file, commit, exact size and sha256, so a download is checked byte for byte.
A broken entry is skipped with a warning naming it; the others still load.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CATALOGUE_FILE = Path(__file__).with_name("catalogue.json")

LICENCES = frozenset({"Apache-2.0", "MIT", "Llama 3.2 Community", "Qwen Research"})
TOOLS = frozenset({"good", "basic", "none"})
PURPOSES = frozenset({"chat", "embedding"})

_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_REVISION = re.compile(r"^[0-9a-f]{40}$")

#: Share of the machine's memory a recommended model may take (the rest is the system's).
RAM_SHARE = 0.6
#: Share of the graphics memory a recommended model may take.
VRAM_SHARE = 0.9


@dataclass(frozen=True)
class CatalogueModel:
    """One downloadable model, pinned to an exact file."""

    id: str
    name: str
    repo: str
    file: str
    revision: str
    size: int
    sha256: str
    ram_bytes: int  # to run it at `context`: file + KV cache + runtime overhead
    licence: str
    tools: str  # "good" | "basic" | "none"
    purpose: str  # "chat" | "embedding"
    context: int
    notes: str


@dataclass(frozen=True)
class Machine:
    """The memory this computer has for a model."""

    ram_total: int
    ram_available: int
    vram: int
    gpu: str | None


class _BadEntry(ValueError):
    """A catalogue entry that is not well-formed."""


def _text(entry: dict[str, Any], key: str, pattern: re.Pattern[str] | None = None) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _BadEntry(f"{key} is missing or not text")
    if pattern is not None and not pattern.match(value):
        raise _BadEntry(f"{key} {value!r} is not well-formed")
    return value


def _count(entry: dict[str, Any], key: str) -> int:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _BadEntry(f"{key} must be a whole number above 0")
    return value


def _one_of(entry: dict[str, Any], key: str, allowed: frozenset[str]) -> str:
    value = _text(entry, key)
    if value not in allowed:
        raise _BadEntry(f"{key} {value!r} is not one of {', '.join(sorted(allowed))}")
    return value


def _model(entry: object) -> CatalogueModel:
    """The entry as a CatalogueModel; _BadEntry saying which field is wrong."""
    if not isinstance(entry, dict):
        raise _BadEntry("it is not an object")
    model = CatalogueModel(
        id=_text(entry, "id", _ID),
        name=_text(entry, "name"),
        repo=_text(entry, "repo", _REPO),
        file=_text(entry, "file"),
        revision=_text(entry, "revision", _REVISION),
        size=_count(entry, "size"),
        sha256=_text(entry, "sha256", _SHA256),
        ram_bytes=_count(entry, "ram_bytes"),
        licence=_one_of(entry, "licence", LICENCES),
        tools=_one_of(entry, "tools", TOOLS),
        purpose=_one_of(entry, "purpose", PURPOSES),
        context=_count(entry, "context"),
        notes=str(entry.get("notes") or ""),
    )
    if not model.file.endswith(".gguf") or "/" in model.file or "\\" in model.file:
        raise _BadEntry(f"file {model.file!r} is not a plain .gguf file name")
    if model.ram_bytes < model.size:
        raise _BadEntry("ram_bytes is smaller than the file")
    return model


def load_catalogue(path: Path) -> tuple[CatalogueModel, ...]:
    """The well-formed entries of a catalogue file; broken ones are logged and skipped."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("The model catalogue %s is unreadable: %s", path.name, exc)
        return ()
    entries = doc.get("models") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        log.warning("The model catalogue %s has no list of models", path.name)
        return ()
    models: list[CatalogueModel] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        label = entry.get("id") if isinstance(entry, dict) else None
        label = label if isinstance(label, str) and label else f"number {index + 1}"
        try:
            model = _model(entry)
        except _BadEntry as exc:
            log.warning("Catalogue entry %s skipped: %s", label, exc)
            continue
        if model.id in seen:
            log.warning("Catalogue entry %s skipped: the id is used twice", label)
            continue
        seen.add(model.id)
        models.append(model)
    return tuple(models)


@functools.cache
def catalogue() -> tuple[CatalogueModel, ...]:
    """The built-in catalogue (read once)."""
    return load_catalogue(CATALOGUE_FILE)


def find(model_id: str) -> CatalogueModel | None:
    """The catalogue model with this id (case-insensitive), if any."""
    wanted = model_id.strip().lower()
    return next((m for m in catalogue() if m.id == wanted), None)


def recommend(
    machine: Machine,
    purpose: str = "chat",
    models: tuple[CatalogueModel, ...] | None = None,
) -> CatalogueModel | None:
    """The largest model for `purpose` that fits this machine comfortably.

    Comfortably: within 60% of the memory (90% of the graphics memory when a GPU is known,
    so the whole model runs there). Chat models must be able to call tools. When none fits
    comfortably, the smallest one that fits in memory at all; None when not even that.
    """
    pool = catalogue() if models is None else models
    fitting = [m for m in pool if m.purpose == purpose and (purpose != "chat" or m.tools != "none")]
    if not fitting:
        return None
    budget = machine.ram_total * RAM_SHARE
    if machine.gpu and machine.vram > 0:
        budget = machine.vram * VRAM_SHARE
    comfortable = [m for m in fitting if m.ram_bytes <= budget]
    if comfortable:
        return max(comfortable, key=lambda m: (m.ram_bytes, m.tools == "good"))
    smallest = min(fitting, key=lambda m: m.ram_bytes)
    return smallest if smallest.ram_bytes <= machine.ram_total else None


def this_machine() -> Machine:
    """Total and available memory of this computer, and its GPU when known cheaply."""
    from app.core.engine.memory import machine_memory

    total, available = machine_memory()
    gpu: str | None = None
    vram = 0
    if sys.platform == "darwin" and os.uname().machine == "arm64":
        # Apple silicon shares memory with the GPU; Metal lets a process use about 2/3 of it.
        gpu = "Apple silicon (Metal)"
        vram = total * 2 // 3
    return Machine(ram_total=total, ram_available=available, vram=vram, gpu=gpu)
