"""Behaviour of each file tool, called directly with a real ToolContext."""

from __future__ import annotations

import importlib
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.test_fs_sandbox import FsEnv, make_env
from tools.fs import ops
from tools.fs.changes import (
    copy_path,
    delete_path,
    edit_file,
    move_path,
    preview_copy_path,
    preview_delete_path,
    preview_edit_file,
    preview_move_path,
    preview_write_file,
    write_file,
)
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
from tools.spec import Operation, Progress, ToolCancelled, ToolError

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions and links")

PNG_HEADER = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FsEnv:
    return make_env(tmp_path, monkeypatch)


def _lines(count: int, width: int = 0) -> str:
    return "".join(f"line {n}{'x' * width}\n" for n in range(1, count + 1))


# --------------------------------------------------------------- manifests


def test_manifests_are_well_formed() -> None:
    names = [m.name for m in MANIFESTS]
    assert len(names) == len(set(names))
    assert set(names) == {
        "fs_list_dir",
        "fs_read_file",
        "fs_write_file",
        "fs_edit_file",
        "fs_move",
        "fs_copy",
        "fs_delete",
        "fs_search",
        "fs_file_info",
    }
    for manifest in MANIFESTS:
        assert manifest.category == "fs"
        assert manifest.name.startswith("fs_")
        assert len(manifest.summary) <= 120, manifest.name
        module, function = str(manifest.impl).split(":")
        assert callable(getattr(importlib.import_module(module), function))
        assert manifest.json_schema()["type"] == "object"
        if not manifest.read_only:  # changing tools show what they will do before approval
            module, function = str(manifest.preview).split(":")
            assert callable(getattr(importlib.import_module(module), function))


def test_operations_match_what_the_tools_do() -> None:
    operations = {m.name: m.operations for m in MANIFESTS}
    read_only = ["fs_list_dir", "fs_read_file", "fs_search", "fs_file_info"]
    assert all(operations[name] == {Operation.READ} for name in read_only)
    assert operations["fs_write_file"] == {Operation.CREATE, Operation.UPDATE}
    assert operations["fs_edit_file"] == {Operation.UPDATE}
    assert operations["fs_delete"] == {Operation.DELETE}


def test_manifest_module_imports_no_implementation() -> None:
    code = (
        "import sys, tools.fs.manifest; "
        "loaded = [m for m in ('tools.fs.ops', 'tools.fs.changes', 'tools.fs.sandbox', "
        "'send2trash') if m in sys.modules]; print(loaded)"
    )
    root = Path(__file__).resolve().parents[1]
    output = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert output.stdout.strip() == "[]"


def test_unknown_parameters_are_rejected() -> None:
    with pytest.raises(ValidationError):
        ReadFile(path="a.txt", lines="1-3")  # type: ignore[call-arg]


# --------------------------------------------------------------- fs_list_dir


def test_list_dir_shows_type_size_and_time_with_folders_first(env: FsEnv) -> None:
    (env.root / "b.txt").write_text("hello")
    (env.root / "a-folder").mkdir()
    (env.root / "link").symlink_to("b.txt")
    result = list_dir(ListDir(), env.ctx())
    entries = {e["name"]: e for e in result.data["entries"]}
    assert result.data["entries"][0]["name"] == "a-folder"
    assert entries["b.txt"]["type"] == "file"
    assert entries["b.txt"]["size"] == 5
    assert entries["b.txt"]["mtime"][:4].isdigit()
    assert entries["link"] == entries["link"] | {"type": "symlink", "target": "b.txt"}
    assert "dir   a-folder/" in result.content
    assert "link  link -> b.txt" in result.content


def test_list_dir_hides_dotfiles_unless_asked(env: FsEnv) -> None:
    (env.root / ".hidden").write_text("x")
    (env.root / "shown").write_text("x")
    plain = list_dir(ListDir(), env.ctx())
    assert [e["name"] for e in plain.data["entries"]] == ["shown"]
    assert "1 hidden entries not shown" in plain.content
    everything = list_dir(ListDir(include_hidden=True), env.ctx())
    assert {e["name"] for e in everything.data["entries"]} == {".hidden", "shown"}


def test_list_dir_caps_entries_with_a_note(env: FsEnv) -> None:
    for n in range(12):
        (env.root / f"f{n:02}.txt").write_text("x")
    result = list_dir(ListDir(max_entries=5), env.ctx())
    assert len(result.data["entries"]) == 5
    assert result.data["total"] == 12
    assert result.truncated
    assert "7 more entries not shown" in result.content


