"""The Docker host a call acts on: its account, SDK client, and error translation."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import docker.errors
import requests.exceptions

from integrations import docker as docker_integration
from integrations.docker_client import docker_client
from integrations.spec import Account
from tools.docker import errors
from tools.spec import ToolContext, ToolError, ToolResult


def active_account(ctx: ToolContext) -> Account:
    """The account the user made active for Docker. When the app wires no account resolver
    (or none is chosen), the first discovered account — the local engine — is the default,
    as IntegrationSpec.discover documents."""
    try:
        account = ctx.account("docker")
    except ToolError:
        if getattr(ctx, "_account_resolver", None) is not None:
            raise  # a configured directory failed: never silently act on another host
        account = None
    return account or docker_integration.discover()[0]


@dataclass(frozen=True)
class DockerHost:
    account: Account
    client: Any  # docker.DockerClient

    @property
    def label(self) -> str:
        return self.account.label

    @property
    def address(self) -> str:
        return docker_integration.describe_host(self.account)

    @property
    def title(self) -> str:
        """How results name the host: the account label, plus the address unless it shows it."""
        return self.label if self.address in self.label else f"{self.label} ({self.address})"

    def result(self, content: str, data: dict[str, Any] | None = None) -> ToolResult:
        """A successful result that says which host answered (in the text and in `data`)."""
        payload = {"host": self.label, "address": self.address, **(data or {})}
        return ToolResult(ok=True, content=f"Docker host: {self.title}\n{content}", data=payload)

    @contextlib.contextmanager
    def errors(self, *, container: str | None = None, image: str | None = None) -> Iterator[None]:
        """Turn SDK failures inside the block into readable ToolErrors.

        `container` / `image` name what the block looks up, for "no such …" messages."""
        try:
            yield
        except docker.errors.ImageNotFound as exc:
            raise errors.no_such_image(image or str(exc), self.title, self._tags()) from None
        except docker.errors.NotFound as exc:
            # A 404 may also name a missing network or volume; only this one is "no such".
            if container is not None and "no such container" in str(exc.explanation).lower():
                raise errors.no_such_container(container, self.title, self._names()) from None
            raise ToolError(errors.api_problem(exc)) from None
        except docker.errors.APIError as exc:
            raise ToolError(errors.api_problem(exc)) from None
        except (
            docker.errors.DockerException,
            requests.exceptions.RequestException,
            ConnectionError,
        ) as exc:
            message = errors.connection_problem(exc, self.address)
            if message is None:
                raise
            raise ToolError(message) from None

    def container(self, ref: str) -> Any:
        """The container named or identified by `ref`, or a ToolError with near matches."""
        with self.errors(container=ref):
            return self.client.containers.get(ref)

    def _names(self) -> list[str]:
        with contextlib.suppress(Exception):  # suggestions are a bonus; never mask the error
            found = self.client.containers.list(all=True)
            return [c.name for c in found] + [c.short_id for c in found]
        return []

    def _tags(self) -> list[str]:
        with contextlib.suppress(Exception):
            return [tag for img in self.client.images.list() for tag in img.tags]
        return []


def connect(ctx: ToolContext) -> DockerHost:
    """The active host with a working client, or a ToolError saying why it can't be reached."""
    account = active_account(ctx)
    address = docker_integration.describe_host(account)
    try:
        client = docker_client(account)
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise ToolError(
            errors.connection_problem(exc, address) or f"cannot connect to Docker: {exc}"
        ) from None
    return DockerHost(account, client)
