"""kubectl tools through the real registry and runner, against a Kubernetes API server over
real HTTP: the emulator in tests/fixtures_kube.py, or the cluster of DESKHAND_TEST_KUBECONFIG
(then in a throw-away namespace, skipping what needs the request recorder or injected
failures)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.core.approval import Verdict
from tests.fakellm import ScriptedLLM, text, tool_calls
from tests.fixtures_kube import CALL_SECONDS, FakeKube, KubeEnv
from tests.test_approval import verdict
from tests.waits import Watch
from tools.registry import ToolRegistry
from tools.spec import Operation, ToolContext

REPO = Path(__file__).resolve().parents[1]
READS = {
    "kubectl_contexts",
    "kubectl_get",
    "kubectl_describe",
    "kubectl_logs",
    "kubectl_events",
    "kubectl_rollout_status",
    "kubectl_top",
}
CHANGES = {
    "kubectl_apply": {Operation.CREATE, Operation.UPDATE},
    "kubectl_delete": {Operation.DELETE},
    "kubectl_scale": {Operation.UPDATE},
    "kubectl_rollout_restart": {Operation.UPDATE},
    "kubectl_exec": {Operation.EXECUTE},
}


# ---- seed objects ---------------------------------------------------------------------------


def _ts(minutes_ago: int) -> str:
    return (datetime.now(UTC) - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def deployment(name: str = "web", replicas: int = 2) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "busybox:1.36",
                            "command": ["sh", "-c", "echo serving on 8080; sleep 3600"],
                        }
                    ]
                },
            },
        },
    }


def pod(name: str, labels: dict, containers: tuple[str, ...] = ("main",), lines: str = "") -> dict:
    script = f"printf '{lines}'; sleep 3600" if lines else "sleep 3600"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "containers": [
                {"name": c, "image": "busybox:1.36", "command": ["sh", "-c", script]}
                for c in containers
            ]
        },
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": c, "ready": True, "restartCount": 0, "state": {"running": {}}}
                for c in containers
            ],
        },
    }


LOGGER_LINES = "line 1\\nline 2\\nline 3\\n"


def event(kube: KubeEnv, name: str, kind: str, obj: str, reason: str, type_: str, ago: int):
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name},
        "involvedObject": {"kind": kind, "name": obj, "namespace": kube.namespace},
        "reason": reason,
        "message": f"{reason} happened to {obj}",
        "type": type_,
        "count": 1,
        "firstTimestamp": _ts(ago),
        "lastTimestamp": _ts(ago),
        "source": {"component": "deskhand-test"},
    }


@pytest.fixture
def web(kube: KubeEnv) -> KubeEnv:
    """Deployment `web` (2 replicas) with its pods, and a pod `logger` printing 3 lines."""
    kube.seed(deployment("web", 2), pod("logger", {"app": "logger"}, lines=LOGGER_LINES))
    if kube.fake is not None:  # on a real cluster the deployment makes its own pods
        kube.seed(
            pod("web-5d8f-a", {"app": "web"}),
            pod("web-5d8f-b", {"app": "web"}),
            logs={"web-5d8f-a": "serving on 8080\n", "web-5d8f-b": "serving on 8080\n"},
        )
        kube.fake.logs[(kube.namespace, "logger", "main")] = "line 1\nline 2\nline 3\n"
    return kube


# ---- the manifest ---------------------------------------------------------------------------


def test_manifests_declare_names_operations_previews_and_context():
    registry = ToolRegistry.default(None, entry_points=False)
    tools = {m.name: m for m in registry.manifests() if m.category == "kubectl"}
    assert set(tools) == READS | set(CHANGES)
    for name, m in tools.items():
        assert m.requires == ("kubernetes",) and m.integration == "kubernetes"
        assert len(m.summary) <= 120, name
        assert "context" in m.json_schema()["properties"], name
        if name in READS:
            assert m.operations == {Operation.READ} and verdict(m) is Verdict.ALLOW
        else:
            assert m.operations == CHANGES[name] and verdict(m) is Verdict.ASK
    assert {n for n, m in tools.items() if m.preview} >= {
        "kubectl_apply",
        "kubectl_delete",
        "kubectl_scale",
    }


def test_listing_tools_imports_no_kubernetes():
    code = (
        "import sys\n"
        "from tools.registry import ToolRegistry\n"
        "r = ToolRegistry.default(None, entry_points=False)\n"
        "infos = [r.info(n).to_json() for n in r.names() if n.startswith('kubectl_')]\n"
        "assert len(infos) == 12 and all(i['available'] for i in infos), infos\n"
        "assert 'kubernetes' not in sys.modules, 'kubernetes was imported'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr


# ---- contexts and errors about them -------------------------------------------------------------


def test_contexts_marks_the_active_one_and_never_writes_the_kubeconfig(kube: KubeEnv):
    files = [Path(p) for p in kube.kubeconfig.split(os.pathsep)]
    before = [f.read_bytes() for f in files]
    res = kube.run("kubectl_contexts", check=True)
    assert res.ok, res.content
    rows = {r["context"]: r for r in res.data["contexts"]}
    assert rows[kube.context]["active"] and not rows["dead"]["active"]
    assert f"* {kube.context}" in res.content
    assert res.data["checked"]["version"].startswith("v")
    assert f"Context {kube.context} answers at" in res.content
    other = kube.run("kubectl_get", kind="pods", context="dead")  # "switching" per call
    assert not other.ok
    assert [f.read_bytes() for f in files] == before


def test_unknown_context_is_explained_with_suggestions(kube: KubeEnv):
    res = kube.run("kubectl_get", kind="pods", context="daed")
    assert not res.ok
    assert "no kubeconfig context 'daed'" in res.content and "Did you mean dead" in res.content


def test_unreachable_cluster_names_server_and_context(kube: KubeEnv):
    res = kube.run("kubectl_get", kind="pods", context="dead")
    assert not res.ok
    assert "cannot reach the cluster at http://127.0.0.1:" in res.content
    assert "(context dead): connection refused" in res.content


def test_expired_credentials_say_so(kube: KubeEnv):
    kube.need_fake("the `expired` context uses a token only the fake rejects")
    res = kube.run("kubectl_get", kind="pods", context="expired")
    assert not res.ok
    assert "rejected the credentials of context expired (401 Unauthorized)" in res.content
    assert "expired or invalid" in res.content


def test_rbac_forbidden_says_which_verb_and_resource(web: KubeEnv):
    fake = web.need_fake("RBAC denials are injected")
    fake.forbid("list", "pods")
    fake.forbid("patch", "deployments/scale")
    listed = web.run("kubectl_get", kind="po")
    assert not listed.ok
    assert "forbidden: cannot list pods in namespace default as user jane" in listed.content
    assert "(context fake)" in listed.content
    scaled = web.run("kubectl_scale", name="web", replicas=5)
    assert not scaled.ok
    assert "forbidden: cannot patch deployments.apps/scale in namespace default" in scaled.content
    assert fake.get("deployments", "default", "web", "apps")["spec"]["replicas"] == 2


# ---- discovery and get --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["deploy", "deployments", "Deployment", "deployments.apps"])
def test_kinds_resolve_like_kubectl(web: KubeEnv, kind: str):
    res = web.run("kubectl_get", kind=kind, namespace=web.namespace)
    assert res.ok, res.content
    assert res.data["resource"] == "deployments.apps" and res.data["context"] == web.context
    assert [r["NAME"] for r in res.data["items"]] == ["web"]
    assert res.content.splitlines()[1].split() == [
        "NAME",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "AGE",
    ]


def test_aggregated_discovery_needs_two_requests(web: KubeEnv):
    fake = web.need_fake("counts discovery requests")
    fake.aggregated = True
    res = web.run("kubectl_get", kind="sts")
    assert res.ok, res.content
    discovery = [r.path for r in fake.requests if r.method == "GET" and "namespaces" not in r.path]
    assert discovery == ["/api", "/apis"]


def test_unknown_kind_suggests_the_closest(kube: KubeEnv):
    res = kube.run("kubectl_get", kind="deploymnets")
    assert not res.ok
    assert "no resource type 'deploymnets'" in res.content
    assert "Did you mean deployments.apps" in res.content


def test_get_table_with_label_and_field_selectors(web: KubeEnv):
    res = web.run("kubectl_get", kind="po", namespace=web.namespace, label_selector="app=web")
    assert res.ok, res.content
    header = res.content.splitlines()[1].split()
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    rows = res.data["items"]
    assert len(rows) == 2 and all(r["NAME"].startswith("web-") for r in rows)
    assert all(r["STATUS"] == "Running" and r["READY"] == "1/1" for r in rows)
    one = web.run("kubectl_get", kind="pods", field_selector="metadata.name=logger")
    assert [r["NAME"] for r in one.data["items"]] == ["logger"]
    if web.fake:
        sent = web.fake.find("GET", "/api/v1/namespaces/default/pods")
        assert sent[0].param("labelSelector") == "app=web"
        assert sent[1].param("fieldSelector") == "metadata.name=logger"


def test_get_all_namespaces_adds_the_namespace_column(web: KubeEnv):
    res = web.run("kubectl_get", kind="deploy", all_namespaces=True)
    assert res.ok and res.content.splitlines()[1].split()[0] == "NAMESPACE"
    assert {"NAMESPACE": web.namespace, "NAME": "web"}.items() <= next(
        r for r in res.data["items"] if r["NAME"] == "web"
    ).items()


def test_get_full_object_as_yaml_and_json(web: KubeEnv):
    res = web.run("kubectl_get", kind="deployment", name="web", output="yaml")
    assert res.ok, res.content
    obj = yaml.safe_load(res.content.split("\n", 1)[1])
    assert obj["kind"] == "Deployment" and obj["spec"]["replicas"] == 2
    assert "managedFields" not in obj["metadata"]
    as_json = web.run("kubectl_get", kind="deployment", name="web", output="json")
    assert json.loads(as_json.content.split("\n", 1)[1])["metadata"]["name"] == "web"
    assert as_json.data["objects"][0]["spec"]["replicas"] == 2


def test_secret_values_are_never_shown(kube: KubeEnv):
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db"},
        "type": "Opaque",
        "data": {"DB_PASS": "aHVudGVyMg=="},
    }
    kube.seed(secret)
    table = kube.run("kubectl_get", kind="secret", name="db")
    assert table.ok and table.data["items"][0]["DATA"] == "1"
    for output in ("yaml", "json"):
        full = kube.run("kubectl_get", kind="secret", name="db", output=output)
        assert full.ok and "DB_PASS" in full.content
        assert "aHVudGVyMg==" not in full.content + json.dumps(full.data)
    described = kube.run("kubectl_describe", kind="secret", name="db")
    assert "aHVudGVyMg==" not in described.content + json.dumps(described.data, default=str)


def test_get_missing_object_suggests_names(web: KubeEnv):
    res = web.run("kubectl_get", kind="deploy", name="wbe")
    assert not res.ok
    assert "not found: deployments.apps 'wbe' in namespace" in res.content
    assert "Did you mean web?" in res.content


def test_custom_resources_get_and_apply(kube: KubeEnv):
    fake = kube.need_fake("needs the Widget CRD, which only the fake serves")
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "gizmo"},
        "spec": {"size": 1},
    }
    kube.seed(widget)
    res = kube.run("kubectl_get", kind="wd")
    assert res.ok and res.data["resource"] == "widgets.example.com"
    assert [r["NAME"] for r in res.data["items"]] == ["gizmo"]
    widget["spec"]["size"] = 3
    applied = kube.run("kubectl_apply", manifest=yaml.safe_dump(widget), mode="create-or-patch")
    assert applied.ok, applied.content
    assert "widgets.example.com/gizmo configured" in applied.content
    patches = fake.find("PATCH", "/widgets/gizmo")
    kinds = [p.headers["content-type"] for p in patches]
    assert kinds == ["application/strategic-merge-patch+json", "application/merge-patch+json"]
    assert fake.get("widgets", "default", "gizmo", "example.com")["spec"]["size"] == 3


# ---- describe, events, logs ----------------------------------------------------------------------


def test_describe_shows_the_object_and_its_events_warnings_first(web: KubeEnv):
    web.seed(
        event(web, "web.1", "Deployment", "web", "ScalingReplicaSet", "Normal", 1),
        event(web, "web.2", "Deployment", "web", "ProgressStalled", "Warning", 30),
        event(web, "logger.1", "Pod", "logger", "BackOff", "Warning", 2),
    )
    res = web.run("kubectl_describe", kind="deploy", name="web")
    assert res.ok, res.content
    body, events = res.content.split("\nEvents:\n")
    assert "replicas: 2" in body and "deployments.apps/web" in body
    reasons = [e["reason"] for e in res.data["events"] if e["reason"] != "ScalingReplicaSet"]
    assert reasons[:1] == ["ProgressStalled"] and "BackOff" not in events
    assert events.splitlines()[1].split()[1] == "Warning"


def test_events_list_warnings_first_and_filters(web: KubeEnv):
    web.seed(
        event(web, "a.1", "Pod", "logger", "Started", "Normal", 1),
        event(web, "a.2", "Pod", "logger", "BackOff", "Warning", 20),
        event(web, "b.1", "Deployment", "web", "ScalingReplicaSet", "Normal", 3),
    )
    res = web.run("kubectl_events")
    assert res.ok, res.content
    ours = [
        r for r in res.data["items"] if r["REASON"] in ("Started", "BackOff", "ScalingReplicaSet")
    ]
    assert ours[0]["REASON"] == "BackOff" and ours[0]["TYPE"] == "Warning"
    only = web.run("kubectl_events", for_object="pod/logger", warnings_only=True)
    assert [r["REASON"] for r in only.data["items"]] == ["BackOff"]
    assert only.data["items"][0]["OBJECT"] == "pod/logger"


def test_logs_tail_and_workload_pods(web: KubeEnv):
    res = web.run("kubectl_logs", pod="logger", tail=2)
    assert res.ok, res.content
    assert res.content.splitlines()[-2:] == ["line 2", "line 3"]
    assert "line 1" not in res.content and res.data["container"] == "main"
    deployed = web.run("kubectl_logs", pod="deployment/web")
    assert deployed.ok, deployed.content
    assert deployed.data["pod"].startswith("web-") and "serving on 8080" in deployed.content
    if web.fake:
        assert web.fake.find("GET", "/pods/logger/log")[0].param("tailLines") == "2"


def test_logs_errors_are_readable(web: KubeEnv):
    web.seed(pod("sidecars", {"app": "x"}, containers=("app", "proxy")))
    several = web.run("kubectl_logs", pod="sidecars")
    assert not several.ok and "has several containers (app, proxy)" in several.content
    previous = web.run("kubectl_logs", pod="logger", previous=True)
    assert not previous.ok and "previous terminated container" in previous.content
    missing = web.run("kubectl_logs", pod="loger")
    assert not missing.ok and "Did you mean logger" in missing.content


# ---- apply, delete, scale, rollout ---------------------------------------------------------------


def test_apply_previews_a_diff_and_changes_nothing_until_run(web: KubeEnv):
    wanted = deployment("web", 4)
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "web-config"},
        "data": {"mode": "fast"},
    }
    manifest = yaml.safe_dump(wanted) + "---\n" + yaml.safe_dump(config)
    # force: on a real cluster the seeded fields belong to the manager that created them
    preview = web.preview("kubectl_apply", manifest=manifest, force_conflicts=True)
    assert preview is not None
    assert "-  replicas: 2" in preview and "+  replicas: 4" in preview
    assert "create configmaps/web-config" in preview and "+   mode: fast" in preview
    assert f"context {web.context}" in preview
    if web.fake:
        assert all(r.param("dryRun") == "All" for r in web.fake.writes())
        assert web.fake.get("configmaps", "default", "web-config") is None
    res = web.run("kubectl_apply", manifest=manifest, force_conflicts=True)
    assert res.ok, res.content
    assert [o["result"] for o in res.data["objects"]] == ["configured", "created"]
    got = web.run("kubectl_get", kind="deploy", name="web", output="json")
    assert got.data["objects"][0]["spec"]["replicas"] == 4
    again = web.run("kubectl_apply", manifest=manifest)
    assert [o["result"] for o in again.data["objects"]] == ["unchanged", "unchanged"]
    if web.fake:
        applied = [r for r in web.fake.writes() if r.param("dryRun") is None]
        assert applied[0].headers["content-type"] == "application/apply-patch+yaml"
        assert applied[0].param("fieldManager") == "deskhand"
        assert applied[0].param("force") == "true"
        assert applied[0].body["spec"]["replicas"] == 4


def test_apply_rejects_bad_manifests_before_sending(kube: KubeEnv):
    bad = kube.run("kubectl_apply", manifest="kind: [unclosed")
    assert not bad.ok and "not valid YAML" in bad.content
    clash = yaml.safe_dump({**deployment(), "metadata": {"name": "web", "namespace": "other"}})
    mismatch = kube.run("kubectl_apply", manifest=clash, namespace="default")
    assert not mismatch.ok and "make them agree" in mismatch.content
    unknown = kube.run(
        "kubectl_apply",
        manifest="apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: x}\n",
    )
    assert not unknown.ok and "Did you mean Deployment" in unknown.content
    if kube.fake:
        assert kube.fake.writes() == []


def test_delete_previews_then_deletes(web: KubeEnv):
    preview = web.preview("kubectl_delete", kind="deploy", name="web")
    assert preview is not None
    assert f"Delete deployments.apps/web in namespace {web.namespace}" in preview
    assert "Its pods are deleted too" in preview and "ready 2/2" in preview
    res = web.run("kubectl_delete", kind="deploy", name="web")
    assert res.ok, res.content
    assert "deployments.apps/web deleted" in res.content
    gone = web.run("kubectl_get", kind="deploy", name="web")
    assert not gone.ok and "not found" in gone.content
    if web.fake:
        sent = web.fake.find("DELETE", "/deployments/web")
        assert len(sent) == 1 and sent[0].body["propagationPolicy"] == "Background"
    missing = web.preview("kubectl_delete", kind="deploy", name="web")
    assert missing is not None and missing.startswith("(this call will fail: not found")


def test_scale_previews_current_to_new_and_patches_the_scale(web: KubeEnv):
    preview = web.preview("kubectl_scale", name="web", replicas=3)
    assert preview is not None and "replicas 2 → 3" in preview
    res = web.run("kubectl_scale", name="web", replicas=3)
    assert res.ok, res.content
    assert res.data["from"] == 2 and res.data["to"] == 3
    assert "deployments.apps/web scaled from 2 to 3 replicas" in res.content
    got = web.run("kubectl_get", kind="deploy", name="web", output="json")
    assert got.data["objects"][0]["spec"]["replicas"] == 3
    if web.fake:
        (patch,) = web.fake.find("PATCH", "/apis/apps/v1/namespaces/default/deployments/web/scale")
        assert patch.body == {"spec": {"replicas": 3}}
    not_scalable = web.run("kubectl_scale", kind="configmap", name="x", replicas=1)
    assert not not_scalable.ok and "cannot be scaled" in not_scalable.content


def test_rollout_restart_and_status(web: KubeEnv):
    res = web.run("kubectl_rollout_restart", name="web")
    assert res.ok, res.content
    got = web.run("kubectl_get", kind="deploy", name="web", output="json")
    template = got.data["objects"][0]["spec"]["template"]
    assert template["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
    status = web.run("kubectl_rollout_status", name="web", wait_seconds=0 if web.fake else 180)
    assert status.ok and status.data["done"], status.content
    assert 'deployment "web" successfully rolled out' in status.content
    if web.fake:
        (patch,) = web.fake.find("PATCH", "/deployments/web")
        assert patch.headers["content-type"] == "application/strategic-merge-patch+json"


def test_rollout_status_in_progress_and_failed(web: KubeEnv):
    fake = web.need_fake("sets the deployment status by hand")
    fake.controllers = False
    stored = fake.get("deployments", "default", "web", "apps")
    stored["status"] = {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 1}
    res = web.run("kubectl_rollout_status", name="web")
    assert res.ok and not res.data["done"]
    assert "1 out of 2 new replicas have been updated" in res.content
    stored["status"]["conditions"] = [
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
    ]
    failed = web.run("kubectl_rollout_status", name="web")
    assert not failed.ok and "exceeded its progress deadline" in failed.content


# ---- exec and top ------------------------------------------------------------------------


def test_exec_returns_output_and_exit_code(web: KubeEnv):
    res = web.run("kubectl_exec", pod="logger", command=["echo", "hello", "there"])
    assert res.ok, res.content
    assert res.data["stdout"] == "hello there\n" and res.data["exit_code"] == 0
    assert "[exit code 0]" in res.content
    failed = web.run("kubectl_exec", pod="logger", command=["false"])
    assert not failed.ok and failed.data["exit_code"] == 1


def test_exec_forbidden_is_explained(web: KubeEnv):
    fake = web.need_fake("RBAC denials are injected")
    fake.forbid("create", "pods/exec")
    res = web.run("kubectl_exec", pod="logger", command=["echo", "x"])
    assert not res.ok
    assert "forbidden: cannot create pods/exec in namespace default" in res.content


# ---- stopping kubectl_exec ----------------------------------------------------------------


def run_with_cancel(kube: KubeEnv, cancel: threading.Event, **args: Any) -> Any:
    ctx = ToolContext(
        home=kube.home,
        account_resolver=kube.account,
        integration="kubernetes",
        cancel_event=cancel,
    )
    return asyncio.run(kube.runner.run("kubectl_exec", args, ctx, timeout=CALL_SECONDS))


def cancel_once_started(fake: FakeKube, cancel: threading.Event, count: int = 1) -> Watch:
    """Sets `cancel` once the "container" runs the exec'd process (what Stop does mid-call),
    polling the fake's real process list; `.check()` fails if it never ran."""
    return Watch(
        lambda: len(fake.processes) >= count,
        cancel.set,
        f"{count} exec'd process(es) to run",
        every=0.02,
    )


