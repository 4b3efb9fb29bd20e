"""File tools that change things: write, edit, move, copy, delete.

Paths are checked by the sandbox first; writes go through `Sandbox.write_file` (atomic replace
or O_EXCL create, never following a symlink planted after the check). Before changing anything,
write/edit/move/copy call `tools.fs.hooks.verify`: a change that makes something run must have
been classified (and so asked about) as such, and its paths must still resolve as they did then.
"""

from __future__ import annotations

import difflib
import errno
import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.fs.hooks import verify
from tools.fs.manifest import CopyPath, DeletePath, EditFile, MovePath, WriteFile
from tools.fs.ops import MIB, SNIFF_BYTES, binary_refusal, human_size, kind_of, looks_binary
from tools.fs.sandbox import O_NONBLOCK, Sandbox, SandboxError
from tools.redact import REDACTED, TRIPWIRE, Redactor, shorten
from tools.spec import ToolContext, ToolError, ToolResult

#: Previous content above this size is not read for a diff.
DIFF_SOURCE_MAX_BYTES = 2 * MIB
#: How much of a diff the model sees (the full diff stays in `data`).
DIFF_CONTENT_CHARS = 4000
EDIT_MAX_BYTES = 8 * MIB
COPY_CHUNK_BYTES = MIB
_NO_NEWLINE = "\\ No newline at end of file\n"


@dataclass
class _Previous:
    """What a file held before a write: its text for the diff (None when too big) and mode."""

    text: str | None
    mode: int
    size: int


# ------------------------------------------------------------------ diffs


def unified_diff(old: str, new: str, path: Path) -> str:
    def lines(text: str) -> list[str]:
        split = text.splitlines(keepends=True)
        if split and not split[-1].endswith("\n"):
            split[-1] += "\n" + _NO_NEWLINE
        return split

    return "".join(
        difflib.unified_diff(lines(old), lines(new), fromfile=f"a{path}", tofile=f"b{path}")
    )


def _diff_summary(diff: str) -> str:
    body = diff.splitlines()[2:]  # after the ---/+++ header
    added = sum(1 for line in body if line.startswith("+"))
    removed = sum(1 for line in body if line.startswith("-"))
    return f"+{added} -{removed} lines"


def _capped(diff: str) -> str:
    if len(diff) <= DIFF_CONTENT_CHARS:
        return diff
    note = "\n[diff cut; the full diff is in the result data]\n"
    return shorten(diff, DIFF_CONTENT_CHARS, mark="") + note


# ------------------------------------------------------------------ fs_write_file


@dataclass
class _WritePlan:
    real: Path
    previous: _Previous | None
    #: The whole text after the write; None when the previous content is too big to diff.
    new_text: str | None


def _plan_write(args: WriteFile, sandbox: Sandbox) -> _WritePlan:
    real = sandbox.resolve(args.path)
    _require_parent(real, args.create_dirs)
    previous = _read_previous(sandbox, real)
    if previous is not None and args.mode == "create_only":
        raise ToolError(f"'{real}' already exists; use mode='overwrite' to replace it.")
    new_text: str | None = args.content
    if previous is not None and args.mode == "append":
        new_text = None if previous.text is None else previous.text + args.content
    return _WritePlan(real, previous, new_text)


def preview_write_file(args: WriteFile, ctx: ToolContext) -> str:
    plan = _plan_write(args, Sandbox.from_context(ctx))
    size = len(args.content.encode("utf-8"))
    if plan.previous is None:
        header = f"Create '{plan.real}' ({size} bytes):"
        return f"{header}\n{_capped(unified_diff('', args.content, plan.real))}"
    verb = "Append to" if args.mode == "append" else "Overwrite"
    if plan.previous.text is None or plan.new_text is None:
        return f"{verb} '{plan.real}' ({human_size(plan.previous.size)} now) with {size} bytes."
    diff = unified_diff(plan.previous.text, plan.new_text, plan.real)
    return f"{verb} '{plan.real}' ({_diff_summary(diff)}):\n{_capped(diff)}"


