"""Local images: list, pull from a registry (with layer progress), remove."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import docker.errors

from tools.docker.format import ago, counted, human_size, table
from tools.docker.host import DockerHost, connect
from tools.docker.manifest import ListImages, PullImage, RemoveImage
from tools.redact import shorten
from tools.spec import ToolContext, ToolError, ToolResult

_UNREACHABLE = (
    "dial tcp",
    "no such host",
    "i/o timeout",
    "connection refused",
    "network is unreachable",
    "tls handshake timeout",
    "client.timeout",
    "temporary failure in name resolution",
)
_MISSING = ("not found", "manifest unknown", "does not exist", "pull access denied")


def _short_id(image_id: str) -> str:
    return image_id.removeprefix("sha256:")[:12]


def list_images(args: ListImages, ctx: ToolContext) -> ToolResult:
    host = connect(ctx)
    with host.errors():
        raw = host.client.api.images(name=args.name, all=args.all)
    rows = []
    for image in sorted(raw, key=lambda i: i.get("Created", 0), reverse=True):
        created = datetime.fromtimestamp(image.get("Created", 0), UTC)
        for tag in image.get("RepoTags") or ["<none>:<none>"]:
            rows.append(
                {
                    "tag": tag,
                    "id": _short_id(image["Id"]),
                    "size_bytes": image.get("Size", 0),
                    "created": created.isoformat(),
                    "containers": image.get("Containers", -1),
                    "created_ago": ago(created),
                }
            )
    if not rows:
        return host.result("No images.", {"images": []})
    text = table(
        ["IMAGE", "ID", "SIZE", "CREATED"],
        [[r["tag"], r["id"], human_size(r["size_bytes"]), r["created_ago"]] for r in rows],
    )
    return host.result(f"{counted(len(rows), 'image')}:\n{text}", {"images": rows})


# ---- pull ---------------------------------------------------------------------------------


def pull_problem(image: str, host: DockerHost, message: str) -> ToolError:
    lowered = message.lower()
    if any(marker in lowered for marker in _UNREACHABLE):
        return ToolError(
            f"Could not reach the registry to pull {image!r} from {host.title}: the Docker host "
            f"has no network access or DNS/proxy trouble ({shorten(message.strip(), 300, mark='')})"
        )
    if any(marker in lowered for marker in _MISSING):
        return ToolError(
            f"{image!r} was not found in its registry, or it is private and needs "
            f"`docker login` on the host ({shorten(message.strip(), 300, mark='')})"
        )
    return ToolError(f"Pulling {image!r} failed: {shorten(message.strip(), 500, mark='')}")


class LayerProgress:
    """Turns the engine's per-layer pull events into overall progress messages."""

    def __init__(self, ctx: ToolContext, image: str) -> None:
        self._ctx = ctx
        self._image = image
        self._layers: dict[str, tuple[int, int]] = {}
        self._last_report = 0.0
        self._last_fraction = -1.0

    def update(self, event: dict[str, Any]) -> None:
        layer, status = event.get("id"), event.get("status", "")
        detail = event.get("progressDetail") or {}
        if layer and status == "Downloading" and detail.get("total"):
            self._layers[layer] = (detail.get("current", 0), detail["total"])
        elif layer and status in {"Download complete", "Pull complete", "Already exists"}:
            total = self._layers.get(layer, (0, 0))[1]
            self._layers[layer] = (total, total)
        self._report(status, layer)

    def _report(self, status: str, layer: str | None) -> None:
        total = sum(t for _, t in self._layers.values())
        fraction = sum(c for c, _ in self._layers.values()) / total if total else None
        now = time.monotonic()
        moved = fraction is not None and fraction - self._last_fraction >= 0.05
        milestone = status not in {"Downloading", "Extracting", "Waiting"}
        throttled = now - self._last_report < 0.2
        if not milestone and (not moved or throttled):
            return
        self._last_report = now
        if fraction is not None:
            self._last_fraction = fraction
        where = f" {layer}" if layer and layer != self._image.rpartition(":")[2] else ""
        size = f" ({human_size(total)} in {len(self._layers)} layers)" if total else ""
        self._ctx.progress(f"{status}{where}{size}", fraction)


