"""The OS sandbox for commands: bubblewrap on Linux, sandbox-exec on macOS, none on Windows.

Whether a sandbox is usable is decided by running one (`probe`), never by a binary's presence:
some distributions switch off the user namespaces bubblewrap needs, and a profile macOS refuses
must show up as "no sandbox" (commands then ask) rather than as every command failing.

`wrap` turns a command into one that runs sandboxed: the system read-only, writes only in the
given folders (and a private /tmp on Linux), the `readonly` places inside them kept read-only,
the `hidden` places (credential stores, Deskhand's home) and a few daemon sockets out of sight,
and no network unless asked for. Without network, bubblewrap also loads the seccomp filter of
`tools.shell.seccomp` (no Unix sockets: none in the file system can be reached).

`autorun_readonly` lists what must stay read-only inside writable folders: files that make code
run outside the sandbox later (a repository's `.git/config` and hooks read by the user's next
`git status`, hook managers' files, `.envrc`, editor task files, shell start-up files,
autostart entries, folders on $PATH). Limits on Linux: only places that exist can be covered
(bwrap cannot mount over a missing file without creating it), within the scan's depth, so a
new repository, a new `.git/commondir` pointing elsewhere, a new `.envrc` or a deeper one can
still be made. Waited-for commands also run over an overlay (`tools.shell.overlay`) that holds
every write to an auto-run place, at any depth; background commands have only these
read-only places.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

BUBBLEWRAP = "bubblewrap"
SANDBOX_EXEC = "sandbox-exec"
_SANDBOX_EXEC_PATH = "/usr/bin/sandbox-exec"
_PROBE_TIMEOUT = 20.0

#: Sockets of daemons that act for whoever connects: a container engine (root on the host in
#: one `docker run -v /:/host`). Network namespaces do not cover Unix sockets in the file system.
_DAEMON_SOCKETS = (
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/podman/podman.sock",
    "/run/containerd/containerd.sock",
)


@dataclass(frozen=True)
class SandboxInfo:
    """Whether commands can run sandboxed here, by what, and why (plain words)."""

    available: bool
    kind: str | None
    why: str


class SandboxUnavailable(RuntimeError):
    """`wrap` was asked for a sandbox this system does not have."""


_lock = threading.Lock()
_cached: SandboxInfo | None = None
_tool: str | None = None


def probe(*, refresh: bool = False) -> SandboxInfo:
    """Run the platform's sandbox once (cached for the process) and say whether it works."""
    global _cached, _tool
    with _lock:
        if _cached is None or refresh:
            _cached, _tool = _probe_platform()
        return _cached


def _probe_platform() -> tuple[SandboxInfo, str | None]:
    if sys.platform.startswith("linux"):
        return _probe_bubblewrap()
    if sys.platform == "darwin":
        return _probe_sandbox_exec()
    if sys.platform in ("win32", "cygwin"):
        why = "Windows has no sandbox Deskhand can use: commands run with your full permissions"
        return SandboxInfo(False, None, why), None
    why = f"no sandbox is supported on this system ({sys.platform})"
    return SandboxInfo(False, None, why), None


def _probe_bubblewrap() -> tuple[SandboxInfo, str | None]:
    tool = shutil.which("bwrap")
    if tool is None:
        return SandboxInfo(False, None, "bubblewrap (bwrap) is not installed"), None
    trial = bwrap_argv(
        tool, ["true"], cwd=Path("/"), writable=(), hidden=(), network=False, seccomp=_seccomp_fd()
    )
    failure = _run_trial(_with_seccomp(trial))
    if failure is not None:
        why = f"bubblewrap is installed but cannot make a sandbox here: {failure}"
        return SandboxInfo(False, None, why), None
    return SandboxInfo(True, BUBBLEWRAP, "bubblewrap works on this system"), tool


def _probe_sandbox_exec() -> tuple[SandboxInfo, str | None]:
    tool = _SANDBOX_EXEC_PATH if os.path.exists(_SANDBOX_EXEC_PATH) else None
    if tool is None:
        return SandboxInfo(False, None, "sandbox-exec is missing from this Mac"), None
    home = Path.home()
    trial = sandbox_exec_argv(
        tool, ["/usr/bin/true"], writable=[home], hidden=[home / ".ssh"], network=False
    )
    failure = _run_trial(trial)
    if failure is not None:
        return SandboxInfo(False, None, f"sandbox-exec refused Deskhand's profile: {failure}"), None
    return SandboxInfo(True, SANDBOX_EXEC, "the macOS sandbox (sandbox-exec) works"), tool


