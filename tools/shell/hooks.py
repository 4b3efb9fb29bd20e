"""What the approval pipeline needs to know about a terminal call, before it runs.

`subject`: every simple command of the line (parsed as bash would, after unwrapping `env`,
`sh -c`, `xargs`…), each with the prefix "Always allow" proposes; the folder. A call runs
without asking only when an allow rule covers every one of them (app/core/rules.py).
`escalate`: why it must ask although a rule might cover it — and what no rule covers
(privilege escalation, a download piped into an interpreter, writing to a protected place,
a line the parser cannot understand, no sandbox).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from tools.spec import CommandPart, Escalation, Subject, ToolContext
from tools.summary_text import quoted

#: Options that point a program at another folder or project than the working folder: a
#: rule bound to a folder must not follow them (`make -C ../other`).
ELSEWHERE_OPTIONS: dict[str, tuple[str, ...]] = {
    "make": ("-C", "--directory", "-f", "--file", "--makefile", "-I", "--include-dir"),
    "npm": ("--prefix", "-C", "--cwd", "--dir", "-w", "--workspace"),
    "yarn": ("--cwd", "--prefix"),
    "pnpm": ("-C", "--dir", "--prefix", "--filter", "-F"),
    "bun": ("--cwd",),
    "cargo": ("--manifest-path", "-C", "--config", "-Z"),
    "go": ("-C", "-modfile"),
    "mvn": ("-f", "--file"),
    "gradle": ("-p", "--project-dir", "-b", "--build-file", "-c", "--settings-file"),
    "pytest": ("--rootdir", "-c", "--confcutdir", "-p", "--override-ini", "-o"),
    "tox": ("-c", "--conf", "--workdir"),
    "just": ("-f", "--justfile", "-d", "--working-directory"),
}
#: Forms of git's own options (kept in `via` by the parser) that choose another repository.
GIT_ELSEWHERE = ("git -C", "git --git-dir", "git --work-tree", "git --exec-path", "git --namespace")
#: Wrappers that run their command in another folder (`env -C ../x make`, `find ../x
#: -execdir make ';'`).
WRAPPED_ELSEWHERE = ("env --chdir", "find -execdir", "find -okdir")
#: Wrappers that write a file themselves (`time -o FILE`, `flock FILE`).
WRAPPED_WRITES = ("time (writes a file)", "flock (writes a file)")

#: Prefixes that make a part's text match no rule (the call then asks).
UNCOVERABLE = "$(cannot be allowed by a rule: {why}) "


def _elsewhere(command: Any) -> bool:
    words = list(command.words)
    if not words:
        return False
    program = words[0].rsplit("/", 1)[-1]
    options = ELSEWHERE_OPTIONS.get(program, ())
    for word in words[1:]:
        if any(word == o or word.startswith(o + "=") for o in options):
            return True
        if any(
            o.startswith("-")
            and not o.startswith("--")
            and word.startswith(o)
            and len(word) > len(o)
            for o in options
            if len(o) == 2
        ):
            return True  # -C../other
    return any(str(v).startswith(GIT_ELSEWHERE + WRAPPED_ELSEWHERE) for v in command.via)


def part_of(
    command: Any, folders: tuple[str, ...] | None = (), *, after_write: bool = False
) -> CommandPart:
    """One parsed simple command as rules see it: its words, quoted, and how far a rule's
    prefix may stop short of them (tools/shell/programs.py). No rule covers it when an
    assignment in front is not known to be inert, when words are not known before it runs,
    when it writes where its program does not imply (a redirect, `find -delete`), when it
    points at another folder (`make -C`, `git -C`), when an interpreter reads its program
    from its input (a rule for `python3` would cover any code), or when the folder it runs
    in is not known (`folders` None: a `cd` Deskhand cannot follow; empty: the call's own
    folder), or when a file name pattern could become options. `after_write`: a command
    before it in the line may have changed the files (a symlink its paths go through)."""
    from tools.shell import danger, parse, programs

    words = list(command.words)
    names = [a.split("=", 1)[0].rstrip("+") for a in command.assignments]
    foreign = [n for n in names if not programs.inert_variable(n)]
    text = shlex.join(words) if words else ""
    why = None
    if command.dynamic or not words:
        why = "words not known before it runs"
    elif foreign:
        why = f"it sets {', '.join(dict.fromkeys(foreign))} for the program"
    elif danger.writes_beyond_program(command) or any(
        v in WRAPPED_WRITES for v in command.via
    ):
        why = "it writes files through a redirect or an output option"
    elif any(r.target is None and _opens_unknown(r.op) for r in command.redirects):
        why = "it redirects to or from a place not known before it runs"
    elif _elsewhere(command):
        why = "it points at another folder or project"
    elif parse.reads_program_from_stdin(command) or programs.reads_program_from_input(words):
        why = "its program comes from its input"
    elif folders is None:
        why = "the folder it runs in is not known before it runs"
    elif _option_patterns(command):
        why = "a file name pattern in it could become options (a file named --…)"
    paths: tuple[str, ...] | None = ()
    if why is None and danger.runs_model_code(command):
        paths = _path_operands(words, folders or ())
        if paths is None:
            why = "a path it names is not known before it runs (~+, ~-)"
        elif paths and after_write:
            why = "a command before it may have changed where the paths it names lead"
    if why is not None:
        return CommandPart(
            text=UNCOVERABLE.format(why=why) + shlex.join([*command.assignments, *words]),
            prefix="",
            in_folder=danger.runs_model_code(command),
            words=tuple(words),
        )
    suggested = parse.proposal_prefix(command)
    cover = programs.coverage(words, len(shlex.split(suggested)) if suggested else len(words))
    if parse._base(words[0]) in danger.WRITERS and len(words) in cover.lengths:
        # `rm build.log` must not become "Always allow rm": a rule for what was shown
        cover = programs.Coverage(cover.lengths, len(words), True)
    in_folder = danger.runs_model_code(command)
    return CommandPart(
        text=text,
        prefix=shlex.join(words[: cover.proposal]),
        in_folder=in_folder,
        lengths=cover.lengths,
        exact=cover.exact,
        folders=(*(folders or ()), *(paths or ())),
        words=tuple(words),
    )


def _opens_unknown(op: str) -> bool:
    """A redirect that opens a file (`< "$f"`, `< /dev/tcp/${h}/80`), not a here-document
    or a copied descriptor."""
    bare = op.lstrip("0123456789")
    return bare not in ("<<", "<<-", "<<<", ">&", "<&", ">&-", "<&-")


def _option_patterns(command: Any) -> bool:
    """A pattern before `--` that may match a name starting with '-' (`*`, `*.py`,
    `[-]-x`): bash would hand the program options nobody saw."""
    end = command.words.index("--") if "--" in command.words else len(command.words)
    return any(0 < i < end and _may_become_option(command.words[i]) for i in command.patterns)


def _may_become_option(pattern: str) -> bool:
    """`*`, `?x`, `[-]-x` may match a name starting with '-'; `-*`, `--to-*` any option;
    `--include=*.py` keeps its option (only the value is a pattern)."""
    first = min((pattern.index(c) for c in "*?[" if c in pattern), default=len(pattern))
    if first == 0:
        return True
    return pattern.startswith("-") and "=" not in pattern[:first]


#: Builtins that change the shell's folder.
_FOLDER_CHANGERS = frozenset({"cd", "pushd", "popd"})


def part_folders(
    commands: Any, folder: Path | None
) -> list[tuple[tuple[str, ...] | None, bool]]:
    """For each command, every folder it may run in — the call's folder and each folder a
    `cd` before it in the line's own shell may have moved to (a cd may fail, so earlier
    folders stay possible) — and whether a command before it may have written. No folder
    (None) when a cd cannot be followed: one in a subshell, pipeline, loop or nested
    shell, one to a place not known before it runs (`cd -`, `cd "$d"`, `popd`, `~+`), one
    after a command that may have written (a symlink: `ln -s ../x sub; cd sub`), or a line
    using `shopt` (cdable_vars)."""
    from tools.shell.programs import known_read_only

    commands = list(commands)
    changers = [c for c in commands if c.words and c.words[0] in _FOLDER_CHANGERS]
    if changers and (
        any(c.words and c.words[0] == "shopt" for c in commands)
        or any(not c.top_level for c in changers)
    ):
        return [(None, True) for _ in commands]
    if folder is None:
        return [((), True) for _ in commands]
    candidates: list[str] = [str(folder)]
    unknown = wrote = False
    out: list[tuple[tuple[str, ...] | None, bool]] = []
    for command in commands:
        out.append((None if unknown else tuple(candidates), wrote))
        if not command.words or command.words[0] not in _FOLDER_CHANGERS:
            wrote = wrote or not known_read_only(command.words) or bool(command.redirects)
            continue
        target = _folder_target(command)
        if target is None or wrote:
            unknown = True
            continue
        moved = [p for c in candidates for p in _both_ways(c, target)]
        candidates = list(dict.fromkeys([*candidates, *moved]))
    return out


def _both_ways(base: str, target: str) -> list[str]:
    """Where `target` from `base` leads, as the kernel resolves it (symlinks first) and as
    bash's `cd` and programs using abspath do (`a/..` dropped as text first)."""
    joined = os.path.join(base, target)
    physical, logical = os.path.realpath(joined), os.path.realpath(os.path.normpath(joined))
    return list(dict.fromkeys([physical, logical]))


