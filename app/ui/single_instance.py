"""One Deskhand per home folder: a second start asks the first to show its window."""

from __future__ import annotations

import hashlib
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtNetwork import QLocalServer, QLocalSocket

ACTIVATE = b"activate\n"


def server_name(home: Path) -> str:
    digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:16]
    return f"deskhand-{digest}"


def ask_running_instance(home: Path, timeout_ms: int = 300) -> bool:
    """True when another instance answered (and was asked to come to the front)."""
    socket = QLocalSocket()
    socket.connectToServer(server_name(home))
    if not socket.waitForConnected(timeout_ms):
        return False
    socket.write(ACTIVATE)
    socket.flush()
    socket.waitForBytesWritten(timeout_ms)
    socket.disconnectFromServer()
    return True


class InstanceServer(QObject):
    activationRequested = Signal()

    def __init__(self, home: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._server = QLocalServer(self)
        name = server_name(home)
        if not self._server.listen(name):
            QLocalServer.removeServer(name)  # a stale socket left by a crash
            self._server.listen(name)
        self._server.newConnection.connect(self._on_connection)

    @property
    def listening(self) -> bool:
        return self._server.isListening()

    def _on_connection(self) -> None:
        while self._server.hasPendingConnections():
            socket = self._server.nextPendingConnection()
            socket.readyRead.connect(self._on_ready_read)
            socket.disconnected.connect(socket.deleteLater)

    @Slot()
    def _on_ready_read(self) -> None:
        socket = self.sender()
        if isinstance(socket, QLocalSocket) and bytes(socket.readAll().data()).startswith(
            ACTIVATE.strip()
        ):
            self.activationRequested.emit()

    def close(self) -> None:
        self._server.close()
