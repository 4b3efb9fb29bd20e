"""The program guard: which external programs did the tests start, and does each one come
from the set-up scripts?

`ProgramRecorder` is a `sys.addaudithook` hook that notes every program this process starts
(subprocess/asyncio subprocesses, os.posix_spawn[p], os.exec*, os.system), with the path the
start really used. `Provenance` says where each came from: the project's virtual environment,
the Python running the tests, a Debian package (`dpkg -S`) that the scripts' ensure_apt
lists install, or a project folder their ensure_npm calls install npm packages into
(tests/setup_packages.py). Anything else is a program that a machine which
never saw the project will not have, so CI fails on it.

Not seen: programs started by other programs (dockerd starting containerd, Playwright's
driver starting Chromium, a `deskhand` child starting an MCP server). tests/test_ci_programs.py
lists those it knows of and checks them statically.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.exec", "os.system"})
SHELLS = frozenset({"sh", "dash", "bash"})
_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=")


@dataclass(frozen=True)
class Started:
    """One program a test started: as it named it, the file that ran, and for a script the
    interpreter of its #! line (located)."""

    program: str
    path: str
    interpreter: str | None
    test: str


@dataclass(frozen=True)
class Verdict:
    started: Started
    ok: bool
    source: str  # where the program comes from, or why that is a problem


def locate(program: str, search_path: Iterable[str], cwd: str | None = None) -> str | None:
    """The executable file a start of `program` uses (as execvp looks it up), not resolved
    through symlinks; None when there is none (then nothing was started)."""
    if os.sep in program:
        candidates = [os.path.join(cwd or os.getcwd(), program)]
    else:
        candidates = [os.path.join(folder or ".", program) for folder in search_path]
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    return None


