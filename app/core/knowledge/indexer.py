"""Indexing a knowledge folder: walk it (skipping what is never indexed), plan what changed
since the last run (size and mtime), and index one file at a time — read, redact, chunk,
embed in small batches, store in one transaction.

Only reads: documents are opened read-only by their readers and nothing is written inside
the folder. Text passes the tripwire BEFORE it is chunked or embedded, so neither the words
nor the vectors of the index hold a secret (search cannot be an oracle over one)."""

from __future__ import annotations

import errno
import fnmatch
import logging
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from app.core.documents.containers import size_words
from app.core.documents.detect import EXTENSIONS, OTHER_FORMATS, kind_of
from app.core.documents.limits import MAX_FILE_BYTES, MAX_READ_SECONDS

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from app.core.documents.model import DocumentText
    from app.core.knowledge.chunks import Chunk
    from app.core.knowledge.embedding import Embedder
    from app.core.knowledge.index import FileState, KnowledgeIndex
    from tools.fs.sandbox import Sandbox
    from tools.redact import Tripwire

log = logging.getLogger(__name__)

#: Text indexed from one document (about 500 dense pages); the rest is named as not read.
INDEX_MAX_CHARS = 2_000_000
#: Chunks embedded at a time: pause, cancel and the GUI thread get a turn between batches.
EMBED_BATCH = 32
#: Documents one folder may hold in the index: keeps a scan's memory bounded.
MAX_FOLDER_FILES = 200_000
#: Folders never walked into (besides hidden ones and virtual environments).
SKIPPED_FOLDERS = frozenset(
    {"node_modules", "__pycache__", "site-packages", "bower_components", "venv", "virtualenv"}
)
DELETED = "it was deleted or moved while it was being indexed"

State = Literal["scanning", "indexing", "paused", "idle", "cancelled", "error"]


@dataclass(frozen=True)
class Progress:
    """Where indexing one folder is. `message`: why it is paused or failed, in plain words."""

    folder_id: int
    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int
    eta_seconds: float | None
    current: str | None
    state: State
    message: str = ""


class Stopped(Exception):
    """Paused, cancelled or closing: the file under way is left for the next run."""


class DiskFull(Exception):
    """The index could not be written: the disk (or its quota) is full."""


# ---------------------------------------------------------------------------- walking


@dataclass(frozen=True)
class Found:
    """A file that may be a document: its real path, size and mtime, and which file it was
    when the folder was walked (device and inode)."""

    path: str
    size: int
    mtime_ns: int
    identity: tuple[int, int] = (0, 0)


def _found(path: str, st: os.stat_result) -> Found:
    return Found(path, st.st_size, st.st_mtime_ns, (st.st_dev, st.st_ino))


class FolderGuard:
    """What inside a knowledge folder is never indexed: hidden files and folders, folders of
    packages and virtual environments, links (never followed: no loop, no way out of the
    folder), and protected places — by path, by name and by file identity (tools/fs)."""

    def __init__(self, sandbox: Sandbox, root: Path) -> None:
        from tools.fs.protected import NAME_PATTERNS

        self._places = sandbox.protected
        # protected places inside the folder, known by path before walking
        self._inside = {str(p) for p in sandbox.protected_inside(root)}
        globs = "|".join(fnmatch.translate(pattern.casefold()) for pattern, _ in NAME_PATTERNS)
        self._names = re.compile(globs or "(?!)")

    def skip_folder(self, path: str, name: str, st: os.stat_result) -> bool:
        if name.startswith(".") or name in SKIPPED_FOLDERS or path in self._inside:
            return True
        if os.path.exists(os.path.join(path, "pyvenv.cfg")):  # a virtual environment
            return True
        return self._places.by_path(Path(path)) is not None or self._protected(st)

    def skip_file(self, path: str, name: str, st: os.stat_result) -> bool:
        """Its folder passed `skip_folder`: what is left is its own path, name and identity
        (cheap: 100,000 files are checked in well under a second)."""
        if name.startswith((".", "~$")) or path in self._inside:
            return True
        return self._names.fullmatch(name.casefold()) is not None or self._protected(st)

    def _protected(self, st: os.stat_result) -> bool:
        return self._places.by_stat(st) is not None


