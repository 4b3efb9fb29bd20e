"""`docker exec`: run a command in a running container, with a timeout and capped output."""

from __future__ import annotations

import shlex

from tools.docker.exec_stop import ExecStopper, PidLine, has_shell, wrap
from tools.docker.host import DockerHost, connect
from tools.docker.manifest import ExecInContainer
from tools.docker.streams import Outcome, OutputCollector, follow
from tools.redact import TRIPWIRE
from tools.spec import ToolContext, ToolError, ToolResult


def exec_argv(command: list[str] | str) -> list[str]:
    """A string runs through the container's shell (pipes and globs work); a list runs as is."""
    return ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)


def preview_exec(args: ExecInContainer, ctx: ToolContext) -> str:
    host = connect(ctx)
    container = host.container(args.container)
    words = ["docker", "exec"]
    for entry in TRIPWIRE.env([f"{k}={v}" for k, v in args.env.items()]):
        words += ["-e", entry]
    if args.user:
        words += ["-u", args.user]
    if args.workdir:
        words += ["-w", args.workdir]
    words += [container.name, *TRIPWIRE.command(exec_argv(args.command))]
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
    argv = exec_argv(args.command)
    # With a shell, the command reports its PID first so that Stop can end it.
    wrapped = has_shell(api, container.id)
    with host.errors(container=args.container):
        exec_id = api.exec_create(
            container.id,
            wrap(argv) if wrapped else argv,
            stdout=True,
            stderr=True,
            environment=dict(args.env) or None,
            workdir=args.workdir,
            user=args.user or "",
        )["Id"]
        stream = api.exec_start(exec_id, stream=True)
    chunks = PidLine(stream) if wrapped else stream
    stopper = ExecStopper(
        api, container.id, container.name, exec_id, args.user or "", chunks if wrapped else None
    )

    def stop() -> None:
        stopper.stop()  # end the command itself; the stream then ends on its own
        stream.close()

    collector = OutputCollector(ctx)
    try:
        outcome = follow(chunks, collector, ctx, timeout=args.timeout, stop=stop)
    finally:
        stream.close()
    note = (
        f"[{collector.dropped_lines:,} earlier lines omitted; newest kept]\n"
        if collector.dropped_lines
        else ""
    )
    if outcome is Outcome.CANCELLED:
        return _cancelled(host, container.name, argv, stopper, collector, note)
    with host.errors(container=args.container):
        details = api.exec_inspect(exec_id)
    data = {
        "container": container.name,
        "command": TRIPWIRE.command(argv),
        "exit_code": details.get("ExitCode"),
        "running": details.get("Running", False),
        "output": collector.text,
        "omitted_lines": collector.dropped_lines,
    }
    if outcome is Outcome.TIMED_OUT:
        data["stopped"] = stopper.stopped
        result = host.result(
            f"The command did not finish within {args.timeout:g} s; {stopper.report}. "
            f"Output so far:\n{note}{collector.text}",
            data,
        )
        result.ok, result.error = False, f"timed out after {args.timeout:g} s"
        return result
    return host.result(
        f"Exit code {details.get('ExitCode')} in {container.name}. Output (newest last):\n"
        f"{note}{collector.text or '(no output)'}",
        data,
    )


def _cancelled(
    host: DockerHost,
    name: str,
    argv: list[str],
    stopper: ExecStopper,
    collector: OutputCollector,
    note: str,
) -> ToolResult:
    """Stopped by the user: says whether the command really ended in the container."""
    data = {
        "container": name,
        "command": TRIPWIRE.command(argv),
        "stopped": stopper.stopped,
        "output": collector.text,
        "omitted_lines": collector.dropped_lines,
    }
    result = host.result(
        f"Cancelled: {stopper.report}. Output so far:\n{note}{collector.text}", data
    )
    result.ok = False
    result.error = "cancelled" if stopper.stopped else f"cancelled; {stopper.report}"
    return result