def test_list_dir_of_a_file_says_so(env: FsEnv) -> None:
    (env.root / "a.txt").write_text("x")
    with pytest.raises(ToolError, match="is a file"):
        list_dir(ListDir(path="a.txt"), env.ctx())


# --------------------------------------------------------------- fs_read_file


def test_read_whole_file(env: FsEnv) -> None:
    (env.root / "a.txt").write_text("one\ntwo\n")
    result = read_file(ReadFile(path="a.txt"), env.ctx())
    assert result.content == "one\ntwo\n"
    assert result.data["total_lines"] == 2
    assert not result.truncated


def test_read_line_range_with_numbers(env: FsEnv) -> None:
    (env.root / "a.txt").write_text(_lines(20))
    result = read_file(
        ReadFile(path="a.txt", start_line=5, end_line=7, line_numbers=True), env.ctx()
    )
    assert result.content.splitlines()[:3] == ["5\tline 5", "6\tline 6", "7\tline 7"]
    assert "[Showing lines 5-7 of 20.]" in result.content
    assert (result.data["start_line"], result.data["end_line"]) == (5, 7)


def test_read_from_start_line_to_the_end(env: FsEnv) -> None:
    (env.root / "a.txt").write_text(_lines(5))
    result = read_file(ReadFile(path="a.txt", start_line=4), env.ctx())
    assert result.content.startswith("line 4\nline 5\n")


def test_read_past_the_end_is_explained(env: FsEnv) -> None:
    (env.root / "a.txt").write_text(_lines(3))
    with pytest.raises(ToolError, match=r"past the end .*\(3 lines\)"):
        read_file(ReadFile(path="a.txt", start_line=10), env.ctx())


def test_read_rejects_a_reversed_range() -> None:
    with pytest.raises(ValidationError, match="end_line"):
        ReadFile(path="a.txt", start_line=5, end_line=2)


def test_read_is_capped_with_a_note_telling_where_to_continue(env: FsEnv) -> None:
    (env.root / "big.txt").write_text(_lines(5000, width=100))  # ~530 KiB
    first = read_file(ReadFile(path="big.txt"), env.ctx())
    assert first.truncated
    assert len(first.content.encode()) <= ops.READ_CAP_BYTES + 300
    last = first.data["end_line"]
    assert f"Continue with start_line={last + 1}" in first.content
    assert first.data["total_lines"] == 5000
    following = read_file(ReadFile(path="big.txt", start_line=last + 1), env.ctx())
    assert following.content.startswith(f"line {last + 1}x")


def test_read_cuts_an_overlong_line(env: FsEnv) -> None:
    (env.root / "min.js").write_text("x" * (ops.READ_CAP_BYTES + 10) + "\nsecond\n")
    result = read_file(ReadFile(path="min.js"), env.ctx())
    assert "Line 1 is longer than 256 KiB" in result.content
    assert "Continue with start_line=2" in result.content


def test_read_refuses_binary_files_with_type_and_size(env: FsEnv) -> None:
    (env.root / "pic.dat").write_bytes(PNG_HEADER)
    with pytest.raises(ToolError, match=r"binary file \(image/png, 80 bytes\)"):
        read_file(ReadFile(path="pic.dat"), env.ctx())


def test_read_refuses_nul_bytes_as_binary(env: FsEnv) -> None:
    (env.root / "blob").write_bytes(b"abc\x00def" * 10)
    with pytest.raises(ToolError, match="binary"):
        read_file(ReadFile(path="blob"), env.ctx())


def test_read_accepts_utf8_text(env: FsEnv) -> None:
    (env.root / "u.txt").write_text("héllo wörld ✓\n", encoding="utf-8")
    assert read_file(ReadFile(path="u.txt"), env.ctx()).content == "héllo wörld ✓\n"


def test_read_empty_file_and_folder(env: FsEnv) -> None:
    (env.root / "empty.txt").write_bytes(b"")
    (env.root / "folder").mkdir()
    assert read_file(ReadFile(path="empty.txt"), env.ctx()).content == "(empty file)"
    with pytest.raises(ToolError, match="is a folder"):
        read_file(ReadFile(path="folder"), env.ctx())
    with pytest.raises(ToolError, match="does not exist"):
        read_file(ReadFile(path="missing.txt"), env.ctx())


