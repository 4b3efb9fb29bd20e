"""Runtime wiring: provider resolution, persisted approval rules, conversations."""

from __future__ import annotations

import json

import pytest

from app.core.runtime import ConfigError, Runtime
from app.core.settings import ProviderAccount


@pytest.fixture
def runtime(home, monkeypatch):
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    rt = Runtime(home, entry_points=False)
    yield rt
    rt.close()


def test_no_provider_is_a_config_error(runtime):
    with pytest.raises(ConfigError, match="no model provider is configured"):
        runtime.provider_config()


def test_flags_win_over_the_active_account(runtime, monkeypatch):
    account = ProviderAccount(
        kind="openai", label="Local", base_url="http://127.0.0.1:9/v1", model="small"
    )
    runtime.settings.providers.append(account)
    runtime.settings.active_provider = account.id
    assert runtime.provider_config().model == "small"
    assert runtime.provider_config(model="big").model == "big"
    assert runtime.provider_config(base_url="http://127.0.0.1:8/v1/").base_url == (
        "http://127.0.0.1:8/v1"
    )
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env-123")
    anthropic = runtime.provider_config(kind="anthropic")
    assert anthropic.base_url == "https://api.anthropic.com"
    assert anthropic.api_key == "sk-ant-from-env-123"
    assert "sk-ant-from-env-123" in runtime.secrets.known_values()


def test_the_environment_key_is_only_for_its_own_cloud(runtime, monkeypatch):
    """`deskhand ask --base-url <local server>` with OPENAI_API_KEY exported: the key is
    for api.openai.com and is not sent to the local server (nor to any other)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-from-env-456")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env-123")
    assert runtime.provider_config(base_url="http://127.0.0.1:8/v1").api_key is None
    assert runtime.provider_config("anthropic", "http://127.0.0.1:8").api_key is None
    assert runtime.provider_config(base_url="https://openrouter.ai/api/v1").api_key is None
    official = runtime.provider_config(base_url="https://api.openai.com/v1")
    assert official.api_key == "sk-openai-from-env-456"
    assert runtime.provider_config("anthropic").api_key == "sk-ant-from-env-123"
    # a saved account on a local server, no key of its own
    local = ProviderAccount(id="lan", kind="openai", label="LAN", base_url="gpu.lan:8000")
    cloud = ProviderAccount(id="oai", kind="openai", label="OpenAI", base_url="api.openai.com")
    runtime.settings.providers += [local, cloud]
    assert runtime.account_provider_config("lan").api_key is None
    assert runtime.account_provider_config("oai").api_key == "sk-openai-from-env-456"


def test_an_accounts_stored_key_is_not_sent_to_another_base_url(runtime):
    """`--base-url` naming another server than the active account's: that account's key
    stays home."""
    from app.core.secrets import SecretStore, secret_key
    from tests.fixtures_keyring import MemoryKeyring

    runtime.secrets = SecretStore(backend=MemoryKeyring(), home=runtime.home)
    account = ProviderAccount(
        kind="openai", label="Work", base_url="https://llm.example.com/v1", model="big"
    )
    runtime.settings.providers.append(account)
    runtime.settings.active_provider = account.id
    runtime.secrets.set(secret_key("provider", account.id, "api_key"), "sk-work-key-789")
    assert runtime.provider_config().api_key == "sk-work-key-789"
    same = runtime.provider_config(base_url="llm.example.com:443/v1/")
    assert same.api_key == "sk-work-key-789"
    assert runtime.provider_config(base_url="http://127.0.0.1:8/v1").api_key is None


def test_a_recheck_asks_the_keyring_for_a_key_the_index_lost(runtime):
    """The server answered 401 to a request without a key: `recheck_key` asks the keyring
    even though the index of names lists no key for the account."""
    from app.core.secrets import SecretStore, secret_key
    from tests.fixtures_keyring import MemoryKeyring

    backend = MemoryKeyring()
    runtime.secrets = SecretStore(backend=backend, home=runtime.home)
    account = ProviderAccount(id="acc", kind="openai", label="A", base_url="http://x:1/v1")
    runtime.settings.providers.append(account)
    backend.items[("deskhand", secret_key("provider", "acc", "api_key"))] = "sk-lost-key-000"
    assert runtime.account_provider_config("acc").api_key is None
    assert runtime.account_provider_config("acc", recheck_key=True).api_key == "sk-lost-key-000"


def test_an_unusable_keyring_is_a_warning_not_a_failure(runtime, monkeypatch, caplog):
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    import keyring
    import keyring.backends.fail

    monkeypatch.setattr(keyring, "get_keyring", lambda: keyring.backends.fail.Keyring())
    account = ProviderAccount(kind="openai", label="Local", base_url="http://127.0.0.1:9/v1")
    runtime.settings.providers.append(account)
    runtime.settings.active_provider = account.id
    # no key stored (the index of names says so): the keyring is not even asked
    assert runtime.provider_config().api_key is None
    assert caplog.text == ""
    # a key is stored (another process wrote its name), but the keyring cannot be used
    (runtime.home / "secrets-index.json").write_text(
        json.dumps({"services": {"deskhand": [f"provider/{account.id}/api_key"]}})
    )
    config = runtime.provider_config()
    assert config.api_key is None
    assert "continuing without an API key" in caplog.text


def test_old_per_tool_lists_become_rules_once_and_the_user_is_told(home):
    from app.core.runtime import Runtime

    (home / "settings.json").write_text(
        json.dumps(
            {
                "approvals": {
                    "always_allow": ["fs_write_file", "category:docker"],
                    "deny": ["mcp__github__delete_repo"],
                }
            }
        )
    )
    first = Runtime(home)
    rules = {(r.tool, r.source, r.decision.value) for r in first.rules.rules()}
    assert rules == {
        ("fs_write_file", "builtin", "allow"),
        ("docker_*", "builtin", "allow"),
        ("mcp__github__delete_repo", "mcp:*", "deny"),
    }
    saved = json.loads((home / "settings.json").read_text())
    assert saved["approvals"] == {"always_allow": [], "deny": []}
    [notice] = first.take_notices()
    assert "now rules" in notice and "deskhand rules list" in notice
    first.close()
    again = Runtime(home)
    assert len(again.rules.rules()) == 3 and again.take_notices() == []
    again.close()


def test_conversations_round_trip_with_active_tools(runtime):
    conv = runtime.open_conversation()
    from app.core.providers.base import ChatMessage, ToolCallRequest

    runtime.store.append_message(conv.id, ChatMessage("user", "hi"))
    runtime.store.append_message(
        conv.id,
        ChatMessage("assistant", "", tool_calls=[ToolCallRequest("c1", "fs_read_file", "{}")]),
    )
    again = runtime.open_conversation(conv.id)
    assert [m.role for m in again.messages] == ["user", "assistant"]
    assert "fs_read_file" in again.session.active
    with pytest.raises(ConfigError):
        runtime.open_conversation("missing")
