"""Read-only file tools (list, read, search, info) and the text helpers the file tools share.

Every path goes through `Sandbox.resolve` before it is touched, and files are opened through
the sandbox so a symlink swapped in after the check is refused. Changing tools live in
tools.fs.changes.
"""

from __future__ import annotations

import fnmatch
import mimetypes
import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from tools.fs.manifest import FileInfo, ListDir, ReadFile, SearchFiles
from tools.fs.sandbox import HAS_DIR_FD, O_NONBLOCK, Sandbox, SandboxError
from tools.redact import TRIPWIRE, Redactor, shorten
from tools.spec import ToolContext, ToolError, ToolResult

KIB = 1024
MIB = 1024 * KIB
READ_CAP_BYTES = 256 * KIB
SNIFF_BYTES = 8 * KIB
#: Above this size fs_read_file does not read to the end just to count lines.
COUNT_LINES_MAX_BYTES = 32 * MIB
SEARCH_MAX_FILE_BYTES = 4 * MIB
SEARCH_LINE_CHARS = 200
#: Folders fs_search skips unless include_hidden=true (huge and rarely what is wanted).
NOISE_DIR_NAMES = frozenset(
    {"node_modules", "__pycache__", "venv", "site-packages", "dist-packages", "target"}
)

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF8", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
    (b"\x7fELF", "application/x-executable"),
    (b"MZ", "application/x-msdownload"),
    (b"SQLite format 3\x00", "application/vnd.sqlite3"),
)
_TEXT_CONTROL_BYTES = frozenset(b"\t\n\r\f\b\x1b")


# ------------------------------------------------------------------ shared helpers


def looks_binary(sample: bytes) -> bool:
    """Heuristic on the first bytes: known binary signature, NUL bytes, or mostly non-text."""
    if not sample:
        return False
    if any(sample.startswith(sig) for sig, _ in _SIGNATURES if len(sig) > 2):
        return True
    if b"\x00" in sample:
        return True
    controls = sum(1 for b in sample if b < 0x20 and b not in _TEXT_CONTROL_BYTES)
    if controls / len(sample) > 0.1:
        return True
    try:
        sample.decode("utf-8")
        return False
    except UnicodeDecodeError as exc:
        if exc.start >= len(sample) - 3 and exc.reason == "unexpected end of data":
            return False  # a multi-byte character cut by the sample boundary
    decoded = sample.decode("utf-8", errors="replace")
    return decoded.count("\ufffd") / len(decoded) > 0.1


def guess_mime(name: str, sample: bytes | None = None) -> str:
    """MIME type from the content's signature, else from the name, else text/binary."""
    if sample:
        for signature, mime in _SIGNATURES:
            if sample.startswith(signature):
                return mime
    guessed, _ = mimetypes.guess_type(name)
    if guessed:
        return guessed
    if sample is None:
        return "application/octet-stream"
    return "application/octet-stream" if looks_binary(sample) else "text/plain"


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"  # pragma: no cover - loop always returns


def iso_time(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).astimezone().isoformat(timespec="seconds")


def kind_of(mode: int) -> str:
    kinds = (
        (stat.S_ISLNK, "symlink"),
        (stat.S_ISDIR, "dir"),
        (stat.S_ISREG, "file"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "char_device"),
        (stat.S_ISBLK, "block_device"),
    )
    return next((name for test, name in kinds if test(mode)), "other")


def binary_refusal(real: Path, size: int, sample: bytes) -> ToolError:
    return ToolError(
        f"'{real}' looks like a binary file ({guess_mime(real.name, sample)}, "
        f"{human_size(size)}); fs_read_file only reads text. Use fs_file_info for its details."
    )


def resolve_existing_dir(sandbox: Sandbox, raw: str) -> Path:
    real = sandbox.resolve(raw)
    if not os.path.lexists(real):
        raise ToolError(f"'{real}' does not exist.")
    if not os.path.isdir(real):
        raise ToolError(f"'{real}' is a file, not a folder (use fs_read_file or fs_file_info).")
    return real