def test_read_refuses_a_fifo_without_blocking(env: FsEnv) -> None:
    os.mkfifo(env.root / "pipe")
    with pytest.raises(ToolError, match="not a regular file"):
        read_file(ReadFile(path="pipe"), env.ctx())


# --------------------------------------------------------------- fs_write_file


def test_write_creates_a_file_with_parents_on_request(env: FsEnv) -> None:
    with pytest.raises(ToolError, match="create_dirs=true"):
        write_file(WriteFile(path="a/b/c.txt", content="hi\n"), env.ctx())
    result = write_file(WriteFile(path="a/b/c.txt", content="hi\n", create_dirs=True), env.ctx())
    assert (env.root / "a" / "b" / "c.txt").read_text() == "hi\n"
    assert result.data["created"] is True
    assert result.data["bytes_written"] == 3
    assert "+hi" in result.data["diff"]


def test_overwrite_returns_a_diff_against_the_previous_content(env: FsEnv) -> None:
    (env.root / "a.txt").write_text("alpha\nbeta\n")
    result = write_file(WriteFile(path="a.txt", content="alpha\ngamma\n"), env.ctx())
    assert (env.root / "a.txt").read_text() == "alpha\ngamma\n"
    diff = result.data["diff"]
    assert "-beta\n" in diff
    assert "+gamma\n" in diff
    assert " alpha\n" in diff
    assert "+1 -1 lines" in result.content


def test_overwrite_keeps_the_file_mode(env: FsEnv) -> None:
    script = env.root / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o750)
    write_file(WriteFile(path="run.sh", content="echo new\n"), env.ctx())
    assert stat.S_IMODE(script.stat().st_mode) == 0o750


def test_overwrite_writes_through_an_inside_symlink(env: FsEnv) -> None:
    (env.root / "real.txt").write_text("old")
    (env.root / "alias.txt").symlink_to("real.txt")
    write_file(WriteFile(path="alias.txt", content="new"), env.ctx())
    assert (env.root / "alias.txt").is_symlink()
    assert (env.root / "real.txt").read_text() == "new"