def write_file(args: WriteFile, ctx: ToolContext) -> ToolResult:
    sandbox = Sandbox.from_context(ctx)
    plan = _plan_write(args, sandbox)
    verify(args, ctx, sandbox)
    real, previous = plan.real, plan.previous
    payload = args.content.encode("utf-8")
    if previous is None:
        written = sandbox.write_file(real, [payload], exclusive=True, create_dirs=args.create_dirs)
    elif args.mode == "append":
        written = _append(sandbox, real, payload)
    else:
        written = sandbox.write_file(real, [payload], exclusive=False, mode=previous.mode)
    return _write_result(real, args.mode, previous, plan.new_text, written)


def _require_parent(real: Path, create_dirs: bool) -> None:
    if not create_dirs and not real.parent.is_dir():
        raise ToolError(
            f"The folder '{real.parent}' does not exist; pass create_dirs=true to create it."
        )


def _read_previous(sandbox: Sandbox, real: Path) -> _Previous | None:
    if not os.path.lexists(real):
        return None
    fd, st = sandbox.open_regular(real)
    with os.fdopen(fd, "rb") as handle:
        if st.st_size > DIFF_SOURCE_MAX_BYTES:
            return _Previous(None, stat.S_IMODE(st.st_mode), st.st_size)
        raw = handle.read()
    return _Previous(raw.decode("utf-8", errors="replace"), stat.S_IMODE(st.st_mode), len(raw))


