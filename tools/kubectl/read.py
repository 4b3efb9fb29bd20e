"""Read-only kubectl tools: contexts, get, describe, logs, events, top."""

from __future__ import annotations

import json
from typing import Any, TypedDict

import yaml

from integrations.kubernetes import discover
from tools.kubectl import tables
from tools.kubectl.cluster import Cluster, active_account, connect
from tools.kubectl.common import (
    MAX_TEXT,
    find_pod,
    get_object,
    keep_tail,
    namespace_of,
    result,
)
from tools.kubectl.discovery import index, resolve
from tools.kubectl.errors import ApiStatusError, Attempt
from tools.kubectl.manifest import Contexts, Describe, Events, Get, Logs, Top
from tools.redact import TRIPWIRE
from tools.spec import ToolContext, ToolError, ToolResult

# ---- contexts -------------------------------------------------------------------------------


class _ContextRow(TypedDict):
    context: str
    active: bool
    namespace: str
    label: str


def contexts(args: Contexts, ctx: ToolContext) -> ToolResult:
    active = active_account(ctx)
    accounts = discover(active.fields.get("kubeconfig", ""))
    if ctx.accounts is not None:
        try:
            extra = [a for a in ctx.accounts.list("kubernetes") if not a.discovered]
        except LookupError:
            extra = []
        accounts += extra
    active_name = active.fields.get("context", "")
    rows: list[_ContextRow] = [
        {
            "context": a.fields.get("context", ""),
            "active": a.fields.get("context") == active_name,
            "namespace": a.fields.get("namespace") or "default",
            "label": a.label,
        }
        for a in accounts
    ]
    lines = [
        f"{'*' if r['active'] else ' '} {r['context']}  namespace {r['namespace']}"
        + (
            f"  {r['label'].removeprefix(r['context']).strip()}"
            if r["label"] != r["context"]
            else ""
        )
        for r in rows
    ]
    text = "Kubeconfig contexts (* = active):\n" + ("\n".join(lines) or "  (none)")
    data: dict[str, Any] = {"context": active_name, "contexts": rows}
    if args.check:
        cluster = connect(ctx, args.context)
        version = cluster.get("/version", Attempt("get", "version"))
        data["checked"] = {
            "context": cluster.context,
            "server": cluster.server,
            "version": version.get("gitVersion", ""),
        }
        text += (
            f"\n\nContext {cluster.context} answers at {cluster.server}: "
            f"Kubernetes {version.get('gitVersion', '?')}"
        )
    return ToolResult(ok=True, content=text, data=data)


# ---- get ------------------------------------------------------------------------------------


def _dump(objects: list[dict[str, Any]], output: str) -> str:
    if output == "json":
        value: Any = objects[0] if len(objects) == 1 else objects
        return json.dumps(value, indent=2, ensure_ascii=False)
    return "\n---\n".join(
        yaml.safe_dump(o, sort_keys=False, allow_unicode=True).rstrip() for o in objects
    )


def get(args: Get, ctx: ToolContext) -> ToolResult:
    cluster = connect(ctx, args.context)
    rtype = resolve(cluster, args.kind)
    if args.name and args.all_namespaces and rtype.namespaced:
        raise ToolError("to get one object by name, give its namespace (not all_namespaces)")
    ns = None if args.all_namespaces else namespace_of(cluster, rtype, args.namespace)
    if args.name:
        items = [get_object(cluster, rtype, ns, args.name)]
        remaining = 0
    else:
        listing = cluster.get(
            rtype.path(ns),
            Attempt("list", rtype.qualified, ns),
            query={
                "labelSelector": args.label_selector,
                "fieldSelector": args.field_selector,
                "limit": args.limit,
            },
        )
        items = listing.get("items") or []
        remaining = int((listing.get("metadata") or {}).get("remainingItemCount") or 0)
        if (listing.get("metadata") or {}).get("continue") and not remaining:
            remaining = -1
    kind = rtype.kind
    for item in items:  # list items carry no kind/apiVersion; full output should
        item.setdefault("apiVersion", rtype.group_version)
        item.setdefault("kind", kind)
    data: dict[str, Any] = {"kind": kind, "resource": rtype.qualified, "namespace": ns}
    if args.output != "table":
        objects = [TRIPWIRE.shaped_data(tables.clean(o)) for o in items]
        data["objects"] = objects
        return result(cluster, keep_tail(_dump(objects, args.output)), data, ns)
    with_ns = rtype.namespaced and ns is None
    table = TRIPWIRE.shaped_data(tables.rows(kind, items, with_namespace=with_ns))
    data["items"] = table
    where = f"in namespace {ns}" if ns else ("in all namespaces" if rtype.namespaced else "")
    if not items:
        return result(cluster, f"No {rtype.qualified} found {where}".rstrip() + ".", data, ns)
    text = tables.render(table)
    if remaining:
        more = f"{remaining} more" if remaining > 0 else "more"
        text += f"\n[{more} not shown: raise limit or narrow with a selector]"
    return result(cluster, text, data, ns)


