"""One-shot resource usage per running container (what `docker stats --no-stream` shows)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tools.docker.format import human_size, table
from tools.docker.host import DockerHost, connect
from tools.docker.manifest import ContainerStats
from tools.spec import ToolContext, ToolError, ToolResult


def cpu_percent(stats: dict[str, Any]) -> float:
    """CPU use between the engine's two samples, as `docker stats` computes it."""
    cpu, pre = stats.get("cpu_stats") or {}, stats.get("precpu_stats") or {}
    used = (cpu.get("cpu_usage") or {}).get("total_usage", 0) - (pre.get("cpu_usage") or {}).get(
        "total_usage", 0
    )
    system = cpu.get("system_cpu_usage", 0) - pre.get("system_cpu_usage", 0)
    cpus = (
        cpu.get("online_cpus") or len((cpu.get("cpu_usage") or {}).get("percpu_usage") or []) or 1
    )
    return round(used / system * cpus * 100, 2) if used > 0 and system > 0 else 0.0


def memory_used(stats: dict[str, Any]) -> tuple[int, int]:
    """(bytes in use without the page cache, limit) — cgroup v1 and v2 name the cache apart."""
    mem = stats.get("memory_stats") or {}
    detail = mem.get("stats") or {}
    cache = detail.get("inactive_file", detail.get("total_inactive_file", detail.get("cache", 0)))
    return max(0, mem.get("usage", 0) - cache), mem.get("limit", 0)


def io_bytes(stats: dict[str, Any]) -> tuple[int, int, int, int]:
    """(network received, network sent, disk read, disk written) in bytes."""
    nets = (stats.get("networks") or {}).values()
    rx = sum(n.get("rx_bytes", 0) for n in nets)
    tx = sum(n.get("tx_bytes", 0) for n in nets)
    entries = (stats.get("blkio_stats") or {}).get("io_service_bytes_recursive") or []
    read = sum(e.get("value", 0) for e in entries if str(e.get("op", "")).lower() == "read")
    write = sum(e.get("value", 0) for e in entries if str(e.get("op", "")).lower() == "write")
    return rx, tx, read, write


def snapshot(container: Any) -> dict[str, Any]:
    stats = container.stats(stream=False)
    used, limit = memory_used(stats)
    rx, tx, read, write = io_bytes(stats)
    return {
        "name": container.name,
        "id": container.short_id,
        "cpu_percent": cpu_percent(stats),
        "memory_bytes": used,
        "memory_limit_bytes": limit,
        "memory_percent": round(used / limit * 100, 2) if limit else None,
        "net_rx_bytes": rx,
        "net_tx_bytes": tx,
        "block_read_bytes": read,
        "block_write_bytes": write,
        "pids": (stats.get("pids_stats") or {}).get("current"),
    }


def _targets(host: DockerHost, ref: str | None) -> list[Any]:
    if ref is None:
        with host.errors():
            found: list[Any] = host.client.containers.list()
            return found
    container = host.container(ref)
    if container.status != "running":
        raise ToolError(
            f"{container.name} is {container.status}; only running containers have stats"
        )
    return [container]


def container_stats(args: ContainerStats, ctx: ToolContext) -> ToolResult:
    host = connect(ctx)
    containers = _targets(host, args.container)
    if not containers:
        return host.result("No running containers.", {"containers": []})
    ctx.progress(f"sampling {len(containers)} container(s)")
    with host.errors(), ThreadPoolExecutor(max_workers=min(8, len(containers))) as pool:
        rows = list(pool.map(snapshot, containers))
    ctx.check_cancelled()
    text = table(
        ["NAME", "CPU %", "MEM USAGE / LIMIT", "MEM %", "NET I/O", "BLOCK I/O", "PIDS"],
        [
            [
                r["name"],
                f"{r['cpu_percent']:.2f}%",
                f"{human_size(r['memory_bytes'])} / {human_size(r['memory_limit_bytes'])}",
                f"{r['memory_percent']:.2f}%" if r["memory_percent"] is not None else "-",
                f"{human_size(r['net_rx_bytes'])} / {human_size(r['net_tx_bytes'])}",
                f"{human_size(r['block_read_bytes'])} / {human_size(r['block_write_bytes'])}",
                r["pids"] if r["pids"] is not None else "-",
            ]
            for r in rows
        ],
    )
    return host.result(text, {"containers": rows})