def shebang_interpreter(path: str, search_path: Iterable[str]) -> str | None:
    """For a script, the interpreter its #! line runs (through /usr/bin/env too)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n")[0].decode(errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) != "env":
        return words[0]
    rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    found = locate(rest[0], search_path) if rest else None
    return found or words[0]  # env that finds nothing ran only itself


class ProgramRecorder:
    """Notes the programs this process starts while active (from any thread)."""

    def __init__(self) -> None:
        self.started: dict[tuple[str, str | None], Started] = {}
        self.errors: list[str] = []
        self.test = "(collection or session set-up)"
        self._active = False
        self._installed = False
        self._lock = threading.Lock()

    def start(self) -> None:
        """Begin recording. Audit hooks cannot be removed, so `stop` only deactivates it."""
        if not self._installed:
            sys.addaudithook(self._hook)
            self._installed = True
        self._active = True

    def stop(self) -> None:
        self._active = False

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in EVENTS or not self._active:
            return
        try:
            self._record(event, args)
        except Exception as exc:  # an audit hook that raises would stop the program start
            self.errors.append(f"{event}: could not record {args!r:.200}: {exc!r}")

    def _record(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "os.system":
            self._note("/bin/sh", os.get_exec_path(), None)
            self._note_shell_command(os.fsdecode(args[0]), os.get_exec_path(), None)
            return
        if event == "subprocess.Popen":
            executable, argv, cwd, env = args
        else:  # os.posix_spawn / os.exec: (path, argv, env)
            executable, argv, env = args
            cwd = None
        search_path = os.get_exec_path(env)
        program = os.fsdecode(os.fspath(executable))
        cwd_text = os.fsdecode(os.fspath(cwd)) if cwd is not None else None
        self._note(program, search_path, cwd_text)
        words = [os.fsdecode(os.fspath(a)) for a in argv] if isinstance(argv, list | tuple) else []
        if os.path.basename(program) in SHELLS and len(words) >= 3 and words[1] == "-c":
            self._note_shell_command(words[2], search_path, cwd_text)

    def _note_shell_command(self, command: str, search_path: list[str], cwd: str | None) -> None:
        """The first program of a shell command line (best effort: builtins are skipped)."""
        try:
            words = shlex.split(command, comments=True)
        except ValueError:
            return
        while words and _ASSIGNMENT.match(words[0]):
            words.pop(0)  # FOO=bar program ...
        if words:
            self._note(words[0], search_path, cwd)

    def _note(self, program: str, search_path: list[str], cwd: str | None) -> None:
        path = locate(program, search_path, cwd)
        if path is None:
            return  # nothing by that name: the start fails, and the test sees that
        interpreter = shebang_interpreter(path, search_path)
        with self._lock:
            self.started.setdefault(
                (path, interpreter), Started(program, path, interpreter, self.test)
            )


# ---- where a program comes from ---------------------------------------------------------------


def _merged_usr(path: str) -> list[str]:
    """/usr/bin/x and /bin/x are one file on merged-/usr systems; dpkg knows one name."""
    for top in ("/bin/", "/sbin/", "/lib/", "/lib64/"):
        if path.startswith(top):
            return [path, "/usr" + path]
        if path.startswith("/usr" + top):
            return [path, path[4:]]
    return [path]


def path_names(path: str) -> list[str]:
    """The names dpkg may know `path` by: each hop of its symlink chain, the real path, and
    their merged-/usr twins."""
    hops = [path]
    current = path
    for _ in range(20):
        if not os.path.islink(current):
            break
        current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
        hops.append(current)
    hops.append(os.path.realpath(path))
    names: list[str] = []
    for hop in hops:
        for name in _merged_usr(hop):
            if name not in names:
                names.append(name)
    return names


def dpkg_owners(paths: Iterable[str]) -> dict[str, set[str]]:
    """Path -> the packages that installed it, for the paths dpkg knows (`dpkg -S`)."""
    wanted = sorted({p for p in paths if not any(c in p for c in "*?[]")})
    if not wanted:
        return {}
    out = subprocess.run(["dpkg", "-S", *wanted], capture_output=True, text=True).stdout
    owners: dict[str, set[str]] = {}
    for line in out.splitlines():
        if line.startswith(("diversion by", "local diversion")) or ": " not in line:
            continue
        packages, _, path = line.rpartition(": ")
        owners.setdefault(path, set()).update(
            pkg.strip().split(":")[0] for pkg in packages.split(",")
        )
    return owners


class Provenance:
    """Judges recorded programs against the packages the set-up scripts install."""

    def __init__(
        self,
        allowed: Mapping[str, str],
        venv: Path,
        python: str = sys.executable,
        npm: Mapping[Path, str] | None = None,
    ) -> None:
        self.allowed = dict(allowed)
        self.venv = os.path.abspath(venv)
        self.venv_real = os.path.realpath(venv)
        if npm is None:  # the folders scripts/test.sh installs npm packages into
            from tests.setup_packages import npm_folders

            npm = npm_folders()
        self.npm = {os.path.realpath(folder): why for folder, why in npm.items()}
        self.pythons = {os.path.realpath(python), os.path.realpath(sys.executable)}
        self._owners: dict[str, set[str]] = {}

    def judge(self, started: Iterable[Started]) -> list[Verdict]:
        items = list(started)
        files = {p for s in items for p in (s.path, s.interpreter) if p}
        self._owners = dpkg_owners(name for p in files for name in path_names(p))
        return [self._verdict(s) for s in sorted(items, key=lambda s: s.path)]

    def _verdict(self, item: Started) -> Verdict:
        found = self._source(item.path)
        if found is None and item.interpreter:
            inner = self._source(item.interpreter)
            if inner is None:
                inner = (False, f"{item.interpreter}: {self._unknown()}")
            found = (inner[0], f"a script run by {item.interpreter}, from {inner[1]}")
        if found is None:
            found = (False, self._unknown())
        return Verdict(item, *found)

    @staticmethod
    def _unknown() -> str:
        return "not from a Debian package, the virtual environment or the Python running tests"

    def _source(self, path: str) -> tuple[bool, str] | None:
        if self._in_venv(path):
            return True, "the project's virtual environment"
        if os.path.realpath(path) in self.pythons:
            return True, "the Python running the tests"
        real = os.path.realpath(path)
        for folder, why in self.npm.items():
            if real.startswith(os.path.join(folder, "node_modules") + os.sep):
                return True, f"an npm package in {folder} ({why})"
        packages = sorted({pkg for name in path_names(path) for pkg in self._owners.get(name, ())})
        if not packages:
            return None
        for pkg in packages:
            if pkg in self.allowed:
                return True, f"Debian package {pkg} ({self.allowed[pkg]})"
        return False, (
            f"Debian package {', '.join(packages)}, which the set-up scripts do not install: "
            "add it to an ensure_apt list in scripts/test.sh"
        )

    def _in_venv(self, path: str) -> bool:
        real = os.path.realpath(path)
        return any(
            p == root or p.startswith(root + os.sep)
            for p, root in ((os.path.abspath(path), self.venv), (real, self.venv_real))
        )


def report(verdicts: list[Verdict], errors: list[str]) -> list[str]:
    """Plain lines for the terminal: every program and where it comes from."""
    lines = [
        f"{'ok ' if v.ok else 'NOT INSTALLED BY SET-UP'} {v.started.path}"
        f" (as {v.started.program!r}, first by {v.started.test}): {v.source}"
        for v in verdicts
    ]
    return lines + [f"guard error: {e}" for e in errors]
