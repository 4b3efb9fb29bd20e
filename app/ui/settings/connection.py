"""Talking to a provider's server from the settings: list its models, ping a model, and
describe failures without leaking the key — each next to the field that caused it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal

from app.core.providers import make_provider
from app.core.providers.base import (
    AuthError,
    BadRequestError,
    ChatMessage,
    Provider,
    ProviderConfig,
    ProviderError,
    ProviderTimeout,
    UnreachableError,
)
from app.core.providers.kinds import KindName
from app.core.providers.urls import normalize_base_url
from app.core.visible import one_line

#: Test connection must answer quickly and say what is wrong, not retry for a minute.
TEST_CONNECT_TIMEOUT = 5.0
TEST_READ_TIMEOUT = 20.0
#: The longest a whole Test (list the models, then one tiny reply) may take.
TEST_DEADLINE = 30.0

#: Which field a failure belongs to: the base URL, the API key, the model, or none.
Field = Literal["url", "key", "model", "other"]
Stage = Literal["list", "ping"]


@dataclass(frozen=True)
class Failure:
    """Why a Test failed, in plain words, and the field to show it next to."""

    field: Field
    text: str


@asynccontextmanager
async def connected(config: ProviderConfig) -> AsyncIterator[Provider]:
    """A provider for `config`, closed on the way out."""
    provider = make_provider(config)
    try:
        yield provider
    finally:
        await provider.aclose()


async def ping(provider: Provider) -> None:
    """One tiny request (16 tokens at most): proves the key and the model name.

    Read to the end rather than stopping at the first event: a half-read response would
    be finalised later by the garbage collector, outside the event loop."""
    async for _ in provider.stream([ChatMessage("user", "Reply with the word OK.")], []):
        pass


def probe_config(kind: KindName, url: str, api_key: str | None, model: str = "") -> ProviderConfig:
    """A config for testing a server: normalised URL, short timeouts, no retries."""
    return ProviderConfig(
        kind=kind,
        base_url=normalize_base_url(kind, url),
        model=model,
        api_key=api_key,
        max_tokens=16,
        connect_timeout=TEST_CONNECT_TIMEOUT,
        read_timeout=TEST_READ_TIMEOUT,
        max_retries=0,
    )


async def list_models(config: ProviderConfig, timeout: float = TEST_DEADLINE) -> list[str]:
    """The server's models, or a ProviderError / TimeoutError within `timeout` seconds."""
    async with connected(config) as provider:
        return await asyncio.wait_for(provider.list_models(), timeout)


def describe_failure(exc: BaseException, key: str | None) -> str:
    """A user-readable, key-free line for a failure."""
    text = str(exc) if isinstance(exc, ProviderError) else f"{type(exc).__name__}: {exc}"
    return _redact(text, key)


def classify_failure(
    exc: BaseException, *, stage: Stage, key: str | None, model: str = ""
) -> Failure:
    """Which field `exc` is about and what to say there. `stage`: listing the models
    (the URL and key are in question) or the one-word reply (the model is)."""
    if isinstance(exc, AuthError):
        if key:
            return Failure(
                "key", f"The server refused the key (HTTP {exc.status}). Check it and try again."
            )
        return Failure("key", "This server needs an API key. Paste it here, then Test again.")
    if isinstance(exc, TimeoutError | ProviderTimeout):
        if stage == "ping":
            return Failure(
                "model",
                f"“{one_line(model, 80)}” did not answer in time: the server may still be "
                "loading it. Try again in a moment.",
            )
        return Failure("url", "The server did not answer in time. Check the address.")
    if isinstance(exc, UnreachableError):
        return Failure("url", _plain(exc, key) + " Is the server running?")
    if isinstance(exc, BadRequestError):
        if stage == "list":
            return Failure("url", _not_an_api(exc, key))
        return Failure("model", f"“{one_line(model, 80)}” was not accepted: {_plain(exc, key)}")
    return Failure("other", _plain(exc, key))


def _not_an_api(exc: BadRequestError, key: str | None) -> str:
    if exc.status == 200:  # JSON, but not a model list
        return _plain(exc, key)
    why = "not with JSON" if exc.status is None else f"HTTP {exc.status}"
    return (
        f"This address answered ({why}), but it is not a model API. Check the base URL: "
        "OpenAI-compatible servers usually end in /v1."
    )


def _plain(exc: BaseException, key: str | None) -> str:
    return one_line(describe_failure(exc, key), 300)


def _redact(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret and len(secret) >= 4 else text