def _folder_target(command: Any) -> str | None:
    """Where `cd`/`pushd` goes, when known before the line runs."""
    if command.dynamic or command.words[0] == "popd":
        return None
    rest = [w for w in command.words[1:] if w not in ("-L", "-P", "--")]
    if not rest:
        return str(Path.home()) if command.words[0] == "cd" else None
    if len(rest) != 1 or rest[0].startswith(("-", "+")) or command.patterns:
        return None
    return _expand_tilde(rest[0])


def _expand_tilde(value: str) -> str | None:
    """`~`, `~/x`, `~user/x` as bash expands them; None for `~+`, `~-`, `~N` (the shell's
    own folders, not known before the line runs)."""
    if not value.startswith("~"):
        return value
    head = value[1:].split("/", 1)[0]
    if head[:1] in ("+", "-") or head[:1].isdigit():
        return None
    return os.path.expanduser(value)


#: Schemes whose addresses are elsewhere on the network, not files.
_REMOTE_SCHEMES = ("http://", "https://", "ssh://", "git://", "ftp://", "ftps://", "s3://")


def _path_operands(words: list[str], folders: tuple[str, ...]) -> tuple[str, ...] | None:
    """The places a command's path-like words name (`pytest /elsewhere/t.py`, `make
    ../x`, `--cov-report=html:/x`, `-F../x`, `file:../x`), resolved against each folder it
    may run in (symlinks followed); None when one is not known before the line runs."""
    found: list[str] = []
    bases = folders or (os.getcwd(),)
    for word in words[1:]:
        for value in _path_pieces(word):
            target = _expand_tilde(value)
            if target is None:
                return None
            found += [p for f in bases for p in _both_ways(f, target)]
    return tuple(dict.fromkeys(found))


