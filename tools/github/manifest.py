"""GitHub tools: cheap declarations. Implementations load httpx on first call."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tools.spec import Operation, ToolManifest

_ACCOUNT_HELP = "Label or id of the GitHub account to use (default: the active one)"
_REPO_HELP = "Repository as owner/name, e.g. 'octocat/Hello-World'"
_ACCOUNT_NOTE = "Acts as the active GitHub account unless `account` names another."

Kind = Literal["all", "issues", "pull_requests"]
State = Literal["open", "closed", "all"]


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    account: str | None = Field(None, description=_ACCOUNT_HELP)


class _RepoParams(_Params):
    repo: str = Field(..., pattern=r"^[\w.-]+/[\w.-]+$", description=_REPO_HELP)


class ListRepos(_Params):
    owner: str | None = Field(
        None, description="A user or organization; omit for the account's own repositories"
    )
    sort: Literal["updated", "created", "pushed", "full_name"] = Field(
        "updated", description="Order of the list"
    )
    limit: int = Field(30, ge=1, le=500, description="Show at most this many repositories")


class ListIssues(_RepoParams):
    state: State = Field("open", description="Issue state")
    labels: list[str] = Field(
        default_factory=list, description="Only items with all of these labels"
    )
    kind: Kind = Field("all", description="Issues, pull requests, or both")
    assignee: str | None = Field(None, description="Only items assigned to this login")
    limit: int = Field(30, ge=1, le=500, description="Show at most this many items")


class SearchIssues(_Params):
    query: str = Field(
        ...,
        min_length=1,
        description="GitHub search syntax, e.g. 'memory leak label:bug author:octocat'",
    )
    repo: str | None = Field(None, description=f"Only in this repository ({_REPO_HELP})")
    kind: Kind = Field("all", description="Issues, pull requests, or both")
    state: State = Field("all", description="Issue state")
    limit: int = Field(30, ge=1, le=300, description="Show at most this many results")


class GetIssue(_RepoParams):
    number: int = Field(..., ge=1, description="Issue or pull request number")
    comments: int = Field(30, ge=0, le=300, description="Include at most this many comments")


class CreateIssue(_RepoParams):
    title: str = Field(..., min_length=1, max_length=256, description="Issue title")
    body: str = Field("", description="Issue text (Markdown)")
    labels: list[str] = Field(default_factory=list, description="Labels to set")
    assignees: list[str] = Field(default_factory=list, description="Logins to assign")


class Comment(_RepoParams):
    number: int = Field(..., ge=1, description="Issue or pull request number")
    body: str = Field(..., min_length=1, description="Comment text (Markdown)")


class ReadFile(_RepoParams):
    path: str = Field(
        ..., min_length=1, description="File path in the repository, e.g. 'README.md'"
    )
    ref: str | None = Field(None, description="Branch, tag or commit (default branch if omitted)")
    max_bytes: int = Field(
        100_000, ge=1, le=1_000_000, description="Return at most this many bytes of the file"
    )


def _impl(module: str, name: str) -> str:
    return f"tools.github.{module}:{name}"


def _approval(name: str) -> str:
    return f"tools.github.approval:{name}"


def _tool(
    name: str,
    description: str,
    params: type[BaseModel],
    impl: str,
    *,
    create: bool = False,
    preview: str | None = None,
) -> ToolManifest:
    short = name.removeprefix("github_")
    return ToolManifest(
        name=name,
        category="github",
        description=f"{description} {_ACCOUNT_NOTE}",
        params=params,
        operations=frozenset({Operation.CREATE if create else Operation.READ}),
        impl=impl,
        preview=preview,
        subject=_approval("subject") if create else None,
        summary_line=_approval(f"summary_{short}") if create else None,
        requires=("httpx",),
        integration="github",
    )


MANIFESTS: list[ToolManifest] = [
    _tool(
        "github_list_repos",
        "List GitHub repositories (the account's own, or a user's or organization's).",
        ListRepos,
        _impl("repos", "list_repos"),
    ),
    _tool(
        "github_list_issues",
        "List issues and pull requests of a GitHub repository, filtered by state and labels.",
        ListIssues,
        _impl("issues", "list_issues"),
    ),
    _tool(
        "github_search_issues",
        "Search GitHub issues and pull requests with GitHub's search syntax.",
        SearchIssues,
        _impl("issues", "search_issues"),
    ),
    _tool(
        "github_get_issue",
        "Read one GitHub issue or pull request with its description and comments.",
        GetIssue,
        _impl("issues", "get_issue"),
    ),
    _tool(
        "github_create_issue",
        "Open a new issue in a GitHub repository.",
        CreateIssue,
        _impl("write", "create_issue"),
        create=True,
        preview=_impl("write", "preview_create_issue"),
    ),
    _tool(
        "github_comment",
        "Add a comment to a GitHub issue or pull request.",
        Comment,
        _impl("write", "comment"),
        create=True,
        preview=_impl("write", "preview_comment"),
    ),
    _tool(
        "github_read_file",
        "Read a file (or list a folder) in a GitHub repository at a branch, tag or commit.",
        ReadFile,
        _impl("repos", "read_file"),
    ),
]
