"""`KnowledgeService`: the one owner of knowledge folders — which may be added, indexing them
in the background (incremental, resumable, pausable), watching them for changes,
re-embedding when the embedder setting changes, and searching them.

The folders live in knowledge.db (the index owns them), not in settings. Indexing runs in
a child process per round (`worker.py`): parsing, masking and embedding share no GIL with
the window and their memory goes back when the child exits; a document that crashes a
reader costs that file only. The service's thread keeps the schedule and relays what the
child tells. Everything else that is slow — opening the index, loading the embedder —
happens on that thread or on the caller's; the window calls in from a worker, never on the
GUI thread. Listeners of `subscribe` are called on the service's thread (the window moves
them to its own)."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.core.knowledge.indexer import (
    DiskFull,
    FileIndexer,
    FolderGuard,
    Found,
    Outcome,
    Plan,
    Progress,
    State,
    Stopped,
    eta,
    is_disk_full,
    plan,
    too_many,
)
from app.core.knowledge.watch import RESCAN_SECONDS, Schedule

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

    from app.core.knowledge.embedding import Embedder
    from app.core.knowledge.index import FileState, Folder, FolderStats, Hit, KnowledgeIndex
    from app.core.knowledge.worker import Job
    from app.core.settings import Settings
    from tools.fs.sandbox import Sandbox
    from tools.redact import Tripwire

log = logging.getLogger(__name__)

KNOWLEDGE_DB = "knowledge.db"
#: The "account" of the built-in engine's embeddings in an embedder's name
#: ("provider:engine:<model>"): the runtime starts that local model to embed with.
ENGINE_EMBEDDINGS = "engine"
#: The progress of re-embedding every folder after the embedder changed: its `files_*`
#: count chunks.
REEMBED = 0
DISK_FULL = (
    "the disk is full: nothing indexed is lost; indexing goes on by itself once there is "
    "room again (or resume it)"
)
NO_FOLDERS = (
    "Deskhand may use no folders yet: choose them in Settings → Tools, then add a knowledge "
    "folder inside one of them"
)
PROTECTED = (
    "it is in a place protected in Settings → Files (or one Deskhand never reads): it is "
    "no longer searchable; remove it"
)
NOT_ALLOWED = (
    "it is no longer inside the folders Deskhand may use: allow it again in Settings → Tools, "
    "or remove it"
)
#: Progress is told to listeners at most this often (and on every change of state).
NOTIFY_SECONDS = 0.1
#: How long `close` waits for a file being read to be done.
CLOSE_WAIT = 10.0

#: A round gives up after this many children died inside files (each such file is named).
MAX_CHILD_DEATHS = 20
#: How long a child may take to stop after `close` before it is killed (a kill loses
#: nothing stored: each file is one transaction).
CHILD_STOP_WAIT = 3.0
CRASHED = (
    "reading it stopped Deskhand's indexer (the file may be damaged, or need more memory "
    "than there is): it is skipped until it changes"
)
CHILD_DIED = "the indexer stopped unexpectedly: it tries again at the next rescan (or resume it)"

#: (account id or None for the active one) -> (base URL, API key, account id)
ProviderLookup = Callable[[str | None], tuple[str, str | None, str]]


@dataclass(frozen=True)
class Choices:
    """What indexing needs of the settings, in plain values: the child process gets this
    rather than the settings themselves, which would cost it pydantic (about 16 MiB)."""

    embedder: str
    provider: str | None
    model: str
    active_provider: str | None
    roots: tuple[str, ...]
    roots_note: str | None
    denied: tuple[str, ...]

    @classmethod
    def of(cls, settings: Settings) -> Choices:
        from tools.fs.sandbox import effective_roots

        # As the user set them: no current-folder fallback, the index outlives this run.
        roots, note = effective_roots(settings, Path.cwd(), headless=False)
        return cls(
            embedder=settings.knowledge.embedder,
            provider=settings.knowledge.provider,
            model=settings.knowledge.model,
            active_provider=settings.active_provider,
            roots=tuple(str(r) for r in roots),
            roots_note=note,
            denied=tuple(str(d) for d in settings.files.denied_paths),
        )


def _stop_resource_tracker() -> None:
    """On Linux and macOS, `multiprocessing` starts a resource-tracker process with the first
    child and keeps it for good (about 13 MiB). The indexer shares no semaphores or shared
    memory with its child, so the tracker is stopped once the child has ended; the next
    child starts one again."""
    from multiprocessing import resource_tracker

    stop = getattr(getattr(resource_tracker, "_resource_tracker", None), "_stop", None)
    if stop is not None:
        with contextlib.suppress(Exception):
            stop()


class KnowledgeService:
    """Knowledge folders of one home. `settings` gives the current settings (allowed
    folders, protected places, the embedder choice); `provider` finds a provider account's
    address and key when the embedder is a provider's."""

    def __init__(
        self,
        home: Path,
        *,
        settings: Callable[[], Settings],
        tripwire: Tripwire | None = None,
        provider: ProviderLookup | None = None,
        rescan_seconds: float = RESCAN_SECONDS,
        embedder: Callable[[str, int | None], Embedder] | None = None,
        isolate: bool | None = None,
        keep_alive: Callable[[], None] | None = None,
    ) -> None:
        """`embedder`: makes the embedder of a name and known size (tests wrap it).
        `isolate`: index in a child process (`worker.py`); by default unless `embedder` is
        given (a child cannot use this process's objects). `keep_alive`: called while a
        child is heard from (the embedder it uses must not be unloaded meanwhile)."""
        from tools.redact import TRIPWIRE

        self.home = home
        self.db_path = home / KNOWLEDGE_DB
        self._settings = settings
        self._tripwire = tripwire or TRIPWIRE
        self._provider = provider
        self._keep_alive = keep_alive
        self._make = embedder or self._embedder_named
        self._lock = threading.RLock()
        self._idle = threading.Condition(self._lock)
        self._file_lock = threading.Lock()  # one file at a time; removal waits for it
        self._index: KnowledgeIndex | None = None
        self._embedder: Embedder | None = None
        self._retired: list[KnowledgeIndex] = []
        self._progress: dict[int, Progress] = {}
        self._told: dict[int, tuple[str, float]] = {}
        self._listeners: list[Callable[[Progress], None]] = []
        self._paused: dict[int, threading.Event] = {}
        self._cancelled: dict[int, threading.Event] = {}
        self._forced: set[int] = set()
        self._removed: set[int] = set()  # their progress is no longer told
        self._skip: dict[int, dict[str, FileState]] = {}
        self._disk_full = threading.Event()
        self._closing = threading.Event()
        self._schedule = Schedule(rescan_seconds)
        self._thread: threading.Thread | None = None
        self._busy = False
        self._watch = True
        self._only: set[int] | None = None
        self._isolate = embedder is None if isolate is None else isolate
        self._children: list[Connection] = []  # control ends of running children
        self._closing_since = 0.0

    # ------------------------------------------------------------------ folders

    def add_folder(self, path: str, conversation_id: str | None = None) -> Folder:
        """A folder (or one document) inside the allowed folders as knowledge, for every
        conversation or one. ValueError in plain words when it may not be added."""
        real = _real(path)
        sandbox = self._sandbox()
        if not sandbox.allowed_roots:
            raise ValueError(NO_FOLDERS)
        _check_exists(path, real)
        from tools.fs.sandbox import SandboxError

        try:
            sandbox.check(real, shown=path)
        except SandboxError as exc:
            raise ValueError(str(exc)) from None
        index = self._index_open()
        for other in index.folders(conversation_id):
            if real != Path(other.path) and _inside(real, Path(other.path)):
                scope = "in every conversation" if other.conversation_id is None else "here"
                raise ValueError(
                    f"{path} is already searchable {scope}, as part of the knowledge folder "
                    f"{other.path} (id {other.id})"
                )
        folder = index.add_folder(str(real), conversation_id)
        with self._lock:
            self._removed.discard(folder.id)  # SQLite may give a removed folder's id again
        self._ask([folder.id])
        return folder

    def add_attachment(self, conversation_id: str, path: Path) -> Folder:
        """A document attached to a conversation, indexed now (in the caller's thread) and
        searchable in that conversation only. It need not be in the allowed folders (the
        user picked it) but never in a protected place. ValueError when it cannot be read."""
        real = _real(str(path))
        _check_exists(str(path), real)
        if not real.is_file():
            raise ValueError(f"{path} is a folder: attach documents, or add it as knowledge")
        hit = self._sandbox().protected.match(real)
        if hit is not None:
            raise ValueError(
                f"{path} is in a protected place ({hit.label}): Deskhand never reads it"
            )
        index = self._index_open()
        folder = index.add_folder(str(real), conversation_id)
        with self._lock:
            self._removed.discard(folder.id)
        if self._isolate:
            self._in_child([folder.id])
        else:
            self._index_folder(folder, attachment=True, stop=self._closing.is_set)
        problem = dict(index.problems(folder.id)).get(str(real))
        ended = self.progress().get(folder.id)
        failed = ended is not None and ended.state != "idle"
        if failed or (problem and not index.stats(folder.id).files):
            self.remove_folder(folder.id)
            why = problem or (ended.message if ended else "") or "it could not be indexed"
            raise ValueError(f"{real.name}: {why}")
        return folder

    def folders(self, conversation_id: str | None = None) -> list[Folder]:
        """The global folders and `conversation_id`'s own."""
        return self._index_open().folders(conversation_id)

    def all_folders(self) -> list[Folder]:
        """Every folder, every conversation's too (what the worker indexes)."""
        return self._index_open().folders(all_conversations=True)

    def remove_folder(self, folder_id: int) -> None:
        """Stops indexing it and forgets everything indexed from it."""
        self._event(self._cancelled, folder_id).set()
        with self._lock:
            self._removed.add(folder_id)
        self._control("remove", folder_id)
        # never while one of its files is being stored: in this process the lock; a child
        # stores a file in one transaction, and a file row needs its folder's (foreign key)
        with self._file_lock:
            self._index_open().remove_folder(folder_id)
        with self._lock:
            self._progress.pop(folder_id, None)
            self._skip.pop(folder_id, None)
            self._forced.discard(folder_id)
            self._paused.pop(folder_id, None)
            self._cancelled.pop(folder_id, None)

    def pause(self, folder_id: int) -> None:
        """Stops indexing it after the file (or batch) under way, until `resume`."""
        index = self._index_open()
        with self._lock:  # the stored flag and the event change together
            index.set_paused(folder_id, True)
            self._event(self._paused, folder_id).set()
        self._control("pause", folder_id)
        self._set_state(folder_id, "paused")

    def resume(self, folder_id: int) -> None:
        index = self._index_open()
        with self._lock:
            index.set_paused(folder_id, False)
            self._event(self._paused, folder_id).clear()
            self._event(self._cancelled, folder_id).clear()
        self._disk_full.clear()
        self._ask([folder_id])

    def cancel(self, folder_id: int) -> None:
        """Stops the run under way; the folder stays as far as it got and waits (paused)
        until it is resumed or reindexed."""
        index = self._index_open()
        with self._lock:
            index.set_paused(folder_id, True)
            self._event(self._paused, folder_id).set()
            self._event(self._cancelled, folder_id).set()
        self._control("cancel", folder_id)
        self._set_state(folder_id, "cancelled")

    def reindex(self, folder_id: int) -> None:
        """Reads every file of the folder again (what was indexed stays searchable until
        each file's new version replaces it); problems are tried again."""
        with self._lock:
            self._forced.add(folder_id)
            self._skip.pop(folder_id, None)
        self.resume(folder_id)

    # ------------------------------------------------------------------ status

    def progress(self) -> dict[int, Progress]:
        with self._lock:
            return dict(self._progress)

    def subscribe(self, listener: Callable[[Progress], None]) -> Callable[[], None]:
        """`listener` hears every change of progress (on the indexing thread); returns how
        to stop hearing."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def stats(self, folder_id: int) -> FolderStats:
        return self._index_open().stats(folder_id)

    def problems(self, folder_id: int) -> list[tuple[str, str]]:
        return self._index_open().problems(folder_id)

    @property
    def embedder_name(self) -> str:
        """Who made the vectors searches use now."""
        return self._open()[1].name

    # ------------------------------------------------------------------ search

    def search(self, query: str, *, k: int = 8, conversation_id: str | None = None) -> list[Hit]:
        """The best passages for `query` in the folders this conversation sees; by words
        alone when the embedder cannot be reached."""
        from app.core.knowledge.embedding import EmbeddingError
        from app.core.knowledge.search import hybrid_search

        index, embedder = self._open()
        ids = [f.id for f in self._visible(index, conversation_id)]
        if not ids:
            return []

        def clean(hits: Sequence[Hit]) -> bool:
            return self._mask_late_secrets(index, embedder, hits)

        try:
            return hybrid_search(index, embedder, query, k=k, folder_ids=ids, clean=clean)
        except EmbeddingError as exc:
            log.warning("knowledge search by words only: %s", exc)
            found = index.search_text(query, k, ids)
            redactor = self._tripwire.redactor()
            return [h for h in found if redactor.text(h.text) == h.text]

    def _mask_late_secrets(
        self, index: KnowledgeIndex, embedder: Embedder, hits: Sequence[Hit]
    ) -> bool:
        """Chunks among `hits` holding a secret the tripwire learned after they were
        indexed, masked in the index (text, words and vector) as indexing masks; whether
        there were any. So no search answer depends on a secret's characters."""
        redactor = self._tripwire.redactor()
        holding = {h.chunk_id: h.text for h in hits if redactor.text(h.text) != h.text}
        if not holding:
            return False
        masked = {i: self._tripwire.shapes(redactor.text(t)) for i, t in holding.items()}
        vectors = embedder.embed(list(masked.values()))
        # one transaction; a chunk replaced meanwhile by the indexer is left alone (and a
        # write that fails fails the search: nothing holding the secret is answered)
        index.rewrite_chunks([(i, holding[i], masked[i]) for i in masked], vectors)
        return True

    def read(
        self, path: str, location: str | None = None, *, conversation_id: str | None = None
    ) -> list[Hit]:
        """A document's chunks in order (one section's if `location` names it), only from
        folders `conversation_id` sees (without one: the global folders), as `search`."""
        index = self._index_open()
        hits = index.chunks_of(path, [f.id for f in self._visible(index, conversation_id)])
        if location is not None:
            hits = [h for h in hits if h.location == location]
        return hits

    def _visible(self, index: KnowledgeIndex, conversation_id: str | None) -> list[Folder]:
        """Folders searchable now: one no longer allowed, or protected since, is not."""
        sandbox = self._sandbox()
        return [f for f in index.folders(conversation_id) if self._usable(sandbox, f)]

    def _usable(self, sandbox: Sandbox, folder: Folder) -> bool:
        """Still inside the allowed folders (an attachment need not be) and, by its path,
        in no protected place (an attachment neither: the user may protect it later)."""
        path = Path(folder.path)
        if self._attachment(folder):
            return sandbox.protected.by_path(path) is None
        return _allowed(sandbox, path)

    # ------------------------------------------------------------------ the worker

    def start(self, *, watch: bool = True, folders: Sequence[int] | None = None) -> None:
        """Index in the background: every folder (or `folders`), then, with `watch`, look
        for changes every little while until `close`."""
        with self._lock:
            if self._closing.is_set() or (self._thread is not None and self._thread.is_alive()):
                return
            self._watch = watch
            self._only = set(folders) if folders is not None else None
            self._busy = True
            self._thread = threading.Thread(target=self._run, name="knowledge-indexer", daemon=True)
        self._schedule.ask(everything=True)
        self._thread.start()

    def settings_changed(self) -> None:
        """The settings were saved: a changed embedder is switched to (and everything
        re-embedded) in the background; folders no longer allowed stop being indexed."""
        self._ask(everything=True)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Until the worker has nothing left to do (True), or `timeout` seconds (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._busy and self._thread is not None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def close(self) -> None:
        """Stops the worker (a file under way is left for next time) and closes the index;
        for good: a closed service starts and opens nothing again."""
        self._closing.set()
        self._control("close")
        self._schedule.ask()
        thread = self._thread
        if (
            thread is not None
            and thread.ident is not None
            and thread is not threading.current_thread()
        ):
            thread.join(CLOSE_WAIT)
            if thread.is_alive():
                log.warning("the knowledge indexer is still reading a file; not waiting")
                return
        with self._lock:
            for index in [*self._retired, *([self._index] if self._index else [])]:
                index.close()
            self._retired.clear()
            self._index = None
            closer = getattr(self._embedder, "close", None)
            if callable(closer):
                closer()

    def _run(self) -> None:
        try:
            while not self._closing.is_set():
                if self._schedule.pending():
                    if self._isolate:
                        self._child_round()
                    else:
                        self._round()
                with self._idle:
                    if not self._schedule.pending():
                        self._busy = False
                        self._idle.notify_all()
                if not self._watch and not self._schedule.pending():
                    break
                self._schedule.wait(self._closing)
                with self._lock:
                    self._busy = True
        except Exception:
            log.exception("the knowledge indexer stopped")
        finally:
            with self._idle:
                self._busy = False
                self._idle.notify_all()

    def _round(self) -> None:
        everything, asked = self._schedule.take()
        started = time.monotonic()
        self._disk_full.clear()
        if not self._switch_embedder():
            return
        folders = self.all_folders()
        if self._only is not None:
            folders = [f for f in folders if f.id in self._only]
        if not everything:
            folders = [f for f in folders if f.id in asked]
        for folder in folders:
            if self._closing.is_set() or self._disk_full.is_set():
                return
            self._index_folder(folder, attachment=self._attachment(folder), stop=self._stopped)
        if everything:
            self._schedule.scanned(time.monotonic() - started)

    def _stopped(self) -> bool:
        return self._closing.is_set() or self._disk_full.is_set()

    # ------------------------------------------------------------------ the child process

    def _child_round(self) -> None:
        """A round in a child process (`worker.py`), started only when there is something
        to do: folders asked for, the rescan due, or an embedder to switch to."""
        everything, asked = self._schedule.take()
        started = time.monotonic()
        self._disk_full.clear()
        folders = self.all_folders()
        if self._only is not None:
            folders = [f for f in folders if f.id in self._only]
        if not everything:
            folders = [f for f in folders if f.id in asked]
        else:  # a rescan: only folders where something changed start a child
            folders = [f for f in folders if f.id in asked or self._has_work(f)]
        if folders or self._embedder_to_switch():
            self._in_child([f.id for f in folders])
        if everything:
            self._schedule.scanned(time.monotonic() - started)

    def _has_work(self, folder: Folder) -> bool:
        """Whether a child would find anything to do in `folder`: the same walk and plan,
        here, without reading a file, so a rescan with nothing changed starts no process
        (its imports and the embedder cost about a second of CPU)."""
        if self._closing.is_set():
            return False
        with self._lock:
            shown = self._progress.get(folder.id)
        if folder.paused:  # said here, as a child's round would
            if shown is None or shown.state not in ("paused", "cancelled"):
                self._set_state(folder.id, "paused")
            return False
        sandbox = self._sandbox()
        if not self._usable(sandbox, folder):  # said once; said again if it changes
            return shown is None or shown.state != "error"
        with self._lock:
            if folder.id in self._forced:
                return True
            skip = dict(self._skip.get(folder.id, {}))
        root = Path(folder.path)
        try:
            todo = plan(
                self._index_open(),
                folder.id,
                root,
                FolderGuard(sandbox, root),
                skip=skip,
                should_stop=self._closing.is_set,
            )
        except Exception:  # the child will say what is wrong
            return True
        return bool(todo.changed or todo.removed or todo.stale_problems)

    def _embedder_to_switch(self) -> bool:
        """The settings ask for another embedder, or chunks wait to be re-embedded."""
        index = self._index_open()
        try:
            return self._wanted() != index.embedder_name or index.needs_reembed()
        except ValueError:
            return True  # the child says what is wrong with the choice

    def _in_child(self, folder_ids: list[int]) -> None:
        """Index these folders in child processes until done. A child that dies inside a
        file (a parser crashed, memory ran out) costs that file only: it is named as a
        problem, skipped until it changes, and a new child goes on with the rest."""
        for _ in range(MAX_CHILD_DEATHS):
            if self._closing.is_set():
                return
            died_in = self._one_child(folder_ids)
            self._follow_embedder()
            if died_in is None:
                return
            folder_id, found = died_in
            if found is None:
                message = CHILD_DIED
                for folder_id in folder_ids:
                    self._set_state(folder_id, "error", message)
                return
            from app.core.knowledge.index import FileState

            log.warning("the knowledge indexer died reading %s", found.path)
            self._skipped(folder_id, found.path, FileState(found.size, found.mtime_ns))
            if folder_id not in self._removed:
                self._write(self._index_open().record_problem, folder_id, found.path, CRASHED)

    def _one_child(self, folder_ids: list[int]) -> tuple[int, Found | None] | None:
        """Run one child to its end, relaying what it tells; None when it ended well,
        else (folder, the file it was reading or None) when it died."""
        import multiprocessing

        from app.core.knowledge.worker import child_main

        context = multiprocessing.get_context("spawn")
        inbox, outbox = context.Pipe(duplex=False)
        their_control, control = context.Pipe(duplex=False)
        process = context.Process(
            target=child_main,
            args=(self._job(folder_ids), outbox, their_control),
            name="deskhand-knowledge-indexer",
            daemon=True,
        )
        if self._closing.is_set():
            return None
        process.start()  # tens of ms: not under the lock `progress()` takes
        with self._lock:
            self._children.append(control)
            closing = self._closing.is_set()
        if closing:  # `close` told the children before this one was listed
            with contextlib.suppress(OSError):
                control.send(("close",))
        outbox.close()
        their_control.close()
        try:
            return self._relay(process, inbox)
        finally:
            with self._lock:
                self._children.remove(control)
            control.close()
            inbox.close()
            if not process.is_alive():
                _stop_resource_tracker()

    def _relay(self, process: BaseProcess, inbox: Connection) -> tuple[int, Found | None] | None:
        """Tell the listeners what the child tells, until it ends; kill it if it does not
        stop soon after `close`."""
        current: tuple[int, Found | None] = (0, None)
        ended = killed = False
        while True:
            if self._closing.is_set() and not killed:
                self._closing_since = self._closing_since or time.monotonic()
                if time.monotonic() - self._closing_since > CHILD_STOP_WAIT:
                    process.kill()
                    killed = True
            try:
                if not inbox.poll(0.1):
                    if not process.is_alive() and not inbox.poll(0):
                        break
                    continue
                message = inbox.recv()
                if self._keep_alive is not None:
                    self._keep_alive()
            except (EOFError, OSError):
                break
            kind = message[0]
            if kind == "progress":
                self._heard(message[1])
            elif kind == "file":
                current = (message[1], message[2])
            elif kind == "file_ended":
                current = (message[1], None)
            elif kind == "skip":
                self._skipped(message[1], message[2], message[3])
            elif kind == "forced_done":
                self._forced_done(message[1])
            elif kind == "end":
                ended = True
        process.join(CLOSE_WAIT)
        if ended or killed or self._closing.is_set():
            return None
        log.warning("the knowledge indexer ended with exit code %s", process.exitcode)
        return current

    def _heard(self, progress: Progress) -> None:
        """A child's progress; re-embedding means it switched embedder: searches follow."""
        if progress.folder_id == REEMBED and progress.state == "indexing":
            self._follow_embedder()
        if progress.state == "paused" and progress.message == DISK_FULL:
            self._disk_full.set()
        self._tell(progress)

    def _job(self, folder_ids: list[int]) -> Job:
        """What a child needs: a snapshot of the settings, of the secrets known, of the
        provider accounts it may embed with, and of what this process remembers."""
        from app.core.knowledge.worker import Job

        with self._lock:
            job = Job(
                home=self.home,
                choices=self._choices(),
                secrets=self._tripwire.known(),
                folders=list(folder_ids),
                skip={k: dict(v) for k, v in self._skip.items()},
                forced=set(self._forced),
                cancelled={k for k, e in self._cancelled.items() if e.is_set()},
                removed=set(self._removed),
            )
        names = {self._index_open().embedder_name}
        stored = _stored_embedder(self.db_path)
        if stored is not None:
            names.add(stored[0])
        with contextlib.suppress(ValueError):
            names.add(self._wanted())
        for name in names:
            if name.startswith("provider:") and self._provider is not None:
                account = name.split(":", 2)[1]
                try:
                    job.accounts[account] = self._provider(account)
                except Exception as exc:
                    job.accounts[account] = _plain(exc)
        return job

    def _follow_embedder(self) -> None:
        """Searches use the embedder the index was last opened with (a child switched)."""
        stored = _stored_embedder(self.db_path)
        with self._lock:
            current = self._index
            if stored is None or current is None or stored[0] == current.embedder_name:
                return
            # opened again on next use, with the embedder it was left with (kept open
            # until `close`: a search under way may still use it)
            self._retired.append(current)
            self._index, self._embedder = None, None

    def _control(self, *message: object) -> None:
        """Tell running children (pause, cancel, remove a folder, close)."""
        with self._lock:
            for control in self._children:
                with contextlib.suppress(OSError, ValueError):
                    control.send(message)

    # ------------------------------------------------------------------ one folder

    def _index_folder(self, folder: Folder, *, attachment: bool, stop: Callable[[], bool]) -> None:
        """Bring one folder up to date: scan, remove what is gone, index what changed."""
        paused = self._event(self._paused, folder.id)
        cancelled = self._event(self._cancelled, folder.id)
        index = self._index_open()
        with self._lock:  # the stored flag is the truth (another process may have changed it)
            folders = index.folders(all_conversations=True)
            now = next((f for f in folders if f.id == folder.id), None)
            if now is None:
                return  # removed
            if now.paused:
                paused.set()
            else:
                paused.clear()
                cancelled.clear()
        if now.paused:
            if not cancelled.is_set():
                self._set_state(folder.id, "paused")
            return

        def should_stop() -> bool:
            return stop() or paused.is_set() or cancelled.is_set()

        run = _Run(self, folder)
        try:
            self._index_plan(folder, run, attachment=attachment, should_stop=should_stop)
        except Stopped:
            state: State = "cancelled" if cancelled.is_set() else "paused"
            if self._disk_full.is_set():
                run.finish("paused", DISK_FULL)
            elif self._closing.is_set():
                run.finish("paused", "Deskhand closed: indexing goes on where it stopped")
            else:
                run.finish(state)
        except DiskFull:
            self._disk_full.set()
            run.finish("paused", DISK_FULL)
        except Exception as exc:  # the embedder failed, the index cannot be read…
            if is_disk_full(exc):
                self._disk_full.set()
                run.finish("paused", DISK_FULL)
                return
            log.warning("indexing %s failed", folder.path, exc_info=True)
            run.finish("error", _plain(exc))

    def _index_plan(
        self, folder: Folder, run: _Run, *, attachment: bool, should_stop: Callable[[], bool]
    ) -> None:
        index, embedder = self._open()
        root = Path(folder.path)
        sandbox = self._sandbox()
        if not self._usable(sandbox, folder):
            run.finish("error", PROTECTED if attachment else NOT_ALLOWED)
            return
        run.tell("scanning")
        with self._lock:
            force = folder.id in self._forced
            skip = self._skip.setdefault(folder.id, {})

        def on_problem(path: str, reason: str) -> None:
            if not should_stop():  # (a folder being removed keeps no problem)
                self._write(index.record_problem, folder.id, path, reason)

        todo = plan(
            index,
            folder.id,
            root,
            FolderGuard(sandbox, root),
            skip=skip,
            force=force,
            should_stop=should_stop,
            on_problem=on_problem,
        )
        for path in todo.removed:
            if should_stop():
                raise Stopped
            self._write(index.remove_file, folder.id, path)
        for path in todo.stale_problems:
            self._write(index.clear_problem, folder.id, path)
        if todo.changed:
            run.begin(todo)
        files = FileIndexer(index, embedder, self._tripwire, should_stop=should_stop)
        for found in todo.changed:
            if should_stop():
                raise Stopped
            self._file_started(folder.id, found)
            run.at(found)
            with self._file_lock:
                if should_stop():
                    raise Stopped
                outcome = self._one_file(files, folder.id, found)
                self._settle(index, folder.id, found, outcome, found.path in todo.previously)
            run.done(found)
            self._file_ended(folder.id)
        if todo.truncated:
            self._write(index.record_problem, folder.id, folder.path, too_many())
        self._forced_done(folder.id)
        run.finish("idle")

    def _one_file(self, files: FileIndexer, folder_id: int, found: Found) -> Outcome:
        try:
            return files.index_file(folder_id, found)
        except (Stopped, DiskFull):
            raise
        except Exception as exc:
            from app.core.knowledge.embedding import EmbeddingError

            if isinstance(exc, EmbeddingError) or is_disk_full(exc):
                raise
            log.warning("could not index %s", found.path, exc_info=True)
            return Outcome(False, problem=f"it could not be indexed ({_plain(exc)})")

    def _settle(
        self,
        index: KnowledgeIndex,
        folder_id: int,
        found: Found,
        outcome: Outcome,
        was_indexed: bool,
    ) -> None:
        """Record what became of one file."""
        from app.core.knowledge.index import FileState

        state = FileState(found.size, found.mtime_ns)
        if outcome.changed:
            return  # the next round reads it as it is then
        if outcome.indexed:
            if outcome.problem:
                self._write(index.record_problem, folder_id, found.path, outcome.problem)
            return
        self._skipped(folder_id, found.path, state)
        if outcome.gone and was_indexed:
            self._write(index.remove_file, folder_id, found.path)
        if outcome.not_a_document:
            if was_indexed:
                self._write(index.remove_file, folder_id, found.path)
            return
        self._write(index.record_problem, folder_id, found.path, outcome.problem)

    def _file_started(self, folder_id: int, found: Found) -> None:
        """A file is about to be read (a child tells its parent, which names it if the
        child dies reading it)."""

    def _file_ended(self, folder_id: int) -> None:
        """The file started last is settled."""

    def _skipped(self, folder_id: int, path: str, state: FileState) -> None:
        """Not read again until it changes: it failed or is no document."""
        with self._lock:
            self._skip.setdefault(folder_id, {})[path] = state

    def _forced_done(self, folder_id: int) -> None:
        """A reindex of the folder is done."""
        with self._lock:
            self._forced.discard(folder_id)

    @staticmethod
    def _write(action: Callable[..., None], *args: object) -> None:
        """An index write; a full disk becomes DiskFull."""
        try:
            action(*args)
        except Exception as exc:
            if is_disk_full(exc):
                raise DiskFull from exc
            raise

    # ------------------------------------------------------------------ embedders

    def _index_open(self) -> KnowledgeIndex:
        """The index alone: with the built-in embedder (the default) it opens without
        loading it, so adding, listing and indexing in a child cost this process no model
        (+38 MiB) until a search needs it."""
        from app.core.knowledge.embedding import BUILTIN_DIM, BUILTIN_NAME

        with self._lock:
            if self._index is not None:
                return self._index
            if self._closing.is_set():
                raise RuntimeError("the knowledge service is closed")
            stored = _stored_embedder(self.db_path)
            if self._make == self._embedder_named and (stored is None or stored[0] == BUILTIN_NAME):
                from app.core.knowledge.index import KnowledgeIndex

                dim = stored[1] if stored is not None else BUILTIN_DIM
                self._index = KnowledgeIndex(self.db_path, embedder_name=BUILTIN_NAME, dim=dim)
                return self._index
        return self._open()[0]

    def _open(self) -> tuple[KnowledgeIndex, Embedder]:
        """The index and the embedder its searches use, opened on first use: with the
        embedder the index was last used with (no network needed); `_switch_embedder`
        moves to the one the settings ask for."""
        with self._lock:
            if self._index is not None and self._embedder is not None:
                return self._index, self._embedder
            if self._closing.is_set():
                raise RuntimeError("the knowledge service is closed")
            from app.core.knowledge.embedding import BUILTIN_NAME
            from app.core.knowledge.index import KnowledgeIndex

            if self._index is not None:  # opened alone, with the built-in embedder
                self._embedder = self._make(BUILTIN_NAME, None)
                return self._index, self._embedder
            stored = _stored_embedder(self.db_path)
            embedder = None
            if stored is not None and stored[0] != BUILTIN_NAME:
                try:
                    embedder = self._make(*stored)
                except Exception as exc:  # the account is gone: the built-in one
                    log.warning("the knowledge embedder %s is unusable: %s", stored[0], exc)
            if embedder is None:
                embedder = self._make(BUILTIN_NAME, None)
            dim = stored[1] if stored is not None and stored[0] == embedder.name else embedder.dim
            self._index = KnowledgeIndex(self.db_path, embedder_name=embedder.name, dim=dim)
            self._embedder = embedder
            return self._index, embedder

    def _wanted(self) -> str:
        """The name of the embedder the settings ask for."""
        from app.core.knowledge.embedding import BUILTIN_NAME

        choices = self._choices()
        if choices.embedder == "builtin":
            return BUILTIN_NAME
        if choices.embedder == "engine":
            if not choices.model.strip():
                raise ValueError(
                    "no embedding model is chosen: name one of the built-in engine's models "
                    "(e.g. nomic-embed-text-v1.5)"
                )
            return f"provider:{ENGINE_EMBEDDINGS}:{choices.model.strip()}"
        account = choices.provider or choices.active_provider
        if not account:
            raise ValueError("no provider account is chosen for embeddings: choose one")
        if not choices.model.strip():
            raise ValueError("no embedding model is chosen: name one (e.g. nomic-embed-text)")
        return f"provider:{account}:{choices.model.strip()}"

    def _choices(self) -> Choices:
        return Choices.of(self._settings())

    def _switch_embedder(self) -> bool:
        """Moves to the embedder the settings ask for and re-embeds what the index holds
        from another; False when that cannot go on now (the worker tries again later)."""
        from app.core.knowledge.index import KnowledgeIndex

        index, current = self._open()
        try:
            wanted = self._wanted()
            if wanted != current.name:
                embedder = self._make(wanted, None)
                fresh = KnowledgeIndex(self.db_path, embedder_name=wanted, dim=embedder.dim)
                with self._lock:
                    self._retired.append(index)
                    self._index, self._embedder = fresh, embedder
                index, current = fresh, embedder
            if index.needs_reembed():
                self._reembed(index, current)
        except Exception as exc:
            if is_disk_full(exc):
                self._disk_full.set()
                self._tell(_progress(REEMBED, "paused", DISK_FULL))
                return False
            log.warning("could not switch the knowledge embedder", exc_info=True)
            self._tell(_progress(REEMBED, "error", _plain(exc)))
        return not self._stopped()

    def _reembed(self, index: KnowledgeIndex, embedder: Embedder) -> None:
        """Every chunk again with `embedder`, in batches, with progress (folder REEMBED)."""
        total = index.reembed_remaining()
        batch = 64
        started = time.monotonic()
        batches = 0

        def should_stop() -> bool:
            nonlocal batches
            done = min(total, batches * batch)
            batches += 1
            time.sleep(0)
            self._tell(
                Progress(
                    REEMBED,
                    done,
                    total,
                    done,
                    total,
                    _eta(started, done, total),
                    f"re-embedding with {embedder.name}",
                    "indexing",
                )
            )
            return self._stopped()

        index.reembed(embedder, batch=batch, should_stop=should_stop)
        state: State = "paused" if self._stopped() else "idle"
        left = index.reembed_remaining()
        self._tell(Progress(REEMBED, total - left, total, total - left, total, None, None, state))

    def _embedder_named(self, name: str, dim: int | None) -> Embedder:
        from app.core.knowledge.embedding import BUILTIN_NAME, ProviderEmbedder, builtin_embedder

        if name == BUILTIN_NAME:
            return builtin_embedder()
        _, account, model = name.split(":", 2)
        if self._provider is None:
            raise ValueError("provider embeddings are not available here")
        base_url, api_key, account_id = self._provider(account)
        return ProviderEmbedder(
            base_url=base_url, model=model, api_key=api_key, account=account_id, dim=dim
        )

    # ------------------------------------------------------------------ helpers

    def _sandbox(self) -> Sandbox:
        """The allowed folders minus protected places, Deskhand's home among them."""
        from tools.fs.sandbox import Sandbox

        choices = self._choices()
        return Sandbox(
            [Path(r) for r in choices.roots],
            [Path(d) for d in choices.denied],
            deskhand_home=self.home,
            note=choices.roots_note,
        )

    @staticmethod
    def _attachment(folder: Folder) -> bool:
        """One document of one conversation: attached there, so outside the allowed
        folders is fine."""
        return folder.conversation_id is not None and os.path.isfile(folder.path)

    def _ask(self, folder_ids: Sequence[int] = (), *, everything: bool = False) -> None:
        """The worker (if it runs) looks at these folders (or all) at once."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                self._busy = True
            self._schedule.ask(folder_ids, everything=everything)

    @staticmethod
    def _event(table: dict[int, threading.Event], folder_id: int) -> threading.Event:
        return table.setdefault(folder_id, threading.Event())

    def _set_state(self, folder_id: int, state: State, message: str = "") -> None:
        with self._lock:
            old = self._progress.get(folder_id)
        if old is None:
            self._tell(_progress(folder_id, state, message))
        else:
            self._tell(
                Progress(
                    old.folder_id,
                    old.files_done,
                    old.files_total,
                    old.bytes_done,
                    old.bytes_total,
                    None,
                    None,
                    state,
                    message,
                )
            )

    def _tell(self, progress: Progress, *, force: bool = False) -> None:
        """Keep `progress` and tell the listeners: every change of state, and otherwise at
        most every NOTIFY_SECONDS."""
        now = time.monotonic()
        with self._lock:
            if progress.folder_id in self._removed:
                return
            self._progress[progress.folder_id] = progress
            last = self._told.get(progress.folder_id)
            recent = last is not None and now - last[1] < NOTIFY_SECONDS
            if not force and recent and last is not None and last[0] == progress.state:
                return
            self._told[progress.folder_id] = (progress.state, now)
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(progress)
            except Exception:
                log.exception("a knowledge progress listener failed")


class _Run:
    """The progress of one folder's run: counts, bytes, the ETA."""

    def __init__(self, service: KnowledgeService, folder: Folder) -> None:
        self._service = service
        self._id = folder.id
        self._files_total = 0
        self._bytes_total = 0
        self._files_done = 0
        self._bytes_done = 0
        self._started = time.monotonic()
        self._current: str | None = None
        self._first = False

    def tell(self, state: State, message: str = "", *, force: bool = False) -> None:
        eta = _eta(self._started, self._bytes_done, self._bytes_total)
        self._service._tell(
            Progress(
                self._id,
                self._files_done,
                self._files_total,
                self._bytes_done,
                self._bytes_total,
                eta if state == "indexing" else None,
                self._current if state == "indexing" else None,
                state,
                message,
            ),
            force=force,
        )

    def begin(self, todo: Plan) -> None:
        """Told with the first file (`at`): listeners hear which file that is."""
        self._files_total = len(todo.changed)
        self._bytes_total = todo.bytes_total
        self._started = time.monotonic()
        self._first = True

    def at(self, found: Found) -> None:
        self._current = found.path
        self.tell("indexing", force=self._first)
        self._first = False

    def done(self, found: Found) -> None:
        self._files_done += 1
        self._bytes_done += found.size
        self.tell("indexing")

    def finish(self, state: State, message: str = "") -> None:
        self._current = None
        self.tell(state, message, force=True)


def _progress(folder_id: int, state: State, message: str = "") -> Progress:
    return Progress(folder_id, 0, 0, 0, 0, None, None, state, message)


def _eta(started: float, done: int, total: int) -> float | None:
    return eta(time.monotonic() - started, done, total)


def _real(path: str) -> Path:
    """Where `path` really is: `~` expanded, made absolute, every link resolved."""
    return Path(os.path.realpath(os.path.abspath(os.path.expanduser(path))))


def _check_exists(shown: str, real: Path) -> None:
    from app.core.documents.detect import SUPPORTED_WORDS, supported

    if not real.exists():
        raise ValueError(f"{shown} does not exist: check the path")
    if real.is_file() and not supported(real):
        raise ValueError(f"{shown} is not a document Deskhand reads. It reads {SUPPORTED_WORDS}")
    if not real.is_file() and not real.is_dir():
        raise ValueError(f"{shown} is neither a folder nor a document")


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _allowed(sandbox: Sandbox, real: Path) -> bool:
    """Inside an allowed folder and, by its path, in no protected place (cheap: no stat)."""
    return sandbox.is_inside_roots(real) and sandbox.protected.by_path(real) is None


def _plain(exc: BaseException) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__


def _stored_embedder(db_path: Path) -> tuple[str, int] | None:
    """The embedder (name, dimensions) the index was last opened with, read without
    opening it for writing; None for a new index."""
    if not db_path.exists():
        return None
    import apsw

    try:
        db = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return None
    try:
        rows = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('embedder', 'dim')"))
        return str(rows["embedder"]), int(rows["dim"])
    except (apsw.Error, KeyError, ValueError):
        return None
    finally:
        db.close()