def _path_pieces(word: str) -> list[str]:
    """What in one word may be a path: an operand, an option's value after '=', an attached
    short option's value (`-F../x`), each part between ':' (`html:/x`, `file:../x`,
    `file:///x`); never a remote address (`https://…`; `git@host:org/repo` is relative)."""
    if word.startswith("--"):
        if "=" not in word:
            return []
        word = word.split("=", 1)[1]
    elif word.startswith("-") and len(word) > 2:
        word = word[2:]
    elif word.startswith("-"):
        return []
    if "=" in word and word.split("=", 1)[0].replace("_", "a").isalnum():
        word = word.split("=", 1)[1]  # make's NAME=/path
    lowered = word.lower()
    if lowered.startswith(_REMOTE_SCHEMES):
        return []
    if lowered.startswith("file://"):
        word = word[len("file://") :] or "/"
    pieces = word.split(":") if ":" in word else [word]
    return [p for p in pieces if "/" in p or p in (".", "..") or p.startswith("~")]


def command_parts(line: str, folder: Path | None) -> tuple[CommandPart, ...]:
    """Every simple command of `line` run in `folder`, as rules see it."""
    from tools.shell.parse import parse_line

    parsed = parse_line(line)
    where = part_folders(parsed.commands, folder)
    if parsed.functions and any(
        c.words and c.words[0] in _FOLDER_CHANGERS for c in parsed.commands
    ):  # a function's body runs wherever it is called: after a cd, in another folder
        where = [(None, True) for _ in where]
    parts = tuple(
        _unsettable(part_of(c, w, after_write=wrote), parsed.sets)
        for c, (w, wrote) in zip(parsed.commands, where, strict=True)
    )
    if not parts:  # nothing understood: one part that no rule covers
        parts = (CommandPart(text="$(not understood) " + line, prefix=""),)
    if "\\\n" in line:  # bash joins `gi\<newline>t`: deny and ask rules see it joined too
        joined = parse_line(line.replace("\\\n", ""))
        parts += tuple(
            CommandPart(
                text=UNCOVERABLE.format(why="joined by a backslash-newline") + c.text,
                prefix="",
                words=tuple(c.words),
            )
            for c in joined.commands
        )
    return parts


