"""Model providers: one `Provider` per wire protocol, chosen by `ProviderConfig.kind` from
the `PROVIDER_KINDS` table (app/core/providers/kinds.py).

The implementations (and httpx, ~100 ms to import) load on first use, not at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, cast

from .kinds import provider_kind

if TYPE_CHECKING:
    from .base import Provider, ProviderConfig

__all__ = ["make_provider"]


def make_provider(config: ProviderConfig) -> Provider:
    """The provider for `config.kind` ("openai" for any OpenAI-compatible server)."""
    kind = provider_kind(config.kind)
    provider_class = getattr(importlib.import_module(kind.module), kind.class_name)
    return cast("Provider", provider_class(config))
