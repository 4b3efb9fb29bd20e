"""`docker run`: create and start a container; in the foreground, stream and capture output."""

from __future__ import annotations

import contextlib
import re
import shlex
from typing import Any

from tools.docker.containers import summarize
from tools.docker.host import DockerHost, connect
from tools.docker.manifest import RunContainer
from tools.docker.mounts import refuse_protected_mounts
from tools.docker.streams import Outcome, OutputCollector, follow
from tools.redact import TRIPWIRE
from tools.spec import ToolCancelled, ToolContext, ToolError, ToolResult

_PORT = re.compile(
    r"^(?:(?P<ip>[\d.]+|\[[0-9a-fA-F:]+\]):)?(?:(?P<host>\d*):)?(?P<inner>\d+)(?:/(?P<proto>tcp|udp|sctp))?$"
)


def parse_ports(specs: list[str]) -> dict[str, Any]:
    """docker -p syntax → the SDK's `ports` mapping."""
    mapping: dict[str, Any] = {}
    for spec in specs:
        match = _PORT.match(spec.strip())
        if not match:
            raise ToolError(
                f"cannot read the port {spec!r}: use 'HOST:CONTAINER' like '8080:80', "
                "optionally 'IP:HOST:CONTAINER/udp'"
            )
        key = f"{match['inner']}/{match['proto'] or 'tcp'}"
        host_port = int(match["host"]) if match["host"] else None
        mapping[key] = (match["ip"].strip("[]"), host_port) if match["ip"] else host_port
    return mapping


def parse_volumes(specs: list[str]) -> dict[str, dict[str, str]]:
    """docker -v syntax ('SOURCE:TARGET[:ro|rw]') → the SDK's `volumes` mapping."""
    mapping: dict[str, dict[str, str]] = {}
    for spec in specs:
        parts = spec.split(":")
        if len(parts) == 3 and parts[2] in {"ro", "rw"}:
            source, target, mode = parts
        elif len(parts) == 2:
            (source, target), mode = parts, "rw"
        else:
            raise ToolError(
                f"cannot read the volume {spec!r}: use 'SOURCE:TARGET' or 'SOURCE:TARGET:ro'"
            )
        if not source or not target.startswith("/"):
            raise ToolError(
                f"volume {spec!r}: the target must be an absolute path in the container"
            )
        mapping[source] = {"bind": target, "mode": mode}
    return mapping


def command_args(command: list[str] | str | None) -> list[str] | None:
    if command is None:
        return None
    return shlex.split(command) if isinstance(command, str) else list(command)


def create_options(args: RunContainer) -> dict[str, Any]:
    options: dict[str, Any] = {
        "command": command_args(args.command),
        "name": args.name,
        "environment": dict(args.env) or None,
        "ports": parse_ports(args.ports) or None,
        "volumes": parse_volumes(args.volumes) or None,
        "working_dir": args.workdir,
        "network_mode": args.network,
        "detach": True,
    }
    if args.detach:
        options["auto_remove"] = args.remove  # a foreground run removes after reading the exit
    return {k: v for k, v in options.items() if v is not None}


def command_line(args: RunContainer) -> str:
    """The equivalent `docker run` invocation, credential-looking env values and command
    arguments hidden."""
    words = ["docker", "run"]
    words += ["-d"] * args.detach + ["--rm"] * args.remove
    if args.name:
        words += ["--name", args.name]
    for entry in TRIPWIRE.env([f"{k}={v}" for k, v in args.env.items()]):
        words += ["-e", entry]
    for port in args.ports:
        words += ["-p", port]
    for volume in args.volumes:
        words += ["-v", volume]
    if args.workdir:
        words += ["-w", args.workdir]
    if args.network:
        words += ["--network", args.network]
    words.append(args.image)
    words += TRIPWIRE.command(command_args(args.command) or [])
    return shlex.join(words)


def preview_run(args: RunContainer, ctx: ToolContext) -> str:
    create_options(args)  # bad ports/volumes show up in the prompt, not after approval
    refuse_protected_mounts(list(parse_volumes(args.volumes)), ctx)
    host = connect(ctx)
    with host.errors(image=args.image):
        host.client.images.get(args.image)
    mode = (
        "in the background"
        if args.detach
        else f"in the foreground (stopped after {args.timeout:g} s)"
    )
    return f"{command_line(args)}\n  on {host.title}, {mode}"


def run_container(args: RunContainer, ctx: ToolContext) -> ToolResult:
    options = create_options(args)
    refuse_protected_mounts(list(parse_volumes(args.volumes)), ctx)
    host = connect(ctx)
    with host.errors(image=args.image):
        container = host.client.containers.create(args.image, **options)
    try:
        with host.errors(container=container.name):
            container.start()
    except ToolError:
        with contextlib.suppress(Exception):  # don't leave a never-started container behind
            container.remove(force=True)
        raise
    if args.detach:
        with host.errors(container=container.name):
            container.reload()
        summary = summarize(container.attrs)
        return host.result(
            f"Started {summary['name']} ({summary['id']}) from {args.image} in the background; "
            f"{summary['state_text']}.",
            summary,
        )
    return _run_in_foreground(host, container, args, ctx)


def _run_in_foreground(
    host: DockerHost, container: Any, args: RunContainer, ctx: ToolContext
) -> ToolResult:
    collector = OutputCollector(ctx)
    with host.errors(container=container.name):
        stream = container.logs(stream=True, follow=True, stdout=True, stderr=True)
    try:
        outcome = follow(stream, collector, ctx, timeout=args.timeout, stop=container.kill)
    finally:
        stream.close()
    with host.errors(container=container.name):
        exit_code = container.wait(timeout=30).get("StatusCode")
        if args.remove:
            container.remove(force=True)
    if outcome is Outcome.CANCELLED:
        raise ToolCancelled("cancelled")
    data = {
        "name": container.name,
        "id": container.short_id,
        "exit_code": exit_code,
        "outcome": outcome.value,
        "removed": args.remove,
        "output": collector.text,
        "omitted_lines": collector.dropped_lines,
    }
    note = (
        f"[{collector.dropped_lines:,} earlier lines omitted; newest kept]\n"
        if collector.dropped_lines
        else ""
    )
    if outcome is Outcome.TIMED_OUT:
        result = host.result(
            f"{container.name} was still running after {args.timeout:g} s and was killed "
            f"(exit code {exit_code}). Output so far:\n{note}{collector.text}",
            data,
        )
        result.ok, result.error = False, f"timed out after {args.timeout:g} s"
        return result
    return host.result(
        f"{container.name} exited with code {exit_code}. Output (newest last):\n"
        f"{note}{collector.text or '(no output)'}",
        data,
    )
