"""Writes of a waited-for sandboxed command (`shell_run`, `shell_code`) land in an overlay, and
are copied back afterwards, except writes to places that make code run later outside the
sandbox (`tools.fs.autorun.classify`: git hooks and config, `.husky/`, `lefthook.yml`,
`.pre-commit-config.yaml`, `.envrc`, `.vscode/tasks.json`, start-up files, folders on
$PATH…), which are held: never written, and named in the tool's result.

The decision is made per written path, by the same classifier as the file tools, at any
depth and for repositories made during the run, instead of by looking for repositories when
the command starts. How: `overlay_launch.py` enters a user and mount namespace and mounts an
overlayfs over each writable folder (lower: the real folder; upper and work: a private
folder in the temp folder, hidden from the command), then becomes bubblewrap. The upper
folder then holds exactly what changed: files and folders (whole copies), symlinks,
whiteouts (character devices 0/0: deletions) and opaque folders (a folder removed and made
again). Renaming a folder that existed before gives EXDEV inside (overlayfs without
redirect_dir, the unprivileged default); `mv` then copies and deletes, and so does the
copy-back.

The copy-back walks the real folder by descriptors (O_NOFOLLOW at every step, so a symlink
swapped in meanwhile cannot send a write elsewhere), writes each file to a temporary name
and renames it into place (mode without setuid/setgid, times kept). Whatever fails (any
exception) is named, and the upper folder is then kept so nothing is lost.

Held besides `classify`'s places: in a git folder (by the name `.git`, or a folder that is
one in the merged view: HEAD and objects or commondir, symlinks count) everything except
git's inert entries (`tools.fs.autorun.git_inert`: objects/, refs/, logs/, index, HEAD…);
an executable file or symlink named as a git hook (`core.hooksPath` in any config can make
any folder a hooks folder) or in a folder matching a relative $PATH entry; a symlink whose
name, were it a folder, would hold a held place (`.vscode` → a folder with tasks.json);
deleting or replacing a folder that holds a held place (a nested repository's `.git`).
Names in the report are escaped (`visible`): a file name cannot add lines to the question.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from tools.fs.autorun import (
    ON_PATH,
    AutoRun,
    autorun_places,
    classify,
    folder_could_hold,
    git_file,
    is_executable,
    is_hook_name,
    on_path,
    scan_tree,
    walk_tree,
)

if TYPE_CHECKING:
    from tools.spec import ToolResult

LAUNCHER = Path(__file__).with_name("overlay_launch.py")
_TRIAL_TIMEOUT = 20.0
_OPAQUE = ("user.overlay.opaque", "trusted.overlay.opaque")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

#: A failed trial (a timeout under load, say) is tried again after this many seconds.
_RETRY_AFTER = 60.0

_lock = threading.Lock()
#: file system → (whether an overlay could be mounted, when that was tried)
_works: dict[int, tuple[bool, float]] = {}


def launcher_argv(layers: list[tuple[Path, Path, Path]], argv: list[str]) -> list[str]:
    spec = json.dumps([[str(a), str(b), str(c)] for a, b, c in layers])
    return [sys.executable, "-I", str(LAUNCHER), spec, "--", *argv]


def works_on(folder: Path) -> bool:
    """Whether an overlay can be mounted over `folder` here (tried once per file system; a
    failed trial again after _RETRY_AFTER seconds, so a slow moment is not final)."""
    try:
        device = os.stat(folder).st_dev
    except OSError:
        return False
    with _lock:
        known = _works.get(device)
        now = time.monotonic()
        if known is None or (not known[0] and now - known[1] >= _RETRY_AFTER):
            known = _works[device] = (_trial(folder), now)
        return known[0]


def visible(text: str) -> str:
    """`text` on one line, with nothing invisible: control, format (bidi), separator and
    undecodable characters, and backslashes, are written as escapes."""
    out = []
    for char in text:
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:  # a byte os.fsdecode could not decode
            out.append(f"\\x{code - 0xDC00:02x}")
        elif char == "\\":
            out.append("\\\\")
        elif unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            out.append(
                f"\\x{code:02x}"
                if code < 0x100
                else f"\\u{code:04x}"
                if code < 0x10000
                else f"\\U{code:08x}"
            )
        else:
            out.append(char)
    return "".join(out)


def _shown(rel: PurePosixPath | Path | str) -> str:
    return visible(str(rel))


def _trial(folder: Path) -> bool:
    private = Path(tempfile.mkdtemp(prefix="deskhand-overlay-trial-"))
    try:
        (private / "u").mkdir()
        (private / "w").mkdir()
        argv = launcher_argv([(folder, private / "u", private / "w")], ["true"])
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=_TRIAL_TIMEOUT, check=False
        )
        return done.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        shutil.rmtree(private, ignore_errors=True)


@dataclass
class CopyBack:
    """What the copy-back did: how many entries it wrote, what it held (never written: the
    path and why) and what it could not copy (the path and the error)."""

    copied: int = 0
    held: list[str] = field(default_factory=list)
    #: Held first, then written because the user allowed it.
    released: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)

    def notes(self) -> list[str]:
        out = []
        if self.released:
            out.append(
                "written after the user allowed it (places that run code later): "
                + "; ".join(self.released)
            )
        if self.held:
            out.append(
                "held, NOT written (a sandboxed command may not plant what runs later "
                "outside the sandbox; ask the user to make these changes themselves): "
                + "; ".join(self.held)
            )
        if self.failed:
            where = ", ".join(str(p) for p in self.kept)
            out.append(
                "NOT copied back from the sandbox (the changes are kept in "
                f"{where}): " + "; ".join(self.failed)
            )
        return out


class Overlay:
    """The overlays of one command: `argv` wraps its sandbox command line, `finish` copies
    back and removes the private folder (kept when something could not be copied)."""

    def __init__(self, roots: list[Path], home: Path, scratch: Path | None = None) -> None:
        self.roots = roots
        self.home = home
        self.private = Path(tempfile.mkdtemp(prefix="deskhand-overlay-", dir=scratch))
        self.layers: list[tuple[Path, Path, Path]] = []
        for index, root in enumerate(roots):
            upper, work = self.private / str(index) / "u", self.private / str(index) / "w"
            upper.mkdir(parents=True)
            work.mkdir()
            self.layers.append((root, upper, work))
        self.places = autorun_places(home)
        self.release = False
        self._sync_lock = threading.Lock()
        #: What each earlier pass already applied, by real path: the upper entry as it was
        #: (mode, size, time, inode). A later pass applies an entry again only when the
        #: command changed it since — never undoing what the user did meanwhile (an edit,
        #: a file made again in a folder the command had emptied).
        self._done: dict[str, tuple[int, int, int, int]] = {}

    def argv(self, command: list[str]) -> list[str]:
        return launcher_argv(self.layers, command)

    def finish(self, ask: Callable[[CopyBack], bool] | None = None) -> CopyBack:
        """Copies back what is not held; then, when something was held and `ask` (a
        person, never `--yes`) allows it, copies back everything (the walk is idempotent)."""
        with self._sync_lock:
            report = self._copy_back(release=False)
        if report.held and not report.failed and ask is not None and ask(report):
            with self._sync_lock:
                again = self._copy_back(release=True)
            again.released = report.held
            report = again
        if not report.failed:
            shutil.rmtree(self.private, ignore_errors=True)
        return report

    def sync(self) -> CopyBack:
        """One copy-back pass while the command still runs (a background command's output
        shows up as it is made); held places stay held, failures are tried again later."""
        with self._sync_lock:
            return self._copy_back(release=False)

    def _copy_back(self, release: bool) -> CopyBack:
        self.release = release
        report = CopyBack()
        for root, upper, _ in self.layers:
            failed = len(report.failed)
            try:
                fd = os.open(root, _DIR_FLAGS)
            except OSError as exc:
                report.failed.append(f"{_shown(root)}: {exc.strerror or exc}")
            else:
                try:
                    self._walk(upper, fd, root, report)
                except Exception as exc:  # whatever it is: say so, keep the changes
                    report.failed.append(
                        f"{_shown(root)}: the copy-back stopped: {type(exc).__name__}: "
                        + visible(str(exc))[:300]
                    )
                finally:
                    os.close(fd)
            if len(report.failed) > failed:
                report.kept.append(upper)
        return report

    # ---- the walk ----------------------------------------------------------------------

    def _held(
        self, where: Path, src: Path, st: os.stat_result | None, gits: list[tuple[str, ...]]
    ) -> AutoRun | None:
        """Why writing (or, `st` None, deleting) `where` is held, if it is."""
        if self.release:
            return None  # the user allowed the held writes, once
        found = classify(where, self.places, follow_final=False)
        if found is None and on_path(where):
            found = AutoRun(*ON_PATH, where)
        name = src.name.casefold()
        for rest in gits:  # folders that are git folders in the merged view
            if found is None:
                found = git_file(where, (*rest, name))
        if found is None and st is not None:
            link = stat.S_ISLNK(st.st_mode)
            program = link or is_executable(st)
            if program and is_hook_name(name):
                found = AutoRun(*_HOOK_NAMED, where)
            elif program and on_path(where, relative=True):
                found = AutoRun(*ON_PATH, where)
            elif link:
                found = folder_could_hold(where, self.places)
        return found

    def _holds_inside(self, folder: Path) -> AutoRun | None:
        """A held place inside the real folder `folder` about to be removed (all of it is
        looked at: a nested repository's .git can be anywhere)."""
        if self.release:
            return None
        return scan_tree(folder, folder, self.places, whole=True).autorun

    def _walk(self, upper: Path, fd: int, root: Path, report: CopyBack) -> None:
        """Depth first with an explicit stack of open folders (any depth)."""
        top = _Frame(upper, fd, root, PurePosixPath(), iter(()), [], owned=False)
        top.gits = [()] if _git_dir_merged(upper, fd) else []
        top.names = self._names(top, report)
        stack = [top]
        try:
            while stack:
                frame = stack[-1]
                name = next(frame.names, None)
                if name is None:
                    stack.pop()
                    if frame.owned:
                        os.close(frame.fd)
                    continue
                try:
                    child = self._entry(frame, name, report)
                except OSError as exc:
                    report.failed.append(f"{_shown(frame.rel / name)}: {exc.strerror or exc}")
                    continue
                if child is not None:
                    child.names = self._names(child, report)
                    stack.append(child)
        finally:
            for frame in stack:
                if frame.owned:
                    os.close(frame.fd)

    @staticmethod
    def _names(frame: _Frame, report: CopyBack) -> Iterator[str]:
        try:
            return iter(sorted(os.listdir(frame.src)))
        except OSError as exc:
            report.failed.append(f"{_shown(frame.rel or '.')}: {exc.strerror or exc}")
            return iter(())

    def _entry(self, frame: _Frame, name: str, report: CopyBack) -> _Frame | None:
        src, lower, where, rel = frame.src / name, frame.fd, frame.where / name, frame.rel / name
        st = os.lstat(src)
        sign = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)
        if not stat.S_ISDIR(st.st_mode) and self._done.get(str(where)) == sign:
            return None  # applied by an earlier pass and not changed since
        below = _lstat_at(lower, name)
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # a whiteout: deleted
            if below is None:
                self._done[str(where)] = sign
                return None
            held = self._held(where, src, None, frame.gits)
            if held is None and stat.S_ISDIR(below.st_mode):
                held = self._holds_inside(where)
            if held is not None:
                report.held.append(f"deleting {_shown(rel)} ({_why(held, where)})")
                return None
            _remove(lower, name, below)
            self._done[str(where)] = sign
            report.copied += 1
            return None
        held = self._held(where, src, st, frame.gits)
        if stat.S_ISDIR(st.st_mode):
            return self._folder(frame, src, st, name, below, where, rel, held, report)
        if held is not None:
            report.held.append(f"{_shown(rel)} ({held.what}: {held.why})")
            return None
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            return None  # sockets and pipes a program left behind: nothing to keep
        replaced = below is not None and stat.S_ISDIR(below.st_mode)
        inside = self._holds_inside(where) if replaced else None
        if inside is not None:
            report.held.append(f"replacing the folder {_shown(rel)} ({_why(inside, where)})")
            return None
        temp = f".deskhand-{secrets.token_hex(6)}-{name}"[:255]
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src), temp, dir_fd=lower)
        else:
            _copy_file(src, st, lower, temp)
        try:
            if replaced:
                shutil.rmtree(name, dir_fd=lower)  # a folder replaced by a file
            os.replace(temp, name, src_dir_fd=lower, dst_dir_fd=lower)
        except OSError:
            os.unlink(temp, dir_fd=lower)
            raise
        self._done[str(where)] = sign
        report.copied += 1
        return None

    def _folder(
        self,
        frame: _Frame,
        src: Path,
        st: os.stat_result,
        name: str,
        below: os.stat_result | None,
        where: Path,
        rel: PurePosixPath,
        held: AutoRun | None,
        report: CopyBack,
    ) -> _Frame | None:
        """Makes or empties the real folder as the upper one says; its frame to walk next."""
        lower = frame.fd
        existing = below is not None and stat.S_ISDIR(below.st_mode)
        opaque = existing and _opaque(src)
        if held is not None and not (existing and not opaque):
            report.held += [f"{path} ({held.what}: {held.why})" for path in _inside(src, rel)]
            return None
        if not existing:
            if below is not None:
                os.unlink(name, dir_fd=lower)  # a file or symlink replaced by a folder
            os.mkdir(name, 0o700, dir_fd=lower)
            report.copied += 1
        fd = os.open(name, _DIR_FLAGS, dir_fd=lower)
        emptied = self._done.get(str(where)) == (st.st_ino, 0, 0, 0)
        try:
            if opaque and not emptied:  # removed and made again: what is not in it goes
                present = set(os.listdir(src))
                for child in os.listdir(fd):
                    if child in present:
                        continue
                    child_st = _lstat_at(fd, child)
                    if child_st is None:
                        continue
                    gone = self._held(where / child, src / child, None, frame.gits)
                    if gone is None and stat.S_ISDIR(child_st.st_mode):
                        gone = self._holds_inside(where / child)
                    if gone is not None:
                        report.held.append(
                            f"deleting {_shown(rel / child)} ({_why(gone, where / child)})"
                        )
                        continue
                    _remove(fd, child, child_st)
                if not any(h.startswith(f"deleting {_shown(rel)}/") for h in report.held):
                    self._done[str(where)] = (st.st_ino, 0, 0, 0)  # emptied once, not again
            changed = below is None or stat.S_IMODE(below.st_mode) != _mode(st)
            if held is None and (not existing or changed):
                os.fchmod(fd, _mode(st))
            gits = [(*rest, name.casefold()) for rest in frame.gits]
            if _git_dir_merged(src, fd):
                gits.append(())
            return _Frame(src, fd, where, rel, iter(()), gits)
        except BaseException:
            os.close(fd)
            raise


