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

from tools.shell.parse import PRIVILEGE, SHELLS, ParsedLine, Redirect, SimpleCommand

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
#: Options naming a file the program writes (long ones count abbreviated too).
_OUTPUT_OPTIONS = {
    "curl": ("-o", "--output", "--output-dir", "-D", "--dump-header", "-c", "--cookie-jar",
             "--trace", "--trace-ascii", "--libcurl", "--etag-save", "--stderr"),
    "wget": ("-O", "--output-document", "-P", "--directory-prefix", "-o", "--output-file",
             "-a", "--append-output"),
    "sort": ("-o", "--output"),
    "tar": ("-C", "--directory"),
    "unzip": ("-d",),
    "git": ("--output", "--output-directory"),
    "less": ("-o", "--log-file", "-O", "--LOG-FILE"),
}  # fmt: skip
#: Short options, per program, that take a value: a cluster stops at them (`curl -sSo f`).
_VALUED_LETTERS = {
    "curl": "oDcdHAeEKuUxXTrbCmQwYyz", "wget": "OPoaeiBUtTwQlAXIDR", "sort": "oSTtk",
    "tar": "bCfFgHIKLNTVX", "unzip": "dxZ", "less": "oOxbhjyz",
}  # fmt: skip
#: find actions that write: the file after them (-fprint FILE), or the places it searches.
_FIND_WRITES = ("-fprint", "-fprint0", "-fprintf", "-fls")
#: Targets of output redirections that write no file.
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})

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
        "mypy", "dmypy",
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
_VERSION_FLAGS = frozenset({"--version", "-V", "-v", "--help", "-h", "version"})


def never_covered(
    parsed: ParsedLine,
    *,
    protected: Callable[[str], str | None],
    cwd: Path,
    autorun: Callable[[str], str | None] | None = None,
) -> list[str]:
    """Reasons, in plain words, that no rule may cover this line (empty: rules may).

    `protected` and `autorun` get absolute paths: the label of a protected place, and why a
    file runs by itself (git hooks, shell start-up files…); None when it is neither."""
    reasons = [f"Deskhand cannot fully check it: {problem}" for problem in parsed.problems]
    reasons += _privilege(parsed.commands)
    reasons += _download_run(parsed.commands)
    reasons += _protected_writes(parsed.commands, protected, cwd)
    if autorun is not None:
        reasons += _autorun_writes(parsed.commands, autorun, cwd)
    reasons += _network_redirects(parsed.commands)
    return list(dict.fromkeys(reasons))


def writes_beyond_program(command: SimpleCommand) -> bool:
    """The command writes somewhere its prefix does not say: an output redirection (not to
    /dev/null or a copied descriptor), `find -delete`/`-fprint`, an output option (`curl -o`,
    `git log --output`), an in-place edit (`sed -i`). The arguments of WRITERS (cp, tee…)
    do not count: their prefix already says they write."""
    if any(_writes_file(redirect) for redirect in command.redirects):
        return True
    if not command.words:
        return False
    name = _base(command.words[0])
    words = command.words[1:]
    if name == "find":
        return any(w == "-delete" or w in _FIND_WRITES for w in words)
    if name in _IN_PLACE and _in_place(name, words):
        return True
    if name not in _OUTPUT_OPTIONS:
        return False
    if any(not _static(command, i) and not w.startswith(("'", '"')) for i, w in _args(command)):
        return True  # `curl $opts`: an unquoted unknown word may hold options
    return bool(_option_places(command))


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
        return True  # every subcommand reads the folder's .npmrc, which can name programs
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


def _autorun_writes(
    commands: Iterable[SimpleCommand], autorun: Callable[[str], str | None], cwd: Path
) -> list[str]:
    reasons = []
    for command in commands:
        for place, unknown in _written(command):
            if unknown:
                continue  # _protected_writes already gives a reason for it
            for candidate in _candidates(place, cwd):
                why = autorun(candidate)
                if why:
                    reasons.append(f"it writes {place}, which runs by itself ({why})")
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
        if _copies_descriptor(redirect) or ">" not in redirect.op:
            continue
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
    if name == "find":
        places += [(p, False) for p in _find_places(words)]
    if name == "sed" and _in_place(name, words):
        places += [(p, False) for p in _sed_files(words)]
    return places + _option_places(command)


