"""The models this home has: downloads Deskhand owns and GGUF files the user pointed it at.

The registry is `home/models/models.json`, rewritten atomically and re-read on every call
(the window and the CLI share it). A damaged registry never costs a model file: it is kept
aside as models.json.damaged, the entries that still read are kept, and downloads found in
the models folder are listed again. Deletion only ever touches files Deskhand downloaded,
and only inside the models folder, whatever the registry says.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MODELS_DIR = "models"
REGISTRY = "models.json"
DOWNLOADS = "downloads"
SOURCES = frozenset({"catalogue", "file", "huggingface"})

_lock = threading.RLock()


class ModelStoreError(OSError):
    """A model could not be added or removed; the message says why in plain words."""


@dataclass(frozen=True)
class LocalModel:
    """One model this home can run."""

    id: str
    name: str
    path: Path
    source: str  # "catalogue" | "file" | "huggingface"
    repo: str | None
    file: str | None
    size: int
    sha256: str | None
    owned: bool  # Deskhand downloaded it: removing it deletes the file


def slug(text: str) -> str:
    """A short id made from a file or model name: lower case, letters, digits, . and -."""
    base = text.strip().lower().removesuffix(".gguf")
    base = re.sub(r"[^a-z0-9.]+", "-", base).strip("-.")
    return base[:48].rstrip("-.") or "model"


def _inside(path: Path, folder: Path) -> bool:
    """Whether `path` is in `folder`, both as written and with links followed (a models
    folder that is itself a link to another disk still holds its files)."""
    try:
        lexical = Path(os.path.normpath(path.absolute()))
        in_written = lexical.is_relative_to(os.path.normpath(folder.absolute()))
        return in_written and path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError, ValueError):
        return False


class ModelStore:
    """The registry of models in `home/models`."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home).expanduser().absolute()
        self.dir = self.home / MODELS_DIR
        self.registry = self.dir / REGISTRY

    # -- reading -------------------------------------------------------------------------

    def models(self) -> list[LocalModel]:
        """Every model this home has, in the order they were added."""
        with _lock:
            return self._load()

    def get(self, model_id: str) -> LocalModel | None:
        """The model with this id (case-insensitive)."""
        wanted = model_id.strip().lower()
        return next((m for m in self.models() if m.id == wanted), None)

    def resolve(self, name: str) -> LocalModel | None:
        """The model called `name`: by id, else by name or file name, with or without its
        .gguf (case-insensitive); None when nothing, or more than one model, has that name."""
        wanted = name.strip().lower()
        if not wanted:
            return None
        models = self.models()
        by_id = next((m for m in models if m.id == wanted), None)
        if by_id is not None:
            return by_id
        named = [
            m
            for m in models
            if wanted in (m.name.lower(), m.path.name.lower(), m.path.stem.lower())
        ]
        return named[0] if len(named) == 1 else None

    def download_dir(self) -> Path:
        """Where partial downloads live until they are complete and checked."""
        path = self.dir / DOWNLOADS
        self._make_dir(path)
        return path

    # -- changing ------------------------------------------------------------------------

    def add_file(self, path: Path) -> LocalModel:
        """Add a GGUF file of the user's own, left where it is (never deleted by Deskhand).
        GgufError when it is not a usable GGUF file; the same file twice gives the same entry."""
        from app.core.engine.gguf import read_gguf_info

        path = Path(path).expanduser().absolute()
        info = read_gguf_info(path)
        with self._changing():
            models = self._load()
            for model in models:
                if _same_file(model.path, path):
                    return model
            model = LocalModel(
                id=_unique(slug(path.name), models),
                name=info.name or path.stem,
                path=path,
                source="file",
                repo=None,
                file=path.name,
                size=info.size,
                sha256=None,
                owned=False,
            )
            self._save([*models, model])
            return model

    def add_downloaded(
        self,
        model_id: str,
        name: str,
        path: Path,
        source: str,
        repo: str | None,
        file: str | None,
        sha256: str | None,
    ) -> LocalModel:
        """Register a file Deskhand downloaded (so removing it deletes the file). The same id
        or the same file again replaces the earlier entry."""
        if source not in SOURCES:
            raise ValueError(f"source must be one of {', '.join(sorted(SOURCES))}, not {source!r}")
        path = Path(path).expanduser().absolute()
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise ModelStoreError(f"{path.name} cannot be added: {exc.strerror or exc}") from exc
        with self._changing():
            models = self._load()
            wanted = slug(model_id)
            kept = [
                m
                for m in models
                if not _same_file(m.path, path) and not (m.id == wanted and m.owned)
            ]
            model = LocalModel(
                id=_unique(wanted, kept),
                name=name.strip() or path.stem,
                path=path,
                source=source,
                repo=repo,
                file=file,
                size=size,
                sha256=sha256.lower() if sha256 else None,
                owned=True,
            )
            self._save([*kept, model])
            return model

    def remove(self, model_id: str) -> LocalModel:
        """Forget a model. A download Deskhand owns is deleted with its partial download; a
        user's own file never is, nor is anything outside the models folder."""
        with self._changing():
            models = self._load()
            wanted = model_id.strip().lower()
            model = next((m for m in models if m.id == wanted), None)
            if model is None:
                raise KeyError(f"There is no model called {model_id}")
            if model.owned:
                self._delete_owned(model)
            self._save([m for m in models if m.id != model.id])
            return model

    @contextlib.contextmanager
    def _changing(self) -> Iterator[None]:
        """One change of the list at a time (load, change, save), in this process and
        across processes: the window and `deskhand models` share it."""
        from filelock import FileLock

        self._make_dir(self.dir)
        with _lock, FileLock(self.dir / f"{REGISTRY}.lock", mode=0o600):
            yield

    def _delete_owned(self, model: LocalModel) -> None:
        """Delete a download's file and partial download, inside the models folder only."""
        if not _inside(model.path, self.dir):
            log.warning(
                "Not deleting %s: it is outside the models folder (the registry says it was "
                "downloaded, but Deskhand only deletes its own files)",
                model.path,
            )
        elif model.path.is_file() or model.path.is_symlink():
            try:
                model.path.unlink()
            except OSError as exc:
                raise ModelStoreError(
                    f"{model.path.name} could not be deleted: {exc.strerror or exc}"
                ) from exc
        self._delete_partials({model.path.name, model.file or model.path.name})

    def _delete_partials(self, names: set[str]) -> None:
        """Remove partial downloads named after the model's file from the downloads folder."""
        folder = self.dir / DOWNLOADS
        if not folder.is_dir() or not _inside(folder, self.dir):
            return  # a downloads folder linked elsewhere holds no partials of ours
        for root, _dirs, files in os.walk(folder, followlinks=False):
            for entry in files:
                if any(entry == n or entry.startswith(n + ".") for n in names):
                    try:
                        Path(root, entry).unlink()
                    except OSError as exc:
                        log.warning("Could not delete the partial download %s: %s", entry, exc)

    # -- the registry file ---------------------------------------------------------------

    def _make_dir(self, path: Path) -> None:
        try:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
            if os.name == "posix":
                for folder in {self.dir, path}:
                    if folder.is_dir() and not folder.is_symlink():
                        folder.chmod(0o700)
        except OSError as exc:
            raise ModelStoreError(
                f"The models folder {path} cannot be made: {exc.strerror or exc}"
            ) from exc

    def _load(self) -> list[LocalModel]:
        try:
            raw = self.registry.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ModelStoreError(f"The model list {REGISTRY} could not be read: {exc}") from exc
        try:
            doc = json.loads(raw)
            entries = doc["models"]
            if not isinstance(entries, list):
                raise ValueError("models is not a list")
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            return self._recover(f"it is not a readable model list ({exc})")
        models: list[LocalModel] = []
        for index, entry in enumerate(entries):
            model = self._entry(entry)
            if model is None or any(m.id == model.id for m in models):
                log.warning("Skipping entry %d of %s: it is damaged", index + 1, self.registry)
                continue
            models.append(model)
        return models

    def _entry(self, entry: Any) -> LocalModel | None:
        """A registry entry as a LocalModel; None when it is damaged."""
        if not isinstance(entry, dict):
            return None
        try:
            if "\0" in str(entry["path"]):
                return None  # no file system takes it; every use of it would raise
            path = Path(entry["path"])
            model = LocalModel(
                id=str(entry["id"]),
                name=str(entry["name"]),
                path=path if path.is_absolute() else self.dir / path,
                source=str(entry["source"]),
                repo=_optional(entry.get("repo")),
                file=_optional(entry.get("file")),
                size=int(entry["size"]),
                sha256=_optional(entry.get("sha256")),
                owned=entry["owned"] is True,
            )
        except (KeyError, TypeError, ValueError, OverflowError):  # size: JSON's 1e999
            return None
        if slug(model.id) != model.id or model.source not in SOURCES:
            return None
        return model

    def _recover(self, why: str) -> list[LocalModel]:
        """Keep the damaged registry aside and list the downloads still in the models folder."""
        kept = self.registry.with_name(REGISTRY + ".damaged")
        log.warning("%s: %s; keeping it as %s", self.registry, why, kept.name)
        try:
            shutil.copyfile(self.registry, kept)
        except OSError as exc:
            log.warning("Could not keep a copy of %s: %s", self.registry, exc)
        models: list[LocalModel] = []
        for path in sorted(self.dir.glob("*.gguf")):
            if path.is_file() and not path.is_symlink():
                size = path.stat().st_size
                models.append(
                    LocalModel(
                        id=_unique(slug(path.name), models),
                        name=path.stem,
                        path=path.absolute(),
                        source="file",
                        repo=None,
                        file=path.name,
                        size=size,
                        sha256=None,
                        owned=True,
                    )
                )
        return models

    def _save(self, models: list[LocalModel]) -> None:
        from app.core.atomic_file import atomic_write

        self._make_dir(self.dir)
        entries = []
        for model in models:
            entry = asdict(model)
            path = model.path
            entry["path"] = str(
                path.relative_to(self.dir) if _lexically_in(path, self.dir) else path
            )
            entries.append(entry)
        payload = json.dumps({"version": 1, "models": entries}, indent=2) + "\n"
        try:
            atomic_write(self.registry, payload.encode("utf-8"), mode=0o600)
        except OSError as exc:
            raise ModelStoreError(
                f"The model list {self.registry.name} cannot be saved: {exc.strerror or exc}"
            ) from exc


def _lexically_in(path: Path, folder: Path) -> bool:
    return Path(os.path.normpath(path)).is_relative_to(Path(os.path.normpath(folder.absolute())))


def _optional(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _same_file(a: Path, b: Path) -> bool:
    if os.path.normpath(a) == os.path.normpath(b):
        return True
    try:
        return a.samefile(b)
    except OSError:
        return False


def _unique(base: str, models: list[LocalModel]) -> str:
    taken = {m.id for m in models}
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"
