"""The file tools' confinement: escapes, protected locations and symlink races are refused."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from tools.fs import sandbox as sandbox_module
from tools.fs.changes import copy_path, delete_path, move_path, write_file
from tools.fs.manifest import (
    CopyPath,
    DeletePath,
    FileInfo,
    ListDir,
    MovePath,
    ReadFile,
    SearchFiles,
    WriteFile,
)
from tools.fs.ops import file_info, list_dir, read_file, search_files
from tools.fs.sandbox import Sandbox, SandboxError
from tools.spec import ToolContext, ToolError

SECRET = "TOP SECRET"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlink semantics")


@dataclass
class FsEnv:
    """tmp layout: `root` (allowed), `outside` (not allowed), `home` ($HOME, not allowed)."""

    tmp: Path
    root: Path
    outside: Path
    home: Path

    @property
    def trash_files(self) -> Path:
        return self.home / ".local" / "share" / "Trash" / "files"

    def ctx(self, *roots: Path, denied: tuple[str, ...] = (), **kwargs: object) -> ToolContext:
        files = SimpleNamespace(
            allowed_roots=[str(r) for r in (roots or (self.root,))], denied_paths=list(denied)
        )
        return ToolContext(
            home=self.tmp / "deskhand-home", settings=SimpleNamespace(files=files), **kwargs
        )


def make_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FsEnv:
    """Build the layout and keep $HOME, the deny list and the OS trash inside tmp_path."""
    tmp = Path(os.path.realpath(tmp_path))
    env = FsEnv(tmp=tmp, root=tmp / "root", outside=tmp / "outside", home=tmp / "home")
    for folder in (env.root, env.outside, env.home):
        folder.mkdir()
    (env.outside / "secret.txt").write_text(SECRET + "\n")
    data_home = env.home / ".local" / "share"
    monkeypatch.setenv("HOME", str(env.home))
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    # send2trash reads XDG_DATA_HOME once at import; point it at the tmp home as well.
    import send2trash.plat_other as trash_impl

    monkeypatch.setattr(trash_impl, "XDG_DATA_HOME", os.fsencode(data_home))
    monkeypatch.setattr(trash_impl, "HOMETRASH_B", os.fsencode(data_home / "Trash"))
    monkeypatch.setattr(trash_impl, "HOMETRASH", str(data_home / "Trash"))
    return env


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FsEnv:
    return make_env(tmp_path, monkeypatch)


# --------------------------------------------------------------- escape attempts


def _dotdot(env: FsEnv) -> str:
    return "../outside/secret.txt"


def _absolute_outside(env: FsEnv) -> str:
    return str(env.outside / "secret.txt")


def _sibling_prefix(env: FsEnv) -> str:
    evil = env.tmp / "root-evil"
    evil.mkdir()
    (evil / "secret.txt").write_text(SECRET)
    return str(evil / "secret.txt")


def _symlink_to_outside(env: FsEnv) -> str:
    (env.root / "link.txt").symlink_to(env.outside / "secret.txt")
    return str(env.root / "link.txt")


def _symlink_in_parent(env: FsEnv) -> str:
    (env.root / "linked-dir").symlink_to(env.outside, target_is_directory=True)
    return str(env.root / "linked-dir" / "secret.txt")


def _dotdot_through_subdir(env: FsEnv) -> str:
    (env.root / "sub").mkdir()
    return str(env.root / "sub" / ".." / ".." / "outside" / "secret.txt")


def _tilde_outside(env: FsEnv) -> str:
    (env.home / "notes.txt").write_text(SECRET)
    return "~/notes.txt"


def _nul_byte(env: FsEnv) -> str:
    (env.root / "a.txt").write_text("a")
    return "a.txt\x00../../outside/secret.txt"


def _empty(env: FsEnv) -> str:
    return "   "


def _dangling_symlink_to_outside(env: FsEnv) -> str:
    (env.root / "new.txt").symlink_to(env.outside / "created-by-deskhand.txt")
    return str(env.root / "new.txt")


ESCAPES: dict[str, Callable[[FsEnv], str]] = {
    "dotdot": _dotdot,
    "absolute outside": _absolute_outside,
    "sibling with root as string prefix": _sibling_prefix,
    "symlink to outside": _symlink_to_outside,
    "symlink in a parent folder": _symlink_in_parent,
    "dotdot through a subfolder": _dotdot_through_subdir,
    "tilde outside the roots": _tilde_outside,
    "NUL byte": _nul_byte,
    "empty": _empty,
    "planted dangling symlink at a create target": _dangling_symlink_to_outside,
}


@pytest.mark.parametrize("make_path", ESCAPES.values(), ids=ESCAPES.keys())
def test_escape_is_refused_for_reading(env: FsEnv, make_path: Callable[[FsEnv], str]) -> None:
    raw = make_path(env)
    with pytest.raises(SandboxError) as refused:
        read_file(ReadFile(path=raw), env.ctx())
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize("make_path", ESCAPES.values(), ids=ESCAPES.keys())
@pytest.mark.parametrize("mode", ["overwrite", "append", "create_only"])
def test_escape_is_refused_for_writing(
    env: FsEnv, make_path: Callable[[FsEnv], str], mode: str
) -> None:
    raw = make_path(env)
    before = _snapshot(env.tmp, exclude=env.root)
    with pytest.raises(SandboxError):
        write_file(WriteFile(path=raw, content="pwned", mode=mode), env.ctx())  # type: ignore[arg-type]
    assert _snapshot(env.tmp, exclude=env.root) == before


def _snapshot(folder: Path, exclude: Path) -> dict[str, bytes | str]:
    """Every file outside `exclude` with its content (links by target)."""
    state: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_relative_to(exclude):
            continue
        if path.is_symlink():
            state[str(path)] = os.readlink(path)
        elif path.is_file():
            state[str(path)] = path.read_bytes()
    return state


def test_outside_message_names_the_allowed_folders(env: FsEnv) -> None:
    with pytest.raises(SandboxError, match="outside the folders Deskhand may touch") as refused:
        read_file(ReadFile(path=str(env.outside / "secret.txt")), env.ctx())
    assert f"allowed: {env.root}" in str(refused.value)


def test_symlink_message_says_where_it_resolves(env: FsEnv) -> None:
    (env.root / "link.txt").symlink_to(env.outside / "secret.txt")
    with pytest.raises(SandboxError, match="resolves to") as refused:
        read_file(ReadFile(path="link.txt"), env.ctx())
    assert str(env.outside / "secret.txt") in str(refused.value)


def test_symlink_inside_the_root_is_followed(env: FsEnv) -> None:
    (env.root / "real.txt").write_text("hello\n")
    (env.root / "alias.txt").symlink_to(env.root / "real.txt")
    assert read_file(ReadFile(path="alias.txt"), env.ctx()).content == "hello\n"


@pytest.mark.parametrize(
    ("tool", "params"),
    [
        (list_dir, lambda p: ListDir(path=p)),
        (file_info, lambda p: FileInfo(path=p)),
        (search_files, lambda p: SearchFiles(path=p, content="SECRET")),
        (copy_path, lambda p: CopyPath(source=p, destination="copied")),
        (move_path, lambda p: MovePath(source=p, destination="moved")),
        (delete_path, lambda p: DeletePath(path=p, recursive=True, permanent=True)),
    ],
    ids=["list_dir", "file_info", "search", "copy", "move", "delete"],
)
def test_every_tool_refuses_an_outside_path(env: FsEnv, tool: Callable, params: Callable) -> None:
    with pytest.raises(SandboxError, match="outside"):
        tool(params(str(env.outside)), env.ctx())
    assert (env.outside / "secret.txt").read_text() == SECRET + "\n"


def test_copy_and_move_refuse_an_outside_destination(env: FsEnv) -> None:
    (env.root / "a.txt").write_text("a")
    with pytest.raises(SandboxError):
        copy_path(CopyPath(source="a.txt", destination=str(env.outside / "a.txt")), env.ctx())
    with pytest.raises(SandboxError):
        move_path(MovePath(source="a.txt", destination="../outside/a.txt"), env.ctx())
    assert sorted(p.name for p in env.outside.iterdir()) == ["secret.txt"]
    assert (env.root / "a.txt").exists()


# --------------------------------------------------------------- protected locations

PROTECTED_FILES = [
    ".ssh/id_rsa",
    ".gnupg/private-keys-v1.d/key.key",
    ".aws/credentials",
    ".azure/accessTokens.json",
    ".config/gcloud/credentials.db",
    ".kube/config",
    ".docker/config.json",
    ".netrc",
    ".pgpass",
    ".password-store/bank.gpg",
    ".local/share/keyrings/login.keyring",
    "Library/Keychains/login.keychain-db",
    ".mozilla/firefox/abc.default/logins.json",
    ".config/google-chrome/Default/Cookies",
    ".config/chromium/Default/Login Data",
    ".config/BraveSoftware/Brave-Browser/Default/Cookies",
    ".config/microsoft-edge/Default/Cookies",
    "Library/Application Support/Google/Chrome/Default/Cookies",
    "Library/Application Support/Firefox/Profiles/abc/logins.json",
    "AppData/Roaming/Mozilla/Firefox/Profiles/abc/logins.json",
    "AppData/Local/Google/Chrome/User Data/Default/Cookies",
    "AppData/Local/Microsoft/Edge/User Data/Default/Cookies",
]


def _plant(base: Path, relative: str) -> Path:
    path = base / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SECRET + "\n")
    return path


@pytest.mark.parametrize("relative", PROTECTED_FILES)
def test_default_protected_locations_are_refused(env: FsEnv, relative: str) -> None:
    secret = _plant(env.home, relative)
    ctx = env.ctx(env.home)
    with pytest.raises(SandboxError, match="protected location"):
        read_file(ReadFile(path=f"~/{relative}"), ctx)
    with pytest.raises(SandboxError, match="protected location"):
        write_file(WriteFile(path=str(secret), content="x"), ctx)
    with pytest.raises(SandboxError, match="protected location"):
        delete_path(DeletePath(path=str(secret), permanent=True), ctx)
    assert secret.read_text() == SECRET + "\n"


def test_protection_is_by_component_not_by_string_prefix(env: FsEnv) -> None:
    _plant(env.home, ".docker/config.json")
    neighbour = _plant(env.home, ".docker/contexts.txt")
    lookalike = _plant(env.home, ".sshkeys-notes.txt")
    ctx = env.ctx(env.home)
    assert read_file(ReadFile(path=str(neighbour)), ctx).ok
    assert read_file(ReadFile(path=str(lookalike)), ctx).ok


def test_protection_ignores_letter_case(env: FsEnv) -> None:
    _plant(env.home, ".SSH/id_rsa")
    with pytest.raises(SandboxError, match="protected"):
        read_file(ReadFile(path="~/.SSH/id_rsa"), env.ctx(env.home))


def test_symlink_into_a_protected_location_is_refused(env: FsEnv) -> None:
    secret = _plant(env.home, ".ssh/id_rsa")
    (env.home / "innocent.txt").symlink_to(secret)
    with pytest.raises(SandboxError, match="protected"):
        read_file(ReadFile(path="~/innocent.txt"), env.ctx(env.home))


def test_user_denied_paths_are_refused(env: FsEnv) -> None:
    _plant(env.root, "private/diary.txt")
    ctx = env.ctx(denied=(str(env.root / "private"),))
    with pytest.raises(SandboxError, match="protected"):
        read_file(ReadFile(path="private/diary.txt"), ctx)


def test_search_never_looks_inside_protected_locations(env: FsEnv) -> None:
    _plant(env.home, ".ssh/id_rsa")
    _plant(env.home, ".netrc")
    _plant(env.home, "notes/todo.txt")
    result = search_files(
        SearchFiles(path="~", content=SECRET, include_hidden=True), env.ctx(env.home)
    )
    assert [Path(hit["path"]).name for hit in result.data["results"]] == ["todo.txt"]


def test_listing_a_protected_folder_is_refused(env: FsEnv) -> None:
    _plant(env.home, ".ssh/id_rsa")
    with pytest.raises(SandboxError):
        list_dir(ListDir(path="~/.ssh"), env.ctx(env.home))


def test_trees_holding_a_protected_location_cannot_be_copied_moved_or_deleted(
    env: FsEnv,
) -> None:
    secret = _plant(env.home, ".config/gcloud/credentials.db")
    ctx = env.ctx(env.home)
    with pytest.raises(ToolError, match="protected"):
        copy_path(CopyPath(source="~/.config", destination="~/config-copy"), ctx)
    with pytest.raises(ToolError, match="protected"):
        move_path(MovePath(source="~/.config", destination="~/config-moved"), ctx)
    with pytest.raises(ToolError, match="protected"):
        delete_path(DeletePath(path="~/.config", recursive=True, permanent=True), ctx)
    assert secret.exists()
    assert not (env.home / "config-copy").exists()


# --------------------------------------------------------------- allowed roots


@pytest.mark.parametrize(
    "tool_call",
    [
        lambda ctx, root: delete_path(DeletePath(path=str(root), recursive=True), ctx),
        lambda ctx, root: delete_path(
            DeletePath(path=str(root), recursive=True, permanent=True), ctx
        ),
        lambda ctx, root: move_path(
            MovePath(source=str(root), destination=str(root / "moved")), ctx
        ),
    ],
    ids=["trash", "permanent", "move"],
)
def test_an_allowed_root_cannot_be_deleted_or_moved(env: FsEnv, tool_call: Callable) -> None:
    (env.root / "keep.txt").write_text("keep")
    inner = env.root / "projects"
    inner.mkdir()
    for root in (env.root, inner):
        with pytest.raises(SandboxError, match="allowed folder"):
            tool_call(env.ctx(env.root, inner), root)
    assert (env.root / "keep.txt").exists()


def test_relative_paths_resolve_against_the_first_root(env: FsEnv) -> None:
    second = env.tmp / "second"
    second.mkdir()
    sandbox = Sandbox([env.root, second])
    assert sandbox.resolve("a/b.txt") == env.root / "a" / "b.txt"
    assert sandbox.resolve(str(second / "c.txt")) == second / "c.txt"


def test_tilde_expands_to_home(env: FsEnv) -> None:
    assert Sandbox([env.home]).resolve("~/doc.txt") == env.home / "doc.txt"


@pytest.mark.parametrize(
    "settings",
    [None, SimpleNamespace(), SimpleNamespace(files=SimpleNamespace(allowed_roots=[]))],
    ids=["no settings", "no files section", "empty roots"],
)
def test_without_folders_the_current_folder_is_the_only_root(
    env: FsEnv, settings: object
) -> None:
    ctx = ToolContext(home=env.tmp / "deskhand-home", settings=settings)
    sandbox = Sandbox.from_context(ctx, cwd=env.root)
    assert sandbox.allowed_roots == (env.root,)
    assert sandbox.note == (
        f"No folders are set up for Deskhand yet, so file tools work only in {env.root}. "
        "Choose folders in Settings → Tools."
    )
    (env.home / "notes.txt").write_text(SECRET)
    with pytest.raises(SandboxError, match="work only in") as refused:
        sandbox.resolve("~/notes.txt")
    assert SECRET not in str(refused.value)
    assert env.home / ".ssh" in sandbox.denied


def test_without_folders_a_run_from_home_gets_no_folder(env: FsEnv) -> None:
    """The default is never the whole home, even when started from it."""
    (env.home / "notes.txt").write_text(SECRET)
    for cwd in (env.home, env.tmp, Path("/")):
        ctx = ToolContext(home=env.tmp / "deskhand-home", settings=None)
        sandbox = Sandbox.from_context(ctx, cwd=cwd)
        assert sandbox.allowed_roots == ()
        with pytest.raises(SandboxError, match="file tools are off"):
            sandbox.resolve(str(env.home / "notes.txt"))


def test_settings_as_a_mapping_are_understood(env: FsEnv) -> None:
    settings = {"files": {"allowed_roots": [str(env.root)], "denied_paths": ["private"]}}
    sandbox = Sandbox.from_context(ToolContext(home=env.tmp, settings=settings))
    assert sandbox.allowed_roots == (env.root,)
    assert not sandbox.is_allowed(env.root / "private" / "x")


def test_follow_final_false_names_the_link_itself(env: FsEnv) -> None:
    (env.root / "link").symlink_to(env.outside / "secret.txt")
    sandbox = Sandbox([env.root])
    assert sandbox.resolve("link", follow_final=False) == env.root / "link"
    with pytest.raises(SandboxError):
        sandbox.resolve("link")


def test_deleting_a_link_to_outside_removes_only_the_link(env: FsEnv) -> None:
    (env.root / "link").symlink_to(env.outside / "secret.txt")
    delete_path(DeletePath(path="link", permanent=True), env.ctx())
    assert not os.path.lexists(env.root / "link")
    assert (env.outside / "secret.txt").read_text() == SECRET + "\n"


def test_copying_a_tree_keeps_links_as_links(env: FsEnv) -> None:
    tree = env.root / "tree"
    tree.mkdir()
    (tree / "leak").symlink_to(env.outside / "secret.txt")
    copy_path(CopyPath(source="tree", destination="copy"), env.ctx())
    copied = env.root / "copy" / "leak"
    assert copied.is_symlink()
    with pytest.raises(SandboxError):
        read_file(ReadFile(path=str(copied)), env.ctx())


# --------------------------------------------------------------- races (TOCTOU)


def _swap_for_symlink(path: Path, target: Path) -> None:
    """What an attacker does between the check and the open."""
    os.rename(path, path.with_name(path.name + ".orig"))
    path.symlink_to(target, target_is_directory=target.is_dir())


def _after_resolve(monkeypatch: pytest.MonkeyPatch, action: Callable[[], None]) -> None:
    """Run `action` once, right after the first path check."""
    original = Sandbox.resolve
    pending = [action]

    def resolve_then_race(self: Sandbox, raw: str, **kwargs: bool) -> Path:
        real = original(self, raw, **kwargs)
        while pending:
            pending.pop()()
        return real

    monkeypatch.setattr(Sandbox, "resolve", resolve_then_race)


def _before_write(monkeypatch: pytest.MonkeyPatch, action: Callable[[], None]) -> None:
    original = Sandbox.write_file

    def race_then_write(self: Sandbox, real: Path, *args: object, **kwargs: object) -> int:
        action()
        return original(self, real, *args, **kwargs)

    monkeypatch.setattr(Sandbox, "write_file", race_then_write)


@pytest.fixture(params=["dir_fd", "fallback"])
def io_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run race tests with openat-style walking and with the portable fallback."""
    if request.param == "fallback":
        monkeypatch.setattr(sandbox_module, "HAS_DIR_FD", False)
        monkeypatch.setattr("tools.fs.ops.HAS_DIR_FD", False)
    elif not sandbox_module.HAS_DIR_FD:
        pytest.skip("this platform has no dir_fd support")
    return request.param


