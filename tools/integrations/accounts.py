"""Implementations of the account tools, on the account directory handed in `ctx.accounts`."""

from __future__ import annotations

from typing import Any

from tools.integrations.manifest import AccountRef, IntegrationRef, NoArgs
from tools.spec import ToolContext, ToolError, ToolResult


def _directory(ctx: ToolContext) -> Any:
    if ctx.accounts is None:
        raise ToolError("accounts are not available here")
    return ctx.accounts


def _call(fn: Any, *args: Any) -> Any:
    """Account lookups fail with LookupError (unknown integration or account)."""
    try:
        return fn(*args)
    except LookupError as exc:
        raise ToolError(str(exc).strip("'\"")) from None


def integration_list(args: NoArgs, ctx: ToolContext) -> ToolResult:
    directory = _directory(ctx)
    rows = []
    for spec in directory.integrations():
        accounts = _call(directory.list, spec.id)
        rows.append(
            {
                "id": spec.id,
                "title": spec.title,
                "description": spec.description,
                "accounts": len(accounts),
            }
        )
    lines = [f"- {r['id']}: {r['title']} — {r['accounts']} account(s)" for r in rows]
    return ToolResult(ok=True, content="\n".join(lines), data={"integrations": rows})


def integration_is_enabled(args: IntegrationRef, ctx: ToolContext) -> ToolResult:
    active = _call(_directory(ctx).active, args.integration)
    if active is None:
        return ToolResult(
            ok=True, content=f"{args.integration}: no account set up", data={"enabled": False}
        )
    return ToolResult(
        ok=True,
        content=f"{args.integration}: active account {active.label}",
        data={"enabled": True, "active": active.public()},
    )


def list_integration_accounts(args: IntegrationRef, ctx: ToolContext) -> ToolResult:
    directory = _directory(ctx)
    accounts = _call(directory.list, args.integration)
    active = _call(directory.active, args.integration)
    rows = []
    for account in accounts:
        row = account.public()
        row["active"] = active is not None and account.id == active.id
        rows.append(row)
    if not rows:
        return ToolResult(
            ok=True, content=f"{args.integration}: no accounts", data={"accounts": []}
        )
    lines = [f"{'*' if r['active'] else ' '} {r['label']} [{r['id']}]" for r in rows]
    return ToolResult(ok=True, content="\n".join(lines), data={"accounts": rows})


def set_active_integration_account(args: AccountRef, ctx: ToolContext) -> ToolResult:
    account = _call(_directory(ctx).set_active, args.integration, args.account)
    return ToolResult(
        ok=True,
        content=f"{args.integration}: now using {account.label}",
        data={"active": account.public()},
    )


def integration_get_credentials(args: AccountRef, ctx: ToolContext) -> ToolResult:
    directory = _directory(ctx)
    account = _call(directory.find, args.integration, args.account)
    if hasattr(directory, "with_secrets"):
        account = directory.with_secrets(account)
    shown = account.public()
    lines = [f"{k}: {v}" for k, v in {**shown["fields"], **shown["secrets"]}.items()]
    return ToolResult(ok=True, content=f"{account.label}\n" + "\n".join(lines), data=shown)
