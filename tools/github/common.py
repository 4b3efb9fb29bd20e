"""The account a GitHub tool acts as, its client, and error translation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from integrations.github import GitHubClient, GitHubError
from integrations.spec import Account
from tools.spec import ToolContext, ToolError


def account_for(ctx: ToolContext, ref: str | None) -> Account:
    """The account named by `ref` (label or id), or the active GitHub account; secrets in."""
    return ctx.account("github", named=ref)


@contextmanager
def github(ctx: ToolContext, ref: str | None) -> Iterator[tuple[GitHubClient, Account]]:
    """A client for the chosen account; GitHub failures become ToolErrors."""
    account = account_for(ctx, ref)
    try:
        with GitHubClient.for_account(account) as client:
            yield client, account
    except GitHubError as exc:
        raise ToolError(str(exc)) from None


def repo_path(repo: str) -> str:
    owner, _, name = repo.partition("/")
    return f"/repos/{owner}/{name}"


def first_line(text: str | None, width: int = 100) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def more_note(more: bool, shown: int) -> str:
    return (
        f"\n(showing the first {shown}; more exist — raise limit or narrow the query)"
        if more
        else ""
    )
