"""Model providers: one `Provider` per wire protocol, chosen by `ProviderConfig.kind`."""

from __future__ import annotations

from .anthropic import AnthropicProvider
from .base import Provider, ProviderConfig
from .openai_compat import OpenAICompatProvider

__all__ = ["AnthropicProvider", "OpenAICompatProvider", "make_provider"]


def make_provider(config: ProviderConfig) -> Provider:
    """The provider for `config.kind` ("openai" for any OpenAI-compatible server)."""
    if config.kind == "openai":
        return OpenAICompatProvider(config)
    if config.kind == "anthropic":
        return AnthropicProvider(config)
    raise ValueError(f"unknown provider kind {config.kind!r} (expected 'openai' or 'anthropic')")