def _unsettable(part: CommandPart, sets: tuple[str, ...]) -> CommandPart:
    """A line that sets a variable for the commands after it (`TAR_OPTIONS=…; tar …`,
    `export X`) hands that variable on unseen: none of its commands is coverable."""
    if not sets or not part.lengths:
        return part
    why = f"the line sets {', '.join(sets[:3])} for the commands after it"
    return CommandPart(
        text=UNCOVERABLE.format(why=why) + part.text,
        prefix="",
        in_folder=part.in_folder,
        words=part.words,
    )


def working_folder(args: Any, ctx: ToolContext) -> tuple[Path | None, str | None]:
    """The checked working folder, or None and why it cannot be used."""
    from tools.fs.sandbox import Sandbox, SandboxError

    box = Sandbox.from_context(ctx)
    raw = getattr(args, "folder", None)
    if raw is None:
        if not box.allowed_roots:
            return None, box.note or "Deskhand has no folder to run commands in"
        return box.allowed_roots[0], None
    try:
        folder = box.resolve(raw)
    except SandboxError as exc:
        return None, str(exc)
    if not folder.is_dir():
        return None, f"'{raw}' is not a folder"
    return folder, None


def _parsed(args: Any) -> Any:
    from tools.shell.parse import parse_line

    return parse_line(args.command)


def subject(args: Any, ctx: ToolContext) -> Subject:
    folder, _ = working_folder(args, ctx) if hasattr(args, "folder") else (None, None)
    paths = (str(folder),) if folder is not None else ()
    network = bool(getattr(args, "network", False))
    if hasattr(args, "command"):
        parts = command_parts(args.command, folder)
        target = f"Terminal · {_short(folder)}" if folder is not None else "Terminal"
        return Subject(
            paths=paths, command=args.command, commands=parts, network=network, target=target
        )
    if hasattr(args, "id"):
        return Subject(target=f"Terminal · background command {args.id}")
    return Subject(paths=paths, network=network, target="Terminal · a new temporary folder")


def _short(folder: Path | None) -> str:
    if folder is None:
        return "?"
    home = Path.home()
    try:
        return "~/" + folder.relative_to(home).as_posix() if folder != home else "~"
    except ValueError:
        return str(folder)


def sandbox_state(ctx: ToolContext) -> tuple[bool, str]:
    """(whether commands run sandboxed, in plain words why or why not)."""
    from tools.shell.sandbox import probe

    shell = getattr(getattr(ctx, "settings", None), "shell", None)
    if getattr(shell, "sandbox", "auto") == "off":
        return False, "the sandbox is turned off in Settings"
    info = probe()
    if not info.available:
        return False, f"this system has no usable sandbox ({info.why})"
    return True, f"sandboxed ({info.kind})"