def test_file_swapped_for_symlink_after_check_is_not_read(
    env: FsEnv, monkeypatch: pytest.MonkeyPatch, io_mode: str
) -> None:
    target = env.root / "a.txt"
    target.write_text("harmless\n")
    _after_resolve(monkeypatch, lambda: _swap_for_symlink(target, env.outside / "secret.txt"))
    with pytest.raises(SandboxError, match="symbolic link") as refused:
        read_file(ReadFile(path="a.txt"), env.ctx())
    assert SECRET not in str(refused.value)


def test_parent_swapped_for_symlink_after_check_is_not_read(
    env: FsEnv, monkeypatch: pytest.MonkeyPatch, io_mode: str
) -> None:
    (env.root / "docs").mkdir()
    (env.root / "docs" / "secret.txt").write_text("harmless\n")
    _after_resolve(monkeypatch, lambda: _swap_for_symlink(env.root / "docs", env.outside))
    with pytest.raises(SandboxError, match="symbolic link"):
        read_file(ReadFile(path="docs/secret.txt"), env.ctx())


def test_parent_swapped_for_symlink_before_listing_is_refused(
    env: FsEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    (env.root / "docs").mkdir()
    _after_resolve(monkeypatch, lambda: _swap_for_symlink(env.root / "docs", env.outside))
    with pytest.raises(SandboxError, match="symbolic link"):
        list_dir(ListDir(path="docs"), env.ctx())


@pytest.mark.parametrize("permanent", [False, True], ids=["trash", "permanent"])
def test_delete_in_a_parent_swapped_after_check_is_refused(
    env: FsEnv, monkeypatch: pytest.MonkeyPatch, io_mode: str, permanent: bool
) -> None:
    (env.root / "docs").mkdir()
    (env.root / "docs" / "secret.txt").write_text("harmless\n")
    _after_resolve(monkeypatch, lambda: _swap_for_symlink(env.root / "docs", env.outside))
    with pytest.raises(SandboxError):
        delete_path(DeletePath(path="docs/secret.txt", permanent=permanent), env.ctx())
    assert (env.outside / "secret.txt").read_text() == SECRET + "\n"


def test_overwrite_replaces_a_symlink_planted_after_check_instead_of_following_it(
    env: FsEnv, monkeypatch: pytest.MonkeyPatch, io_mode: str
) -> None:
    target = env.root / "a.txt"
    target.write_text("old\n")
    _before_write(monkeypatch, lambda: _swap_for_symlink(target, env.outside / "secret.txt"))
    write_file(WriteFile(path="a.txt", content="new\n"), env.ctx())
    assert (env.outside / "secret.txt").read_text() == SECRET + "\n"
    assert not target.is_symlink()
    assert target.read_text() == "new\n"


@pytest.mark.parametrize("mode", ["create_only", "overwrite", "append"])
def test_create_refuses_a_symlink_planted_after_check(
    env: FsEnv, monkeypatch: pytest.MonkeyPatch, io_mode: str, mode: str
) -> None:
    planted_target = env.outside / "created.txt"
    _before_write(monkeypatch, lambda: (env.root / "new.txt").symlink_to(planted_target))
    with pytest.raises(ToolError, match="already exists"):
        write_file(WriteFile(path="new.txt", content="x", mode=mode), env.ctx())  # type: ignore[arg-type]
    assert not planted_target.exists()


def test_write_into_a_parent_swapped_after_check_is_refused(
    env: FsEnv, monkeypatch: pytest.MonkeyPatch, io_mode: str
) -> None:
    (env.root / "docs").mkdir()
    _before_write(monkeypatch, lambda: _swap_for_symlink(env.root / "docs", env.outside))
    with pytest.raises(SandboxError, match="symbolic link"):
        write_file(WriteFile(path="docs/new.txt", content="x"), env.ctx())
    assert sorted(p.name for p in env.outside.iterdir()) == ["secret.txt"]


def test_search_does_not_follow_a_symlinked_folder(env: FsEnv) -> None:
    (env.root / "docs").mkdir()
    (env.root / "docs" / "ok.txt").write_text(SECRET)
    (env.root / "escape").symlink_to(env.outside, target_is_directory=True)
    result = search_files(SearchFiles(content=SECRET), env.ctx())
    assert [Path(hit["path"]).name for hit in result.data["results"]] == ["ok.txt"]
