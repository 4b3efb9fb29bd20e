"""Approval hooks of the GitHub tools that write: the account a call acts as (`subject`) and
one plain line saying what it will do (`summary_line`).

No network, no secrets: the account is named from the local account list.
"""

from __future__ import annotations

from typing import Any

from tools.integrations.approval import call_account, quoted
from tools.spec import Subject, ToolContext


def subject(args: Any, ctx: ToolContext) -> Subject:
    return call_account(ctx, "github", args.account).subject()


def summary_create_issue(args: Any, ctx: ToolContext) -> str:
    who = call_account(ctx, "github", args.account).words()
    line = f"Open an issue {quoted(args.title)} in {args.repo} as {who}"
    if args.assignees:
        line += f", assigned to {quoted(', '.join(args.assignees), 40)}"
    return line


def summary_comment(args: Any, ctx: ToolContext) -> str:
    who = call_account(ctx, "github", args.account).words()
    return f"Comment on {args.repo}#{args.number} as {who}: {quoted(args.body)}"
