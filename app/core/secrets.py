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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from app.core.keyring_fallback import (
    EncryptedFileOpener,
    FallbackError,
    KeyringMode,
    Prompts,
    check_windows_size,
    configured_mode,
    default_home,
    system_unusable,
)

if TYPE_CHECKING:
    from keyring.backend import KeyringBackend

    from app.core.settings import ProviderAccount

T = TypeVar("T")

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

    `backend` pins one keyring backend (tests); otherwise `mode` decides (see
    app/core/keyring_fallback.py): the system keyring (looked up on every call, so
    `keyring.set_keyring` takes effect), the encrypted file `<home>/secrets.cfg`, or — in
    "auto" — the system keyring with the encrypted file after the user agreed. `mode`
    defaults to `security.keyring` in `home`'s settings.json (home: $DESKHAND_HOME).
    """

    def __init__(
        self,
        service: str = SERVICE,
        backend: KeyringBackend | None = None,
        *,
        mode: KeyringMode | None = None,
        home: str | Path | None = None,
        prompts: Prompts | None = None,
    ) -> None:
        self.service = service
        self._backend = backend
        self._mode = mode
        self._home = Path(home) if home is not None else None
        self._fallback = EncryptedFileOpener(self._home, prompts)

    @property
    def mode(self) -> KeyringMode:
        if self._mode is None:
            self._mode = configured_mode(self._home or default_home())
        return self._mode

    def configure(self, mode: KeyringMode) -> None:
        """Switch where secrets go (after the user changed `security.keyring`)."""
        self._mode = mode

    @property
    def encrypted_file(self) -> Path:
        """Where the encrypted store lives (whether or not it is in use)."""
        return self._fallback.path

    def get(self, key: str) -> str | None:
        _check_key(key)
        value = self._call(lambda kr: kr.get_password(self.service, key), f"read '{key}' from")
        remember_secret(value)
        return value

    def set(self, key: str, value: str) -> None:
        _check_key(key)
        remember_secret(value)  # even if saving fails, the value is now in this process

        def save(kr: KeyringBackend) -> None:
            if not _is_encrypted_file(kr) and (too_big := check_windows_size(value)):
                raise SecretStoreError(f"Could not save '{key}' to the system keyring: {too_big}.")
            kr.set_password(self.service, key, value)

        self._call(save, f"save '{key}' to", hide=value)

    def delete(self, key: str) -> None:
        """Remove a credential; a missing one is not an error."""
        from keyring.errors import PasswordDeleteError

        _check_key(key)

        def remove(kr: KeyringBackend) -> None:
            try:
                kr.delete_password(self.service, key)
            except PasswordDeleteError:
                return

        self._call(remove, f"delete '{key}' from")

    def _call(self, fn: Callable[[KeyringBackend], T], action: str, hide: str | None = None) -> T:
        """Run `fn` on the keyring in use; in "auto" mode, offer the encrypted file (once)
        when the system keyring is unusable. Errors become SecretStoreError."""
        try:
            backend = self._keyring()
            try:
                return fn(backend)
            except SecretStoreError:
                raise
            except Exception as exc:
                if not self._may_fall_back(backend, exc):
                    raise
                if not self._fallback.consent():
                    raise _explain(exc, action, hide=hide, declined=True) from _cause(exc, hide)
                return fn(self._fallback.open())
        except SecretStoreError:
            raise
        except FallbackError as exc:
            raise SecretStoreError(
                f"Could not {action} the encrypted secret store: {exc}."
            ) from exc
        except Exception as exc:
            raise _explain(exc, action, hide=hide) from _cause(exc, hide)

    def _may_fall_back(self, backend: KeyringBackend, exc: Exception) -> bool:
        return (
            self._backend is None
            and self.mode == "auto"
            and not _is_encrypted_file(backend)
            and system_unusable(exc)
        )

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
        if self.mode == "encrypted_file" or (self.mode == "auto" and self._fallback.accepted):
            return self._fallback.open()
        import keyring  # ~86 ms; only paid when a secret is first needed

        return keyring.get_keyring()


def _is_encrypted_file(backend: KeyringBackend) -> bool:
    return type(backend).__module__.startswith("keyrings.cryptfile")


def _cause(exc: Exception, hide: str | None) -> Exception | None:
    """Do not chain an exception whose text might carry the value."""
    return None if hide and hide in repr(exc.args) else exc


def _explain(
    exc: Exception, action: str, hide: str | None = None, *, declined: bool = False
) -> SecretStoreError:
    from keyring.errors import KeyringLocked, NoKeyringError

    if isinstance(exc, NoKeyringError):
        why = (
            "no system keyring is available. On Linux install and run a Secret Service "
            "provider such as GNOME Keyring or KWallet, or use Deskhand's encrypted file "
            "store (settings: security.keyring = encrypted_file)"
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
    if declined:
        why += ". The encrypted file store was declined, so nothing was stored"
    return SecretStoreError(f"Could not {action} the system keyring: {why}.")