# ------------------------------------------------------------------ fs_list_dir


def list_dir(args: ListDir, ctx: ToolContext) -> ToolResult:
    sandbox = Sandbox.from_context(ctx)
    real = resolve_existing_dir(sandbox, args.path)
    entries: list[dict[str, Any]] = []
    hidden = 0
    with _scandir(sandbox, real) as (scan, dir_fd):
        for number, entry in enumerate(scan):
            if number % 1000 == 0:
                ctx.check_cancelled()
            if entry.name.startswith(".") and not args.include_hidden:
                hidden += 1
                continue
            described = _describe_entry(entry, dir_fd, sandbox, real)
            if described is not None:
                entries.append(described)
    entries.sort(key=lambda e: (e["type"] != "dir", e["name"].casefold()))
    shown = entries[: args.max_entries]
    lines = [f"{real} ({len(entries)} entries)"] + [_entry_line(e) for e in shown]
    if len(entries) > len(shown):
        lines.append(
            f"[{len(entries) - len(shown)} more entries not shown; raise max_entries "
            "or use fs_search to narrow down.]"
        )
    if hidden:
        lines.append(f"[{hidden} hidden entries not shown; pass include_hidden=true.]")
    data = {"path": str(real), "entries": shown, "total": len(entries), "hidden_skipped": hidden}
    return ToolResult(
        ok=True, content="\n".join(lines), data=data, truncated=len(shown) < len(entries)
    )


@contextmanager
def _scandir(
    sandbox: Sandbox, real: Path
) -> Iterator[tuple[Iterator[os.DirEntry[str]], int | None]]:
    """Scan through a descriptor opened without symlinks when the platform allows it.

    Yields the scan and that descriptor (None in the fallback), for calls relative to it.
    """
    if HAS_DIR_FD and os.scandir in os.supports_fd:
        fd = sandbox.open_dir(real)
        try:
            with os.scandir(fd) as scan:
                yield scan, fd
        finally:
            os.close(fd)
    else:
        with os.scandir(real) as scan:
            yield scan, None


def _describe_entry(
    entry: os.DirEntry[str], dir_fd: int | None, sandbox: Sandbox, folder: Path
) -> dict[str, Any] | None:
    """One listing entry. A protected entry shows its name and type only: it is never
    opened, and its size, time and link target are not shown."""
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return None  # vanished while listing
    kind = kind_of(st.st_mode)
    path = folder / entry.name
    if sandbox.denied_match(path) is not None or sandbox.is_protected_stat(st):
        return {"name": entry.name, "type": kind, "size": None, "mtime": None, "protected": True}
    described: dict[str, Any] = {
        "name": entry.name,
        "type": kind,
        "size": st.st_size if kind == "file" else None,
        "mtime": iso_time(st.st_mtime),
    }
    if kind == "symlink":
        try:
            described["target"] = (
                os.readlink(entry.name, dir_fd=dir_fd)
                if dir_fd is not None
                else os.readlink(entry.path)
            )
        except OSError:
            described["target"] = None
    return described


def _entry_line(entry: dict[str, Any]) -> str:
    if entry.get("protected"):
        slash = "/" if entry["type"] == "dir" else ""
        return f"{entry['type']:<5} {entry['name']}{slash}  (protected: Deskhand never opens it)"
    modified = entry["mtime"][:16].replace("T", " ")
    if entry["type"] == "dir":
        return f"dir   {entry['name']}/  {modified}"
    if entry["type"] == "symlink":
        return f"link  {entry['name']} -> {entry.get('target')}"
    if entry["type"] == "file":
        return f"file  {entry['name']}  {human_size(entry['size'])}  {modified}"
    return f"{entry['type']}  {entry['name']}"


# ------------------------------------------------------------------ fs_read_file


