"""kubectl tools that change a cluster (apply, delete, scale, rollout restart), their approval
previews, and rollout status."""

from __future__ import annotations

import difflib
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml

from tools.kubectl import tables
from tools.kubectl.cluster import Cluster, connect
from tools.kubectl.common import get_object, name_suggestions, namespace_of, result
from tools.kubectl.discovery import ResourceType, for_object, resolve
from tools.kubectl.errors import ApiStatusError, Attempt
from tools.kubectl.manifest import Apply, Delete, RolloutRestart, RolloutStatus, Scale
from tools.redact import TRIPWIRE
from tools.spec import ToolContext, ToolError, ToolResult

FIELD_MANAGER = "deskhand"
MAX_DOCUMENTS = 50
APPLY_PATCH = "application/apply-patch+yaml"
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


# ---- apply ------------------------------------------------------------------------------------


@dataclass
class Doc:
    body: dict[str, Any]
    rtype: ResourceType
    namespace: str | None
    name: str

    @property
    def label(self) -> str:
        where = f" (namespace {self.namespace})" if self.namespace else ""
        return f"{self.rtype.qualified}/{self.name}{where}"

    @property
    def path(self) -> str:
        return self.rtype.path(self.namespace, self.name)


def _documents(text: str) -> list[dict[str, Any]]:
    try:
        loaded = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ToolError(f"the manifest is not valid YAML: {exc}") from None
    docs: list[dict[str, Any]] = []
    for item in loaded:
        if isinstance(item, dict) and str(item.get("kind", "")).endswith("List"):
            docs.extend(item.get("items") or [])
        else:
            docs.append(item)
    if not docs:
        raise ToolError("the manifest contains no objects")
    if len(docs) > MAX_DOCUMENTS:
        raise ToolError(f"the manifest has {len(docs)} objects; apply at most {MAX_DOCUMENTS}")
    return docs


def _parse(cluster: Cluster, args: Apply) -> list[Doc]:
    docs = []
    for n, body in enumerate(_documents(args.manifest), 1):
        if not isinstance(body, dict) or not body.get("apiVersion") or not body.get("kind"):
            raise ToolError(f"document {n} is not a Kubernetes object (apiVersion and kind)")
        meta = body.setdefault("metadata", {})
        name = meta.get("name")
        if not name:
            raise ToolError(f"document {n} ({body['kind']}) has no metadata.name")
        rtype = for_object(cluster, str(body["apiVersion"]), str(body["kind"]))
        namespace = None
        if rtype.namespaced:
            own = meta.get("namespace")
            if own and args.namespace and own != args.namespace:
                raise ToolError(
                    f"{body['kind']}/{name} says namespace {own!r} but namespace="
                    f"{args.namespace!r} was passed; make them agree"
                )
            namespace = own or args.namespace or cluster.namespace
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        docs.append(Doc(body, rtype, namespace, str(name)))
    return docs