def _append(sandbox: Sandbox, real: Path, payload: bytes) -> int:
    """Append in place with O_APPEND (no rewrite of a possibly large file)."""
    fd = sandbox.open_file(real, os.O_WRONLY | os.O_APPEND | O_NONBLOCK)
    with os.fdopen(fd, "wb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ToolError(f"'{real}' is not a regular file; refused.")
        handle.write(payload)
        handle.flush()
        os.fsync(handle.fileno())
    return len(payload)


def _write_result(
    real: Path, mode: str, previous: _Previous | None, new_text: str | None, written: int
) -> ToolResult:
    data: dict[str, Any] = {
        "path": str(real),
        "mode": mode,
        "created": previous is None,
        "bytes_written": written,
        "diff": None,
    }
    if previous is None:
        lines = new_text.count("\n") + (not new_text.endswith("\n")) if new_text else 0
        data["diff"] = unified_diff("", new_text or "", real)
        return ToolResult(
            ok=True, content=f"Created '{real}' ({written} bytes, {lines} lines).", data=data
        )
    verb = "Appended to" if mode == "append" else "Overwrote"
    if previous.text is None or new_text is None:
        data["diff_omitted"] = f"previous content larger than {human_size(DIFF_SOURCE_MAX_BYTES)}"
        return ToolResult(ok=True, content=f"{verb} '{real}' ({written} bytes written).", data=data)
    diff = unified_diff(previous.text, new_text, real)
    data["diff"] = diff
    if not diff:
        return ToolResult(ok=True, content=f"{verb} '{real}': content unchanged.", data=data)
    summary = f"{verb} '{real}' ({written} bytes written, {_diff_summary(diff)}):"
    return ToolResult(ok=True, content=f"{summary}\n{_capped(diff)}", data=data)


# ------------------------------------------------------------------ fs_edit_file


@dataclass
class _EditPlan:
    real: Path
    text: str
    updated: str
    mode: int
    replacements: int


@dataclass
class _Shown:
    """A file's text as fs_read_file shows it: known secrets masked (each `[redacted]`
    keeps the line breaks of what it stands for). `plain`: (shown start, raw start,
    length) of each stretch shown as it is; `hidden`: (start, end) of each masked one."""

    text: str
    plain: list[tuple[int, int, int]]
    hidden: list[tuple[int, int]]

    @classmethod
    def of(cls, raw: str, redactor: Redactor) -> _Shown:
        parts: list[str] = []
        plain: list[tuple[int, int, int]] = []
        hidden: list[tuple[int, int]] = []
        pos = shown = 0
        for start, end in [*redactor.spans(raw), (len(raw), len(raw))]:
            if start > pos:
                plain.append((shown, pos, start - pos))
                parts.append(raw[pos:start])
                shown += start - pos
            if end > start:
                marker = REDACTED + "\n" * raw.count("\n", start, end)
                hidden.append((shown, shown + len(marker)))
                parts.append(marker)
                shown += len(marker)
            pos = end
        return cls("".join(parts), plain, hidden)

    def raw_span(self, start: int, end: int) -> tuple[int, int] | None:
        """The raw text behind `shown[start:end]`; None when it covers a masked secret."""
        if any(start < h_end and h_start < end for h_start, h_end in self.hidden):
            return None
        for at, raw_at, size in self.plain:
            if at <= start and end <= at + size:
                return raw_at + start - at, raw_at + end - at
        return None


def _find_all(text: str, needle: str) -> list[int]:
    """Where `needle` occurs in `text`, not overlapping (as `str.count` counts)."""
    found, position = [], text.find(needle)
    while position != -1:
        found.append(position)
        position = text.find(needle, position + len(needle))
    return found


def _plan_edit(args: EditFile, sandbox: Sandbox, redactor: Redactor) -> _EditPlan:
    """`old_text` is looked for in the text as fs_read_file shows it (known secrets
    `[redacted]`), never in the raw file: whether it is found, how often and where must not
    tell a right guess of a secret's characters from a wrong one. An occurrence covering a
    masked secret is refused (the edit would write the marker over the secret)."""
    real = sandbox.resolve(args.path)
    text, mode = _read_editable(sandbox, real)
    shown = _Shown.of(text, redactor)
    old, new = args.old_text, args.new_text
    found = _find_all(shown.text, old)
    if not found and "\r\n" in text and "\n" in old and "\r\n" not in old:
        # The model writes "\n"; the file uses Windows line endings.
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        found = _find_all(shown.text, old)
    count = len(found)
    if count == 0:
        raise ToolError(_not_found_message(real, shown.text, args.old_text))
    if count > 1 and not args.replace_all:
        lines = ", ".join(str(shown.text.count("\n", 0, at) + 1) for at in found[:10])
        raise ToolError(
            f"old_text occurs {count} times in '{real}' (lines {lines}). Add surrounding lines "
            "to make it unique, or pass replace_all=true to replace every occurrence."
        )
    spans = [shown.raw_span(at, at + len(old)) for at in found[: count if args.replace_all else 1]]
    if None in spans:
        raise ToolError(
            f"old_text covers a secret shown as {REDACTED} in '{real}'; Deskhand will not write "
            "over it. Edit the text around it instead."
        )
    parts, pos = [], 0
    for start, end in (s for s in spans if s is not None):
        parts += [text[pos:start], new]
        pos = end
    updated = "".join(parts) + text[pos:]
    return _EditPlan(real, text, updated, mode, count if args.replace_all else 1)


def _edit_summary(plan: _EditPlan, diff: str) -> str:
    plural = "s" if plan.replacements > 1 else ""
    return f"'{plan.real}' ({plan.replacements} replacement{plural}, {_diff_summary(diff)})"


def preview_edit_file(args: EditFile, ctx: ToolContext) -> str:
    plan = _plan_edit(args, Sandbox.from_context(ctx), TRIPWIRE.redactor(ctx.secret_values()))
    diff = unified_diff(plan.text, plan.updated, plan.real)
    if not diff:
        return f"No change to '{plan.real}': new_text equals old_text."
    return f"Edit {_edit_summary(plan, diff)}:\n{_capped(diff)}"


def edit_file(args: EditFile, ctx: ToolContext) -> ToolResult:
    sandbox = Sandbox.from_context(ctx)
    plan = _plan_edit(args, sandbox, TRIPWIRE.redactor(ctx.secret_values()))
    verify(args, ctx, sandbox)
    data: dict[str, Any] = {"path": str(plan.real), "replacements": plan.replacements, "diff": ""}
    if plan.updated == plan.text:
        return ToolResult(ok=True, content="No change: new_text equals old_text.", data=data)
    payload = plan.updated.encode("utf-8")
    sandbox.write_file(plan.real, [payload], exclusive=False, mode=plan.mode)
    diff = unified_diff(plan.text, plan.updated, plan.real)
    data["diff"] = diff
    return ToolResult(
        ok=True, content=f"Edited {_edit_summary(plan, diff)}:\n{_capped(diff)}", data=data
    )


def _read_editable(sandbox: Sandbox, real: Path) -> tuple[str, int]:
    fd, st = sandbox.open_regular(real)
    with os.fdopen(fd, "rb") as handle:
        if st.st_size > EDIT_MAX_BYTES:
            raise ToolError(
                f"'{real}' is {human_size(st.st_size)}; fs_edit_file edits files up to "
                f"{human_size(EDIT_MAX_BYTES)}."
            )
        raw = handle.read()
    if looks_binary(raw[:SNIFF_BYTES]):
        raise binary_refusal(real, st.st_size, raw[:SNIFF_BYTES])
    try:
        return raw.decode("utf-8"), stat.S_IMODE(st.st_mode)
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"'{real}' is not valid UTF-8 (byte {exc.start}); fs_edit_file will not re-encode "
            "it. Use fs_write_file to replace it entirely if that is intended."
        ) from exc


