"""Credentials in the OS keyring (docs/architecture.md §5.9, §6): service "deskhand",
username `<integration>/<account_id>/<field>`.

Every call here BLOCKS (D-Bus on Linux, Keychain on macOS, Credential Manager on
Windows, and an unlock prompt may appear). Code on the asyncio loop must call them
through `loop.run_in_executor(...)` / `asyncio.to_thread(...)`.

`known_values()` feeds the secret tripwire: every secret value this process has read
or written is remembered so tool output, logs and the store can redact it.

The tripwire must know every stored secret from start-up without the keyring on the
start-up path, so the store keeps an index of secret NAMES (never values) next to it,
`<home>/secrets-index.json`: `has_secrets` answers from it, `start_loading()` reads the
values in a background thread, and `wait_loaded()` blocks until that is done (at once when
nothing is stored — then the keyring is never touched).
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from app.core.keyring_fallback import (
    EncryptedFileOpener,
    FallbackError,
    KeyringMode,
    Prompts,
    check_windows_size,
    configured_mode,
    default_home,
    set_passphrase_listener,
    system_unusable,
)
from app.core.providers.kinds import env_keys
from app.core.threads import off_gui_thread
from tools.redact import TRIPWIRE

if TYPE_CHECKING:
    from keyring.backend import KeyringBackend


T = TypeVar("T")

log = logging.getLogger(__name__)

SERVICE = "deskhand"
INDEX_FILE = "secrets-index.json"
#: Shorter values are not remembered for redaction: they would mask ordinary text.
MIN_KNOWN_LENGTH = 4
#: The one server each environment key is for (`PROVIDER_KINDS`): it is never sent anywhere
#: else (not to a local server, a proxy or another cloud), and only over https on 443.
ENV_KEY_ORIGINS = {key.var: key.origin for key in env_keys()}

#: The known values. The tripwire (`tools.redact.TRIPWIRE`), the one owner of secret
#: knowledge and masking, keeps them here (read through the module, so a test may swap it);
#: this module feeds it, everything else asks it.
_known: set[str] = set()
TRIPWIRE.keep_in(lambda: _known)


class KeyOwner(Protocol):
    """What `SecretStore.api_key_for` needs of a provider account."""

    @property
    def id(self) -> str: ...

    @property
    def base_url(self) -> str: ...


class SecretStoreError(Exception):
    """The keyring could not be used. `str(err)` is for the user and never holds a value."""


#: `Bearer <token>`-style values: the token alone travels too (in URLs, in other headers).
_AUTH_SCHEME = re.compile(r"^(?:bearer|basic|token|bot|digest)\s+(\S+)$", re.IGNORECASE)


def remember_secret(value: str | None) -> None:
    """Add a value to the process-wide set the redaction tripwire masks (an
    `Authorization`-style value also adds the credential after its scheme; a JSON record —
    an MCP server's OAuth tokens — adds the credentials inside it, not the whole text,
    which changes on every save and would only make the tripwire slow)."""
    if not value or len(value) < MIN_KNOWN_LENGTH:
        return
    found = {value}
    if value.lstrip().startswith("{") and (inside := _json_credentials(value)) is not None:
        found = inside
    elif match := _AUTH_SCHEME.match(value.strip()):
        found.add(match.group(1))
    TRIPWIRE.remember(v for v in found if len(v) >= MIN_KNOWN_LENGTH)


def _json_credentials(text: str) -> set[str] | None:
    """The values under credential-looking names anywhere in a JSON object (None: `text`
    is not one)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    from tools.redact import is_credential_key

    found: set[str] = set()
    stack: list[object] = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                name = str(key)
                secret = is_credential_key(name) and not name.endswith("_type")
                if isinstance(inner, str) and secret:
                    found.add(inner)
                else:
                    stack.append(inner)
        elif isinstance(item, list):
            stack.extend(item)
    return found


# The encrypted store's passphrase is a secret too (whichever prompt supplied it).
set_passphrase_listener(remember_secret)


def known_secret_values() -> set[str]:
    """A copy of every secret value this process has read or written."""
    return TRIPWIRE.known()


def secret_key(integration: str, account_id: str, field: str) -> str:
    """The keyring username for one credential field, e.g. `provider/ab12cd/api_key`."""
    key = f"{integration}/{account_id}/{field}"
    _check_key(key)
    return key


def api_key_name(account_id: str) -> str:
    """Where a provider account's API key lives in the keyring."""
    return secret_key("provider", account_id, "api_key")


def _valid_key(key: str) -> bool:
    parts = key.split("/")
    return len(parts) == 3 and all(p.strip() for p in parts)


