"""Credentials in the OS keyring (DESIGN.md §5): service "deskhand",
username `<integration>/<account_id>/<field>`.

Every call here BLOCKS (D-Bus on Linux, Keychain on macOS, Credential Manager on
Windows, and an unlock prompt may appear). Code on the asyncio loop must call them
through `loop.run_in_executor(...)` / `asyncio.to_thread(...)`.

`known_values()` feeds the secret tripwire: every secret value this process has read
or written is remembered so tool output, logs and the store can redact it.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from keyring.backend import KeyringBackend

    from app.core.settings import ProviderAccount

SERVICE = "deskhand"
#: Shorter values are not remembered for redaction: they would mask ordinary text.
MIN_KNOWN_LENGTH = 4
ENV_API_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}

_known: set[str] = set()
_known_lock = threading.Lock()


class SecretStoreError(Exception):
    """The keyring could not be used. `str(err)` is for the user and never holds a value."""


def remember_secret(value: str | None) -> None:
    """Add a value to the process-wide set the redaction tripwire masks."""
    if value and len(value) >= MIN_KNOWN_LENGTH:
        with _known_lock:
            _known.add(value)


def known_secret_values() -> set[str]:
    """A copy of every secret value this process has read or written."""
    with _known_lock:
        return set(_known)


def secret_key(integration: str, account_id: str, field: str) -> str:
    """The keyring username for one credential field, e.g. `provider/ab12cd/api_key`."""
    key = f"{integration}/{account_id}/{field}"
    _check_key(key)
    return key


def _check_key(key: str) -> None:
    parts = key.split("/")
    if len(parts) != 3 or not all(p.strip() for p in parts):
        raise ValueError(f"secret key must look like '<integration>/<account_id>/<field>': {key!r}")


class SecretStore:
    """A thin, blocking wrapper around `keyring` with user-readable errors.

    `backend` defaults to keyring's configured backend (looked up on every call, so
    `keyring.set_keyring` takes effect); pass one to pin it.
    """

    def __init__(self, service: str = SERVICE, backend: KeyringBackend | None = None) -> None:
        self.service = service
        self._backend = backend

    def get(self, key: str) -> str | None:
        _check_key(key)
        try:
            value = self._keyring().get_password(self.service, key)
        except Exception as exc:
            raise _explain(exc, f"read '{key}' from") from exc
        remember_secret(value)
        return value

    def set(self, key: str, value: str) -> None:
        _check_key(key)
        remember_secret(value)  # even if saving fails, the value is now in this process
        try:
            self._keyring().set_password(self.service, key, value)
        except Exception as exc:
            err = _explain(exc, f"save '{key}' to", hide=value)
            # Do not chain an exception whose text might carry the value.
            raise err from (None if value in repr(exc.args) else exc)

    def delete(self, key: str) -> None:
        """Remove a credential; a missing one is not an error."""
        from keyring.errors import PasswordDeleteError

        _check_key(key)
        try:
            self._keyring().delete_password(self.service, key)
        except PasswordDeleteError:
            return
        except Exception as exc:
            raise _explain(exc, f"delete '{key}' from") from exc

    def known_values(self) -> set[str]:
        return known_secret_values()

    def api_key_for(self, account: ProviderAccount) -> str | None:
        """The account's API key: keyring `provider/<id>/api_key`, else the environment
        (`OPENAI_API_KEY` / `ANTHROPIC_API_KEY` by kind).

        An unusable keyring only raises when the environment has no key either.
        """
        failure: SecretStoreError | None = None
        try:
            value = self.get(secret_key("provider", account.id, "api_key"))
        except SecretStoreError as exc:
            value, failure = None, exc
        if value:
            return value
        env_value = os.environ.get(ENV_API_KEYS[account.kind]) or None
        if env_value:
            remember_secret(env_value)
            return env_value
        if failure is not None:
            raise failure
        return None

    def _keyring(self) -> KeyringBackend:
        if self._backend is not None:
            return self._backend
        import keyring  # ~86 ms; only paid when a secret is first needed

        return keyring.get_keyring()


def _explain(exc: Exception, action: str, hide: str | None = None) -> SecretStoreError:
    from keyring.errors import KeyringLocked, NoKeyringError

    if isinstance(exc, NoKeyringError):
        why = (
            "no system keyring is available. Deskhand keeps credentials only in the OS "
            "keyring: on Linux install and run a Secret Service provider such as "
            "GNOME Keyring or KWallet"
        )
    elif isinstance(exc, KeyringLocked):
        why = "the system keyring is locked. Unlock it (log in to your desktop) and try again"
    else:
        detail = str(exc).strip() or type(exc).__name__
        if hide:
            detail = detail.replace(hide, "[redacted]")
        why = (
            f"the system keyring could not be reached ({detail}). Check that your keyring "
            "service is running and unlocked"
        )
    return SecretStoreError(f"Could not {action} the system keyring: {why}.")
