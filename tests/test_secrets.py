"""SecretStore against a real gnome-keyring on a private D-Bus, plus its failure modes."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest
from keyring.backend import KeyringBackend
from keyring.backends import fail
from keyring.backends.SecretService import Keyring as SecretServiceKeyring
from keyring.errors import KeyringLocked

from app.core.secrets import (
    SecretStore,
    SecretStoreError,
    env_api_key,
    known_secret_values,
    secret_key,
)
from app.core.settings import ProviderAccount
from tests.fixtures_keyring import MemoryKeyring


def _value() -> str:
    return f"sk-{uuid.uuid4().hex}"


def _account(kind: str = "openai", url: str = "http://127.0.0.1:1/v1") -> ProviderAccount:
    return ProviderAccount(kind=kind, label="test", base_url=url)


class _Raising(KeyringBackend):
    """A backend that fails every call with a given exception."""

    priority = 0  # type: ignore[assignment]

    def __init__(self, exc: Exception) -> None:
        super().__init__()
        self.exc = exc

    def get_password(self, service: str, username: str) -> str | None:
        raise self.exc

    def set_password(self, service: str, username: str, password: str) -> None:
        raise self.exc

    def delete_password(self, service: str, username: str) -> None:
        raise self.exc


# ---- the real keyring ------------------------------------------------------------------


@pytest.mark.keyring
def test_set_get_delete_round_trip(keyring_env: dict[str, str]) -> None:
    store = SecretStore()
    key = secret_key("github", "acc1", "token")
    value = _value()

    assert store.get(key) is None
    store.set(key, value)
    assert store.get(key) == value
    assert SecretStore().get(key) == value  # really stored, not cached in the instance

    store.set(key, value + "-v2")
    assert store.get(key) == value + "-v2"

    store.delete(key)
    assert store.get(key) is None
    store.delete(key)  # already gone: not an error


@pytest.mark.keyring
def test_value_is_in_the_secret_service_under_service_and_key(keyring_env: dict[str, str]) -> None:
    """Another process (secret-tool) finds it, using only the env the fixture yields."""
    value = _value()
    SecretStore().set("provider/p1/api_key", value)
    env = {**os.environ, **keyring_env}
    found = subprocess.run(
        ["secret-tool", "lookup", "service", "deskhand", "username", "provider/p1/api_key"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert found.stdout == value


@pytest.mark.keyring
def test_known_values_holds_everything_read_or_written(keyring_env: dict[str, str]) -> None:
    writer, reader = SecretStore(), SecretStore()
    written, short = _value(), "abc"
    writer.set("docker/a/password", written)
    writer.set("docker/b/password", short)
    assert written in reader.known_values()
    assert short not in reader.known_values()  # too short to redact safely

    # A value set by another process is learnt when this one reads it.
    external = _value()
    subprocess.run(
        ["secret-tool", "store", "--label=x", "service", "deskhand", "username", "caldav/c/pw"],
        input=external,
        env={**os.environ, **keyring_env},
        text=True,
        timeout=30,
        check=True,
    )
    assert external not in known_secret_values()
    assert reader.get("caldav/c/pw") == external
    assert external in writer.known_values()

    writer.delete("docker/a/password")
    assert written in reader.known_values()  # it may still appear in old output


@pytest.mark.keyring
def test_api_key_for_prefers_keyring_over_env(
    keyring_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    account = _account("openai")
    stored, env_value = _value(), _value()
    monkeypatch.setenv("OPENAI_API_KEY", env_value)
    store = SecretStore()
    store.set(secret_key("provider", account.id, "api_key"), stored)
    assert store.api_key_for(account) == stored


OFFICIAL = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}


@pytest.mark.keyring
@pytest.mark.parametrize(
    ("kind", "var"), [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")]
)
def test_api_key_for_falls_back_to_env_for_its_own_cloud(
    keyring_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, kind: str, var: str
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    store = SecretStore()
    official = _account(kind, OFFICIAL[kind])
    assert store.api_key_for(official) is None

    env_value = _value()
    monkeypatch.setenv(var, env_value)
    assert store.api_key_for(official) == env_value
    assert env_value in store.known_values()
    # typed without a scheme, or with the default port: the same server
    bare = OFFICIAL[kind].removeprefix("https://")
    assert store.api_key_for(_account(kind, bare)) == env_value
    host = bare.split("/")[0]
    assert store.api_key_for(_account(kind, f"https://{host}:443")) == env_value


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:11434/v1",  # a local server
        "https://openrouter.ai/api/v1",  # another cloud
        "http://api.openai.com/v1",  # the right host, but unencrypted
        "https://api.openai.com:8443/v1",  # another port
        "https://api.openai.com.evil.example/v1",  # a look-alike name
        "https://evil.example/api.openai.com/v1",
        "https://api.openai.com@evil.example/v1",
        "https://user:pw@api.openai.com/v1",
        "https://xn--pi-6kc.openai.com/v1",
        "https://аpi.openai.com/v1",  # Cyrillic а
        "",
    ],
)
def test_the_environment_key_goes_to_its_own_cloud_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, url: str
) -> None:
    """OPENAI_API_KEY is a key for api.openai.com: an account for any other server (an
    Ollama, a LAN box, another cloud, a look-alike) never gets it."""
    env_value = _value()
    monkeypatch.setenv("OPENAI_API_KEY", env_value)
    monkeypatch.setenv("ANTHROPIC_API_KEY", env_value)
    store = SecretStore(backend=MemoryKeyring(), home=tmp_path)
    for kind in ("openai", "anthropic"):
        assert store.api_key_for(_account(kind, url)) is None, (kind, url)
    assert env_api_key(url) is None


def test_the_environment_key_is_not_sent_in_place_of_a_stored_key_for_another_host(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`url`: the request goes somewhere else than the account's base URL."""
    env_value = _value()
    monkeypatch.setenv("OPENAI_API_KEY", env_value)
    store = SecretStore(backend=MemoryKeyring(), home=tmp_path)
    account = _account("openai", OFFICIAL["openai"])
    assert store.api_key_for(account) == env_value
    assert store.api_key_for(account, "http://127.0.0.1:8080/v1") is None