def _copies_descriptor(redirect: Redirect) -> bool:
    """`2>&1`, `>&-`: copies or closes a file descriptor, opens no file."""
    op = redirect.op.lstrip("0123456789")
    if op in (">&-", "<&-"):
        return True
    return op in (">&", "<&") and (
        redirect.target is None or redirect.target == "-" or redirect.target.isdigit()
    )


def _writes_file(redirect: Redirect) -> bool:
    op = redirect.op.lstrip("0123456789")
    if ">" not in op or redirect.target in _HARMLESS_TARGETS or op in (">&-", "<&-"):
        return False
    if op in (">&", "<&"):
        return redirect.target is not None and not (
            redirect.target == "-" or redirect.target.isdigit()
        )  # `>&"$fd"` copies a descriptor; `>& file` writes file
    return True


def _args(command: SimpleCommand) -> list[tuple[int, str]]:
    return list(enumerate(command.words))[1:]


def _static(command: SimpleCommand, index: int) -> bool:
    return index < command.static_prefix


def _option_places(command: SimpleCommand) -> list[tuple[str, bool]]:
    """Places named by the program's output options (`curl -sSo f`, `--output=f`)."""
    if not command.words:
        return []
    name = _base(command.words[0])
    options = _OUTPUT_OPTIONS.get(name, ())
    longs = tuple(o for o in options if o.startswith("--"))
    letters = "".join(o[1] for o in options if len(o) == 2)
    valued = _VALUED_LETTERS.get(name, letters)
    words = command.words
    places: list[tuple[str, bool]] = []
    index = 1
    while index < len(words):
        word = words[index]
        value: int | str | None = None
        if word == "--":
            break
        if word.startswith("--"):
            option, equals, attached = word.partition("=")
            if len(option) > 3 and any(o.startswith(option) for o in longs):
                value = attached if equals else index + 1
        elif word.startswith("-") and len(word) > 1:
            for position, letter in enumerate(word[1:], start=1):
                if letter in letters:
                    value = word[position + 1 :] or index + 1
                    break
                if letter in valued:
                    break
        if isinstance(value, int):
            index += 1
            if value < len(words):
                places.append((words[value], not _static(command, value)))
        elif value is not None:
            places.append((value, not _static(command, index)))
        index += 1
    return [(place, unknown) for place, unknown in places if place != "-"]  # "-": stdout


def _find_places(words: tuple[str, ...]) -> list[str]:
    """Files find writes (-fprint FILE), and with -delete the places it starts from."""
    places = [words[i + 1] for i, w in enumerate(words[:-1]) if w in _FIND_WRITES]
    if "-delete" in words:
        for word in words:
            if word.startswith(("-", "(", "!")) or word == ",":
                break
            places.append(word)
    return places


#: Programs that edit files in place with -i (sed -i, perl -pi): the letters after which
#: the rest of an option cluster is a value, not more options.
_IN_PLACE = {"sed": "efl", "gsed": "efl", "perl": "eEIMmCdDx", "ruby": "eErICEWTxFK0"}


def _in_place(name: str, words: Iterable[str]) -> bool:
    stops = _IN_PLACE.get(name, "")
    for word in words:
        if word == "--":
            return False
        if word.startswith("--in-place") and name in ("sed", "gsed"):
            return True
        if word.startswith("-") and not word.startswith("--"):
            for letter in word[1:]:
                if letter == "i":
                    return True
                if letter in stops:
                    break
    return False


def _sed_files(words: tuple[str, ...]) -> list[str]:
    """The files `sed -i` edits: its arguments after the script."""
    script_given = any(w in ("-e", "-f") or w.startswith(("--expression", "--file"))
                       for w in words)  # fmt: skip
    files: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in ("-e", "-f", "-l", "--expression", "--file", "--line-length"):
            skip = True
        elif word.startswith("-") and word != "-":
            continue
        elif not script_given:
            script_given = True  # the first argument is the script
        else:
            files.append(word)
    return files


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
