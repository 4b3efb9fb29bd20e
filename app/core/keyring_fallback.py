"""When there is no usable system keyring: an encrypted file, never plain text.

`settings.security.keyring` chooses where secrets go:

- "system": the OS keyring only (Secret Service, Keychain, Credential Manager).
- "encrypted_file": `<home>/secrets.cfg`, encrypted by keyrings.cryptfile (Argon2 + AES)
  with a passphrase asked once per session.
- "auto": the OS keyring; when it is unusable (no Secret Service, D-Bus down) the user is
  told once and asked whether to use the encrypted file instead. Without that consent the
  error stands: secrets are never stored in plain text.

Who answers the questions is pluggable (`install_prompts`): the GUI installs dialogs
(app/ui/passphrase.py), the command line prompts on a terminal (app/cli/keyring_prompts.py);
until one does, only `DESKHAND_KEYRING_PASSPHRASE` answers (`ENV_ONLY`).
Every function here may block (Argon2, file I/O, prompts): call it from a worker thread.

The passphrase never reaches a child process: `DESKHAND_KEYRING_PASSPHRASE` is taken out
of `os.environ` as soon as this module is imported (and whenever it is read again), and
kept in this module only. A new store's passphrase must be strong enough
(`passphrase_problem`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

if TYPE_CHECKING:
    from keyring.backend import KeyringBackend

KeyringMode = Literal["auto", "system", "encrypted_file"]
KEYRING_MODES: tuple[KeyringMode, ...] = ("auto", "system", "encrypted_file")
PASSPHRASE_ENV = "DESKHAND_KEYRING_PASSPHRASE"
FILE_NAME = "secrets.cfg"
#: Windows Credential Manager: at most 2,560 bytes per credential (CRED_MAX_CREDENTIAL_BLOB_SIZE)
WINDOWS_MAX_SECRET_BYTES = 2560

#: A new encrypted store's passphrase is at least this long.
MIN_PASSPHRASE_LENGTH = 12
PASSPHRASE_RULE = (
    f"at least {MIN_PASSPHRASE_LENGTH} characters, not one character repeated, not a run "
    "like 'abcdef' or '123456', and not a common password; a few unrelated words make a "
    "good one"
)

NO_PASSPHRASE = (
    "no keyring: set DESKHAND_KEYRING_PASSPHRASE or run the app once to set up the encrypted store"
)
EXPLANATION = (
    "Deskhand could not reach a system keyring (on Linux: a Secret Service such as GNOME "
    "Keyring or KWallet). It can keep your credentials in an encrypted file in its own "
    "folder instead, protected by a passphrase you choose. Nothing is ever stored in plain "
    "text."
)

#: (creating) -> the passphrase, or None when the user declines. `creating`: the file does
#: not exist yet, so the passphrase being chosen should be confirmed.
PassphraseProvider = Callable[[bool], "str | None"]
#: (explanation) -> True when the user accepts the encrypted file instead of the OS keyring.
ConsentProvider = Callable[[str], bool]


class FallbackError(Exception):
    """The encrypted store could not be opened. The text is for the user."""


@dataclass
class Prompts:
    """Who is asked for a passphrase and for consent (process-wide; the GUI replaces it)."""

    passphrase: PassphraseProvider
    consent: ConsentProvider


# ---- the passphrase from the environment, kept away from child processes --------------------

_env_passphrase: str | None = None
_env_lock = threading.Lock()


def env_passphrase() -> str | None:
    """`$DESKHAND_KEYRING_PASSPHRASE`, removed from the environment once read (so no tool,
    MCP server or other child process inherits it) and remembered here instead."""
    global _env_passphrase
    with _env_lock:
        value = os.environ.pop(PASSPHRASE_ENV, None)
        if value:
            _env_passphrase = value
            _notify(value)
        return _env_passphrase


def forget_env_passphrase() -> None:
    """Drop the remembered passphrase (tests; a session that wants to ask again)."""
    global _env_passphrase
    with _env_lock:
        _env_passphrase = None


# ---- who is told the passphrase: the secret tripwire -----------------------------------

_listener: Callable[[str], None] | None = None


def set_passphrase_listener(listener: Callable[[str], None]) -> None:
    """`listener(passphrase)` runs for every passphrase used (so logs can redact it)."""
    global _listener
    _listener = listener
    if _env_passphrase:
        listener(_env_passphrase)


def _notify(passphrase: str) -> None:
    if _listener is not None:
        _listener(passphrase)


# ---- how strong a new passphrase must be ------------------------------------------------------

_RUNS = (
    "abcdefghijklmnopqrstuvwxyz",
    "0123456789",
    "qwertyuiopasdfghjklzxcvbnm",
    "qwertzuiopasdfghjklyxcvbnm",
    "azertyuiopqsdfghjklmwxcvbn",
    "1qaz2wsx3edc4rfv5tgb6yhn7ujm8ik9ol0p",
)
#: Words that make up the passwords people and attackers try first (checked after removing
#: digits, symbols and repetitions: "Password2024!" and "qwertyqwerty" are both weak).
_COMMON_WORDS = frozenset(
    (
        "password",
        "passwort",
        "passwrd",
        "pssword",
        "passphrase",
        "secret",
        "letmein",
        "welcome",
        "admin",
        "administrator",
        "root",
        "toor",
        "login",
        "master",
        "changeme",
        "default",
        "iloveyou",
        "trustno",
        "monkey",
        "dragon",
        "football",
        "baseball",
        "soccer",
        "hockey",
        "sunshine",
        "princess",
        "shadow",
        "superman",
        "batman",
        "starwars",
        "qwerty",
        "qwertz",
        "azerty",
        "asdf",
        "zxcvbn",
        "abc",
        "abcd",
        "test",
        "testing",
        "guest",
        "user",
        "hello",
        "whatever",
        "freedom",
        "deskhand",
        "keyring",
        "correcthorsebatterystaple",
    )
)


def passphrase_problem(passphrase: str) -> str | None:
    """Why `passphrase` is too weak for a new encrypted store, in plain words; None if fine."""
    if len(passphrase) < MIN_PASSPHRASE_LENGTH:
        return f"it is {len(passphrase)} characters long"
    lowered = passphrase.lower()
    if len(set(lowered)) <= 3:
        return "it repeats too few different characters"
    if any(lowered in run * 3 or lowered in run[::-1] * 3 for run in _RUNS):
        return "it is a run of neighbouring characters"
    for size in range(1, len(lowered) // 2 + 1):
        if len(lowered) % size == 0 and lowered == lowered[:size] * (len(lowered) // size):
            return f"it repeats {lowered[:size]!r}"
    letters = "".join(c for c in lowered if c.isalpha())
    if not letters or letters in _COMMON_WORDS or _repeats_common_word(letters):
        return "it is a common password with a few digits or symbols added"
    return None


def _repeats_common_word(letters: str) -> bool:
    for word in _COMMON_WORDS:
        if len(letters) % len(word) == 0 and letters == word * (len(letters) // len(word)):
            return True
    return False


def check_new_passphrase(passphrase: str) -> None:
    """Raise FallbackError, saying what is required, when `passphrase` is too weak."""
    problem = passphrase_problem(passphrase)
    if problem:
        raise FallbackError(
            f"that passphrase is too weak ({problem}). The passphrase of the encrypted "
            f"secret store needs {PASSPHRASE_RULE}. Nothing was set up"
        )


def env_only_passphrase(creating: bool) -> str | None:
    """`$DESKHAND_KEYRING_PASSPHRASE`, else None: nobody is asked (the default until the
    window or the command line installs its prompts)."""
    return env_passphrase()


def env_only_consent(explanation: str) -> bool:
    """Setting the passphrase variable is consent; without it nobody is asked."""
    return bool(env_passphrase())


#: Answers that ask nobody: what runs before (or without) the window's or the terminal's.
ENV_ONLY = Prompts(env_only_passphrase, env_only_consent)


_prompts = ENV_ONLY
_prompts_lock = threading.Lock()


def install_prompts(prompts: Prompts) -> Prompts:
    """Replace who is asked (the GUI and the command line do at start-up); returns the
    previous prompts."""
    global _prompts
    with _prompts_lock:
        previous, _prompts = _prompts, prompts
    return previous


def current_prompts() -> Prompts:
    with _prompts_lock:
        return _prompts


def encrypted_file_path(home: Path) -> Path:
    return home / FILE_NAME


def configured_mode(home: Path | None) -> KeyringMode:
    """`security.keyring` from settings.json in `home` (read only; "auto" when unknown)."""
    if home is None:
        return "auto"
    try:
        data = json.loads((home / "settings.json").read_text("utf-8"))
        mode = data.get("security", {}).get("keyring", "auto")
    except (OSError, ValueError, AttributeError):
        return "auto"
    return mode if mode in KEYRING_MODES else "auto"


def default_home() -> Path | None:
    """`$DESKHAND_HOME`, else the platform folder, without creating anything."""
    from app.core.paths import APP_NAME, HOME_ENV

    raw = os.environ.get(HOME_ENV)
    if raw:
        return Path(raw).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def system_unusable(exc: BaseException) -> bool:
    """True when `exc` means there is no system keyring to talk to (as opposed to a locked
    one or a refused request): no backend, no Secret Service, D-Bus down."""
    from keyring.errors import InitError, KeyringLocked, NoKeyringError

    if isinstance(exc, KeyringLocked):
        return False
    if isinstance(exc, NoKeyringError | InitError | OSError):
        return True
    name = type(exc).__name__
    module = type(exc).__module__
    return "NotAvailable" in name or module.startswith(("jeepney", "secretstorage", "dbus"))


def open_encrypted_file(path: Path, passphrase: str) -> KeyringBackend:
    """The cryptfile keyring at `path`, unlocked (or created) with `passphrase`.

    Raises FallbackError for a wrong passphrase or an unreadable file."""
    from keyrings.cryptfile.cryptfile import CryptFileKeyring

    if not passphrase.strip():
        raise FallbackError("the passphrase of the encrypted secret store cannot be blank")
    if not path.exists():
        check_new_passphrase(passphrase)
    backend = CryptFileKeyring()
    backend.file_path = str(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        backend.keyring_key = passphrase  # unlocks an existing file, or creates it
    except ValueError as exc:  # MAC check failed / "Incorrect Password"
        raise FallbackError(
            f"wrong passphrase for the encrypted secret store ({path}); nothing was read"
        ) from exc
    except OSError as exc:
        raise FallbackError(f"could not open the encrypted secret store {path}: {exc}") from exc
    return cast("KeyringBackend", backend)


def check_windows_size(value: str) -> str | None:
    """Why `value` cannot go to the Windows Credential Manager, or None when it fits."""
    if sys.platform != "win32":
        return None
    size = len(value.encode("utf-16-le"))
    if size <= WINDOWS_MAX_SECRET_BYTES:
        return None
    return (
        f"this secret is {size:,} bytes as UTF-16 and the Windows Credential Manager holds at "
        f"most {WINDOWS_MAX_SECRET_BYTES:,}. Store a path to a file instead (for example a "
        "certificate or kubeconfig), or switch Settings → security.keyring to "
        '"encrypted_file"'
    )


class EncryptedFileOpener:
    """Opens the encrypted store once per session (thread-safe) and remembers consent."""

    def __init__(self, home: Path | None, prompts: Prompts | None = None) -> None:
        self.home = home
        self._prompts = prompts
        self._backend: KeyringBackend | None = None
        self._consent: bool | None = None
        self._lock = threading.Lock()

    @property
    def prompts(self) -> Prompts:
        return self._prompts or current_prompts()

    @property
    def path(self) -> Path:
        home = self.home or default_home()
        if home is None:
            raise FallbackError(NO_PASSPHRASE)
        return encrypted_file_path(home)

    @property
    def accepted(self) -> bool:
        return bool(self._consent)

    def consent(self) -> bool:
        """Ask once per session whether the encrypted file may replace the OS keyring."""
        with self._lock:
            if self._consent is None:
                self._consent = bool(self.prompts.consent(EXPLANATION))
            return self._consent

    def open(self) -> KeyringBackend:
        with self._lock:
            if self._backend is None:
                path = self.path
                passphrase = self.prompts.passphrase(not path.exists())
                if not passphrase:
                    raise FallbackError(NO_PASSPHRASE)
                _notify(passphrase)
                self._backend = open_encrypted_file(path, passphrase)
            return self._backend


env_passphrase()  # at import: before anything in this process can start a child