def test_a_recheck_finds_a_key_the_index_lost(tmp_path: Path) -> None:
    """A key in the keyring whose name the index does not list is not asked for (no
    unlock prompt for a local server), except on a recheck (the server answered 401);
    the name goes back into the index."""
    backend = MemoryKeyring()
    account = _account("openai")
    name = secret_key("provider", account.id, "api_key")
    value = _value()
    backend.items[("deskhand", name)] = value
    store = SecretStore(backend=backend, home=tmp_path)
    assert store.api_key_for(account) is None
    assert store.api_key_for(account, recheck=True) == value
    assert name in store.stored_names()
    assert store.api_key_for(account) == value


# ---- failures ---------------------------------------------------------------------------


def test_no_backend_gives_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import keyring

    saved = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        store = SecretStore()
        value = _value()
        with pytest.raises(SecretStoreError, match="no system keyring is available") as err:
            store.set("provider/x/api_key", value)
        assert value not in str(err.value)
        assert "provider/x/api_key" in str(err.value)
        with pytest.raises(SecretStoreError, match="no system keyring"):
            store.get("provider/x/api_key")
        with pytest.raises(SecretStoreError, match="no system keyring"):
            store.delete("provider/x/api_key")
    finally:
        keyring.set_keyring(saved)


def test_dbus_down_gives_a_clear_error(
    tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", f"unix:path={tmp_path}/no-such-bus")
    store = SecretStore(backend=SecretServiceKeyring())
    with pytest.raises(SecretStoreError, match="could not be reached"):
        store.get("provider/x/api_key")


def test_locked_keyring_says_so() -> None:
    store = SecretStore(backend=_Raising(KeyringLocked("Failed to unlock the collection!")))
    with pytest.raises(SecretStoreError, match="keyring is locked"):
        store.get("provider/x/api_key")


def test_error_text_never_carries_the_value() -> None:
    value = _value()
    store = SecretStore(backend=_Raising(RuntimeError(f"backend choked on {value}")))
    with pytest.raises(SecretStoreError) as err:
        store.set("provider/x/api_key", value)
    assert value not in str(err.value)
    assert "[redacted]" in str(err.value)
    assert err.value.__cause__ is None  # the original (holding the value) is not chained


def test_api_key_for_uses_env_when_keyring_is_unusable(monkeypatch: pytest.MonkeyPatch) -> None:
    store = SecretStore(backend=fail.Keyring())
    account = _account("anthropic", OFFICIAL["anthropic"])
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(SecretStoreError):  # no key anywhere: say why the keyring failed
        store.api_key_for(account)
    env_value = _value()
    monkeypatch.setenv("ANTHROPIC_API_KEY", env_value)
    assert store.api_key_for(account) == env_value


@pytest.mark.parametrize("key", ["api_key", "provider/api_key", "a//b", "a/b/c/d", " /b/c"])
def test_malformed_keys_are_rejected(key: str) -> None:
    store = SecretStore(backend=fail.Keyring())
    with pytest.raises(ValueError, match="<integration>/<account_id>/<field>"):
        store.get(key)


def test_a_key_deleted_while_secrets_load_stays_deleted(tmp_path: Path) -> None:
    """The start-up load only removes the names it found missing and adds those it found
    extra: a key the user removed meanwhile does not come back into the index."""
    import threading

    first, second = "provider/a/api_key", "provider/b/api_key"

    class Slow(MemoryKeyring):
        def __init__(self) -> None:
            super().__init__()
            self.entered, self.release = threading.Event(), threading.Event()

        def get_password(self, service: str, username: str) -> str | None:
            if username == second:  # read after `first`
                self.entered.set()
                self.release.wait(10)
            return super().get_password(service, username)

    backend = Slow()
    store = SecretStore(backend=backend, home=tmp_path)
    store.set(first, _value())
    store.set(second, _value())
    store._touched.clear()  # as if stored by an earlier session
    store.start_loading()
    assert backend.entered.wait(10)
    store.delete(first)  # Settings → Forget, after the load read it
    backend.release.set()
    assert store.wait_loaded(10)
    assert store.stored_names() == {second}
    assert SecretStore(backend=backend, home=tmp_path).stored_names() == {second}
