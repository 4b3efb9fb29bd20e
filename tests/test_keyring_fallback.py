"""No Secret Service (headless Linux): the encrypted file store, consent, and the Windows
size limit. Real keyrings.cryptfile files on disk; the system keyring is keyring's fail
backend with D-Bus unreachable."""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from keyring.backends import fail

from app.cli import keyring_prompts
from app.core import keyring_fallback
from app.core.keyring_fallback import (
    NO_PASSPHRASE,
    PASSPHRASE_ENV,
    WINDOWS_MAX_SECRET_BYTES,
    Prompts,
    check_windows_size,
)
from app.core.secrets import SecretStore, SecretStoreError, secret_key

KEY = secret_key("caldav", "acc1", "password")
CLI = keyring_prompts.TERMINAL_PROMPTS


def _value() -> str:
    return f"pw-{uuid.uuid4().hex}"


@pytest.fixture
def no_dbus(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No session bus and keyring's fail backend, as on a headless server."""
    import keyring
    from keyrings.cryptfile.cryptfile import CryptFileKeyring

    # A cheaper Argon2 for tests (every value derives its own key): same code path, real file.
    monkeypatch.setattr(CryptFileKeyring, "time_cost", 1)
    monkeypatch.setattr(CryptFileKeyring, "memory_cost", 8 * 1024)
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    monkeypatch.delenv(PASSPHRASE_ENV, raising=False)
    keyring_fallback.forget_env_passphrase()  # taken from the environment by an earlier test
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    saved = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        yield
    finally:
        keyring.set_keyring(saved)
        keyring_fallback.forget_env_passphrase()


class Asked:
    """Scripted prompts that count how often they were asked."""

    def __init__(self, passphrase: str | None = "correct horse", consent: bool = True) -> None:
        self.answer, self.agree = passphrase, consent
        self.passphrase_calls: list[bool] = []
        self.consent_calls: list[str] = []

    def prompts(self) -> Prompts:
        return Prompts(self._passphrase, self._consent)

    def _passphrase(self, creating: bool) -> str | None:
        self.passphrase_calls.append(creating)
        return self.answer

    def _consent(self, explanation: str) -> bool:
        self.consent_calls.append(explanation)
        return self.agree


def test_encrypted_file_round_trips_without_plaintext(no_dbus: None, tmp_path: Path) -> None:
    asked = Asked()
    store = SecretStore(mode="encrypted_file", home=tmp_path, prompts=asked.prompts())
    value = _value()
    store.set(KEY, value)
    assert store.get(KEY) == value
    path = tmp_path / "secrets.cfg"
    assert store.encrypted_file == path
    raw = path.read_bytes()
    assert value.encode() not in raw and b"pw-" not in raw
    assert asked.passphrase_calls == [True]  # asked once, for a new file
    assert path.stat().st_mode & 0o077 == 0

    # A new session with the same passphrase reads it back from the file.
    again = Asked()
    fresh = SecretStore(mode="encrypted_file", home=tmp_path, prompts=again.prompts())
    assert fresh.get(KEY) == value
    assert fresh.get(secret_key("caldav", "acc1", "other")) is None
    fresh.delete(KEY)
    fresh.delete(KEY)  # a missing one is not an error
    assert fresh.get(KEY) is None
    assert again.passphrase_calls == [False]  # once per session, not per call


def test_wrong_passphrase_is_a_clear_error(no_dbus: None, tmp_path: Path) -> None:
    value = _value()
    SecretStore(mode="encrypted_file", home=tmp_path, prompts=Asked().prompts()).set(KEY, value)
    wrong = SecretStore(mode="encrypted_file", home=tmp_path, prompts=Asked("nope").prompts())
    with pytest.raises(SecretStoreError, match="wrong passphrase") as err:
        wrong.get(KEY)
    assert value not in str(err.value)


def test_no_passphrase_anywhere_says_how_to_set_one_up(no_dbus: None, tmp_path: Path) -> None:
    store = SecretStore(mode="encrypted_file", home=tmp_path, prompts=Asked(None).prompts())
    with pytest.raises(SecretStoreError) as err:
        store.get(KEY)
    assert NO_PASSPHRASE in str(err.value)
    assert not (tmp_path / "secrets.cfg").exists()


def test_cli_passphrase_comes_from_the_environment(
    no_dbus: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PASSPHRASE_ENV, "from-the-env")
    store = SecretStore(mode="encrypted_file", home=tmp_path, prompts=CLI)
    value = _value()
    store.set(KEY, value)
    monkeypatch.setenv(PASSPHRASE_ENV, "something else")
    with pytest.raises(SecretStoreError, match="wrong passphrase"):
        SecretStore(mode="encrypted_file", home=tmp_path, prompts=CLI).get(KEY)


def test_cli_without_env_or_terminal_refuses(
    no_dbus: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyring_prompts, "_interactive", lambda: False)
    store = SecretStore(mode="encrypted_file", home=tmp_path, prompts=CLI)
    with pytest.raises(SecretStoreError, match="DESKHAND_KEYRING_PASSPHRASE"):
        store.set(KEY, _value())
    with pytest.raises(SecretStoreError, match="no system keyring is available"):
        SecretStore(mode="auto", home=tmp_path, prompts=CLI).set(KEY, _value())


def test_the_core_alone_asks_nobody_even_on_a_terminal(
    no_dbus: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Terminal prompts are the command line's: until it (or the window) installs its
    answers, only the environment variable answers."""

    def must_not_ask(*_: object) -> str:
        raise AssertionError("the core asked on the terminal")

    class Terminal:
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Terminal())
    monkeypatch.setattr("builtins.input", must_not_ask)
    monkeypatch.setattr("getpass.getpass", must_not_ask)
    store = SecretStore(mode="encrypted_file", home=tmp_path, prompts=keyring_fallback.ENV_ONLY)
    with pytest.raises(SecretStoreError, match="DESKHAND_KEYRING_PASSPHRASE"):
        store.set(KEY, _value())
    with pytest.raises(SecretStoreError, match="no system keyring is available"):
        SecretStore(mode="auto", home=tmp_path, prompts=keyring_fallback.ENV_ONLY).set(
            KEY, _value()
        )


def test_a_command_asks_for_the_passphrase_on_the_terminal(tmp_path: Path) -> None:
    from app.cli import main

    previous = keyring_fallback.install_prompts(keyring_fallback.ENV_ONLY)
    try:
        assert main(["--home", str(tmp_path), "rules", "list"]) == 0
        assert keyring_fallback.current_prompts() is keyring_prompts.TERMINAL_PROMPTS
    finally:
        keyring_fallback.install_prompts(previous)


def test_auto_without_consent_does_not_fall_back(no_dbus: None, tmp_path: Path) -> None:
    asked = Asked(consent=False)
    store = SecretStore(mode="auto", home=tmp_path, prompts=asked.prompts())
    value = _value()
    with pytest.raises(SecretStoreError, match="declined") as err:
        store.set(KEY, value)
    assert value not in str(err.value)
    with pytest.raises(SecretStoreError):
        store.get(KEY)
    assert len(asked.consent_calls) == 1  # explained once, not on every call
    assert asked.passphrase_calls == []
    assert not (tmp_path / "secrets.cfg").exists()
    assert not any(
        value in p.read_text(errors="ignore") for p in tmp_path.rglob("*") if p.is_file()
    )


def test_auto_with_consent_uses_the_encrypted_file(no_dbus: None, tmp_path: Path) -> None:
    asked = Asked()
    store = SecretStore(mode="auto", home=tmp_path, prompts=asked.prompts())
    value = _value()
    store.set(KEY, value)
    assert store.get(KEY) == value
    assert len(asked.consent_calls) == 1 and "plain text" in asked.consent_calls[0]
    assert asked.passphrase_calls == [True]
    assert value.encode() not in (tmp_path / "secrets.cfg").read_bytes()


def test_auto_falls_back_when_dbus_is_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import keyring
    from keyring.backends.SecretService import Keyring
    from keyrings.cryptfile.cryptfile import CryptFileKeyring

    monkeypatch.setattr(CryptFileKeyring, "time_cost", 1)
    monkeypatch.setattr(CryptFileKeyring, "memory_cost", 8 * 1024)

    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", f"unix:path={tmp_path}/no-such-bus")
    saved = keyring.get_keyring()
    keyring.set_keyring(Keyring())
    try:
        asked = Asked()
        store = SecretStore(mode="auto", home=tmp_path, prompts=asked.prompts())
        store.set(KEY, "abcdef-value")
        assert store.get(KEY) == "abcdef-value"
        assert len(asked.consent_calls) == 1
    finally:
        keyring.set_keyring(saved)


def test_mode_comes_from_settings_json(no_dbus: None, tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text('{"security": {"keyring": "encrypted_file"}}')
    store = SecretStore(home=tmp_path, prompts=Asked().prompts())
    assert store.mode == "encrypted_file"
    store.set(KEY, _value())
    assert (tmp_path / "secrets.cfg").exists()
    assert SecretStore(home=tmp_path / "elsewhere").mode == "auto"


def test_windows_refuses_secrets_above_the_credential_manager_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.test_settings_dialog import MemoryKeyring

    monkeypatch.setattr(sys, "platform", "win32")
    fits = "x" * (WINDOWS_MAX_SECRET_BYTES // 2)
    too_big = "x" * (WINDOWS_MAX_SECRET_BYTES // 2 + 1)
    assert check_windows_size(fits) is None
    assert "2,562 bytes" in (check_windows_size(too_big) or "")
    memory = MemoryKeyring()
    store = SecretStore(backend=memory)
    store.set(KEY, fits)
    with pytest.raises(SecretStoreError, match="Windows Credential Manager holds at most 2,560"):
        store.set(KEY, too_big)
    assert store.get(KEY) == fits  # the refused value did not replace the stored one
    monkeypatch.setattr(sys, "platform", "linux")
    assert check_windows_size(too_big) is None


def test_gui_asks_for_the_passphrase_on_the_gui_thread_once(
    no_dbus: None, tmp_path: Path, qloop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keyring calls run in worker threads; the passphrase dialog must run on the GUI
    thread, and only once per session."""
    import asyncio

    from app.ui import passphrase

    threads: list[threading.Thread] = []

    def fake_dialog(parent: Any, *, creating: bool) -> str:
        threads.append(threading.current_thread())
        return "gui passphrase"

    monkeypatch.setattr(passphrase, "ask_passphrase", fake_dialog)
    previous = passphrase.install_gui_prompts()
    try:
        store = SecretStore(mode="encrypted_file", home=tmp_path)
        value = _value()

        async def body() -> str | None:
            await asyncio.to_thread(store.set, KEY, value)
            return await asyncio.to_thread(store.get, KEY)

        assert qloop.run_until_complete(asyncio.wait_for(body(), 30)) == value
    finally:
        keyring_fallback.install_prompts(previous)
    assert threads == [threading.main_thread()]


# ---- the passphrase never reaches a child process ----------------------------------------


STRONG = "violet anchor mosaic"


def test_env_passphrase_leaves_the_environment_once_read(
    no_dbus: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import subprocess

    from app.core.secrets import known_secret_values

    monkeypatch.setenv(PASSPHRASE_ENV, STRONG)
    store = SecretStore(mode="encrypted_file", home=tmp_path, prompts=CLI)
    value = _value()
    store.set(KEY, value)
    assert PASSPHRASE_ENV not in os.environ
    child = subprocess.run(
        [sys.executable, "-c", f"import os; print(os.environ.get({PASSPHRASE_ENV!r}))"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert child.stdout.strip() == "None"
    assert STRONG in known_secret_values()  # and a log line holding it is redacted
    # Still usable by this process (a second store, as the CLI's runtime makes one).
    assert SecretStore(mode="encrypted_file", home=tmp_path, prompts=CLI).get(KEY) == value


def test_a_child_started_right_after_start_up_does_not_inherit_the_passphrase(
    tmp_path: Path,
) -> None:
    """Deskhand started with the variable set; a tool starts a program before any secret
    was read. Neither subprocess (os.environ) nor os.system (the C environment) passes it."""
    import os
    import subprocess

    out = tmp_path / "child-env"
    code = (
        "import os, subprocess, sys\n"
        "import app.core.runtime\n"
        "a = subprocess.run(['env'], capture_output=True, text=True).stdout\n"
        f"os.system('env > {out}')\n"
        "print(a)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, PASSPHRASE_ENV: STRONG},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "PATH=" in done.stdout  # the child did print its environment
    assert STRONG not in done.stdout and PASSPHRASE_ENV not in done.stdout
    assert STRONG not in out.read_text() and "PATH=" in out.read_text()


# ---- a new store needs a strong passphrase ------------------------------------------------------


@pytest.mark.parametrize(
    "weak",
    [
        "short",
        "elevenchars",  # 11
        "aaaaaaaaaaaaaaaa",
        "abababababababab",
        "abcdefghijklmnop",
        "123456789012",
        "zyxwvutsrqponm",
        "qwertyuiopasdf",
        "Password2024!",
        "passwordpassword",
        "123123123123",
        "iloveyou1234",
    ],
)
def test_a_weak_passphrase_is_refused_with_what_is_required(
    no_dbus: None, tmp_path: Path, weak: str
) -> None:
    store = SecretStore(mode="encrypted_file", home=tmp_path, prompts=Asked(weak).prompts())
    with pytest.raises(SecretStoreError) as err:
        store.set(KEY, _value())
    message = str(err.value)
    assert "too weak" in message and "at least 12 characters" in message
    assert weak not in message
    assert not (tmp_path / "secrets.cfg").exists()
    assert keyring_fallback.passphrase_problem(weak)


@pytest.mark.parametrize(
    "strong", [STRONG, "correct horse", "tram 7 unlikely sofa", "Zq8#mW2!vR5p"]
)
def test_a_reasonable_passphrase_is_accepted(no_dbus: None, tmp_path: Path, strong: str) -> None:
    assert keyring_fallback.passphrase_problem(strong) is None
    store = SecretStore(mode="encrypted_file", home=tmp_path, prompts=Asked(strong).prompts())
    store.set(KEY, "value-1234")
    assert store.get(KEY) == "value-1234"


def test_an_existing_store_with_an_old_weak_passphrase_still_opens(
    no_dbus: None, tmp_path: Path
) -> None:
    """The rule is for new stores: nobody is locked out of secrets saved before it."""
    from keyrings.cryptfile.cryptfile import CryptFileKeyring

    old = CryptFileKeyring()
    old.file_path = str(tmp_path / "secrets.cfg")
    old.keyring_key = "weak"
    old.set_password("deskhand", KEY, "saved-before")
    store = SecretStore(mode="encrypted_file", home=tmp_path, prompts=Asked("weak").prompts())
    assert store.get(KEY) == "saved-before"