def _check_key(key: str) -> None:
    if not _valid_key(key):
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
        self._index = SecretIndex(self._home / INDEX_FILE if self._home else None, service)
        self._loading_lock = threading.Lock()
        self._loader: threading.Thread | None = None
        self._loaded = threading.Event()
        #: Names set or deleted since the background load began: it leaves them alone.
        self._touched: set[str] = set()
        #: Why the background load could not read every stored secret (for the user).
        self.load_error: str | None = None

    @property
    def home(self) -> Path | None:
        return self._home

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
        self._touched.add(key)
        self._index.add(key)

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
        self._touched.add(key)
        self._index.discard(key)

    @off_gui_thread  # the keyring: a D-Bus round trip, perhaps a passphrase
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

    # ---- knowing every stored secret without the keyring on the start-up path ----------

    def known_values(self) -> builtins.set[str]:
        """Every secret value known so far (never blocks: loading goes on in the background)."""
        return known_secret_values()

    @property
    def has_secrets(self) -> bool:
        """Whether anything is stored, from the index of names (no keyring access)."""
        return bool(self._index.names())

    def stored_names(self) -> builtins.set[str]:
        """The keys of the stored secrets, from the index (no keyring access)."""
        return self._index.names()

    def start_loading(self) -> None:
        """Read every stored secret in a background thread, so the tripwire knows them.
        Returns at once; idempotent. With nothing stored the keyring is not touched."""
        for var in ENV_KEY_ORIGINS:
            remember_secret(os.environ.get(var))
        with self._loading_lock:
            if self._loader is not None or self._loaded.is_set():
                return
            if not self.has_secrets:
                self._loaded.set()
                return
            self._loader = threading.Thread(
                target=self._load_all, name="deskhand-secrets", daemon=True
            )
            self._loader.start()

    def wait_loaded(self, timeout: float | None = None) -> bool:
        """Block until the stored secrets are known (True), or `timeout` passed (False).
        True at once when nothing is stored. A load that failed also counts as done:
        `load_error` says why (the values it could not read cannot leak from Deskhand's
        own store either)."""
        self.start_loading()
        return self._loaded.wait(timeout)

    @property
    def loaded(self) -> bool:
        return self._loaded.is_set()

    def _load_all(self) -> None:
        try:
            self._read_stored()
        except Exception as exc:  # never leave waiters hanging
            self.load_error = f"could not read the stored secrets: {type(exc).__name__}"
            log.warning("%s", self.load_error)
        finally:
            self._loaded.set()

    def _read_stored(self) -> None:
        names = self._index.names()
        missing: set[str] = set()
        for name in sorted(names):
            try:
                if self.get(name) is None:
                    missing.add(name)
            except SecretStoreError as exc:
                # The keyring is unusable (locked, declined...): each further read would
                # fail the same way, and might ask the user again.
                self.load_error = str(exc)
                log.warning("secrets not loaded: %s", exc)
                return
            except ValueError:
                missing.add(name)  # not a key this version understands
        extra = self._listed_names() - names
        for name in sorted(extra):
            try:
                self.get(name)
            except (SecretStoreError, ValueError):
                extra.discard(name)
        # Only what was found: a key saved or deleted meanwhile (Settings → Save) stays as is.
        touched = set(self._touched)
        self._index.update(remove=missing - touched, add=extra - touched)
        from tools.redact import compile_secrets

        compile_secrets(known_secret_values())  # the first redaction need not build it

    def _listed_names(self) -> builtins.set[str]:
        """Keys the keyring itself lists for our service (Secret Service only; one call,
        no values read). Catches entries written by another Deskhand process."""
        try:
            backend = self._keyring()
            if type(backend).__module__ != "keyring.backends.SecretService":
                return set()
            collection = backend.get_preferred_collection()  # type: ignore[attr-defined]
            found = set()
            for item in collection.search_items({"service": self.service}):
                username = item.get_attributes().get("username", "")
                if _valid_key(username):
                    found.add(username)
            return found
        except Exception as exc:  # listing is a bonus; the index already has our names
            log.info("could not list the keyring's entries: %s", type(exc).__name__)
            return set()

    def might_hold(self, key: str) -> bool:
        """Whether `key` may be stored, without asking the keyring: the index of names
        (read again, as another process may have stored it) lists it. A store without a
        home has no index file, so there only the keyring can say: True."""
        _check_key(key)
        if self._index.path is None:
            return True
        return key in self._index.names(fresh=True)

    def api_key_for(
        self, account: KeyOwner, url: str | None = None, *, recheck: bool = False
    ) -> str | None:
        """The account's API key: keyring `provider/<id>/api_key`, else the environment's
        key for the account's server (`env_api_key`). `url`: where the request goes, when
        not the account's own base URL.

        An account with no key stored — a local server — never touches the keyring (no
        unlock prompt): the index of names says so; `recheck` asks the keyring anyway (the
        server said it needs a key) and puts a key it finds back in the index. An unusable
        keyring only raises when the environment has no key either.
        """
        failure: SecretStoreError | None = None
        value: str | None = None
        key = api_key_name(account.id)
        try:
            if recheck or self.might_hold(key):
                value = self.get(key)
        except SecretStoreError as exc:
            value, failure = None, exc
        if value:
            if recheck:
                self._index.add(key)
            return value
        env_value = env_api_key(account.base_url if url is None else url)
        if env_value:
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