def _run_trial(argv: list[str]) -> str | None:
    """None when the trial command succeeded, else the first line of what went wrong."""
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc) or type(exc).__name__
    if done.returncode == 0:
        return None
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    return lines[0][:300] if lines else f"exit code {done.returncode}"


def wrap(
    argv: Sequence[str],
    *,
    cwd: Path,
    writable: Sequence[Path],
    hidden: Sequence[Path],
    network: bool,
    die_with_parent: bool = True,
    readonly: Sequence[Path] = (),
) -> list[str]:
    """The command line that runs `argv` in this system's sandbox.

    Raises SandboxUnavailable when `probe()` found none. The caller still starts the result in
    `cwd` with the environment it chose (both pass through the sandbox unchanged).
    `die_with_parent` False: it may outlive Deskhand (a background command the user keeps).
    `readonly`: places inside `writable` folders that stay read-only (`autorun_readonly`).
    """
    info = probe()
    tool = _tool
    if not info.available or tool is None:
        raise SandboxUnavailable(info.why)
    if info.kind == BUBBLEWRAP:
        return _with_seccomp(
            bwrap_argv(
                tool,
                argv,
                cwd=cwd,
                writable=writable,
                hidden=hidden,
                network=network,
                die_with_parent=die_with_parent,
                readonly=readonly,
                seccomp=None if network else _seccomp_fd(),
            )
        )
    return sandbox_exec_argv(
        tool, argv, writable=writable, hidden=hidden, network=network, readonly=readonly
    )


# ---- Linux: bubblewrap -----------------------------------------------------------------------


def _seccomp_fd() -> int | None:
    """bwrap_argv's `seccomp` argument: the no-network filter (`tools.shell.seccomp`), where
    this architecture has one."""
    from tools.shell import seccomp

    return None if seccomp.filter_file() is None else seccomp.FD


def _with_seccomp(argv: list[str]) -> list[str]:
    """A bwrap command line with `--seccomp FD`, started with the filter open on FD."""
    from tools.shell import seccomp

    path = seccomp.filter_file()
    if path is None or "--seccomp" not in argv[: argv.index("--")]:
        return argv
    return seccomp.launcher_argv(path, argv)


