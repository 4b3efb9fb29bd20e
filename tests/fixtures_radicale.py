"""Fixtures for a real CalDAV server: Radicale (from PyPI) on 127.0.0.1.

`radicale_server` (session) starts `python -m radicale` with a temporary storage folder and
htpasswd authentication for one user, waits (bounded) until it answers, and stops it at
the end. `radicale_calendar` (per test) creates a fresh calendar collection for that user
and deletes it afterwards, so each test sees only its own events.
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import secrets
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import service_unavailable

START_TIMEOUT = 20.0
USER = "alice"

_CONFIG = """[server]
hosts = 127.0.0.1:{port}

[auth]
type = htpasswd
htpasswd_filename = {users}
htpasswd_encryption = plain
delay = 0

[rights]
type = owner_only

[storage]
filesystem_folder = {storage}

[web]
type = none

[logging]
level = warning
"""


@dataclass(frozen=True)
class RadicaleServer:
    url: str
    user: str
    password: str
    root: Path

    def client(self, password: str | None = None) -> Any:
        import caldav

        return caldav.DAVClient(
            url=self.url, username=self.user, password=password or self.password, timeout=10
        )


@dataclass(frozen=True)
class RadicaleCalendar:
    server: RadicaleServer
    name: str
    url: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(port: int) -> bool:
    """True once Radicale answers HTTP (any status: 401 without credentials is fine)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        conn.request("OPTIONS", "/")
        return conn.getresponse().status < 500
    except OSError:
        return False
    finally:
        conn.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
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


@pytest.fixture(scope="session")
def radicale_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RadicaleServer]:
    if importlib.util.find_spec("radicale") is None:
        service_unavailable("Radicale is not installed (pip install radicale)")
    if importlib.util.find_spec("caldav") is None:
        service_unavailable("the caldav package is not installed")
    root = tmp_path_factory.mktemp("radicale")
    password = secrets.token_urlsafe(12)
    users = root / "users"
    users.write_text(f"{USER}:{password}\n")
    port = _free_port()
    config = root / "config"
    config.write_text(_CONFIG.format(port=port, users=users, storage=root / "collections"))
    log = root / "radicale.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "radicale", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _answers(port):
            if proc.poll() is not None:
                service_unavailable(f"Radicale exited with {proc.returncode}: {_tail(log)}")
            if time.monotonic() > deadline:
                service_unavailable(f"Radicale did not answer within {START_TIMEOUT:g}s")
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)  # pause between polls; returns early if it dies
        yield RadicaleServer(f"http://127.0.0.1:{port}/", USER, password, root)
    finally:
        _stop(proc)


@pytest.fixture
def radicale_calendar(radicale_server: RadicaleServer) -> Iterator[RadicaleCalendar]:
    """A new, empty calendar of the test user (the only one while the test runs)."""
    name = f"Test {uuid.uuid4().hex[:8]}"
    with radicale_server.client() as client:
        calendar = client.principal().make_calendar(name=name, cal_id=uuid.uuid4().hex)
        url = str(calendar.url)
    try:
        yield RadicaleCalendar(radicale_server, name, url)
    finally:
        with radicale_server.client() as client, contextlib.suppress(Exception):
            client.calendar(url=url).delete()
