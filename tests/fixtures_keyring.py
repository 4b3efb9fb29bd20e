"""Fixtures for a real Secret Service (gnome-keyring on a private D-Bus).

`secret_service` (session) starts a private session bus and an unlocked gnome-keyring,
points this process's `keyring` at it and yields the environment a subprocess needs
to reach it. `keyring_env` (per test) re-selects that backend and removes every item
the test stored, so tests do not see each other's secrets.

Works as root in a container with no session bus: everything (bus socket, runtime dir,
keyrings) lives in a private temporary folder.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from keyring.backend import KeyringBackend

from tests.conftest import service_unavailable

START_TIMEOUT = 15.0
KEYRING_PASSWORD = b"deskhand-test-password"
BACKEND = "keyring.backends.SecretService.Keyring"

# A session bus WITHOUT service activation: the system's service file would otherwise
# auto-start a second (locked) gnome-keyring if a client asks before ours owns the name.
_BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


def _read_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """The first stdout line of `proc`, waiting at most `timeout` seconds."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            return ""
    return proc.stdout.readline().decode().strip()


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def _tail(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace").strip()[-800:]
    return ""


def _round_trip() -> Exception | None:
    """Store and read back a value through the SecretService backend; None if it worked."""
    from keyring.backends.SecretService import Keyring

    backend = Keyring()
    try:
        backend.set_password("deskhand-fixture", "probe", "ready")
        ok = backend.get_password("deskhand-fixture", "probe") == "ready"
        backend.delete_password("deskhand-fixture", "probe")
    except Exception as exc:
        return exc
    return None if ok else RuntimeError("round trip returned a different value")


@pytest.fixture(scope="session")
def secret_service() -> Iterator[dict[str, str]]:
    """A private, unlocked gnome-keyring. Yields env vars for subprocesses."""
    missing = [exe for exe in ("dbus-daemon", "gnome-keyring-daemon") if not shutil.which(exe)]
    if missing:
        service_unavailable(f"secret service: {', '.join(missing)} not installed")
    try:
        import keyring
        from keyring.backends.SecretService import Keyring
    except ImportError as exc:
        service_unavailable(f"secret service: {exc}")
        raise  # unreachable; keeps type checkers happy

    root = Path(tempfile.mkdtemp(prefix="dh-keyring-"))  # short: unix socket paths are limited
    dirs = {name: root / name for name in ("home", "run", "data", "config")}
    for path in dirs.values():
        path.mkdir(mode=0o700)
    socket = root / "bus"
    config = root / "bus.conf"
    config.write_text(_BUS_CONFIG.format(socket=socket))
    daemon_env = {
        **os.environ,
        "HOME": str(dirs["home"]),
        "XDG_RUNTIME_DIR": str(dirs["run"]),
        "XDG_DATA_HOME": str(dirs["data"]),
        "XDG_CONFIG_HOME": str(dirs["config"]),
    }
    bus: subprocess.Popen[bytes] | None = None
    gk: subprocess.Popen[bytes] | None = None
    saved_env = {
        k: os.environ.get(k) for k in ("DBUS_SESSION_BUS_ADDRESS", "PYTHON_KEYRING_BACKEND")
    }
    saved_backend = keyring.get_keyring()
    try:
        bus = subprocess.Popen(
            ["dbus-daemon", f"--config-file={config}", "--nofork", "--print-address=1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=daemon_env,
            start_new_session=True,
        )
        address = _read_line(bus, START_TIMEOUT)
        if not address:
            service_unavailable("secret service: dbus-daemon did not start")
        env = {"DBUS_SESSION_BUS_ADDRESS": address, "PYTHON_KEYRING_BACKEND": BACKEND}
        daemon_env.update(env)

        # --foreground instead of --daemonize: we own the process and can stop it.
        # --unlock reads the login keyring's password from stdin (until EOF).
        log_path = root / "gnome-keyring.log"
        with log_path.open("wb") as log_file:
            gk = subprocess.Popen(
                ["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets"],
                stdin=subprocess.PIPE,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=daemon_env,
                start_new_session=True,
            )
        assert gk.stdin is not None
        gk.stdin.write(KEYRING_PASSWORD)
        gk.stdin.close()

        os.environ.update(env)
        keyring.set_keyring(Keyring())
        deadline = time.monotonic() + START_TIMEOUT
        while (problem := _round_trip()) is not None:
            if gk.poll() is not None:
                service_unavailable(
                    f"secret service: gnome-keyring-daemon exited ({gk.returncode}): "
                    f"{_tail(log_path)}"
                )
            if time.monotonic() > deadline:
                service_unavailable(f"secret service not ready after {START_TIMEOUT}s: {problem}")
            time.sleep(0.05)  # poll interval of a bounded readiness loop
        yield env
    finally:
        keyring.set_keyring(saved_backend)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _stop(gk)
        _stop(bus)
        shutil.rmtree(root, ignore_errors=True)


def _delete_test_items() -> None:
    import secretstorage

    with contextlib.closing(secretstorage.dbus_init()) as conn:
        collection = secretstorage.get_default_collection(conn)
        for item in collection.search_items({"application": "Python keyring library"}):
            item.delete()


@pytest.fixture
def keyring_env(
    secret_service: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, str]]:
    """The real keyring selected for this test; what the test stored is removed afterwards."""
    import keyring
    from keyring.backends.SecretService import Keyring

    for key, value in secret_service.items():
        monkeypatch.setenv(key, value)
    saved = keyring.get_keyring()
    keyring.set_keyring(Keyring())
    try:
        yield dict(secret_service)
    finally:
        keyring.set_keyring(saved)
        _delete_test_items()


class MemoryKeyring(KeyringBackend):
    """A keyring that lives in this process only: for tests that are not about the keyring
    (no D-Bus, nothing left behind)."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.items.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.items[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.items.pop((service, username), None)
