"""Model providers: one `Provider` per wire protocol, chosen by `ProviderConfig.kind`.

The implementations (and httpx, ~100 ms to import) load on first use, not at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Provider, ProviderConfig

__all__ = ["make_provider"]


def make_provider(config: ProviderConfig) -> Provider:
    """The provider for `config.kind` ("openai" for any OpenAI-compatible server)."""
    if config.kind == "openai":
        from .openai_compat import OpenAICompatProvider

        return OpenAICompatProvider(config)
    if config.kind == "anthropic":
        from .anthropic import AnthropicProvider

        return AnthropicProvider(config)
    raise ValueError(f"unknown provider kind {config.kind!r} (expected 'openai' or 'anthropic')")