def walk(
    root: Path,
    guard: FolderGuard,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    on_problem: Callable[[str, str], None] = lambda path, reason: None,
) -> Iterator[Found]:
    """Every file under `root` that may be a document, one folder at a time (memory stays
    bounded by the deepest path, not by the number of files). `root` may be one file."""
    try:
        top = os.stat(root)
    except OSError as exc:
        on_problem(str(root), _os_reason(exc, "it cannot be opened"))
        return
    if stat.S_ISREG(top.st_mode):
        if not guard.skip_file(str(root), root.name, top):
            yield _found(str(root), top)
        return
    stack = [str(root)]
    while stack:
        if should_stop():
            raise Stopped
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    found = _entry(entry, guard, stack)
                    if found is not None:
                        yield found
        except OSError as exc:
            if folder == str(root):
                on_problem(folder, _os_reason(exc, "the folder cannot be read"))
            else:
                on_problem(folder, _os_reason(exc, "this folder cannot be read"))


def _entry(entry: os.DirEntry[str], guard: FolderGuard, stack: list[str]) -> Found | None:
    """One directory entry: a folder to walk into (pushed on `stack`), a candidate file,
    or nothing."""
    try:
        if entry.is_symlink():
            return None
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return None  # gone since the folder was listed
    if stat.S_ISDIR(st.st_mode):
        if not guard.skip_folder(entry.path, entry.name, st):
            stack.append(entry.path)
        return None
    if not stat.S_ISREG(st.st_mode) or guard.skip_file(entry.path, entry.name, st):
        return None
    suffix = os.path.splitext(entry.name)[1].lower()
    if suffix in OTHER_FORMATS:
        return None
    if suffix not in EXTENSIONS and st.st_size == 0:
        return None  # nothing to tell its kind by
    return _found(entry.path, st)


# ---------------------------------------------------------------------------- planning


@dataclass
class Plan:
    """What one run does: files new or changed since they were indexed (or last failed),
    files gone from the folder, and how much there is to read."""

    changed: list[Found] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    bytes_total: int = 0
    #: More documents than MAX_FOLDER_FILES: the rest are not indexed.
    truncated: bool = False
    #: Changed files the index holds an older version of.
    previously: set[str] = field(default_factory=set)
    #: Problems of files no longer there, and of folders (found again if still true).
    stale_problems: list[str] = field(default_factory=list)


def plan(
    index: KnowledgeIndex,
    folder_id: int,
    root: Path,
    guard: FolderGuard,
    *,
    skip: dict[str, FileState],
    force: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
    on_problem: Callable[[str, str], None] = lambda path, reason: None,
) -> Plan:
    """Compare the folder on disk with what the index holds. `skip`: files that are not
    documents or failed, by the state they had then (tried again once changed); `force`:
    every file is read again (reindex)."""
    from app.core.knowledge.index import FileState

    indexed = index.file_states(folder_id)
    result = Plan()
    seen = 0
    for found in walk(root, guard, should_stop=should_stop, on_problem=on_problem):
        state = FileState(found.size, found.mtime_ns)
        known = indexed.pop(found.path, None)
        if not force and (known == state or skip.get(found.path) == state):
            seen += 1
            continue
        if seen + len(result.changed) >= MAX_FOLDER_FILES:
            result.truncated = True
            continue
        result.changed.append(found)
        result.bytes_total += found.size
        if known is not None:
            result.previously.add(found.path)
    result.removed = sorted(indexed)  # indexed, but no longer in the folder
    present = {f.path for f in result.changed}
    gone = {path for path, _ in index.problems(folder_id)} - present
    result.stale_problems = sorted(p for p in gone if not os.path.lexists(p) or os.path.isdir(p))
    return result


# ---------------------------------------------------------------------------- one file


@dataclass(frozen=True)
class Outcome:
    """What became of one file: indexed (`chunks` stored), or not, with a reason."""

    indexed: bool
    chunks: int = 0
    problem: str = ""
    #: It turned out not to be a document (no problem to show).
    not_a_document: bool = False
    #: The file is no longer there.
    gone: bool = False
    #: It changed (or was swapped for another) while it was read: the next round reads it.
    changed: bool = False


