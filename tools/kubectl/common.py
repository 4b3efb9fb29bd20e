"""Helpers the kubectl tool bodies share: namespaces, object lookups with suggestions, pods of
workloads, label selectors and results that name their context."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from tools.kubectl.cluster import Cluster
from tools.kubectl.discovery import ResourceType, resolve
from tools.kubectl.errors import Attempt
from tools.kubectl.tables import pod_status
from tools.spec import ToolError, ToolResult

#: Most characters a result carries (the runner caps again; this keeps tails intact).
MAX_TEXT = 28_000


def namespace_of(cluster: Cluster, rtype: ResourceType, namespace: str | None) -> str | None:
    """The namespace a request uses: None for cluster-scoped types."""
    if not rtype.namespaced:
        return None
    return namespace or cluster.namespace


def header(cluster: Cluster, namespace: str | None = None) -> str:
    where = f", namespace {namespace}" if namespace else ""
    return f"[context {cluster.context}{where}]"


def result(
    cluster: Cluster, text: str, data: dict[str, Any], namespace: str | None = None
) -> ToolResult:
    data = {"context": cluster.context, **data}
    if namespace and "namespace" not in data:
        data["namespace"] = namespace
    return ToolResult(ok=True, content=f"{header(cluster, namespace)}\n{text}", data=data)


def keep_tail(text: str, limit: int = MAX_TEXT) -> str:
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    cut = cut[cut.find("\n") + 1 :] if "\n" in cut else cut
    return f"[earlier output cut: showing the last {len(cut):,} of {len(text):,} characters]\n{cut}"


def name_suggestions(
    cluster: Cluster, rtype: ResourceType, namespace: str | None, name: str
) -> Callable[[], str]:
    """A callable for Cluster.request(suggest=…): close names of the same type."""

    def suggest() -> str:
        try:
            listing = cluster.get(
                rtype.path(namespace),
                Attempt("list", rtype.qualified, namespace),
                query={"limit": 500},
            )
        except ToolError:
            return ""
        names = [str((i.get("metadata") or {}).get("name", "")) for i in listing.get("items", [])]
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        if close:
            return f". Did you mean {', '.join(close)}?"
        if names:
            shown = ", ".join(sorted(names)[:10])
            return f". Existing {rtype.plural}: {shown}{' …' if len(names) > 10 else ''}"
        return f". There are no {rtype.plural} there"

    return suggest


def get_object(
    cluster: Cluster, rtype: ResourceType, namespace: str | None, name: str, sub: str = ""
) -> dict[str, Any]:
    resource = f"{rtype.qualified}/{sub}" if sub else rtype.qualified
    found: dict[str, Any] = cluster.get(
        rtype.path(namespace, name, sub),
        Attempt("get", resource, namespace, name),
        suggest=name_suggestions(cluster, rtype, namespace, name),
    )
    return found


def selector_text(selector: dict[str, Any]) -> str:
    """A LabelSelector object as the query-string syntax."""
    parts = [f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def find_pod(cluster: Cluster, ref: str, namespace: str | None) -> tuple[str, dict[str, Any]]:
    """`web-7d9f` or `deployment/web` → (namespace, pod). A workload picks its healthiest pod."""
    kind, _, name = ref.rpartition("/")
    pods = resolve(cluster, "pods")
    ns = namespace or cluster.namespace
    if not kind or pods.names() & {kind.lower()}:
        return ns, get_object(cluster, pods, ns, name)
    rtype = resolve(cluster, kind)
    owner = get_object(cluster, rtype, namespace_of(cluster, rtype, ns), name)
    selector = (owner.get("spec") or {}).get("selector") or {}
    text = selector_text(selector) if isinstance(selector, dict) else ""
    if not text:
        raise ToolError(f"{rtype.qualified}/{name} has no pod selector; name a pod instead")
    listing = cluster.get(pods.path(ns), Attempt("list", "pods", ns), query={"labelSelector": text})
    items = listing.get("items") or []
    if not items:
        raise ToolError(f"{rtype.qualified}/{name} has no pods in namespace {ns}")
    items.sort(key=lambda p: (pod_status(p) != "Running", p["metadata"]["name"]))
    return ns, items[0]