#: An executable file or symlink named as a git hook, anywhere.
_HOOK_NAMED = (
    "a file named as a git hook",
    "it runs on commits wherever a `core.hooksPath` (in any git configuration) points",
)


@dataclass
class _Frame:
    """A folder being walked: its upper folder, the real one (an open descriptor), where
    that is, its path in the report, the names left, and its place in the git folders
    around it (the parts below each, case-folded)."""

    src: Path
    fd: int
    where: Path
    rel: PurePosixPath
    names: Iterator[str]
    gits: list[tuple[str, ...]]
    owned: bool = True


def _git_dir_merged(upper: Path, lower: int) -> bool:
    """Whether the folder is a git folder as the command left it (upper over lower; any
    kind of entry, symlinks included, counts): HEAD, and objects or commondir."""

    def present(name: str) -> bool:
        try:
            st = os.lstat(upper / name)
        except FileNotFoundError:
            return _lstat_at(lower, name) is not None
        except OSError:
            return True
        return not (stat.S_ISCHR(st.st_mode) and st.st_rdev == 0)

    return present("HEAD") and (present("objects") or present("commondir"))


def _why(found: AutoRun, folder: Path) -> str:
    """Why a deletion is held, naming the held place when it lies inside the folder."""
    try:
        inner = found.path.relative_to(folder)
    except ValueError:
        inner = None
    holds = f"it holds {_shown(inner)}, " if inner is not None and inner.parts else ""
    return f"{holds}{found.what}: {found.why}"


