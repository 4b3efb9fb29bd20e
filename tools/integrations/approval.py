"""Approval hooks of the account tools, and the small helpers every integration tool's
`summary_line` / `subject` hooks share: which account a call acts as, named from the local
account list (never its secrets, never a server), and user-controlled text quoted and cut.

Hooks run before the user is asked: they must not change anything, contact a server or
read a secret. Cheap to import (no SDK).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from integrations import registry as integration_registry
from tools.spec import Subject, ToolContext
from tools.summary_text import QUOTE_LIMIT, clean, quoted

__all__ = ["QUOTE_LIMIT", "CallAccount", "call_account", "clean", "quoted"]

def title_of(integration: str) -> str:
    """The integration's name as Settings shows it ("GitHub", "Kubernetes")."""
    spec = integration_registry.spec(integration)
    return spec.title if spec is not None else integration


@dataclass(frozen=True)
class CallAccount:
    """The account a call acts as, as far as the local account list tells."""

    integration: str
    #: The account's label when it was found; None when it cannot be told.
    label: str | None
    #: The name the call's arguments gave (None: the active account).
    named: str | None = None

    @property
    def title(self) -> str:
        return title_of(self.integration)

    @property
    def name(self) -> str | None:
        """"GitHub · work": how rules and the approval card name the account."""
        return f"{self.title} · {self.label}" if self.label is not None else None

    def words(self) -> str:
        """The account in a sentence: its label, or what is known of it."""
        if self.label is not None:
            return self.label
        if self.named:
            return f"{quoted(self.named, 40)} (no such {self.title} account)"
        return f"the active {self.title} account"

    def subject(self, target: str | None = None) -> Subject:
        name = self.name
        return Subject(account=name, target=target or name)


def call_account(ctx: ToolContext, integration: str, named: str | None) -> CallAccount:
    """Which account a call with `account=named` acts as, looked up as `ctx.account` would
    (by id or label, else the active one) in the account list, without reading secrets."""
    directory = ctx.accounts
    if directory is None:
        return CallAccount(integration, None, named)
    try:
        account = directory.find(integration, named) if named else directory.active(integration)
    except LookupError:
        account = None
    return CallAccount(integration, account.label if account is not None else None, named)


# ------------------------------------------------------------------ the account tools


def _switch(args: Any, ctx: ToolContext) -> tuple[CallAccount, str | None]:
    """The account a switch would make active, and the label of the one active now."""
    target = call_account(ctx, args.integration, args.account)
    current: str | None = None
    if ctx.accounts is not None and integration_registry.spec(args.integration) is not None:
        try:
            active = ctx.accounts.active(args.integration)
        except LookupError:
            active = None
        current = active.label if active is not None else None
    return target, current


def summary_set_active(args: Any, ctx: ToolContext) -> str:
    if integration_registry.spec(args.integration) is None:
        return (
            f"Switch the account of {quoted(args.integration, 40)} (not a service Deskhand "
            f"knows) to {quoted(args.account, 40)}"
        )
    target, current = _switch(args, ctx)
    if target.label is None:
        return f"Switch {target.title} to the account {target.words()}"
    if current == target.label:
        return f"Keep {target.title} on the account {target.label} (already active)"
    was = f", away from {current}" if current is not None else ""
    return f"Switch {target.title} to the account {target.label}{was}"


def subject_set_active(args: Any, ctx: ToolContext) -> Subject:
    if integration_registry.spec(args.integration) is None:
        return Subject()
    return call_account(ctx, args.integration, args.account).subject()