def _not_found_message(real: Path, text: str, old_text: str) -> str:
    message = (
        f"old_text was not found in '{real}'. It must match exactly, including whitespace, "
        "indentation and line breaks."
    )
    probe = next((line.strip() for line in old_text.splitlines() if line.strip()), "")
    stripped = [line.strip() for line in text.splitlines()[:20_000]]
    close = difflib.get_close_matches(probe, stripped, n=3, cutoff=0.6) if probe else []
    if not close:
        return message + " No similar lines found; read the file with fs_read_file first."
    hints = []
    for candidate in close:
        number = stripped.index(candidate) + 1
        hints.append(f"  line {number}: {shorten(candidate, 160, mark='')}")
    return message + " Closest lines:\n" + "\n".join(hints)


# ------------------------------------------------------------------ fs_move / fs_copy


@dataclass
class _TransferPlan:
    source: Path
    destination: Path
    source_is_dir: bool
    replaces: bool


def _plan_move(args: MovePath, sandbox: Sandbox) -> _TransferPlan:
    source = _existing(sandbox.resolve(args.source, follow_final=False))
    sandbox.ensure_removable(source, "move")
    destination = sandbox.resolve(args.destination, follow_final=False)
    source_is_dir = _is_real_dir(source)
    _check_not_into_itself(source, destination, source_is_dir)
    case_only = _same_entry(source, destination)  # e.g. a.txt → A.txt on macOS: always fine
    if not case_only:
        _ensure_destination_free(destination, args.overwrite, source, source_is_dir)
    _require_parent(destination, args.create_dirs)
    replaces = not case_only and os.path.lexists(destination)
    return _TransferPlan(source, destination, source_is_dir, replaces)


def _plan_copy(args: CopyPath, sandbox: Sandbox) -> _TransferPlan:
    source = _existing(sandbox.resolve(args.source))
    destination = sandbox.resolve(args.destination, follow_final=False)
    protected = sandbox.protected_inside(source)
    if protected:
        raise ToolError(f"Refusing to copy '{source}': it contains the protected '{protected[0]}'.")
    source_is_dir = _is_real_dir(source)
    _check_not_into_itself(source, destination, source_is_dir)
    _ensure_destination_free(destination, args.overwrite, source, source_is_dir)
    _require_parent(destination, args.create_dirs)
    return _TransferPlan(source, destination, source_is_dir, os.path.lexists(destination))


def _describe_transfer(verb: str, plan: _TransferPlan) -> str:
    what = "folder " if plan.source_is_dir else ""
    replacing = " (replacing the existing file)" if plan.replaces else ""
    return f"{verb} {what}'{plan.source}' to '{plan.destination}'{replacing}."


def preview_move_path(args: MovePath, ctx: ToolContext) -> str:
    return _describe_transfer("Move", _plan_move(args, Sandbox.from_context(ctx)))


def preview_copy_path(args: CopyPath, ctx: ToolContext) -> str:
    return _describe_transfer("Copy", _plan_copy(args, Sandbox.from_context(ctx)))