def bwrap_argv(
    bwrap: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    writable: Sequence[Path],
    hidden: Sequence[Path],
    network: bool,
    environ: Mapping[str, str] | None = None,
    die_with_parent: bool = True,
    readonly: Sequence[Path] = (),
    seccomp: int | None = None,
) -> list[str]:
    """bubblewrap's command line: read-only system, private /tmp, `writable` bound read-write,
    `readonly` places inside them bound read-only, `hidden` covered, no capabilities (root
    keeps them in bwrap otherwise, and could unmount what hides a place), own PID namespace
    (no other process's /proc, and killing bwrap ends every process inside). `seccomp`: the
    descriptor bwrap reads a seccomp filter from (`tools.shell.seccomp`), with no network."""
    env = os.environ if environ is None else environ
    out = [bwrap, *(["--die-with-parent"] if die_with_parent else [])]
    out += ["--new-session", "--unshare-pid", "--unshare-ipc"]
    if not network:
        out.append("--unshare-net")
        if seccomp is not None:
            out += ["--seccomp", str(seccomp)]
    out += ["--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    out += ["--tmpfs", "/tmp"]
    rw = _existing_real(writable)
    folder = _real(cwd)
    if _under(folder, Path("/tmp")) and not any(_under(folder, w) for w in rw):
        out += ["--ro-bind", str(folder), str(folder)]
    for path in rw:
        out += ["--bind", str(path), str(path)]
    out += _readonly_binds(rw, _existing_real(readonly))
    for path in _outermost(_existing_real([*hidden, *_system_hidden(env)])):
        if path.is_dir():
            out += ["--tmpfs", str(path), "--remount-ro", str(path)]
        else:
            out += ["--ro-bind", "/dev/null", str(path)]
    out += ["--chdir", str(folder), "--", *argv]
    return out


def _readonly_binds(rw: list[Path], readonly: list[Path]) -> list[str]:
    """Read-only binds for the places inside writable folders (others are read-only already,
    and one under /tmp must not be brought into the private /tmp).

    A mount point cannot be renamed or removed, but the folders above it can: `mv proj/a x`
    then `mkdir -p proj/a/.git` would give the name a fresh, writable config. So every folder
    between the writable root and the place is first bound onto itself (still writable),
    which pins it."""
    inside = [p for p in readonly if any(_under(p, w) for w in rw)]
    pins: dict[Path, None] = {}
    for path in inside:
        for root in (w for w in rw if _under(path, w)):
            between = [a for a in path.parents if a != root and root in a.parents]
            pins.update(dict.fromkeys(reversed(between)))
    out: list[str] = []
    for folder in sorted(pins, key=lambda p: len(p.parts)):
        if folder not in rw and not any(_under(folder, r) for r in inside):
            out += ["--bind", str(folder), str(folder)]
    for path in sorted(inside, key=lambda p: len(p.parts)):
        out += ["--ro-bind", str(path), str(path)]
    return out


def _system_hidden(environ: Mapping[str, str]) -> list[Path]:
    """Places outside the catalogue that hand out the user's powers: the session's runtime
    folder (D-Bus session bus and the keyring behind it, ssh/gpg agents), the ssh agent's
    socket wherever it is, container engine sockets."""
    places = [Path(p) for p in _DAEMON_SOCKETS]
    runtime = environ.get("XDG_RUNTIME_DIR") or (
        f"/run/user/{os.getuid()}" if hasattr(os, "getuid") else ""
    )
    for value in (runtime, environ.get("SSH_AUTH_SOCK", "")):
        if value and os.path.isabs(value):
            places.append(Path(value))
    return places


def _real(path: Path) -> Path:
    return Path(os.path.realpath(os.path.expanduser(str(path))))


def _existing_real(paths: Sequence[Path]) -> list[Path]:
    """Real paths (symlinks followed) of those that exist, without repeats, in order."""
    seen: dict[Path, None] = {}
    for path in paths:
        real = _real(path)
        try:
            real.lstat()
        except OSError:
            continue
        seen.setdefault(real, None)
    return list(seen)


def _outermost(paths: list[Path]) -> list[Path]:
    """Drop places inside another hidden folder (already covered; and a read-only tmpfs could
    not take a mount point)."""
    folders = [p for p in paths if p.is_dir()]
    return [p for p in paths if not any(f != p and _under(p, f) for f in folders)]


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


# ---- macOS: sandbox-exec ---------------------------------------------------------------------


#: Read by every git command the user runs later outside the sandbox: a repository's config,
#: hooks, info and commondir, anywhere, and `.git` itself (renamed away, or replaced by a
#: gitfile naming a folder with its own config). `git init` and `git clone` fail inside.
_MACOS_GIT_REGEX = r'(regex #"/\.git(/(modules/.+/)?(config|hooks|info|commondir)|$)")'


def macos_profile(writable: int, hidden: int, *, network: bool, readonly: int = 0) -> str:
    """The sandbox-exec profile (SBPL). Paths come in as parameters W0…, R0…, H0… (`-D`), so
    no path is ever quoted into the text. The last matching rule wins: read-only places and
    git's files come after the writable folders, hidden places last."""
    lines = [
        "(version 1)",
        "(allow default)",
        "(deny file-write*)",
        "(allow file-write*",
        '  (literal "/dev/null") (literal "/dev/zero") (literal "/dev/dtracehelper")',
        '  (regex #"^/dev/tty") (regex #"^/dev/fd/")',
        '  (subpath (param "TMP")))',
    ]
    lines += [f'(allow file-write* (subpath (param "W{i}")))' for i in range(writable)]
    lines += [f'(deny file-write* (subpath (param "R{i}")))' for i in range(readonly)]
    lines.append(f"(deny file-write* {_MACOS_GIT_REGEX})")
    lines += [f'(deny file-read* file-write* (subpath (param "H{i}")))' for i in range(hidden)]
    if not network:
        lines.append("(deny network*)")
    return "\n".join(lines) + "\n"


def sandbox_exec_argv(
    sandbox_exec: str,
    argv: Sequence[str],
    *,
    writable: Sequence[Path],
    hidden: Sequence[Path],
    network: bool,
    temp: Path | None = None,
    readonly: Sequence[Path] = (),
) -> list[str]:
    """sandbox-exec's command line. macOS checks real paths (/private/tmp, not /tmp), so every
    path is resolved. Hidden and read-only places are listed whether or not they exist yet."""
    if argv and argv[0].startswith("-"):
        raise ValueError("a program name may not start with '-'")
    rw = [_real(p) for p in writable]
    ro = list(dict.fromkeys(_real(p) for p in readonly))
    hide = list(dict.fromkeys(_real(p) for p in hidden))
    scratch = _real(temp if temp is not None else Path(os.environ.get("TMPDIR") or "/tmp"))
    profile = macos_profile(len(rw), len(hide), network=network, readonly=len(ro))
    out = [sandbox_exec, "-p", profile]
    params = [("TMP", scratch)]
    params += [(f"W{i}", path) for i, path in enumerate(rw)]
    params += [(f"R{i}", path) for i, path in enumerate(ro)]
    params += [(f"H{i}", path) for i, path in enumerate(hide)]
    for name, path in params:
        out += ["-D", f"{name}={path}"]
    return [*out, *argv]


# ---- what stays read-only inside writable folders ----------------------------------------------

#: Repositories are looked for in each writable folder and this many levels below it,
REPOSITORY_DEPTH = 3
#: looking into at most this many folders per writable folder (breadth first: shallow first).
REPOSITORY_SCAN_MAX_FOLDERS = 200
_SKIPPED_FOLDERS = frozenset({"node_modules", ".venv", "venv", "__pycache__", ".tox", ".git"})
_GIT_PARTS = ("config", "config.worktree", "hooks", "info")
_GITFILE_MAX_BYTES = 4096


def autorun_readonly(writable: Sequence[Path], home: Path) -> list[Path]:
    """Existing places inside `writable` whose change makes code run later outside the
    sandbox: git repositories' config, hooks and info (and gitfiles) in each writable folder
    and up to REPOSITORY_DEPTH levels below it, their `core.hooksPath` folders, the files and
    folders the auto-run classifier names by name in the folders that scan looks into
    (`.husky/`, `.pre-commit-config.yaml`, `lefthook.yml`, `.envrc`, `.vscode/tasks.json`…),
    and entries of the auto-run catalogue (start-up files, autostart, units, folders on
    $PATH) lying inside a writable folder. Real paths, without repeats."""
    roots = _existing_real(writable)
    found: list[Path] = []
    for root in roots:
        if root.is_dir():
            named: list[Path] = []
            for repository in _repositories(root, named):
                found += _git_places(repository)
            found += named
    found += _catalogue_inside(roots, home)
    return [p for p in _existing_real(found) if any(_under(p, r) and p != r for r in roots)]


def _repositories(root: Path, named: list[Path] | None = None) -> Iterator[Path]:
    """Folders holding a `.git` (folder or file), breadth first, bounded. Into `named`: the
    entries of the folders looked into that `tools.fs.autorun.by_name` names (`.git` aside)."""
    from tools.fs.autorun import by_name

    queue: deque[tuple[Path, int]] = deque([(root, 0)])
    visited = 0
    while queue and visited < REPOSITORY_SCAN_MAX_FOLDERS:
        folder, depth = queue.popleft()
        visited += 1
        if os.path.lexists(folder / ".git"):
            yield folder
        if named is not None:
            try:
                names = os.listdir(folder)
            except OSError:
                names = []
            named += [folder / n for n in sorted(names) if n != ".git" and by_name(folder / n)]
        if depth < REPOSITORY_DEPTH:
            queue.extend((sub, depth + 1) for sub in _subfolders(folder))


def _subfolders(folder: Path) -> list[Path]:
    try:
        with os.scandir(folder) as entries:
            names = [
                e.name
                for e in entries
                if e.name not in _SKIPPED_FOLDERS and e.is_dir(follow_symlinks=False)
            ]
    except OSError:
        return []
    return [folder / name for name in sorted(names)]


def _git_places(work_tree: Path) -> list[Path]:
    dot_git = work_tree / ".git"
    if os.path.isdir(dot_git):
        from tools.fs.autorun import repository_hooks

        return [*_git_dir_parts(_real(dot_git)), *repository_hooks(work_tree)]
    git_dir = _gitfile_target(dot_git)
    places = [dot_git]  # rewritten, it could point at a folder with any config
    if git_dir is not None:
        places += _git_dir_parts(git_dir)
        common = _gitfile_target(git_dir / "commondir", prefix="")
        if common is not None:
            places += _git_dir_parts(common)
    return places


def _git_dir_parts(git_dir: Path, depth: int = 0) -> list[Path]:
    """A git folder's config, hooks and info, and those of its submodules' git folders."""
    places = [git_dir / part for part in _GIT_PARTS]
    if depth < 2:
        for module in _subfolders(git_dir / "modules")[:50]:
            places += _git_dir_parts(module, depth + 1)
    return places


def _gitfile_target(path: Path, prefix: str = "gitdir:") -> Path | None:
    """The folder a gitfile (`gitdir: …`) or a `commondir` file names, relative to its own."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(_GITFILE_MAX_BYTES).decode("utf-8", errors="replace").strip()
    except OSError:
        return None
    if not text.startswith(prefix):
        return None
    target = Path(text[len(prefix) :].strip())
    return target if target.is_absolute() else path.parent / target


def _catalogue_inside(roots: list[Path], home: Path) -> list[Path]:
    from tools.fs.autorun import autorun_places, path_folders

    candidates = [*autorun_places(home).paths, *path_folders()]
    out = []
    for path in candidates:
        real = _real(path)
        if any(_under(real, r) and real != r for r in roots) and os.path.lexists(real):
            out.append(real)
    return out
