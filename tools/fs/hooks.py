"""The file tools' manifest hooks: `escalate` (changes that make something run count as
EXECUTE), `subject` (the resolved paths a call acts on) and `summary_line` (one plain line).

Classification happens before the call is approved; the tool body runs later. So the
`escalate` hook records what it saw on the call's ToolContext, and the changing tools call
`verify` first: if the paths now resolve elsewhere (a symlink swapped in between), or the
change now makes something run that was not approved as such, the call is refused.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.fs import autorun
from tools.fs.manifest import (
    CopyPath,
    DeletePath,
    EditFile,
    FileInfo,
    ListDir,
    MovePath,
    ReadFile,
    SearchFiles,
    WriteFile,
)
from tools.fs.sandbox import Sandbox, SandboxError
from tools.spec import Escalation, Subject, ToolContext

_RECORD_ATTRIBUTE = "_fs_classified"


@dataclass(frozen=True)
class Classification:
    """What one changing call was classified as: its resolved paths and, when the change
    makes something run, the reason (None otherwise)."""

    paths: tuple[str, ...]
    reason: str | None


# ------------------------------------------------------------------ paths


def _paths(args: Any, sandbox: Sandbox, *, check: bool = False) -> tuple[Path, ...]:
    """The real paths a call acts on, computed exactly as the tool computes them; with
    `check`, refused (SandboxError) as the tool would refuse them."""
    find = sandbox.resolve if check else sandbox.locate
    if isinstance(args, MovePath):
        return (
            find(args.source, follow_final=False),
            find(args.destination, follow_final=False),
        )
    if isinstance(args, CopyPath):
        return (find(args.source), find(args.destination, follow_final=False))
    follow = not isinstance(args, DeletePath | FileInfo)
    return (find(args.path, follow_final=follow),)


def _shown(path: Path, home: Path) -> str:
    """The path with the home folder written as ~."""
    try:
        relative = path.relative_to(home)
    except ValueError:
        return str(path)
    return "~" if not relative.parts else f"~/{relative.as_posix()}"


# ------------------------------------------------------------------ subject


def subject(args: Any, ctx: ToolContext) -> Subject:
    sandbox = Sandbox.from_context(ctx)
    paths = _paths(args, sandbox)
    folders = [p if os.path.isdir(p) else p.parent for p in paths]
    try:
        common = Path(os.path.commonpath(folders))
    except ValueError:
        common = folders[0]
    return Subject(
        paths=tuple(str(p) for p in paths), target=f"Files · {_shown(common, sandbox.home)}"
    )


# ------------------------------------------------------------------ escalate


def classify(args: Any, sandbox: Sandbox) -> Classification:
    """The paths and the auto-run reason (if any) of a changing call, as of now. Raises
    SandboxError for a path the tool would refuse."""
    paths = _paths(args, sandbox, check=True)
    places = autorun.autorun_places(sandbox.home)
    reason: str | None
    if isinstance(args, WriteFile | EditFile):
        verb = "writes" if isinstance(args, WriteFile) else "edits"
        reason = _changed_in_place(paths[0], places, verb)
    elif isinstance(args, MovePath | CopyPath):
        reason = _transfer(args, paths[0], paths[1], places)
    else:
        reason = None
    return Classification(tuple(str(p) for p in paths), reason)


def escalate(args: Any, ctx: ToolContext) -> Escalation | None:
    """EXECUTE for a change that makes something run; never covered by a rule."""
    sandbox = Sandbox.from_context(ctx)
    try:
        found = classify(args, sandbox)
    except SandboxError:
        return None  # the tool itself refuses the path; nothing to ask
    records = ctx.__dict__.setdefault(_RECORD_ATTRIBUTE, {})
    records[type(args).__name__] = found
    if found.reason is None:
        return None
    return Escalation(found.reason, never_covered=True)


def verify(args: Any, ctx: ToolContext, sandbox: Sandbox) -> None:
    """Refuse a changing call whose classification changed since it was approved, or that
    makes something run without having been classified (approved) as such."""
    now = classify(args, sandbox)
    record: Classification | None = ctx.__dict__.get(_RECORD_ATTRIBUTE, {}).get(
        type(args).__name__
    )
    if record is not None and record.paths != now.paths:
        raise SandboxError(
            "The paths of this call now lead somewhere else than when it was checked "
            f"({', '.join(record.paths)} → {', '.join(now.paths)}); refused for safety. "
            "Retry the call."
        )
    if now.reason is None:
        return
    if record is None or record.reason != now.reason:
        raise SandboxError(
            f"Refused: this call {now.reason}. Such a change needs a person's approval each "
            "time, and it was not asked for."
        )


def _changed_in_place(real: Path, places: Any, verb: str) -> str | None:
    found = autorun.classify(real, places)
    if found is not None:
        return found.reason(verb)
    try:
        st = os.stat(real)
    except OSError:
        return None
    if autorun.is_executable(st) and autorun.on_path(real):
        return autorun.AutoRun(*autorun.ON_PATH, real).reason(verb)
    return None


def _transfer(
    args: MovePath | CopyPath, source: Path, destination: Path, places: Any
) -> str | None:
    moving = isinstance(args, MovePath)
    verb = "moves" if moving else "copies"
    found = autorun.classify(destination, places, follow_final=False)
    if found is not None:
        return found.reason(f"{verb} '{source.name}' into place as")
    try:
        st = os.lstat(source) if moving else os.stat(source)
    except OSError:
        return None  # the tool reports the missing source
    new_folder = source.parent != destination.parent or not moving
    if stat.S_ISDIR(st.st_mode):
        scan = autorun.scan_tree(source, destination, places)
        if scan.too_big:
            return (
                f"{verb} a folder too large to check (more than {autorun.TREE_MAX_ENTRIES} "
                "entries) for programs and files that run by themselves"
            )
        if scan.autorun is not None:
            return scan.autorun.reason(f"{verb} a folder that would put in place")
        if scan.executables and new_folder:
            plural = "s" if scan.executables > 1 else ""
            return (
                f"{verb} a folder holding {scan.executables} program{plural} (executable "
                f"files) to {destination}: they can then be run"
            )
        return None
    if not autorun.is_executable(st):
        return None
    if autorun.on_path(destination):
        return autorun.AutoRun(*autorun.ON_PATH, destination).reason(verb)
    if new_folder:
        return f"{verb} a program (an executable file) to {destination}: it can then be run"
    return None


# ------------------------------------------------------------------ summary_line


def summary_line(args: Any, ctx: ToolContext) -> str:
    sandbox = Sandbox.from_context(ctx)
    try:
        paths = _paths(args, sandbox, check=True)
    except SandboxError:  # refused by the tool anyway: describe the call as written
        paths = ()
    shown = [_shown(p, sandbox.home) for p in paths]
    first = shown[0] if shown else str(getattr(args, "path", getattr(args, "source", "?")))
    if isinstance(args, WriteFile):
        return _write_summary(args, first)
    if isinstance(args, EditFile):
        which = "every occurrence" if args.replace_all else "one piece of text"
        return f"Edit {first} (replace {which})"
    if isinstance(args, MovePath | CopyPath):
        return _transfer_summary(args, paths, sandbox.home)
    if isinstance(args, DeletePath):
        return _delete_summary(args, paths[0] if paths else None, first)
    if isinstance(args, ReadFile):
        if args.start_line or args.end_line:
            return f"Read {first} (lines {args.start_line or 1}–{args.end_line or 'end'})"
        return f"Read {first}"
    if isinstance(args, ListDir):
        return f"List the folder {first}"
    if isinstance(args, SearchFiles):
        containing = f" containing “{args.content}”" if args.content else ""
        return f"Search {first} for {args.pattern}{containing}"
    if isinstance(args, FileInfo):
        return f"Show details of {first}"
    return f"Use {first}"


def _lines(text: str) -> str:
    count = text.count("\n") + (bool(text) and not text.endswith("\n"))
    return f"{count} line{'s' if count != 1 else ''}"


def _write_summary(args: WriteFile, shown: str) -> str:
    if args.mode == "append":
        return f"Append {_lines(args.content)} to {shown}"
    if args.mode == "create_only":
        return f"Create {shown} with {_lines(args.content)}"
    return f"Write {_lines(args.content)} to {shown}"


def _transfer_summary(args: MovePath | CopyPath, paths: tuple[Path, ...], home: Path) -> str:
    verb = "Move" if isinstance(args, MovePath) else "Copy"
    if len(paths) != 2:
        return f"{verb} {args.source} to {args.destination}"
    source, destination = paths
    if isinstance(args, MovePath) and source.parent == destination.parent:
        return f"Rename {source.name} to {destination.name}"
    folder = _shown(destination.parent, home).rstrip("/") + "/"
    if destination.name == source.name:
        return f"{verb} {source.name} to {folder}"
    return f"{verb} {source.name} to {folder}{destination.name}"


def _delete_summary(args: DeletePath, real: Path | None, shown: str) -> str:
    how = "for good (cannot be undone)" if args.permanent else "to the trash"
    if real is not None and os.path.isdir(real) and not os.path.islink(real):
        files = _count_files(real)
        return f"Delete the folder {shown} ({files}) {how}"
    return f"Delete {shown} {how}"


def _count_files(real: Path, limit: int = 10_000) -> str:
    count = 0
    for _, _, filenames in os.walk(real, followlinks=False):
        count += len(filenames)
        if count > limit:
            return f"more than {limit} files"
    return f"{count} file{'s' if count != 1 else ''}"
