"""Path confinement for the file tools: which paths Deskhand may touch, and opening them safely.

Two layers:

1. *Policy* (`Sandbox.resolve`): a path is expanded (`~`), made absolute against the first
   allowed root, resolved with `os.path.realpath`, and the REAL path must lie inside an allowed
   root and must not be a protected place (tools.fs.protected: Deskhand's own home and the
   credential stores), compared by path components (never by string prefix) AND by file
   identity (st_dev, st_ino) of the path and its ancestors, so a hard link, a bind mount or a
   different letter case reaching a protected file is refused too (tools.fs.places).
2. *Race-free I/O* (`Sandbox.open_file`, `open_dir`, `write_file`, ...): a checked path can be
   swapped for a symlink before it is opened (TOCTOU). Where the OS supports `dir_fd`
   (Linux, macOS, BSD) every component below the allowed root is opened with `O_NOFOLLOW`
   relative to its parent's descriptor, so a symlink appearing anywhere after the check makes
   the operation fail instead of escaping. Elsewhere (Windows) the opened file is re-verified
   against the checked real path after opening. Every opened file and folder is checked
   against the protected identities again (fstat), so a protected file renamed into place
   after the check is not read either.

Which folders: `effective_roots` (settings, else the current folder for a headless run).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.fs.places import Hit, Places
from tools.fs.protected import DESKHAND_HOME_LABEL, protected_places
from tools.spec import ToolContext, ToolError

FOLDERS_HINT = "Choose folders in Settings → Tools."

_O_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY: int = getattr(os, "O_DIRECTORY", 0)
_O_BINARY: int = getattr(os, "O_BINARY", 0)
#: Opening a FIFO for reading would block forever; with O_NONBLOCK it returns and fstat refuses it.
O_NONBLOCK: int = getattr(os, "O_NONBLOCK", 0)
#: Race-free walking needs openat(2)-style calls and O_NOFOLLOW.
HAS_DIR_FD: bool = os.open in os.supports_dir_fd and bool(_O_NOFOLLOW) and bool(_O_DIRECTORY)
#: File systems on macOS and Windows are usually case-insensitive.
_CASE_INSENSITIVE_FS = sys.platform in ("darwin", "win32")
_SYMLINK_ERRNOS = {errno.ELOOP, getattr(errno, "EMLINK", -1), getattr(errno, "EFTYPE", -1)}


class SandboxError(ToolError):
    """A path the file tools must not touch (or that changed under our feet)."""


def _key(path: Path, *, fold: bool) -> tuple[str, ...]:
    parts = path.parts
    return tuple(p.casefold() for p in parts) if fold else parts


def _is_within(path_key: tuple[str, ...], prefix_key: tuple[str, ...]) -> bool:
    """Component-wise prefix test (`Path.is_relative_to` on pre-computed keys)."""
    return path_key[: len(prefix_key)] == prefix_key


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _setting(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _fsync_dir(dir_fd: int | None) -> None:
    """Make a rename durable; not every platform/file system allows fsync on a directory."""
    if dir_fd is not None:
        with suppress(OSError):
            os.fsync(dir_fd)


@dataclass(frozen=True)
class _Dir:
    """An opened directory: `fd` (None on platforms without dir_fd) and its checked real path."""

    fd: int | None
    path: Path

    def ref(self, name: str) -> str:
        """How to name an entry of this directory in an `os.*(..., dir_fd=self.fd)` call."""
        return name if self.fd is not None else str(self.path / name)


class Sandbox:
    """The folders file tools may touch (`allowed_roots`) minus protected places.

    No roots means no folder at all (every path is refused with `note`, which says why).
    """

    def __init__(
        self,
        allowed_roots: Iterable[Path],
        denied: Iterable[Path] = (),
        *,
        deskhand_home: Path | None = None,
        note: str | None = None,
    ) -> None:
        home = _real(Path.home())
        self.home = home
        self.note = note
        roots = [_real(Path(os.path.expanduser(r))) for r in allowed_roots]
        self.allowed_roots: tuple[Path, ...] = tuple(dict.fromkeys(roots))
        self._base = self.allowed_roots[0] if self.allowed_roots else _real(Path.cwd())
        extra = tuple(self._absolute(Path(os.path.expanduser(d))) for d in denied)
        own = _real(deskhand_home) if deskhand_home is not None else None
        self.protected: Places = protected_places(home, own, extra)
        self.deskhand_home = own
        #: Every protected path (as written and where it really points).
        self.denied: tuple[Path, ...] = self.protected.paths
        self._root_keys = [(r, _key(r, fold=_CASE_INSENSITIVE_FS)) for r in self.allowed_roots]

    @classmethod
    def from_context(cls, ctx: ToolContext, cwd: Path | None = None) -> Sandbox:
        """Build from `ctx.settings.files` (see `effective_roots`) and ctx.home (protected)."""
        files = _setting(ctx.settings, "files")
        roots, note = effective_roots(
            ctx.settings,
            cwd if cwd is not None else Path.cwd(),
            headless=getattr(ctx, "headless", True),
        )
        denied = _setting(files, "denied_paths") or []
        home = getattr(ctx, "home", None)
        return cls(roots, [Path(d) for d in denied], deskhand_home=home, note=note)

    # ----------------------------------------------------------------- policy

    def resolve(self, raw: str | os.PathLike[str], *, follow_final: bool = True) -> Path:
        """The checked real path for `raw`, or SandboxError.

        With `follow_final=False` the last component is not resolved, so a symlink names
        itself (for delete, move, info); its parent directories are still fully resolved.
        """
        text = self._validate_text(raw)
        real = self.locate(text, follow_final=follow_final)
        self.check(real, shown=text, follow_final=follow_final)
        return real

    def locate(self, raw: str | os.PathLike[str], *, follow_final: bool = True) -> Path:
        """Where `raw` really points, exactly as `resolve` computes it, without checking it
        (for describing a call; never touch the result without `resolve`)."""
        text = self._validate_text(raw)
        candidate = self._absolute(Path(os.path.expanduser(text)))
        return _real(candidate) if follow_final else self._real_parent_join(candidate)

    def check(self, real: Path, *, shown: str | None = None, follow_final: bool = True) -> None:
        """Refuse a protected place (by name or identity) or a path outside every root."""
        shown = shown if shown is not None else str(real)
        hit = self.protected.match(real, follow_final=follow_final)
        if hit is not None:
            raise SandboxError(self.protected_message(shown, real, hit))
        if not self.is_inside_roots(real):
            if not self.allowed_roots:
                raise SandboxError(f"File tools cannot touch '{shown}': {self.note or ''}".strip())
            resolved = "" if shown == str(real) else f" It resolves to '{real}'."
            note = f" {self.note}" if self.note else ""
            raise SandboxError(
                f"'{shown}' is outside the folders Deskhand may touch (allowed: "
                f"{self.roots_text()}).{resolved}{note}"
            )

    def protected_message(self, shown: str, real: Path, hit: Hit) -> str:
        never = "file tools never read or change it, whatever the rules say."
        if hit.label == DESKHAND_HOME_LABEL:
            return f"'{shown}' is in {DESKHAND_HOME_LABEL} ('{hit.place}'); {never}"
        if hit.how == "name":
            return f"'{shown}' is {hit.label} by its name; {never}"
        named_there = _is_within(_key(real, fold=True), _key(hit.place, fold=True))
        if hit.how == "identity" and not named_there:
            if hit.place == Path("?"):
                return f"'{shown}' is {hit.label}; refused for safety."
            return (
                f"'{shown}' is the same file or folder as '{hit.place}' ({hit.label}) reached "
                f"by another name (a hard link, a mount or another letter case); {never}"
            )
        return (
            f"'{shown}' is inside '{hit.place}', a protected location ({hit.label}) that "
            f"Deskhand never reads or changes, whatever the rules say."
        )

    def check_opened(self, fd: int, real: Path) -> os.stat_result:
        """fstat an opened descriptor and refuse a protected file or folder (the caller
        still owns `fd` and closes it)."""
        st = os.fstat(fd)
        hit = self.protected.by_stat(st)
        if hit is not None:
            raise SandboxError(self.protected_message(str(real), real, hit))
        return st

    def is_protected_stat(self, st: os.stat_result) -> bool:
        return self.protected.by_stat(st) is not None

    def is_allowed(self, real: Path) -> bool:
        return self.is_inside_roots(real) and self.protected.match(real) is None

    def is_inside_roots(self, real: Path) -> bool:
        return self.root_for(real) is not None

    def root_for(self, real: Path) -> Path | None:
        """The innermost allowed root containing `real`."""
        key = _key(real, fold=_CASE_INSENSITIVE_FS)
        inside = [root for root, root_key in self._root_keys if _is_within(key, root_key)]
        return max(inside, key=lambda r: len(r.parts)) if inside else None

    def denied_match(self, real: Path) -> Path | None:
        """The protected place `real` lies in by its name (no file system access)."""
        hit = self.protected.by_path(real)
        return hit.place if hit is not None else None

    def roots_text(self) -> str:
        return ", ".join(str(r) for r in self.allowed_roots)

    def ensure_removable(self, real: Path, action: str) -> None:
        """Refuse to delete/move an allowed root, one of its ancestors, or a tree holding a
        protected path (moving ~/.config would carry ~/.config/gcloud out of protection)."""
        key = _key(real, fold=True)
        for root in self.allowed_roots:
            if _is_within(_key(root, fold=True), key):
                raise SandboxError(
                    f"Refusing to {action} '{real}': it is (or contains) the allowed folder "
                    f"'{root}'."
                )
        protected = self.protected_inside(real)
        if protected:
            raise SandboxError(
                f"Refusing to {action} '{real}': it contains the protected location "
                f"'{protected[0]}'."
            )

    def protected_inside(self, real: Path) -> list[Path]:
        """Existing protected places located inside the tree `real`."""
        return [hit.place for hit in self.protected.inside(real)]

    # ------------------------------------------------------- race-free I/O

    def open_file(self, real: Path, flags: int, mode: int = 0o666) -> int:
        """os.open `real` (already checked) without following any symlink below its root."""
        with self.parent_dir(real) as parent:
            try:
                fd = os.open(
                    parent.ref(real.name), flags | _O_NOFOLLOW | _O_BINARY, mode, dir_fd=parent.fd
                )
            except OSError as exc:
                raise self.io_error(real, exc) from exc
        if parent.fd is None:
            self._verify_opened(fd, real)
        try:
            self.check_opened(fd, real)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_regular(self, real: Path) -> tuple[int, os.stat_result]:
        """Open `real` read-only; refuse folders, FIFOs and devices. The caller closes the fd."""
        fd = self.open_file(real, os.O_RDONLY | O_NONBLOCK)
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode):
            return fd, st
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"'{real}' is a folder, not a file (use fs_list_dir).")
        raise ToolError(f"'{real}' is not a regular file (device, pipe or socket); refused.")

    def open_dir(self, real: Path) -> int:
        """A directory descriptor for `real`, opened component by component (no symlinks)."""
        if not HAS_DIR_FD:
            raise SandboxError("directory descriptors are not supported on this platform")
        return self._walk(real, create=False)

    @contextmanager
    def parent_dir(self, real: Path, *, create: bool = False) -> Iterator[_Dir]:
        """The opened parent directory of `real`; `create` makes missing parents."""
        if real in self.allowed_roots:
            raise ToolError(f"'{real}' is an allowed folder itself, not a file inside it.")
        parent_path = real.parent
        if not HAS_DIR_FD:
            if create:
                os.makedirs(parent_path, exist_ok=True)
            if _real(parent_path) != parent_path:
                raise self._changed(parent_path)
            yield _Dir(None, parent_path)
            return
        fd = self._walk(parent_path, create=create)
        try:
            yield _Dir(fd, parent_path)
        finally:
            os.close(fd)

    def write_file(
        self,
        real: Path,
        chunks: Iterable[bytes],
        *,
        exclusive: bool,
        mode: int | None = None,
        create_dirs: bool = False,
    ) -> int:
        """Write `chunks` to `real`; return the byte count.

        `exclusive`: create a new file (O_CREAT|O_EXCL|O_NOFOLLOW), fail if anything exists
        there — even a symlink planted after the check. Otherwise write a temp file in the same
        directory, fsync and `os.replace` it over the target: readers see the old or the new
        content, never a half-written file, and a symlink at the target is replaced, not
        followed. `mode` is applied to the result (None → default permissions).
        """
        with self.parent_dir(real, create=create_dirs) as parent:
            if exclusive:
                return self._write_exclusive(parent, real, chunks, mode)
            return self._write_replace(parent, real, chunks, mode)

    def io_error(self, real: Path, exc: OSError) -> ToolError:
        """Turn an OSError while touching `real` into a message the model can act on."""
        code = exc.errno
        if code in _SYMLINK_ERRNOS:
            return self._changed(real)
        messages = {
            errno.ENOENT: "does not exist",
            errno.EEXIST: "already exists",
            errno.EISDIR: "is a folder, not a file",
            errno.ENOTDIR: "has a parent that is not a folder",
            errno.EACCES: "is not accessible (permission denied)",
            errno.EPERM: "is not accessible (operation not permitted)",
            errno.ENOSPC: "could not be written: the disk is full",
            errno.EROFS: "is on a read-only file system",
            errno.ENOTEMPTY: "is a folder that is not empty",
        }
        reason = messages.get(code or 0, exc.strerror or str(exc))
        return ToolError(f"'{real}' {reason}.")

    # ------------------------------------------------------------- helpers

    def _absolute(self, path: Path) -> Path:
        return path if path.is_absolute() else self._base / path

    @staticmethod
    def _validate_text(raw: str | os.PathLike[str]) -> str:
        text = os.fspath(raw)
        if not isinstance(text, str):
            raise SandboxError("paths must be text")
        if "\x00" in text:
            raise SandboxError("the path contains a NUL byte; refused")
        if not text.strip():
            raise SandboxError("the path is empty; give a file or folder path")
        return text

    @staticmethod
    def _real_parent_join(candidate: Path) -> Path:
        text = str(candidate)
        head, tail = os.path.split(text.rstrip("/\\") or text)
        if tail in ("", ".", ".."):
            return _real(candidate)
        return _real(Path(head)) / tail

    def _walk(self, real_dir: Path, *, create: bool) -> int:
        """Open `real_dir` from its allowed root, one O_NOFOLLOW component at a time."""
        root = self.root_for(real_dir)
        if root is None:  # callers check first; this is defence in depth
            self.check(real_dir)
            raise SandboxError(f"'{real_dir}' is outside the folders Deskhand may touch.")
        fd = os.open(root, os.O_RDONLY | _O_DIRECTORY)
        try:
            self.check_opened(fd, root)
            for part in real_dir.relative_to(root).parts:
                if create:
                    with suppress(FileExistsError):
                        os.mkdir(part, 0o777, dir_fd=fd)
                try:
                    next_fd = os.open(part, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    raise self._walk_error(fd, part, real_dir, exc) from exc
                os.close(fd)
                fd = next_fd
                self.check_opened(fd, real_dir)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _walk_error(self, dir_fd: int, part: str, real_dir: Path, exc: OSError) -> ToolError:
        """Explain why component `part` could not be opened as a folder."""
        if exc.errno == errno.ENOENT:
            return ToolError(f"The folder '{real_dir}' does not exist.")
        try:
            is_link = stat.S_ISLNK(os.stat(part, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except OSError:
            is_link = False
        if is_link or exc.errno in _SYMLINK_ERRNOS:
            return self._changed(real_dir)
        if exc.errno == errno.ENOTDIR:
            return ToolError(f"'{real_dir}' cannot be used: '{part}' in it is not a folder.")
        return self.io_error(real_dir, exc)

    def _verify_opened(self, fd: int, real: Path) -> None:
        """Fallback check without dir_fd: the opened file must be the checked path itself."""
        try:
            same = _real(real) == real and os.path.samestat(os.fstat(fd), os.stat(real))
        except OSError:
            same = False
        if not same:
            os.close(fd)
            raise self._changed(real)

    @staticmethod
    def _changed(real: Path) -> SandboxError:
        return SandboxError(
            f"'{real}' is (or changed into) a symbolic link after it was checked; refused for "
            "safety. Retry with the link's real target."
        )

    def _write_exclusive(
        self, parent: _Dir, real: Path, chunks: Iterable[bytes], mode: int | None
    ) -> int:
        name = parent.ref(real.name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_BINARY
        try:
            fd = os.open(name, flags, 0o666, dir_fd=parent.fd)
        except OSError as exc:
            raise self.io_error(real, exc) from exc
        try:
            written = _write_all(fd, chunks, mode)
        except BaseException:
            with suppress(OSError):
                os.unlink(name, dir_fd=parent.fd)
            raise
        _fsync_dir(parent.fd)
        return written

    def _write_replace(
        self, parent: _Dir, real: Path, chunks: Iterable[bytes], mode: int | None
    ) -> int:
        temp = parent.ref(f".{real.name}.{secrets.token_hex(4)}.deskhand-tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_BINARY
        try:
            fd = os.open(temp, flags, 0o600 if mode is not None else 0o666, dir_fd=parent.fd)
        except OSError as exc:
            raise self.io_error(real, exc) from exc
        try:
            written = _write_all(fd, chunks, mode)
            os.replace(temp, parent.ref(real.name), src_dir_fd=parent.fd, dst_dir_fd=parent.fd)
        except BaseException:
            with suppress(OSError):
                os.unlink(temp, dir_fd=parent.fd)
            raise
        _fsync_dir(parent.fd)
        return written


def _write_all(fd: int, chunks: Iterable[bytes], mode: int | None) -> int:
    """Write, set the mode, fsync and close `fd`."""
    written = 0
    with os.fdopen(fd, "wb") as handle:
        for chunk in chunks:
            handle.write(chunk)
            written += len(chunk)
        handle.flush()
        if mode is not None:
            _chmod_fd(handle.fileno(), mode)
        os.fsync(handle.fileno())
    return written


def _chmod_fd(fd: int, mode: int) -> None:
    if hasattr(os, "fchmod"):
        os.fchmod(fd, stat.S_IMODE(mode))


# ------------------------------------------------------------------ which folders


def effective_roots(
    settings: Any, cwd: Path, *, headless: bool = True
) -> tuple[list[Path], str | None]:
    """The folders file tools may touch, and a note to show when that is not the user's choice.

    Configured folders win. With none, a headless run works in the current folder only,
    and says so; when the current folder is the whole home, an ancestor of it or a file
    system root, the file tools get no folder at all rather than the whole home. In the
    window (not headless) they get none until the user answers the folder question.
    """
    files = _setting(settings, "files")
    configured = [str(r) for r in (_setting(files, "allowed_roots") or []) if str(r).strip()]
    if configured:
        return [Path(os.path.expanduser(r)) for r in configured], None
    if not headless:
        return [], f"File tools have no folder yet. {FOLDERS_HINT}"
    here = _real(cwd)
    home = _real(Path.home())
    none = (
        "You chose no folders for Deskhand"
        if _setting(files, "folders_chosen")
        else "No folders are set up for Deskhand yet"
    )
    if here == home or home.is_relative_to(here) or here == Path(here.anchor):
        return [], (
            f"{none}, and the current folder ({here}) is not a project folder, so file tools "
            f"are off. {FOLDERS_HINT}"
        )
    return [here], f"{none}, so file tools work only in {here}. {FOLDERS_HINT}"


#: Usual folder names, in the order they are offered (case variants are tried too).
_USUAL_FOLDERS: tuple[str, ...] = (
    "Documents",
    "Desktop",
    "Downloads",
    "Projects",
    "projects",
    "Developer",
    "src",
    "code",
    "Code",
    "dev",
    "Dev",
    "work",
    "Work",
    "repos",
    "git",
    "workspace",
    "source/repos",
)
_XDG_USER_DIRS = ("XDG_DOCUMENTS_DIR", "XDG_DESKTOP_DIR", "XDG_DOWNLOAD_DIR")


def suggested_folders(home: Path) -> list[Path]:
    """Existing usual folders to offer at first run (never the whole home, nor a protected
    place): the XDG user folders (localised names) then Documents, Desktop, Downloads and
    the usual project folders."""
    candidates = _xdg_user_dirs(home) + [home / name for name in _USUAL_FOLDERS]
    protected = protected_places(_real(home), None)
    found: dict[Path, None] = {}
    real_home = _real(home)
    for candidate in candidates:
        if not candidate.is_dir():
            continue
        real = _real(candidate)
        if real == real_home or real_home.is_relative_to(real) or real in found:
            continue
        if protected.match(real) is not None:
            continue
        found[real] = None
    return list(found)


def _xdg_user_dirs(home: Path) -> list[Path]:
    """DOCUMENTS, DESKTOP and DOWNLOAD from ~/.config/user-dirs.dirs (localised names)."""
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "user-dirs.dirs"
    try:
        text = config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    values: dict[str, Path] = {}
    for line in text.splitlines():
        name, _, raw = line.partition("=")
        name = name.strip()
        if name not in _XDG_USER_DIRS:
            continue
        value = raw.strip().strip('"').replace("$HOME", str(home))
        if os.path.isabs(value):
            values[name] = Path(value)
    return [values[n] for n in _XDG_USER_DIRS if n in values]