def session_members(sid: int) -> list[int]:
    """Live processes of session `sid` (the exec'd command and everything it started)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def test_cancelled_exec_ends_the_command_and_its_children(web: KubeEnv):
    """Closing the exec stream does not end the command; Deskhand kills it through a second
    exec, using the PID the container's shell reported."""
    fake = web.need_fake("runs the exec'd command as a real process")
    fake.exec_processes = True
    cancel = threading.Event()
    running = cancel_once_started(fake, cancel)
    res = run_with_cancel(web, cancel, pod="logger", command=["sh", "-c", "sleep 600; echo never"])
    running.check()
    assert not res.ok and res.error == "cancelled", res.content
    assert res.data["stopped"] is True and "the command was ended in pod logger" in res.content
    command = fake.processes[0]
    assert command.poll() is not None
    # the inner `sleep` is gone too: a killed process leaves the table when the kernel
    # has torn it down, which a loaded machine does a little later
    deadline = time.monotonic() + 15
    while session_members(command.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert session_members(command.pid) == []
    assert res.data["stdout"] == ""  # the PID line is not output


def test_exec_that_times_out_is_ended(web: KubeEnv):
    fake = web.need_fake("runs the exec'd command as a real process")
    fake.exec_processes = True
    res = web.run(
        "kubectl_exec", pod="logger", command=["sh", "-c", "echo hi; sleep 600"], timeout_seconds=1
    )
    assert not res.ok and res.error == "timed out" and res.data["timed_out"]
    assert res.data["stdout"] == "hi\n"
    assert "stopped waiting after 1s; the command was ended in pod logger" in res.content
    assert fake.processes[0].poll() is not None


def test_a_kill_that_does_not_get_through_is_bounded_and_said_plainly(
    web: KubeEnv, monkeypatch: pytest.MonkeyPatch
):
    """The kill exec hangs (a busy container, a huge process table): Stop still returns
    within its bound and says the command may still run, rather than hanging the call."""
    from tools.kubectl import execute

    fake = web.need_fake("runs the exec'd command as a real process")
    fake.exec_processes = True
    fake.exec_stall = "kill -KILL"  # the kill script's exec never gets anywhere
    monkeypatch.setattr(execute, "STOP_SECONDS", 1.0)
    cancel = threading.Event()
    running = cancel_once_started(fake, cancel)
    started = time.monotonic()
    res = run_with_cancel(web, cancel, pod="logger", command=["sleep", "600"])
    took = time.monotonic() - started
    running.check()
    assert not res.ok and res.data["stopped"] is False, res.content
    assert res.error.startswith("cancelled; the command may still be running in pod logger")
    assert "did not end it within 1 s" in res.error
    assert took < 15, took  # PID wait + STOP_SECONDS + slack, never the command's 600 s
    assert fake.processes[0].poll() is None  # true: it still runs (the fake ends it later)


def test_exec_in_a_container_without_a_shell_says_plainly_it_may_still_run(web: KubeEnv):
    fake = web.need_fake("runs the exec'd command as a real process")
    fake.exec_processes, fake.exec_shell = True, False
    done = web.run("kubectl_exec", pod="logger", command=["echo", "no", "shell"])
    assert done.ok and done.data["stdout"] == "no shell\n"  # the command ran once, as given
    cancel = threading.Event()
    running = cancel_once_started(fake, cancel, count=2)
    res = run_with_cancel(web, cancel, pod="logger", command=["sleep", "600"])
    running.check()
    assert not res.ok and res.data["stopped"] is False
    assert res.error.startswith("cancelled; the command may still be running in pod logger")
    assert "no shell" in res.error
    assert fake.processes[1].poll() is None  # true: it still runs (the fake ends it later)


# ---- credentials in objects ------------------------------------------------------------------

GHP = "ghp_" + "Zq8Xw2Lk9Mn4Pv7Rt1Ys5Ub3Ce6Df0Gh2Jk4"
DB_URL = "postgres://app:pg-s3cret-99@db:5432/shop"


def leaky_pod() -> dict:
    obj = pod("leaky", {"app": "leaky"})
    container = obj["spec"]["containers"][0]
    container["command"] = ["server", "--password=hunter2-pw", "--token", "t0k-77aa"]
    container["env"] = [
        {"name": "NOTE", "value": GHP},
        {"name": "DB_PASSWORD", "value": "plain-words"},
        {"name": "DATABASE", "value": DB_URL},
        {"name": "MODE", "value": "prod"},
    ]
    obj["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"env": GHP}),
        "deploy/notes": f"pushed with {GHP}",
    }
    return obj


LEAKS = (GHP, "pg-s3cret-99", "hunter2-pw", "t0k-77aa", "plain-words")


def test_get_and_describe_mask_credentials_under_any_name(web: KubeEnv):
    web.seed(
        leaky_pod(),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings"},
            "data": {"database": DB_URL, "note": GHP, "mode": "prod"},
        },
    )
    results = [
        web.run("kubectl_get", kind="pods", name="leaky", output="yaml"),
        web.run("kubectl_get", kind="pods", output="json"),
        web.run("kubectl_describe", kind="pod", name="leaky"),
        web.run("kubectl_get", kind="configmap", name="settings", output="json"),
        web.run("kubectl_describe", kind="cm", name="settings"),
    ]
    for res in results:
        assert res.ok, res.content
        shown = res.content + json.dumps(res.data)
        assert not [leak for leak in LEAKS if leak in shown], res.content
    env = results[0].data["objects"][0]["spec"]["containers"][0]["env"]
    assert env == [
        {"name": "NOTE", "value": "[redacted]"},
        {"name": "DB_PASSWORD", "value": "[redacted]"},
        {"name": "DATABASE", "value": "postgres://app:[redacted]@db:5432/shop"},
        {"name": "MODE", "value": "prod"},
    ]
    command = results[0].data["objects"][0]["spec"]["containers"][0]["command"]
    assert command == ["server", "--password=[redacted]", "--token", "[redacted]"]
    assert results[3].data["objects"][0]["data"]["mode"] == "prod"