# ---- describe -------------------------------------------------------------------------------


def _object_events(
    cluster: Cluster, kind: str, name: str, namespace: str | None, limit: int = 20
) -> list[dict[str, Any]]:
    selector = f"involvedObject.name={name},involvedObject.kind={kind}"
    if namespace:
        selector += f",involvedObject.namespace={namespace}"
    path = f"/api/v1/namespaces/{namespace}/events" if namespace else "/api/v1/events"
    try:
        listing = cluster.get(
            path, Attempt("list", "events", namespace), query={"fieldSelector": selector}
        )
    except ToolError:
        return []  # events are extra; the object itself was readable
    return sort_events(listing.get("items") or [])[:limit]


def sort_events(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Warnings first, then newest first."""
    items = sorted(items, key=tables.event_time, reverse=True)
    return sorted(items, key=lambda e: e.get("type") != "Warning")


def describe(args: Describe, ctx: ToolContext) -> ToolResult:
    cluster = connect(ctx, args.context)
    rtype = resolve(cluster, args.kind)
    ns = namespace_of(cluster, rtype, args.namespace)
    obj = get_object(cluster, rtype, ns, args.name)
    obj.setdefault("apiVersion", rtype.group_version)
    obj.setdefault("kind", rtype.kind)  # before cleaning: a Secret's values must be known as such
    obj = TRIPWIRE.shaped_data(tables.clean(obj))
    body = yaml.safe_dump(obj, sort_keys=False, allow_unicode=True).rstrip()
    events = [] if rtype.kind == "Event" else _object_events(cluster, rtype.kind, args.name, ns)
    events = TRIPWIRE.shaped_data(events)
    event_text = tables.render(tables.rows("Event", events)) if events else "<none>"
    room = MAX_TEXT - len(event_text) - 200
    if len(body) > room:
        body = body[:room] + "\n[object cut: use kubectl_get with output=yaml for all of it]"
    text = f"{rtype.qualified}/{args.name}\n{body}\n\nEvents:\n{event_text}"
    data = {"kind": rtype.kind, "name": args.name, "object": obj, "events": events}
    return result(cluster, text, data, ns)


# ---- logs -----------------------------------------------------------------------------------


def _seconds(since: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return int(since[:-1]) * units[since[-1]]


def logs(args: Logs, ctx: ToolContext) -> ToolResult:
    cluster = connect(ctx, args.context)
    ns, pod = find_pod(cluster, args.pod, args.namespace)
    name = pod["metadata"]["name"]
    containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    annotations = pod["metadata"].get("annotations") or {}
    container = args.container or annotations.get("kubectl.kubernetes.io/default-container")
    if container is None and len(containers) > 1:
        raise ToolError(
            f"pod {name} has several containers ({', '.join(containers)}); pass container"
        )
    query = {
        "container": container,
        "tailLines": args.tail,
        "sinceSeconds": _seconds(args.since) if args.since else None,
        "previous": args.previous or None,
        "timestamps": args.timestamps or None,
        "limitBytes": 1_000_000,
    }
    ctx.check_cancelled()
    text = cluster.get(
        f"/api/v1/namespaces/{ns}/pods/{name}/log",
        Attempt("get", "pods/log", ns, name),
        query=query,
        accept="text/plain",
        text=True,
        timeout=(5.0, 120.0),
    )
    shown = container or (containers[0] if containers else "")
    which = f"pod {name}, container {shown}" + (" (previous)" if args.previous else "")
    body = keep_tail(text.rstrip("\n")) if text.strip() else "(no log lines)"
    data = {"pod": name, "container": shown, "lines": text.count("\n"), "log": keep_tail(text)}
    return result(cluster, f"Logs of {which}:\n{body}", data, ns)


# ---- events ---------------------------------------------------------------------------------


def events(args: Events, ctx: ToolContext) -> ToolResult:
    cluster = connect(ctx, args.context)
    ns = None if args.all_namespaces else (args.namespace or cluster.namespace)
    selectors = []
    if args.for_object:
        kind, _, name = args.for_object.rpartition("/")
        if kind:
            selectors.append(f"involvedObject.kind={resolve(cluster, kind).kind}")
        selectors.append(f"involvedObject.name={name}")
    if args.warnings_only:
        selectors.append("type=Warning")
    path = f"/api/v1/namespaces/{ns}/events" if ns else "/api/v1/events"
    listing = cluster.get(
        path,
        Attempt("list", "events", ns),
        query={"fieldSelector": ",".join(selectors) or None},
    )
    items = sort_events(listing.get("items") or [])
    shown = items[: args.limit]
    table = tables.rows("Event", shown, with_namespace=ns is None)
    data = {"items": table, "total": len(items), "warnings": _warnings(items)}
    if not items:
        return result(cluster, "No events found.", data, ns)
    text = tables.render(table)
    if len(items) > len(shown):
        text += f"\n[{len(items) - len(shown)} older events not shown]"
    return result(cluster, text, data, ns)


def _warnings(items: list[dict[str, Any]]) -> int:
    return sum(1 for e in items if e.get("type") == "Warning")


# ---- top ------------------------------------------------------------------------------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_CPU = {"n": 1e-6, "u": 1e-3, "m": 1.0}


def cpu_millicores(value: str) -> float:
    value = str(value)
    if value and value[-1] in _CPU:
        return float(value[:-1]) * _CPU[value[-1]]
    return float(value or 0) * 1000


def memory_bytes(value: str) -> float:
    value = str(value)
    for suffixes in (_BINARY, _DECIMAL):
        for suffix, size in suffixes.items():
            if value.endswith(suffix):
                return float(value[: -len(suffix)]) * size
    return float(value or 0)


def _no_metrics(cluster: Cluster) -> ToolError:
    failed = [g for g in index(cluster).failed if g.startswith("metrics.k8s.io")]
    if failed:
        why = "the metrics API is registered but not answering (is metrics-server running?)"
    else:
        why = "the cluster has no metrics API (metrics.k8s.io); install metrics-server"
    return ToolError(f"resource usage is not available on context {cluster.context}: {why}")


def top(args: Top, ctx: ToolContext) -> ToolResult:
    cluster = connect(ctx, args.context)
    if "metrics.k8s.io" not in index(cluster).groups():
        index(cluster, refresh=True)
        if "metrics.k8s.io" not in index(cluster).groups():
            raise _no_metrics(cluster)
    metrics = resolve(cluster, f"{args.resource}.metrics.k8s.io")
    ns = None
    if args.resource == "pods" and not args.all_namespaces:
        ns = args.namespace or cluster.namespace
    try:
        listing = cluster.get(
            metrics.path(ns),
            Attempt("list", metrics.qualified, ns),
            query={"labelSelector": args.label_selector},
        )
    except ApiStatusError as exc:
        if exc.code in (404, 503):
            raise _no_metrics(cluster) from None
        raise
    rows = []
    for item in listing.get("items") or []:
        meta = item.get("metadata") or {}
        usage = (
            [item.get("usage") or {}]
            if args.resource == "nodes"
            else [c.get("usage") or {} for c in item.get("containers") or []]
        )
        rows.append(
            {
                "namespace": meta.get("namespace", ""),
                "name": meta.get("name", ""),
                "cpu_m": round(sum(cpu_millicores(u.get("cpu", "0")) for u in usage)),
                "memory_mi": round(sum(memory_bytes(u.get("memory", "0")) for u in usage) / 2**20),
            }
        )
    if args.sort_by:
        rows.sort(key=lambda r: r["cpu_m" if args.sort_by == "cpu" else "memory_mi"], reverse=True)
    if args.resource == "nodes":
        _add_node_percentages(cluster, rows)
    table = []
    for r in rows:
        line = {"NAMESPACE": r["namespace"]} if ns is None and args.resource == "pods" else {}
        line |= {"NAME": r["name"], "CPU(cores)": f"{r['cpu_m']}m"}
        if "cpu_pct" in r:
            line["CPU%"] = r["cpu_pct"]
        line["MEMORY(bytes)"] = f"{r['memory_mi']}Mi"
        if "memory_pct" in r:
            line["MEMORY%"] = r["memory_pct"]
        table.append(line)
    text = tables.render(table) or f"No {args.resource} metrics found."
    return result(cluster, keep_tail(text), {"resource": args.resource, "items": rows}, ns)


def _add_node_percentages(cluster: Cluster, rows: list[dict[str, Any]]) -> None:
    try:
        nodes = cluster.get("/api/v1/nodes", Attempt("list", "nodes"))
    except ToolError:
        return
    allocatable = {
        n["metadata"]["name"]: (n.get("status") or {}).get("allocatable") or {}
        for n in nodes.get("items") or []
    }
    for r in rows:
        alloc = allocatable.get(r["name"])
        if not alloc:
            continue
        cpu = cpu_millicores(alloc.get("cpu", "0"))
        mem = memory_bytes(alloc.get("memory", "0")) / 2**20
        r["cpu_pct"] = f"{round(100 * r['cpu_m'] / cpu)}%" if cpu else "-"
        r["memory_pct"] = f"{round(100 * r['memory_mi'] / mem)}%" if mem else "-"
