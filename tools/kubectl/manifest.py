"""kubectl tools: cheap declarations. Implementations (which import the kubernetes package)
live in tools.kubectl.read / .change / .execute and load on first call."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tools.spec import Operation, ToolManifest

_KIND_HELP = (
    "Resource type as kubectl accepts it: plural, singular, kind or short name, optionally "
    "with its group (pods, po, deploy, svc, nodes, deployment.apps, widgets.example.com); "
    "custom resources work too"
)


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    context: str | None = Field(
        None,
        description="Kubeconfig context (cluster account) to use; default: the active one. "
        "See kubectl_contexts",
    )


class _Namespaced(_Params):
    namespace: str | None = Field(
        None, description="Namespace; default: the context's namespace, else 'default'"
    )


class Contexts(_Params):
    check: bool = Field(
        False,
        description="Also contact the cluster of `context` (default: the active one) and "
        "report its Kubernetes version",
    )


class Get(_Namespaced):
    kind: str = Field(..., min_length=1, description=_KIND_HELP)
    name: str | None = Field(None, description="One object by name; omit to list")
    all_namespaces: bool = Field(False, description="List across all namespaces")
    label_selector: str | None = Field(
        None, description="Label selector, e.g. 'app=web,tier!=cache'"
    )
    field_selector: str | None = Field(
        None, description="Field selector, e.g. 'status.phase=Running'"
    )
    output: Literal["table", "yaml", "json"] = Field(
        "table",
        description="table: concise rows like `kubectl get`; yaml/json: the full object(s)",
    )
    limit: int = Field(100, ge=1, le=1000, description="Show at most this many objects")


class Describe(_Namespaced):
    kind: str = Field(..., min_length=1, description=_KIND_HELP)
    name: str = Field(..., min_length=1, description="Object name")


class Logs(_Namespaced):
    pod: str = Field(
        ...,
        min_length=1,
        description="Pod name, or kind/name of a workload (deployment/web, sts/db, job/x) "
        "to read one of its pods",
    )
    container: str | None = Field(None, description="Container; needed when the pod has several")
    tail: int = Field(200, ge=1, le=5000, description="Last N lines")
    since: str | None = Field(
        None, pattern=r"^\d+[smhd]$", description="Only newer lines, e.g. '10m', '2h', '30s'"
    )
    previous: bool = Field(False, description="Logs of the previous (crashed) container")
    timestamps: bool = Field(False, description="Prefix each line with its timestamp")


class Events(_Namespaced):
    all_namespaces: bool = Field(False, description="Events of every namespace")
    for_object: str | None = Field(
        None, description="Only events about this object, as kind/name (pod/web-1, deploy/web)"
    )
    warnings_only: bool = Field(False, description="Only Warning events")
    limit: int = Field(50, ge=1, le=500, description="Show at most this many events")


class Apply(_Namespaced):
    manifest: str = Field(
        ...,
        min_length=1,
        description="YAML (or JSON) of one or more objects, documents separated by '---'",
    )
    mode: Literal["server-side", "create-or-patch"] = Field(
        "server-side",
        description="server-side: server-side apply (field manager 'deskhand'); "
        "create-or-patch: create when missing, else a strategic/merge patch",
    )
    force_conflicts: bool = Field(
        False, description="Server-side apply: take over fields owned by another manager"
    )
    dry_run: bool = Field(False, description="Validate on the server without changing anything")


class Delete(_Namespaced):
    kind: str = Field(..., min_length=1, description=_KIND_HELP)
    name: str = Field(..., min_length=1, description="Object name")
    propagation: Literal["Background", "Foreground", "Orphan"] = Field(
        "Background", description="What happens to dependents (e.g. a deployment's pods)"
    )
    grace_period_seconds: int | None = Field(
        None, ge=0, description="Seconds pods get to stop; default: the object's own"
    )


class Scale(_Namespaced):
    kind: str = Field(
        "deployment", min_length=1, description="deployment, statefulset, replicaset, …"
    )
    name: str = Field(..., min_length=1, description="Workload name")
    replicas: int = Field(..., ge=0, le=10_000, description="New number of replicas")


_Workload = Literal["deployment", "statefulset", "daemonset"]


class RolloutRestart(_Namespaced):
    kind: _Workload = Field("deployment", description="Workload kind")
    name: str = Field(..., min_length=1, description="Workload name")


class RolloutStatus(_Namespaced):
    kind: _Workload = Field("deployment", description="Workload kind")
    name: str = Field(..., min_length=1, description="Workload name")
    wait_seconds: int = Field(
        0, ge=0, le=600, description="Wait up to this long for the rollout to finish; 0: now"
    )


class Exec(_Namespaced):
    pod: str = Field(
        ..., min_length=1, description="Pod name, or kind/name of a workload (deployment/web)"
    )
    command: list[str] = Field(
        ...,
        min_length=1,
        description="Program and arguments, no shell: ['ls', '-l', '/'] or "
        "['sh', '-c', 'echo $HOME']",
    )
    container: str | None = Field(None, description="Container; needed when the pod has several")
    timeout_seconds: int = Field(60, ge=1, le=600, description="Stop waiting after this long")


class Top(_Namespaced):
    resource: Literal["pods", "nodes"] = Field("pods", description="pods or nodes")
    all_namespaces: bool = Field(False, description="Pods of every namespace")
    label_selector: str | None = Field(None, description="Label selector, e.g. 'app=web'")
    sort_by: Literal["cpu", "memory"] | None = Field(None, description="Sort, highest first")


_APPROVAL = "tools.kubectl.approval"


def _impl(module: str, name: str) -> str:
    return f"tools.kubectl.{module}:{name}"


_READ = frozenset({Operation.READ})


def _tool(
    name: str,
    description: str,
    params: type[BaseModel],
    operations: frozenset[Operation],
    impl: str,
    preview: str | None = None,
    timeout: float = 60.0,
    summary: str | None = None,
) -> ToolManifest:
    """A kubectl tool; one that changes something names its cluster and namespace and says
    in one line what it will do (`summary` is a function of tools.kubectl.approval)."""
    return ToolManifest(
        name=name,
        description=description,
        params=params,
        operations=operations,
        impl=impl,
        preview=preview,
        subject=None if summary is None else f"{_APPROVAL}:subject",
        summary_line=None if summary is None else f"{_APPROVAL}:{summary}",
        timeout=timeout,
        # Stop ends the remote command through a second exec, then reports how it went
        stop_grace=12.0 if name.endswith("_exec") else 0.5,
        category="kubectl",
        requires=("kubernetes",),
        integration="kubernetes",
    )


MANIFESTS: list[ToolManifest] = [
    _tool(
        "kubectl_contexts",
        "List the kubeconfig contexts (Kubernetes clusters) and which one is active. "
        "Pass `context` to any kubectl tool to use another; the kubeconfig is never modified.",
        Contexts,
        _READ,
        _impl("read", "contexts"),
        timeout=30,
    ),
    _tool(
        "kubectl_get",
        "List or fetch Kubernetes objects of any kind, including custom resources. "
        "Returns a concise table like `kubectl get`; output=yaml|json gives full objects.",
        Get,
        _READ,
        _impl("read", "get"),
    ),
    _tool(
        "kubectl_describe",
        "Show one Kubernetes object in detail together with its recent events. "
        "Use it to find out why a pod or deployment is unhealthy.",
        Describe,
        _READ,
        _impl("read", "describe"),
    ),
    _tool(
        "kubectl_logs",
        "Read a pod container's logs (last `tail` lines, optionally since a time or of the "
        "previous crashed container). Accepts deployment/name to pick one of its pods.",
        Logs,
        _READ,
        _impl("read", "logs"),
    ),
    _tool(
        "kubectl_events",
        "List Kubernetes events in a namespace, warnings first, newest first. "
        "Filter to one object with for_object='kind/name'.",
        Events,
        _READ,
        _impl("read", "events"),
    ),
    _tool(
        "kubectl_apply",
        "Create or update Kubernetes objects from YAML with one or more documents. "
        "Uses server-side apply by default; the approval prompt shows the diff against the "
        "live objects.",
        Apply,
        frozenset({Operation.CREATE, Operation.UPDATE}),
        _impl("change", "apply"),
        preview=_impl("change", "preview_apply"),
        timeout=120,
        summary="summary_apply",
    ),
    _tool(
        "kubectl_delete",
        "Delete one Kubernetes object by kind and name. Dependents (e.g. a deployment's pods) "
        "are removed in the background unless propagation says otherwise.",
        Delete,
        frozenset({Operation.DELETE}),
        _impl("change", "delete"),
        preview=_impl("change", "preview_delete"),
        summary="summary_delete",
    ),
    _tool(
        "kubectl_scale",
        "Set the replica count of a deployment, statefulset or other scalable workload. "
        "The approval prompt shows current → new replicas.",
        Scale,
        frozenset({Operation.UPDATE}),
        _impl("change", "scale"),
        preview=_impl("change", "preview_scale"),
        summary="summary_scale",
    ),
    _tool(
        "kubectl_rollout_restart",
        "Restart a deployment, statefulset or daemonset with a rolling replacement of its pods, "
        "like `kubectl rollout restart`.",
        RolloutRestart,
        frozenset({Operation.UPDATE}),
        _impl("change", "rollout_restart"),
        preview=_impl("change", "preview_rollout_restart"),
        summary="summary_rollout_restart",
    ),
    _tool(
        "kubectl_rollout_status",
        "Report whether a deployment, statefulset or daemonset rollout has finished. "
        "Optionally waits up to wait_seconds for it to complete.",
        RolloutStatus,
        _READ,
        _impl("change", "rollout_status"),
        timeout=660,
    ),
    _tool(
        "kubectl_exec",
        "Run a command in a pod's container and return its output and exit code. "
        "No shell unless you call one (['sh', '-c', '…']); no interactive input.",
        Exec,
        frozenset({Operation.EXECUTE}),
        _impl("execute", "exec_command"),
        timeout=660,
        summary="summary_exec",
    ),
    _tool(
        "kubectl_top",
        "Show CPU and memory use of pods or nodes from the metrics API, like `kubectl top`. "
        "Says so clearly when the cluster has no metrics-server.",
        Top,
        _READ,
        _impl("read", "top"),
    ),
]
