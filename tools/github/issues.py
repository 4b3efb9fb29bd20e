"""Listing, searching and reading issues and pull requests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tools.github.common import github, more_note, repo_path
from tools.github.manifest import GetIssue, Kind, ListIssues, SearchIssues
from tools.spec import ToolContext, ToolResult


def is_pull(item: dict[str, Any]) -> bool:
    return "pull_request" in item


def _wanted(kind: Kind) -> Callable[[dict[str, Any]], bool] | None:
    if kind == "issues":
        return lambda item: not is_pull(item)
    if kind == "pull_requests":
        return is_pull
    return None


def issue_row(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "number": item.get("number"),
        "kind": "pull_request" if is_pull(item) else "issue",
        "title": item.get("title"),
        "state": item.get("state"),
        "author": (item.get("user") or {}).get("login"),
        "labels": [label.get("name") for label in item.get("labels") or []],
        "comments": item.get("comments", 0),
        "updated_at": item.get("updated_at"),
        "url": item.get("html_url"),
    }


def _line(row: dict[str, Any], repo: str | None = None) -> str:
    where = f"{repo}" if repo else ""
    kind = "PR " if row["kind"] == "pull_request" else ""
    labels = f" [{', '.join(row['labels'])}]" if row["labels"] else ""
    return (
        f"- {kind}{where}#{row['number']} ({row['state']}) {row['title']}{labels} "
        f"— {row['author']}, {row['comments']} comments, updated {row['updated_at']}"
    )


def list_issues(args: ListIssues, ctx: ToolContext) -> ToolResult:
    params: dict[str, Any] = {"state": args.state}
    if args.labels:
        params["labels"] = ",".join(args.labels)
    if args.assignee:
        params["assignee"] = args.assignee
    with github(ctx, args.account) as (client, account):
        items, more = client.paginate(
            f"{repo_path(args.repo)}/issues", params, limit=args.limit, keep=_wanted(args.kind)
        )
    rows = [issue_row(i) for i in items]
    what = {"all": "issues and pull requests", "issues": "issues", "pull_requests": "PRs"}
    if not rows:
        content = f"No {args.state} {what[args.kind]} in {args.repo} ({account.label})."
        return ToolResult(ok=True, content=content, data=[])
    header = f"{len(rows)} {args.state} {what[args.kind]} in {args.repo} ({account.label}):"
    content = "\n".join([header, *(_line(r) for r in rows)]) + more_note(more, len(rows))
    return ToolResult(ok=True, content=content, data=rows)


def search_issues(args: SearchIssues, ctx: ToolContext) -> ToolResult:
    terms = [args.query]
    if args.repo:
        terms.append(f"repo:{args.repo}")
    if args.kind != "all":
        terms.append("is:issue" if args.kind == "issues" else "is:pr")
    if args.state != "all":
        terms.append(f"state:{args.state}")
    query = " ".join(terms)
    with github(ctx, args.account) as (client, account):
        items, more = client.paginate("/search/issues", {"q": query}, limit=args.limit)
    rows = []
    for item in items:
        row = issue_row(item)
        url = str(item.get("repository_url") or "")
        row["repo"] = "/".join(url.rstrip("/").split("/")[-2:]) if url else None
        rows.append(row)
    if not rows:
        return ToolResult(ok=True, content=f"Nothing matches {query!r} ({account.label}).", data=[])
    header = f"{len(rows)} results for {query!r} ({account.label}):"
    lines = [_line(r, r["repo"]) for r in rows]
    content = "\n".join([header, *lines]) + more_note(more, len(rows))
    return ToolResult(ok=True, content=content, data=rows)


def get_issue(args: GetIssue, ctx: ToolContext) -> ToolResult:
    base = f"{repo_path(args.repo)}/issues/{args.number}"
    with github(ctx, args.account) as (client, _):
        item = client.get(base)
        comments: list[Any] = []
        more = False
        if args.comments and item.get("comments"):
            comments, more = client.paginate(f"{base}/comments", limit=args.comments)
        pull = client.get(f"{repo_path(args.repo)}/pulls/{args.number}") if is_pull(item) else None
    row = issue_row(item)
    row["body"] = item.get("body") or ""
    row["comments"] = [
        {
            "author": (c.get("user") or {}).get("login"),
            "created_at": c.get("created_at"),
            "body": c.get("body") or "",
        }
        for c in comments
    ]
    lines = [f"{args.repo}#{args.number}: {row['title']}", f"State: {row['state']}"]
    if pull is not None:
        row["pull"] = {
            "head": (pull.get("head") or {}).get("ref"),
            "base": (pull.get("base") or {}).get("ref"),
            "merged": bool(pull.get("merged")),
            "draft": bool(pull.get("draft")),
        }
        p = row["pull"]
        merged = "merged" if p["merged"] else ("draft" if p["draft"] else "not merged")
        lines.append(f"Pull request: {p['head']} → {p['base']} ({merged})")
    labels = ", ".join(row["labels"]) or "none"
    lines += [
        f"Author: {row['author']}",
        f"Labels: {labels}",
        "",
        row["body"] or "(no description)",
    ]
    for c in row["comments"]:
        lines += ["", f"--- {c['author']} at {c['created_at']}:", c["body"]]
    content = "\n".join(lines) + more_note(more, len(comments))
    return ToolResult(ok=True, content=content, data=row)
