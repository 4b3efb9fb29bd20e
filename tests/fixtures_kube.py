"""A Kubernetes API server emulator over real HTTP on 127.0.0.1, and the `kube` fixture.

`FakeKube` speaks enough of the Kubernetes REST protocol for the kubernetes client and the
kubectl tools to run unchanged against it (stdlib + PyYAML only):

* discovery: ``/version``, ``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>[/<version>]``
  (classic lists; aggregated discovery when ``aggregated=True``)
* objects of every served type (built-ins, a custom resource ``widgets.example.com``, the
  metrics API when ``metrics=True``): list (label and field selectors, limit), get, create,
  update, patch (JSON merge, strategic merge by ``name``, server-side apply treated as a
  strategic merge), delete (finalizers → deletionTimestamp), ``dryRun=All``
* subresources: ``*/scale`` (get/patch/put), ``pods/log`` (container, tailLines, previous),
  ``pods/exec`` over a websocket (v4 channel protocol)
* bearer-token auth (401) and RBAC denials injected with `forbid` (403, the API server's
  wording); a tiny "controller" makes workload status follow spec unless `controllers` is off

Every request is recorded (`requests`, `find`) so tests can assert what was sent.

The `kube` fixture yields a `KubeEnv`: a kubeconfig with the contexts ``fake`` (this server),
``expired`` (a token the server rejects) and ``dead`` (a port nothing listens on), plus
helpers to seed objects and run tools through the real registry and runner. With
``DESKHAND_TEST_KUBECONFIG`` set, the same tests run against that cluster instead (in a
throw-away namespace) and skip what needs the recorder or injected failures.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import hashlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

TOKEN = "fake-token-0123456789"
USER = "jane"
Obj = dict[str, Any]


# ---- served types ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
BUILTIN = (
    Kind("", "v1", "namespaces", "Namespace", False, ("ns",), ("status",)),
    Kind("", "v1", "nodes", "Node", False, ("no",), ("status",)),
    Kind("", "v1", "pods", "Pod", True, ("po",), ("exec", "log", "status")),
    Kind("", "v1", "services", "Service", True, ("svc",), ("status",)),
    Kind("", "v1", "events", "Event", True, ("ev",)),
    Kind("", "v1", "configmaps", "ConfigMap", True, ("cm",)),
    Kind("", "v1", "secrets", "Secret", True),
    Kind("apps", "v1", "deployments", "Deployment", True, ("deploy",), ("scale", "status")),
    Kind("apps", "v1", "statefulsets", "StatefulSet", True, ("sts",), ("scale", "status")),
    Kind("apps", "v1", "replicasets", "ReplicaSet", True, ("rs",), ("scale", "status")),
    Kind("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",), ("status",)),
    Kind("example.com", "v1", "widgets", "Widget", True, ("wd",)),  # a custom resource
)
METRICS = (
    Kind("metrics.k8s.io", "v1beta1", "pods", "PodMetrics"),
    Kind("metrics.k8s.io", "v1beta1", "nodes", "NodeMetrics", False),
)
WORKLOADS = {"Deployment", "StatefulSet", "ReplicaSet"}


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # names lower-cased
    body: Any  # parsed JSON/YAML, else the text, None without a body

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None


class KubeError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: Obj | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> Obj:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": self.details or {},
            "code": self.code,
        }


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- merging and selecting -----------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strategic_merge(target: Any, patch: Any) -> Any:
    """A strategic merge patch for the common case: lists of named items merge by name."""
    if isinstance(patch, dict):
        out = dict(target) if isinstance(target, dict) else {}
        for key, value in patch.items():
            if key.startswith("$"):
                continue
            if value is None:
                out.pop(key, None)
            else:
                out[key] = strategic_merge(out.get(key), value)
        return out
    named = isinstance(target, list) and all(
        isinstance(i, dict) and "name" in i for i in [*target, *(patch or [])]
    )
    if isinstance(patch, list) and named and patch:
        merged = copy.deepcopy(target)
        where = {item["name"]: n for n, item in enumerate(merged)}
        for item in patch:
            if item["name"] in where:
                merged[where[item["name"]]] = strategic_merge(merged[where[item["name"]]], item)
            else:
                merged.append(copy.deepcopy(item))
        return merged
    return copy.deepcopy(patch)


def _terms(selector: str) -> list[str]:
    return [t.strip() for t in re.split(r",(?![^(]*\))", selector) if t.strip()]


def labels_match(labels: dict[str, str], selector: str | None) -> bool:
    for term in _terms(selector or ""):
        if m := re.fullmatch(r"(\S+)\s+(in|notin)\s+\((.*)\)", term):
            values = {v.strip() for v in m[3].split(",")}
            inside = labels.get(m[1]) in values
            if inside != (m[2] == "in"):
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = re.split("==?", term, maxsplit=1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _field(obj: Obj, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def fields_match(obj: Obj, selector: str | None) -> bool:
    for term in _terms(selector or ""):
        if "!=" in term:
            path, value = term.split("!=", 1)
            if _field(obj, path.strip()) == value.strip():
                return False
        else:
            path, value = re.split("==?", term, maxsplit=1)
            if _field(obj, path.strip()) != value.strip():
                return False
    return True


# ---- the server --------------------------------------------------------------------------------


@dataclass
class Route:
    kind: Kind
    namespace: str | None
    name: str | None
    sub: str


ExecFn = Callable[[list[str]], tuple[str, str, int]]


#: What a container runtime answers when the program to exec does not exist in the image.
NO_SUCH_PROGRAM = (
    "OCI runtime exec failed: exec failed: unable to start container process: exec: "
    '"{0}": stat {0}: no such file or directory: unknown'
)


class NotStarted(Exception):
    """The runtime could not start the program (the Status is a Failure with no exit code)."""


def _echo(command: list[str]) -> tuple[str, str, int]:
    """The default exec behaviour, a container without a shell: `echo …` prints, `false`
    fails, a shell cannot start, anything else is unknown."""
    if command[0] in ("/bin/sh", "sh"):
        raise NotStarted(NO_SUCH_PROGRAM.format(command[0]))
    if command[:1] == ["echo"]:
        return " ".join(command[1:]) + "\n", "", 0
    if command[:1] == ["false"]:
        return "", "", 1
    return "", f"{command[0]}: not found\n", 127


@dataclass
class FakeKube:
    token: str = TOKEN
    user: str = USER
    aggregated: bool = False
    metrics: bool = False
    #: Workload status follows spec at once (a rollout finishes instantly) while True.
    controllers: bool = True
    objects: dict[tuple[str, str, str, str], Obj] = field(default_factory=dict)
    logs: dict[tuple[str, str, str], str] = field(default_factory=dict)
    exec_fn: ExecFn = _echo
    #: Exec runs the command as a real process on this machine (the "container"), streaming
    #: its output; like a real kubelet, a closed exec stream does not end it.
    exec_processes: bool = False
    #: With exec_processes: False makes the "image" shell-less (/bin/sh cannot be started).
    exec_shell: bool = True
    #: With exec_processes: a command containing this text hangs instead of running (a
    #: container too busy to answer, a kill that never gets anywhere).
    exec_stall: str | None = None
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    _forbidden: list[tuple[str, str, str | None]] = field(default_factory=list)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _rv: int = 1000
    _server: ThreadingHTTPServer | None = None

    # ---- lifecycle ---------------------------------------------------------------------

    def start(self) -> FakeKube:
        fake = self

        class Handler(_Handler):
            server_fake = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        # The "container" first: a request thread waits for its exec'd process, and closing
        # the server waits for request threads.
        for proc in self.processes:  # what a test left running in the "container"
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeKube:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # ---- test helpers -------------------------------------------------------------------

    @property
    def types(self) -> tuple[Kind, ...]:
        return BUILTIN + (METRICS if self.metrics else ())

    def type_of(self, api_version: str, kind: str) -> Kind:
        for t in self.types:
            if t.group_version == api_version and t.kind == kind:
                return t
        raise KeyError(f"{api_version} {kind}")

    def put(self, obj: Obj) -> Obj:
        """Store an object as if it had been created (no request recorded)."""
        t = self.type_of(obj["apiVersion"], obj["kind"])
        with self._lock:
            stored = self._fill(t, copy.deepcopy(obj), obj.get("metadata", {}).get("namespace"))
            self.objects[self._key(t, stored)] = stored
            self._settle(stored)
            return stored

    def get(self, plural: str, namespace: str | None, name: str, group: str = "") -> Obj | None:
        return self.objects.get((group, plural, namespace or "", name))

    def forbid(self, verb: str, resource: str, namespace: str | None = None) -> None:
        """Deny `verb` on `resource` ("pods", "deployments/scale") like RBAC would."""
        self._forbidden.append((verb, resource, namespace))

    def find(self, method: str, path_end: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path.endswith(path_end)]

    def writes(self) -> list[Recorded]:
        return [r for r in self.requests if r.method in ("POST", "PUT", "PATCH", "DELETE")]

    # ---- object store -------------------------------------------------------------------

    @staticmethod
    def _key(t: Kind, obj: Obj) -> tuple[str, str, str, str]:
        meta = obj["metadata"]
        return (t.group, t.plural, meta.get("namespace", "") if t.namespaced else "", meta["name"])

    def _fill(self, t: Kind, obj: Obj, namespace: str | None) -> Obj:
        self._rv += 1
        meta = obj.setdefault("metadata", {})
        if t.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        meta["resourceVersion"] = str(self._rv)
        meta.setdefault("generation", 1)
        obj["apiVersion"], obj["kind"] = t.group_version, t.kind
        return obj

    def _settle(self, obj: Obj) -> None:
        if not self.controllers or obj["kind"] not in WORKLOADS:
            return
        replicas = int(obj.get("spec", {}).get("replicas", 1))
        status = obj.setdefault("status", {})
        status.update(
            observedGeneration=obj["metadata"]["generation"],
            replicas=replicas,
            readyReplicas=replicas,
            updatedReplicas=replicas,
            availableReplicas=replicas,
        )
        if obj["kind"] == "StatefulSet":
            status["currentRevision"] = status["updateRevision"] = "rev-1"

    # ---- request handling -----------------------------------------------------------------

    def handle(self, method: str, target: str, headers: dict[str, str], raw: bytes):
        """(status, content type, body bytes) for one request, or ("exec", route) to upgrade."""
        parts = urlsplit(target)
        query = parse_qs(parts.query, keep_blank_values=True)
        body = _decode(raw, headers.get("content-type", ""))
        with self._lock:
            self.requests.append(Recorded(method, parts.path, query, headers, body))
        try:
            if headers.get("authorization") != f"Bearer {self.token}":
                raise KubeError(401, "Unauthorized", "Unauthorized")
            with self._lock:
                return self._dispatch(method, parts.path, query, headers, body)
        except KubeError as exc:
            return exc.code, "application/json", json.dumps(exc.status()).encode()

    def _dispatch(self, method, path, query, headers, body):
        discovery = self._discovery(path, headers.get("accept", ""))
        if discovery is not None:
            if method != "GET":
                raise KubeError(405, "MethodNotAllowed", "method not allowed")
            return 200, "application/json", json.dumps(discovery).encode()
        route = self._route(path)
        verb = {
            "GET": "get" if route.name else "list",
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete" if route.name else "deletecollection",
        }[method]
        if route.sub == "exec":
            verb = "create"
        self._authorize(verb, route)
        if route.sub == "exec":
            return "exec", route
        if route.sub == "log":
            return 200, "text/plain", self._log(route, query).encode()
        answer = self._object_call(method, route, query, headers, body)
        return 200, "application/json", json.dumps(answer).encode()

    def _authorize(self, verb: str, route: Route) -> None:
        resource = f"{route.kind.plural}/{route.sub}" if route.sub else route.kind.plural
        for f_verb, f_resource, f_ns in self._forbidden:
            if f_verb == verb and f_resource == resource and f_ns in (None, route.namespace):
                where = (
                    f'in the namespace "{route.namespace}"'
                    if route.namespace
                    else "at the cluster scope"
                )
                subject = f'{route.kind.qualified} "{route.name}"' if route.name else resource
                raise KubeError(
                    403,
                    "Forbidden",
                    f'{subject} is forbidden: User "{self.user}" cannot {verb} resource '
                    f'"{resource}" in API group "{route.kind.group}" {where}',
                    {"name": route.name, "group": route.kind.group, "kind": route.kind.plural},
                )

    # ---- discovery --------------------------------------------------------------------------

    def _discovery(self, path: str, accept: str) -> Obj | None:
        parts = [p for p in path.split("/") if p]
        aggregated = self.aggregated and "as=APIGroupDiscoveryList" in accept
        if parts == ["version"]:
            return {"major": "1", "minor": "31", "gitVersion": "v1.31.0-fake"}
        if parts == ["api"]:
            if aggregated:
                return self._aggregated(core=True)
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if parts == ["apis"]:
            if aggregated:
                return self._aggregated(core=False)
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": self._groups()}
        if parts == ["api", "v1"]:
            return self._resource_list("", "v1")
        if len(parts) == 2 and parts[0] == "apis":
            for group in self._groups():
                if group["name"] == parts[1]:
                    return {"kind": "APIGroup", "apiVersion": "v1", **group}
            raise KubeError(404, "NotFound", "the server could not find the requested resource")
        if len(parts) == 3 and parts[0] == "apis":
            found = self._resource_list(parts[1], parts[2])
            if not found["resources"]:
                raise KubeError(404, "NotFound", "the server could not find the requested resource")
            return found
        return None

    def _groups(self) -> list[Obj]:
        out: dict[str, Obj] = {}
        for t in self.types:
            if t.group:
                gv = {"groupVersion": t.group_version, "version": t.version}
                out.setdefault(t.group, {"name": t.group, "versions": [gv], "preferredVersion": gv})
        return list(out.values())

    def _resource_list(self, group: str, version: str) -> Obj:
        resources = []
        for t in self.types:
            if t.group != group or t.version != version:
                continue
            base = {"namespaced": t.namespaced, "kind": t.kind}
            resources.append(
                {
                    "name": t.plural,
                    "singularName": t.kind.lower(),
                    "shortNames": list(t.short_names),
                    "verbs": VERBS,
                    **base,
                }
            )
            for sub in t.subresources:
                kind = "Scale" if sub == "scale" else t.kind
                resources.append({"name": f"{t.plural}/{sub}", **base, "kind": kind, "verbs": []})
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "groupVersion": gv, "resources": resources}

    def _aggregated(self, *, core: bool) -> Obj:
        items: dict[str, Obj] = {}
        for t in self.types:
            if (t.group == "") != core:
                continue
            item = items.setdefault(
                t.group,
                {
                    "metadata": {"name": t.group},
                    "versions": [{"version": t.version, "resources": []}],
                },
            )
            item["versions"][0]["resources"].append(
                {
                    "resource": t.plural,
                    "responseKind": {"group": t.group, "version": t.version, "kind": t.kind},
                    "scope": "Namespaced" if t.namespaced else "Cluster",
                    "singularResource": t.kind.lower(),
                    "shortNames": list(t.short_names),
                    "verbs": VERBS,
                    "subresources": [{"subresource": s} for s in t.subresources],
                }
            )
        return {
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2",
            "items": list(items.values()),
        }

    # ---- objects ------------------------------------------------------------------------------

    def _route(self, path: str) -> Route:
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise KubeError(404, "NotFound", "the server could not find the requested resource")
        served = {t.plural: t for t in self.types if t.group == group and t.version == version}
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] in served:
            namespace, rest = rest[1], rest[2:]
        kind = served.get(rest[0])
        if kind is None or len(rest) > 3 or (len(rest) == 3 and rest[2] not in kind.subresources):
            raise KubeError(404, "NotFound", "the server could not find the requested resource")
        return Route(
            kind, namespace, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else ""
        )

    def _not_found(self, route: Route) -> KubeError:
        t = route.kind
        return KubeError(
            404,
            "NotFound",
            f'{t.qualified} "{route.name}" not found',
            {"name": route.name, "group": t.group, "kind": t.plural},
        )

    def _stored(self, route: Route) -> Obj:
        key = (route.kind.group, route.kind.plural, route.namespace or "", route.name or "")
        obj = self.objects.get(key)
        if obj is None:
            raise self._not_found(route)
        return obj

    def _object_call(self, method: str, route: Route, query, headers, body) -> Obj:
        dry = (query.get("dryRun") or [""])[0] == "All"
        if method == "GET" and route.name is None:
            return self._list(route, query)
        if method == "GET":
            obj = self._stored(route)
            return _scale_of(obj) if route.sub == "scale" else obj
        if method == "POST":
            return self._create(route, body, dry)
        if method == "DELETE":
            return self._delete(route, dry)
        content_type = headers.get("content-type", "").split(";")[0]
        if route.sub == "scale":
            return self._scale(route, method, body, content_type, dry)
        if method == "PUT":
            return self._update(route, body, dry)
        return self._patch(route, body, content_type, query, dry)

    def _list(self, route: Route, query) -> Obj:
        t = route.kind
        labels = (query.get("labelSelector") or [None])[0]
        fields = (query.get("fieldSelector") or [None])[0]
        items = [
            copy.deepcopy(o)
            for (g, p, ns, _), o in sorted(self.objects.items())
            if (g, p) == (t.group, t.plural)
            and (route.namespace is None or ns == route.namespace)
            and labels_match(o.get("metadata", {}).get("labels") or {}, labels)
            and fields_match(o, fields)
        ]
        for item in items:  # list items carry no kind/apiVersion, like the real server's
            item.pop("kind", None)
            item.pop("apiVersion", None)
        meta: Obj = {"resourceVersion": str(self._rv)}
        limit = int((query.get("limit") or ["0"])[0] or 0)
        if limit and len(items) > limit:
            meta |= {"continue": "more", "remainingItemCount": len(items) - limit}
            items = items[:limit]
        return {
            "kind": f"{t.kind}List",
            "apiVersion": t.group_version,
            "metadata": meta,
            "items": items,
        }

    def _create(self, route: Route, body: Any, dry: bool) -> Obj:
        if not isinstance(body, dict) or not body.get("metadata", {}).get("name"):
            raise KubeError(422, "Invalid", "metadata.name: Required value")
        t = route.kind
        key = (
            t.group,
            t.plural,
            (route.namespace or "") if t.namespaced else "",
            body["metadata"]["name"],
        )
        if key in self.objects:
            raise KubeError(
                409, "AlreadyExists", f'{t.qualified} "{body["metadata"]["name"]}" already exists'
            )
        obj = self._fill(t, copy.deepcopy(body), route.namespace)
        self._settle(obj)
        if not dry:
            self.objects[key] = obj
        return obj

    def _commit(self, route: Route, before: Obj, after: Obj, dry: bool) -> Obj:
        after = copy.deepcopy(after)  # merges share unchanged parts with the stored object
        meta = after.setdefault("metadata", {})
        for keep in ("uid", "creationTimestamp", "name", "namespace"):
            if keep in before["metadata"]:
                meta[keep] = before["metadata"][keep]
        meta["generation"] = before["metadata"].get("generation", 1) + (
            before.get("spec") != after.get("spec")
        )
        after["apiVersion"], after["kind"] = before["apiVersion"], before["kind"]
        if after == before:
            return after
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        self._settle(after)
        if not dry:
            key = (route.kind.group, route.kind.plural, route.namespace or "", route.name or "")
            self.objects[key] = after
        return after

    def _update(self, route: Route, body: Any, dry: bool) -> Obj:
        before = self._stored(route)
        return self._commit(route, before, copy.deepcopy(body), dry)

    def _patch(self, route: Route, body: Any, content_type: str, query, dry: bool) -> Obj:
        t = route.kind
        if content_type == "application/apply-patch+yaml":
            if not (query.get("fieldManager") or [""])[0]:
                raise KubeError(400, "BadRequest", "fieldManager is required for apply requests")
            try:
                before = self._stored(route)
            except KubeError:
                return self._create(route, body, dry)
            return self._commit(route, before, strategic_merge(before, body), dry)
        before = self._stored(route)
        if content_type == "application/merge-patch+json":
            return self._commit(route, before, merge_patch(before, body), dry)
        if content_type == "application/strategic-merge-patch+json":
            if t.group not in ("", "apps"):
                raise KubeError(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json-patch+json, application/merge-patch+json, "
                    "application/apply-patch+yaml",
                )
            return self._commit(route, before, strategic_merge(before, body), dry)
        raise KubeError(415, "UnsupportedMediaType", f"unsupported patch type {content_type}")

    def _scale(self, route: Route, method: str, body: Any, content_type: str, dry: bool) -> Obj:
        before = self._stored(route)
        scale = _scale_of(before)
        changed = merge_patch(scale, body) if method == "PATCH" else body
        replicas = int((changed.get("spec") or {}).get("replicas", 0))
        after = merge_patch(before, {"spec": {"replicas": replicas}})
        return _scale_of(self._commit(route, before, after, dry))

    def _delete(self, route: Route, dry: bool) -> Obj:
        obj = self._stored(route)
        key = (route.kind.group, route.kind.plural, route.namespace or "", route.name or "")
        if obj["metadata"].get("finalizers"):
            marked = merge_patch(obj, {"metadata": {"deletionTimestamp": _now()}})
            if not dry:
                self.objects[key] = marked
            return marked
        if not dry:
            del self.objects[key]
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": route.name, "group": route.kind.group, "kind": route.kind.plural},
        }

    def _log(self, route: Route, query) -> str:
        pod = self._stored(route)
        names = [c["name"] for c in pod.get("spec", {}).get("containers", [])]
        container = (query.get("container") or [None])[0]
        if container is None:
            if len(names) != 1:
                raise KubeError(
                    400,
                    "BadRequest",
                    f"a container name must be specified for pod {route.name}, choose one of: "
                    f"[{' '.join(names)}]",
                )
            container = names[0]
        elif container not in names:
            raise KubeError(
                400, "BadRequest", f"container {container} is not valid for pod {route.name}"
            )
        which = container + (":previous" if (query.get("previous") or [""])[0] == "true" else "")
        text = self.logs.get((route.namespace or "", route.name or "", which))
        if text is None and which.endswith(":previous"):
            raise KubeError(
                400,
                "BadRequest",
                f'previous terminated container "{container}" in pod "{route.name}" not found',
            )
        lines = (text or "").splitlines(keepends=True)
        tail = int((query.get("tailLines") or ["0"])[0] or 0)
        return "".join(lines[-tail:] if tail else lines)


def _scale_of(obj: Obj) -> Obj:
    meta = obj["metadata"]
    replicas = int(obj.get("spec", {}).get("replicas", 1))
    labels = (obj.get("spec", {}).get("selector") or {}).get("matchLabels") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta},
        "spec": {"replicas": replicas},
        "status": {
            "replicas": int(obj.get("status", {}).get("replicas", 0)),
            "selector": ",".join(f"{k}={v}" for k, v in labels.items()),
        },
    }


def _decode(raw: bytes, content_type: str) -> Any:
    if not raw:
        return None
    text = raw.decode("utf-8", "replace")
    try:
        if "yaml" in content_type:
            return yaml.safe_load(text)
        return json.loads(text)
    except (ValueError, yaml.YAMLError):
        return text


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_fake: FakeKube

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        answer = self.server_fake.handle(self.command, self.path, headers, raw)
        if answer[0] == "exec":
            self._exec(answer[1], headers)
            return
        code, content_type, body = answer
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    # ---- exec over a websocket (v4.channel.k8s.io) ------------------------------------------

    def _exec(self, route: Route, headers: dict[str, str]) -> None:
        fake = self.server_fake
        query = parse_qs(urlsplit(self.path).query)
        command = query.get("command") or []
        if headers.get("upgrade", "").lower() != "websocket" or not command:
            body = b'{"kind":"Status","code":400,"message":"exec needs a websocket and a command"}'
            self.send_response(400)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        with fake._lock:
            fake._stored(route)  # 404 before upgrading when the pod is missing
        accept = base64.b64encode(
            hashlib.sha1(
                (headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()
            ).digest()
        ).decode()
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", "v4.channel.k8s.io")
        self.end_headers()
        run = self._exec_process if fake.exec_processes else self._exec_fn
        status = run(command)
        self.close_connection = True
        with contextlib.suppress(OSError):  # the client may have gone (a cancelled exec)
            self.wfile.write(_frame(b"\x03" + json.dumps(status).encode()))
            self.wfile.write(_frame(b"\x03\xe8", opcode=0x8))  # close, 1000
            self.wfile.flush()


    def _exec_fn(self, command: list[str]) -> Obj:
        try:
            stdout, stderr, code = self.server_fake.exec_fn(command)
        except NotStarted as exc:
            return {"metadata": {}, "status": "Failure", "message": str(exc)}
        for channel, data in ((1, stdout.encode()), (2, stderr.encode())):
            if data:
                self.wfile.write(_frame(bytes([channel]) + data))
        return _exit_status(code)

    def _exec_process(self, command: list[str]) -> Obj:
        """Runs `command` for real and streams its output as it comes; a client that goes
        away stops the streaming, never the process."""
        if not self.server_fake.exec_shell and command[0] in ("/bin/sh", "sh"):
            message = NO_SUCH_PROGRAM.format(command[0])
            return {"metadata": {}, "status": "Failure", "message": message}
        stall = self.server_fake.exec_stall
        if stall is not None and any(stall in word for word in command):
            command = ["sleep", "600"]
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError:
            message = NO_SUCH_PROGRAM.format(command[0])
            return {"metadata": {}, "status": "Failure", "message": message}
        self.server_fake.processes.append(proc)
        lock = threading.Lock()

        def pump(pipe: Any, channel: int) -> None:
            for chunk in iter(lambda: pipe.read1(4096), b""):
                with lock, contextlib.suppress(OSError):
                    self.wfile.write(_frame(bytes([channel]) + chunk))
                    self.wfile.flush()

        readers = [
            threading.Thread(target=pump, args=(proc.stdout, 1), daemon=True),
            threading.Thread(target=pump, args=(proc.stderr, 2), daemon=True),
        ]
        for reader in readers:
            reader.start()
        code = proc.wait()
        for reader in readers:
            reader.join()
        return _exit_status(code if code >= 0 else 128 - code)


def _exit_status(code: int) -> Obj:
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def _frame(payload: bytes, opcode: int = 0x2) -> bytes:
    """One unmasked server-to-client websocket frame."""
    head = bytes([0x80 | opcode])
    size = len(payload)
    if size < 126:
        head += bytes([size])
    elif size < 2**16:
        head += bytes([126]) + size.to_bytes(2, "big")
    else:
        head += bytes([127]) + size.to_bytes(8, "big")
    return head + payload


# ---- kubeconfig and the fixture ------------------------------------------------------------------


#: Longest a tool call in these tests may take (the runner then stops it and says so).
CALL_SECONDS = 90.0


def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_kubeconfig(path: Path, server: str | None, *, token: str = TOKEN) -> Path:
    """Contexts `fake` (current; `server`), `expired` (same server, a rejected token) and
    `dead` (nothing listens). Without `server` only `dead` is written."""
    clusters = [{"name": "dead", "cluster": {"server": f"http://127.0.0.1:{dead_port()}"}}]
    users = [{"name": "tester", "user": {"token": token}}]
    contexts = [{"name": "dead", "context": {"cluster": "dead", "user": "tester"}}]
    current = "dead"
    if server:
        clusters.append({"name": "fake", "cluster": {"server": server}})
        users.append({"name": "stale", "user": {"token": "expired-token"}})
        contexts += [
            {
                "name": "fake",
                "context": {"cluster": "fake", "user": "tester", "namespace": "default"},
            },
            {"name": "expired", "context": {"cluster": "fake", "user": "stale"}},
        ]
        current = "fake"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": current,
        "clusters": clusters,
        "users": users,
        "contexts": contexts,
    }
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class KubeEnv:
    """What a kubectl test works with; the same API for the fake and a real cluster."""

    kubeconfig: str  # a path, or a path list (real cluster + the dead context)
    context: str
    namespace: str
    home: Path
    fake: FakeKube | None = None
    _runner: Any = None

    @property
    def real(self) -> bool:
        return self.fake is None

    def need_fake(self, why: str) -> FakeKube:
        if self.fake is None:
            pytest.skip(f"needs the fake API server: {why}")
        return self.fake

    # ---- the real registry and runner -----------------------------------------------------

    @property
    def runner(self) -> Any:
        if self._runner is None:
            from tools.registry import ToolRegistry
            from tools.runner import ToolRunner

            self._runner = ToolRunner(ToolRegistry.default(None, entry_points=False))
        return self._runner

    def account(self, _integration: str = "kubernetes") -> Any:
        from integrations.spec import Account

        fields = {
            "context": self.context,
            "kubeconfig": self.kubeconfig,
            "namespace": self.namespace,
        }
        return Account(f"context:{self.context}", "kubernetes", self.context, fields)

    def tool_context(self) -> Any:
        from tools.spec import ToolContext

        return ToolContext(home=self.home, account_resolver=self.account, integration="kubernetes")

    def run(self, tool: str, **args: Any) -> Any:
        """Call a tool through the runner (validation, thread pool, cap, redaction); a call
        that hangs fails the test after CALL_SECONDS instead of stalling the run."""
        return asyncio.run(
            self.runner.run(tool, args, self.tool_context(), timeout=CALL_SECONDS)
        )

    def preview(self, tool: str, **args: Any) -> str | None:
        manifest, params = self.runner.validate(tool, args)
        from tools.runner import always_asks

        found = self.runner.classify(manifest, params, self.tool_context(), asks=always_asks)
        return asyncio.run(found).preview

    # ---- seeding (fake: straight into the store; real: created through the API) -------------

    def seed(self, *objects: Obj, logs: dict[str, str] | None = None) -> None:
        """Create objects in the test namespace. `logs` (pod name → text) feeds the fake; on a
        real cluster the seeded pods print it themselves and are waited for."""
        objects = tuple(_in_namespace(o, self.namespace) for o in objects)
        if self.fake is not None:
            for obj in objects:
                self.fake.put(obj)
            for pod, text in (logs or {}).items():
                stored = self.fake.get("pods", self.namespace, pod) or {}
                for c in stored.get("spec", {}).get("containers", []):
                    self.fake.logs[(self.namespace, pod, c["name"])] = text
            return
        _seed_real(self, objects)


def _in_namespace(obj: Obj, namespace: str) -> Obj:
    obj = copy.deepcopy(obj)
    if obj["kind"] not in ("Namespace", "Node"):
        obj.setdefault("metadata", {})["namespace"] = namespace
    return obj


def _seed_real(env: KubeEnv, objects: tuple[Obj, ...]) -> None:  # pragma: no cover - real only
    from kubernetes import client, dynamic, watch

    from integrations.kube_client import api_client

    api = api_client(env.account())
    dyn = dynamic.DynamicClient(api)
    for obj in objects:
        resource = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        dyn.create(resource, body=obj, namespace=env.namespace)
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    waits = {
        "Pod": (core.list_namespaced_pod, lambda o: o.status.phase == "Running"),
        "Deployment": (
            apps.list_namespaced_deployment,
            lambda o: (o.status.available_replicas or 0) == o.spec.replicas,
        ),
    }
    for obj in objects:  # a real cluster needs time to start what was seeded: watch for it
        if obj["kind"] not in waits:
            continue
        list_fn, ready = waits[obj["kind"]]
        stream = watch.Watch().stream(
            list_fn,
            env.namespace,
            field_selector=f"metadata.name={obj['metadata']['name']}",
            timeout_seconds=180,
        )
        for event in stream:
            if ready(event["object"]):
                break


def _real_env(tmp_path: Path, home: Path, kubeconfig: str) -> Iterator[KubeEnv]:  # pragma: no cover
    from kubernetes import client

    from integrations.kube_client import api_client
    from integrations.kubernetes import read_kubeconfig

    context = (
        os.environ.get("DESKHAND_TEST_CONTEXT") or read_kubeconfig(kubeconfig)["current-context"]
    )
    dead = write_kubeconfig(tmp_path / "dead-kubeconfig", None)
    namespace = f"deskhand-test-{secrets.token_hex(3)}"
    env = KubeEnv(f"{kubeconfig}{os.pathsep}{dead}", context, namespace, home)
    core = client.CoreV1Api(api_client(env.account()))
    core.create_namespace({"metadata": {"name": namespace}})
    try:
        yield env
    finally:
        with contextlib.suppress(Exception):
            core.delete_namespace(namespace)


@pytest.fixture
def kube(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KubeEnv]:
    """The fake API server with a kubeconfig pointing at it (or the cluster of
    DESKHAND_TEST_KUBECONFIG), and the kubectl tools ready to call."""
    from integrations import kube_client
    from tools.kubectl import discovery

    for name in ("NO_PROXY", "no_proxy"):
        current = os.environ.get(name, "")
        monkeypatch.setenv(name, ",".join(filter(None, [current, "127.0.0.1", "localhost"])))
    home = tmp_path / "home"
    home.mkdir()
    real = os.environ.get("DESKHAND_TEST_KUBECONFIG")
    try:
        if real:
            yield from _real_env(tmp_path, home, real)
            return
        with FakeKube() as fake:
            path = write_kubeconfig(tmp_path / "kubeconfig", fake.url)
            fake.put(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": "default"},
                    "status": {"phase": "Active"},
                }
            )
            env = KubeEnv(str(path), "fake", "default", home, fake)
            try:
                yield env
            finally:
                if env._runner is not None:
                    env._runner.shutdown()
    finally:
        kube_client.forget_clients()
        discovery.forget()
