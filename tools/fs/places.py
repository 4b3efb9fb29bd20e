"""Matching a path against a catalogue of places by name AND by identity.

A place is refused or escalated whatever name reaches it: the same file under another name
(a hard link, a bind mount, a different letter case on a case-insensitive file system, a
symlinked parent) is still that file. So a path matches a place when

- its components start with the place's components (compared case-insensitively: matching
  too much is the safe side), or its final name matches one of the catalogue's name globs; or
- the (st_dev, st_ino) of the path itself or of any of its ancestors is the identity of a
  place that exists; or
- it is a regular file with more than one link (or a folder that is a mount point) whose
  identity is that of a file or folder INSIDE a place (the "deep" index, built on demand:
  hard links are rare, and walking e.g. browser profiles is not free).

Identities of the catalogue entries are cached per process and rebuilt when one of their
parent folders changes (a rename or creation changes the parent's mtime), checked at most
once a second. Same-file-system bind mounts of a folder INSIDE a place (not the place itself)
are only recognised when their st_dev differs from their parent's.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

Identity = tuple[int, int]

#: The deep index stops after this many entries; an unvouched multiply-linked file is refused.
DEEP_INDEX_MAX_ENTRIES = 200_000
#: Cached identities are re-validated (one stat per parent folder) at most this often. A
#: store created in between is still refused by name, and a hard link to a file in it by the
#: deep index (which is built from the disk, not from this cache).
REVALIDATE_SECONDS = 1.0


@dataclass(frozen=True)
class Hit:
    """Why a path matched: the catalogue `place`, its `label` and `how` it was recognised."""

    place: Path
    label: str
    how: str  # "path" | "name" | "identity"


def _fold(path: Path) -> tuple[str, ...]:
    return tuple(part.casefold() for part in path.parts)


def _identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino)


def _lstat(path: Path | str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (OSError, ValueError):
        return None


def _stat(path: Path | str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


@dataclass
class _Cached:
    signature: tuple[object, ...]
    ids: dict[Identity, int]
    checked: float


class _IdentityCache:
    """Identities of existing catalogue entries, shared by every `Places` with the same
    entries, valid while none of their parent folders changed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[Path, ...], _Cached] = {}

    def get(self, paths: tuple[Path, ...], parents: tuple[str, ...]) -> dict[Identity, int]:
        """Identity → index into `paths` (entries that exist; symlinks are followed)."""
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(paths)
            if cached is not None and now - cached.checked < REVALIDATE_SECONDS:
                return cached.ids
        signature = tuple(_signature(_stat(parent)) for parent in parents)
        if cached is not None and cached.signature == signature:
            cached.checked = now
            return cached.ids
        ids: dict[Identity, int] = {}
        for index, path in enumerate(paths):
            st = _stat(path)
            if st is not None:
                ids.setdefault(_identity(st), index)
        with self._lock:
            if len(self._cache) > 32:
                self._cache.clear()
            self._cache[paths] = _Cached(signature, ids, now)
        return ids

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()


def _signature(st: os.stat_result | None) -> tuple[object, ...]:
    return () if st is None else (st.st_dev, st.st_ino, st.st_mtime_ns)


_IDENTITIES = _IdentityCache()