def escalate(args: Any, ctx: ToolContext) -> Escalation | None:
    """Never covered: privilege escalation, a download run by an interpreter, writes to
    protected places, a line not understood, no sandbox. Otherwise an escalation only a
    command rule covering every simple command waives (a broad rule never does)."""
    name = type(args).__name__
    if name == "SendInput":
        return Escalation("types into a running program; what it does depends on that program")
    if name == "ProcessRef":
        return None
    sandboxed, why = sandbox_state(ctx)
    network = bool(getattr(args, "network", False))
    if name == "RunCode":
        if not sandboxed:
            return Escalation(f"runs code the model wrote without a sandbox: {why}", True)
        if network:  # as for commands: the network namespace is shared, never waived
            return Escalation("runs code the model wrote with the network (data may leave)", True)
        return None
    folder, _ = working_folder(args, ctx)
    if folder is None:
        return None  # the tool refuses the folder itself; nothing to ask
    reasons = _never(args, folder, ctx)
    if getattr(args, "keep", False):
        reasons.append("it keeps running after Deskhand quits")
    if network:  # the network namespace is shared: local services, the desktop's sockets
        reasons.append("it may use the network (data may leave the machine)")
    reads_only = not sandboxed and _reads_only(args.command, folder)
    if not sandboxed and not reads_only:
        reasons.append(f"it would run without a sandbox: {why}")
    if reasons:
        return Escalation("; ".join(reasons), never_covered=True)
    if reads_only:
        return Escalation(
            f"runs a command on your machine WITHOUT a sandbox ({why}); Deskhand knows "
            "each program and option in it to only read"
        )
    where = "with the network (data may leave the machine)" if network else "sandboxed"
    return Escalation(f"runs a command on your machine, {where}")


def _reads_only(line: str, folder: Path) -> bool:
    """Every command of the line is a program Deskhand knows to only read, with options it
    knows, and no rule would refuse it for another reason (a write by redirect, a variable,
    a folder not known): only then may a rule cover it without a sandbox."""
    from tools.shell.programs import known_read_only

    parts = command_parts(line, folder)
    return all(p.lengths and known_read_only(p.words) for p in parts)


def _never(args: Any, folder: Path, ctx: ToolContext) -> list[str]:
    from tools.fs.autorun import autorun_places, classify
    from tools.fs.sandbox import Sandbox
    from tools.shell.danger import never_covered

    box = Sandbox.from_context(ctx)
    places = autorun_places(box.home)

    def protected(path: str) -> str | None:
        hit = box.protected.match(Path(path), follow_final=False)
        return hit.label if hit is not None else None

    def autorun(path: str) -> str | None:
        found = classify(Path(path), places, follow_final=False)
        return f"{found.what}: {found.why}" if found is not None else None

    return list(never_covered(_parsed(args), protected=protected, cwd=folder, autorun=autorun))


def summary_line(args: Any, ctx: ToolContext) -> str:
    name = type(args).__name__
    if name == "SendInput":
        return f"Type {quoted(args.text, 60)} into background command {args.id}"
    if name == "ProcessRef":
        return f"Stop background command {args.id} and everything it started"
    sandboxed, _ = sandbox_state(ctx)
    how = "sandboxed" if sandboxed else "NOT sandboxed"
    net = ", with the network" if getattr(args, "network", False) else ""
    if name == "RunCode":
        return f"Run {args.language} code in a temporary folder ({how}{net})"
    folder, problem = working_folder(args, ctx)
    where = _short(folder) if folder is not None else (problem or "?")
    verb = "Start in the background" if name == "StartCommand" else "Run"
    keep = ", kept running after Deskhand quits" if getattr(args, "keep", False) else ""
    return f"{verb} {quoted(args.command, 120)} in {where} ({how}{net}{keep})"
