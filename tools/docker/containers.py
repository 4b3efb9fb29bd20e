"""Listing, inspecting and changing the state of containers."""

from __future__ import annotations

import json
import shlex
from typing import Any

from tools.docker.format import ago, counted, parse_engine_time, ports_summary, table
from tools.docker.host import DockerHost, connect
from tools.docker.manifest import (
    ContainerRef,
    InspectContainer,
    ListContainers,
    RemoveContainer,
    StopContainer,
)
from tools.redact import TRIPWIRE
from tools.spec import ToolContext, ToolError, ToolResult


def _list_ports(ports: list[dict[str, Any]]) -> str:
    shown = []
    for p in ports:
        inner = f"{p.get('PrivatePort')}/{p.get('Type', 'tcp')}"
        public = p.get("PublicPort")
        shown.append(f"{p.get('IP') or '0.0.0.0'}:{public}->{inner}" if public else inner)
    return ", ".join(dict.fromkeys(shown))


def list_containers(args: ListContainers, ctx: ToolContext) -> ToolResult:
    host = connect(ctx)
    with host.errors():
        raw = host.client.api.containers(all=args.all, filters=args.filters or None)
    rows = [
        {
            "name": (c.get("Names") or ["?"])[0].lstrip("/"),
            "id": c["Id"][:12],
            "image": TRIPWIRE.shapes(c.get("Image", "")),
            "command": TRIPWIRE.shapes(c.get("Command", "")),
            "state": c.get("State", ""),
            "status": c.get("Status", ""),
            "ports": _list_ports(c.get("Ports") or []),
        }
        for c in raw
    ]
    shown = rows[: args.limit]
    scope = "container" if args.all else "running container"
    if not rows:
        hint = "" if args.all else " (all=true also shows stopped ones)"
        return host.result(f"No {scope}s{hint}.", {"containers": []})
    text = table(
        ["NAME", "ID", "IMAGE", "STATUS", "PORTS"],
        [[r["name"], r["id"], r["image"], r["status"], r["ports"]] for r in shown],
    )
    note = f"\n[showing {len(shown)} of {len(rows)}; raise limit or add filters]" * (
        len(rows) > len(shown)
    )
    return host.result(f"{counted(len(rows), scope)}:\n{text}{note}", {"containers": shown})


def describe_state(state: dict[str, Any]) -> str:
    status = str(state.get("Status", "unknown"))
    if state.get("Running"):
        health = (state.get("Health") or {}).get("Status")
        since = ago(parse_engine_time(state.get("StartedAt")))
        return f"{status} (started {since}{f', {health}' if health else ''})"
    if status == "exited":
        finished = ago(parse_engine_time(state.get("FinishedAt")))
        return f"exited with code {state.get('ExitCode')} ({finished})"
    return status


def summarize(attrs: dict[str, Any]) -> dict[str, Any]:
    """The parts of `docker inspect` people usually look for."""
    config, state = attrs.get("Config") or {}, attrs.get("State") or {}
    networks = (attrs.get("NetworkSettings") or {}).get("Networks") or {}
    return {
        "name": attrs.get("Name", "").lstrip("/"),
        "id": attrs.get("Id", "")[:12],
        "image": config.get("Image", ""),
        "image_id": attrs.get("Image", ""),
        "state": state.get("Status", ""),
        "state_text": describe_state(state),
        "exit_code": state.get("ExitCode"),
        "started_at": state.get("StartedAt"),
        "finished_at": state.get("FinishedAt"),
        "restart_count": attrs.get("RestartCount", 0),
        "restart_policy": ((attrs.get("HostConfig") or {}).get("RestartPolicy") or {}).get("Name"),
        "created": attrs.get("Created"),
        "command": TRIPWIRE.command([attrs.get("Path", ""), *(attrs.get("Args") or [])]),
        "env": TRIPWIRE.env(config.get("Env") or []),
        "ports": ports_summary((attrs.get("NetworkSettings") or {}).get("Ports")),
        "mounts": [
            f"{m.get('Name') or m.get('Source')} -> {m.get('Destination')}"
            f"{'' if m.get('RW', True) else ' (read-only)'}"
            for m in attrs.get("Mounts") or []
        ],
        "networks": {name: net.get("IPAddress", "") for name, net in networks.items()},
        "labels": TRIPWIRE.labels(config.get("Labels") or {}),
    }


def mask_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """The engine's full inspect JSON with credentials hidden: environment entries, command
    lines (Path/Args, Config.Cmd/Entrypoint), labels, and credential-shaped values anywhere."""
    attrs = dict(attrs)
    config = dict(attrs.get("Config") or {})
    config["Env"] = TRIPWIRE.env(config.get("Env") or [])
    for key in ("Cmd", "Entrypoint"):
        if isinstance(config.get(key), list):
            config[key] = TRIPWIRE.command(config[key])
    if isinstance(config.get("Labels"), dict):
        config["Labels"] = TRIPWIRE.labels(config["Labels"])
    attrs["Config"] = config
    if isinstance(attrs.get("Args"), list):
        attrs["Args"] = TRIPWIRE.command([attrs.get("Path", ""), *attrs["Args"]])[1:]
    masked: dict[str, Any] = TRIPWIRE.shaped_data(attrs)
    return masked


