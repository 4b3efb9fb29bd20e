"""Command lines parsed as bash would parse them (tree-sitter-bash), for command-aware approval.

`parse_line` lists EVERY simple command a line may run: across `;`, `&&`, `||`, pipes, `&`,
subshells, groups, loops, `case`, functions, command and process substitution (also inside
strings, redirect targets and here-documents), after unwrapping commands that run other
commands (`env`, `xargs`, `find -exec`, `sh -c`, `sudo`, `timeout`…). What it cannot follow
becomes a `problem`: a line with problems is never covered by a rule.

The lines are meant to run under bash (`bash --noprofile --norc -c LINE`); other shells
parse some of them differently.
"""

from __future__ import annotations

import re
import shlex
import threading
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

#: Longer lines are not parsed (a problem): nobody approves what they cannot read.
MAX_LINE = 20_000
#: How deep `sh -c '… sh -c "…"'` may nest before it is a problem.
MAX_NESTING = 6
#: How deep the syntax tree may be before it is a problem (no recursion errors).
MAX_TREE_DEPTH = 120

#: Variables that change what a command runs or loads: set before a command, no prefix
#: rule covers it; set for the commands after them (`export PATH=…`), the line is a problem.
RISKY_VARIABLES = frozenset(
    {
        "PATH",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "DYLD_INSERT_LIBRARIES",
        "DYLD_LIBRARY_PATH",
        "DYLD_FRAMEWORK_PATH",
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "PS0",
        "PS1",
        "PS4",
        "IFS",
        "SHELLOPTS",
        "BASHOPTS",
        "GLOBIGNORE",
        "CDPATH",
        "BASH_LOADABLES_PATH",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PYTHONUSERBASE",
        "PYTHONINSPECT",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERL5LIB",
        "PERL5OPT",
        "PERLLIB",
        "RUBYOPT",
        "RUBYLIB",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "CLASSPATH",
        "SSH_ASKPASS",
        "SUDO_ASKPASS",
        "PAGER",
        "MANPAGER",
        "EDITOR",
        "VISUAL",
        "BROWSER",
        "SHELL",
        "HOME",
        "TMPDIR",
        "XDG_CONFIG_HOME",
        "MAKEFLAGS",
        "MFLAGS",
        "CC",
        "CXX",
        "LESSOPEN",
        "LESSCLOSE",
        "RUSTC_WRAPPER",
        "CARGO_BUILD_RUSTC_WRAPPER",
        "GOFLAGS",
        "OPENSSL_CONF",
        "GCONV_PATH",
    }
)
#: Every GIT_* variable counts (GIT_SEQUENCE_EDITOR, GIT_SSH_COMMAND… run programs), and
#: every npm setting (npm_config_script_shell, npm_config_git…).
_RISKY_PREFIXES = ("GIT_", "BASH_FUNC_", "LD_", "DYLD_", "npm_config_", "NPM_CONFIG_")

#: Programs that take a shell command line as a string with -c.
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "rbash"})
#: Programs that give another command higher privileges.
PRIVILEGE = frozenset({"sudo", "su", "doas", "pkexec", "run0", "sudoedit", "runuser"})
#: Builtins that run a string as code, or change how names are looked up.
_CODE_BUILTINS = {
    "eval": "eval runs a string as a command",
    "source": "source runs a file's commands in this shell",
    ".": "'.' runs a file's commands in this shell",
    "alias": "alias changes what a command name runs",
    "trap": "trap runs a string as a command later",
    "enable": "enable can load new builtins from a file",
    "fc": "fc runs commands from the history",
    "bind": "bind can attach commands to keys",
}
#: Letters a nested shell may be given (-k and -a hand words or assignments on to programs
#: as variables; anything not listed is a problem).
_SHELL_LETTERS = frozenset("cseuxvfnlhBCEHPTmbprtoO")
#: Names after -o/-O a nested shell may be given.
_SHELL_OPTIONS = frozenset(
    {"errexit", "nounset", "pipefail", "xtrace", "verbose", "noglob", "noclobber", "posix",
     "errtrace", "functrace", "noexec", "nullglob", "failglob", "globstar", "dotglob",
     "extglob", "nocaseglob", "nocasematch", "inherit_errexit", "lastpipe"}
)  # fmt: skip
#: Builtins whose given option runs a command or changes how names are looked up.
_CODE_OPTIONS = {
    "hash": "-p",
    "complete": "-C",
    "compgen": "-C",
    "mapfile": "-C",
    "readarray": "-C",
}


@dataclass(frozen=True)
class _Exec:
    """Options of a program that make it run another program (a hit is a problem).

    Long options count abbreviated too (`--to-com=…`, getopt accepts it), except words in
    `exact` that are options of their own. `short` holds option letters (or letter pairs,
    zip's -TT) found in a cluster (`-vo X`, `-oX`); when `valued` is given, a cluster stops
    at its first letter that takes a value (the rest is that value), else every letter of
    it counts."""

    long: tuple[str, ...] = ()
    short: tuple[str, ...] = ()
    valued: str | None = None
    exact: frozenset[str] = frozenset()
    #: An argument starting with '+' is a command (less +!cmd).
    plus: bool = False
    #: The first argument may be bundled letters without '-' (`tar xIf prog a.tar`).
    bundled: bool = False