@dataclass
class _Excerpt:
    lines: list[bytes] = field(default_factory=list)
    first: int = 1
    last: int = 0
    capped: bool = False
    total_lines: int | None = None
    overlong: list[int] = field(default_factory=list)


def read_file(args: ReadFile, ctx: ToolContext) -> ToolResult:
    sandbox = Sandbox.from_context(ctx)
    real = sandbox.resolve(args.path)
    fd, st = sandbox.open_regular(real)
    with os.fdopen(fd, "rb") as handle:
        sample = handle.read(SNIFF_BYTES)
        if looks_binary(sample):
            raise binary_refusal(real, st.st_size, sample)
        handle.seek(0)
        excerpt = _read_lines(handle, args.start_line or 1, args.end_line, st.st_size, ctx)
    if st.st_size == 0:
        return ToolResult(ok=True, content="(empty file)", data=_read_data(real, st, excerpt))
    if not excerpt.lines:
        raise ToolError(
            f"start_line {excerpt.first} is past the end of '{real}' ({excerpt.total_lines} lines)."
        )
    text = _render_lines(excerpt, args.line_numbers)
    notes = _read_notes(excerpt, args.start_line is not None or args.end_line is not None)
    content = text if not notes else text.rstrip("\n") + "\n\n" + "\n".join(notes)
    return ToolResult(
        ok=True, content=content, data=_read_data(real, st, excerpt), truncated=excerpt.capped
    )


def _iter_lines(handle: BinaryIO, limit: int) -> Iterator[tuple[bytes, bool]]:
    """Yield (line, overlong); a line longer than `limit` is cut and the rest skipped."""
    while piece := handle.readline(limit):
        if piece.endswith(b"\n") or len(piece) < limit:
            yield piece, False
            continue
        while (rest := handle.readline(limit)) and not rest.endswith(b"\n"):
            pass
        yield piece, True


def _count_lines(handle: BinaryIO) -> int:
    count, last = 0, b"\n"
    while chunk := handle.read(MIB):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (last != b"\n")


def _read_lines(
    handle: BinaryIO, start: int, end: int | None, size: int, ctx: ToolContext
) -> _Excerpt:
    excerpt = _Excerpt(first=start)
    used = 0
    number = 0
    for number, (line, overlong) in enumerate(_iter_lines(handle, READ_CAP_BYTES), start=1):
        if number % 10_000 == 0:
            ctx.check_cancelled()
        if number < start:
            continue
        past_end = end is not None and number > end
        if past_end or (excerpt.lines and used + len(line) > READ_CAP_BYTES):
            excerpt.capped = not past_end
            if size <= COUNT_LINES_MAX_BYTES:
                excerpt.total_lines = number + _count_lines(handle)
            return excerpt
        excerpt.lines.append(line)
        excerpt.last = number
        used += len(line)
        if overlong:
            excerpt.overlong.append(number)
    excerpt.total_lines = number
    return excerpt


def _render_lines(excerpt: _Excerpt, numbered: bool) -> str:
    if not numbered:
        return b"".join(excerpt.lines).decode("utf-8", errors="replace")
    width = len(str(excerpt.last))
    return "".join(
        f"{number:>{width}}\t{line.decode('utf-8', errors='replace')}"
        for number, line in enumerate(excerpt.lines, start=excerpt.first)
    )


def _read_notes(excerpt: _Excerpt, ranged: bool) -> list[str]:
    of_total = f" of {excerpt.total_lines}" if excerpt.total_lines is not None else ""
    span = f"lines {excerpt.first}-{excerpt.last}{of_total}"
    notes = []
    if excerpt.capped:
        notes.append(
            f"[Output capped at {READ_CAP_BYTES // KIB} KiB: showing {span}. "
            f"Continue with start_line={excerpt.last + 1}.]"
        )
    elif ranged:
        notes.append(f"[Showing {span}.]")
    notes += [
        f"[Line {n} is longer than {READ_CAP_BYTES // KIB} KiB; only its beginning is shown.]"
        for n in excerpt.overlong
    ]
    return notes