def env_api_key(url: str) -> str | None:
    """`OPENAI_API_KEY` for https://api.openai.com, `ANTHROPIC_API_KEY` for
    https://api.anthropic.com, from the environment; None for any other server (the key is
    for that cloud only) or a URL with a user name in it."""
    from urllib.parse import urlsplit

    from app.core.providers.urls import origin, with_scheme

    try:
        if "@" in urlsplit(with_scheme(url)).netloc:
            return None
    except ValueError:
        return None
    where = origin(url)
    var = next((v for v, o in ENV_KEY_ORIGINS.items() if o == where), None)
    value = os.environ.get(var) if var else None
    if value:
        remember_secret(value)
    return value or None


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


# ---- the index of names -------------------------------------------------------------------

_index_file_lock = threading.Lock()  # one writer at a time per process (read-modify-write)


class SecretIndex:
    """The names (never the values) of the secrets stored for one service, in a JSON file
    of mode 0600: `{"services": {"deskhand": ["provider/ab12/api_key", ...]}}`.

    Without a file (first start after an upgrade, or a fresh home) the names are derived
    from what Deskhand's own files refer to (providers, integration accounts, mcp.json);
    the first background load then completes the list from the keyring itself. Without a
    path (a store with no home) the names live in memory only.
    """

    def __init__(self, path: Path | None, service: str) -> None:
        self.path = path
        self.service = service
        self._names: set[str] | None = None

    def names(self, *, fresh: bool = False) -> set[str]:
        """The names; `fresh` also reads the file again (a few hundred bytes), for names
        another process added."""
        with _index_file_lock:
            if self._names is None:
                self._names = self._load()
            elif fresh:
                return self._load() | self._names
            return set(self._names)

    def add(self, key: str) -> None:
        self._change(lambda names: names | {key})

    def update(self, *, remove: Iterable[str] = (), add: Iterable[str] = ()) -> None:
        """Remove then add names, on the file as it is now (not on an earlier read)."""
        gone, new = set(remove), set(add)
        self._change(lambda names: (names - gone) | new)

    def discard(self, key: str) -> None:
        self._change(lambda names: names - {key})

    def _change(self, how: Callable[[set[str]], set[str]]) -> None:
        with _index_file_lock:
            # Re-read: another store (another window, the CLI) may have written meanwhile.
            current = self._load()
            changed = how(current)
            self._names = changed
            if changed != current or self.path is None or not self.path.exists():
                self._write(changed)

    def _load(self) -> set[str]:
        if self.path is None:
            return set(self._names or ())
        try:
            data = json.loads(self.path.read_text("utf-8"))
            listed = data["services"].get(self.service, [])
            return {n for n in listed if isinstance(n, str) and _valid_key(n)}
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("the secret index %s is unreadable (%s); rebuilding it", self.path, exc)
        names = derive_names(self.path.parent) if self.service == SERVICE else set()
        self._write(names)
        return names

    def _write(self, names: set[str]) -> None:
        if self.path is None or not self.path.parent.is_dir():
            return
        data: dict[str, Any] = {"services": {}}
        try:
            loaded = json.loads(self.path.read_text("utf-8"))
            if isinstance(loaded, dict) and isinstance(loaded.get("services"), dict):
                data = loaded
        except (OSError, ValueError):
            pass
        data["services"][self.service] = sorted(names)
        try:
            fd, tmp = tempfile.mkstemp(prefix=".secrets-index-", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump(data, fh, indent=1)
                os.chmod(tmp, 0o600)
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            log.warning("could not write the secret index %s: %s", self.path, exc)


def derive_names(home: Path) -> set[str]:
    """The keyring keys Deskhand's own files refer to: provider API keys (settings.json),
    integration accounts' secret fields (the database) and `keyring:` references in
    mcp.json. Reads files only — never the keyring."""
    from app.core.paths import db_path, mcp_path, settings_path

    names: set[str] = set()
    try:
        settings = json.loads(settings_path(home).read_text("utf-8"))
        for provider in settings.get("providers") or []:
            if isinstance(provider, dict) and isinstance(provider.get("id"), str):
                names.add(f"provider/{provider['id']}/api_key")
    except (OSError, ValueError, AttributeError):
        pass
    try:
        text = mcp_path(home).read_text("utf-8")
        names.update(re.findall(r"keyring:([^\s\"'{}$]+)", text))
    except OSError:
        pass
    names.update(_account_secret_names(db_path(home)))
    return {n for n in names if _valid_key(n)}


def _account_secret_names(db: Path) -> set[str]:
    if not db.exists():
        return set()
    import sqlite3

    from integrations.registry import SPECS

    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT id, integration FROM integration_accounts").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return set()
    names = set()
    for account_id, integration in rows:
        spec = SPECS.get(integration)
        for field in spec.secret_fields if spec else ():
            names.add(f"{integration}/{account_id}/{field}")
    return names
