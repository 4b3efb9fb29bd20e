"""What no rule may cover in a command line, and which commands run code the model can write.

`never_covered` gives plain reasons a line must always ask (privilege escalation, a download
run by an interpreter, writes into protected places, a line not fully understood);
`runs_model_code` says a command runs code from the folder (`npm test`, `make`, `pytest`),
so a rule for it applies to one folder and it runs sandboxed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from tools.shell.parse import PRIVILEGE, SHELLS, ParsedLine, SimpleCommand

#: Programs that fetch something from the network.
DOWNLOADERS = frozenset(
    {"curl", "wget", "fetch", "aria2c", "http", "https", "xh", "lwp-request", "lwp-download"}
)
#: Programs that run code they are given (a file, their input or an argument).
RUNNERS = frozenset(
    {
        *SHELLS, "fish", "python", "python2", "python3", "pypy", "pypy3", "perl", "ruby",
        "node", "nodejs", "deno", "bun", "php", "lua", "luajit", "pwsh", "osascript", "tclsh",
        "Rscript", "julia",
    }
)  # fmt: skip
#: Programs whose (non-option) arguments are places they change.
WRITERS = frozenset(
    {
        "tee", "cp", "mv", "install", "ln", "rm", "rmdir", "unlink", "shred", "truncate",
        "touch", "mkdir", "chmod", "chown", "chgrp", "dd", "rsync", "setfacl", "chattr",
    }
)  # fmt: skip
#: Options naming a file the program writes.
_OUTPUT_OPTIONS = {
    "curl": ("-o", "--output"),
    "wget": ("-O", "--output-document", "-P", "--directory-prefix"),
    "sort": ("-o", "--output"),
    "tar": ("-C", "--directory"),
    "unzip": ("-d",),
}

#: Programs that run code from the folder they run in, whatever their arguments.
_FOLDER_CODE = frozenset(
    {
        "npx", "pnpx", "bunx", "make", "gmake", "just", "task", "ninja", "meson", "cmake",
        "ctest", "bazel", "bazelisk", "scons", "rake", "gradle", "gradlew", "mvn", "mvnw",
        "ant", "sbt", "tox", "nox", "invoke", "pytest", "py.test", "jest", "vitest", "mocha",
        "ava", "karma", "playwright", "cypress", "eslint", "prettier", "webpack", "vite",
        "rollup", "parcel", "tsx", "ts-node", "nodemon", "deno", "bun", "pre-commit",
        "phpunit", "rspec", "bundle", "composer", "pipenv", "poetry", "hatch", "pdm", "uv",
        "cargo", "dotnet", "swift", "git", "mix", "stack", "cabal", "dart", "flutter",
    }
)  # fmt: skip
#: For these, only some subcommands run code from the folder.
_FOLDER_CODE_SUBCOMMANDS = {
    "go": {"run", "test", "generate", "build", "install", "vet"},
    "docker": {"build", "compose", "buildx"},
    "podman": {"build", "compose"},
    "pip": {"install", "wheel", "download"},
    "pip3": {"install", "wheel", "download"},
}
#: npm-like package managers: every subcommand may run package scripts except these.
_PACKAGE_MANAGERS = frozenset({"npm", "yarn", "pnpm"})
_PACKAGE_SAFE = frozenset(
    {"--version", "-v", "view", "info", "show", "ls", "list", "outdated", "search", "help",
     "whoami", "config", "why", "audit", "ping", "root", "bin", "prefix"}
)  # fmt: skip
_VERSION_FLAGS = frozenset({"--version", "-V", "-v", "--help", "-h", "version"})


def never_covered(
    parsed: ParsedLine, *, protected: Callable[[str], str | None], cwd: Path
) -> list[str]:
    """Reasons, in plain words, that no rule may cover this line (empty: rules may)."""
    reasons = [f"Deskhand cannot fully check it: {problem}" for problem in parsed.problems]
    reasons += _privilege(parsed.commands)
    reasons += _download_run(parsed.commands)
    reasons += _protected_writes(parsed.commands, protected, cwd)
    reasons += _network_redirects(parsed.commands)
    return list(dict.fromkeys(reasons))


def runs_model_code(command: SimpleCommand) -> bool:
    """The command runs code the model can write in the folder (a rule for it applies to
    one folder and it runs sandboxed)."""
    if not command.words:
        return False
    program = command.words[0]
    name = _base(program)
    rest = list(command.words[1:])
    if "/" in program and not program.startswith("/"):
        return True  # ./build.sh, scripts/x, node_modules/.bin/jest
    if rest and set(rest) <= _VERSION_FLAGS:
        return False
    if name in _FOLDER_CODE or name in RUNNERS:
        return True
    if name in _PACKAGE_MANAGERS:
        return not rest or rest[0] not in _PACKAGE_SAFE
    if name.startswith(("python3.", "python2.", "pypy3.")):
        return True
    subcommands = _FOLDER_CODE_SUBCOMMANDS.get(name)
    return subcommands is not None and bool(rest) and rest[0] in subcommands


def _privilege(commands: Iterable[SimpleCommand]) -> list[str]:
    reasons = []
    for command in commands:
        names = [v.split(" ", 1)[0] for v in command.via]
        if command.words:
            names.append(_base(command.words[0]))
        for name in names:
            if name in PRIVILEGE:
                reasons.append(f"it asks for administrator rights ({name})")
    return reasons


def _download_run(commands: Iterable[SimpleCommand]) -> list[str]:
    """A download and an interpreter in one line (`curl … | sh`, `sh <(curl …)`,
    `curl -o x.sh … && bash x.sh`): what runs comes from the network."""
    downloads, runners = [], []
    for command in commands:
        if not command.words:
            continue
        name = _base(command.words[0])
        if name in DOWNLOADERS:
            downloads.append(name)
        elif (name in RUNNERS or name.startswith("python3.") or name == "source") and list(
            command.words[1:3]
        ) != ["-m", "json.tool"]:
            runners.append(name)
        if any(v.split(" ", 1)[0] in SHELLS for v in command.via):
            runners.append(command.via[-1].split(" ", 1)[0])
    if downloads and runners:
        return [f"it runs what it downloads ({downloads[0]} and {runners[0]} in one line)"]
    return []


def _protected_writes(
    commands: Iterable[SimpleCommand], protected: Callable[[str], str | None], cwd: Path
) -> list[str]:
    reasons = []
    for command in commands:
        for place, unknown in _written(command):
            if unknown:
                reasons.append(f"it writes to a place not known before it runs ({place})")
                continue
            for candidate in _candidates(place, cwd):
                label = protected(candidate)
                if label:
                    reasons.append(f"it writes to a protected place: {label} ({place})")
                    break
    return reasons


def _network_redirects(commands: Iterable[SimpleCommand]) -> list[str]:
    """bash opens a network connection for /dev/tcp/HOST/PORT and /dev/udp/HOST/PORT."""
    return [
        f"it connects to the network through a redirection ({redirect.target})"
        for command in commands
        for redirect in command.redirects
        if redirect.target is not None and redirect.target.startswith(("/dev/tcp/", "/dev/udp/"))
    ]


def _written(command: SimpleCommand) -> list[tuple[str, bool]]:
    """(place, not known before it runs) for every place the command writes."""
    places: list[tuple[str, bool]] = []
    for redirect in command.redirects:
        op = redirect.op.lstrip("0123456789")
        if ">" not in op:
            continue
        if op in (">&", "<&") and (
            redirect.target is None or redirect.target in ("-",) or (redirect.target.isdigit())
        ):
            continue  # copies or closes a file descriptor
        if redirect.target is None:
            places.append((redirect.op, True))
        else:
            places.append((redirect.target, False))
    if not command.words:
        return places
    name = _base(command.words[0])
    words = command.words[1 : command.static_prefix]
    if name in WRITERS:
        for word in words:
            if name == "dd" and word.startswith("of="):
                places.append((word[3:], False))
            elif not word.startswith("-") and name != "dd":
                places.append((word, False))
    for option in _OUTPUT_OPTIONS.get(name, ()):
        for index, word in enumerate(words):
            if word == option and index + 1 < len(words):
                places.append((words[index + 1], False))
            elif word.startswith(option + "=") or (
                len(option) == 2 and word.startswith(option) and len(word) > 2
            ):
                places.append((word.split("=", 1)[-1] if "=" in word else word[2:], False))
    return places


def _candidates(place: str, cwd: Path) -> list[str]:
    """The absolute path(s) to check for one place; for a pattern, its fixed folder too."""
    expanded = os.path.expanduser(place)
    path = expanded if os.path.isabs(expanded) else os.path.join(str(cwd), expanded)
    path = os.path.normpath(path)
    out = [path]
    glob = min((i for i, ch in enumerate(path) if ch in "*?["), default=-1)
    if glob >= 0:
        out.append(os.path.dirname(path[:glob]) or "/")
    return out


def _base(program: str) -> str:
    return program.rsplit("/", 1)[-1] if "/" in program.rstrip("/") else program
