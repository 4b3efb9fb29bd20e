"""A private, unlocked gnome-keyring on its own D-Bus session bus, for benchmarks that
need a stored secret read the way the app reads it on Linux (Secret Service).

The same set-up as tests/fixtures_keyring.py, as a context manager; everything lives in
a temporary folder and both daemons are stopped on exit.
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

BACKEND = "keyring.backends.SecretService.Keyring"
PASSWORD = b"deskhand-bench-password"
TIMEOUT = 15.0
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
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


class Unavailable(RuntimeError):
    """No Secret Service could be started here."""


def _first_line(proc: subprocess.Popen[bytes]) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(TIMEOUT):
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


def _ready() -> bool:
    from keyring.backends.SecretService import Keyring

    try:
        backend = Keyring()
        backend.set_password("deskhand-bench", "probe", "ready")
        return backend.get_password("deskhand-bench", "probe") == "ready"
    except Exception:
        return False


@contextlib.contextmanager
def secret_service() -> Iterator[dict[str, str]]:
    """Yields the environment (bus address, keyring backend) a process needs to use it.
    This process's `os.environ` points at it while the block runs."""
    missing = [exe for exe in ("dbus-daemon", "gnome-keyring-daemon") if not shutil.which(exe)]
    if missing:
        raise Unavailable(f"not installed: {', '.join(missing)}")
    root = Path(tempfile.mkdtemp(prefix="dh-bench-kr-"))
    dirs = {name: root / name for name in ("home", "run", "data", "config")}
    for path in dirs.values():
        path.mkdir(mode=0o700)
    (root / "bus.conf").write_text(BUS_CONFIG.format(socket=root / "bus"))
    daemon_env = {
        **os.environ,
        "HOME": str(dirs["home"]),
        "XDG_RUNTIME_DIR": str(dirs["run"]),
        "XDG_DATA_HOME": str(dirs["data"]),
        "XDG_CONFIG_HOME": str(dirs["config"]),
    }
    saved = {k: os.environ.get(k) for k in ("DBUS_SESSION_BUS_ADDRESS", "PYTHON_KEYRING_BACKEND")}
    bus = keyring_daemon = None
    try:
        bus = subprocess.Popen(
            ["dbus-daemon", f"--config-file={root / 'bus.conf'}", "--nofork", "--print-address=1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=daemon_env,
            start_new_session=True,
        )
        address = _first_line(bus)
        if not address:
            raise Unavailable("dbus-daemon did not start")
        env = {"DBUS_SESSION_BUS_ADDRESS": address, "PYTHON_KEYRING_BACKEND": BACKEND}
        daemon_env.update(env)
        keyring_daemon = subprocess.Popen(
            ["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=daemon_env,
            start_new_session=True,
        )
        assert keyring_daemon.stdin is not None
        keyring_daemon.stdin.write(PASSWORD)
        keyring_daemon.stdin.close()
        os.environ.update(env)
        deadline = time.monotonic() + TIMEOUT
        while not _ready():
            if keyring_daemon.poll() is not None or time.monotonic() > deadline:
                raise Unavailable("gnome-keyring-daemon did not become ready")
            time.sleep(0.05)  # bounded readiness poll
        yield env
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _stop(keyring_daemon)
        _stop(bus)
        shutil.rmtree(root, ignore_errors=True)
