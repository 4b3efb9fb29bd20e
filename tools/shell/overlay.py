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
and renames it into place (mode without setuid/setgid, times kept). Whatever fails is
named, and the upper folder is then kept so nothing is lost.
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
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from tools.fs.autorun import (
    GIT_CONFIG,
    GIT_HOOK,
    ON_PATH,
    AutoRun,
    autorun_places,
    classify,
    is_git_dir,
    on_path,
)

LAUNCHER = Path(__file__).with_name("overlay_launch.py")
_TRIAL_TIMEOUT = 20.0
_OPAQUE = ("user.overlay.opaque", "trusted.overlay.opaque")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

_lock = threading.Lock()
_works: dict[int, bool] = {}


def launcher_argv(layers: list[tuple[Path, Path, Path]], argv: list[str]) -> list[str]:
    spec = json.dumps([[str(a), str(b), str(c)] for a, b, c in layers])
    return [sys.executable, "-I", str(LAUNCHER), spec, "--", *argv]


def works_on(folder: Path) -> bool:
    """Whether an overlay can be mounted over `folder` here (tried once per file system)."""
    try:
        device = os.stat(folder).st_dev
    except OSError:
        return False
    with _lock:
        if device not in _works:
            _works[device] = _trial(folder)
        return _works[device]


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

    def argv(self, command: list[str]) -> list[str]:
        return launcher_argv(self.layers, command)

    def finish(self, ask: Callable[[CopyBack], bool] | None = None) -> CopyBack:
        """Copies back what is not held; then, when something was held and `ask` (a
        person, never `--yes`) allows it, copies back everything (the walk is idempotent)."""
        report = self._copy_back(release=False)
        if report.held and not report.failed and ask is not None and ask(report):
            again = self._copy_back(release=True)
            again.released = report.held
            report = again
        if not report.failed:
            shutil.rmtree(self.private, ignore_errors=True)
        return report

    def _copy_back(self, release: bool) -> CopyBack:
        self.release = release
        report = CopyBack()
        for root, upper, _ in self.layers:
            failed = len(report.failed)
            try:
                fd = os.open(root, _DIR_FLAGS)
            except OSError as exc:
                report.failed.append(f"{root}: {exc.strerror or exc}")
            else:
                try:
                    self._walk(upper, fd, root, PurePosixPath(), report)
                finally:
                    os.close(fd)
            if len(report.failed) > failed:
                report.kept.append(upper)
        return report

    # ---- the walk ----------------------------------------------------------------------

    def _held(self, where: Path, upper: Path) -> AutoRun | None:
        if self.release:
            return None  # the user allowed the held writes, once
        found = classify(where, self.places, follow_final=False)
        if found is None and on_path(where):
            found = AutoRun(*ON_PATH, where)
        name = upper.name.casefold()
        if found is None and name in ("hooks", "config") and is_git_dir(upper.parent):
            found = AutoRun(*(GIT_HOOK if name == "hooks" else GIT_CONFIG), where)
        return found

    def _walk(
        self, upper: Path, lower: int, dest: Path, rel: PurePosixPath, report: CopyBack
    ) -> None:
        try:
            names = sorted(os.listdir(upper))
        except OSError as exc:
            report.failed.append(f"{rel or '.'}: {exc.strerror or exc}")
            return
        for name in names:
            try:
                self._entry(upper / name, lower, name, dest / name, rel / name, report)
            except OSError as exc:
                report.failed.append(f"{rel / name}: {exc.strerror or exc}")

    def _entry(
        self, src: Path, lower: int, name: str, where: Path, rel: PurePosixPath, report: CopyBack
    ) -> None:
        st = os.lstat(src)
        below = _lstat_at(lower, name)
        held = self._held(where, src)
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # a whiteout: deleted
            if below is None:
                return
            if held is not None:
                report.held.append(f"deleting {rel} ({held.what}: {held.why})")
                return
            _remove(lower, name, below)
            report.copied += 1
            return
        if stat.S_ISDIR(st.st_mode):
            self._folder(src, st, lower, name, below, where, rel, held, report)
            return
        if held is not None:
            report.held.append(f"{rel} ({held.what}: {held.why})")
            return
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            return  # sockets and pipes a program left behind: nothing to keep
        temp = f".deskhand-{secrets.token_hex(6)}-{name}"[:255]
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src), temp, dir_fd=lower)
        else:
            _copy_file(src, st, lower, temp)
        try:
            if below is not None and stat.S_ISDIR(below.st_mode):
                shutil.rmtree(name, dir_fd=lower)  # a folder replaced by a file
            os.replace(temp, name, src_dir_fd=lower, dst_dir_fd=lower)
        except OSError:
            os.unlink(temp, dir_fd=lower)
            raise
        report.copied += 1

    def _folder(
        self,
        src: Path,
        st: os.stat_result,
        lower: int,
        name: str,
        below: os.stat_result | None,
        where: Path,
        rel: PurePosixPath,
        held: AutoRun | None,
        report: CopyBack,
    ) -> None:
        existing = below is not None and stat.S_ISDIR(below.st_mode)
        opaque = existing and _opaque(src)
        if held is not None and not (existing and not opaque):
            report.held += [f"{path} ({held.what}: {held.why})" for path in _inside(src, rel)]
            return
        if not existing:
            if below is not None:
                os.unlink(name, dir_fd=lower)  # a file or symlink replaced by a folder
            os.mkdir(name, 0o700, dir_fd=lower)
            report.copied += 1
        fd = os.open(name, _DIR_FLAGS, dir_fd=lower)
        try:
            if opaque:  # removed and made again: what is not in the new one goes
                present = set(os.listdir(src))
                for child in os.listdir(fd):
                    if child in present:
                        continue
                    gone = self._held(where / child, src / child)
                    if gone is not None:
                        report.held.append(f"deleting {rel / child} ({gone.what}: {gone.why})")
                        continue
                    child_st = _lstat_at(fd, child)
                    if child_st is not None:
                        _remove(fd, child, child_st)
            if held is None and (not existing or stat.S_IMODE(below.st_mode) != _mode(st)):  # type: ignore[union-attr]
                os.fchmod(fd, _mode(st))
            self._walk(src, fd, where, rel, report)
        finally:
            os.close(fd)


#: A held folder is named with at most this many of the files in it.
HELD_NAMES_PER_FOLDER = 20


def _inside(folder: Path, rel: PurePosixPath) -> list[str]:
    """How a held folder is named: the files in it (a few), or the folder itself."""
    found: list[str] = []
    more = 0
    for top, _, files in os.walk(folder):
        for name in sorted(files):
            if len(found) < HELD_NAMES_PER_FOLDER:
                found.append(str(rel / Path(top, name).relative_to(folder)))
            else:
                more += 1
    if more:
        found.append(f"{rel}/… ({more} more files)")
    return found or [f"{rel}/"]


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


def annotate(result: Any, report: CopyBack | None) -> Any:
    """The tool result with what was held and what could not be copied back."""
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
