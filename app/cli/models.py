"""`deskhand models …`: the built-in engine's models (list, pull, add, rm, info), through
the same LocalModels as the window.

`pull` shows its progress on stderr (bytes, speed, time left); Ctrl-C stops it and keeps
what was downloaded, and pulling again goes on from there."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.plain_units import duration_text, size_text

if TYPE_CHECKING:  # imported where used: building the parser stays light (`deskhand ask`)
    from app.core.engine.download import DownloadProgress
    from app.core.engine.models import LocalModels, ModelState
    from app.core.runtime import Runtime

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
#: Progress lines on stderr when it is not a terminal: at most one per this many seconds.
LINE_SECONDS = 2.0


def add_parsers(sub: Any) -> None:
    models = sub.add_parser("models", help="models the built-in engine runs on this computer")
    m_sub = models.add_subparsers(dest="models_command", required=True)
    lst = m_sub.add_parser("list", help="downloaded models (and, with --available, the catalogue)")
    lst.add_argument(
        "--available", action="store_true", help="the catalogue, with what fits this computer"
    )
    lst.add_argument("--json", action="store_true")
    pull = m_sub.add_parser("pull", help="download a model, check it, and add it")
    pull.add_argument(
        "model", help="a catalogue id (see `list --available`) or owner/repository/file.gguf"
    )
    pull.add_argument("--use", action="store_true", help="make it the model Deskhand talks to")
    add = m_sub.add_parser("add", help="add a GGUF model file you already have (not copied)")
    add.add_argument("path")
    add.add_argument("--use", action="store_true", help="make it the model Deskhand talks to")
    use = m_sub.add_parser("use", help="make a downloaded model the one Deskhand talks to")
    use.add_argument("model")
    rm = m_sub.add_parser("rm", help="remove a model (a file you added yourself is kept)")
    rm.add_argument("model")
    info = m_sub.add_parser("info", help="what a model is, and what the engine does with it")
    info.add_argument("model")
    info.add_argument("--json", action="store_true")


def run_models(args: argparse.Namespace, runtime: Runtime) -> int:
    from app.core.engine.download import DownloadCancelled, DownloadError
    from app.core.engine.engine import EngineError
    from app.core.engine.models import ModelError

    models = runtime.local_models
    command = args.models_command
    try:
        if command == "list":
            return _list(args, models)
        if command == "pull":
            return _pull(args, runtime, models)
        if command == "add":
            model = models.add_file(Path(args.path).expanduser())
            print(f"Added {model.name} as {model.id} (the file stays where it is)")
            return _maybe_use(args.use, runtime, models, model.id)
        if command == "use":
            return _maybe_use(True, runtime, models, args.model)
        if command == "rm":
            removed = models.remove(args.model)
            kept = "" if removed.owned else f"; your file {removed.path} is kept"
            print(f"Removed {removed.name}{kept}")
            return EXIT_OK
        return _info(args, models)
    except DownloadCancelled:
        print("\ndeskhand: models: stopped; pull again to go on from here", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ModelError, DownloadError, EngineError, ValueError, OSError) as exc:
        # OSError: the models folder or its list (ModelStoreError) cannot be used
        print(f"deskhand: models: {exc}", file=sys.stderr)
        failed = isinstance(exc, DownloadError | EngineError | OSError)
        return EXIT_FAILED if failed else EXIT_USAGE


def _list(args: argparse.Namespace, models: LocalModels) -> int:
    if args.available:
        return _available(args, models)
    states = models.states()
    if args.json:
        print(json.dumps([_state_row(s) for s in states], indent=2))
        return EXIT_OK
    if not states:
        recommended = models.recommended()
        hint = f" (recommended here: {recommended.id})" if recommended else ""
        print(f"No models yet. `deskhand models list --available` shows the catalogue{hint}.")
        return EXIT_OK
    for state in states:
        print(_state_line(state))
    return EXIT_OK


def _available(args: argparse.Namespace, models: LocalModels) -> int:
    from app.core.engine.catalogue import this_machine

    machine = this_machine()
    rows: list[dict[str, Any]] = [
        {
            "id": offer.model.id,
            "name": offer.model.name,
            "purpose": offer.model.purpose,
            "size": offer.model.size,
            "ram": offer.model.ram_bytes,
            "licence": offer.model.licence,
            "tools": offer.model.tools,
            "fits": offer.fits,
            "recommended": offer.recommended,
            "downloaded": offer.downloaded,
            "partly_downloaded": offer.partial,
        }
        for offer in models.offers(machine)
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    memory, free = size_text(machine.ram_total), size_text(machine.ram_available)
    print(f"This computer: {memory} of memory, {free} free")
    for row in rows:
        marks = [
            "recommended" if row["recommended"] else "",
            "downloaded" if row["downloaded"] else "",
            "partly downloaded: pull to go on" if row["partly_downloaded"] else "",
            "" if row["fits"] else "too large for this computer",
        ]
        note = ", ".join(m for m in marks if m)
        print(
            f"  {row['id']:<28} {row['name']} — {size_text(row['size'])} download, needs "
            f"{size_text(row['ram'])} of memory; tool calls: {row['tools']}; {row['licence']}"
            + (f"  [{note}]" if note else "")
        )
    return EXIT_OK


def _pull(args: argparse.Namespace, runtime: Runtime, models: LocalModels) -> int:
    line = _ProgressLine()
    cancel = threading.Event()
    outcome: dict[str, Any] = {}

    def download() -> None:
        try:
            outcome["model"] = models.pull(args.model, progress=line.show, cancel=cancel)
        except BaseException as exc:  # handed to the main thread
            outcome["error"] = exc

    worker = threading.Thread(target=download, name="models-pull", daemon=True)
    worker.start()
    try:
        while worker.is_alive():  # Ctrl-C reaches the main thread only: it stays free for it
            worker.join(0.2)
    except KeyboardInterrupt:
        cancel.set()  # the download stops between chunks and keeps what it has
        worker.join()
    finally:
        line.end()
    if "error" in outcome:
        raise outcome["error"]
    model = outcome["model"]
    print(f"Downloaded and checked {model.name} ({size_text(model.size)}) as {model.id}")
    use = args.use or runtime.settings.active_provider_account() is None
    return _maybe_use(use, runtime, models, model.id)


def _maybe_use(use: bool, runtime: Runtime, models: LocalModels, name: str) -> int:
    if not use:
        print(f'Use it with: deskhand ask --model {name} "…"  (or `deskhand models use {name}`)')
        return EXIT_OK
    model = models.find(name)
    models.use(model)
    print(f"Deskhand now talks to {model.name} in the built-in engine")
    return EXIT_OK


def _info(args: argparse.Namespace, models: LocalModels) -> int:
    from app.core.engine.gguf import GgufError, read_gguf_info

    model = models.find(args.model)
    state = next((s for s in models.states() if s.model.id == model.id), None)
    row = _state_row(state) if state else {"id": model.id}
    try:
        gguf = read_gguf_info(model.path)
        row |= {
            "architecture": gguf.architecture,
            "quantisation": gguf.file_type,
            "trained_context": gguf.context_length,
            "chat_template": gguf.chat_template,
        }
    except GgufError as exc:
        row["problem"] = str(exc)
    if args.json:
        print(json.dumps(row, indent=2))
        return EXIT_OK
    for key, value in row.items():
        if value not in (None, ""):
            print(f"{key.replace('_', ' ')}: {value}")
    return EXIT_OK


def _state_row(state: ModelState) -> dict[str, Any]:
    model = state.model
    return {
        "id": model.id,
        "name": model.name,
        "file": str(model.path),
        "size": model.size,
        "source": model.source,
        "repository": model.repo,
        "sha256": model.sha256,
        "loaded": state.loaded,
        "memory_in_use": state.rss_bytes,
        "engine_choice": state.choice,
        "last_exit": state.last_exit,
    }


def _state_line(state: ModelState) -> str:
    model = state.model
    where = "loaded, " + size_text(state.rss_bytes) + " in use" if state.loaded else "not loaded"
    died = f"; it stopped last time: {state.last_exit}" if state.last_exit else ""
    return f"{model.id:<28} {model.name} — {size_text(model.size)}, {where}{died}"


class _ProgressLine:
    """One line of download progress on stderr: rewritten in a terminal, else a line at
    most every LINE_SECONDS."""

    def __init__(self) -> None:
        self._tty = sys.stderr.isatty()
        self._width = 0
        self._last = 0.0

    def show(self, progress: DownloadProgress) -> None:
        text = describe(progress)
        now = time.monotonic()
        if self._tty:
            sys.stderr.write("\r" + text.ljust(self._width))
            self._width = len(text)
            sys.stderr.flush()
        elif now - self._last >= LINE_SECONDS or progress.done >= progress.total:
            print(text, file=sys.stderr, flush=True)
            self._last = now

    def end(self) -> None:
        if self._tty and self._width:
            sys.stderr.write("\n")


def describe(progress: DownloadProgress) -> str:
    """'412.3 of 1,117.3 MB, 18.2 MB/s, about 39 s left'."""
    mb = 1e6
    text = f"{progress.done / mb:,.1f} of {progress.total / mb:,.1f} MB"
    if progress.bytes_per_s > 0:
        text += f", {progress.bytes_per_s / mb:,.1f} MB/s"
    if progress.eta_s is not None:
        text += f", about {duration_text(progress.eta_s)} left"
    return text
