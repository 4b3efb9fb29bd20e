"""`docker exec`: run a command in a running container, with a timeout and capped output."""

from __future__ import annotations

import shlex

from tools.docker.format import mask_env
from tools.docker.host import connect
from tools.docker.manifest import ExecInContainer
from tools.docker.streams import Outcome, OutputCollector, follow
from tools.spec import ToolCancelled, ToolContext, ToolError, ToolResult


def exec_argv(command: list[str] | str) -> list[str]:
    """A string runs through the container's shell (pipes and globs work); a list runs as is."""
    return ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)


def preview_exec(args: ExecInContainer, ctx: ToolContext) -> str:
    host = connect(ctx)
    container = host.container(args.container)
    words = ["docker", "exec"]
    for entry in mask_env([f"{k}={v}" for k, v in args.env.items()]):
        words += ["-e", entry]
    if args.user:
        words += ["-u", args.user]
    if args.workdir:
        words += ["-w", args.workdir]
    words += [container.name, *exec_argv(args.command)]
    return (
        f"{shlex.join(words)}\n  on {host.title}; container is {container.status}; "
        f"gives up after {args.timeout:g} s"
    )


def exec_in_container(args: ExecInContainer, ctx: ToolContext) -> ToolResult:
    if isinstance(args.command, list) and not args.command:
        raise ToolError("command is empty")
    host = connect(ctx)
    container = host.container(args.container)
    if container.status != "running":
        raise ToolError(
            f"{container.name} is {container.status}; docker_exec needs a running container "
            "(start it with docker_start_container)"
        )
    api = host.client.api
    with host.errors(container=args.container):
        exec_id = api.exec_create(
            container.id,
            exec_argv(args.command),
            stdout=True,
            stderr=True,
            environment=dict(args.env) or None,
            workdir=args.workdir,
            user=args.user or "",
        )["Id"]
        stream = api.exec_start(exec_id, stream=True)
    collector = OutputCollector(ctx)
    try:
        outcome = follow(stream, collector, ctx, timeout=args.timeout, stop=stream.close)
    finally:
        stream.close()
    if outcome is Outcome.CANCELLED:
        raise ToolCancelled("cancelled")
    with host.errors(container=args.container):
        details = api.exec_inspect(exec_id)
    note = (
        f"[{collector.dropped_lines:,} earlier lines omitted; newest kept]\n"
        if collector.dropped_lines
        else ""
    )
    data = {
        "container": container.name,
        "command": exec_argv(args.command),
        "exit_code": details.get("ExitCode"),
        "running": details.get("Running", False),
        "output": collector.text,
        "omitted_lines": collector.dropped_lines,
    }
    if outcome is Outcome.TIMED_OUT:
        result = host.result(
            f"The command did not finish within {args.timeout:g} s; Docker cannot kill an exec "
            f"session, so it may still be running in {container.name}. Output so far:\n"
            f"{note}{collector.text}",
            data,
        )
        result.ok, result.error = False, f"timed out after {args.timeout:g} s"
        return result
    return host.result(
        f"Exit code {details.get('ExitCode')} in {container.name}. Output (newest last):\n"
        f"{note}{collector.text or '(no output)'}",
        data,
    )
