"""Volumes, networks, and pruning what nothing uses (with a preview of what would go)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from docker.utils import version_gte

from tools.docker.format import counted, human_size, table
from tools.docker.host import DockerHost, connect
from tools.docker.manifest import NoParams, Prune
from tools.redact import TRIPWIRE
from tools.spec import ToolContext, ToolResult

#: Networks the engine creates itself; prune never removes them.
BUILTIN_NETWORKS = {"bridge", "host", "none", "ingress", "docker_gwbridge"}
#: States `docker container prune` removes.
STOPPED = ("exited", "created", "dead")


def _name(container: dict[str, Any]) -> str:
    names: list[str] = container.get("Names") or ["?"]
    return names[0].lstrip("/")


def list_volumes(args: NoParams, ctx: ToolContext) -> ToolResult:
    host = connect(ctx)
    with host.errors():
        volumes = host.client.api.volumes().get("Volumes") or []
        containers = host.client.api.containers(all=True)
    users: dict[str, list[str]] = {}
    for c in containers:
        for mount in c.get("Mounts") or []:
            if mount.get("Type") == "volume" and mount.get("Name"):
                users.setdefault(mount["Name"], []).append(_name(c))
    rows = [
        {
            "name": v["Name"],
            "driver": v.get("Driver", ""),
            "mountpoint": v.get("Mountpoint", ""),
            "used_by": sorted(users.get(v["Name"], [])),
            "labels": TRIPWIRE.labels(v.get("Labels") or {}),
        }
        for v in sorted(volumes, key=lambda v: v["Name"])
    ]
    if not rows:
        return host.result("No volumes.", {"volumes": []})
    text = table(
        ["VOLUME", "DRIVER", "USED BY", "MOUNTPOINT"],
        [[r["name"], r["driver"], ", ".join(r["used_by"]) or "-", r["mountpoint"]] for r in rows],
    )
    return host.result(f"{counted(len(rows), 'volume')}:\n{text}", {"volumes": rows})


def list_networks(args: NoParams, ctx: ToolContext) -> ToolResult:
    host = connect(ctx)
    with host.errors():
        networks = [host.client.api.inspect_network(n["Id"]) for n in host.client.api.networks()]
    rows = []
    for n in sorted(networks, key=lambda n: n["Name"]):
        configs = (n.get("IPAM") or {}).get("Config") or []
        rows.append(
            {
                "name": n["Name"],
                "id": n["Id"][:12],
                "driver": n.get("Driver", ""),
                "scope": n.get("Scope", ""),
                "subnets": [c["Subnet"] for c in configs if c.get("Subnet")],
                "containers": sorted(
                    c.get("Name", "?") for c in (n.get("Containers") or {}).values()
                ),
                "internal": n.get("Internal", False),
            }
        )
    text = table(
        ["NETWORK", "ID", "DRIVER", "SCOPE", "SUBNET", "CONTAINERS"],
        [
            [
                r["name"],
                r["id"],
                r["driver"],
                r["scope"],
                ", ".join(r["subnets"]) or "-",
                ", ".join(r["containers"]) or "-",
            ]
            for r in rows
        ],
    )
    return host.result(f"{counted(len(rows), 'network')}:\n{text}", {"networks": rows})


# ---- prune ----------------------------------------------------------------------------------


@dataclass
class PrunePlan:
    """What a prune would remove, worked out the way the engine decides it."""

    containers: list[dict[str, Any]] = field(default_factory=list)
    images: list[dict[str, Any]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    networks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def estimated_bytes(self) -> int:
        sizes: list[int] = [c["size_bytes"] for c in self.containers]
        sizes += [i["size_bytes"] for i in self.images]
        return sum(sizes)

    def to_json(self) -> dict[str, Any]:
        return {
            "containers": self.containers,
            "images": self.images,
            "volumes": self.volumes,
            "networks": self.networks,
            "estimated_bytes": self.estimated_bytes,
        }


def plan_prune(host: DockerHost, args: Prune) -> PrunePlan:
    api = host.client.api
    plan = PrunePlan()
    with host.errors():
        containers = api.containers(all=True, size="containers" in args.targets)
        images = api.images() if "images" in args.targets else []
        volumes = (api.volumes().get("Volumes") or []) if "volumes" in args.targets else []
        networks = api.networks() if "networks" in args.targets else []
    # Containers go first, so whatever only they used is unused by the time the rest is pruned.
    pruned_ids = set()
    if "containers" in args.targets:
        for c in containers:
            if c.get("State") in STOPPED:
                pruned_ids.add(c["Id"])
                plan.containers.append(
                    {
                        "name": _name(c),
                        "id": c["Id"][:12],
                        "image": c.get("Image", ""),
                        "state": c.get("State"),
                        "size_bytes": c.get("SizeRw") or 0,
                    }
                )
    survivors = [c for c in containers if c["Id"] not in pruned_ids]
    used_images = {c.get("ImageID") for c in survivors}
    used_volumes = {
        m.get("Name") for c in survivors for m in c.get("Mounts") or [] if m.get("Type") == "volume"
    }
    used_networks = {
        name for c in survivors for name in ((c.get("NetworkSettings") or {}).get("Networks") or {})
    }
    for image in images:
        dangling = not image.get("RepoTags") or image["RepoTags"] == ["<none>:<none>"]
        if image["Id"] not in used_images and (dangling or args.all_images):
            plan.images.append(
                {
                    "id": image["Id"].removeprefix("sha256:")[:12],
                    "tags": [t for t in image.get("RepoTags") or [] if t != "<none>:<none>"],
                    "size_bytes": image.get("Size", 0),
                }
            )
    anonymous_only = version_gte(api.api_version, "1.42")  # Docker 23+ keeps named volumes
    for volume in volumes:
        anonymous = "com.docker.volume.anonymous" in (volume.get("Labels") or {})
        if volume["Name"] not in used_volumes and (anonymous or not anonymous_only):
            plan.volumes.append({"name": volume["Name"], "driver": volume.get("Driver", "")})
    for network in networks:
        if network["Name"] not in BUILTIN_NETWORKS and network["Name"] not in used_networks:
            plan.networks.append({"name": network["Name"], "id": network["Id"][:12]})
    return plan


def _describe_plan(plan: PrunePlan, args: Prune) -> list[str]:
    lines = []
    sections = {
        "containers": [f"{c['name']} ({c['state']}, {c['image']})" for c in plan.containers],
        "images": [f"{', '.join(i['tags']) or '<none>'} {i['id']}" for i in plan.images],
        "networks": [n["name"] for n in plan.networks],
        "volumes": [v["name"] for v in plan.volumes],
    }
    for target, items in sections.items():
        if target not in args.targets:
            lines.append(f"  {target}: not included")
            continue
        shown = ", ".join(items[:20]) + (f", … {len(items) - 20} more" if len(items) > 20 else "")
        lines.append(f"  {target} ({len(items)}): {shown or 'nothing to remove'}")
    return lines


def preview_prune(args: Prune, ctx: ToolContext) -> str:
    host = connect(ctx)
    plan = plan_prune(host, args)
    lines = [f"Prune on {host.title} would remove:", *_describe_plan(plan, args)]
    lines.append(f"Estimated space freed: about {human_size(plan.estimated_bytes)}")
    return "\n".join(lines)


def prune(args: Prune, ctx: ToolContext) -> ToolResult:
    host = connect(ctx)
    api = host.client.api
    reclaimed = 0
    removed: dict[str, list[str]] = {}
    # The engine's own order (docker system prune): containers, networks, volumes, images.
    with host.errors():
        if "containers" in args.targets:
            report = api.prune_containers()
            removed["containers"] = [i[:12] for i in report.get("ContainersDeleted") or []]
            reclaimed += report.get("SpaceReclaimed") or 0
        ctx.check_cancelled()
        if "networks" in args.targets:
            removed["networks"] = api.prune_networks().get("NetworksDeleted") or []
        ctx.check_cancelled()
        if "volumes" in args.targets:
            report = api.prune_volumes()
            removed["volumes"] = report.get("VolumesDeleted") or []
            reclaimed += report.get("SpaceReclaimed") or 0
        ctx.check_cancelled()
        if "images" in args.targets:
            report = api.prune_images(filters={"dangling": not args.all_images})
            removed["images"] = [
                next(iter(entry.values()), "") for entry in report.get("ImagesDeleted") or []
            ]
            reclaimed += report.get("SpaceReclaimed") or 0
    lines = [f"  {target}: {len(items)} removed" for target, items in removed.items()]
    text = "Pruned:\n" + "\n".join(lines) + f"\nSpace reclaimed: {human_size(reclaimed)}"
    return host.result(text, {"removed": removed, "space_reclaimed_bytes": reclaimed})