def pull_image(args: PullImage, ctx: ToolContext) -> ToolResult:
    host = connect(ctx)
    reference = args.image if ":" in args.image.rsplit("/", 1)[-1] else f"{args.image}:latest"
    ctx.progress(f"pulling {reference} on {host.title}")
    progress = LayerProgress(ctx, reference)
    final_status = ""
    with host.errors():
        try:
            events = host.client.api.pull(
                args.image, stream=True, decode=True, platform=args.platform
            )
            for event in events:
                ctx.check_cancelled()
                if "error" in event:
                    raise pull_problem(reference, host, str(event["error"]))
                progress.update(event)
                final_status = event.get("status", final_status)
        except docker.errors.APIError as exc:  # the engine refuses before streaming
            raise pull_problem(reference, host, str(exc.explanation or exc)) from None
    with host.errors(image=reference):
        image = host.client.images.get(reference)
    data = {
        "image": reference,
        "id": _short_id(image.id),
        "tags": image.tags,
        "size_bytes": image.attrs.get("Size", 0),
        "status": final_status,
    }
    size = human_size(data["size_bytes"])
    return host.result(f"{final_status or 'Pulled'} — {reference} ({data['id']}, {size}).", data)


# ---- remove -------------------------------------------------------------------------------


def _users_of(host: DockerHost, image_id: str) -> list[str]:
    with host.errors():
        containers = host.client.api.containers(all=True)
    return [
        f"{(c.get('Names') or ['?'])[0].lstrip('/')} ({c.get('State', '?')})"
        for c in containers
        if c.get("ImageID") == image_id
    ]


def preview_remove_image(args: RemoveImage, ctx: ToolContext) -> str:
    host = connect(ctx)
    with host.errors(image=args.image):
        image = host.client.images.get(args.image)
    tags = ", ".join(image.tags) or "untagged"
    users = _users_of(host, image.id)
    lines = [
        f"Delete image {args.image} ({_short_id(image.id)}) on {host.title}",
        f"  tags: {tags}",
        f"  size: {human_size(image.attrs.get('Size'))}",
    ]
    if len(image.tags) > 1 and args.image in image.tags:
        lines.append("  only this tag goes; the image stays under its other tags")
    if users:
        blocked = "force=true removes it anyway" if args.force else "this call will fail"
        lines.append(f"  used by: {', '.join(users)} — {blocked}")
    return "\n".join(lines)


def remove_image(args: RemoveImage, ctx: ToolContext) -> ToolResult:
    host = connect(ctx)
    with host.errors(image=args.image):
        image = host.client.images.get(args.image)
    try:
        with host.errors(image=args.image):
            outcome = host.client.api.remove_image(args.image, force=args.force)
    except ToolError as exc:
        users = _users_of(host, image.id)
        if users and "conflict" in str(exc).lower():
            raise ToolError(
                f"{args.image} is used by {', '.join(users)}; remove those containers first "
                "(docker_remove_container) or pass force=true"
            ) from None
        raise
    untagged = [e["Untagged"] for e in outcome or [] if "Untagged" in e]
    deleted = [_short_id(e["Deleted"]) for e in outcome or [] if "Deleted" in e]
    parts = []
    if untagged:
        parts.append(f"untagged {', '.join(untagged)}")
    if deleted:
        parts.append(f"deleted {len(deleted)} layer(s)/image(s): {', '.join(deleted[:10])}")
    text = "Removed image: " + "; ".join(parts) if parts else f"Removed {args.image}."
    return host.result(text, {"untagged": untagged, "deleted": deleted})
