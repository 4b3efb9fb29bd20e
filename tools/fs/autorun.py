"""Places where a file makes code run by itself (git hooks, shell start-up files, autostart
entries, cron, systemd and launchd units…), and executable files.

A change that creates or alters such a file counts as EXECUTE: the fs tools' `escalate`
hooks return `Escalation(reason, never_covered=True)` for it, so no "always allow" rule and
no `--yes` approves it; a person has to, each time.

Decisions (documented in docs/architecture.md by the lead):
- Places are matched by name and by identity like the protected catalogue (tools.fs.places):
  a hard link to ~/.bashrc appended to is ~/.bashrc being changed.
- Git: a `.git` file or folder itself and everything in a git folder (`.git`, a bare or
  worktree git folder, a submodule's) except what git writes in ordinary work and never
  reads as configuration or commands (`git_inert`: objects/, refs/, logs/, index, HEAD,
  packed-refs, FETCH_HEAD…) — so hooks, config, commondir, info/, a rebase todo are
  auto-run places; the hooks folder a `core.hooksPath` names (the repository's config, and
  the global and system ones with their includes), and hook managers' files (.husky/,
  .pre-commit-config.yaml, lefthook.yml). The global git config (~/.gitconfig) can set
  hooks for every repository and counts too.
- The executable bit: no file tool takes a mode, so the ways in are copying an executable
  file (the copy keeps its mode) and moving one to another folder; both count. A rename in
  the same folder does not (nothing new becomes runnable), unless the folder is on $PATH.
  Writing or editing an executable file in place keeps its mode and does NOT count (that is
  editing a script, like editing any source file), except in a folder on $PATH, where it
  changes a command that runs when its name is typed.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tools.fs.places import Places
from tools.fs.protected import expand

#: (what, why, where). The reason shown is "<verb> <what> (<path>): <why>".
CATALOGUE: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "a shell start-up file",
        "its commands run in every new terminal or login",
        (
            "~/.bashrc",
            "~/.bash_profile",
            "~/.bash_login",
            "~/.bash_logout",
            "~/.profile",
            "~/.zshrc",
            "~/.zshenv",
            "~/.zprofile",
            "~/.zlogin",
            "~/.zlogout",
            "${ZDOTDIR}/.zshrc",
            "${ZDOTDIR}/.zshenv",
            "${ZDOTDIR}/.zprofile",
            "${ZDOTDIR}/.zlogin",
            "~/.oh-my-zsh/custom",
            "$CONFIG/fish/config.fish",
            "$CONFIG/fish/conf.d",
            "$CONFIG/fish/functions",
            "~/.cshrc",
            "~/.tcshrc",
            "~/.kshrc",
            "~/.mkshrc",
            "~/.xprofile",
            "~/.xsessionrc",
            "~/.xsession",
            "~/.xinitrc",
            "~/.pam_environment",
            "$CONFIG/environment.d",
            "$CONFIG/plasma-workspace/env",
            "~/.tmux.conf",
            "$CONFIG/tmux/tmux.conf",
            "~/.direnvrc",
            "$CONFIG/direnv",
            "$CONFIG/powershell",
            "~/Documents/PowerShell",
            "~/Documents/WindowsPowerShell",
            "/etc/profile",
            "/etc/profile.d",
            "/etc/bash.bashrc",
            "/etc/bashrc",
            "/etc/zsh",
            "/etc/zshenv",
            "/etc/zshrc",
            "/etc/environment",
        ),
    ),
    (
        "an editor start-up file",
        "its code runs when you open the editor",
        (
            "~/.vimrc",
            "~/.vim/plugin",
            "~/.vim/autoload",
            "$CONFIG/nvim",
            "~/.emacs",
            "~/.emacs.d/init.el",
            "~/.emacs.d/early-init.el",
        ),
    ),
    (
        "the global git configuration",
        "it can make git run commands in every repository (hooksPath, aliases, sshCommand)",
        ("~/.gitconfig", "$CONFIG/git/config", "/etc/gitconfig"),
    ),
    (
        "an autostart entry",
        "it starts a program by itself when you log in",
        (
            "$CONFIG/autostart",
            "/etc/xdg/autostart",
            "$APPDATA/Microsoft/Windows/Start Menu/Programs/Startup",
            "/ProgramData/Microsoft/Windows/Start Menu/Programs/StartUp",
            "~/Library/StartupItems",
        ),
    ),
    (
        "a launchd job",
        "macOS starts it by itself",
        (
            "~/Library/LaunchAgents",
            "/Library/LaunchAgents",
            "/Library/LaunchDaemons",
        ),
    ),
    (
        "a systemd unit",
        "the system starts it by itself",
        (
            "$CONFIG/systemd",
            "$DATA/systemd/user",
            "/etc/systemd",
            "/usr/lib/systemd",
            "/lib/systemd",
        ),
    ),
    (
        "a cron table",
        "its commands run by themselves on a schedule",
        (
            "/etc/crontab",
            "/etc/anacrontab",
            "/etc/cron.d",
            "/etc/cron.hourly",
            "/etc/cron.daily",
            "/etc/cron.weekly",
            "/etc/cron.monthly",
            "/var/spool/cron",
            "/var/spool/anacron",
            "/usr/lib/cron/tabs",
            "/var/at/tabs",
        ),
    ),
)

GIT_HOOK = ("a git hook", "code that runs on every commit")
GIT_CONFIG = (
    "a git configuration",
    "it can make git run commands (hooksPath, aliases, fsmonitor, sshCommand)",
)
GIT_DIR = ("a git folder", "its hooks and configuration can run commands")
GIT_FILE = (
    "a file in a git folder",
    "git reads it as configuration or as commands (commondir, gitdir, info/, rebase todo…)",
)
HOOK_MANAGER = ("a git hook configuration", "its commands run on every commit")
DIRENV = ("a direnv file", "it runs when a terminal enters the folder")
EDITOR_TASKS = (
    "an editor's workspace task or settings file",
    "your editor can run its commands when the folder is opened",
)
PYTHON_STARTUP = (
    "a Python start-up file",
    "it runs each time Python starts with these packages",
)
EXECUTABLE = ("a program (an executable file)", "it can then be run")
ON_PATH = ("a program in a folder on your PATH", "it runs when its name is typed")

_HOOK_MANAGER_NAMES = frozenset(
    {".pre-commit-config.yaml", "lefthook.yml", "lefthook.yaml", ".lefthook.yml", ".lefthook.yaml"}
)
#: Inside `.vscode/`: tasks can run on opening the folder ("runOn": "folderOpen"), and
#: workspace settings name programs the editor starts (interpreters, linters, git).
_EDITOR_WORKSPACE_NAMES = frozenset({"tasks.json", "settings.json"})
_PYTHON_STARTUP_NAMES = frozenset({"usercustomize.py", "sitecustomize.py"})
_HOOKS_PATH = re.compile(r"^\s*hookspath\s*=\s*(.+?)\s*$", re.IGNORECASE)
_INCLUDE_PATH = re.compile(r"^\s*path\s*=\s*(.+?)\s*$", re.IGNORECASE)

#: What git itself writes in a git folder during ordinary work (commit, fetch, checkout,
#: merge, stash, gc…) and never reads as configuration or commands: the only entries of a
#: git folder a sandboxed command may change (allow-list; names case-folded). Everything
#: else there is held: config, hooks, info/, commondir, gitdir, rebase-merge/ (its todo
#: runs `exec` lines), sequencer/, branches/, remotes/, anything new.
_GIT_INERT_FILES = frozenset(
    {
        "head", "orig_head", "fetch_head", "merge_head", "merge_msg", "merge_mode",
        "auto_merge", "cherry_pick_head", "revert_head", "commit_editmsg", "tag_editmsg",
        "squash_msg", "index", "packed-refs", "description", "shallow",
    }
)
_GIT_INERT_FOLDERS = frozenset({"objects", "refs", "logs", "rr-cache", "lfs"})
#: Names git gives the entries of a git folder (a submodule's name ends before one).
_GIT_DIR_ENTRIES = _GIT_INERT_FILES | _GIT_INERT_FOLDERS | frozenset(
    {"config", "config.worktree", "hooks", "info", "commondir", "gitdir", "modules", "worktrees"}
)
#: Inside `modules/` no component may carry these names (a submodule named `x/refs` would
#: make `modules/x/refs/config` a config).
_GIT_RUNS = frozenset({"config", "config.worktree", "hooks", "commondir", "gitdir", "info"})
#: githooks(5): an executable file with one of these names runs as a hook when its folder is
#: a hooks folder — which a `core.hooksPath` in any config (global, included…) can make of
#: any folder of any repository.
GIT_HOOK_NAMES = frozenset(
    {
        "applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit",
        "pre-merge-commit", "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase",
        "post-checkout", "post-merge", "pre-push", "pre-receive", "update", "proc-receive",
        "post-receive", "post-update", "reference-transaction", "push-to-checkout",
        "pre-auto-gc", "post-rewrite", "sendemail-validate", "fsmonitor-watchman",
        "p4-changelist", "p4-prepare-changelist", "p4-post-changelist", "p4-pre-submit",
        "post-index-change",
    }
)
_GIT_CONFIG_MAX_BYTES = 256 * 1024


@dataclass(frozen=True)
class AutoRun:
    """Why writing at one path makes something run: `what` it is and `why` that matters."""

    what: str
    why: str
    path: Path

    def reason(self, verb: str) -> str:
        return f"{verb} {self.what} ({self.path}): {self.why}"


def autorun_places(home: Path, environ: Mapping[str, str] | None = None) -> Places:
    env = os.environ if environ is None else environ
    variables = tuple((k, v) for k in _SORTED_VARIABLES if (v := env.get(k)) is not None)
    return _cached(home, variables).fresh()


_VARIABLES = frozenset(
    {"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "APPDATA", "ZDOTDIR"}
)
_SORTED_VARIABLES = tuple(sorted(_VARIABLES))


@functools.lru_cache(maxsize=8)
def _cached(home: Path, variables: tuple[tuple[str, str], ...]) -> Places:
    env = dict(variables)
    entries: list[tuple[Path, str]] = []
    for index, (_, _, where) in enumerate(CATALOGUE):
        for entry in where:
            entries.extend((path, str(index)) for path in expand(entry, home, env))
    return Places(entries)


def path_folders(environ: Mapping[str, str] | None = None) -> list[Path]:
    env = os.environ if environ is None else environ
    raw = env.get("PATH", "")
    return [Path(p) for p in raw.split(os.pathsep) if p and os.path.isabs(p)]


def classify(
    real: Path, places: Places, *, follow_final: bool = True, extra_git: bool = True
) -> AutoRun | None:
    """What `real` (a resolved path about to be created or changed) makes run, if anything."""
    parts = real.parts
    folded = [p.casefold() for p in parts]
    found = _by_components(real, folded)
    if found is not None:
        return found
    hit = places.match(real, follow_final=follow_final)
    if hit is not None:
        what, why, _ = CATALOGUE[int(hit.label)]
        return AutoRun(what, why, real)
    if extra_git:
        return _by_repository(real)
    return None


def git_inert(rest: list[str] | tuple[str, ...]) -> bool:
    """Whether the entry at `rest` (case-folded parts below a git folder) is one git writes
    in ordinary work and never reads as configuration or commands (`_GIT_INERT_*`)."""
    if not rest:
        return False
    head = rest[0]
    if head in _GIT_INERT_FILES:
        return len(rest) == 1
    if head in _GIT_INERT_FOLDERS:
        return True
    if head == "info":  # info/refs: the ref list `git update-server-info` (gc) writes
        return tuple(rest) == ("info", "refs")
    if head == "worktrees":  # worktrees/<name>/…: a worktree's own git folder
        return len(rest) > 2 and git_inert(rest[2:])
    if head == "modules":  # modules/<name, maybe with slashes>/…: a submodule's git folder
        body = rest[1:]
        if any(part in _GIT_RUNS for part in body):
            return False
        for index in range(1, len(body)):
            if body[index] in _GIT_DIR_ENTRIES:
                return git_inert(body[index:])
    return False


def git_file(real: Path, rest: list[str] | tuple[str, ...]) -> AutoRun | None:
    """What the entry at `rest` (case-folded parts below a git folder) is, if not inert."""
    if not rest:
        return AutoRun(*GIT_DIR, real)
    if "hooks" in rest:  # .git/hooks, and submodules' .git/modules/<name>/hooks
        return AutoRun(*GIT_HOOK, real)
    if rest[-1] in ("config", "config.worktree"):
        return AutoRun(*GIT_CONFIG, real)
    if git_inert(rest):
        return None
    return AutoRun(*GIT_FILE, real)


def by_name(real: Path) -> AutoRun | None:
    """What `real` makes run by its names alone (no file system access, no catalogue)."""
    return _by_components(real, [p.casefold() for p in real.parts])


def _by_components(real: Path, folded: list[str]) -> AutoRun | None:
    name = folded[-1] if folded else ""
    for index, part in enumerate(folded):
        if part == ".git":  # the outermost decides: everything below it is git's
            return git_file(real, folded[index + 1 :])
    if ".husky" in folded[:-1] or name == ".husky":
        return AutoRun(*GIT_HOOK, real)
    if name in _HOOK_MANAGER_NAMES:
        return AutoRun(*HOOK_MANAGER, real)
    if name == ".envrc":
        return AutoRun(*DIRENV, real)
    if len(folded) > 1 and folded[-2] == ".vscode" and name in _EDITOR_WORKSPACE_NAMES:
        return AutoRun(*EDITOR_TASKS, real)
    in_packages = "site-packages" in folded or "dist-packages" in folded
    if in_packages and (name.endswith(".pth") or name in _PYTHON_STARTUP_NAMES):
        return AutoRun(*PYTHON_STARTUP, real)
    return None


def _by_repository(real: Path) -> AutoRun | None:
    """Hooks of the repository around `real` that are not under `.git/hooks`: a bare or
    worktree git folder's own `hooks/` and `config`, and the folder `core.hooksPath` names."""
    for folder in real.parents:
        if _is_git_dir(folder):
            return git_file(real, [p.casefold() for p in real.relative_to(folder).parts])
        dot_git = folder / ".git"
        if os.path.isdir(dot_git):
            for hooks in _hooks_paths(folder, dot_git / "config"):
                if _within(real, hooks):
                    return AutoRun(*GIT_HOOK, real)
            return None  # the innermost repository decides
    return None