def move_path(args: MovePath, ctx: ToolContext) -> ToolResult:
    sandbox = Sandbox.from_context(ctx)
    plan = _plan_move(args, sandbox)
    verify(args, ctx, sandbox)
    source, destination = plan.source, plan.destination
    ctx.progress(f"moving {source.name}")
    with (
        sandbox.parent_dir(source) as src_dir,
        sandbox.parent_dir(destination, create=args.create_dirs) as dst_dir,
    ):
        try:
            os.replace(
                src_dir.ref(source.name),
                dst_dir.ref(destination.name),
                src_dir_fd=src_dir.fd,
                dst_dir_fd=dst_dir.fd,
            )
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise sandbox.io_error(source, exc) from exc
            _move_across(sandbox, plan, ctx)
    data = {"source": str(source), "destination": str(destination), "type": _kind(destination)}
    return ToolResult(ok=True, content=_describe_transfer("Moved", plan), data=data)


def _move_across(sandbox: Sandbox, plan: _TransferPlan, ctx: ToolContext) -> None:
    """Another file system: copy, then delete. A folder is copied with the same checks as
    fs_copy, so a hard link to a protected file inside it is not turned into a plain copy."""
    if plan.source_is_dir:
        _copy_tree(sandbox, plan.source, plan.destination, ctx)
        shutil.rmtree(plan.source)
    else:
        shutil.move(plan.source, plan.destination)


def copy_path(args: CopyPath, ctx: ToolContext) -> ToolResult:
    sandbox = Sandbox.from_context(ctx)
    plan = _plan_copy(args, sandbox)
    verify(args, ctx, sandbox)
    source, destination = plan.source, plan.destination
    if plan.source_is_dir:
        files = _copy_tree(sandbox, source, destination, ctx)
        content = f"Copied folder '{source}' to '{destination}' ({files} files)."
    else:
        files = 1
        size = _copy_file(sandbox, source, destination, args.create_dirs, ctx)
        content = f"Copied '{source}' to '{destination}' ({human_size(size)})."
    data = {"source": str(source), "destination": str(destination), "files": files}
    return ToolResult(ok=True, content=content, data=data)


def _existing(real: Path) -> Path:
    if not os.path.lexists(real):
        raise ToolError(f"'{real}' does not exist.")
    return real


def _is_real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _kind(path: Path) -> str:
    return kind_of(os.lstat(path).st_mode)


def _same_entry(a: Path, b: Path) -> bool:
    try:
        return os.path.samestat(os.lstat(a), os.lstat(b))
    except OSError:
        return False


def _check_not_into_itself(source: Path, destination: Path, source_is_dir: bool) -> None:
    if source == destination:
        raise ToolError("Source and destination are the same path.")
    if source_is_dir and destination.is_relative_to(source):
        raise ToolError(f"Cannot put the folder '{source}' inside itself ('{destination}').")


def _ensure_destination_free(
    destination: Path, overwrite: bool, source: Path, source_is_dir: bool
) -> None:
    if not os.path.lexists(destination):
        return
    if _is_real_dir(destination):
        raise ToolError(
            f"'{destination}' is an existing folder. Give the full new path (e.g. "
            f"'{destination / source.name}'), or delete the folder first."
        )
    if not overwrite:
        raise ToolError(f"'{destination}' already exists; pass overwrite=true to replace it.")
    if source_is_dir:
        raise ToolError(f"Cannot replace the file '{destination}' with a folder; delete it first.")


