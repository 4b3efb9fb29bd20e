"""A freedesktop notification server of our own on a private session bus (dbus-fast).

dunst, the Debian daemon, needs an X display to run; this server records what arrives and
presses buttons (emits ActionInvoked) like a user would. Used by the notification, task and
window tests.
"""

# No `from __future__ import annotations`: the server's D-Bus signatures are annotations.

import asyncio
import queue
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from dbus_fast.aio import MessageBus
from dbus_fast.service import ServiceInterface, method, signal

from tests.conftest import service_unavailable

# the same private bus as the keyring's: no service activation, so nothing of the
# system's starts on it
from tests.fixtures_keyring import _BUS_CONFIG, _read_line, _stop

WAIT = 10.0
NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
DISMISSED = 2


@dataclass
class Shown:
    id: int
    app_name: str
    summary: str
    body: str
    actions: list[str]


# D-Bus signatures: dbus-fast reads them from the annotations of exported methods.
S, U, INT, AS, UU, US, SSSS, HINTS = "s", "u", "i", "as", "uu", "us", "ssss", "a{sv}"


class _Interface(ServiceInterface):
    def __init__(self) -> None:
        super().__init__(NAME)
        self.shown: queue.Queue[Shown] = queue.Queue()
        self.closed: queue.Queue[int] = queue.Queue()
        self._next = 0

    @method()
    def GetCapabilities(self) -> AS:
        return ["actions", "body", "body-markup"]

    @method()
    def GetServerInformation(self) -> SSSS:
        return ["deskhand-test-server", "deskhand", "1.0", "1.2"]

    @method()
    def Notify(
        self,
        app_name: S,
        replaces_id: U,
        app_icon: S,
        summary: S,
        body: S,
        actions: AS,
        hints: HINTS,
        expire_timeout: INT,
    ) -> U:
        self._next += 1
        self.shown.put(Shown(self._next, app_name, summary, body, list(actions)))
        return self._next

    @method()
    def CloseNotification(self, notification_id: U) -> None:
        self.closed.put(notification_id)
        self.NotificationClosed(notification_id, 3)

    @signal()
    def NotificationClosed(self, notification_id: int, reason: int) -> UU:
        return [notification_id, reason]

    @signal()
    def ActionInvoked(self, notification_id: int, key: str) -> US:
        return [notification_id, key]


class NotificationServer:
    """The server's own loop on a thread; the test presses buttons through it."""

    def __init__(self, address: str) -> None:
        self.interface = _Interface()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._bus: MessageBus | None = None
        asyncio.run_coroutine_threadsafe(self._start(address), self._loop).result(WAIT)

    async def _start(self, address: str) -> None:
        self._bus = await MessageBus(bus_address=address).connect()
        self._bus.export(PATH, self.interface)
        await self._bus.request_name(NAME)

    def next_shown(self) -> Shown:
        return self.interface.shown.get(timeout=WAIT)

    def press(self, notification_id: int, key: str) -> None:
        """What a user's click does: ActionInvoked (then the server closes it)."""
        self._loop.call_soon_threadsafe(self.interface.ActionInvoked, notification_id, key)
        self._loop.call_soon_threadsafe(
            self.interface.NotificationClosed, notification_id, DISMISSED
        )

    def dismiss(self, notification_id: int) -> None:
        self._loop.call_soon_threadsafe(
            self.interface.NotificationClosed, notification_id, DISMISSED
        )

    def stop(self) -> None:
        if self._bus is not None:
            self._loop.call_soon_threadsafe(self._bus.disconnect)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():  # an unclosed loop warns when it is collected
            self._loop.close()


def _first_line(proc: subprocess.Popen[bytes]) -> str:
    """The first line `proc` prints, or "" if none comes within WAIT seconds."""
    return _read_line(proc, WAIT)


@pytest.fixture
def session_bus(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A private session bus; DBUS_SESSION_BUS_ADDRESS points at it."""
    if not shutil.which("dbus-daemon"):
        service_unavailable("notifications: dbus-daemon not installed")
    root = Path(tempfile.mkdtemp(prefix="dh-notify-"))  # short: unix socket paths are limited
    config = root / "bus.conf"
    config.write_text(_BUS_CONFIG.format(socket=root / "bus"))
    proc = subprocess.Popen(
        ["dbus-daemon", f"--config-file={config}", "--nofork", "--print-address=1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        address = _first_line(proc)
        if not address:
            service_unavailable("notifications: dbus-daemon did not start")
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
        yield address
    finally:
        _stop(proc)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def server(session_bus: str) -> Iterator[NotificationServer]:
    srv = NotificationServer(session_bus)
    try:
        yield srv
    finally:
        srv.stop()
