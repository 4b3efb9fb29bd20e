"""The indexing child process: one round over some knowledge folders, run by the same code as
in-process indexing (`KnowledgeService._round`), in a process of its own.

Why a process: parsing documents, masking them (the tripwire's regexes run over a whole
section) and embedding hold the GIL in long C calls, which stalled the window's GUI loop by
up to 100 ms; and what the parsers allocate (pymalloc arenas) never went back to the OS. A
child shares no GIL with the window, returns all its memory when it exits (after each round),
and a document that crashes a parser or exhausts memory takes down only the child: the
service names the file as a problem and goes on with the next.

The child is started with `multiprocessing`'s "spawn" (the same on Linux, macOS, Windows and
in the frozen bundle, whose launcher calls `freeze_support`). It gets a `Job` (a snapshot of
what indexing needs of the settings, `Choices`, in plain values; of the secrets the tripwire
knows, the provider accounts it may embed with, what the parent remembers of failed files)
and two one-way pipes: messages to the parent (progress, the file under way, files to skip,
the end) and control from it (pause, cancel, remove, close). The parent's end closing (the
window died) closes the child too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from app.core.knowledge.index import FileState
    from app.core.knowledge.indexer import Found
    from app.core.knowledge.service import Choices
    from app.core.settings import Settings

log = logging.getLogger(__name__)

#: (base URL, API key, account id), or why the account cannot be used.
Account = tuple[str, str | None, str] | str


@dataclass
class Job:
    """What one child round needs from the window's process."""

    home: Path
    choices: Choices
    secrets: set[str]
    folders: list[int]
    #: Provider accounts by id (None: the active one), resolved by the parent.
    accounts: dict[str | None, Account] = field(default_factory=dict)
    skip: dict[int, dict[str, FileState]] = field(default_factory=dict)
    forced: set[int] = field(default_factory=set)
    cancelled: set[int] = field(default_factory=set)
    removed: set[int] = field(default_factory=set)


def child_main(job: Job, messages: Connection, control: Connection) -> None:
    """The child's entry point: one round over `job.folders`, then exit."""
    logging.basicConfig(level=logging.WARNING, format="knowledge indexer: %(message)s")
    _step_aside()
    service = _child_service(job, messages)
    threading.Thread(
        target=_listen, args=(service, control), name="knowledge-control", daemon=True
    ).start()
    try:
        service.run_round(job.folders)
    except Exception:
        if not service.closing():  # closed while starting: nothing to say
            log.exception("the knowledge indexer stopped")
    finally:
        with contextlib.suppress(OSError):
            messages.send(("end",))
        service.close()


def _step_aside() -> None:
    """Lower priority, and first in line for the OOM killer (Linux): a document that
    exhausts memory costs this process, not the window."""
    with contextlib.suppress(OSError, AttributeError):
        os.nice(10)
    # Ctrl+C in a terminal reaches the whole group: the parent stops the child itself
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")


def _listen(service: Any, control: Connection) -> None:
    """Control messages from the parent until it closes its end (it closed or died)."""
    while True:
        try:
            message = control.recv()
        except (EOFError, OSError):
            service.stop_all()
            return
        service.control(*message)


def _no_settings() -> Settings:
    raise AssertionError("the child has the settings' choices only (Job.choices)")


def _child_service(job: Job, messages: Connection) -> Any:
    from app.core.knowledge.service import KnowledgeService
    from tools.redact import Tripwire

    class ChildService(KnowledgeService):
        """The service's round, telling the parent what happens."""

        def __init__(self) -> None:
            super().__init__(
                job.home,
                settings=_no_settings,
                tripwire=Tripwire(set(job.secrets)),
                provider=self._account,
                isolate=False,
            )
            self._skip = {k: dict(v) for k, v in job.skip.items()}
            self._forced = set(job.forced)
            self._removed = set(job.removed)
            self._send_lock = threading.Lock()
            for folder_id in job.cancelled:
                self._event(self._cancelled, folder_id).set()
            self.subscribe(lambda progress: self._send("progress", progress))

        def _choices(self) -> Choices:
            return job.choices

        def run_round(self, folders: list[int]) -> None:
            self._only = set(folders)
            self._schedule.ask(everything=True)
            self._round()

        def control(self, kind: str, folder_id: int = 0) -> None:
            if kind == "close":
                self.stop_all()
            elif kind == "pause":
                self._event(self._paused, folder_id).set()
            elif kind in ("cancel", "remove"):
                self._event(self._paused, folder_id).set()
                self._event(self._cancelled, folder_id).set()
                if kind == "remove":
                    with self._lock:
                        self._removed.add(folder_id)

        def stop_all(self) -> None:
            self._closing.set()

        def closing(self) -> bool:
            return self._closing.is_set()

        def _account(self, account: str | None) -> tuple[str, str | None, str]:
            found = job.accounts.get(account)
            if found is None:
                raise ValueError("provider embeddings are not available here")
            if isinstance(found, str):
                raise ValueError(found)
            return found

        def _file_started(self, folder_id: int, found: Found) -> None:
            self._send("file", folder_id, found)

        def _file_ended(self, folder_id: int) -> None:
            self._send("file_ended", folder_id)

        def _skipped(self, folder_id: int, path: str, state: FileState) -> None:
            super()._skipped(folder_id, path, state)
            self._send("skip", folder_id, path, state)

        def _forced_done(self, folder_id: int) -> None:
            super()._forced_done(folder_id)
            self._send("forced_done", folder_id)

        def _send(self, *message: object) -> None:
            with self._send_lock, contextlib.suppress(OSError, ValueError):
                messages.send(message)

    return ChildService()
