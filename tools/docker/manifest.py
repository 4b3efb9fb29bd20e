"""Docker tools: cheap declarations. Implementations import the docker SDK on first call."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tools.spec import Operation, ToolManifest

_CONTAINER_HELP = "Container name or ID (an ID prefix works)"
_HOST_NOTE = "Acts on the active Docker host (account); the result names the host."


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class ListContainers(_Params):
    all: bool = Field(False, description="Include stopped containers (default: running only)")
    filters: dict[str, str | list[str]] | None = Field(
        None,
        description="Docker filters, e.g. {'name': 'web', 'status': 'exited', "
        "'ancestor': 'nginx', 'label': 'app=shop'}",
    )
    limit: int = Field(100, ge=1, le=1000, description="Show at most this many containers")


class ContainerRef(_Params):
    container: str = Field(..., min_length=1, description=_CONTAINER_HELP)


class InspectContainer(ContainerRef):
    full: bool = Field(False, description="Return the engine's complete JSON instead of a summary")


class ContainerLogs(ContainerRef):
    tail: int | None = Field(
        200, ge=1, le=100_000, description="Only the last N lines (null for all lines)"
    )
    since: str | None = Field(
        None, description="Only lines after this time: ISO 8601 or relative like '10m', '2h', '1d'"
    )
    until: str | None = Field(
        None, description="Only lines before this time: ISO 8601 or relative like '5m'"
    )
    timestamps: bool = Field(False, description="Prefix each line with its timestamp")


class ContainerStats(_Params):
    container: str | None = Field(
        None, description=f"{_CONTAINER_HELP}; omit for every running container"
    )


class StopContainer(ContainerRef):
    timeout: int = Field(
        10, ge=0, le=600, description="Seconds to wait for a clean exit before killing it"
    )


class RemoveContainer(ContainerRef):
    force: bool = Field(False, description="Kill and remove a running container")
    volumes: bool = Field(False, description="Also remove the container's anonymous volumes")


class RunContainer(_Params):
    image: str = Field(..., min_length=1, description="Image to run, e.g. 'nginx:1.27'")
    command: list[str] | str | None = Field(
        None, description="Command to run instead of the image's default (list or shell string)"
    )
    name: str | None = Field(None, description="Container name")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables")
    ports: list[str] = Field(
        default_factory=list,
        description="Published ports like docker -p: '8080:80', '127.0.0.1:5432:5432/tcp'",
    )
    volumes: list[str] = Field(
        default_factory=list,
        description="Mounts like docker -v: '/host/dir:/data', 'myvolume:/data:ro'",
    )
    workdir: str | None = Field(None, description="Working directory inside the container")
    network: str | None = Field(None, description="Network to join, e.g. 'bridge' or 'none'")
    detach: bool = Field(
        False, description="Start in the background and return at once (like docker run -d)"
    )
    remove: bool = Field(False, description="Remove the container when it exits (docker --rm)")
    timeout: float = Field(
        120,
        gt=0,
        le=600,
        description="Foreground only: stop the container after this many seconds",
    )


class ExecInContainer(ContainerRef):
    command: list[str] | str = Field(
        ..., description="Command to run: a list of arguments, or a string run with /bin/sh -c"
    )
    workdir: str | None = Field(None, description="Working directory inside the container")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables")
    user: str | None = Field(None, description="Run as this user, e.g. 'root' or '1000:1000'")
    timeout: float = Field(60, gt=0, le=600, description="Give up after this many seconds")


class ListImages(_Params):
    all: bool = Field(False, description="Include intermediate images")
    name: str | None = Field(None, description="Only images of this repository, e.g. 'nginx'")


class PullImage(_Params):
    image: str = Field(..., min_length=1, description="Image to pull, e.g. 'nginx' or 'nginx:1.27'")
    platform: str | None = Field(None, description="Platform, e.g. 'linux/arm64'")


class RemoveImage(_Params):
    image: str = Field(..., min_length=1, description="Image name:tag or ID")
    force: bool = Field(False, description="Remove even if stopped containers use it")


class NoParams(_Params):
    pass


PruneTarget = Literal["containers", "images", "volumes", "networks"]


def _default_prune_targets() -> list[PruneTarget]:
    return ["containers", "images", "networks"]


class Prune(_Params):
    targets: list[PruneTarget] = Field(
        default_factory=_default_prune_targets,
        min_length=1,
        description="What to clean up; volumes are left alone unless listed (they hold data)",
    )
    all_images: bool = Field(
        False, description="Remove every image no container uses, not just dangling ones"
    )


_APPROVAL = "tools.docker.approval"


def _impl(module: str, name: str) -> str:
    return f"tools.docker.{module}:{name}"


_READ = frozenset({Operation.READ})
_UPDATE = frozenset({Operation.UPDATE})
_DELETE = frozenset({Operation.DELETE})
_EXECUTE = frozenset({Operation.EXECUTE})


def _tool(
    name: str,
    description: str,
    params: type[BaseModel],
    *,
    operations: frozenset[Operation],
    impl: str,
    preview: str | None = None,
    summary: str | None = None,
    timeout: float = 60.0,
) -> ToolManifest:
    """A docker tool; one that changes something names its host and says in one line what
    it will do (`summary` is a function of tools.docker.approval)."""
    return ToolManifest(
        name=name,
        category="docker",
        description=f"{description} {_HOST_NOTE}",
        params=params,
        operations=operations,
        impl=impl,
        preview=preview,
        subject=None if summary is None else f"{_APPROVAL}:subject",
        summary_line=None if summary is None else f"{_APPROVAL}:{summary}",
        timeout=timeout,
        # Stop ends the remote command through a second exec, then reports how it went
        stop_grace=12.0 if name.endswith("_exec") else 0.5,
        requires=("docker",),
        integration="docker",
    )


MANIFESTS: list[ToolManifest] = [
    _tool(
        "docker_list_containers",
        "List Docker containers with name, image, status and ports (running only unless all=true).",
        ListContainers,
        operations=_READ,
        impl=_impl("containers", "list_containers"),
    ),
    _tool(
        "docker_inspect_container",
        "Show one container's details: state, image, command, ports, mounts, networks, env.",
        InspectContainer,
        operations=_READ,
        impl=_impl("containers", "inspect_container"),
    ),
    _tool(
        "docker_container_logs",
        "Read a container's logs (stdout and stderr), newest last, optionally a time window.",
        ContainerLogs,
        operations=_READ,
        impl=_impl("logs", "container_logs"),
    ),
    _tool(
        "docker_container_stats",
        "Show a one-shot snapshot of CPU, memory, network and disk I/O per running container.",
        ContainerStats,
        operations=_READ,
        impl=_impl("stats", "container_stats"),
    ),
    _tool(
        "docker_start_container",
        "Start a stopped container.",
        ContainerRef,
        operations=_UPDATE,
        impl=_impl("containers", "start_container"),
        preview=_impl("containers", "preview_start"),
        summary="summary_start",
    ),
    _tool(
        "docker_stop_container",
        "Stop a running container (SIGTERM, then SIGKILL after timeout seconds).",
        StopContainer,
        operations=_UPDATE,
        impl=_impl("containers", "stop_container"),
        preview=_impl("containers", "preview_stop"),
        summary="summary_stop",
    ),
    _tool(
        "docker_restart_container",
        "Restart a container (stop it, then start it again).",
        StopContainer,
        operations=_UPDATE,
        impl=_impl("containers", "restart_container"),
        preview=_impl("containers", "preview_restart"),
        summary="summary_restart",
    ),
    _tool(
        "docker_remove_container",
        "Delete a container; a running one needs force=true. Its data not in volumes is lost.",
        RemoveContainer,
        operations=_DELETE,
        impl=_impl("containers", "remove_container"),
        preview=_impl("containers", "preview_remove"),
        summary="summary_remove",
    ),
    _tool(
        "docker_run_container",
        "Create and start a container from a local image, like `docker run`. "
        "In the foreground it waits for the exit and returns the output (newest lines kept); "
        "detach=true returns at once.",
        RunContainer,
        operations=frozenset({Operation.CREATE, Operation.EXECUTE}),
        impl=_impl("run", "run_container"),
        preview=_impl("run", "preview_run"),
        timeout=660.0,  # the call's own `timeout` (≤600 s) stops the container first
        summary="summary_run",
    ),
    _tool(
        "docker_exec",
        "Run a command inside a running container and return its exit code and output.",
        ExecInContainer,
        operations=_EXECUTE,
        impl=_impl("exec", "exec_in_container"),
        preview=_impl("exec", "preview_exec"),
        timeout=660.0,
        summary="summary_exec",
    ),
    _tool(
        "docker_list_images",
        "List local Docker images with tags, IDs, sizes and creation dates.",
        ListImages,
        operations=_READ,
        impl=_impl("images", "list_images"),
    ),
    _tool(
        "docker_pull_image",
        "Download an image from its registry (the latest tag unless one is given).",
        PullImage,
        operations=frozenset({Operation.CREATE}),
        impl=_impl("images", "pull_image"),
        timeout=1800.0,
        summary="summary_pull",
    ),
    _tool(
        "docker_remove_image",
        "Delete a local image (a tag, or the image when it is the last tag).",
        RemoveImage,
        operations=_DELETE,
        impl=_impl("images", "remove_image"),
        preview=_impl("images", "preview_remove_image"),
        summary="summary_remove_image",
    ),
    _tool(
        "docker_list_volumes",
        "List Docker volumes with driver, mount point and which containers use them.",
        NoParams,
        operations=_READ,
        impl=_impl("system", "list_volumes"),
    ),
    _tool(
        "docker_list_networks",
        "List Docker networks with driver, scope, subnet and attached containers.",
        NoParams,
        operations=_READ,
        impl=_impl("system", "list_networks"),
    ),
    _tool(
        "docker_prune",
        "Remove stopped containers, unused networks and dangling images (volumes only if asked). "
        "The approval prompt lists what would be freed.",
        Prune,
        operations=_DELETE,
        impl=_impl("system", "prune"),
        preview=_impl("system", "preview_prune"),
        timeout=600.0,
        summary="summary_prune",
    ),
]
