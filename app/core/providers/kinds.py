"""The provider kinds Deskhand speaks and the servers it knows: the one table that the
settings, the runtime, the command line, the Providers page, the setup card and local
server detection read.

Adding a wire protocol: one `ProviderKind` row in `PROVIDER_KINDS` (its name also in
`KindName`) plus its `Provider` class. Adding a known server of an existing protocol: one
`Preset` row in `PRESETS`.

Standard library only: read at start-up, before httpx or any provider loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: The `kind` of a provider account or config (settings.json, `--provider`).
KindName = Literal["openai", "anthropic", "engine"]


#: The "base URL" of the built-in engine's account: not an address (the engine is started
#: on a free loopback port when a model is first used).
ENGINE_URL = "builtin://engine"


@dataclass(frozen=True)
class EnvKey:
    """An API key read from the environment, and the one server it may be sent to."""

    var: str
    #: (scheme, host, port): the key goes nowhere else (see `secrets.env_api_key`).
    origin: tuple[str, str, int]


@dataclass(frozen=True)
class ProviderKind:
    name: KindName
    #: Shown in Settings ("API type") and in the account list.
    label: str
    #: Where its `Provider` class is, imported on first use (httpx with it).
    module: str
    class_name: str
    #: Used when an account (or `--provider` without `--base-url`) names no server.
    default_base_url: str
    #: What a base URL typed as a bare address gets ("/v1": the OpenAI-style root).
    bare_path: str
    #: A path the provider adds to every request itself, so it is cut from a typed base.
    own_path: str
    #: Whether the "Tool calls" choice (`ProviderAccount.tool_format`) applies.
    tool_formats: bool
    env_key: EnvKey | None
    #: Servers of this kind named when telling a newcomer what Deskhand talks to.
    examples: tuple[str, ...]
    #: A server somewhere, at an address the user gives; False for the built-in engine,
    #: which Deskhand starts itself (no address, no key, not offered as an "API type").
    addressed: bool = True


PROVIDER_KINDS: dict[KindName, ProviderKind] = {
    "openai": ProviderKind(
        name="openai",
        label="OpenAI-compatible",
        module="app.core.providers.openai_compat",
        class_name="OpenAICompatProvider",
        default_base_url="http://127.0.0.1:11434/v1",
        bare_path="/v1",
        own_path="",
        tool_formats=True,
        env_key=EnvKey("OPENAI_API_KEY", ("https", "api.openai.com", 443)),
        examples=("Ollama", "LM Studio", "llama.cpp", "vLLM", "OpenAI", "OpenRouter"),
    ),
    "anthropic": ProviderKind(
        name="anthropic",
        label="Anthropic",
        module="app.core.providers.anthropic",
        class_name="AnthropicProvider",
        default_base_url="https://api.anthropic.com",
        bare_path="",
        own_path="/v1",
        tool_formats=False,
        env_key=EnvKey("ANTHROPIC_API_KEY", ("https", "api.anthropic.com", 443)),
        examples=(),
    ),
    "engine": ProviderKind(
        name="engine",
        label="Built-in engine",
        module="app.core.engine.provider",
        class_name="EngineProvider",
        default_base_url=ENGINE_URL,
        bare_path="",
        own_path="",
        tool_formats=True,
        env_key=None,
        examples=(),
        addressed=False,
    ),
}

#: The kind of a server known only by its address: typed into the setup card, found on
#: this machine, or given as `--base-url` alone.
ADDRESS_KIND: KindName = "openai"


@dataclass(frozen=True)
class Preset:
    """A server a provider account can start from."""

    name: str
    kind: KindName
    base_url: str
    needs_key: bool
    #: Runs on this machine: first run and "Detect local servers" look for it (its
    #: kind must list models OpenAI-style, at `{base_url}/models`).
    local: bool = False


PRESETS: tuple[Preset, ...] = (
    Preset("Ollama", "openai", "http://127.0.0.1:11434/v1", False, local=True),
    Preset("LM Studio", "openai", "http://127.0.0.1:1234/v1", False, local=True),
    Preset("OpenAI", "openai", "https://api.openai.com/v1", True),
    Preset("OpenRouter", "openai", "https://openrouter.ai/api/v1", True),
    Preset("Anthropic", "anthropic", "https://api.anthropic.com", True),
    Preset("Other OpenAI-compatible server", "openai", "http://127.0.0.1:8080/v1", False),
)


def provider_kind(name: str) -> ProviderKind:
    """The row for `name`; ValueError naming the known kinds for any other."""
    found = next((k for k in PROVIDER_KINDS.values() if k.name == name), None)
    if found is None:
        raise ValueError(f"unknown provider kind {name!r} (expected {known_kinds(' or ')})")
    return found


def known_kinds(joiner: str = ", ") -> str:
    """The kind names as a user types them: "openai or anthropic or engine"."""
    return joiner.join(PROVIDER_KINDS)


def addressed_kinds() -> tuple[ProviderKind, ...]:
    """The kinds an account names a server of (the "API type" choices)."""
    return tuple(k for k in PROVIDER_KINDS.values() if k.addressed)


def default_preset(kind: KindName) -> Preset:
    """The preset a new account of `kind` starts from: the one at its default URL."""
    url = PROVIDER_KINDS[kind].default_base_url
    return next(p for p in PRESETS if p.kind == kind and p.base_url == url)


def local_presets() -> tuple[Preset, ...]:
    return tuple(p for p in PRESETS if p.local)


def env_keys() -> tuple[EnvKey, ...]:
    return tuple(k.env_key for k in PROVIDER_KINDS.values() if k.env_key is not None)


def what_deskhand_talks_to() -> str:
    """ "any OpenAI-compatible server (Ollama, …) or to Anthropic", for first-run text."""
    return " or to ".join(
        f"any {k.label} server ({', '.join(k.examples)})" if k.examples else k.label
        for k in addressed_kinds()
    )