class Places:
    """A catalogue of places (`entries`: absolute path → label) plus final-name globs."""

    def __init__(
        self, entries: Iterable[tuple[Path, str]], names: Iterable[tuple[str, str]] = ()
    ) -> None:
        unique: dict[Path, str] = {}
        for path, label in entries:
            unique.setdefault(Path(os.path.normpath(path)), label)
            # where a place really is (a symlinked ~/.ssh, a moved XDG folder)
            unique.setdefault(Path(os.path.realpath(path)), label)
        self.paths: tuple[Path, ...] = tuple(sorted(unique))
        self._labels = [unique[p] for p in self.paths]
        self._keys = [_fold(p) for p in self.paths]
        self._index: dict[tuple[str, ...], int] = {}
        for index, key in enumerate(self._keys):
            self._index.setdefault(key, index)
        self._depths = sorted({len(key) for key in self._keys})
        self._parents = tuple(sorted({str(p.parent) for p in self.paths}))
        self._names = [(pattern.casefold(), label) for pattern, label in names]
        self._names_re = re.compile(
            "|".join(f"(?P<n{i}>{fnmatch.translate(p)})" for i, (p, _) in enumerate(self._names))
            or "(?!)"
        )
        self._ids: dict[Identity, int] | None = None
        self._deep: dict[Identity, int] | None = None
        self._deep_complete = True

    def fresh(self) -> Places:
        """A copy sharing the catalogue but with its own on-demand deep index (one call's
        worth: the index reflects the disk when that call first needed it)."""
        copy = object.__new__(Places)
        copy.__dict__.update(self.__dict__)
        copy._ids = None
        copy._deep = None
        copy._deep_complete = True
        return copy

    # ---------------------------------------------------------------- by name

    def by_path(self, path: Path) -> Hit | None:
        """The place `path` lies in by its components, or whose name glob its name matches."""
        key = _fold(path)
        for depth in self._depths:
            if depth > len(key):
                break
            index = self._index.get(key[:depth])
            if index is not None:
                return Hit(self.paths[index], self._labels[index], "path")
        name = path.name.casefold()
        match = self._names_re.fullmatch(name) if name else None
        if match is not None and match.lastgroup is not None:
            return Hit(path, self._names[int(match.lastgroup[1:])][1], "name")
        return None

    def inside(self, tree: Path) -> list[Hit]:
        """Existing places located inside the tree `tree` (by name)."""
        key = _fold(tree)
        return [
            Hit(place, label, "path")
            for place, place_key, label in zip(self.paths, self._keys, self._labels, strict=True)
            if place_key[: len(key)] == key and os.path.lexists(place)
        ]

    # ------------------------------------------------------------ by identity

    def by_stat(self, st: os.stat_result, *, mount_point: bool = False) -> Hit | None:
        """The place an opened or stat'ed object IS (or lies in, for multiply-linked files)."""
        ids = self._identities()
        index = ids.get(_identity(st))
        if index is not None:
            return Hit(self.paths[index], self._labels[index], "identity")
        linked_file = stat.S_ISREG(st.st_mode) and st.st_nlink > 1
        if not (linked_file or (mount_point and stat.S_ISDIR(st.st_mode))):
            return None
        deep = self._deep_index()
        index = deep.get(_identity(st))
        if index is not None:
            return Hit(self.paths[index], self._labels[index], "identity")
        if linked_file and not self._deep_complete:
            return Hit(Path("?"), "a file with several names that could not be checked", "identity")
        return None

    def match(self, real: Path, *, follow_final: bool = True) -> Hit | None:
        """By name, then by the identity of `real` and of each of its ancestors.

        `real` is an absolute, resolved path (its parents contain no symlink). The final
        component is stat'ed without following a link when `follow_final` is False.
        """
        hit = self.by_path(real)
        if hit is not None:
            return hit
        final = _stat(real) if follow_final else _lstat(real)
        if final is not None:
            parent_st = _stat(real.parent)
            mount = parent_st is not None and parent_st.st_dev != final.st_dev
            hit = self.by_stat(final, mount_point=mount)
            if hit is not None:
                return hit
        return self.by_ancestors(real.parent)

    def by_ancestors(self, folder: Path) -> Hit | None:
        """The place a real folder is, or lies in, by identity (one stat per ancestor)."""
        chain = [folder, *folder.parents]
        stats = [_stat(p) for p in chain]
        for index, st in enumerate(stats):
            if st is None:
                continue
            above = stats[index + 1] if index + 1 < len(stats) else None
            mount = above is not None and above.st_dev != st.st_dev
            hit = self.by_stat(st, mount_point=mount)
            if hit is not None:
                return hit
        return None

    # ---------------------------------------------------------------- helpers

    def _identities(self) -> dict[Identity, int]:
        if self._ids is None:
            self._ids = _IDENTITIES.get(self.paths, self._parents)
        return self._ids

    def _deep_index(self) -> dict[Identity, int]:
        """Identities of multiply-linked files, and of folders, inside existing places."""
        if self._deep is not None:
            return self._deep
        deep: dict[Identity, int] = {}
        budget = DEEP_INDEX_MAX_ENTRIES
        for index, place in enumerate(self.paths):
            st = _lstat(place)
            if st is None or not stat.S_ISDIR(st.st_mode):
                continue
            for top, dirnames, filenames in os.walk(place, followlinks=False):
                for name in dirnames + filenames:
                    budget -= 1
                    if budget < 0:
                        self._deep_complete = False
                        self._deep = deep
                        return deep
                    entry = _lstat(os.path.join(top, name))
                    if entry is None:
                        continue
                    if stat.S_ISDIR(entry.st_mode) or (
                        stat.S_ISREG(entry.st_mode) and entry.st_nlink > 1
                    ):
                        deep.setdefault(_identity(entry), index)
        self._deep = deep
        return deep
