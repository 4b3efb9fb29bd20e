"""Tools the model uses to see and switch the accounts of connected services."""

from __future__ import annotations

from pydantic import BaseModel, Field

from tools.spec import DeferredParams, Operation, ToolManifest

IMPL = "tools.integrations.accounts"
APPROVAL = "tools.integrations.approval"


class NoArgs(DeferredParams):
    pass


class IntegrationRef(DeferredParams):
    integration: str = Field(..., description="Integration id, e.g. 'docker' or 'kubernetes'")


class AccountRef(IntegrationRef):
    account: str = Field(..., description="Account id, label or (Kubernetes) context name")


def _tool(
    name: str,
    description: str,
    params: type[BaseModel],
    op: Operation,
    *,
    approval: str | None = None,
) -> ToolManifest:
    """`approval`: the suffix of the call's approval hooks (subject_…, summary_…)."""
    return ToolManifest(
        name=name,
        category="integrations",
        description=description,
        params=params,
        operations=frozenset({op}),
        impl=f"{IMPL}:{name}",
        timeout=20,
        subject=f"{APPROVAL}:subject_{approval}" if approval else None,
        summary_line=f"{APPROVAL}:summary_{approval}" if approval else None,
    )


MANIFESTS = [
    _tool(
        "integration_list",
        "List the services Deskhand can connect to, with how many accounts each has.",
        NoArgs,
        Operation.READ,
    ),
    _tool(
        "integration_is_enabled",
        "Tell whether a service has an account to act with, and which one is active.",
        IntegrationRef,
        Operation.READ,
    ),
    _tool(
        "list_integration_accounts",
        "List a service's accounts (Docker hosts, Kubernetes contexts), marking the active one.",
        IntegrationRef,
        Operation.READ,
    ),
    _tool(
        "set_active_integration_account",
        "Switch which account of a service the tools act on (e.g. another kube context).",
        AccountRef,
        Operation.UPDATE,
        approval="set_active",
    ),
    _tool(
        "integration_get_credentials",
        "Show an account's settings with every secret masked (secrets are never revealed).",
        AccountRef,
        Operation.READ,
    ),
]