def test_secret_values_stay_hidden_in_every_output(web: KubeEnv):
    value = base64.b64encode(b"s3cret-value-1").decode()
    web.seed(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "db",
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
                        {"stringData": {"password": "s3cret-value-1"}}
                    )
                },
            },
            "type": "Opaque",
            "data": {"password": value},
        }
    )
    for res in (
        web.run("kubectl_get", kind="secrets", output="json"),
        web.run("kubectl_get", kind="secret", name="db", output="yaml"),
        web.run("kubectl_describe", kind="secret", name="db"),
        web.run("kubectl_get", kind="secrets"),
    ):
        assert res.ok, res.content
        shown = res.content + json.dumps(res.data)
        assert value not in shown and "s3cret-value-1" not in shown, res.content


def test_apply_preview_masks_credentials_in_the_diff(web: KubeEnv):
    manifest = yaml.safe_dump(leaky_pod() | {"status": {}})
    preview = web.preview("kubectl_apply", manifest=manifest)
    assert preview is not None and "create pods/leaky" in preview
    assert not [leak for leak in LEAKS if leak in preview], preview
    assert "--password=[redacted]" in preview


# ---- approval: cluster, namespace and one-line summary ------------------------------------------


def test_changing_tools_name_their_cluster_and_summarise_the_call(kube: KubeEnv):
    registry = kube.runner.registry
    manifests = {m.name: m for m in registry.manifests() if m.category == "kubectl"}
    for name in CHANGES:
        assert manifests[name].subject and manifests[name].summary_line, name
    for name in READS:
        assert manifests[name].summary_line is None, name
    ctx = kube.tool_context()

    def hooks(tool: str, **args: Any) -> tuple[Any, str]:
        _, params = kube.runner.validate(tool, args)
        subject = registry.resolve_hook(tool, "subject")(params, ctx)
        return subject, registry.resolve_hook(tool, "summary_line")(params, ctx)

    subject, line = hooks("kubectl_scale", name="api", replicas=3, namespace="staging")
    assert subject.account == f"Kubernetes · {kube.context}"
    assert subject.target == f"Kubernetes · {kube.context} · namespace staging"
    assert line == f"Scale deployment api to 3 replicas in {kube.context}/staging"
    _, delete = hooks("kubectl_delete", kind="deployment.apps", name="web")
    assert delete == f"Delete deployment web in {kube.context}/{kube.namespace}"
    subject, gone = hooks("kubectl_delete", kind="ns", name="shop")
    assert gone == f"Delete ns shop on {kube.context}" and "namespace" not in subject.target
    _, restart = hooks("kubectl_rollout_restart", name="api")
    assert restart == f"Restart the pods of deployment api in {kube.context}/{kube.namespace}"
    _, run = hooks("kubectl_exec", pod="web-1", command=["psql", f"--password={GHP}"])
    assert run == (
        f"Run `psql '--password=[redacted]'` in pod web-1 in {kube.context}/{kube.namespace}"
    )
    manifest = yaml.safe_dump_all([deployment("api"), deployment("worker")])
    _, apply = hooks("kubectl_apply", manifest=manifest)
    assert apply == (
        f"Create or update Deployment api, Deployment worker in {kube.context}/{kube.namespace}"
    )
    subject, other = hooks("kubectl_scale", name="api", replicas=1, context="expired")
    assert subject.account == "Kubernetes · expired" and "1 replica in expired/" in other