def is_git_dir(folder: Path) -> bool:
    """Whether `folder` is a git folder itself (bare, or a worktree's): HEAD and objects."""
    return _is_git_dir(folder)


def _is_git_dir(folder: Path) -> bool:
    return os.path.isfile(folder / "HEAD") and (
        os.path.isdir(folder / "objects") or os.path.isfile(folder / "commondir")
    )


def _hooks_paths(work_tree: Path, config: Path) -> list[Path]:
    """The `core.hooksPath` folders for this work tree: from its own config and from the
    user's and the system's (`global_hooks_paths`), relative ones taken from `work_tree`."""
    found = []
    for value in [*_config_values(config, _HOOKS_PATH), *global_hooks_paths()]:
        path = Path(os.path.expanduser(value))
        found.append(Path(os.path.realpath(path if path.is_absolute() else work_tree / path)))
    return found


def _config_values(config: Path, pattern: re.Pattern[str], depth: int = 0) -> list[str]:
    """Values of `pattern` in a git config file and the files it includes (`[include]` and
    `[includeIf …]` paths alike: a condition could hold in some repository)."""
    try:
        st = os.stat(config)
    except OSError:
        return []
    signature = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    values, includes = _parsed_config(str(config), pattern, signature)
    found = list(values)
    for value in includes if depth < 5 else ():
        path = Path(value) if os.path.isabs(value) else config.parent / value
        found += _config_values(path, pattern, depth + 1)
    return found


