"""`kubectl get`-style tables, ages and object clean-up for display. No kubernetes import."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]
Column = tuple[str, Callable[[Obj], str]]


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def age(value: str | None, now: datetime | None = None) -> str:
    """kubectl's short age: 42s, 5m, 3h, 12d, 2y (`<unknown>` without a time)."""
    when = parse_time(value)
    if when is None:
        return "<unknown>"
    seconds = int(((now or datetime.now(UTC)) - when).total_seconds())
    seconds = max(seconds, 0)
    for unit, size in (("y", 365 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "m" else 1):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _get(obj: Any, *path: str, default: Any = None) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return default
        obj = obj.get(key)
    return default if obj is None else obj


def _meta_name(obj: Obj) -> str:
    return str(_get(obj, "metadata", "name", default=""))


def _age(obj: Obj) -> str:
    return age(_get(obj, "metadata", "creationTimestamp"))


def pod_status(pod: Obj) -> str:
    """The STATUS column of `kubectl get pods` (waiting/terminated reasons win)."""
    if _get(pod, "metadata", "deletionTimestamp"):
        return "Terminating"
    status = pod.get("status") or {}
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        state = cs.get("state") or {}
        waiting = state.get("waiting") or {}
        terminated = state.get("terminated") or {}
        if waiting.get("reason") and waiting["reason"] != "PodInitializing":
            return str(waiting["reason"])
        if terminated.get("reason") and terminated["reason"] != "Completed":
            return str(terminated["reason"])
    return str(status.get("reason") or status.get("phase") or "Unknown")


def _pod_ready(pod: Obj) -> str:
    statuses = _get(pod, "status", "containerStatuses", default=[])
    total = len(_get(pod, "spec", "containers", default=[])) or len(statuses)
    ready = sum(1 for cs in statuses if cs.get("ready"))
    return f"{ready}/{total}"


def _restarts(pod: Obj) -> str:
    statuses = _get(pod, "status", "containerStatuses", default=[])
    return str(sum(int(cs.get("restartCount") or 0) for cs in statuses))


def _num(obj: Obj, *path: str) -> str:
    return str(_get(obj, *path, default=0))


def _ready_of(obj: Obj, ready: tuple[str, ...], total: tuple[str, ...]) -> str:
    return f"{_get(obj, *ready, default=0)}/{_get(obj, *total, default=0)}"


def _condition(obj: Obj, kind: str) -> str:
    for cond in _get(obj, "status", "conditions", default=[]):
        if cond.get("type") == kind:
            return str(cond.get("status", ""))
    return ""


def _node_status(node: Obj) -> str:
    text = {"True": "Ready", "False": "NotReady"}.get(_condition(node, "Ready"), "Unknown")
    if _get(node, "spec", "unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _node_roles(node: Obj) -> str:
    prefix = "node-role.kubernetes.io/"
    labels = _get(node, "metadata", "labels", default={})
    roles = sorted(k.removeprefix(prefix) for k in labels if k.startswith(prefix))
    return ",".join(r for r in roles if r) or "<none>"


def _ports(svc: Obj) -> str:
    ports = []
    for port in _get(svc, "spec", "ports", default=[]):
        text = str(port.get("port", ""))
        if port.get("nodePort"):
            text += f":{port['nodePort']}"
        ports.append(f"{text}/{port.get('protocol', 'TCP')}")
    return ",".join(ports) or "<none>"


def _external_ip(svc: Obj) -> str:
    ingress = _get(svc, "status", "loadBalancer", "ingress", default=[])
    found = [i.get("ip") or i.get("hostname") for i in ingress] + list(
        _get(svc, "spec", "externalIPs", default=[])
    )
    if found:
        return ",".join(str(f) for f in found if f)
    return "<pending>" if _get(svc, "spec", "type") == "LoadBalancer" else "<none>"


def _job_status(job: Obj) -> str:
    for cond in _get(job, "status", "conditions", default=[]):
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            return str(cond["type"])
    return "Running"


def event_object(event: Obj) -> str:
    obj = event.get("involvedObject") or event.get("regarding") or {}
    return f"{str(obj.get('kind', '')).lower()}/{obj.get('name', '')}"


def event_time(event: Obj) -> str:
    series = event.get("series") or {}
    return str(
        event.get("lastTimestamp")
        or series.get("lastObservedTime")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or _get(event, "metadata", "creationTimestamp", default="")
    )


def _event_message(event: Obj) -> str:
    message = " ".join(str(event.get("message") or event.get("note") or "").split())
    count = int(event.get("count") or _get(event, "series", "count", default=0) or 0)
    return f"{message} (x{count})" if count > 1 else message


NAME: Column = ("NAME", _meta_name)
AGE: Column = ("AGE", _age)

COLUMNS: dict[str, list[Column]] = {
    "Pod": [
        NAME,
        ("READY", _pod_ready),
        ("STATUS", pod_status),
        ("RESTARTS", _restarts),
        AGE,
    ],
    "Deployment": [
        NAME,
        ("READY", lambda o: _ready_of(o, ("status", "readyReplicas"), ("spec", "replicas"))),
        ("UP-TO-DATE", lambda o: _num(o, "status", "updatedReplicas")),
        ("AVAILABLE", lambda o: _num(o, "status", "availableReplicas")),
        AGE,
    ],
    "StatefulSet": [
        NAME,
        ("READY", lambda o: _ready_of(o, ("status", "readyReplicas"), ("spec", "replicas"))),
        AGE,
    ],
    "ReplicaSet": [
        NAME,
        ("DESIRED", lambda o: _num(o, "spec", "replicas")),
        ("CURRENT", lambda o: _num(o, "status", "replicas")),
        ("READY", lambda o: _num(o, "status", "readyReplicas")),
        AGE,
    ],
    "DaemonSet": [
        NAME,
        ("DESIRED", lambda o: _num(o, "status", "desiredNumberScheduled")),
        ("CURRENT", lambda o: _num(o, "status", "currentNumberScheduled")),
        ("READY", lambda o: _num(o, "status", "numberReady")),
        ("UP-TO-DATE", lambda o: _num(o, "status", "updatedNumberScheduled")),
        ("AVAILABLE", lambda o: _num(o, "status", "numberAvailable")),
        AGE,
    ],
    "Service": [
        NAME,
        ("TYPE", lambda o: str(_get(o, "spec", "type", default="ClusterIP"))),
        ("CLUSTER-IP", lambda o: str(_get(o, "spec", "clusterIP", default="<none>"))),
        ("EXTERNAL-IP", _external_ip),
        ("PORT(S)", _ports),
        AGE,
    ],
    "Node": [
        NAME,
        ("STATUS", _node_status),
        ("ROLES", _node_roles),
        AGE,
        ("VERSION", lambda o: str(_get(o, "status", "nodeInfo", "kubeletVersion", default=""))),
    ],
    "Namespace": [NAME, ("STATUS", lambda o: str(_get(o, "status", "phase", default=""))), AGE],
    "Job": [
        NAME,
        ("STATUS", _job_status),
        (
            "COMPLETIONS",
            lambda o: _ready_of(o, ("status", "succeeded"), ("spec", "completions")),
        ),
        AGE,
    ],
    "ConfigMap": [NAME, ("DATA", lambda o: str(len(o.get("data") or {}))), AGE],
    "Secret": [
        NAME,
        ("TYPE", lambda o: str(o.get("type", ""))),
        ("DATA", lambda o: str(len(o.get("data") or {}))),
        AGE,
    ],
    "PersistentVolumeClaim": [
        NAME,
        ("STATUS", lambda o: str(_get(o, "status", "phase", default=""))),
        ("VOLUME", lambda o: str(_get(o, "spec", "volumeName", default=""))),
        ("CAPACITY", lambda o: str(_get(o, "status", "capacity", "storage", default=""))),
        AGE,
    ],
    "Ingress": [
        NAME,
        ("CLASS", lambda o: str(_get(o, "spec", "ingressClassName", default="<none>"))),
        (
            "HOSTS",
            lambda o: (
                ",".join(r.get("host", "*") for r in _get(o, "spec", "rules", default=[])) or "*"
            ),
        ),
        AGE,
    ],
    "Event": [
        ("LAST SEEN", lambda o: age(event_time(o))),
        ("TYPE", lambda o: str(o.get("type", ""))),
        ("REASON", lambda o: str(o.get("reason", ""))),
        ("OBJECT", event_object),
        ("MESSAGE", _event_message),
    ],
}


def columns_for(kind: str, items: list[Obj]) -> list[Column]:
    if kind in COLUMNS:
        return COLUMNS[kind]
    cols: list[Column] = [NAME]
    if any(_condition(o, "Ready") for o in items):
        cols.append(("READY", lambda o: _condition(o, "Ready") or "-"))
    if any(_get(o, "status", "phase") for o in items):
        cols.append(("STATUS", lambda o: str(_get(o, "status", "phase", default=""))))
    cols.append(AGE)
    return cols


def rows(kind: str, items: list[Obj], *, with_namespace: bool = False) -> list[dict[str, str]]:
    """One dict per object: column header → cell (NAMESPACE first when asked)."""
    cols = columns_for(kind, items)
    out = []
    for obj in items:
        row = {"NAMESPACE": str(_get(obj, "metadata", "namespace", default=""))}
        if not with_namespace:
            row.clear()
        row.update({header: fn(obj) for header, fn in cols})
        out.append(row)
    return out


def render(table: list[dict[str, str]]) -> str:
    """Aligned text columns (3 spaces apart, like kubectl)."""
    if not table:
        return ""
    headers = list(table[0])
    widths = {h: max(len(h), *(len(r.get(h, "")) for r in table)) for h in headers}
    lines = ["   ".join(h.ljust(widths[h]) for h in headers).rstrip()]
    for r in table:
        lines.append("   ".join(r.get(h, "").ljust(widths[h]) for h in headers).rstrip())
    return "\n".join(lines)


def clean(obj: Obj, *, for_diff: bool = False) -> Obj:
    """A copy fit to show: no managedFields or last-applied blob, Secret values hidden; for
    diffs also no server bookkeeping (status, resourceVersion, uid, …)."""
    out = copy.deepcopy(obj)
    meta = out.get("metadata") or {}
    meta.pop("managedFields", None)
    annotations = meta.get("annotations") or {}
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if not annotations:
        meta.pop("annotations", None)
    if out.get("kind") == "Secret":
        for key in ("data", "stringData"):
            if isinstance(out.get(key), dict):
                out[key] = {k: f"<hidden: {len(str(v))} chars>" for k, v in out[key].items()}
    if for_diff:
        out.pop("status", None)
        for key in ("resourceVersion", "uid", "generation", "creationTimestamp", "selfLink"):
            meta.pop(key, None)
    return out
