"""Creating issues and comments (CREATE: the user approves each call, seeing a preview)."""

from __future__ import annotations

from typing import Any

from tools.github.common import account_for, github, repo_path
from tools.github.manifest import Comment, CreateIssue
from tools.redact import shorten
from tools.spec import ToolContext, ToolResult

_PREVIEW_BODY = 600


def _clip(text: str) -> str:
    return shorten(text, _PREVIEW_BODY + 1)


def _label(ctx: ToolContext, ref: str | None) -> str:
    account = account_for(ctx, ref)
    return f"{account.label} ({account.get('base_url', 'api.github.com')})"


def preview_create_issue(args: CreateIssue, ctx: ToolContext) -> str:
    lines = [f"Open an issue in {args.repo} as {_label(ctx, args.account)}", f"Title: {args.title}"]
    if args.labels:
        lines.append(f"Labels: {', '.join(args.labels)}")
    if args.assignees:
        lines.append(f"Assignees: {', '.join(args.assignees)}")
    if args.body:
        lines += ["", _clip(args.body)]
    return "\n".join(lines)


def preview_comment(args: Comment, ctx: ToolContext) -> str:
    where = f"{args.repo}#{args.number}"
    return f"Comment on {where} as {_label(ctx, args.account)}:\n\n{_clip(args.body)}"


def create_issue(args: CreateIssue, ctx: ToolContext) -> ToolResult:
    body: dict[str, Any] = {"title": args.title, "body": args.body}
    if args.labels:
        body["labels"] = args.labels
    if args.assignees:
        body["assignees"] = args.assignees
    with github(ctx, args.account) as (client, account):
        issue = client.post(f"{repo_path(args.repo)}/issues", body)
    data = {"number": issue.get("number"), "url": issue.get("html_url")}
    content = f"Opened {args.repo}#{data['number']} as {account.label}: {data['url']}"
    return ToolResult(ok=True, content=content, data=data)


def comment(args: Comment, ctx: ToolContext) -> ToolResult:
    path = f"{repo_path(args.repo)}/issues/{args.number}/comments"
    with github(ctx, args.account) as (client, account):
        made = client.post(path, {"body": args.body})
    data = {"id": made.get("id"), "url": made.get("html_url")}
    content = f"Commented on {args.repo}#{args.number} as {account.label}: {data['url']}"
    return ToolResult(ok=True, content=content, data=data)