def test_approval_hooks_send_nothing_to_the_cluster(web: KubeEnv):
    fake = web.need_fake("counts requests")
    before = len(fake.requests)
    ctx = web.tool_context()
    registry = web.runner.registry
    for tool, args in (
        ("kubectl_delete", {"kind": "pod", "name": "logger"}),
        ("kubectl_exec", {"pod": "logger", "command": ["rm", "-rf", "/"]}),
    ):
        _, params = web.runner.validate(tool, args)
        registry.resolve_hook(tool, "subject")(params, ctx)
        registry.resolve_hook(tool, "summary_line")(params, ctx)
    assert len(fake.requests) == before
    assert fake.get("pods", web.namespace, "logger") is not None


def test_top_without_metrics_says_so(kube: KubeEnv):
    kube.need_fake("a real cluster may have metrics-server")
    res = kube.run("kubectl_top", resource="pods")
    assert not res.ok
    assert "no metrics API (metrics.k8s.io); install metrics-server" in res.content


def test_top_pods_and_nodes(kube: KubeEnv):
    fake = kube.need_fake("serves seeded metrics")
    fake.metrics = True
    kube.seed(
        {
            "apiVersion": "metrics.k8s.io/v1beta1",
            "kind": "PodMetrics",
            "metadata": {"name": "web-a"},
            "containers": [{"name": "web", "usage": {"cpu": "250m", "memory": "64Mi"}}],
        },
        {
            "apiVersion": "metrics.k8s.io/v1beta1",
            "kind": "PodMetrics",
            "metadata": {"name": "web-b"},
            "containers": [{"name": "web", "usage": {"cpu": "500000000n", "memory": "32768Ki"}}],
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "node-1"},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi"}},
        },
        {
            "apiVersion": "metrics.k8s.io/v1beta1",
            "kind": "NodeMetrics",
            "metadata": {"name": "node-1"},
            "usage": {"cpu": "1", "memory": "1Gi"},
        },
    )
    pods = kube.run("kubectl_top", sort_by="cpu")
    assert pods.ok, pods.content
    assert [(r["name"], r["cpu_m"], r["memory_mi"]) for r in pods.data["items"]] == [
        ("web-b", 500, 32),
        ("web-a", 250, 64),
    ]
    nodes = kube.run("kubectl_top", resource="nodes")
    assert nodes.content.splitlines()[2].split() == ["node-1", "1000m", "50%", "1024Mi", "25%"]


