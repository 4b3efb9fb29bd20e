"""One Deskhand per home folder: a second start asks the first to show its window.

On Linux and macOS the channel is a Unix socket in the home folder (mode 0700, so only
the user can reach it), read on the GUI thread through a `QSocketNotifier`: QtNetwork's
`QLocalServer` did the same but loading QtNetwork cost 3 MiB of the idle footprint. A home
whose path is too long for a socket address uses a per-user folder of the runtime or
temporary directory instead. Windows keeps `QLocalServer` (a named pipe).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QSocketNotifier, Signal

log = logging.getLogger(__name__)

ACTIVATE = b"activate\n"
SOCKET_FILE = "instance.sock"
#: The longest socket path every POSIX system takes (sun_path is 104 bytes on macOS).
MAX_SOCKET_PATH = 100
#: What a client may send before it is cut off.
MAX_MESSAGE = 64


def server_name(home: Path) -> str:
    digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:16]
    return f"deskhand-{digest}"


def socket_path(home: Path, *, create: bool = False) -> Path | None:
    """Where this home's instance listens (POSIX). None when no safe place exists: the
    per-user fallback folder is someone else's or open to others, or its address would
    be too long as well."""
    own = home / SOCKET_FILE
    if len(os.fsencode(own)) <= MAX_SOCKET_PATH:
        return own
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    folder = base / f"deskhand-{os.getuid()}"
    if create:
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
    try:
        info = folder.lstat()
    except OSError:
        return None
    if not os.path.isdir(folder) or folder.is_symlink():
        return None
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    path = folder / f"{server_name(home)}.sock"
    return path if len(os.fsencode(path)) <= MAX_SOCKET_PATH else None


def ask_running_instance(home: Path, timeout_ms: int = 300) -> bool:
    """True when another instance answered (and was asked to come to the front)."""
    if sys.platform == "win32":
        return _ask_over_qt(home, timeout_ms)
    path = socket_path(home)
    if path is None or not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout_ms / 1000)
        try:
            client.connect(str(path))
            client.sendall(ACTIVATE)
        except OSError:
            return False
    return True


class InstanceServer(QObject):
    """Listens for a second start of the same home; `activationRequested` when one asks."""

    activationRequested = Signal()

    def __init__(self, home: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._channel: _UnixChannel | _QtChannel | None = None
        try:
            if sys.platform == "win32":
                self._channel = _QtChannel(self, server_name(home))
            else:
                path = socket_path(home, create=True)
                if path is None:
                    log.warning("no safe place for the single-instance socket of %s", home)
                else:
                    self._channel = _UnixChannel(self, path)
        except OSError as exc:  # the app works without it; a second start opens a window
            log.warning("no single-instance socket for %s: %s", home, exc)

    @property
    def listening(self) -> bool:
        return self._channel is not None and self._channel.listening

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None


class _UnixChannel:
    def __init__(self, owner: InstanceServer, path: Path) -> None:
        self._owner = owner
        self._path = path
        self._server = self._bind(path)
        self._inode = path.stat().st_ino
        self._server.setblocking(False)
        self._notifier = QSocketNotifier(self._server.fileno(), QSocketNotifier.Type.Read)
        self._notifier.activated.connect(self._accept)
        #: Open connections: the socket, its notifier and what it sent so far.
        self._clients: dict[int, tuple[socket.socket, QSocketNotifier, bytearray]] = {}

    @staticmethod
    def _bind(path: Path) -> socket.socket:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                server.bind(str(path))
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
                # a stale socket left by a crash: a live instance answered the start's
                # `ask_running_instance` already, and this one would not be starting
                path.unlink()
                server.bind(str(path))
            os.chmod(path, 0o600)
            server.listen(4)
        except OSError:
            server.close()
            raise
        return server

    @property
    def listening(self) -> bool:
        return self._server.fileno() != -1

    def _accept(self, *_args: Any) -> None:
        while True:
            try:
                conn, _address = self._server.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.debug("single-instance accept failed: %s", exc)
                return
            conn.setblocking(False)
            notifier = QSocketNotifier(conn.fileno(), QSocketNotifier.Type.Read)
            fd = conn.fileno()
            self._clients[fd] = (conn, notifier, bytearray())
            notifier.activated.connect(lambda *_a, fd=fd: self._read(fd))

    def _read(self, fd: int) -> None:
        entry = self._clients.get(fd)
        if entry is None:
            return
        conn, _notifier, received = entry
        try:
            data = conn.recv(MAX_MESSAGE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        received += data
        if data and b"\n" not in received and len(received) < MAX_MESSAGE:
            return  # more to come
        self._drop(fd)
        if bytes(received).startswith(ACTIVATE.strip()):
            self._owner.activationRequested.emit()

    def _drop(self, fd: int) -> None:
        conn, notifier, _received = self._clients.pop(fd)
        notifier.setEnabled(False)
        notifier.deleteLater()
        conn.close()

    def close(self) -> None:
        for fd in list(self._clients):
            self._drop(fd)
        self._notifier.setEnabled(False)
        self._notifier.deleteLater()
        self._server.close()
        with contextlib.suppress(OSError):
            if self._path.stat().st_ino == self._inode:  # still ours, not a later start's
                self._path.unlink()


# ---- Windows: a named pipe through QtNetwork ------------------------------------------------


def _ask_over_qt(home: Path, timeout_ms: int) -> bool:
    from PySide6.QtNetwork import QLocalSocket

    client = QLocalSocket()
    client.connectToServer(server_name(home))
    if not client.waitForConnected(timeout_ms):
        return False
    client.write(ACTIVATE)
    client.flush()
    client.waitForBytesWritten(timeout_ms)
    client.disconnectFromServer()
    return True


class _QtChannel:
    def __init__(self, owner: InstanceServer, name: str) -> None:
        from PySide6.QtNetwork import QLocalServer

        self._owner = owner
        self._server = QLocalServer(owner)
        if not self._server.listen(name):
            QLocalServer.removeServer(name)  # a stale pipe left by a crash
            self._server.listen(name)
        self._server.newConnection.connect(self._on_connection)

    @property
    def listening(self) -> bool:
        return bool(self._server.isListening())

    def _on_connection(self) -> None:
        while self._server.hasPendingConnections():
            client = self._server.nextPendingConnection()
            client.readyRead.connect(lambda c=client: self._on_ready_read(c))
            client.disconnected.connect(client.deleteLater)

    def _on_ready_read(self, client: Any) -> None:
        if bytes(client.readAll().data()).startswith(ACTIVATE.strip()):
            self._owner.activationRequested.emit()

    def close(self) -> None:
        self._server.close()