def _read_data(real: Path, st: os.stat_result, excerpt: _Excerpt) -> dict[str, Any]:
    return {
        "path": str(real),
        "size": st.st_size,
        "start_line": excerpt.first,
        "end_line": excerpt.last,
        "total_lines": excerpt.total_lines,
        "truncated": excerpt.capped,
    }


# ------------------------------------------------------------------ fs_search


@dataclass
class _SearchState:
    results: list[dict[str, Any]] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    files_seen: int = 0
    limit_reached: bool = False
    #: The tripwire: content is searched, and snippets cut, only after it masked secrets.
    redactor: Redactor = field(default_factory=Redactor)


def search_files(args: SearchFiles, ctx: ToolContext) -> ToolResult:
    """Names and lines are matched as the model would read them: with every known secret
    already `[redacted]`, so a pattern cannot ask yes/no questions about a secret's
    characters (ten searches must not rebuild a key fs_read_file masks)."""
    sandbox = Sandbox.from_context(ctx)
    base = resolve_existing_dir(sandbox, args.path)
    redactor = TRIPWIRE.redactor(ctx.secret_values())
    name_matches = _name_matcher(args.pattern, args.case_sensitive, redactor)
    line_matches = _content_matcher(args)
    state = _SearchState(redactor=redactor)
    for here, dirnames, filenames, dir_fd in _walk_tree(sandbox, base, args.include_hidden):
        ctx.check_cancelled()
        relative_dir = here.relative_to(base).as_posix()
        candidates = [(n, "dir") for n in dirnames] if line_matches is None else []
        candidates += [(n, "file") for n in filenames]
        for name, kind in sorted(candidates):
            relative = name if relative_dir == "." else f"{relative_dir}/{name}"
            if _skip_name(sandbox, here / name, name, args.include_hidden):
                continue
            if not name_matches(name, relative):
                continue
            _collect(state, sandbox, here, name, kind, dir_fd, line_matches, args.max_results)
            _report_progress(state, ctx)
            if state.limit_reached:
                return _search_result(base, args, state)
    return _search_result(base, args, state)


def _walk_tree(
    sandbox: Sandbox, base: Path, include_hidden: bool
) -> Iterator[tuple[Path, list[str], list[str], int | None]]:
    """Top-down walk that never follows symlinks and prunes hidden, noisy and denied folders.

    With dir_fd support this is os.fwalk from a descriptor opened through the sandbox, so a
    folder swapped for a symlink mid-walk cannot lead outside.
    """
    if HAS_DIR_FD and hasattr(os, "fwalk"):
        base_fd = sandbox.open_dir(base)
        try:
            for top, dirnames, filenames, dir_fd in os.fwalk(".", dir_fd=base_fd):
                here = base / os.path.normpath(top)
                _prune(sandbox, here, dirnames, include_hidden, dir_fd)
                yield here, dirnames, filenames, dir_fd
        finally:
            os.close(base_fd)
        return
    for top, dirnames, filenames in os.walk(base):
        here = Path(top)
        _prune(sandbox, here, dirnames, include_hidden)
        yield here, dirnames, filenames, None


def _prune(
    sandbox: Sandbox,
    here: Path,
    dirnames: list[str],
    include_hidden: bool,
    dir_fd: int | None = None,
) -> None:
    """Drop hidden, noisy and protected folders (protected by name, or by identity: a
    protected folder mounted or reached under another name)."""
    dirnames[:] = [
        name
        for name in dirnames
        if not _skip_name(sandbox, here / name, name, include_hidden)
        and (include_hidden or name not in NOISE_DIR_NAMES)
        and not _protected_folder(sandbox, here, name, dir_fd)
    ]