@dataclass
class FileIndexer:
    """Indexes one file at a time into `index` with `embedder`; `tripwire` masks secrets
    first. `should_stop` is asked between embedding batches; `time.sleep(0)` between them
    lets other threads (the window's) run."""

    index: KnowledgeIndex
    embedder: Embedder
    tripwire: Tripwire
    should_stop: Callable[[], bool] = lambda: False
    batch: int = EMBED_BATCH
    time_limit: float = MAX_READ_SECONDS

    def index_file(self, folder_id: int, found: Found) -> Outcome:
        """Read, redact, chunk, embed and store `found`; problems become an Outcome, a
        stop raises Stopped, a full disk DiskFull. What was indexed before stays until the
        new version is stored whole."""
        from app.core.documents.model import DocumentError
        from app.core.documents.reader import read_document
        from app.core.knowledge.index import FileState

        path = Path(found.path)
        if found.size > MAX_FILE_BYTES:
            return Outcome(False, problem=too_large(found.size))
        if not _same_file(found):  # gone, or swapped (for a link) since the walk
            return Outcome(False, problem=DELETED, gone=True) if not path.exists() else CHANGED
        try:
            if path.suffix.lower() not in EXTENSIONS and kind_of(path) is None:
                return Outcome(False, not_a_document=True)
            document = read_document(path, max_chars=INDEX_MAX_CHARS, time_limit=self.time_limit)
        except FileNotFoundError:
            return Outcome(False, problem=DELETED, gone=True)
        except OSError as exc:
            return Outcome(False, problem=_os_reason(exc, "it cannot be read"))
        except DocumentError as exc:
            if not path.exists():
                return Outcome(False, problem=DELETED, gone=True)
            return Outcome(False, problem=exc.reason)
        if not _same_file(found):  # what was read may be another file's text
            return CHANGED
        redacted = self._redacted(document)
        vectors, chunks = self._embed(redacted)
        self._store(folder_id, found.path, FileState(found.size, found.mtime_ns), chunks, vectors)
        return Outcome(True, chunks=len(chunks), problem=_partly(redacted))

    def _redacted(self, document: DocumentText) -> DocumentText:
        """Known secrets and credential-shaped text masked, in the text, the labels and
        the notes on what was not read (they name labels)."""

        def mask(text: str) -> str:
            return self.tripwire.shapes(self.tripwire.text(text))

        sections = tuple(
            replace(s, label=mask(s.label), text=mask(s.text), more=mask(s.more))
            for s in document.sections
        )
        return replace(document, sections=sections, not_read=mask(document.not_read))

    def _embed(self, document: DocumentText) -> tuple[npt.NDArray[np.float32], list[Chunk]]:
        import numpy as np

        from app.core.knowledge.chunks import chunk_document

        chunks = chunk_document(document)
        parts = []
        for start in range(0, len(chunks), self.batch):
            if self.should_stop():
                raise Stopped
            batch = chunks[start : start + self.batch]
            parts.append(self.embedder.embed([c.text for c in batch]))
            time.sleep(0)  # a turn for the window's thread
        if self.should_stop():
            raise Stopped
        if not parts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32), chunks
        return np.concatenate(parts), chunks

    def _store(
        self,
        folder_id: int,
        path: str,
        state: FileState,
        chunks: list[Chunk],
        vectors: npt.NDArray[np.float32],
    ) -> None:
        try:
            self.index.replace_file(folder_id, path, state, chunks, vectors)
        except Exception as exc:
            if is_disk_full(exc):
                raise DiskFull from exc
            raise


def too_large(size: int) -> str:
    return (
        f"it is {size_words(size)}, more than the {size_words(MAX_FILE_BYTES)} Deskhand "
        "indexes from one file: split it into smaller files to make it searchable"
    )


CHANGED = Outcome(False, changed=True)


def _same_file(found: Found) -> bool:
    """`found` is still the regular file the walk saw, under its own real path: neither
    it nor a folder above it was swapped for a link (to a protected file) since."""
    try:
        st = os.lstat(found.path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or os.path.realpath(found.path) != found.path:
        return False
    return found.identity == (0, 0) or found.identity == (st.st_dev, st.st_ino)


def too_many() -> str:
    return (
        f"it holds more than {MAX_FOLDER_FILES:,} documents: only that many are searchable; "
        "add its subfolders as knowledge folders of their own"
    )


def eta(elapsed: float, done: int, total: int) -> float | None:
    """Seconds left at the rate so far (`done` of `total` bytes in `elapsed` seconds); None
    until there is a rate to go by, 0 when all is done."""
    if total <= done:
        return 0.0
    if done <= 0 or elapsed < 0.5:
        return None
    return (total - done) * elapsed / done


def is_disk_full(exc: BaseException) -> bool:
    """The database could not grow: SQLITE_FULL, or ENOSPC/EDQUOT from the OS."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if type(seen).__name__ == "FullError":  # apsw.FullError (SQLITE_FULL)
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _partly(document: DocumentText) -> str:
    """A note when only part of a document was indexed; "" when all of it was."""
    unread = [f"in {s.label}, {s.more}" for s in document.sections if s.more]
    if document.not_read:
        unread.append(document.not_read)
    if not unread:
        return ""
    return "only part of it is searchable; not read: " + "; ".join(unread)


def _os_reason(exc: OSError, what: str) -> str:
    return f"{what} ({exc.strerror or exc})"
