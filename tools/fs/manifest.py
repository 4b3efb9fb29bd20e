"""File tools: cheap declarations. Implementations live in tools.fs.ops (imported on first call)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tools.spec import Operation, ToolManifest

_PATH_HELP = "Absolute path, ~/…, or relative to the first allowed folder"


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class ListDir(_Params):
    path: str = Field(".", min_length=1, description=f"Folder to list. {_PATH_HELP}.")
    include_hidden: bool = Field(False, description="Include entries whose name starts with '.'")
    max_entries: int = Field(200, ge=1, le=2000, description="Show at most this many entries")


class ReadFile(_Params):
    path: str = Field(..., min_length=1, description=f"File to read. {_PATH_HELP}.")
    start_line: int | None = Field(None, ge=1, description="First line to return (1-based)")
    end_line: int | None = Field(None, ge=1, description="Last line to return (inclusive)")
    line_numbers: bool = Field(False, description="Prefix each line with its line number")

    @model_validator(mode="after")
    def _range_in_order(self) -> ReadFile:
        if self.start_line and self.end_line and self.end_line < self.start_line:
            raise ValueError("end_line must be greater than or equal to start_line")
        return self


class WriteFile(_Params):
    path: str = Field(..., min_length=1, description=f"File to write. {_PATH_HELP}.")
    content: str = Field(..., description="Text to write (UTF-8)")
    mode: Literal["overwrite", "append", "create_only"] = Field(
        "overwrite",
        description="overwrite: replace the whole file; append: add at the end; "
        "create_only: fail if the file already exists",
    )
    create_dirs: bool = Field(False, description="Create missing parent folders")


class EditFile(_Params):
    path: str = Field(..., min_length=1, description=f"File to edit. {_PATH_HELP}.")
    old_text: str = Field(
        ...,
        min_length=1,
        description="Exact text to replace, including whitespace and indentation",
    )
    new_text: str = Field(..., description="Replacement text")
    replace_all: bool = Field(False, description="Replace every occurrence instead of one")


class MovePath(_Params):
    source: str = Field(..., min_length=1, description="File or folder to move")
    destination: str = Field(
        ..., min_length=1, description="Full new path (not the folder to move into)"
    )
    overwrite: bool = Field(False, description="Replace an existing destination file")
    create_dirs: bool = Field(False, description="Create missing parent folders of destination")


class CopyPath(_Params):
    source: str = Field(..., min_length=1, description="File or folder to copy (folders recurse)")
    destination: str = Field(..., min_length=1, description="Full path of the copy")
    overwrite: bool = Field(False, description="Replace an existing destination file")
    create_dirs: bool = Field(False, description="Create missing parent folders of destination")


class DeletePath(_Params):
    path: str = Field(..., min_length=1, description="File or folder to delete")
    recursive: bool = Field(False, description="Required to delete a folder and its contents")
    permanent: bool = Field(
        False, description="Delete for good instead of moving to the trash (cannot be undone)"
    )


class SearchFiles(_Params):
    path: str = Field(".", min_length=1, description=f"Folder to search in. {_PATH_HELP}.")
    pattern: str = Field(
        "*",
        min_length=1,
        description="Glob for file names, e.g. '*.py'; with a '/' it matches the relative path",
    )
    content: str | None = Field(
        None,
        description="Only files containing this text (or regex when regex=true); matched "
        "on the text as fs_read_file shows it, known secrets reading [redacted]",
    )
    regex: bool = Field(False, description="Treat content as a Python regular expression")
    case_sensitive: bool = Field(False, description="Match names and content case-sensitively")
    include_hidden: bool = Field(False, description="Also search hidden files and folders")
    max_results: int = Field(100, ge=1, le=1000, description="Stop after this many matches")


class FileInfo(_Params):
    path: str = Field(..., min_length=1, description=f"File, folder or link. {_PATH_HELP}.")


def _read_impl(name: str) -> str:
    return f"tools.fs.ops:{name}"


def _change_impl(name: str) -> str:
    return f"tools.fs.changes:{name}"


#: Every file tool: what it acts on (resolved paths) and a one-line summary.
_SUBJECT = "tools.fs.hooks:subject"
_SUMMARY = "tools.fs.hooks:summary_line"
#: Changing tools: a change that makes something run is EXECUTE, never covered by a rule.
_ESCALATE = "tools.fs.hooks:escalate"


_READ = frozenset({Operation.READ})
_WRITE = frozenset({Operation.CREATE, Operation.UPDATE})

MANIFESTS: list[ToolManifest] = [
    ToolManifest(
        name="fs_list_dir",
        category="fs",
        description="List a folder's entries with type, size and modification time. "
        "Hidden entries are skipped unless include_hidden=true; long listings are cut at "
        "max_entries.",
        params=ListDir,
        operations=_READ,
        impl=_read_impl("list_dir"),
        subject=_SUBJECT,
        summary_line=_SUMMARY,
    ),
    ToolManifest(
        name="fs_read_file",
        category="fs",
        description="Read a text file, optionally only lines start_line to end_line. "
        "Output is capped at 256 KiB with a note saying where to continue; binary files are "
        "refused.",
        params=ReadFile,
        operations=_READ,
        impl=_read_impl("read_file"),
        subject=_SUBJECT,
        summary_line=_SUMMARY,
    ),
    ToolManifest(
        name="fs_write_file",
        category="fs",
        description="Write text to a file: overwrite it, append to it, or create it only if "
        "it is new. The replace is atomic and keeps the file's permissions; returns a diff.",
        params=WriteFile,
        operations=_WRITE,
        impl=_change_impl("write_file"),
        preview=_change_impl("preview_write_file"),
        escalate=_ESCALATE,
        subject=_SUBJECT,
        summary_line=_SUMMARY,
    ),
    ToolManifest(
        name="fs_edit_file",
        category="fs",
        description="Replace an exact piece of text in a file with new text and show the diff. "
        "old_text must match exactly once unless replace_all=true.",
        params=EditFile,
        operations=frozenset({Operation.UPDATE}),
        impl=_change_impl("edit_file"),
        preview=_change_impl("preview_edit_file"),
        escalate=_ESCALATE,
        subject=_SUBJECT,
        summary_line=_SUMMARY,
    ),
    ToolManifest(
        name="fs_move",
        category="fs",
        description="Move or rename a file or folder. "
        "An existing destination is only replaced with overwrite=true.",
        params=MovePath,
        operations=_WRITE,
        impl=_change_impl("move_path"),
        preview=_change_impl("preview_move_path"),
        escalate=_ESCALATE,
        subject=_SUBJECT,
        summary_line=_SUMMARY,
    ),
    ToolManifest(
        name="fs_copy",
        category="fs",
        description="Copy a file, or a folder with everything inside it. "
        "An existing destination is only replaced with overwrite=true.",
        params=CopyPath,
        operations=_WRITE,
        impl=_change_impl("copy_path"),
        preview=_change_impl("preview_copy_path"),
        escalate=_ESCALATE,
        subject=_SUBJECT,
        summary_line=_SUMMARY,
    ),
    ToolManifest(
        name="fs_delete",
        category="fs",
        description="Move a file or folder to the trash (or delete it for good with "
        "permanent=true). Folders need recursive=true.",
        params=DeletePath,
        operations=frozenset({Operation.DELETE}),
        impl=_change_impl("delete_path"),
        preview=_change_impl("preview_delete_path"),
        subject=_SUBJECT,
        summary_line=_SUMMARY,
    ),
    ToolManifest(
        name="fs_search",
        category="fs",
        description="Find files under a folder by name glob, optionally only those containing "
        "a text or regex, with matching line numbers. Binary and huge files are skipped.",
        params=SearchFiles,
        operations=_READ,
        impl=_read_impl("search_files"),
        subject=_SUBJECT,
        summary_line=_SUMMARY,
    ),
    ToolManifest(
        name="fs_file_info",
        category="fs",
        description="Show details of a file, folder or symbolic link: type, size, permissions, "
        "modification time, MIME type and link target.",
        params=FileInfo,
        operations=_READ,
        impl=_read_impl("file_info"),
        subject=_SUBJECT,
        summary_line=_SUMMARY,
    ),
]