def _protected_folder(sandbox: Sandbox, here: Path, name: str, dir_fd: int | None) -> bool:
    try:
        if dir_fd is not None:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            parent = os.fstat(dir_fd)
        else:
            st = os.lstat(here / name)
            parent = os.lstat(here)
    except OSError:
        return True  # vanished or unreadable: nothing to search there
    mount = parent.st_dev != st.st_dev
    return sandbox.protected.by_stat(st, mount_point=mount) is not None


def _skip_name(sandbox: Sandbox, path: Path, name: str, include_hidden: bool) -> bool:
    return (name.startswith(".") and not include_hidden) or sandbox.denied_match(path) is not None


def _name_matcher(
    pattern: str, case_sensitive: bool, redactor: Redactor
) -> Callable[[str, str], bool]:
    """fnmatch on the name, or on the path relative to the search folder if it has a '/'
    (as redacted: a secret in a name matches only `[redacted]`)."""
    on_path = "/" in pattern
    wanted = pattern if case_sensitive else pattern.casefold()

    def matches(name: str, relative: str) -> bool:
        subject = redactor.text(relative if on_path else name)
        return fnmatch.fnmatchcase(subject if case_sensitive else subject.casefold(), wanted)

    return matches


def _content_matcher(args: SearchFiles) -> Callable[[str], bool] | None:
    if not args.content:
        return None
    if args.regex:
        try:
            compiled = re.compile(args.content, 0 if args.case_sensitive else re.IGNORECASE)
        except re.error as exc:
            raise ToolError(f"Invalid regular expression {args.content!r}: {exc}.") from exc
        return lambda line: compiled.search(line) is not None
    if args.case_sensitive:
        needle = args.content
        return lambda line: needle in line
    folded = args.content.casefold()
    return lambda line: folded in line.casefold()


def _collect(
    state: _SearchState,
    sandbox: Sandbox,
    here: Path,
    name: str,
    kind: str,
    dir_fd: int | None,
    line_matches: Callable[[str], bool] | None,
    max_results: int,
) -> None:
    path = here / name
    if line_matches is None:
        state.results.append({"path": str(path), "type": kind})
    else:
        raw = _searchable_text(sandbox, path, dir_fd, state.skipped)
        state.files_seen += 1
        # matched on the redacted text (line numbers kept), the snippet cut after that
        text = state.redactor.text_keeping_lines(raw or "")
        for number, line in enumerate(text.splitlines(), start=1):
            if line_matches(line):
                snippet = shorten(line.strip(), SEARCH_LINE_CHARS, redactor=state.redactor)
                state.results.append({"path": str(path), "line": number, "text": snippet})
                if len(state.results) >= max_results:
                    break
    if len(state.results) >= max_results:
        state.limit_reached = True


def _searchable_text(
    sandbox: Sandbox, path: Path, dir_fd: int | None, skipped: Counter[str]
) -> str | None:
    """The file's text, or None (counted in `skipped`) for links, binaries and huge files."""
    try:
        fd = _open_in_walk(sandbox, path, dir_fd)
    except OSError:
        skipped["unreadable or symlink"] += 1
        return None
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode):
            skipped["not a regular file"] += 1
            return None
        if sandbox.is_protected_stat(st):
            skipped["protected"] += 1
            return None
        if st.st_size > SEARCH_MAX_FILE_BYTES:
            skipped[f"larger than {SEARCH_MAX_FILE_BYTES // MIB} MiB"] += 1
            return None
        raw = handle.read(SEARCH_MAX_FILE_BYTES + 1)
    if looks_binary(raw[:SNIFF_BYTES]):
        skipped["binary"] += 1
        return None
    return raw.decode("utf-8", errors="replace")


def _open_in_walk(sandbox: Sandbox, path: Path, dir_fd: int | None) -> int:
    flags = os.O_RDONLY | O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    if dir_fd is not None:
        return os.open(path.name, flags, dir_fd=dir_fd)
    if not sandbox.is_allowed(Path(os.path.realpath(path))) or os.path.islink(path):
        raise PermissionError(f"{path} leads outside the allowed folders")
    return os.open(path, flags)