_SSH_VALUED = "BbcDEeFIiJLlmOoPpQRSWw"
#: Programs whose options run other programs: none of them is unwrapped (the line asks).
_EXEC_OPTIONS: dict[str, _Exec] = {
    "tar": _Exec(
        long=(
            "--checkpoint-action",
            "--to-command",
            "--use-compress-program",
            "--rsh-command",
            "--rmt-command",
            "--info-script",
            "--new-volume-script",
        ),
        short=("I", "F"),
        valued="bCfFgHIKLNTVX",
        exact=frozenset({"--checkpoint"}),
        bundled=True,
    ),
    "zip": _Exec(long=("--unzip-command",), short=("TT",)),
    "sort": _Exec(long=("--compress-program",)),
    "rg": _Exec(long=("--pre",)),
    "ssh": _Exec(short=("o", "F", "S"), valued=_SSH_VALUED),
    "scp": _Exec(short=("o", "F", "S", "D"), valued="cDFiJloPSX"),
    "sftp": _Exec(short=("o", "F", "S", "D"), valued="BbcDFiJloPRSsX"),
    "rsync": _Exec(long=("--rsh", "--rsync-path"), short=("e",), valued="BefTM@"),
    "less": _Exec(plus=True),
    "more": _Exec(plus=True),
    "man": _Exec(long=("--pager", "--html"), short=("P", "H")),
    "git": _Exec(long=("--ext-diff", "--extcmd", "--upload-pack", "--receive-pack", "--exec")),
}
#: git subcommands that run a command they are given.
_GIT_RUNS = {
    "bisect": "run",
    "submodule": "foreach",
    "filter-branch": "",
    "filter-repo": "",
}
#: Builtins that take variable names: a name like 'a[$(cmd)]' runs cmd (array subscripts).
_NAME_TAKERS = frozenset(
    {
        "declare",
        "typeset",
        "local",
        "export",
        "readonly",
        "unset",
        "read",
        "mapfile",
        "readarray",
        "let",
        "[[",
        "getopts",
        "wait",
        "((",
    }
)
#: Commands that set variables from input (their values may hide commands for arithmetic).
_SETTERS = frozenset({"read", "mapfile", "readarray", "getopts"})
#: Wrappers with simple option syntax: (flags, options taking a value, positionals before
#: the command). A form not in the table is a problem.
_WRAPPERS: dict[str, tuple[frozenset[str], frozenset[str], int]] = {
    "nice": (frozenset(), frozenset({"-n", "--adjustment"}), 0),
    "nohup": (frozenset(), frozenset(), 0),
    "timeout": (
        frozenset({"--foreground", "--preserve-status", "-v", "--verbose"}),
        frozenset({"-s", "--signal", "-k", "--kill-after"}),
        1,
    ),
    "time": (
        frozenset({"-p", "-a", "-q", "-v", "--verbose", "--quiet", "--append", "--portability"}),
        frozenset({"-o", "--output", "-f", "--format"}),
        0,
    ),
    "stdbuf": (frozenset(), frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "command": (frozenset({"-p"}), frozenset(), 0),
    "exec": (frozenset({"-c", "-l", "-cl", "-lc"}), frozenset({"-a"}), 0),
    "builtin": (frozenset(), frozenset(), 0),
    "setsid": (frozenset({"-c", "--ctty", "-f", "--fork", "-w", "--wait"}), frozenset(), 0),
    "ionice": (frozenset({"-t", "--ignore"}), frozenset({"-c", "--class", "-n", "--classdata"}), 0),
    "chrt": (
        frozenset(
            {
                "-b",
                "--batch",
                "-d",
                "--deadline",
                "-f",
                "--fifo",
                "-i",
                "--idle",
                "-o",
                "--other",
                "-r",
                "--rr",
                "-R",
                "--reset-on-fork",
                "-v",
                "--verbose",
            }
        ),
        frozenset({"-T", "--sched-runtime", "-P", "--sched-period", "-D", "--sched-deadline"}),
        1,
    ),
    "taskset": (frozenset({"-a", "--all-tasks", "-c", "--cpu-list"}), frozenset(), 1),
    "flock": (
        frozenset(
            {
                "-s",
                "--shared",
                "-x",
                "-e",
                "--exclusive",
                "-n",
                "--nb",
                "--nonblock",
                "-u",
                "--unlock",
                "-o",
                "--close",
                "-F",
                "--no-fork",
                "--verbose",
            }
        ),
        frozenset({"-w", "--wait", "--timeout", "-E", "--conflict-exit-code"}),
        1,
    ),
    "coproc": (frozenset(), frozenset(), 0),
    "busybox": (frozenset(), frozenset(), 0),
    "caffeinate": (frozenset({"-d", "-i", "-m", "-s", "-u"}), frozenset({"-t", "-w"}), 0),
    "unbuffer": (frozenset({"-p"}), frozenset(), 0),
    "sudo": (
        frozenset(
            {
                "-E",
                "-H",
                "-n",
                "-P",
                "-S",
                "-b",
                "-A",
                "-k",
                "--preserve-env",
                "--non-interactive",
                "--stdin",
                "--background",
                "--askpass",
                "--set-home",
                "--reset-timestamp",
            }
        ),
        frozenset(
            {
                "-u",
                "--user",
                "-g",
                "--group",
                "-p",
                "--prompt",
                "-C",
                "--close-from",
                "-D",
                "--chdir",
                "-h",
                "--host",
                "-r",
                "--role",
                "-t",
                "--type",
                "-T",
                "--command-timeout",
                "-U",
                "--other-user",
            }
        ),
        0,
    ),
    "doas": (frozenset({"-n"}), frozenset({"-u", "-a", "-C"}), 0),
    "pkexec": (frozenset({"--disable-internal-agent", "--keep-cwd"}), frozenset({"--user"}), 0),
    "run0": (
        frozenset({"--no-ask-password", "--background"}),
        frozenset(
            {
                "-u",
                "--user",
                "-g",
                "--group",
                "-D",
                "--chdir",
                "--setenv",
                "--nice",
                "--property",
                "--unit",
                "--description",
                "--slice",
            }
        ),
        0,
    ),
    "runuser": (frozenset({"-l", "--login", "-m", "-p"}), frozenset({"-u", "-g", "-G"}), 0),
}
#: `-c` config keys of git that are known not to run programs; any other is a problem.
_GIT_SAFE_KEYS = frozenset(
    {
        "color.ui",
        "core.quotepath",
        "core.autocrlf",
        "core.safecrlf",
        "core.eol",
        "core.filemode",
        "core.ignorecase",
        "core.precomposeunicode",
        "core.longpaths",
        "core.abbrev",
        "user.name",
        "user.email",
        "init.defaultbranch",
        "column.ui",
        "pull.rebase",
        "pull.ff",
        "merge.ff",
        "merge.conflictstyle",
        "diff.noprefix",
        "diff.renames",
        "diff.algorithm",
        "diff.mnemonicprefix",
        "push.default",
        "fetch.prune",
        "gc.auto",
        "rerere.enabled",
        "protocol.version",
        "status.short",
        "status.branch",
        "status.showuntrackedfiles",
        "log.showsignature",
        "format.pretty",
        "commit.gpgsign",
        "tag.gpgsign",
        "blame.date",
    }
)
_GIT_SAFE_KEY_PREFIXES = ("color.", "advice.", "i18n.")
_GIT_FLAGS = frozenset(
    {
        "-P",
        "--no-pager",
        "-p",
        "--paginate",
        "--bare",
        "--no-replace-objects",
        "--literal-pathspecs",
        "--glob-pathspecs",
        "--noglob-pathspecs",
        "--icase-pathspecs",
        "--no-optional-locks",
        "--no-advice",
    }
)
_GIT_PATH_OPTIONS = frozenset({"-C", "--git-dir", "--work-tree", "--namespace"})


@dataclass(frozen=True)
class Redirect:
    """One redirection: its operator (">", ">>", "2>", "&>", "<", "<<", "<<<"…) and its
    target when known before the line runs (None for `> "$f"`, here-documents, fd copies)."""

    op: str
    target: str | None


@dataclass(frozen=True)
class SimpleCommand:
    """One command the line may run, after unwrapping (`sudo env X=1 rm f` → rm f)."""

    #: argv as bash passes it (quotes removed, escapes resolved); unknown words keep their
    #: source text and make the command `dynamic`.
    words: tuple[str, ...]
    #: NAME=value prefixes, including those given to `env` and to the wrappers around it.
    assignments: tuple[str, ...]
    redirects: tuple[Redirect, ...]
    #: The source text of this command (of the innermost line it came from).
    text: str
    #: Some word is not known before it runs ($x, $(..), `..`, brace expansion); glob
    #: patterns in arguments count as static text.
    dynamic: bool
    #: Wrappers it was unwrapped from, outermost first ("sudo", "env", "bash -c", "xargs",
    #: "find -exec", "git -C dir"…).
    via: tuple[str, ...] = ()
    #: How many leading words are known before it runs (prefix rules match only those).
    static_prefix: int = 0
    #: It runs in the line's own shell, not in a subshell, pipeline, loop, function or
    #: nested shell: only there does a `cd` move the commands after it predictably.
    top_level: bool = False
    #: Indices of words that are unquoted file name patterns (bash replaces them with the
    #: names that match: `*` may become `--checkpoint-action=…`).
    patterns: tuple[int, ...] = ()


@dataclass(frozen=True)
class ParsedLine:
    """What a command line may run, and why it may not be fully understood."""

    text: str
    commands: tuple[SimpleCommand, ...]
    #: Plain sentences; a line with any problem is never covered by a rule.
    problems: tuple[str, ...]
    #: Variables the line sets for the commands after it (`X=1; cmd`, `export X`, `read X`,
    #: `for X in …`) that are not known to be inert: no rule covers any of its commands.
    sets: tuple[str, ...] = ()
    #: It defines a function: a body may run in any folder the line reaches.
    functions: bool = False


# ------------------------------------------------------------------------------------------
# The parser: one per thread (tree-sitter parsers are not thread-safe), created lazily.

_local = threading.local()
_language: Any = None
_language_lock = threading.Lock()


def _parser() -> Any:
    parser = getattr(_local, "parser", None)
    if parser is None:
        global _language
        import tree_sitter
        import tree_sitter_bash

        with _language_lock:
            if _language is None:
                _language = tree_sitter.Language(tree_sitter_bash.language())
        parser = tree_sitter.Parser(_language)
        _local.parser = parser
    return parser


def parse_line(text: str) -> ParsedLine:
    """Every simple command `text` may run under bash, and its problems. Never raises."""
    if not isinstance(text, str):
        return ParsedLine(str(type(text).__name__), (), ("the command is not text",))
    if len(text) > MAX_LINE:
        return ParsedLine(text, (), (f"the command is too long to check ({len(text)} characters)",))
    try:
        walker = _Walker(depth=0)
        walker.run(text)
        problems = _character_problems(text) + walker.problems
        return ParsedLine(
            text,
            tuple(walker.commands),
            tuple(dict.fromkeys(problems)),
            tuple(dict.fromkeys(walker.sets)),
            walker.functions,
        )
    except Exception as exc:  # a parser bug must not let a line through unchecked
        return ParsedLine(text, (), (f"the command could not be checked ({type(exc).__name__})",))


def _character_problems(text: str) -> list[str]:
    """Characters bash and the parser may see differently, or that hide text on screen."""
    problems: list[str] = []
    for ch in dict.fromkeys(text):
        if ch in "\t\n":
            continue
        category = unicodedata.category(ch)
        if ch == "\0":
            problems.append("it contains a NUL character")
        elif ch == "\r":
            problems.append("it contains a carriage return (bash and the screen disagree)")
        elif category in ("Cc", "Cs", "Co", "Cn"):
            problems.append(f"it contains the control character U+{ord(ch):04X}")
        elif category == "Cf":
            problems.append(f"it contains the invisible character U+{ord(ch):04X}")
        elif category in ("Zs", "Zl", "Zp") and ch != " ":
            problems.append(f"it contains the unusual space U+{ord(ch):04X}")
    if _JOINED_BY_CONTINUATION.search(text):
        problems.append(
            "a backslash at the end of a line joins two words (bash reads them as one)"
        )
    return problems


#: `a\<newline>b`: bash removes the pair and reads one word; the parser sees two.
_JOINED_BY_CONTINUATION = re.compile(r"[^\s\\]\\\n[^\s]")


def _short(text: str, limit: int = 40) -> str:
    """A fragment of the line for a problem sentence: one line, control characters escaped."""
    out = "".join(ch if ch.isprintable() else f"\\x{ord(ch) % 256:02x}" for ch in text)
    return out if len(out) <= limit else out[: limit - 1] + "…"


# ------------------------------------------------------------------------------------------
# Words


@dataclass
class _Word:
    value: str
    static: bool = True
    #: An unquoted glob character: the word may become other words (file names).
    pattern: bool = False


_GLOB = frozenset("*?[")


def _unescape_unquoted(raw: str) -> tuple[str, bool]:
    """An unquoted word's text as bash passes it: `\\x` → x, backslash-newline removed.
    Also says whether an unescaped glob character is left."""
    out: list[str] = []
    pattern = False
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw):
            if raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
            continue
        if ch in _GLOB:
            pattern = True
        out.append(ch)
        i += 1
    return "".join(out), pattern


