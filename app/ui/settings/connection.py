"""Talking to a provider's server from the settings: list its models, ping a model, and
describe failures without leaking the key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from app.core.providers import make_provider
from app.core.providers.base import ChatMessage, Provider, ProviderConfig, ProviderError

#: Test connection must answer quickly and say what is wrong, not retry for a minute.
TEST_TIMEOUTS = {"connect_timeout": 5.0, "read_timeout": 20.0, "max_retries": 0}


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


def describe_failure(exc: BaseException, key: str | None) -> str:
    """A user-readable, key-free line for a failure."""
    text = str(exc) if isinstance(exc, ProviderError) else f"{type(exc).__name__}: {exc}"
    return _redact(text, key)


def _redact(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret and len(secret) >= 4 else text