#: A held folder is named with at most this many of the files in it.
HELD_NAMES_PER_FOLDER = 20


def _inside(folder: Path, rel: PurePosixPath) -> list[str]:
    """How a held folder is named: the files in it (a few), or the folder itself."""
    found: list[str] = []
    more = 0
    for top, _, files in walk_tree(folder):
        for name in files:
            if len(found) < HELD_NAMES_PER_FOLDER:
                found.append(_shown(rel / top.relative_to(folder) / name))
            else:
                more += 1
    if more:
        found.append(f"{_shown(rel)}/… ({more} more files)")
    return found or [f"{_shown(rel)}/"]


def _mode(st: os.stat_result) -> int:
    return stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID)


def _lstat_at(folder: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _remove(folder: int, name: str, st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=folder)
    else:
        os.unlink(name, dir_fd=folder)


def _opaque(folder: Path) -> bool:
    for attribute in _OPAQUE:
        try:
            if os.getxattr(folder, attribute, follow_symlinks=False) == b"y":
                return True
        except OSError:
            continue
    return False


def _copy_file(src: Path, st: os.stat_result, folder: int, temp: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    out = os.open(temp, flags, 0o600, dir_fd=folder)
    try:
        with open(src, "rb") as source, os.fdopen(out, "wb", closefd=False) as target:
            shutil.copyfileobj(source, target, 1024 * 1024)
        os.fchmod(out, _mode(st))
        os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
    except OSError:
        os.close(out)
        os.unlink(temp, dir_fd=folder)
        raise
    os.close(out)


def prepare(writable: list[Path], home: Path, scratch: Path | None = None) -> Overlay | None:
    """Overlays for these writable folders (the outermost real folders that exist), or None
    when an overlay cannot be mounted over one of them here (the command then runs with the
    read-only places `autorun_readonly` found, as background commands do).

    The changes wait in `scratch` (Deskhand's own folder, on the user's disk: a build's
    output may be large, and /tmp is often memory) unless it lies in or holds one of the
    folders, else in the temp folder."""
    if not sys.platform.startswith("linux"):
        return None
    real: list[Path] = []
    for path in writable:
        folder = Path(os.path.realpath(path))
        if folder.is_dir() and folder not in real:
            real.append(folder)
    roots = [p for p in real if not any(o != p and o in p.parents for o in real)]
    if not roots or Path("/") in roots or not all(works_on(p) for p in roots):
        return None
    place = _scratch_for(roots, scratch)
    return Overlay(roots, home, place)


def _scratch_for(roots: list[Path], scratch: Path | None) -> Path | None:
    if scratch is None:
        return None
    real = Path(os.path.realpath(scratch))
    if any(real == r or r in real.parents or real in r.parents for r in roots):
        return None  # overlayfs refuses layers inside each other
    try:
        real.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    return real


#: Said in the result of a sandboxed command that ran without an overlay on Linux.
WITHOUT_OVERLAY = (
    "ran WITHOUT the overlay (it could not be mounted here just now): its writes went "
    "straight to your folders, and only the places that run code later which existed when "
    "it started were kept read-only"
)


def annotate(
    result: ToolResult, report: CopyBack | None, *, without_overlay: bool = False
) -> ToolResult:
    """The tool result with what was held and what could not be copied back, or with the
    fact that the command ran without the overlay's protection."""
    if without_overlay:
        content = result.content.rstrip() + f"\n[{WITHOUT_OVERLAY}]"
        return replace(result, content=content, data={**(result.data or {}), "overlay": False})
    if report is None or not (report.held or report.failed or report.released):
        return result
    notes = report.notes()
    data = dict(result.data or {})
    data["held"] = report.held
    data["not_copied"] = report.failed
    content = result.content.rstrip() + "\n" + "\n".join(f"[{n}]" for n in notes)
    if report.failed:
        return replace(result, ok=False, content=content, data=data, error=notes[-1])
    return replace(result, content=content, data=data)


class LiveCopy:
    """Copies a background command's changes back every `interval` seconds while it runs
    (its output shows up as it is made; places that run code later stay held), until
    `stop`. The last pass, and the question about what was held, is `Overlay.finish`."""

    def __init__(
        self,
        overlay: Overlay,
        interval: float = 1.0,
        alive: Callable[[], bool] = lambda: True,
    ) -> None:
        self.overlay = overlay
        self.interval = interval
        self.alive = alive
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="overlay-live-copy", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            running = self.alive()
            self.overlay.sync()
            if not running:
                return  # ended: one pass after it, then nothing changes any more

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