def _unescape_double(raw: str) -> str:
    """Text inside double quotes: backslash escapes only $ ` " \\ and newline."""
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw) and raw[i + 1] in '$`"\\\n':
            if raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


_ANSI_SIMPLE = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def _ansi_c(raw: str) -> str | None:
    """The value of $'…' (raw is the text between the quotes), or None when unsure."""
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch != "\\" or i + 1 >= len(raw):
            out.append(ch)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt in _ANSI_SIMPLE:
            out.append(_ANSI_SIMPLE[nxt])
            i += 2
            continue
        digits, base, width, start = "", 0, 0, i + 2
        if nxt in "01234567":
            base, width, start = 8, 3, i + 1
        elif nxt == "x":
            base, width = 16, 2
        elif nxt == "u":
            base, width = 16, 4
        elif nxt == "U":
            base, width = 16, 8
        else:
            return None  # \cX and the rare rest: not worth guessing
        j = start
        allowed = "01234567" if base == 8 else "0123456789abcdefABCDEF"
        while j < len(raw) and j - start < width and raw[j] in allowed:
            digits += raw[j]
            j += 1
        if not digits:
            return None
        code = int(digits, base)
        if code == 0 or code > 0x10FFFF:
            return None  # bash stops the string at NUL: not the same text
        out.append(chr(code) if base != 8 and nxt != "x" else chr(code % 256))
        i = j
    return "".join(out)


def _brace_expansion(text: str) -> bool:
    """An unquoted `{a,b}` or `{1..3}` that bash expands into several words."""
    start = text.find("{")
    if start < 0:
        return False
    end = text.find("}", start)
    inner = text[start + 1 : end] if end > start else ""
    return end > start and ("," in inner or ".." in inner)


# ------------------------------------------------------------------------------------------
# The walk


class _Stop(Exception):
    """The tree is too deep to walk."""


@dataclass
class _Input:
    """What a command reads as input from a here-document or here-string, when known."""

    text: str | None