def test_failed_replace_leaves_the_original_untouched(
    env: FsEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    (env.root / "a.txt").write_text("original\n")

    def broken_replace(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space"):
        write_file(WriteFile(path="a.txt", content="new\n"), env.ctx())
    assert (env.root / "a.txt").read_text() == "original\n"
    assert sorted(p.name for p in env.root.iterdir()) == ["a.txt"]  # no temp file left


def test_failed_write_of_a_new_file_leaves_nothing(
    env: FsEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="Input/output"):
        write_file(WriteFile(path="new.txt", content="x"), env.ctx())
    assert list(env.root.iterdir()) == []


def test_append_adds_at_the_end(env: FsEnv) -> None:
    (env.root / "log.txt").write_text("one\n")
    result = write_file(WriteFile(path="log.txt", content="two\n", mode="append"), env.ctx())
    assert (env.root / "log.txt").read_text() == "one\ntwo\n"
    assert "+two" in result.data["diff"]
    assert "-one" not in result.data["diff"]


def test_append_to_a_missing_file_creates_it(env: FsEnv) -> None:
    write_file(WriteFile(path="log.txt", content="one\n", mode="append"), env.ctx())
    assert (env.root / "log.txt").read_text() == "one\n"


def test_create_only_refuses_an_existing_file(env: FsEnv) -> None:
    (env.root / "a.txt").write_text("keep")
    with pytest.raises(ToolError, match="already exists"):
        write_file(WriteFile(path="a.txt", content="x", mode="create_only"), env.ctx())
    assert (env.root / "a.txt").read_text() == "keep"
    write_file(WriteFile(path="b.txt", content="new", mode="create_only"), env.ctx())
    assert (env.root / "b.txt").read_text() == "new"


def test_write_refuses_a_folder_target(env: FsEnv) -> None:
    (env.root / "folder").mkdir()
    with pytest.raises(ToolError, match="is a folder"):
        write_file(WriteFile(path="folder", content="x"), env.ctx())


# --------------------------------------------------------------- fs_edit_file


def test_edit_replaces_one_exact_occurrence_and_returns_a_diff(env: FsEnv) -> None:
    (env.root / "app.py").write_text("def f():\n    return 1\n")
    (env.root / "app.py").chmod(0o600)
    result = edit_file(EditFile(path="app.py", old_text="return 1", new_text="return 2"), env.ctx())
    assert (env.root / "app.py").read_text() == "def f():\n    return 2\n"
    assert "-    return 1\n+    return 2\n" in result.data["diff"]
    assert result.data["replacements"] == 1
    assert stat.S_IMODE((env.root / "app.py").stat().st_mode) == 0o600


def test_edit_not_found_shows_the_closest_lines(env: FsEnv) -> None:
    (env.root / "app.py").write_text("import os\n\ndef compute_total(items):\n    pass\n")
    with pytest.raises(ToolError, match="not found") as refused:
        edit_file(
            EditFile(path="app.py", old_text="def compute_totals(items):", new_text="x"),
            env.ctx(),
        )
    assert "line 3: def compute_total(items):" in str(refused.value)


def test_edit_ambiguous_reports_count_and_lines(env: FsEnv) -> None:
    (env.root / "a.txt").write_text("x = 1\ny = 2\nx = 1\n")
    with pytest.raises(ToolError, match=r"occurs 2 times .*lines 1, 3"):
        edit_file(EditFile(path="a.txt", old_text="x = 1", new_text="x = 3"), env.ctx())
    assert (env.root / "a.txt").read_text() == "x = 1\ny = 2\nx = 1\n"


def test_edit_replace_all(env: FsEnv) -> None:
    (env.root / "a.txt").write_text("x = 1\ny = 2\nx = 1\n")
    result = edit_file(
        EditFile(path="a.txt", old_text="x = 1", new_text="x = 3", replace_all=True), env.ctx()
    )
    assert (env.root / "a.txt").read_text() == "x = 3\ny = 2\nx = 3\n"
    assert result.data["replacements"] == 2
    assert result.data["diff"].count("+x = 3") == 2


def test_edit_matches_windows_line_endings(env: FsEnv) -> None:
    (env.root / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    edit_file(EditFile(path="w.txt", old_text="one\ntwo", new_text="1\n2"), env.ctx())
    assert (env.root / "w.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


def test_edit_refuses_binary_files(env: FsEnv) -> None:
    (env.root / "pic.png").write_bytes(PNG_HEADER)
    with pytest.raises(ToolError, match="binary"):
        edit_file(EditFile(path="pic.png", old_text="PNG", new_text="JPG"), env.ctx())


# --------------------------------------------------------------- fs_move


def test_move_renames_a_file(env: FsEnv) -> None:
    (env.root / "a.txt").write_text("a")
    result = move_path(MovePath(source="a.txt", destination="b.txt"), env.ctx())
    assert not (env.root / "a.txt").exists()
    assert (env.root / "b.txt").read_text() == "a"
    assert result.data["destination"] == str(env.root / "b.txt")


def test_move_refuses_to_overwrite_unless_asked(env: FsEnv) -> None:
    (env.root / "a.txt").write_text("a")
    (env.root / "b.txt").write_text("b")
    with pytest.raises(ToolError, match="overwrite=true"):
        move_path(MovePath(source="a.txt", destination="b.txt"), env.ctx())
    assert (env.root / "b.txt").read_text() == "b"
    move_path(MovePath(source="a.txt", destination="b.txt", overwrite=True), env.ctx())
    assert (env.root / "b.txt").read_text() == "a"
    assert not (env.root / "a.txt").exists()


def test_move_a_folder_and_create_parents(env: FsEnv) -> None:
    (env.root / "src").mkdir()
    (env.root / "src" / "f.txt").write_text("f")
    with pytest.raises(ToolError, match="create_dirs"):
        move_path(MovePath(source="src", destination="new/place/src"), env.ctx())
    move_path(MovePath(source="src", destination="new/place/src", create_dirs=True), env.ctx())
    assert (env.root / "new" / "place" / "src" / "f.txt").read_text() == "f"


def test_move_into_an_existing_folder_asks_for_the_full_path(env: FsEnv) -> None:
    (env.root / "a.txt").write_text("a")
    (env.root / "dest").mkdir()
    with pytest.raises(ToolError, match=r"existing folder.*dest/a\.txt"):
        move_path(MovePath(source="a.txt", destination="dest", overwrite=True), env.ctx())


def test_move_a_folder_into_itself_is_refused(env: FsEnv) -> None:
    (env.root / "src").mkdir()
    with pytest.raises(ToolError, match="inside itself"):
        move_path(MovePath(source="src", destination="src/inner"), env.ctx())


def test_move_a_symlink_moves_the_link(env: FsEnv) -> None:
    (env.root / "target.txt").write_text("t")
    (env.root / "link").symlink_to("target.txt")
    move_path(MovePath(source="link", destination="moved-link"), env.ctx())
    assert (env.root / "moved-link").is_symlink()
    assert (env.root / "target.txt").read_text() == "t"


# --------------------------------------------------------------- fs_copy


def test_copy_a_file_keeps_mode_and_mtime(env: FsEnv) -> None:
    source = env.root / "run.sh"
    source.write_text("echo hi\n")
    source.chmod(0o751)
    os.utime(source, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    args, ctx = CopyPath(source="run.sh", destination="copy.sh"), env.ctx()
    escalation = escalate(args, ctx)  # what the pipeline does before asking
    assert escalation is not None and escalation.never_covered
    copy_path(args, ctx)
    copy = env.root / "copy.sh"
    assert copy.read_text() == "echo hi\n"
    assert stat.S_IMODE(copy.stat().st_mode) == 0o751
    assert copy.stat().st_mtime_ns == 1_600_000_000_000_000_000
    assert source.exists()


def test_copy_refuses_to_overwrite_unless_asked(env: FsEnv) -> None:
    (env.root / "a.txt").write_text("a")
    (env.root / "b.txt").write_text("b")
    with pytest.raises(ToolError, match="already exists"):
        copy_path(CopyPath(source="a.txt", destination="b.txt"), env.ctx())
    assert (env.root / "b.txt").read_text() == "b"
    copy_path(CopyPath(source="a.txt", destination="b.txt", overwrite=True), env.ctx())
    assert (env.root / "b.txt").read_text() == "a"


def test_copy_a_folder_recursively_with_progress(env: FsEnv) -> None:
    tree = env.root / "tree"
    (tree / "deep" / "er").mkdir(parents=True)
    for n in range(120):
        (tree / f"f{n}.txt").write_text(str(n))
    (tree / "deep" / "er" / "leaf.txt").write_text("leaf")
    reports: list[Progress] = []
    result = copy_path(
        CopyPath(source="tree", destination="tree-copy"), env.ctx(progress_sink=reports.append)
    )
    assert (env.root / "tree-copy" / "deep" / "er" / "leaf.txt").read_text() == "leaf"
    assert (env.root / "tree-copy" / "f119.txt").read_text() == "119"
    assert result.data["files"] == 121
    assert any("copied 100 files" in p.message for p in reports)


def test_cancelled_copy_leaves_no_partial_tree(env: FsEnv) -> None:
    tree = env.root / "tree"
    tree.mkdir()
    (tree / "a.txt").write_text("a")
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(ToolCancelled):
        copy_path(CopyPath(source="tree", destination="copy"), env.ctx(cancel_event=cancel))
    assert not (env.root / "copy").exists()


def test_copy_a_folder_into_itself_is_refused(env: FsEnv) -> None:
    (env.root / "tree").mkdir()
    with pytest.raises(ToolError, match="inside itself"):
        copy_path(CopyPath(source="tree", destination="tree/copy"), env.ctx())


# --------------------------------------------------------------- fs_delete


def test_delete_moves_to_the_trash_by_default(env: FsEnv) -> None:
    (env.root / "old.txt").write_text("bye")
    result = delete_path(DeletePath(path="old.txt"), env.ctx())
    assert not (env.root / "old.txt").exists()
    assert (env.trash_files / "old.txt").read_text() == "bye"
    assert "trash" in result.content
    assert result.data["permanent"] is False


def test_delete_permanently_does_not_use_the_trash(env: FsEnv) -> None:
    (env.root / "old.txt").write_text("bye")
    delete_path(DeletePath(path="old.txt", permanent=True), env.ctx())
    assert not (env.root / "old.txt").exists()
    assert not env.trash_files.exists()


@pytest.mark.parametrize("permanent", [False, True])
def test_deleting_a_folder_needs_recursive(env: FsEnv, permanent: bool) -> None:
    folder = env.root / "folder"
    folder.mkdir()
    (folder / "a.txt").write_text("a")
    with pytest.raises(ToolError, match=r"1 entries; pass recursive=true"):
        delete_path(DeletePath(path="folder", permanent=permanent), env.ctx())
    assert (folder / "a.txt").exists()
    delete_path(DeletePath(path="folder", recursive=True, permanent=permanent), env.ctx())
    assert not folder.exists()
    assert (env.trash_files / "folder" / "a.txt").exists() is not permanent


def test_delete_a_missing_path_is_explained(env: FsEnv) -> None:
    with pytest.raises(ToolError, match="does not exist"):
        delete_path(DeletePath(path="nope.txt"), env.ctx())


# --------------------------------------------------------------- fs_search


@pytest.fixture
def project(env: FsEnv) -> FsEnv:
    (env.root / "src" / "pkg").mkdir(parents=True)
    (env.root / "src" / "main.py").write_text("import os\n\ndef main():\n    return TODO\n")
    (env.root / "src" / "pkg" / "util.py").write_text("# todo: tidy\nVALUE = 42\n")
    (env.root / "README.md").write_text("Project\nTODO: write docs\n")
    (env.root / "logo.png").write_bytes(PNG_HEADER)
    (env.root / ".secret-notes.txt").write_text("TODO hidden\n")
    (env.root / "node_modules").mkdir()
    (env.root / "node_modules" / "dep.js").write_text("// TODO vendored\n")
    return env


def test_search_by_glob(project: FsEnv) -> None:
    result = search_files(SearchFiles(pattern="*.py"), project.ctx())
    names = sorted(Path(hit["path"]).name for hit in result.data["results"])
    assert names == ["main.py", "util.py"]


def test_search_glob_with_a_slash_matches_the_relative_path(project: FsEnv) -> None:
    result = search_files(SearchFiles(pattern="src/pkg/*"), project.ctx())
    assert [Path(hit["path"]).name for hit in result.data["results"]] == ["util.py"]


def test_search_content_reports_line_numbers(project: FsEnv) -> None:
    result = search_files(SearchFiles(content="todo"), project.ctx())
    hits = {(Path(h["path"]).name, h["line"], h["text"]) for h in result.data["results"]}
    assert hits == {
        ("main.py", 4, "return TODO"),
        ("util.py", 1, "# todo: tidy"),
        ("README.md", 2, "TODO: write docs"),
    }
    assert f"{project.root / 'README.md'}:2: TODO: write docs" in result.content
    assert "1 binary" in result.content


def test_search_content_case_sensitive_and_regex(project: FsEnv) -> None:
    sensitive = search_files(SearchFiles(content="TODO", case_sensitive=True), project.ctx())
    assert {Path(h["path"]).name for h in sensitive.data["results"]} == {"main.py", "README.md"}
    regex = search_files(SearchFiles(content=r"^[A-Z]+ = \d+$", regex=True), project.ctx())
    assert [(Path(h["path"]).name, h["line"]) for h in regex.data["results"]] == [("util.py", 2)]


def test_search_invalid_regex_is_explained(project: FsEnv) -> None:
    with pytest.raises(ToolError, match="Invalid regular expression"):
        search_files(SearchFiles(content="([", regex=True), project.ctx())


def test_search_hidden_and_noise_only_on_request(project: FsEnv) -> None:
    result = search_files(SearchFiles(content="TODO", include_hidden=True), project.ctx())
    names = {Path(h["path"]).name for h in result.data["results"]}
    assert {".secret-notes.txt", "dep.js"} <= names


def test_search_stops_at_max_results(project: FsEnv) -> None:
    result = search_files(SearchFiles(content="todo", max_results=2), project.ctx())
    assert len(result.data["results"]) == 2
    assert result.data["limit_reached"]
    assert "Stopped at max_results=2" in result.content


def test_search_skips_huge_files(project: FsEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops, "SEARCH_MAX_FILE_BYTES", 30)
    result = search_files(SearchFiles(content="todo"), project.ctx())
    assert {Path(h["path"]).name for h in result.data["results"]} == {"util.py", "README.md"}
    assert sum(result.data["skipped"].values()) == 2  # main.py (too big) and logo.png


def test_search_can_be_cancelled(project: FsEnv) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(ToolCancelled):
        search_files(SearchFiles(content="x"), project.ctx(cancel_event=cancel))


# --------------------------------------------------------------- fs_file_info


def test_file_info_of_a_file(env: FsEnv) -> None:
    path = env.root / "notes.md"
    path.write_text("# hi\n")
    path.chmod(0o640)
    info = file_info(FileInfo(path="notes.md"), env.ctx()).data
    assert info["type"] == "file"
    assert info["size"] == 5
    assert info["mode"] == "0o640"
    assert info["permissions"] == "-rw-r-----"
    assert info["mime"] == "text/markdown"
    assert info["is_symlink"] is False


def test_file_info_sniffs_content_without_extension(env: FsEnv) -> None:
    (env.root / "image").write_bytes(PNG_HEADER)
    (env.root / "text").write_text("plain words\n")
    assert file_info(FileInfo(path="image"), env.ctx()).data["mime"] == "image/png"
    assert file_info(FileInfo(path="text"), env.ctx()).data["mime"] == "text/plain"


def test_file_info_of_a_folder(env: FsEnv) -> None:
    (env.root / "folder").mkdir()
    info = file_info(FileInfo(path="folder"), env.ctx()).data
    assert (info["type"], info["mime"]) == ("dir", "inode/directory")


def test_file_info_of_symlinks(env: FsEnv) -> None:
    (env.root / "target.txt").write_text("abc")
    (env.root / "inside").symlink_to("target.txt")
    (env.root / "outside").symlink_to(env.outside / "secret.txt")
    inside = file_info(FileInfo(path="inside"), env.ctx())
    assert inside.data | {"type": "symlink", "is_symlink": True, "target": "target.txt"} == (
        inside.data
    )
    assert (inside.data["target_type"], inside.data["target_size"]) == ("file", 3)
    outside = file_info(FileInfo(path="outside"), env.ctx())
    assert outside.data["target_allowed"] is False
    assert "target_size" not in outside.data
    assert "outside the allowed folders" in outside.content


def test_file_info_of_a_missing_path(env: FsEnv) -> None:
    with pytest.raises(ToolError, match="does not exist"):
        file_info(FileInfo(path="nope"), env.ctx())


# --------------------------------------------------------------- approval previews


def _tree_state(folder: Path) -> dict[str, bytes | None]:
    return {str(p): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


def test_previews_show_what_will_happen_and_change_nothing(env: FsEnv) -> None:
    (env.root / "a.txt").write_text("alpha\nbeta\n")
    (env.root / "folder").mkdir()
    (env.root / "folder" / "x.txt").write_text("x")
    before = _tree_state(env.root)
    ctx = env.ctx()

    overwrite = preview_write_file(WriteFile(path="a.txt", content="alpha\ngamma\n"), ctx)
    assert overwrite.startswith(f"Overwrite '{env.root / 'a.txt'}' (+1 -1 lines)")
    assert "-beta\n+gamma" in overwrite
    create = preview_write_file(WriteFile(path="new.txt", content="hi\n"), ctx)
    assert create.startswith(f"Create '{env.root / 'new.txt'}' (3 bytes)")
    append = preview_write_file(WriteFile(path="a.txt", content="more\n", mode="append"), ctx)
    assert "+more" in append
    edit = preview_edit_file(EditFile(path="a.txt", old_text="beta", new_text="BETA"), ctx)
    assert "-beta\n+BETA" in edit
    move = preview_move_path(MovePath(source="a.txt", destination="b.txt"), ctx)
    assert move == f"Move '{env.root / 'a.txt'}' to '{env.root / 'b.txt'}'."
    copy = preview_copy_path(CopyPath(source="folder", destination="copy"), ctx)
    assert copy.startswith("Copy folder")
    trash = preview_delete_path(DeletePath(path="folder", recursive=True), ctx)
    assert trash == f"Move '{env.root / 'folder'}' (folder with 1 entries) to the trash."
    gone = preview_delete_path(DeletePath(path="a.txt", permanent=True), ctx)
    assert "cannot be undone" in gone

    assert _tree_state(env.root) == before
    assert not env.trash_files.exists()


def test_previews_report_a_call_that_will_fail(env: FsEnv) -> None:
    (env.root / "a.txt").write_text("x = 1\nx = 1\n")
    ctx = env.ctx()
    with pytest.raises(ToolError, match="occurs 2 times"):
        preview_edit_file(EditFile(path="a.txt", old_text="x = 1", new_text="y"), ctx)
    with pytest.raises(ToolError, match="already exists"):
        preview_write_file(WriteFile(path="a.txt", content="x", mode="create_only"), ctx)
    with pytest.raises(ToolError, match="outside"):
        preview_write_file(WriteFile(path=str(env.outside / "x"), content="x"), ctx)
