"""`deskhand knowledge …`: folders of documents the assistant searches (add, list, status,
remove, reindex, pause, resume), through the same KnowledgeService as the window.

What indexes here (`add`, `reindex`, `resume`, `status --watch`) runs in the foreground with
its progress on stderr; Ctrl-C stops it between files, and the next run goes on from there."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: building the parser stays light (`deskhand ask`)
    from app.core.knowledge.index import Folder
    from app.core.knowledge.indexer import Progress
    from app.core.knowledge.service import KnowledgeService
    from app.core.runtime import Runtime

EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130
#: Progress lines on stderr when it is not a terminal: at most one per this many seconds.
LINE_SECONDS = 2.0


def add_parsers(sub: Any) -> None:
    knowledge = sub.add_parser("knowledge", help="folders of documents the assistant searches")
    k_sub = knowledge.add_subparsers(dest="knowledge_command", required=True)
    add = k_sub.add_parser("add", help="add a folder (or one document) and index it")
    add.add_argument("path", help="a folder inside the folders Deskhand may use")
    add.add_argument("--conversation", metavar="ID", help="searchable in this conversation only")
    add.add_argument("--json", action="store_true", help="print the folder as JSON")
    lst = k_sub.add_parser("list", help="the knowledge folders")
    lst.add_argument("--json", action="store_true")
    status = k_sub.add_parser("status", help="what is indexed, and why some files are not")
    status.add_argument("id", nargs="?", type=int, help="one folder (default: every one)")
    status.add_argument(
        "--watch", action="store_true", help="index what changed first, showing progress"
    )
    status.add_argument("--json", action="store_true")
    for name, what in (
        ("remove", "remove a folder and everything indexed from it"),
        ("reindex", "read every file of a folder again"),
        ("pause", "stop indexing a folder until it is resumed"),
        ("resume", "index a paused folder again"),
    ):
        cmd = k_sub.add_parser(name, help=what)
        cmd.add_argument("id", type=int, help="the folder's id (see `deskhand knowledge list`)")


def run_knowledge(args: argparse.Namespace, runtime: Runtime) -> int:
    service = runtime.knowledge
    command = args.knowledge_command
    try:
        if command == "add":
            return _add(args, runtime, service)
        if command == "list":
            return _list(args, service)
        if command == "status":
            return _status(args, service)
        folder = _folder(service, args.id)
        if command == "remove":
            service.remove_folder(folder.id)
            print(f"Removed knowledge folder {folder.id} ({folder.path}) and its index")
            return EXIT_OK
        if command == "pause":
            service.pause(folder.id)
            print(f"Paused knowledge folder {folder.id}: `deskhand knowledge resume {folder.id}`")
            return EXIT_OK
        if command == "reindex":
            service.reindex(folder.id)
        else:
            service.resume(folder.id)
        return _index(service, [folder.id])
    except ValueError as exc:
        print(f"deskhand: knowledge: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _add(args: argparse.Namespace, runtime: Runtime, service: KnowledgeService) -> int:
    if args.conversation and runtime.store.get_conversation(args.conversation) is None:
        raise ValueError(f"there is no conversation {args.conversation!r}")
    folder = service.add_folder(args.path, args.conversation)
    if args.json:
        print(json.dumps(_row(service, folder), ensure_ascii=False), flush=True)
    else:
        print(f"Added knowledge folder {folder.id}: {folder.path}", flush=True)
    return _index(service, [folder.id], quiet=args.json)


def _list(args: argparse.Namespace, service: KnowledgeService) -> int:
    folders = service.all_folders()
    if args.json:
        print(json.dumps([_row(service, f) for f in folders], ensure_ascii=False))
        return EXIT_OK
    if not folders:
        print("No knowledge folders yet: add one with `deskhand knowledge add PATH`.")
    for folder in folders:
        print(_line(service, folder))
    return EXIT_OK


def _status(args: argparse.Namespace, service: KnowledgeService) -> int:
    folders = [_folder(service, args.id)] if args.id is not None else service.all_folders()
    code = EXIT_OK
    if args.watch and folders:
        code = _index(service, [f.id for f in folders], quiet=args.json)
        folders = [f for f in service.all_folders() if f.id in {g.id for g in folders}]
    if args.json:
        rows = [{**_row(service, f), "problems": _problems(service, f)} for f in folders]
        print(json.dumps(rows, ensure_ascii=False))
        return code
    if not folders:
        print("No knowledge folders yet: add one with `deskhand knowledge add PATH`.")
        return code
    print(f"Search by meaning: {service.embedder_name}")
    for folder in folders:
        print(_line(service, folder))
        for problem in _problems(service, folder):
            print(f"    {problem['path']}: {problem['reason']}")
    return code


def _index(service: KnowledgeService, folder_ids: list[int], *, quiet: bool = False) -> int:
    """Index these folders here and now, showing progress; Ctrl-C stops between files."""
    shown = _ProgressLines(quiet=quiet)
    unsubscribe = service.subscribe(shown)
    try:
        service.start(watch=False, folders=folder_ids)
        while not service.wait_idle(0.5):
            pass
    except KeyboardInterrupt:
        service.close()
        shown.end()
        print(
            "\nStopped: indexing goes on where it stopped the next time (the window, or "
            "`deskhand knowledge status --watch`).",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    finally:
        unsubscribe()
    shown.end()
    for folder_id in folder_ids:
        ended = service.progress().get(folder_id)
        if ended is not None and ended.state in ("error", "paused") and ended.message:
            print(f"deskhand: knowledge folder {folder_id}: {ended.message}", file=sys.stderr)
            return EXIT_USAGE if ended.state == "error" else EXIT_OK
    if not quiet:
        for folder_id in folder_ids:
            stats = service.stats(folder_id)
            problems = f"; {_count(stats.problems, 'problem')}" if stats.problems else ""
            print(
                f"Folder {folder_id}: {_count(stats.files, 'file')}, "
                f"{_count(stats.chunks, 'passage')}, {_mb(stats.bytes)} indexed{problems}"
            )
    return EXIT_OK


class _ProgressLines:
    """Progress on stderr: one line rewritten in place on a terminal, else a line on each
    change of state and every LINE_SECONDS in between (and the last one)."""

    def __init__(self, *, quiet: bool) -> None:
        self._quiet = quiet
        self._tty = sys.stderr.isatty()
        self._lock = threading.Lock()
        self._last = 0.0
        self._state: tuple[int, str] | None = None
        self._pending = ""
        self._width = 0

    def __call__(self, progress: Progress) -> None:
        if self._quiet:
            return
        text = _describe(progress)
        with self._lock:
            now = time.monotonic()
            changed = (progress.folder_id, progress.state) != self._state
            self._state = (progress.folder_id, progress.state)
            if self._tty:
                shown = text[:119]
                sys.stderr.write("\r" + shown.ljust(self._width))
                self._width = len(shown)
                sys.stderr.flush()
            elif changed or now - self._last >= LINE_SECONDS:
                print(text, file=sys.stderr, flush=True)
                self._last, self._pending = now, ""
            else:
                self._pending = text

    def end(self) -> None:
        with self._lock:
            if self._tty and self._width:
                sys.stderr.write("\n")
            elif self._pending:
                print(self._pending, file=sys.stderr)
            self._width, self._pending = 0, ""


def _describe(p: Progress) -> str:
    """'folder 2: indexing 12 of 40 files, 3.2 of 10.0 MB, about 5 s left: report.pdf'."""
    from pathlib import Path

    from app.core.knowledge.service import REEMBED

    who = "all folders" if p.folder_id == REEMBED else f"folder {p.folder_id}"
    if p.state == "indexing":
        unit = "passages" if p.folder_id == REEMBED else "files"
        text = f"{who}: indexing {p.files_done:,} of {p.files_total:,} {unit}"
        if p.folder_id != REEMBED:
            text += f", {_mb(p.bytes_done)} of {_mb(p.bytes_total)}"
        if p.eta_seconds is not None:
            text += f", about {_duration(p.eta_seconds)} left"
        if p.current:
            text += f": {Path(p.current).name}"
        return text
    words = {"idle": "up to date", "scanning": "looking for changes"}
    text = f"{who}: {words.get(p.state, p.state)}"
    return f"{text}: {p.message}" if p.message else text


def _folder(service: KnowledgeService, folder_id: int) -> Folder:
    found = next((f for f in service.all_folders() if f.id == folder_id), None)
    if found is None:
        raise ValueError(
            f"there is no knowledge folder {folder_id} (see `deskhand knowledge list`)"
        )
    return found


def _row(service: KnowledgeService, folder: Folder) -> dict[str, Any]:
    stats = service.stats(folder.id)
    return {
        "id": folder.id,
        "path": folder.path,
        "conversation": folder.conversation_id,
        "paused": folder.paused,
        "files": stats.files,
        "chunks": stats.chunks,
        "bytes": stats.bytes,
        "problems": stats.problems,
    }


def _line(service: KnowledgeService, folder: Folder) -> str:
    from app.core.visible import one_line

    stats = service.stats(folder.id)
    scope = f"conversation {folder.conversation_id}" if folder.conversation_id else "everywhere"
    state = ", paused" if folder.paused else ""
    problems = f", {_count(stats.problems, 'problem')}" if stats.problems else ""
    return (
        f"{folder.id}  {one_line(folder.path, 400)}  ({scope}{state}): "
        f"{_count(stats.files, 'file')}, {_count(stats.chunks, 'passage')}, "
        f"{_mb(stats.bytes)}{problems}"
    )


def _problems(service: KnowledgeService, folder: Folder) -> list[dict[str, str]]:
    return [{"path": p, "reason": r} for p, r in service.problems(folder.id)]


def _count(n: int, unit: str) -> str:
    return f"{n:,} {unit}" + ("" if n == 1 else "s")


def _mb(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"
