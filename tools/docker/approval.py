"""Approval hooks of the docker tools: what a call acts on (`subject`) and one plain line
saying what it will do (`summary_line`).

Cheap and side-effect free: no docker SDK, no connection to the engine; only the arguments
and the active account's label.
"""

from __future__ import annotations

import shlex
from typing import Any

from integrations import docker as docker_integration
from tools.redact import TRIPWIRE
from tools.spec import Subject, ToolContext, ToolError

_MAX_COMMAND = 80


def host_label(ctx: ToolContext) -> str:
    """The active Docker account's label (the local engine when none is chosen)."""
    try:
        account = ctx.account("docker")
    except ToolError:
        if getattr(ctx, "_account_resolver", None) is not None:
            raise  # as the call itself would: never name a host it will not act on
        account = None
    if account is None:
        account = docker_integration.discover()[0]
    return str(account.label)


def subject(args: Any, ctx: ToolContext) -> Subject:
    label = f"Docker · {host_label(ctx)}"
    return Subject(account=label, target=label)


def _command(command: list[str] | str | None) -> str:
    """The command as given (a string as typed, a list quoted), credentials hidden."""
    if command is None:
        return ""
    if isinstance(command, str):
        text = TRIPWIRE.shapes(command)
    else:
        text = shlex.join(TRIPWIRE.command(command))
    return text if len(text) <= _MAX_COMMAND else text[: _MAX_COMMAND - 1] + "…"


def _on(ctx: ToolContext) -> str:
    return f"on host {host_label(ctx)}"


def summary_start(args: Any, ctx: ToolContext) -> str:
    return f"Start container {args.container} {_on(ctx)}"


def summary_stop(args: Any, ctx: ToolContext) -> str:
    return f"Stop container {args.container} {_on(ctx)} (killed after {args.timeout} s)"


def summary_restart(args: Any, ctx: ToolContext) -> str:
    return f"Restart container {args.container} {_on(ctx)}"


def summary_remove(args: Any, ctx: ToolContext) -> str:
    extra = " and its anonymous volumes" if args.volumes else ""
    forced = ", killing it first if it runs" if args.force else ""
    return f"Delete container {args.container}{extra} {_on(ctx)}{forced}"


def summary_run(args: Any, ctx: ToolContext) -> str:
    what = f"Run image {args.image}"
    if args.name:
        what += f" as container {args.name}"
    command = _command(args.command)
    if command:
        what += f" with command `{command}`"
    mode = "in the background" if args.detach else f"up to {args.timeout:g} s"
    return f"{what} {_on(ctx)}, {mode}"


def summary_exec(args: Any, ctx: ToolContext) -> str:
    command = _command(args.command)
    who = f" as {args.user}" if args.user else ""
    return f"Run `{command}`{who} in container {args.container} {_on(ctx)}"


def summary_pull(args: Any, ctx: ToolContext) -> str:
    image = args.image if ":" in args.image.rsplit("/", 1)[-1] else f"{args.image}:latest"
    return f"Download image {image} to host {host_label(ctx)}"


def summary_remove_image(args: Any, ctx: ToolContext) -> str:
    forced = " even if stopped containers use it" if args.force else ""
    return f"Delete image {args.image} from host {host_label(ctx)}{forced}"


_PRUNED = {
    "containers": "stopped containers",
    "networks": "unused networks",
    "volumes": "unused volumes (their data is lost)",
}


def summary_prune(args: Any, ctx: ToolContext) -> str:
    parts = []
    for target in args.targets:
        if target == "images":
            parts.append("every unused image" if args.all_images else "dangling images")
        else:
            parts.append(_PRUNED[target])
    listed = ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else parts[0]
    return f"Remove {listed} {_on(ctx)}"