def _write(
    cluster: Cluster, doc: Doc, args: Apply, *, dry_run: bool
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(live object before or None, the object after — or as it would be when dry_run)."""
    q, ns = doc.rtype.qualified, doc.namespace
    live = cluster.get_or_none(doc.path, Attempt("get", q, ns, doc.name))
    common = {"fieldManager": FIELD_MANAGER, "dryRun": "All" if dry_run else None}
    if args.mode == "server-side":
        after = cluster.request(
            "PATCH",
            doc.path,
            Attempt("apply", q, ns, doc.name),
            query={**common, "force": args.force_conflicts or None},
            body=doc.body,
            content_type=APPLY_PATCH,
        )
    elif live is None:
        after = cluster.request(
            "POST",
            doc.rtype.path(ns),
            Attempt("create", q, ns, doc.name),
            query=common,
            body=doc.body,
        )
    else:
        try:
            after = cluster.request(
                "PATCH",
                doc.path,
                Attempt("patch", q, ns, doc.name),
                query=common,
                body=doc.body,
                content_type=STRATEGIC,
            )
        except ApiStatusError as exc:
            if exc.code != 415:  # custom resources take no strategic merge patch
                raise
            after = cluster.request(
                "PATCH",
                doc.path,
                Attempt("patch", q, ns, doc.name),
                query=common,
                body=doc.body,
                content_type=MERGE,
            )
    return live, after


def _yaml(obj: dict[str, Any]) -> str:
    text: str = yaml.safe_dump(
        tables.clean(obj, for_diff=True), sort_keys=False, allow_unicode=True
    )
    return text


def _outcome(live: dict[str, Any] | None, after: dict[str, Any]) -> str:
    if live is None:
        return "created"
    return "unchanged" if _yaml(live) == _yaml(after) else "configured"


def _shown(obj: dict[str, Any]) -> str:
    """An object as the approval prompt shows it: credential-looking values hidden."""
    shown = TRIPWIRE.shaped_data(tables.clean(obj, for_diff=True))
    text: str = yaml.safe_dump(shown, sort_keys=False, allow_unicode=True)
    return text


def _diff(doc: Doc, live: dict[str, Any] | None, after: dict[str, Any]) -> str:
    if live is None:
        added = "".join(f"+ {line}\n" for line in _shown(after).splitlines())
        return f"create {doc.label}:\n{added}".rstrip()
    lines = difflib.unified_diff(
        _shown(live).splitlines(),
        _shown(after).splitlines(),
        fromfile=f"live {doc.rtype.qualified}/{doc.name}",
        tofile="after apply",
        lineterm="",
    )
    text = "\n".join(lines)
    if _yaml(live) != _yaml(after) and not text:
        text = "(only values that look like credentials change; they are hidden here)"
    return f"update {doc.label}:\n{text}" if text else f"{doc.label}: no changes"


def preview_apply(args: Apply, ctx: ToolContext) -> str:
    """The diff of every object against the live one, from a server-side dry run."""
    cluster = connect(ctx, args.context)
    parts = [f"Apply ({args.mode}) to context {cluster.context} at {cluster.server}:"]
    for doc in _parse(cluster, args):
        live, after = _write(cluster, doc, args, dry_run=True)
        parts.append(_diff(doc, live, after))
    return "\n\n".join(parts)


def apply(args: Apply, ctx: ToolContext) -> ToolResult:
    cluster = connect(ctx, args.context)
    docs = _parse(cluster, args)
    done: list[dict[str, Any]] = []
    for doc in docs:
        ctx.check_cancelled()
        try:
            live, after = _write(cluster, doc, args, dry_run=args.dry_run)
        except ToolError as exc:
            if not done:
                raise
            applied = ", ".join(f"{d['resource']}/{d['name']} {d['result']}" for d in done)
            raise ToolError(f"{exc}. Applied before this failure: {applied}") from None
        outcome = _outcome(live, after) + (" (dry run)" if args.dry_run else "")
        done.append(
            {
                "resource": doc.rtype.qualified,
                "kind": doc.rtype.kind,
                "name": doc.name,
                "namespace": doc.namespace,
                "result": outcome,
            }
        )
    lines = [
        f"{d['resource']}/{d['name']} {d['result']}"
        + (f" in namespace {d['namespace']}" if d["namespace"] else "")
        for d in done
    ]
    return result(cluster, "\n".join(lines), {"mode": args.mode, "objects": done})


# ---- delete -------------------------------------------------------------------------------------


def _describe_row(rtype: ResourceType, obj: dict[str, Any]) -> str:
    row = tables.rows(rtype.kind, [obj])[0]
    return ", ".join(f"{k.lower()} {v}" for k, v in row.items() if k != "NAME")


def preview_delete(args: Delete, ctx: ToolContext) -> str:
    cluster = connect(ctx, args.context)
    rtype = resolve(cluster, args.kind)
    ns = namespace_of(cluster, rtype, args.namespace)
    obj = get_object(cluster, rtype, ns, args.name)
    where = f" in namespace {ns}" if ns else ""
    text = (
        f"Delete {rtype.qualified}/{args.name}{where} (context {cluster.context} at "
        f"{cluster.server}): {_describe_row(rtype, obj)}."
    )
    if rtype.kind == "Namespace":
        text += " EVERYTHING in this namespace is deleted with it."
    elif args.propagation != "Orphan" and rtype.kind in (
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "ReplicaSet",
        "Job",
        "CronJob",
    ):
        text += " Its pods are deleted too."
    return text


def delete(args: Delete, ctx: ToolContext) -> ToolResult:
    cluster = connect(ctx, args.context)
    rtype = resolve(cluster, args.kind)
    ns = namespace_of(cluster, rtype, args.namespace)
    options: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": args.propagation,
    }
    if args.grace_period_seconds is not None:
        options["gracePeriodSeconds"] = args.grace_period_seconds
    answer = cluster.request(
        "DELETE",
        rtype.path(ns, args.name),
        Attempt("delete", rtype.qualified, ns, args.name),
        body=options,
        suggest=name_suggestions(cluster, rtype, ns, args.name),
    )
    meta = (answer.get("metadata") or {}) if answer.get("kind") != "Status" else {}
    finalizers = meta.get("finalizers") or []
    label = f"{rtype.qualified}/{args.name}"
    if finalizers:
        pending = ", ".join(finalizers)
        text = f"{label}: deletion started; it goes once its finalizers finish ({pending})"
        state = "terminating"
    else:
        text, state = f"{label} deleted", "deleted"
    data = {"resource": rtype.qualified, "name": args.name, "result": state}
    return result(cluster, text, data, ns)


# ---- scale --------------------------------------------------------------------------------------


def _scalable(cluster: Cluster, kind: str) -> ResourceType:
    rtype = resolve(cluster, kind)
    if "scale" not in rtype.subresources:
        raise ToolError(f"{rtype.qualified} cannot be scaled (no scale subresource)")
    return rtype


def _replicas(scale: dict[str, Any]) -> int:
    return int((scale.get("spec") or {}).get("replicas") or 0)


def preview_scale(args: Scale, ctx: ToolContext) -> str:
    cluster = connect(ctx, args.context)
    rtype = _scalable(cluster, args.kind)
    ns = namespace_of(cluster, rtype, args.namespace)
    current = _replicas(get_object(cluster, rtype, ns, args.name, sub="scale"))
    change = "no change" if current == args.replicas else f"{current} → {args.replicas}"
    where = f" in namespace {ns}" if ns else ""
    return (
        f"Scale {rtype.qualified}/{args.name}{where} (context {cluster.context}): replicas {change}"
    )


def scale(args: Scale, ctx: ToolContext) -> ToolResult:
    cluster = connect(ctx, args.context)
    rtype = _scalable(cluster, args.kind)
    ns = namespace_of(cluster, rtype, args.namespace)
    before = _replicas(get_object(cluster, rtype, ns, args.name, sub="scale"))
    after = cluster.request(
        "PATCH",
        rtype.path(ns, args.name, "scale"),
        Attempt("patch", f"{rtype.qualified}/scale", ns, args.name),
        body={"spec": {"replicas": args.replicas}},
        content_type=MERGE,
    )
    now = _replicas(after)
    text = f"{rtype.qualified}/{args.name} scaled from {before} to {now} replicas"
    data = {"resource": rtype.qualified, "name": args.name, "from": before, "to": now}
    return result(cluster, text, data, ns)


# ---- rollout ---------------------------------------------------------------------------------


def _workload(
    cluster: Cluster, kind: str, namespace: str | None, name: str
) -> tuple[ResourceType, str | None, dict[str, Any]]:
    rtype = resolve(cluster, f"{kind}s.apps")
    ns = namespace_of(cluster, rtype, namespace)
    return rtype, ns, get_object(cluster, rtype, ns, name)


def preview_rollout_restart(args: RolloutRestart, ctx: ToolContext) -> str:
    cluster = connect(ctx, args.context)
    rtype, ns, obj = _workload(cluster, args.kind, args.namespace, args.name)
    return (
        f"Restart {rtype.qualified}/{args.name} in namespace {ns} (context {cluster.context}): "
        f"its pods are replaced one by one ({_describe_row(rtype, obj)})."
    )


def rollout_restart(args: RolloutRestart, ctx: ToolContext) -> ToolResult:
    cluster = connect(ctx, args.context)
    rtype, ns, obj = _workload(cluster, args.kind, args.namespace, args.name)
    if (obj.get("spec") or {}).get("paused"):
        raise ToolError(f"{rtype.qualified}/{args.name} is paused; resume it before restarting")
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}}}
    cluster.request(
        "PATCH",
        rtype.path(ns, args.name),
        Attempt("patch", rtype.qualified, ns, args.name),
        body=patch,
        content_type=STRATEGIC,
    )
    text = (
        f"{rtype.qualified}/{args.name} restarted (pods are being replaced; "
        "follow with kubectl_rollout_status)"
    )
    data = {"resource": rtype.qualified, "name": args.name, "restartedAt": stamp}
    return result(cluster, text, data, ns)


def rollout_state(obj: dict[str, Any]) -> tuple[bool, str]:
    """(done, message) the way `kubectl rollout status` words it; ToolError when it failed."""
    kind, name = obj.get("kind", ""), obj["metadata"]["name"]
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    generation = int(obj["metadata"].get("generation") or 0)
    observed = int(status.get("observedGeneration") or 0)
    want = int(spec.get("replicas", 1) if "replicas" in spec else 1)
    if kind == "StatefulSet":
        if (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") != "RollingUpdate":
            return True, "rollout status is only available for the RollingUpdate strategy"
        if not observed or generation > observed:
            return False, "Waiting for statefulset spec update to be observed..."
        if int(status.get("readyReplicas") or 0) < want:
            ready = int(status.get("readyReplicas") or 0)
            return False, f"Waiting for {want - ready} pods to be ready..."
        if status.get("updateRevision") != status.get("currentRevision"):
            return False, "Waiting for statefulset rolling update to complete..."
        return True, f"statefulset rolling update complete {want} pods"
    if kind == "DaemonSet":
        if generation > observed:
            return False, "Waiting for daemon set spec update to be observed..."
        desired = int(status.get("desiredNumberScheduled") or 0)
        updated = int(status.get("updatedNumberScheduled") or 0)
        available = int(status.get("numberAvailable") or 0)
        if updated < desired:
            return False, (
                f'Waiting for daemon set "{name}" rollout to finish: {updated} out of '
                f"{desired} new pods have been updated..."
            )
        if available < desired:
            return False, (
                f'Waiting for daemon set "{name}" rollout to finish: {available} of {desired} '
                "updated pods are available..."
            )
        return True, f'daemon set "{name}" successfully rolled out'
    if generation > observed:
        return False, "Waiting for deployment spec update to be observed..."
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            raise ToolError(f'deployment "{name}" exceeded its progress deadline')
    updated = int(status.get("updatedReplicas") or 0)
    total = int(status.get("replicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    if updated < want:
        return False, (
            f'Waiting for deployment "{name}" rollout to finish: {updated} out of {want} new '
            "replicas have been updated..."
        )
    if total > updated:
        return False, (
            f'Waiting for deployment "{name}" rollout to finish: {total - updated} old '
            "replicas are pending termination..."
        )
    if available < updated:
        return False, (
            f'Waiting for deployment "{name}" rollout to finish: {available} of {updated} '
            "updated replicas are available..."
        )
    return True, f'deployment "{name}" successfully rolled out'


def rollout_status(args: RolloutStatus, ctx: ToolContext) -> ToolResult:
    cluster = connect(ctx, args.context)
    rtype, ns, obj = _workload(cluster, args.kind, args.namespace, args.name)
    obj.setdefault("kind", rtype.kind)
    deadline = time.monotonic() + args.wait_seconds
    done, message = rollout_state(obj)
    while not done and time.monotonic() < deadline:
        ctx.progress(message)
        ctx.cancel_event.wait(min(2.0, max(deadline - time.monotonic(), 0)))
        ctx.check_cancelled()
        obj = get_object(cluster, rtype, ns, args.name)
        obj.setdefault("kind", rtype.kind)
        done, message = rollout_state(obj)
    if not done and args.wait_seconds:
        message += f" (still in progress after {args.wait_seconds}s)"
    data = {"resource": rtype.qualified, "name": args.name, "done": done, "message": message}
    return result(cluster, message, data, ns)
