"""Path confinement for the file tools: which paths Deskhand may touch, and opening them safely.

Two layers:

1. *Policy* (`Sandbox.resolve`): a path is expanded (`~`), made absolute against the first
   allowed root, resolved with `os.path.realpath`, and the REAL path must lie inside an allowed
   root and outside every denied path. Comparison is by path components, never by string prefix.
2. *Race-free I/O* (`Sandbox.open_file`, `open_dir`, `write_file`, ...): a checked path can be
   swapped for a symlink before it is opened (TOCTOU). Where the OS supports `dir_fd`
   (Linux, macOS, BSD) every component below the allowed root is opened with `O_NOFOLLOW`
   relative to its parent's descriptor, so a symlink appearing anywhere after the check makes
   the operation fail instead of escaping. Elsewhere (Windows) the opened file is re-verified
   against the checked real path after opening.
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

from tools.spec import ToolContext, ToolError

#: Credentials and browser profiles, relative to the user's home. Always denied.
DEFAULT_DENIED_UNDER_HOME: tuple[str, ...] = (
    # credentials and keys
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".git-credentials",
    ".config/gh",
    ".password-store",
    ".local/share/keyrings",
    "Library/Keychains",
    "AppData/Roaming/gnupg",
    "AppData/Roaming/Microsoft/Credentials",
    "AppData/Local/Microsoft/Credentials",
    # browser profiles (cookies, saved passwords)
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    "snap/firefox",
    "snap/chromium",
    ".var/app/org.mozilla.firefox",
    ".var/app/com.google.Chrome",
    ".var/app/org.chromium.Chromium",
    "Library/Application Support/Google/Chrome",
    "Library/Application Support/Firefox",
    "Library/Application Support/BraveSoftware",
    "Library/Application Support/Microsoft Edge",
    "AppData/Roaming/Mozilla",
    "AppData/Local/Google/Chrome/User Data",
    "AppData/Local/Microsoft/Edge/User Data",
    "AppData/Local/BraveSoftware",
)

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
    """The folders file tools may touch (`allowed_roots`) minus protected ones (`denied`)."""

    def __init__(self, allowed_roots: Iterable[Path], denied: Iterable[Path] = ()) -> None:
        home = Path.home()
        roots = [_real(Path(os.path.expanduser(r))) for r in allowed_roots] or [_real(home)]
        self.allowed_roots: tuple[Path, ...] = tuple(dict.fromkeys(roots))
        candidates = [home / rel for rel in DEFAULT_DENIED_UNDER_HOME]
        candidates += [self._absolute(Path(os.path.expanduser(d))) for d in denied]
        # Deny both the path as written and where it really points (a symlinked ~/.ssh).
        denied_paths = {Path(os.path.normpath(c)) for c in candidates}
        denied_paths |= {_real(c) for c in candidates}
        self.denied: tuple[Path, ...] = tuple(sorted(denied_paths))
        self._root_keys = [(r, _key(r, fold=_CASE_INSENSITIVE_FS)) for r in self.allowed_roots]
        # Denial is compared case-insensitively everywhere: denying too much is the safe side.
        self._denied_keys = [(d, _key(d, fold=True)) for d in self.denied]

    @classmethod
    def from_context(cls, ctx: ToolContext) -> Sandbox:
        """Build from `ctx.settings.files` (`allowed_roots`, `denied_paths`); empty → home."""
        files = _setting(ctx.settings, "files")
        roots = _setting(files, "allowed_roots") or []
        denied = _setting(files, "denied_paths") or []
        return cls([Path(r) for r in roots], [Path(d) for d in denied])

    # ----------------------------------------------------------------- policy

    def resolve(self, raw: str | os.PathLike[str], *, follow_final: bool = True) -> Path:
        """The checked real path for `raw`, or SandboxError.

        With `follow_final=False` the last component is not resolved, so a symlink names
        itself (for delete, move, info); its parent directories are still fully resolved.
        """
        text = self._validate_text(raw)
        candidate = self._absolute(Path(os.path.expanduser(text)))
        real = _real(candidate) if follow_final else self._real_parent_join(candidate)
        self.check(real, shown=text)
        return real

    def check(self, real: Path, *, shown: str | None = None) -> None:
        """Refuse a real path outside every allowed root or inside a denied one."""
        shown = shown if shown is not None else str(real)
        denied = self.denied_match(real)
        if denied is not None:
            raise SandboxError(
                f"'{shown}' is inside '{denied}', a protected location (credentials or browser "
                "data) that Deskhand never reads or changes."
            )
        if not self.is_inside_roots(real):
            resolved = "" if shown == str(real) else f" It resolves to '{real}'."
            raise SandboxError(
                f"'{shown}' is outside the folders Deskhand may touch (allowed: "
                f"{self.roots_text()}).{resolved}"
            )

    def is_allowed(self, real: Path) -> bool:
        return self.is_inside_roots(real) and self.denied_match(real) is None

    def is_inside_roots(self, real: Path) -> bool:
        return self.root_for(real) is not None

    def root_for(self, real: Path) -> Path | None:
        """The innermost allowed root containing `real`."""
        key = _key(real, fold=_CASE_INSENSITIVE_FS)
        inside = [root for root, root_key in self._root_keys if _is_within(key, root_key)]
        return max(inside, key=lambda r: len(r.parts)) if inside else None

    def denied_match(self, real: Path) -> Path | None:
        key = _key(real, fold=True)
        return next((d for d, d_key in self._denied_keys if _is_within(key, d_key)), None)

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
        """Existing denied paths located inside the tree `real`."""
        key = _key(real, fold=True)
        inside = [d for d, d_key in self._denied_keys if _is_within(d_key, key)]
        return [d for d in inside if os.path.lexists(d)]

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
        return path if path.is_absolute() else self.allowed_roots[0] / path

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
