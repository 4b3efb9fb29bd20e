"""Places where a file makes code run by itself (git hooks, shell start-up files, autostart
entries, cron, systemd and launchd units…), and executable files.

A change that creates or alters such a file counts as EXECUTE: the fs tools' `escalate`
hooks return `Escalation(reason, never_covered=True)` for it, so no "always allow" rule and
no `--yes` approves it; a person has to, each time.

Decisions (documented in docs/architecture.md by the lead):
- Places are matched by name and by identity like the protected catalogue (tools.fs.places):
  a hard link to ~/.bashrc appended to is ~/.bashrc being changed.
- Git: any `.git/hooks/…`, `.git/config`, a `.git` file or folder itself, the hooks folder
  a repository's `core.hooksPath` names, a bare repository's `hooks/` and `config`, and hook
  managers' files (.husky/, .pre-commit-config.yaml, lefthook.yml). The global git config
  (~/.gitconfig) can set hooks for every repository and counts too.
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
from collections.abc import Mapping
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


def _by_components(real: Path, folded: list[str]) -> AutoRun | None:
    name = folded[-1] if folded else ""
    for index, part in enumerate(folded):
        if part != ".git":
            continue
        rest = folded[index + 1 :]
        if not rest:
            return AutoRun(*GIT_DIR, real)
        if "hooks" in rest:  # .git/hooks, and submodules' .git/modules/<name>/hooks
            return AutoRun(*GIT_HOOK, real)
        if rest[-1] in ("config", "config.worktree"):
            return AutoRun(*GIT_CONFIG, real)
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
            relative = real.relative_to(folder).parts
            if relative and relative[0].casefold() == "hooks":
                return AutoRun(*GIT_HOOK, real)
            if relative and relative[0].casefold() in ("config", "config.worktree"):
                return AutoRun(*GIT_CONFIG, real)
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
    try:
        with open(config, "rb") as handle:
            text = handle.read(_GIT_CONFIG_MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        match = _HOOKS_PATH.match(line)
        if match:
            value = match.group(1).strip('"')
            path = Path(os.path.expanduser(value))
            found.append(Path(os.path.realpath(path if path.is_absolute() else work_tree / path)))
    return found


def _within(path: Path, folder: Path) -> bool:
    a = [p.casefold() for p in path.parts]
    b = [p.casefold() for p in folder.parts]
    return a[: len(b)] == b


def is_executable(st: os.stat_result) -> bool:
    return stat.S_ISREG(st.st_mode) and bool(st.st_mode & 0o111)


def on_path(real: Path, environ: Mapping[str, str] | None = None) -> bool:
    """Whether `real` lies directly in a folder listed in $PATH."""
    parent = [p.casefold() for p in real.parent.parts]
    for folder in path_folders(environ):
        for candidate in {folder, Path(os.path.realpath(folder))}:
            if [p.casefold() for p in candidate.parts] == parent:
                return True
    return False


#: A folder tree copied or moved is checked entry by entry up to this many entries.
TREE_MAX_ENTRIES = 10_000


@dataclass(frozen=True)
class TreeScan:
    """What a folder would bring to its new place: the first auto-run file, how many
    programs (executable files), and whether it was too big to check."""

    autorun: AutoRun | None
    executables: int
    too_big: bool


def scan_tree(source: Path, destination: Path, places: Places) -> TreeScan:
    """Check every entry of the real folder `source` as if it were at `destination`."""
    hooks = repository_hooks(destination)
    count = executables = 0
    for top, dirnames, filenames in os.walk(source, followlinks=False):
        here = Path(top)
        git_dir = _is_git_dir(here)
        for name in dirnames + filenames:
            count += 1
            if count > TREE_MAX_ENTRIES:
                return TreeScan(None, executables, True)
            target = destination / (here / name).relative_to(source)
            found = _tree_entry(target, places, hooks)
            if found is None and git_dir and name.casefold() in ("hooks", "config"):
                kind = GIT_HOOK if name.casefold() == "hooks" else GIT_CONFIG
                found = AutoRun(*kind, target)
            if found is not None:
                return TreeScan(found, executables, False)
        for name in filenames:
            try:
                st = os.lstat(here / name)
            except OSError:
                continue
            executables += is_executable(st)
    return TreeScan(None, executables, False)


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