@dataclass
class _Walker:
    depth: int
    commands: list[SimpleCommand] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    source: bytes = b""
    #: A variable is set in this line to a value that is not a plain number.
    tainted: bool = False
    #: Arithmetic reads a variable (bash evaluates its value as arithmetic, which can run
    #: commands hidden in array subscripts).
    arithmetic_reads: bool = False
    #: Names of variables set for later commands that are not known to be inert.
    sets: list[str] = field(default_factory=list)
    #: The line defines a function (its body runs wherever it is called from).
    functions: bool = False

    def setting(self, name: str) -> None:
        from tools.shell.programs import inert_variable

        if not inert_variable(name):
            self.sets.append(name)

    def run(self, text: str) -> None:
        self.source = text.encode("utf-8", "surrogatepass")
        tree = _parser().parse(self.source)
        root = tree.root_node
        try:
            self.visit(root, 0)
        except _Stop:
            self.problems.append("it is nested too deeply to check")
        if root.has_error:
            self.problems.append(self._error_problem(root))
        if self.tainted and self.arithmetic_reads:
            self.problems.append(
                "arithmetic reads a variable set in this line (bash may run commands hidden in it)"
            )

    def _error_problem(self, root: Any) -> str:
        stack = [root]
        while stack:
            node = stack.pop()
            if node.is_missing:
                return (
                    f"the shell would not understand it: something is missing near "
                    f"'{_short(self.text(node.parent or node))}'"
                )
            if node.type == "ERROR":
                return f"the shell would not understand it: '{_short(self.text(node))}'"
            stack.extend(reversed(node.children))
        return "the shell would not understand it"

    def text(self, node: Any) -> str:
        return self.source[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def problem(self, sentence: str) -> None:
        self.problems.append(sentence)

    # -- structure ---------------------------------------------------------------------

    def visit(self, node: Any, level: int) -> None:
        if level > MAX_TREE_DEPTH:
            raise _Stop
        kind = node.type
        if not node.is_named:
            return
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, node, level)
        elif kind in _PLAIN:
            self.visit_children(node, level)
        else:
            self.problem(f"it uses shell syntax Deskhand does not know ({kind})")
            self.visit_children(node, level)

    def visit_children(self, node: Any, level: int) -> None:
        for child in node.children:
            self.visit(child, level + 1)

    def on_error(self, node: Any, level: int) -> None:
        self.visit_children(node, level)  # the commands inside still count

    def on_command(self, node: Any, level: int, outer: Sequence[tuple[Redirect, Any]] = ()) -> None:
        words: list[_Word] = []
        assignments: list[str] = []
        redirects = list(outer)
        for child in node.children:
            name = child.type
            if name == "variable_assignment":
                assignments.append(self.assignment(child, level))
            elif name in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                redirects.append(self.redirect(child, level))
            elif name == "command_name":
                words.append(
                    self.word(child.named_children[0], level)
                    if child.named_children
                    else _Word("", static=False)
                )
            elif child.is_named and name != "comment":
                words.append(self.word(child, level))
        before = len(self.commands)
        self.emit(words, assignments, redirects, self.text(node), ())
        if self.depth == 0 and _in_own_shell(node):
            for index in range(before, len(self.commands)):
                if self.commands[index].text == self.text(node):
                    self.commands[index] = replace(self.commands[index], top_level=True)

    def on_redirected(self, node: Any, level: int) -> None:
        body = node.child_by_field_name("body")
        redirects = [
            self.redirect(child, level)
            for child in node.children
            if child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect")
        ]
        if body is None:  # `> file` alone: truncates a file
            self.commands.append(
                SimpleCommand((), (), tuple(r for r, _ in redirects), self.text(node), False)
            )
            return
        if body.type == "command":
            self.on_command(body, level + 1, redirects)
            return
        before = len(self.commands)
        self.visit(body, level + 1)
        extra = tuple(r for r, _ in redirects)
        for index in range(before, len(self.commands)):
            command = self.commands[index]
            self.commands[index] = replace(command, redirects=command.redirects + extra)

    def on_standalone_assignment(self, node: Any, level: int) -> None:
        value = self.assignment(node, level)
        name = value.split("=", 1)[0].rstrip("+")
        self.setting(name)
        if _risky(name):
            self.problem(f"it sets {name} for the commands after it")

    def on_declaration(self, node: Any, level: int) -> None:
        """export/declare/local/readonly/typeset: sets variables, runs nothing itself."""
        words: list[str] = []
        for child in node.children:
            if child.type == "variable_assignment":
                text = self.assignment(child, level)
                name = text.split("=", 1)[0].rstrip("+")
                self.setting(name)
                if _risky(name):
                    self.problem(f"it sets {name} for the commands after it")
                words.append(text)
            elif child.is_named:
                words.append(self.word(child, level).value)
                if child.type in ("variable_name", "word"):
                    self.setting(words[-1].split("=", 1)[0])  # `export X`: hands X on
        self.tainted = True
        self.check_names(["declare", *words])

    def on_unset(self, node: Any, level: int) -> None:
        words = [self.word(child, level).value for child in node.named_children]
        self.check_names(["unset", *words])

    def on_test(self, node: Any, level: int) -> None:
        """`[[ … ]]` and `[ … ]` become commands "[[" / "[" with their words."""
        opener = node.children[0].type if node.children else "[["
        closer = "]]" if opener == "[[" else "]"
        words = [_Word(opener)]
        for leaf in _leaves(node.children[1:-1] if len(node.children) > 2 else []):
            words.append(self.word(leaf, level) if leaf.is_named else _Word(self.text(leaf)))
        words.append(_Word(closer))
        ops = {w.value for w in words}
        if ops & {"-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-v"}:
            self.arithmetic(node)
        self.emit_plain(words, node)

    def on_compound(self, node: Any, level: int) -> None:
        first = node.children[0].type if node.children else ""
        if first != "((":
            self.visit_children(node, level)
            return
        words = [_Word("((")]
        for leaf in _leaves(node.children[1:-1]):
            words.append(self.word(leaf, level) if leaf.is_named else _Word(self.text(leaf)))
        words.append(_Word("))"))
        self.arithmetic(node)
        self.emit_plain(words, node)

    def on_arithmetic(self, node: Any, level: int) -> None:
        self.arithmetic(node)
        self.visit_children(node, level)

    def on_subscript(self, node: Any, level: int) -> None:
        index = node.child_by_field_name("index")
        if index is not None:
            self.arithmetic(index)
        self.visit_children(node, level)

    def on_for(self, node: Any, level: int) -> None:
        variable = node.child_by_field_name("variable")
        if variable is not None:
            self.setting(self.text(variable))
        values = node.children_by_field_name("value")
        if not values or not all(v.type == "number" for v in values):
            self.tainted = True
        self.visit_children(node, level)

    def on_expansion(self, node: Any, level: int) -> None:
        text = self.text(node)
        if text.startswith("${!"):
            self.arithmetic_reads = True  # ${!x} expands the variable named by x's value
        if "@P" in text:
            self.problem("it expands a variable as a prompt (bash may run commands in it)")
        name = node.named_children[0] if node.named_children else None
        if name is not None and name.type == "variable_name":
            after = self.source[name.end_byte : node.end_byte].decode("utf-8", "replace")
            if after.startswith((":=", "=")):
                self.setting(self.text(name))  # ${X:=v} assigns X for what follows
            if after[:1] == ":" and after[1:2] not in ("-", "=", "+", "?"):
                self.arithmetic_reads = True  # ${x:offset:length} is arithmetic
        self.visit_children(node, level)

    def on_heredoc(self, node: Any, level: int) -> None:
        self.redirect(node, level)

    def on_bare_redirect(self, node: Any, level: int) -> None:
        """A redirection outside a command (`$(> file)`, `$(< file)`): it still opens the file."""
        redirect, _ = self.redirect(node, level)
        self.commands.append(SimpleCommand((), (), (redirect,), self.text(node), False))

    def on_substitution(self, node: Any, level: int) -> None:
        text = self.text(node)
        if text.startswith("`") and "\\`" in text:
            self.problem("it nests backquotes, which Deskhand does not follow")
        self.visit_children(node, level)

    def on_function(self, node: Any, level: int) -> None:
        self.functions = True
        body = node.child_by_field_name("body")
        if body is not None:
            self.visit(body, level + 1)  # its commands run when it is called

    def arithmetic(self, node: Any) -> None:
        stack = [node]
        while stack:
            current = stack.pop()
            if current.type in ("variable_name", "simple_expansion", "expansion"):
                self.arithmetic_reads = True
                return
            if current.type == "word" and self.text(current)[:1].isalpha():
                self.arithmetic_reads = True
                return
            stack.extend(current.named_children)

    # -- words, assignments, redirects ---------------------------------------------------

    def word(self, node: Any, level: int) -> _Word:
        """The static value of one word node; nested commands inside it are visited."""
        kind = node.type
        if kind == "word":
            raw = self.text(node)
            value, pattern = _unescape_unquoted(raw)
            if _brace_expansion(raw):
                return _Word(raw, static=False)
            return _Word(value, pattern=pattern)
        if kind in ("number", "extglob_pattern", "regex", "test_operator"):
            return _Word(self.text(node))
        if kind == "raw_string":
            return _Word(self.text(node)[1:-1])
        if kind == "ansi_c_string":
            decoded = _ansi_c(self.text(node)[2:-1])
            return _Word(self.text(node), static=False) if decoded is None else _Word(decoded)
        if kind in ("string", "translated_string"):
            parts: list[str] = []
            static = True
            for child in node.named_children:
                if child.type == "string_content":
                    parts.append(_unescape_double(self.text(child)))
                else:
                    static = False
                    self.visit(child, level + 1)
            if static:
                return _Word("".join(parts))
            return _Word(self.text(node), static=False)
        if kind == "concatenation":
            raw = self.text(node)
            pieces = [self.word(child, level + 1) for child in node.named_children]
            unquoted = "".join(self.text(c) for c in node.named_children if c.type == "word")
            if _brace_expansion(unquoted):
                return _Word(raw, static=False)  # {a,b}: bash makes several words of it
            if all(p.static for p in pieces):
                return _Word(
                    "".join(p.value for p in pieces), pattern=any(p.pattern for p in pieces)
                )
            return _Word(raw, static=False)
        # $x, ${x}, $(…), `…`, <(…), $((…)), {1..3} and anything else: not known statically
        self.visit(node, level + 1)
        return _Word(self.text(node), static=False)

    def assignment(self, node: Any, level: int) -> str:
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if name is not None and name.type == "subscript":
            self.visit(name, level + 1)
        name_text = self.text(name) if name is not None else ""
        op = "+=" if "+=" in self.text(node)[len(name_text) : len(name_text) + 2] else "="
        if value is None:
            return f"{name_text}{op}"
        if value.type == "array":
            self.visit(value, level + 1)
            self.tainted = True
            return f"{name_text}{op}{self.text(value)}"
        word = self.word(value, level)
        if not (word.static and word.value.lstrip("-").isdigit()):
            self.tainted = True
        shown = word.value if word.static else self.text(value)
        return f"{name_text.rstrip('+')}{op}{shown}"

    def redirect(self, node: Any, level: int) -> tuple[Redirect, _Input | None]:
        kind = node.type
        if kind == "heredoc_redirect":
            return self.heredoc(node, level)
        if kind == "herestring_redirect":
            target = node.named_children[-1] if node.named_children else None
            word = self.word(target, level) if target is not None else _Word("", static=False)
            return Redirect("<<<", None), _Input(word.value if word.static else None)
        op = "".join(self.text(c) for c in node.children if not c.is_named)
        descriptor = node.child_by_field_name("descriptor")
        if descriptor is not None:
            op = self.text(descriptor) + op
        destination = node.child_by_field_name("destination")
        if destination is None:
            return Redirect(op, None), None
        word = self.word(destination, level)
        return Redirect(op, word.value if word.static and not word.pattern else None), None

    def heredoc(self, node: Any, level: int) -> tuple[Redirect, _Input]:
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        op = next((self.text(c) for c in node.children if not c.is_named), "<<")
        delimiter = self.text(start) if start is not None else ""
        text = self.text(body) if body is not None else ""
        if op == "<<-":
            text = "\n".join(line.lstrip("\t") for line in text.split("\n"))
        if any(ch in delimiter for ch in "'\"\\"):
            return Redirect(op, None), _Input(text)  # quoted delimiter: no expansion
        if not any(mark in text for mark in ("$", "`")):
            return Redirect(op, None), _Input(_unescape_heredoc(text))
        # Expanding here-document: tree-sitter finds $(…) in it, but not backquotes; the text
        # between the substitutions it found is parsed again for those.
        if body is not None:
            pos, pieces = body.start_byte, [""]
            for child in body.named_children:
                pieces[-1] += self.source[pos : child.start_byte].decode("utf-8", "replace")
                if child.type == "heredoc_content":
                    pieces[-1] += self.text(child)
                else:
                    pieces.append("")
                    self.visit(child, level + 1)
                pos = child.end_byte
            pieces[-1] += self.source[pos : body.end_byte].decode("utf-8", "replace")
            for piece in pieces:
                if "`" in piece:
                    self.backquotes(piece)
        return Redirect(op, None), _Input(None)

    def backquotes(self, fragment: str) -> None:
        """Commands in backquotes of here-document text: parsed as a double-quoted string."""
        inner = _Walker(depth=self.depth)
        wrapped = ': "' + _heredoc_as_double_quoted(fragment) + '"'
        inner.run(wrapped)
        self.commands.extend(c for c in inner.commands if c.text != wrapped)
        self.problems.extend(f"in a here-document: {p}" for p in inner.problems)
        self.tainted = self.tainted or inner.tainted
        self.arithmetic_reads = self.arithmetic_reads or inner.arithmetic_reads
        self.sets.extend(inner.sets)

    # -- commands --------------------------------------------------------------------------

    def emit_plain(self, words: list[_Word], node: Any) -> None:
        self.check_names([w.value for w in words])
        self.commands.append(_command(words, [], [], self.text(node), ()))

    def emit(
        self,
        words: list[_Word],
        assignments: list[str],
        redirects: Sequence[tuple[Redirect, _Input | None]],
        text: str,
        via: tuple[str, ...],
    ) -> None:
        """Unwrap and record one command (or, for `sh -c`, the commands of its string)."""
        plain = [r for r, _ in redirects]
        stdin = next((data for _, data in reversed(redirects) if data is not None), None)
        for _ in range(32):  # unwrapping always shortens the words; 32 wrappers is plenty
            if not words:
                if assignments or plain:  # `X=1 > f`: no program
                    self.commands.append(_command([], assignments, plain, text, via))
                return
            head = words[0]
            if not head.static:
                self.problem(f"the program name '{_short(head.value)}' is not known before it runs")
                self.commands.append(_command(words, assignments, plain, text, via))
                return
            if head.pattern or _brace_expansion(head.value):
                self.problem(f"the program name '{_short(head.value)}' is a file name pattern")
                self.commands.append(_command(words, assignments, plain, text, via))
                return
            step = self.unwrap(words, assignments, text, via, plain, stdin)
            if step is None:
                return
            if isinstance(step, str):  # "done"
                self.commands.append(_command(words, assignments, plain, text, via))
                return
            words, assignments, via = step
        self.problem("it wraps a command in too many other commands")

    def unwrap(
        self,
        words: list[_Word],
        assignments: list[str],
        text: str,
        via: tuple[str, ...],
        redirects: list[Redirect],
        stdin: _Input | None,
    ) -> tuple[list[_Word], list[str], tuple[str, ...]] | str | None:
        """One unwrapping step: the inner command, "done" (record it as is), or None when
        the commands were recorded another way (a shell's string)."""
        program = _base(words[0].value)
        values = [w.value for w in words]
        self.check_program(program, values)
        if program == "busybox" and len(words) > 1 and words[1].value in SHELLS:
            words, program = words[1:], words[1].value
        if program in SHELLS:
            return self.shell(words, assignments, text, via, redirects, stdin)
        if program == "env":
            return self.env(words, assignments, via)
        if program == "xargs":
            return self.xargs(words, assignments, via)
        if program == "find":
            self.find(words, assignments, text, via, redirects)
            return "done"
        if program == "git":
            return self.git(words, assignments, via)
        if program == "su":
            return self.su(words, assignments, text, via, redirects)
        if program == "command" and any(w.value in ("-v", "-V") for w in words[1:2]):
            return "done"  # `command -v x` looks x up, it does not run it
        if program == "flock" and any(w.value in ("-c", "--command") for w in words):
            index = next(i for i, w in enumerate(words) if w.value in ("-c", "--command"))
            return self.script(words, index + 1, assignments, (*via, "flock -c"), redirects)
        if program == "watch":
            return self.watch(words, assignments, via, redirects)
        if program in _WRAPPERS:
            return self.wrapper(program, words, assignments, via)
        return "done"

    def check_program(self, program: str, values: list[str]) -> None:
        if program in _CODE_BUILTINS:
            self.problem(_CODE_BUILTINS[program])
        if program == "set" and any(
            (v.startswith("-") and not v.startswith("--") and "k" in v) or v == "keyword"
            for v in values[1:]
        ):
            self.problem("set -k hands words after a command name on to it as variables")
        option = _CODE_OPTIONS.get(program)
        if option is not None and any(v.startswith(option) for v in values[1:]):
            self.problem(f"{program} {option} runs a command or changes what a name runs")
        hit = _exec_option(program, values)
        if hit is not None:
            self.problem(f"'{program} {_short(hit, 30)}' makes {program} run another program")
        if program == "let":
            self.arithmetic_reads = True
        if (
            program in _SETTERS
            or (program == "printf" and "-v" in values)
            or (program == "wait" and "-p" in values)
        ):
            self.tainted = True
            for value in values[1:]:
                if not value.startswith("-"):
                    self.setting(value)
                if _risky(value):
                    self.problem(f"it sets {value} for the commands after it")
        self.check_names(values)

    def check_names(self, values: Sequence[str]) -> None:
        """Array subscripts in names given to builtins are arithmetic: `'a[$(cmd)]'` runs."""
        if not values:
            return
        program = _base(values[0])
        if program not in _NAME_TAKERS and not (
            program in ("printf", "test", "[") and "-v" in values
        ):
            return
        for value in values[1:]:
            if "[" in value and ("$" in value or "`" in value):
                self.problem(
                    f"'{_short(value)}' names an array element with an expansion inside "
                    "(bash would run it)"
                )
                return

    def wrapper(
        self, program: str, words: list[_Word], assignments: list[str], via: tuple[str, ...]
    ) -> tuple[list[_Word], list[str], tuple[str, ...]] | str:
        flags, with_value, positionals = _WRAPPERS[program]
        index = 1
        while index < len(words):
            value = words[index].value
            if not words[index].static and not words[index].value.startswith(("-", "+")):
                break
            if not words[index].static:
                self.problem(f"{program} has an option not known before it runs")
                return "done"
            if value == "--":
                index += 1
                break
            if not value.startswith("-") or value == "-":
                break
            if value in flags or (program == "nice" and value[1:].isdigit()):
                index += 1
            elif value in with_value:
                index += 2
            elif value.startswith("--") and value.split("=", 1)[0] in with_value | flags:
                index += 1
            elif value[:2] in with_value and len(value) > 2:
                index += 1  # -n5, -oL
            elif program in PRIVILEGE and value.startswith("--preserve-env="):
                index += 1
            else:
                self.problem(f"'{program} {_short(value, 20)}' is a form Deskhand does not know")
                return "done"
        index += positionals
        if index >= len(words):
            return "done"  # nothing wrapped: the program itself
        writes = program == "flock" or (
            program == "time"
            and any(
                w.value in ("-o", "--output") or w.value.startswith(("--output=", "-o"))
                for w in words[1:index]
            )
        )
        if writes:  # `time -o FILE -f TEXT cmd` writes TEXT to FILE; flock creates its lock
            return words[index:], assignments, (*via, f"{program} (writes a file)")
        return words[index:], assignments, (*via, program)

    def env(
        self, words: list[_Word], assignments: list[str], via: tuple[str, ...]
    ) -> tuple[list[_Word], list[str], tuple[str, ...]] | str:
        index = 1
        added: list[str] = []
        while index < len(words):
            word = words[index]
            value = word.value
            if not word.static and not word.value.startswith(("-", "+")):
                break
            if not word.static:
                self.problem("env has an argument not known before it runs")
                return "done"
            if value in ("-i", "-", "--ignore-environment", "-0", "--null", "-v", "--debug"):
                index += 1
            elif value in ("-C", "--chdir") or value.startswith(("--chdir=", "-C")):
                folder = value.split("=", 1)[1] if "=" in value else value[2:]
                if value in ("-C", "--chdir"):
                    folder = words[index + 1].value if index + 1 < len(words) else ""
                    index += 1
                via = (*via, f"env --chdir {folder}")  # runs it in another folder
                index += 1
            elif value in ("-u", "--unset"):
                if index + 1 < len(words):  # unsetting changes the environment too
                    added.append(words[index + 1].value + "=")
                index += 2
            elif value.startswith(("--unset=", "-u")) and len(value) > 2:
                added.append(value.split("=", 1)[1] + "=" if "=" in value else value[2:] + "=")
                index += 1
            elif value == "--":
                index += 1
            elif value.startswith("-"):
                self.problem(f"'env {_short(value, 20)}' is a form Deskhand does not know")
                return "done"
            elif "=" in value and value.split("=", 1)[0].replace("_", "a").isalnum():
                added.append(value)
                index += 1
            else:
                break
        if index >= len(words):
            return "done"
        return words[index:], assignments + added, (*via, "env")

    def xargs(
        self, words: list[_Word], assignments: list[str], via: tuple[str, ...]
    ) -> tuple[list[_Word], list[str], tuple[str, ...]] | str:
        with_value = {
            "-a",
            "--arg-file",
            "-d",
            "--delimiter",
            "-E",
            "-I",
            "-L",
            "-n",
            "--max-args",
            "-P",
            "--max-procs",
            "-s",
            "--max-chars",
            "--process-slot-var",
            "--max-lines",
        }
        flags = {
            "-0",
            "--null",
            "-r",
            "--no-run-if-empty",
            "-t",
            "--verbose",
            "-p",
            "--interactive",
            "-x",
            "--exit",
            "-o",
            "--open-tty",
            "--show-limits",
        }
        replace_with: str | None = None
        index = 1
        while index < len(words):
            word = words[index]
            value = word.value
            if not word.static and not word.value.startswith(("-", "+")):
                break
            if not word.static:
                self.problem("xargs has an option not known before it runs")
                return "done"
            if value == "--":
                index += 1
                break
            if not value.startswith("-") or value == "-":
                break
            if value in flags:
                index += 1
            elif value in with_value:
                if value == "-I" and index + 1 < len(words):
                    replace_with = words[index + 1].value
                index += 2
            elif value.split("=", 1)[0] in with_value or value[:2] in with_value:
                if value.startswith("-I"):
                    replace_with = value[2:]
                if value.startswith("--replace="):
                    replace_with = value.split("=", 1)[1]
                index += 1
            elif value in ("-i", "--replace") or value.startswith(("-i", "-e", "-l")):
                if value in ("-i", "--replace"):
                    replace_with = "{}"
                elif value.startswith("-i"):
                    replace_with = value[2:]
                index += 1
            else:
                self.problem(f"'xargs {_short(value, 20)}' is a form Deskhand does not know")
                return "done"
        if index >= len(words):
            return [_Word("echo"), _INPUT_WORDS], assignments, (*via, "xargs")
        # what xargs adds comes from its input, which nobody checked: never known before
        # the line runs (`xargs tar -tf x <<< --to-command=…`), a placeholder alone included
        if replace_with:
            inner = [
                _Word(w.value, static=False) if replace_with in w.value else w
                for w in words[index:]
            ]
        else:
            inner = [*words[index:], _INPUT_WORDS]
        return inner, assignments, (*via, "xargs")

    def find(
        self,
        words: list[_Word],
        assignments: list[str],
        text: str,
        via: tuple[str, ...],
        redirects: list[Redirect],
    ) -> None:
        """`find` itself is recorded by the caller; here each -exec command is recorded."""
        index = 1
        while index < len(words):
            value = words[index].value
            if value in ("-exec", "-execdir", "-ok", "-okdir"):
                end = index + 1
                while end < len(words) and words[end].value not in (";", "+"):
                    end += 1
                if end >= len(words):
                    self.problem(f"find {value} has no end (';' or '+')")
                inner = _placeholders(words[index + 1 : end], "{}")
                self.emit(
                    inner,
                    list(assignments),
                    [(r, None) for r in redirects],
                    text,
                    (*via, f"find {value}"),
                )
                index = end + 1
            else:
                index += 1

    def git(
        self, words: list[_Word], assignments: list[str], via: tuple[str, ...]
    ) -> tuple[list[_Word], list[str], tuple[str, ...]] | str:
        """git's own options before the subcommand are taken out: `git -C d status` → git
        status via "git -C d". Config that runs programs is a problem."""
        index = 1
        taken: list[str] = []
        while index < len(words) and words[index].value.startswith("-"):
            value = words[index].value
            name, _, attached = value.partition("=")
            nxt = words[index + 1] if index + 1 < len(words) else None
            if not words[index].static:
                self.problem("git has an option not known before it runs")
                return "done"
            if value in _GIT_FLAGS:
                taken.append(value)
                index += 1
                continue
            if name not in _GIT_PATH_OPTIONS and name not in ("-c", "--config-env"):
                self.problem(f"'git {_short(value, 20)}' is a form Deskhand does not know")
                return "done"
            if "=" in value:
                argument, step = attached, 1
            elif nxt is None or not nxt.static:
                self.problem(f"git {value} has a value not known before it runs")
                return "done"
            else:
                argument, step = nxt.value, 2
            if name == "--config-env" or (
                name == "-c" and not _git_key_safe(argument.split("=", 1)[0].strip().lower())
            ):
                self.problem(f"git {name} {_short(argument, 30)} may run another program")
            taken.append(f"{name} {argument}")
            index += step
        if not taken:
            return "done"
        return [words[0], *words[index:]], assignments, via + tuple(f"git {t}" for t in taken)

    def shell(
        self,
        words: list[_Word],
        assignments: list[str],
        text: str,
        via: tuple[str, ...],
        redirects: list[Redirect],
        stdin: _Input | None,
    ) -> tuple[list[_Word], list[str], tuple[str, ...]] | str | None:
        program = _base(words[0].value)
        index = 1
        command_string = False
        from_input = False
        while index < len(words):
            word = words[index]
            value = word.value
            if not word.static and not word.value.startswith(("-", "+")):
                break
            if not word.static:
                self.problem(f"{program} has an option not known before it runs")
                return "done"
            if value == "--":
                index += 1
                break
            if value in (
                "--login",
                "--norc",
                "--noprofile",
                "--posix",
                "--restricted",
                "--noediting",
                "--verbose",
            ):
                index += 1
            elif value in ("--rcfile", "--init-file") or value == "-i" or value == "--interactive":
                self.problem(f"{program} {value} reads start-up files")
                return "done"
            elif value[:1] in "-+" and len(value) > 1 and value[1:].isalpha():
                letters = value[1:]
                unknown = set(letters) - _SHELL_LETTERS if value[0] == "-" else set()
                if unknown:  # -k, -a: words or assignments reach programs as variables
                    self.problem(f"{program} {value} changes how it hands variables on")
                    return "done"
                taken = letters.count("o") + letters.count("O")
                names = [w.value for w in words[index + 1 : index + 1 + taken]]
                if value[0] == "-" and any(n not in _SHELL_OPTIONS for n in names):
                    self.problem(f"{program} {value} {' '.join(names)} is an option Deskhand "
                                 "does not know to be harmless")
                    return "done"
                if "c" in letters:
                    command_string = True
                if "s" in letters:
                    from_input = True
                if "i" in letters:
                    self.problem(f"{program} {value} reads start-up files")
                    return "done"
                index += 1 + letters.count("o") + letters.count("O")
            else:
                break
        if command_string:
            return self.script(words, index, assignments, (*via, f"{program} -c"), redirects)
        if index < len(words) and not from_input:
            return "done"  # `bash script.sh`: runs a file (runs_model_code says so)
        # No file: the shell reads its commands from its input.
        if stdin is not None and stdin.text is not None:
            self.nested(stdin.text, assignments, (*via, f"{program} <<"), redirects)
            return None
        self.problem(f"{program} runs commands from its input, which Deskhand cannot see")
        return "done"

    def script(
        self,
        words: list[_Word],
        index: int,
        assignments: list[str],
        via: tuple[str, ...],
        redirects: list[Redirect],
    ) -> str | None:
        if index >= len(words):
            self.problem(f"{via[-1]} has no command string")
            return "done"
        if not words[index].static:
            self.problem(f"the command string of {via[-1]} is not known before it runs")
            return "done"
        self.nested(words[index].value, assignments, via, redirects)
        return None

    def nested(
        self, script: str, assignments: list[str], via: tuple[str, ...], redirects: list[Redirect]
    ) -> None:
        if self.depth + 1 > MAX_NESTING:
            self.problem("shells inside shells are nested too deeply to check")
            return
        inner = _Walker(depth=self.depth + 1)
        inner.run(script)
        self.sets.extend(inner.sets)
        self.functions = self.functions or inner.functions
        self.problems.extend(_character_problems(script))
        self.problems.extend(f"in '{via[-1]}': {p}" for p in inner.problems)
        for command in inner.commands:
            self.commands.append(
                replace(
                    command,
                    assignments=tuple(assignments) + command.assignments,
                    redirects=command.redirects + tuple(redirects),
                    via=via + command.via,
                )
            )

    def su(
        self,
        words: list[_Word],
        assignments: list[str],
        text: str,
        via: tuple[str, ...],
        redirects: list[Redirect],
    ) -> str | None:
        for index, word in enumerate(words[1:], start=1):
            if word.value in ("-c", "--command"):
                return self.script(words, index + 1, assignments, (*via, "su -c"), redirects)
            if word.value.startswith("--command="):
                inner = [*words[:index], _Word("-c"), _Word(word.value.split("=", 1)[1])]
                return self.script(inner, index + 1, assignments, (*via, "su -c"), redirects)
        return "done"  # an interactive root shell: the command itself (privilege escalation)

    def watch(
        self,
        words: list[_Word],
        assignments: list[str],
        via: tuple[str, ...],
        redirects: list[Redirect],
    ) -> str | None:
        index = 1
        while index < len(words) and words[index].value.startswith("-"):
            value = words[index].value
            if value in (
                "-n",
                "--interval",
                "-d",
                "--differences",
                "-t",
                "--no-title",
                "-b",
                "--beep",
                "-e",
                "--errexit",
                "-g",
                "--chgexit",
                "-p",
                "--precise",
                "-c",
                "--color",
                "-w",
                "--no-wrap",
            ) or value.startswith(("-n", "--")):
                index += 2 if value in ("-n", "--interval") else 1
            else:
                self.problem(f"'watch {_short(value, 20)}' is a form Deskhand does not know")
                return "done"
        rest = words[index:]
        if not rest or not all(w.static for w in rest):
            self.problem("watch runs a command not known before it runs")
            return "done"
        joined = " ".join(w.value for w in rest)
        self.nested(joined, assignments, (*via, "watch"), redirects)
        return None


