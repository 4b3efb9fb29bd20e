"""Repositories and files."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote

from tools.github.common import first_line, github, more_note, repo_path
from tools.github.manifest import ListRepos, ReadFile
from tools.spec import ToolContext, ToolError, ToolResult


def _repo_row(repo: dict[str, Any]) -> dict[str, Any]:
    return {
        "full_name": repo.get("full_name"),
        "private": bool(repo.get("private")),
        "description": repo.get("description") or "",
        "default_branch": repo.get("default_branch"),
        "stars": repo.get("stargazers_count", 0),
        "open_issues": repo.get("open_issues_count", 0),
        "updated_at": repo.get("updated_at"),
        "url": repo.get("html_url"),
    }


def list_repos(args: ListRepos, ctx: ToolContext) -> ToolResult:
    path = f"/users/{args.owner}/repos" if args.owner else "/user/repos"
    with github(ctx, args.account) as (client, account):
        repos, more = client.paginate(path, {"sort": args.sort}, limit=args.limit)
    rows = [_repo_row(r) for r in repos]
    if not rows:
        return ToolResult(ok=True, content=f"No repositories ({account.label}).", data=[])
    lines = [
        f"- {r['full_name']}{' (private)' if r['private'] else ''} ★{r['stars']} "
        f"updated {r['updated_at']}: {first_line(r['description'], 80)}"
        for r in rows
    ]
    header = f"{len(rows)} repositories ({account.label}):"
    content = "\n".join([header, *lines]) + more_note(more, len(rows))
    return ToolResult(ok=True, content=content, data=rows)


def read_file(args: ReadFile, ctx: ToolContext) -> ToolResult:
    path = f"{repo_path(args.repo)}/contents/{quote(args.path.strip('/'), safe='/')}"
    params = {"ref": args.ref} if args.ref else None
    with github(ctx, args.account) as (client, _):
        item = client.get(path, params)
    if isinstance(item, list):
        entries = [
            {"name": e.get("name"), "type": e.get("type"), "size": e.get("size")} for e in item
        ]
        lines = [f"- {e['name']}{'/' if e['type'] == 'dir' else ''}" for e in entries]
        content = f"{args.path} is a folder with {len(entries)} entries:\n" + "\n".join(lines)
        return ToolResult(ok=True, content=content, data={"entries": entries})
    if item.get("type") != "file":
        raise ToolError(f"{args.path} is a {item.get('type', 'thing')}, not a file")
    size = int(item.get("size") or 0)
    if item.get("encoding") != "base64" or (size and not item.get("content")):
        raise ToolError(f"{args.path} is too large ({size} bytes) for the contents API")
    raw = base64.b64decode(item.get("content") or "")
    truncated = len(raw) > args.max_bytes
    raw = raw[: args.max_bytes]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        if not truncated:
            raise ToolError(f"{args.path} is a binary file ({size} bytes)") from None
        text = raw.decode("utf-8", errors="ignore")  # cut inside a multi-byte character
    data = {"path": item.get("path"), "sha": item.get("sha"), "size": size, "truncated": truncated}
    note = f"\n[truncated: showing {args.max_bytes} of {size} bytes]" if truncated else ""
    return ToolResult(ok=True, content=text + note, data=data, truncated=truncated)
