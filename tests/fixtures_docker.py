"""A real, private Docker engine for the docker tool tests.

`dockerd` (session) starts `dockerd` as root with its own data root, exec root, pidfile and
unix socket in a fresh temporary folder, so it never meets the machine's engine or a
daemon left over from an earlier run. Bridge networking and iptables are off (nothing on
the host's network changes; test containers use network_mode="none"). It imports a tiny
image made of the static busybox binary — no registry or network needed — and, at
teardown, removes every container and stops the daemon.

`docker_env` (per test) removes the containers a test created, so tests stay independent.
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import io
import os
import shutil
import socket
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import service_unavailable

TEST_IMAGE = "deskhand-test/busybox:latest"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
BUSYBOX = Path("/bin/busybox")
BUSYBOX_APPLETS = (
    "sh", "echo", "sleep", "cat", "ls", "top", "ps", "env", "printf", "seq", "true",
    "false", "date", "yes", "head", "tail", "id", "kill", "wc", "hostname", "mkdir", "rm",
)  # fmt: skip
DAEMON_FLAGS = (
    "--bridge=none",
    "--iptables=false",
    "--ip6tables=false",
    "--ip-forward=false",
    "--ip-masq=false",
    "--userland-proxy=false",
)


@dataclass(frozen=True)
class DockerDaemon:
    root: Path
    socket: Path
    log: Path
    image: str = TEST_IMAGE

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def env(self) -> dict[str, str]:
        return {"DOCKER_HOST": self.url}

    def client(self) -> Any:
        """A new SDK client for this daemon (the caller closes it)."""
        import docker

        return docker.DockerClient(base_url=self.url, timeout=60)

    def log_tail(self, chars: int = 1500) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-chars:]
        return ""


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=2)
        self._path = str(path)

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(2)
        self.sock.connect(self._path)


def ping(sock: Path) -> bool:
    """True when the engine answers GET /_ping with OK."""
    conn = _UnixHTTPConnection(sock)
    try:
        conn.request("GET", "/_ping")
        response = conn.getresponse()
        return response.status == 200 and response.read() == b"OK"
    except OSError:
        return False
    finally:
        conn.close()


def _static_busybox() -> Path | None:
    if not BUSYBOX.is_file():
        return None
    ldd = shutil.which("ldd")
    if ldd is not None:
        out = subprocess.run([ldd, str(BUSYBOX)], capture_output=True, text=True, check=False)
        if "not a dynamic executable" not in out.stdout + out.stderr:
            return None  # the dynamic build needs a libc the image doesn't have
    return BUSYBOX


def busybox_tar(busybox: Path, applets: tuple[str, ...] = BUSYBOX_APPLETS) -> bytes:
    """A root file system: /bin/busybox, applet symlinks, and an empty /tmp. Fewer
    `applets` make images like the minimal ones people run (no shell, no kill)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for folder in ("bin", "tmp", "etc"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755
            tar.addfile(info)
        tar.add(str(busybox), arcname="bin/busybox")
        for applet in applets:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
        passwd = b"root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size = len(passwd)
        tar.addfile(info, io.BytesIO(passwd))
    return buffer.getvalue()


def _wait_until_ready(proc: subprocess.Popen[bytes], daemon: DockerDaemon) -> str | None:
    """None once the engine answers; otherwise why it never will."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"dockerd exited with {proc.returncode}:\n{daemon.log_tail()}"
        if daemon.socket.exists() and ping(daemon.socket):
            return None
        time.sleep(0.1)  # polling the socket; each round checks real state
    return f"dockerd did not answer /_ping within {START_TIMEOUT:g} s:\n{daemon.log_tail()}"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait(timeout=10)


def remove_all_containers(daemon: DockerDaemon) -> None:
    client = daemon.client()
    try:
        for container in client.containers.list(all=True):
            with contextlib.suppress(Exception):  # already gone
                container.remove(force=True)
    finally:
        client.close()


def _mounted_under(root: Path) -> bool:
    with contextlib.suppress(OSError):
        return str(root) in Path("/proc/self/mounts").read_text()
    return False


@pytest.fixture(scope="session")
def dockerd() -> Iterator[DockerDaemon]:
    binary = shutil.which("dockerd")
    if binary is None:
        service_unavailable("dockerd is not installed (apt-get install docker.io)")
    if os.geteuid() != 0:
        service_unavailable("starting a private dockerd needs root")
    busybox = _static_busybox()
    if busybox is None:
        service_unavailable("a static /bin/busybox is needed (apt-get install busybox-static)")
    if importlib.util.find_spec("docker") is None:
        service_unavailable("the docker Python package is missing (pip install -e '.[docker]')")
    # Short and fresh: unix socket paths are limited to 108 bytes, and a daemon left over
    # from an interrupted run keeps its own folder.
    root = Path(tempfile.mkdtemp(prefix="dh-dockerd-", dir="/tmp"))
    daemon = DockerDaemon(root=root, socket=root / "docker.sock", log=root / "dockerd.log")
    command = [
        str(binary),
        f"--data-root={root / 'data'}",
        f"--exec-root={root / 'exec'}",
        f"--pidfile={root / 'dockerd.pid'}",
        f"--host={daemon.url}",
        *DAEMON_FLAGS,
    ]
    with daemon.log.open("wb") as log:
        proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        problem = _wait_until_ready(proc, daemon)
        if problem is not None:
            service_unavailable(problem)
        client = daemon.client()
        try:
            client.api.import_image_from_data(
                busybox_tar(busybox),
                repository=TEST_IMAGE.split(":")[0],
                tag=TEST_IMAGE.split(":")[1],
                changes=['CMD ["sh"]'],
            )
        finally:
            client.close()
        yield daemon
    finally:
        from integrations.docker_client import forget_clients

        forget_clients()  # the tools' cached clients point at this daemon
        with contextlib.suppress(Exception):  # a dead daemon has nothing left to remove
            remove_all_containers(daemon)
        _stop(proc)
        if not _mounted_under(root):
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def docker_env(dockerd: DockerDaemon) -> Iterator[DockerDaemon]:
    """The session daemon, with every container removed after the test."""
    yield dockerd
    remove_all_containers(dockerd)