def _report_progress(state: _SearchState, ctx: ToolContext) -> None:
    if state.files_seen and state.files_seen % 500 == 0:
        ctx.progress(f"searched {state.files_seen} files, {len(state.results)} matches")


def _search_result(base: Path, args: SearchFiles, state: _SearchState) -> ToolResult:
    results = state.results
    what = "matching lines" if args.content else "matching paths"
    lines = [f"{len(results)} {what} under {base} (pattern {args.pattern!r})"]
    for hit in results:
        if "line" in hit:
            lines.append(f"{hit['path']}:{hit['line']}: {hit['text']}")
        else:
            lines.append(hit["path"] + ("/" if hit["type"] == "dir" else ""))
    if state.limit_reached:
        lines.append(
            f"[Stopped at max_results={args.max_results}; narrow the pattern or raise max_results.]"
        )
    if state.skipped:
        reasons = ", ".join(f"{count} {why}" for why, count in sorted(state.skipped.items()))
        lines.append(f"[Skipped files: {reasons}.]")
    data = {
        "path": str(base),
        "results": results,
        "limit_reached": state.limit_reached,
        "skipped": dict(state.skipped),
    }
    return ToolResult(ok=True, content="\n".join(lines), data=data, truncated=state.limit_reached)


# ------------------------------------------------------------------ fs_file_info


def file_info(args: FileInfo, ctx: ToolContext) -> ToolResult:
    sandbox = Sandbox.from_context(ctx)
    real = sandbox.resolve(args.path, follow_final=False)
    try:
        st = os.lstat(real)
    except FileNotFoundError as exc:
        raise ToolError(f"'{real}' does not exist.") from exc
    except OSError as exc:
        raise sandbox.io_error(real, exc) from exc
    kind = kind_of(st.st_mode)
    info: dict[str, Any] = {
        "path": str(real),
        "type": kind,
        "size": st.st_size,
        "mode": oct(stat.S_IMODE(st.st_mode)),
        "permissions": stat.filemode(st.st_mode),
        "mtime": iso_time(st.st_mtime),
        "mime": _mime_of(sandbox, real, kind),
        "is_symlink": kind == "symlink",
        "target": None,
    }
    if kind == "symlink":
        info.update(_link_details(sandbox, real))
    return ToolResult(ok=True, content=_info_text(info), data=info)


def _mime_of(sandbox: Sandbox, real: Path, kind: str) -> str | None:
    if kind == "dir":
        return "inode/directory"
    if kind != "file":
        return None
    try:
        fd, _ = sandbox.open_regular(real)
    except SandboxError:
        raise  # a protected file: nothing about it is shown
    except ToolError:
        return guess_mime(real.name)
    with os.fdopen(fd, "rb") as handle:
        return guess_mime(real.name, handle.read(SNIFF_BYTES))


def _link_details(sandbox: Sandbox, real: Path) -> dict[str, Any]:
    target = os.readlink(real)
    target_real = Path(os.path.realpath(real))
    allowed = sandbox.is_allowed(target_real)
    details: dict[str, Any] = {"target": target, "target_allowed": allowed}
    if allowed and target_real.exists():
        target_st = target_real.stat()
        details["target_type"] = kind_of(target_st.st_mode)
        details["target_size"] = target_st.st_size
    return details


def _info_text(info: dict[str, Any]) -> str:
    lines = [
        f"{info['path']}",
        f"type: {info['type']}",
        f"size: {human_size(info['size'])}",
        f"permissions: {info['permissions']} ({info['mode']})",
        f"modified: {info['mtime']}",
    ]
    if info["mime"]:
        lines.append(f"mime: {info['mime']}")
    if info["is_symlink"]:
        where = "inside" if info.get("target_allowed") else "outside"
        lines.append(f"symlink to: {info['target']} ({where} the allowed folders)")
    return "\n".join(lines)
