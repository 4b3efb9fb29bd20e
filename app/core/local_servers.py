"""Find model servers running on this machine (the local presets of `PROVIDER_KINDS`:
Ollama, LM Studio) so Settings and first run can offer them.

They speak the OpenAI-compatible API, so one `GET {base_url}/models` tells us that a server
is there and which models it has. Probes run concurrently and share one deadline; a server
that is down, slow or answers something else is simply left out. A port nobody listens on
(the usual case) is ruled out with a bare connect, so httpx (about 17 MiB with its TLS) is
only imported when something answers. No Qt here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

from app.core.providers.kinds import ADDRESS_KIND, KindName, local_presets

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)


class Candidate(NamedTuple):
    """Where a local server would listen. `base_url` is the OpenAI-style root (ends in /v1)."""

    name: str
    base_url: str


DEFAULTS: tuple[Candidate, ...] = tuple(Candidate(p.name, p.base_url) for p in local_presets())


@dataclass(frozen=True)
class LocalServer:
    name: str
    base_url: str
    models: list[str] = field(default_factory=list)
    #: The API it answered in: the probe is OpenAI-style.
    kind: KindName = ADDRESS_KIND


async def detect_local_servers(
    timeout: float = 0.6, candidates: Iterable[Candidate | tuple[str, str]] = DEFAULTS
) -> list[LocalServer]:
    """The candidates that answered `GET /models` within `timeout` seconds, in candidate order.

    Never raises for network trouble: an unreachable or misbehaving server is just absent.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    wanted = [Candidate(*c) for c in candidates]
    listening = await asyncio.gather(*(_listening(c.base_url, timeout) for c in wanted))
    wanted = [c for c, up in zip(wanted, listening, strict=True) if up]
    timeout = deadline - loop.time()
    if not wanted or timeout <= 0:
        return []
    import httpx

    # trust_env=False: a system proxy must never see (or swallow) loopback probes.
    async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
        tasks = [asyncio.ensure_future(_probe(client, c)) for c in wanted]
        # One shared deadline, so the total stays bounded however many candidates there are.
        done, pending = await asyncio.wait(tasks, timeout=timeout)
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    found = []
    for task in tasks:
        if task in done and not task.cancelled() and task.exception() is None:
            server = task.result()
            if server is not None:
                found.append(server)
    return found


async def _listening(base_url: str, timeout: float) -> bool:
    """Whether something accepts a TCP connection at the URL's host and port."""
    parts = urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        _reader, writer = await asyncio.wait_for(
            asyncio.open_connection(parts.hostname, port), timeout
        )
    except (OSError, TimeoutError, ValueError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


async def _probe(client: httpx.AsyncClient, candidate: Candidate) -> LocalServer | None:
    import httpx

    base = candidate.base_url.rstrip("/")
    try:
        response = await client.get(f"{base}/models")
    except httpx.HTTPError as exc:
        log.debug("no %s at %s: %s", candidate.name, base, type(exc).__name__)
        return None
    if response.status_code != 200:
        log.debug("%s at %s answered HTTP %s", candidate.name, base, response.status_code)
        return None
    try:
        models = _model_ids(response.json())
    except ValueError:
        return None
    if models is None:
        return None
    return LocalServer(candidate.name, base, models)


def _model_ids(data: Any) -> list[str] | None:
    """Model ids from an OpenAI-style list; None if the document is not one."""
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        return None
    return [str(item["id"]) for item in data["data"] if isinstance(item, dict) and "id" in item]