def _summary_text(s: dict[str, Any]) -> str:
    lines = [
        f"Container {s['name']} ({s['id']})",
        f"  image:    {s['image']}",
        f"  state:    {s['state_text']}",
        f"  command:  {shlex.join(c for c in s['command'] if c)}",
        f"  created:  {s['created']}",
        f"  restarts: {s['restart_count']} (policy: {s['restart_policy'] or 'no'})",
    ]
    if s["ports"]:
        lines.append(f"  ports:    {s['ports']}")
    if s["networks"]:
        nets = ", ".join(f"{n} {ip}".strip() for n, ip in s["networks"].items())
        lines.append(f"  networks: {nets}")
    lines += [f"  mount:    {m}" for m in s["mounts"]]
    lines += [f"  env:      {e}" for e in s["env"]]
    lines += [f"  label:    {k}={v}" for k, v in s["labels"].items()]
    return "\n".join(lines)


def inspect_container(args: InspectContainer, ctx: ToolContext) -> ToolResult:
    host = connect(ctx)
    attrs = host.container(args.container).attrs
    summary = summarize(attrs)
    if args.full:
        attrs = mask_attrs(attrs)
        return host.result(json.dumps(attrs, indent=1, default=str), {"container": attrs})
    return host.result(_summary_text(summary), {"container": summary})


# ---- state changes ----------------------------------------------------------------------


def _after(host: DockerHost, container: Any, verb: str) -> ToolResult:
    with host.errors(container=container.name):
        container.reload()
    summary = summarize(container.attrs)
    return host.result(f"{verb} {container.name}: now {summary['state_text']}.", summary)


def start_container(args: ContainerRef, ctx: ToolContext) -> ToolResult:
    host = connect(ctx)
    container = host.container(args.container)
    if container.status == "running":
        return _after(host, container, "Already running:")
    with host.errors(container=args.container):
        container.start()
    return _after(host, container, "Started")


def stop_container(args: StopContainer, ctx: ToolContext) -> ToolResult:
    host = connect(ctx)
    container = host.container(args.container)
    if container.status != "running":
        return _after(host, container, "Was not running:")
    with host.errors(container=args.container):
        container.stop(timeout=args.timeout)
    return _after(host, container, "Stopped")


def restart_container(args: StopContainer, ctx: ToolContext) -> ToolResult:
    host = connect(ctx)
    container = host.container(args.container)
    with host.errors(container=args.container):
        container.restart(timeout=args.timeout)
    return _after(host, container, "Restarted")


def remove_container(args: RemoveContainer, ctx: ToolContext) -> ToolResult:
    host = connect(ctx)
    container = host.container(args.container)
    if container.status in {"running", "restarting", "paused"} and not args.force:
        raise ToolError(
            f"{container.name} is {container.status}; stop it first with docker_stop_container "
            "or pass force=true to kill and remove it"
        )
    summary = summarize(container.attrs)
    with host.errors(container=args.container):
        container.remove(v=args.volumes, force=args.force)
    return host.result(f"Removed container {container.name} ({summary['image']}).", summary)


# ---- approval previews ----------------------------------------------------------------


def _preview(args: ContainerRef, ctx: ToolContext, action: str) -> tuple[str, dict[str, Any]]:
    host = connect(ctx)
    summary = summarize(host.container(args.container).attrs)
    text = (
        f"{action} container {summary['name']} ({summary['id']}) on {host.title}\n"
        f"  image: {summary['image']}\n"
        f"  state: {summary['state_text']}"
    )
    return text, summary


def preview_start(args: ContainerRef, ctx: ToolContext) -> str:
    return _preview(args, ctx, "Start")[0]


def preview_stop(args: StopContainer, ctx: ToolContext) -> str:
    return _preview(args, ctx, f"Stop (kill after {args.timeout} s)")[0]


def preview_restart(args: StopContainer, ctx: ToolContext) -> str:
    return _preview(args, ctx, "Restart")[0]


def preview_remove(args: RemoveContainer, ctx: ToolContext) -> str:
    text, summary = _preview(args, ctx, "Delete")
    if summary["state"] in {"running", "restarting", "paused"}:
        text += (
            f"\n  it is {summary['state']}: force=true kills it first"
            if args.force
            else f"\n  it is {summary['state']}: without force=true this call will fail"
        )
    if args.volumes:
        text += "\n  its anonymous volumes are deleted too"
    return text