# ---- end to end through the CLI -----------------------------------------------------------


def _ask(kube: KubeEnv, llm: ScriptedLLM, *flags: str) -> list[dict]:
    from tests.test_cli import deskhand, deskhand_env, events_of

    home = kube.home / "cli"
    home.mkdir(exist_ok=True)
    env = deskhand_env(KUBECONFIG=kube.kubeconfig, HOME=str(home))
    proc = deskhand(
        "--home",
        str(home),
        "ask",
        "scale web to 3",
        "--base-url",
        llm.openai_base_url,
        "--model",
        "m",
        "--json",
        *flags,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    return events_of(proc.stdout)


def _script(llm: ScriptedLLM, kube: KubeEnv) -> None:
    args = {"name": "web", "replicas": 3, "namespace": kube.namespace, "context": kube.context}
    llm.add(tool_calls(("s1", "kubectl_scale", args)))
    llm.add(text("Done."))


def test_cli_scale_with_yes_reaches_the_api_server(web: KubeEnv, llm: ScriptedLLM):
    _script(llm, web)
    events = _ask(web, llm, "--yes")
    (approval,) = [e for e in events if e["type"] == "approval"]
    assert approval["decision"] != "deny"
    (result,) = [e for e in events if e["type"] == "tool_result"]
    assert result["ok"], result["content"]
    assert "scaled from 2 to 3 replicas" in result["content"]
    got = web.run("kubectl_get", kind="deploy", name="web", output="json")
    assert got.data["objects"][0]["spec"]["replicas"] == 3
    if web.fake:
        patches = web.fake.find("PATCH", "/deployments/web/scale")
        assert [p.body for p in patches] == [{"spec": {"replicas": 3}}]


def test_cli_scale_without_yes_is_denied_and_changes_nothing(web: KubeEnv, llm: ScriptedLLM):
    _script(llm, web)
    events = _ask(web, llm)
    assert [e["decision"] for e in events if e["type"] == "approval"] == ["deny"]
    (result,) = [e for e in events if e["type"] == "tool_result"]
    assert not result["ok"] and "declined" in result["content"]
    got = web.run("kubectl_get", kind="deploy", name="web", output="json")
    assert got.data["objects"][0]["spec"]["replicas"] == 2
    if web.fake:
        assert web.fake.writes() == []
