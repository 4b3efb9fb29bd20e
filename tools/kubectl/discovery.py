"""API discovery: which resource types a cluster serves, and resolving what a user types
(po, deploy, deployment.apps, widgets.example.com, Widget) to one of them.

Uses aggregated discovery (one request each for /api and /apis, Kubernetes ≥1.26) when the
server offers it, else the classic per-group-version resource lists. Cached per cluster for a
few minutes; an unknown name refreshes the cache once before failing with suggestions.
"""

from __future__ import annotations

import difflib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from tools.kubectl.cluster import Cluster
from tools.kubectl.errors import Attempt
from tools.spec import ToolError

CACHE_SECONDS = 300.0
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
#: When a name matches in several groups, kubectl prefers the built-in ones in this order.
_GROUP_PRIORITY = ("", "apps", "batch", "autoscaling", "networking.k8s.io", "policy")


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """kubectl's name for the type: `pods`, `deployments.apps`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base

    def names(self) -> set[str]:
        return {self.plural, self.singular, self.kind.lower(), *self.short_names} - {""}


@dataclass
class Index:
    types: list[ResourceType]
    #: group-versions the server lists but could not describe (e.g. metrics-server down).
    failed: list[str] = field(default_factory=list)
    loaded_at: float = field(default_factory=time.monotonic)

    def groups(self) -> set[str]:
        return {t.group for t in self.types}


_cache: dict[tuple[str, str], Index] = {}
_lock = threading.Lock()


def index(cluster: Cluster, *, refresh: bool = False) -> Index:
    key = (cluster.context, cluster.server)
    with _lock:
        cached = _cache.get(key)
    if cached is not None and not refresh and time.monotonic() - cached.loaded_at < CACHE_SECONDS:
        return cached
    fresh = _load(cluster)
    with _lock:
        _cache[key] = fresh
    return fresh


def forget() -> None:
    with _lock:
        _cache.clear()


# ---- loading ------------------------------------------------------------------------------


def _load(cluster: Cluster) -> Index:
    types: list[ResourceType] = []
    failed: list[str] = []
    for root in ("/api", "/apis"):
        listing = cluster.get(root, Attempt("discover", "the API"), accept=AGGREGATED)
        if listing.get("kind") == "APIGroupDiscoveryList":
            types.extend(_from_aggregated(listing, failed))
        elif root == "/api":
            versions = listing.get("versions") or ["v1"]
            types.extend(_from_resource_list(cluster, "", versions[0], failed))
        else:
            wanted = [
                (g["name"], (g.get("preferredVersion") or g["versions"][0])["version"])
                for g in listing.get("groups") or []
                if g.get("versions")
            ]
            with ThreadPoolExecutor(max_workers=8) as pool:
                for found in pool.map(
                    lambda gv: _from_resource_list(cluster, gv[0], gv[1], failed), wanted
                ):
                    types.extend(found)
    return Index(types, failed)


def _from_resource_list(
    cluster: Cluster, group: str, version: str, failed: list[str]
) -> list[ResourceType]:
    path = f"/apis/{group}/{version}" if group else f"/api/{version}"
    try:
        listing = cluster.get(path, Attempt("discover", path))
    except ToolError:
        failed.append(f"{group}/{version}" if group else version)
        return []
    subresources: dict[str, set[str]] = {}
    entries = listing.get("resources") or []
    for entry in entries:
        base, _, sub = entry.get("name", "").partition("/")
        if sub:
            subresources.setdefault(base, set()).add(sub)
    return [
        ResourceType(
            group=group,
            version=version,
            plural=entry["name"],
            kind=entry.get("kind", ""),
            namespaced=bool(entry.get("namespaced")),
            singular=entry.get("singularName") or entry.get("kind", "").lower(),
            short_names=tuple(entry.get("shortNames") or ()),
            verbs=tuple(entry.get("verbs") or ()),
            subresources=frozenset(subresources.get(entry["name"], ())),
        )
        for entry in entries
        if "/" not in entry.get("name", "/")
    ]


def _from_aggregated(listing: dict[str, Any], failed: list[str]) -> list[ResourceType]:
    types = []
    for item in listing.get("items") or []:
        group = (item.get("metadata") or {}).get("name", "")
        versions = item.get("versions") or []
        if not versions:
            continue
        preferred = versions[0]  # the server lists versions in order of preference
        if preferred.get("freshness") == "Stale":
            failed.append(f"{group}/{preferred.get('version')}")
        for entry in preferred.get("resources") or []:
            kind = (entry.get("responseKind") or {}).get("kind", "")
            types.append(
                ResourceType(
                    group=group,
                    version=preferred.get("version", ""),
                    plural=entry.get("resource", ""),
                    kind=kind,
                    namespaced=entry.get("scope") == "Namespaced",
                    singular=entry.get("singularResource") or kind.lower(),
                    short_names=tuple(entry.get("shortNames") or ()),
                    verbs=tuple(entry.get("verbs") or ()),
                    subresources=frozenset(
                        s.get("subresource", "") for s in entry.get("subresources") or ()
                    ),
                )
            )
    return types


# ---- resolving ------------------------------------------------------------------------------


def _split(text: str) -> tuple[str, str | None, str | None]:
    """`deployments.v1.apps` → (deployments, v1, apps); `widgets.example.com` → (widgets,
    None, example.com); `Deployment` → (deployment, None, None)."""
    name, _, rest = text.strip().lower().partition(".")
    if not rest:
        return name, None, None
    version, _, group = rest.partition(".")
    if group and version[:1] == "v" and version[1:2].isdigit():
        return name, version, group
    return name, None, rest


def _match(types: list[ResourceType], text: str) -> list[ResourceType]:
    name, version, group = _split(text)
    found = [
        t
        for t in types
        if name in t.names()
        and (group is None or t.group == group)
        and (version is None or t.version == version)
    ]
    if not found and group is None:  # a kind with a dot in its API group, typed whole
        found = [t for t in types if t.qualified == text.strip().lower()]

    def rank(t: ResourceType) -> tuple[int, str]:
        prio = _GROUP_PRIORITY.index(t.group) if t.group in _GROUP_PRIORITY else 99
        return (prio, t.group)

    return sorted(found, key=rank)


def resolve(cluster: Cluster, text: str) -> ResourceType:
    """The resource type the user means; ToolError with the closest names when unknown."""
    found = _match(index(cluster).types, text)
    if not found:
        fresh = index(cluster, refresh=True)  # a CRD installed since the cache was filled
        found = _match(fresh.types, text)
    if found:
        return found[0]
    raise ToolError(
        f"the cluster (context {cluster.context}) has no resource type {text!r}."
        f"{suggest_types(index(cluster).types, text)}"
    )


def suggest_types(types: list[ResourceType], text: str) -> str:
    by_name: dict[str, ResourceType] = {}
    for t in types:
        for name in t.names():
            by_name.setdefault(name, t)
    name = _split(text)[0]
    close = difflib.get_close_matches(name, list(by_name), n=3, cutoff=0.6)
    if not close:
        return " Use kubectl_get with kind='crd' or check the spelling."
    picks: list[str] = []
    for c in close:
        qualified = by_name[c].qualified
        if qualified not in picks:
            picks.append(qualified)
    return f" Did you mean {' or '.join(picks)}?"


def for_object(cluster: Cluster, api_version: str, kind: str) -> ResourceType:
    """The type of an object in a manifest (apiVersion + kind), keeping its API version."""
    group, _, version = api_version.rpartition("/")

    def pick(types: list[ResourceType]) -> ResourceType | None:
        for t in types:
            if t.kind == kind and t.group == group:
                return t
        return None

    found = pick(index(cluster).types) or pick(index(cluster, refresh=True).types)
    if found is None:
        kinds = [t.kind for t in index(cluster).types]
        close = difflib.get_close_matches(kind, kinds, n=2)
        hint = f" Did you mean {' or '.join(close)}?" if close else ""
        raise ToolError(
            f"the cluster (context {cluster.context}) does not serve kind {kind} in "
            f"{api_version}.{hint} (Is its CustomResourceDefinition installed?)"
        )
    return replace(found, version=version) if version else found
