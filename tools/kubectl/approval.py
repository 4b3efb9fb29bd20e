"""Approval hooks of the kubectl tools: the cluster (context) and namespace a call acts on
(`subject`) and one plain line saying what it will do (`summary_line`).

Cheap and side-effect free: no kubernetes package and no request to the cluster; only the
arguments and the kubeconfig. Whether a kind is namespaced is guessed from the well-known
cluster-scoped kinds (the call itself asks the API server).
"""

from __future__ import annotations

import shlex
from typing import Any

from tools.kubectl.cluster import _context_namespace, select_account
from tools.redact import TRIPWIRE
from tools.spec import Subject, ToolContext, ToolError

_MAX_COMMAND = 80
_CLUSTER_SCOPED = {
    "namespace", "namespaces", "ns", "node", "nodes", "no", "persistentvolume",
    "persistentvolumes", "pv", "clusterrole", "clusterroles", "clusterrolebinding",
    "clusterrolebindings", "storageclass", "storageclasses", "sc",
    "customresourcedefinition", "customresourcedefinitions", "crd", "crds", "priorityclass",
    "priorityclasses", "pc", "ingressclass", "ingressclasses", "runtimeclass",
    "runtimeclasses", "mutatingwebhookconfiguration", "mutatingwebhookconfigurations",
    "validatingwebhookconfiguration", "validatingwebhookconfigurations", "apiservice",
    "apiservices", "csidriver", "csidrivers", "csinode", "csinodes", "volumeattachment",
    "volumeattachments",
}  # fmt: skip


def _where(args: Any, ctx: ToolContext) -> tuple[str, str]:
    """(context, namespace) the call will use, as the tool itself resolves them."""
    try:
        account = select_account(ctx, args.context)
    except ToolError:
        return args.context or "?", args.namespace or "default"
    context = account.fields.get("context") or account.label
    if args.namespace:
        return context, args.namespace
    try:
        return context, _context_namespace(account)
    except Exception:  # an unreadable kubeconfig fails the call itself, with its reason
        return context, "default"


def _cluster_scoped(kind: str) -> bool:
    return kind.lower().split(".", 1)[0] in _CLUSTER_SCOPED


def subject(args: Any, ctx: ToolContext) -> Subject:
    context, namespace = _where(args, ctx)
    account = f"Kubernetes · {context}"
    kind = getattr(args, "kind", None)
    if kind is not None and _cluster_scoped(kind):
        return Subject(account=account, target=account)
    return Subject(account=account, target=f"{account} · namespace {namespace}")


def _in(args: Any, ctx: ToolContext, kind: str | None = None) -> str:
    context, namespace = _where(args, ctx)
    if kind is not None and _cluster_scoped(kind):
        return f"on {context}"
    return f"in {context}/{namespace}"


def _kind(kind: str) -> str:
    return kind.split(".", 1)[0]


def summary_apply(args: Any, ctx: ToolContext) -> str:
    import yaml  # only when an approval is shown

    try:
        docs = [d for d in yaml.safe_load_all(args.manifest) if isinstance(d, dict)]
    except yaml.YAMLError:
        docs = []
    names = [
        f"{d.get('kind', '?')} {(d.get('metadata') or {}).get('name', '?')}" for d in docs[:3]
    ]
    more = f" and {len(docs) - 3} more" if len(docs) > 3 else ""
    what = ", ".join(names) + more if names else "the given manifest"
    verb = "Check (dry run) applying" if args.dry_run else "Create or update"
    context, namespace = _where(args, ctx)
    spaces = {str((d.get("metadata") or {}).get("namespace") or namespace) for d in docs}
    if len(spaces) > 1:
        return f"{verb} {what} on {context} (namespaces {', '.join(sorted(spaces))})"
    return f"{verb} {what} in {context}/{spaces.pop() if spaces else namespace}"


def summary_delete(args: Any, ctx: ToolContext) -> str:
    return f"Delete {_kind(args.kind)} {args.name} {_in(args, ctx, args.kind)}"


def summary_scale(args: Any, ctx: ToolContext) -> str:
    noun = "replica" if args.replicas == 1 else "replicas"
    return (
        f"Scale {_kind(args.kind)} {args.name} to {args.replicas} {noun} "
        f"{_in(args, ctx, args.kind)}"
    )


def summary_rollout_restart(args: Any, ctx: ToolContext) -> str:
    return f"Restart the pods of {args.kind} {args.name} {_in(args, ctx)}"


def summary_exec(args: Any, ctx: ToolContext) -> str:
    command = shlex.join(TRIPWIRE.command(args.command))
    if len(command) > _MAX_COMMAND:
        command = command[: _MAX_COMMAND - 1] + "…"
    container = f" (container {args.container})" if args.container else ""
    return f"Run `{command}` in pod {args.pod}{container} {_in(args, ctx)}"