@functools.lru_cache(maxsize=64)
def _parsed_config(
    config: str, pattern: re.Pattern[str], signature: tuple[int, int, int, int]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(values of `pattern`, included paths) of one config file, as it is now (`signature`)."""
    try:
        with open(config, "rb") as handle:
            text = handle.read(_GIT_CONFIG_MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return (), ()
    values, includes = [], []
    for line in text.splitlines():
        match = pattern.match(line)
        if match:
            values.append(match.group(1).strip('"'))
        include = _INCLUDE_PATH.match(line)
        if include:
            includes.append(os.path.expanduser(include.group(1).strip('"')))
    return tuple(values), tuple(includes)


def global_hooks_paths(environ: Mapping[str, str] | None = None) -> list[str]:
    """`core.hooksPath` values of the global and system git configs (~/.gitconfig, the XDG
    one, $GIT_CONFIG_GLOBAL, /etc/gitconfig) and the files they include, as written."""
    env = os.environ if environ is None else environ
    home = env.get("HOME") or os.path.expanduser("~")
    xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    files = [os.path.join(home, ".gitconfig"), os.path.join(xdg, "git", "config")]
    files += [env.get("GIT_CONFIG_GLOBAL", ""), env.get("GIT_CONFIG_SYSTEM", "/etc/gitconfig")]
    found: list[str] = []
    for name in dict.fromkeys(f for f in files if f):
        found += _config_values(Path(name), _HOOKS_PATH)
    return found


def _within(path: Path, folder: Path) -> bool:
    a = [p.casefold() for p in path.parts]
    b = [p.casefold() for p in folder.parts]
    return a[: len(b)] == b


def is_executable(st: os.stat_result) -> bool:
    return stat.S_ISREG(st.st_mode) and bool(st.st_mode & 0o111)


def on_path(
    real: Path, environ: Mapping[str, str] | None = None, *, relative: bool = False
) -> bool:
    """Whether `real` lies directly in a folder listed in $PATH. With `relative`, relative
    entries count too (taken from whatever folder a shell is in): `bin` or
    `./node_modules/.bin` match every folder whose last parts they are, `.` every folder —
    so callers ask about programs only (executable files, symlinks), not every file."""
    parent = [p.casefold() for p in real.parent.parts]
    for folder in path_folders(environ):
        for candidate in {folder, Path(os.path.realpath(folder))}:
            if [p.casefold() for p in candidate.parts] == parent:
                return True
    if relative:
        for entry in relative_path_entries(environ):
            if not entry or parent[-len(entry) :] == list(entry):
                return True
    return False


def relative_path_entries(environ: Mapping[str, str] | None = None) -> list[tuple[str, ...]]:
    """Relative $PATH entries as case-folded parts (`.` and an empty entry: ())."""
    env = os.environ if environ is None else environ
    out = []
    for raw in env.get("PATH", "").split(os.pathsep):
        if os.path.isabs(raw):
            continue
        parts = tuple(p.casefold() for p in Path(os.path.normpath(raw or ".")).parts)
        out.append(() if parts in ((".",), ()) else parts)
    return out


def is_hook_name(name: str) -> bool:
    """Whether a file of this name runs as a git hook when it is executable and its folder
    is a hooks folder (any folder can be one: `core.hooksPath`)."""
    return name.casefold() in GIT_HOOK_NAMES


#: Names a folder could hold that a rule matching by name holds (`folder_could_hold`).
_PROBE_NAMES = (
    "tasks.json", "settings.json", "startup.pth", "sitecustomize.py", "config", "hooks",
    "commondir", "pre-commit",
)


def folder_could_hold(folder: Path, places: Places) -> AutoRun | None:
    """What a folder put at `folder` (a symlink to one, made by a sandboxed command) would
    bring into place: a held name below it (`.vscode/tasks.json`, `site-packages/*.pth`,
    `.husky/…`, a git folder's config), a catalogue place or a $PATH folder (absolute, or the
    start of a relative entry) at or below it, a repository's hooks folder."""
    found = classify(folder, places, follow_final=False)
    for name in _PROBE_NAMES:
        if found is not None:
            return found
        found = classify(folder / name, places, follow_final=False)
    if found is not None:
        return found
    key = [p.casefold() for p in folder.parts]
    for place in places.paths:  # by name: it may not exist yet
        hit = places.by_path(place) if _within(place, folder) else None
        if hit is not None:
            what, why, _ = CATALOGUE[int(hit.label)]
            return AutoRun(what, why, folder)
    for candidate in path_folders():
        if [p.casefold() for p in candidate.parts][: len(key)] == key:
            return AutoRun(*ON_PATH, folder)
    for entry in relative_path_entries():
        if any(key[-k:] == list(entry[:k]) for k in range(1, len(entry) + 1)):
            return AutoRun(*ON_PATH, folder)
    if any(_within(hooks, folder) for hooks in repository_hooks(folder.parent)):
        return AutoRun(*GIT_HOOK, folder)
    return None


#: A folder tree copied or moved is checked entry by entry up to this many entries.
TREE_MAX_ENTRIES = 10_000


@dataclass(frozen=True)
class TreeScan:
    """What a folder would bring to its new place: the first auto-run file, how many
    programs (executable files), and whether it was too big to check."""

    autorun: AutoRun | None
    executables: int
    too_big: bool


def scan_tree(
    source: Path, destination: Path, places: Places, *, whole: bool = False
) -> TreeScan:
    """Check every entry of the real folder `source` as if it were at `destination` (at most
    TREE_MAX_ENTRIES entries, or all of them with `whole`)."""
    limit = None if whole else TREE_MAX_ENTRIES
    hooks = repository_hooks(destination)
    count = executables = 0
    for here, dirnames, filenames in walk_tree(source):
        git_dir = _is_git_dir(here)
        for name in dirnames + filenames:
            count += 1
            if limit is not None and count > limit:
                return TreeScan(None, executables, True)
            target = destination / (here / name).relative_to(source)
            found = _tree_entry(target, places, hooks)
            if found is None and git_dir:
                found = git_file(target, [name.casefold()])
            if found is not None:
                return TreeScan(found, executables, False)
        for name in filenames:
            try:
                st = os.lstat(here / name)
            except OSError:
                continue
            executables += is_executable(st)
    return TreeScan(None, executables, False)


def walk_tree(top: Path) -> Iterator[tuple[Path, list[str], list[str]]]:
    """Like `os.walk(top)` without following symlinks, with an explicit stack (any depth;
    os.walk recurses per level before Python 3.12). Unreadable folders are skipped."""
    stack = [top]
    while stack:
        here = stack.pop()
        folders: list[str] = []
        files: list[str] = []
        try:
            with os.scandir(here) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        is_dir = False
                    (folders if is_dir else files).append(entry.name)
        except OSError:
            continue
        folders.sort()
        files.sort()
        yield here, folders, files
        stack.extend(here / name for name in reversed(folders))


def _tree_entry(target: Path, places: Places, hooks: list[Path]) -> AutoRun | None:
    found = _by_components(target, [p.casefold() for p in target.parts])
    if found is not None:
        return found
    hit = places.by_path(target)
    if hit is not None:
        what, why, _ = CATALOGUE[int(hit.label)]
        return AutoRun(what, why, target)
    if any(_within(target, folder) for folder in hooks):
        return AutoRun(*GIT_HOOK, target)
    return None


def repository_hooks(real: Path) -> list[Path]:
    """The `core.hooksPath` folders of the repository `real` is (or would be) in."""
    for folder in [real, *real.parents]:
        dot_git = folder / ".git"
        if os.path.isdir(dot_git):
            return _hooks_paths(folder, dot_git / "config")
    return []
