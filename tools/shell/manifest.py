"""Terminal tools: cheap declarations. The implementations (tools/shell/tools.py) parse,
sandbox and run on first call; nothing heavy is imported here."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tools.spec import Operation, ToolManifest

_IMPL = "tools.shell.tools"
_HOOKS = "tools.shell.hooks"
_FOLDER_HELP = (
    "Working folder, inside the folders the user allowed (default: the first allowed folder)"
)
_NETWORK_HELP = (
    "Let the command use the network (off by default; it means data may leave the machine, "
    "so the user is asked unless a rule allows this command with the network)"
)


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class RunCommand(_Params):
    command: str = Field(..., min_length=1, max_length=20_000, description="A bash command line")
    folder: str | None = Field(None, description=_FOLDER_HELP)
    timeout: int | None = Field(
        None, ge=1, le=3600, description="Seconds before it is stopped (default 120)"
    )
    network: bool = Field(False, description=_NETWORK_HELP)


class StartCommand(_Params):
    command: str = Field(..., min_length=1, max_length=20_000, description="A bash command line")
    folder: str | None = Field(None, description=_FOLDER_HELP)
    network: bool = Field(False, description=_NETWORK_HELP)
    label: str | None = Field(None, max_length=80, description="A short name, e.g. 'dev server'")
    keep: bool = Field(
        False,
        description="Keep it running after Deskhand quits (the user is always asked for this)",
    )


class ProcessRef(_Params):
    id: str = Field(..., min_length=1, max_length=64, description="The id shell_start returned")


class ReadOutput(ProcessRef):
    max_bytes: int = Field(20_000, ge=100, le=200_000, description="At most this much new output")


class SendInput(ProcessRef):
    text: str = Field(..., max_length=10_000, description="Text to type (add \\n for Enter)")


class ListProcesses(_Params):
    pass


class RunCode(_Params):
    language: Literal["python", "javascript", "shell"] = Field(
        ..., description="python, javascript (needs node) or shell (bash)"
    )
    code: str = Field(..., min_length=1, max_length=100_000, description="The program text")
    timeout: int | None = Field(None, ge=1, le=3600, description="Seconds (default 120)")
    network: bool = Field(False, description=_NETWORK_HELP)


_RUN = frozenset({Operation.EXECUTE})


def _tool(
    name: str,
    impl: str,
    description: str,
    params: type[BaseModel],
    *,
    operations: frozenset[Operation] = _RUN,
    hooks: bool = True,
    timeout: float = 60.0,
) -> ToolManifest:
    return ToolManifest(
        name=name,
        category="shell",
        description=description,
        params=params,
        operations=operations,
        impl=f"{_IMPL}:{impl}",
        subject=f"{_HOOKS}:subject" if hooks else None,
        escalate=f"{_HOOKS}:escalate" if hooks else None,
        summary_line=f"{_HOOKS}:summary_line" if hooks else None,
        timeout=timeout,
        stop_grace=3.0,
    )


MANIFESTS: list[ToolManifest] = [
    _tool(
        "shell_run",
        "run_command",
        "Run a bash command line in a terminal in one of the user's folders and wait for it: "
        "output (colours removed, long output shortened) and exit code. Sandboxed where the "
        "system allows: the allowed folders writable, the rest read-only, no network unless "
        "network=true. For servers and watchers use shell_start.",
        RunCommand,
        timeout=3700.0,  # the call's own timeout (≤3600 s) stops the command first
    ),
    _tool(
        "shell_start",
        "start_command",
        "Start a long-running command in the background (a dev server, a watcher) and return "
        "its id at once; read its output with shell_read, type into it with shell_send, end "
        "it with shell_stop. Background commands end when Deskhand quits.",
        StartCommand,
    ),
    _tool(
        "shell_list",
        "list_commands",
        "List the background commands started with shell_start: id, command, folder, running "
        "or exit code.",
        ListProcesses,
        operations=frozenset({Operation.READ}),
        hooks=False,
    ),
    _tool(
        "shell_read",
        "read_output",
        "Read the new output of a background command since the last read (colours removed).",
        ReadOutput,
        operations=frozenset({Operation.READ}),
        hooks=False,
    ),
    _tool(
        "shell_send",
        "send_input",
        "Type text into a background command's terminal (add \\n for Enter).",
        SendInput,
    ),
    _tool(
        "shell_stop",
        "stop_command",
        "Stop a background command and everything it started.",
        ProcessRef,
        operations=frozenset({Operation.UPDATE}),
    ),
    _tool(
        "shell_code",
        "run_code",
        "Run a snippet of Python, JavaScript (if node is installed) or bash in a fresh "
        "temporary folder, sandboxed like shell_run; returns its output and exit code.",
        RunCode,
        timeout=3700.0,
    ),
]