def _unescape_heredoc(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in "$`\\\n":
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def _heredoc_as_double_quoted(text: str) -> str:
    """Here-document text written so that inside "…" it means the same: only `"` differs."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            out.append('\\\\\\"' if text[i + 1] == '"' else text[i : i + 2])
            i += 2
            continue
        out.append('\\"' if ch == '"' else ch)
        i += 1
    return "".join(out)


#: The words xargs reads from its input and adds to the command.
_INPUT_WORDS = _Word("<words from its input>", static=False)


def _placeholders(words: list[_Word], mark: str) -> list[_Word]:
    """Words that xargs -I / find -exec fill in: a placeholder inside a longer word (or as
    the program) makes that word unknown; a placeholder alone is one more argument."""
    out: list[_Word] = []
    for index, word in enumerate(words):
        if mark and mark in word.value and (index == 0 or word.value != mark):
            out.append(_Word(word.value, static=False))
        else:
            out.append(word)
    return out


def _leaves(nodes: Sequence[Any]) -> list[Any]:
    """The word-level pieces of a [[ ]] / (( )) expression, in order."""
    out: list[Any] = []
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        if node.type in (
            "binary_expression",
            "unary_expression",
            "parenthesized_expression",
            "ternary_expression",
            "postfix_expression",
        ):
            stack.extend(reversed(node.children))
        elif node.type != "comment":
            out.append(node)
    return out


def _command(
    words: list[_Word],
    assignments: Sequence[str],
    redirects: Sequence[Redirect],
    text: str,
    via: tuple[str, ...],
) -> SimpleCommand:
    static_prefix = 0
    for word in words:
        if not word.static:
            break
        static_prefix += 1
    return SimpleCommand(
        words=tuple(w.value for w in words),
        assignments=tuple(assignments),
        redirects=tuple(redirects),
        text=text,
        dynamic=static_prefix < len(words),
        via=via,
        static_prefix=static_prefix,
        patterns=tuple(i for i, w in enumerate(words) if w.pattern),
    )


#: Nodes a command may sit in and still run in the line's own shell, in order.
_OWN_SHELL = frozenset({"program", "list", "redirected_statement"})


def _in_own_shell(node: Any) -> bool:
    """The command is not inside a subshell, pipeline, loop, group, function or
    substitution (where a `cd` would not move what comes after it, or would move it
    more than once)."""
    parent = node.parent
    while parent is not None:
        if parent.type not in _OWN_SHELL:
            return False
        parent = parent.parent
    return True


def _base(program: str) -> str:
    """The program's name without its folder (`/usr/bin/env` → env)."""
    return program.rsplit("/", 1)[-1] if "/" in program.rstrip("/") else program


def _risky(name: str) -> bool:
    return name in RISKY_VARIABLES or name.startswith(_RISKY_PREFIXES)


def _exec_option(program: str, values: Sequence[str]) -> str | None:
    """The first argument that makes `program` run another program, if any."""
    if program == "git":
        hit = _git_runs(values)
        if hit is not None:
            return hit
    spec = _EXEC_OPTIONS.get(program)
    if spec is None:
        return None
    for index, value in enumerate(values[1:], start=1):
        if value == "--" and not spec.plus:
            break
        if spec.plus and value.startswith("+"):
            return value
        if value.startswith("--"):
            if _long_hit(value.split("=", 1)[0], spec):
                return value
        elif (value.startswith("-") or (spec.bundled and index == 1)) and _cluster_hit(
            value.lstrip("-"), spec
        ):
            return value
    return None


def _long_hit(name: str, spec: _Exec) -> bool:
    """`name` is one of spec's long options, or an abbreviation of one."""
    if len(name) <= 3 or name in spec.exact:
        return False
    return any(option.startswith(name) for option in spec.long)


def _cluster_hit(letters: str, spec: _Exec) -> bool:
    """Whether a cluster of short options (`vo`, `oProxyCommand=x`) holds one of spec's."""
    if spec.valued is None:
        return any(short in letters for short in spec.short)
    for position, letter in enumerate(letters):
        if any(letters.startswith(short, position) for short in spec.short):
            return True
        if letter in spec.valued:
            return False
    return False


def _git_runs(values: Sequence[str]) -> str | None:
    """`git bisect run`, `git submodule foreach`, `git rebase -x`…: commands to run."""
    for index, value in enumerate(values[1:], start=1):
        if value.startswith("-"):
            continue
        if value in _GIT_RUNS:
            wanted = _GIT_RUNS[value]
            if not wanted or wanted in values[index + 1 :]:
                return f"{value} {wanted}".strip()
        if value == "rebase":
            for option in values[index + 1 :]:
                if option.startswith("-") and not option.startswith("--") and "x" in option:
                    return f"rebase {option}"
        return None
    return None


def _git_key_safe(key: str) -> bool:
    return key in _GIT_SAFE_KEYS or key.startswith(_GIT_SAFE_KEY_PREFIXES)


_HANDLERS: dict[str, Callable[[_Walker, Any, int], None]] = {
    "ERROR": _Walker.on_error,
    "command": _Walker.on_command,
    "redirected_statement": _Walker.on_redirected,
    "variable_assignment": _Walker.on_standalone_assignment,
    "declaration_command": _Walker.on_declaration,
    "unset_command": _Walker.on_unset,
    "test_command": _Walker.on_test,
    "compound_statement": _Walker.on_compound,
    "arithmetic_expansion": _Walker.on_arithmetic,
    "c_style_for_statement": _Walker.on_arithmetic,
    "subscript": _Walker.on_subscript,
    "for_statement": _Walker.on_for,
    "expansion": _Walker.on_expansion,
    "heredoc_redirect": _Walker.on_heredoc,
    "function_definition": _Walker.on_function,
    "file_redirect": _Walker.on_bare_redirect,
    "command_substitution": _Walker.on_substitution,
}
#: Node kinds whose children are simply walked.
_PLAIN = frozenset(
    {
        "program",
        "list",
        "pipeline",
        "subshell",
        "do_group",
        "if_statement",
        "elif_clause",
        "else_clause",
        "while_statement",
        "case_statement",
        "case_item",
        "negated_command",
        "command_substitution",
        "process_substitution",
        "string",
        "translated_string",
        "concatenation",
        "array",
        "binary_expression",
        "unary_expression",
        "parenthesized_expression",
        "ternary_expression",
        "postfix_expression",
        "word",
        "raw_string",
        "ansi_c_string",
        "number",
        "simple_expansion",
        "variable_name",
        "special_variable_name",
        "comment",
        "string_content",
        "heredoc_body",
        "heredoc_content",
        "heredoc_start",
        "heredoc_end",
        "file_descriptor",
        "extglob_pattern",
        "regex",
        "test_operator",
        "brace_expression",
        "command_name",
        "variable_assignments",
        "herestring_redirect",
    }
)


# ------------------------------------------------------------------------------------------
# Rules


def prefix_covers(prefix: str, command: SimpleCommand) -> bool:
    """A rule's prefix ("git status") covers `command` when its words start with the prefix's
    words exactly, those words are known before it runs, it sets no risky variable and it
    does not run with higher privileges."""
    try:
        wanted = shlex.split(prefix)
    except ValueError:
        return False
    if not wanted or len(command.words) < len(wanted) or command.static_prefix < len(wanted):
        return False
    if any(_risky(a.split("=", 1)[0].rstrip("+")) for a in command.assignments):
        return False
    if any(v.split(" ", 1)[0] in PRIVILEGE for v in command.via):
        return False
    return list(command.words[: len(wanted)]) == wanted


#: Programs whose second word is a subcommand ("git status", "docker ps").
_SUBCOMMANDS = frozenset(
    {
        "git",
        "npm",
        "yarn",
        "pnpm",
        "bun",
        "deno",
        "docker",
        "podman",
        "kubectl",
        "helm",
        "cargo",
        "go",
        "pip",
        "pip3",
        "uv",
        "poetry",
        "pipenv",
        "conda",
        "mamba",
        "brew",
        "apt",
        "apt-get",
        "dnf",
        "yum",
        "pacman",
        "zypper",
        "snap",
        "flatpak",
        "systemctl",
        "gh",
        "glab",
        "terraform",
        "tofu",
        "dotnet",
        "rustup",
        "nix",
        "aws",
        "gcloud",
        "az",
        "heroku",
        "firebase",
        "vercel",
        "fly",
        "flyctl",
        "composer",
        "bundle",
        "gem",
        "mix",
        "stack",
        "cabal",
        "dart",
        "flutter",
        "ng",
        "nx",
        "turbo",
        "lerna",
        "pre-commit",
        "make",
        "just",
        "rake",
        "mvn",
        "mvnw",
        "./mvnw",
        "gradle",
        "gradlew",
        "./gradlew",
        "hatch",
        "pdm",
        "rye",
        "pixi",
        "minikube",
        "kind",
        "k3d",
        "ollama",
        "supabase",
        "wrangler",
    }
)
#: Subcommands that take a further name ("npm run build", "docker compose up").
_SECOND_LEVEL = {
    "npm": {"run", "run-script", "exec", "x"},
    "yarn": {"run", "exec", "dlx", "workspace"},
    "pnpm": {"run", "exec", "dlx"},
    "bun": {"run", "x"},
    "uv": {"run", "pip", "tool"},
    "poetry": {"run"},
    "pipenv": {"run"},
    "docker": {"compose", "container", "image", "network", "volume", "buildx", "system", "context"},
    "podman": {"compose", "container", "image", "network", "volume", "system"},
    "gh": None,
    "glab": None,
    "aws": None,
    "gcloud": None,
    "az": None,
    "git": {"stash", "remote", "submodule", "worktree"},
    "kubectl": {"config", "rollout"},
    "cargo": set(),
    "dotnet": set(),
}
#: Interpreters: "Always allow" proposes the program and its script, or the exact command
#: when the code is inline (-c/-e).
INTERPRETERS = frozenset(
    {
        "python",
        "python3",
        "python2",
        "pypy",
        "pypy3",
        "node",
        "nodejs",
        "ruby",
        "perl",
        "php",
        "lua",
        "luajit",
        "Rscript",
        "julia",
        "bash",
        "sh",
        "zsh",
        "dash",
        "ksh",
        "fish",
        "pwsh",
        "osascript",
        "tclsh",
        "awk",
        "gawk",
        "mawk",
        "nawk",
        "sed",
    }
)


def proposal_prefix(command: SimpleCommand) -> str:
    """What "Always allow" proposes for one approved command: the program and its
    subcommand when it has one (git status, npm test, docker ps), else the program alone;
    for interpreters their script (python build.py) or module (python -m pytest). Anything
    unusual before the subcommand (options, values) proposes the exact command instead.
    Nothing ("") for an interpreter reading its program from its input."""
    words = list(command.words[: command.static_prefix])
    if not words:
        return ""
    if reads_program_from_stdin(command):
        return ""
    program, rest = words[0], words[1:]
    name = _base(program)
    if not rest:
        return shlex.join(words)
    if _interpreter(name):
        if rest[0] == "-m" and len(rest) > 1:
            return shlex.join(words[:3])
        return shlex.join(words if rest[0].startswith("-") else words[:2])
    if name not in _SUBCOMMANDS:
        return shlex.join([program])
    if not _looks_like_name(rest[0]):
        return shlex.join(words)
    levels = _SECOND_LEVEL.get(name, set())
    if levels is None or rest[0] in levels:
        if len(rest) > 1 and _looks_like_name(rest[1]):
            return shlex.join(words[:3])
        return shlex.join(words)
    return shlex.join(words[:2])


@dataclass(frozen=True)
class _Program:
    """How an interpreter is told its program (letters are short options, clusterable)."""

    #: Letters whose value (or the rest of the arguments) is the program: -c, -e, -m.
    inline: str = ""
    #: Letters whose value names the program's file (php -f FILE); '-' is its input.
    script: str = ""
    #: Letters taking a value, attached or as the next word.
    valued: str = ""
    #: Letters taking an optional value, attached only (perl -l0, ruby -W2).
    attached: str = ""
    #: Letters that make it read its program from input whatever follows (bash -s).
    stdin: str = ""
    long_inline: frozenset[str] = frozenset()
    long_script: frozenset[str] = frozenset()
    long_valued: frozenset[str] = frozenset()
    #: Long options with one dash, matched whole and without case (pwsh -Command).
    single_dash: bool = False
    #: Options may start with '+' too (bash +o).
    plus: bool = False
    #: An option whose value is code, after which the arguments go on (lua -e CODE -):
    #: without a script it reads nothing from input.
    code_first: str = ""


_PYTHON = _Program(inline="cm", valued="WXQ", long_valued=frozenset({"--check-hash-based-pycs"}))
_SHELL = _Program(inline="c", stdin="s", valued="oO", plus=True,
                  long_valued=frozenset({"--rcfile", "--init-file"}))  # fmt: skip
_PROGRAMS: dict[str, _Program] = {
    **dict.fromkeys(("python", "python2", "python3", "pypy", "pypy3"), _PYTHON),
    **dict.fromkeys(("node", "nodejs"), _Program(
        inline="ep", valued="rC",
        long_inline=frozenset({"--eval", "--print", "--test", "--run"}),
        long_valued=frozenset({"--require", "--import", "--input-type", "--loader",
                               "--experimental-loader", "--conditions", "--title"}),
    )),
    "ruby": _Program(inline="e", valued="rICE", attached="0WTxFK",
                     long_valued=frozenset({"--enable", "--disable", "--encoding"})),
    "perl": _Program(inline="eE", valued="IMm", attached="0lCdDixV"),
    "php": _Program(inline="rBRES", script="fF", valued="dczt"),
    **dict.fromkeys(("lua", "luajit"), _Program(
        inline="b", valued="elj", attached="O", code_first="-e")),
    **dict.fromkeys(SHELLS, _SHELL),
    "fish": _Program(inline="c", valued="Cd", long_inline=frozenset({"--command"}),
                     long_valued=frozenset({"--init-command", "--debug", "--features"})),
    "julia": _Program(inline="eE", valued="JptCL", long_inline=frozenset({"--eval", "--print"})),
    "Rscript": _Program(inline="e"),
    "osascript": _Program(inline="e", valued="ls"),
    "tclsh": _Program(long_valued=frozenset({"-encoding"}), single_dash=True),
    "pwsh": _Program(
        single_dash=True,
        long_inline=frozenset({"-e", "-ec", "-encodedcommand", "-cwa", "-commandwithargs"}),
        long_script=frozenset({"-c", "-command", "-f", "-file"}),
        long_valued=frozenset({"-workingdirectory", "-wd", "-executionpolicy", "-ex", "-ep",
                               "-outputformat", "-of", "-o", "-inputformat", "-inf", "-if",
                               "-settingsfile", "-configurationname", "-config",
                               "-custompipename", "-windowstyle", "-w"}),
    ),
}  # fmt: skip


def reads_program_from_stdin(command: SimpleCommand) -> bool:
    """An interpreter that reads its program from its input (`python3 <<EOF`, `node`,
    `perl -`, `bash -s`), or may (a word not known before it runs comes before its
    program): no rule for it can say which code runs."""
    if not command.words:
        return False
    name = _base(command.words[0])
    if name in ("deno", "bun"):
        return _deno_reads_input(command)
    spec = _PROGRAMS.get(name)
    if spec is None and name.startswith(("python3.", "python2.", "pypy3.")):
        spec = _PYTHON
    if spec is None:
        return False
    words, known = command.words, command.static_prefix
    if known < len(words):
        words = (*words[:known], "-")  # an unknown word may be "-" or may hide the program
    from_input = False
    index = 1
    while index < len(words):
        word = words[index]
        if word == "-":
            return True
        if word == "--":
            return _next(words, index) == "-" or from_input
        if word.startswith("--") or (spec.single_dash and word.startswith("-")):
            step: bool | tuple[int, bool] = _long_program(word, words, index, spec)
        elif len(word) > 1 and (word[0] == "-" or (spec.plus and word[0] == "+")):
            step = _short_program(word, words, index, spec)
        else:
            return from_input  # the script's file: its arguments follow
        if isinstance(step, bool):
            return step
        taken, found = step
        from_input = from_input or found
        index += taken
    return not (spec.code_first and spec.code_first in words)


def _long_program(
    word: str, words: Sequence[str], index: int, spec: _Program
) -> bool | tuple[int, bool]:
    """Whether a long option says the program comes from input, or (how many words it
    takes, False) when it does not say."""
    name, equals, value = word.partition("=")
    if spec.single_dash:
        name = name.lower()
    if name in spec.long_inline:
        return False
    if name in spec.long_script:
        return (value if equals else _next(words, index)) == "-"
    return (2 if name in spec.long_valued and not equals else 1), False


def _short_program(
    word: str, words: Sequence[str], index: int, spec: _Program
) -> bool | tuple[int, bool]:
    """A cluster of short options: whether it says where the program comes from, or (how
    many words it takes, whether it makes the interpreter read its program from input)."""
    from_input = False
    letters = word[1:]
    for position, letter in enumerate(letters):
        rest = letters[position + 1 :]
        if letter in spec.inline:
            return False
        if letter in spec.script:
            return (rest or _next(words, index)) == "-"
        if letter in spec.stdin:
            from_input = True
        elif letter in spec.valued:
            return (1 if rest else 2), from_input
        elif letter in spec.attached:
            break
    return 1, from_input


def _next(words: Sequence[str], index: int) -> str:
    """The word after `index`, "-" (the input) when there is none."""
    return words[index + 1] if index + 1 < len(words) else "-"


def _deno_reads_input(command: SimpleCommand) -> bool:
    """`deno` alone is a REPL reading its input; `deno run -` / `bun run -` read the program."""
    words = command.words[1 : command.static_prefix]
    if _base(command.words[0]) == "deno" and len(command.words) == 1:
        return True
    return "run" in words and "-" in words[words.index("run") :]


def _interpreter(name: str) -> bool:
    return name in INTERPRETERS or (
        name.startswith(("python3.", "python2.", "pypy3.")) and name.split(".")[-1].isdigit()
    )


def _looks_like_name(word: str) -> bool:
    return word[:1].isalnum() and all(ch.isalnum() or ch in "-_.:" for ch in word)