def _copy_file(
    sandbox: Sandbox, source: Path, destination: Path, create_dirs: bool, ctx: ToolContext
) -> int:
    fd, st = sandbox.open_regular(source)
    with os.fdopen(fd, "rb") as handle:

        def chunks() -> Iterator[bytes]:
            while chunk := handle.read(COPY_CHUNK_BYTES):
                ctx.check_cancelled()
                yield chunk

        exclusive = not os.path.lexists(destination)
        sandbox.write_file(
            destination, chunks(), exclusive=exclusive, mode=st.st_mode, create_dirs=create_dirs
        )
    os.utime(destination, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
    return st.st_size


def _copy_tree(sandbox: Sandbox, source: Path, destination: Path, ctx: ToolContext) -> int:
    """Recursive copy; symlinks are copied as links (never followed out of the sandbox).
    A protected file or folder inside (a hard link to a key, a mounted protected folder)
    stops the copy.

    All or nothing: on any failure or cancellation the partial copy is removed.
    """
    copied = 0

    def refuse_protected(path: str, st: os.stat_result) -> None:
        if sandbox.is_protected_stat(st):
            shown = Path(path)
            raise SandboxError(
                f"Refusing to copy '{source}': '{shown}' inside it is a protected file "
                "(the same file as a credential store or Deskhand's own data)."
            )

    def copy_one(src: str, dst: str) -> str:
        nonlocal copied
        ctx.check_cancelled()
        with open(src, "rb", opener=_nofollow_opener) as handle:
            st = os.fstat(handle.fileno())
            refuse_protected(src, st)
        copied += 1
        if copied % 100 == 0:
            ctx.progress(f"copied {copied} files")
        return shutil.copy2(src, dst, follow_symlinks=False)

    def check_folder(folder: str, names: list[str]) -> list[str]:
        for name in names:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):
                parent = os.lstat(folder)
                mount = parent.st_dev != st.st_dev
                if sandbox.protected.by_stat(st, mount_point=mount) is not None:
                    refuse_protected(path, st)
        return []

    try:
        shutil.copytree(
            source, destination, symlinks=True, copy_function=copy_one, ignore=check_folder
        )
    except BaseException as exc:
        shutil.rmtree(destination, ignore_errors=True)
        if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list):
            failures = "; ".join(str(reason) for _, _, reason in exc.args[0][:3])
            raise ToolError(f"Copy of '{source}' failed and was undone: {failures}") from exc
        raise
    return copied


def _nofollow_opener(path: str, flags: int) -> int:
    """Open a file of a tree being copied without following a link or blocking on a FIFO."""
    return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | O_NONBLOCK)


# ------------------------------------------------------------------ fs_delete


def _plan_delete(args: DeletePath, sandbox: Sandbox) -> tuple[Path, str]:
    real = _existing(sandbox.resolve(args.path, follow_final=False))
    sandbox.ensure_removable(real, "delete")
    kind = _kind(real)
    if kind == "dir" and not args.recursive:
        raise ToolError(
            f"'{real}' is a folder with {_count_entries(real)} entries; pass recursive=true to "
            "delete it with everything inside."
        )
    return real, kind


def preview_delete_path(args: DeletePath, ctx: ToolContext) -> str:
    real, kind = _plan_delete(args, Sandbox.from_context(ctx))
    what = f"folder with {_count_entries(real)} entries" if kind == "dir" else kind
    if args.permanent:
        return f"Permanently delete '{real}' ({what}). This cannot be undone."
    return f"Move '{real}' ({what}) to the trash."


def delete_path(args: DeletePath, ctx: ToolContext) -> ToolResult:
    sandbox = Sandbox.from_context(ctx)
    real, kind = _plan_delete(args, sandbox)
    ctx.progress(f"deleting {real.name}")
    if args.permanent:
        _delete_permanently(sandbox, real, kind)
        content = f"Deleted '{real}' permanently."
    else:
        _move_to_trash(sandbox, real)
        content = f"Moved '{real}' to the trash."
    data = {"path": str(real), "type": kind, "permanent": args.permanent}
    return ToolResult(ok=True, content=content, data=data)


def _count_entries(real: Path) -> str:
    with os.scandir(real) as scan:
        count = sum(1 for _ in zip(scan, range(10_001), strict=False))
    return "more than 10000" if count > 10_000 else str(count)


def _delete_permanently(sandbox: Sandbox, real: Path, kind: str) -> None:
    try:
        with sandbox.parent_dir(real) as parent:
            if kind == "dir":
                # fd-based and symlink-attack resistant where the platform allows it
                shutil.rmtree(parent.ref(real.name), dir_fd=parent.fd)
            else:
                os.unlink(parent.ref(real.name), dir_fd=parent.fd)
    except OSError as exc:
        raise sandbox.io_error(real, exc) from exc


def _move_to_trash(sandbox: Sandbox, real: Path) -> None:
    """send2trash works on paths, so re-check right before handing the path over."""
    from send2trash import send2trash  # imported on first use only

    if sandbox.resolve(real, follow_final=False) != real:
        raise SandboxError(f"'{real}' changed while it was being deleted; refused.")
    try:
        send2trash(str(real))
    except OSError as exc:
        raise ToolError(
            f"Could not move '{real}' to the trash ({exc}). Pass permanent=true to delete it "
            "for good instead."
        ) from exc
