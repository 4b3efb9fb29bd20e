"""The `PROVIDER_KINDS` table is what every part of Deskhand reads about provider kinds:
settings accept its kinds, the factory builds its classes, the runtime falls back to its
default servers, URL checks and environment keys follow its rows."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import get_args

import pydantic
import pytest

from app.core.local_servers import DEFAULTS
from app.core.providers import make_provider
from app.core.providers.base import ProviderConfig
from app.core.providers.kinds import (
    PRESETS,
    PROVIDER_KINDS,
    KindName,
    addressed_kinds,
    default_preset,
    local_presets,
    provider_kind,
)
from app.core.providers.urls import normalize_base_url, origin
from app.core.runtime import ConfigError, Runtime
from app.core.secrets import env_api_key
from app.core.settings import ProviderAccount
from tests.fakellm import ScriptedLLM

KINDS = list(PROVIDER_KINDS)
#: The kinds whose accounts name a server (the built-in engine has none).
SERVER_KINDS = [k.name for k in addressed_kinds()]


def test_settings_accept_exactly_the_kinds_of_the_table() -> None:
    assert set(get_args(KindName)) == set(PROVIDER_KINDS)
    for kind in KINDS:
        assert ProviderAccount(kind=kind, label="x", base_url="").kind == kind
    with pytest.raises(pydantic.ValidationError):
        ProviderAccount(kind="gemini", label="x", base_url="")  # type: ignore[arg-type]


def test_only_the_built_in_engine_names_no_server() -> None:
    assert [k for k in KINDS if k not in SERVER_KINDS] == ["engine"]


@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_each_kind_lists_models_through_its_own_class(llm: ScriptedLLM, kind: KindName) -> None:
    """A row is enough to reach a server: its class, built by the factory, lists the
    models at a bare address normalised by the row's path rules."""
    row = PROVIDER_KINDS[kind]
    config = ProviderConfig(kind, normalize_base_url(kind, llm.base_url), "m", api_key="k")

    async def models() -> tuple[str, list[str]]:
        provider = make_provider(config)
        try:
            return type(provider).__name__, await provider.list_models()
        finally:
            await provider.aclose()

    name, listed = asyncio.run(asyncio.wait_for(models(), 15))
    assert name == row.class_name
    assert listed == ["fake-model", "fake-model-large"]


def test_an_unknown_kind_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="expected openai or anthropic"):
        provider_kind("gemini")
    runtime = Runtime(tmp_path, entry_points=False)
    try:
        with pytest.raises(ConfigError, match="use openai or anthropic"):
            runtime.provider_config("gemini", "http://127.0.0.1:9/v1", "m")
    finally:
        runtime.close()


@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_a_kind_starts_from_the_preset_at_its_default_server(kind: KindName) -> None:
    preset = default_preset(kind)
    assert preset.kind == kind
    assert preset.base_url == PROVIDER_KINDS[kind].default_base_url


def test_local_detection_looks_for_the_local_presets() -> None:
    assert [(c.name, c.base_url) for c in DEFAULTS] == [
        (p.name, p.base_url) for p in local_presets()
    ]
    assert {p.name for p in local_presets()} == {"Ollama", "LM Studio"}
    assert all(not p.needs_key for p in local_presets())


def test_every_preset_url_is_already_what_its_kind_expects() -> None:
    for preset in PRESETS:
        assert normalize_base_url(preset.kind, preset.base_url) == preset.base_url


@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_an_environment_key_goes_only_to_its_own_server(
    kind: KindName, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_key = PROVIDER_KINDS[kind].env_key
    assert env_key is not None
    for other in PROVIDER_KINDS.values():
        if other.env_key is not None:
            monkeypatch.delenv(other.env_key.var, raising=False)
    monkeypatch.setenv(env_key.var, "sk-from-the-environment-0123")
    scheme, host, _port = env_key.origin
    assert env_api_key(f"{scheme}://{host}/v1") == "sk-from-the-environment-0123"
    assert env_api_key(f"http://{host}/v1") is None
    assert env_api_key("https://127.0.0.1:11434/v1") is None
    assert origin(f"{scheme}://{host}") == env_key.origin
