"""Notifications for the window app: native ones with buttons where the desktop has a
notification server, else the tray's balloon.

The core `Notifier` (desktop-notifier over D-Bus) is created and probed on a worker thread
once the window is up, so neither is imported on the start-up path. Its callbacks come on its
own loop thread; they are queued to the GUI thread here and re-emitted with the key the caller
gave, so the App (and the task runner) only ever see `actionInvoked(key, action)` and
`clicked(key)`, on the GUI thread. A key of any kind passes through untouched.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Qt, Signal, Slot
from shiboken6 import isValid

from app.core.visible import visible
from app.ui.off_gui import run_off_gui

if TYPE_CHECKING:
    from app.core.notifications import Action, Notifier
    from app.ui.tray import Tray

log = logging.getLogger(__name__)
DEFAULT_TIMEOUT_MS = 8000
CLOSE_TIMEOUT = 1.0


@dataclass(frozen=True)
class _Pending:
    """A notification asked for before the probe said where notifications go."""

    title: str
    message: str
    key: str
    actions: tuple[Action, ...]
    timeout_ms: int


def session_bus_possible(environ: dict[str, str] | None = None) -> bool:
    """False when there is certainly no session bus (nothing to probe): no address and no
    display to find one through, or only unix socket paths that do not exist."""
    env = os.environ if environ is None else environ
    address = env.get("DBUS_SESSION_BUS_ADDRESS", "")
    if not address:
        return bool(env.get("DISPLAY"))  # dbus-fast's fallback: ~/.dbus/session-bus/…
    for entry in address.split(";"):
        if not entry.startswith("unix:path="):
            return True  # abstract sockets, tcp…: only the probe can tell
        path = entry.removeprefix("unix:path=").split(",", 1)[0]
        if os.path.exists(path):
            return True
    return False


def _default_notifier() -> Notifier:
    from app.core.notifications import Notifier

    return Notifier(app_name="Deskhand")


class Notifications(QObject):
    """Shows notifications by key; see the module docstring. GUI thread only."""

    #: A button of the notification shown with this key was pressed: (key, action id).
    actionInvoked = Signal(str, str)
    #: The body of the notification shown with this key was clicked (native or balloon).
    clicked = Signal(str)
    #: Once, after `start`: True when native notifications are used, False for the tray.
    availabilityKnown = Signal(bool)

    _actionFromNotifier = Signal(str, str, str)  # key, notification id, action id
    _clickFromNotifier = Signal(str, str)  # key, notification id

    def __init__(
        self,
        tray: Tray,
        notifier_factory: Callable[[], Notifier] | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._tray = tray
        self._factory = notifier_factory or _default_notifier
        self._native: bool | None = None
        self._started = False
        self._closed = False
        self._notifier: Notifier | None = None
        self._pending: list[_Pending] = []
        self._ids: dict[str, str] = {}  # key → id of the native notification shown for it
        queued = Qt.ConnectionType.QueuedConnection
        self._actionFromNotifier.connect(self._on_action, queued)
        self._clickFromNotifier.connect(self._on_click, queued)
        tray.notificationClicked.connect(self.clicked)

    @property
    def native(self) -> bool | None:
        """True: native notifications with buttons; False: the tray; None: not known yet."""
        return self._native

    # ---- public ------------------------------------------------------------------------------

    def start(self) -> None:
        """Finds out, once, where notifications go. The probe runs on a worker thread: it
        imports dbus-fast and waits for the bus."""
        if self._started or self._closed:
            return
        self._started = True
        if sys.platform.startswith("linux") and not session_bus_possible():
            self._settle(None)
            return
        run_off_gui(self._probe, self._on_probed)

    def show(
        self,
        title: str,
        message: str,
        *,
        key: str,
        actions: Sequence[Action] = (),
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> None:
        """Shows a notification about `key` (e.g. "reminder:<id>", "task:<id>"), replacing
        the one shown for the same key. Buttons exist only natively; `timeout_ms` applies
        to the tray balloon. Until the probe answered, it waits (shown in order then)."""
        if self._closed:
            return
        item = _Pending(title, message, key, tuple(actions), timeout_ms)
        if self._native is None:
            self._pending = [p for p in self._pending if p.key != key]
            self._pending.append(item)
            self.start()
            return
        self._deliver(item)

    def withdraw(self, key: str) -> None:
        """Takes the native notification for `key` off the screen (a balloon cannot be)."""
        self._pending = [p for p in self._pending if p.key != key]
        notification_id = self._ids.pop(key, None)
        if notification_id is not None and self._notifier is not None:
            self._notifier.withdraw(notification_id)

    def shown(self, key: str) -> bool:
        """Whether the server accepted the native notification for `key` (its buttons
        answer from then on). Does not block."""
        notification_id = self._ids.get(key)
        if notification_id is None or self._notifier is None:
            return False
        return self._notifier.wait_shown(notification_id, 0)

    def close(self) -> None:
        """No more notifications; stops the notifier's thread (quitting)."""
        self._closed = True
        self._pending.clear()
        self._ids.clear()
        notifier, self._notifier = self._notifier, None
        if notifier is not None:
            notifier.close(CLOSE_TIMEOUT)

    # ---- delivery ----------------------------------------------------------------------------

    def _deliver(self, item: _Pending) -> None:
        if self._notifier is not None:
            try:
                self._show_native(self._notifier, item)
                return
            except Exception:  # e.g. desktop-notifier broken: the balloon still tells
                log.exception("native notification failed; using the tray")
        self._tray.notify(
            visible(item.title, keep_newlines=False),
            visible(item.message),
            timeout_ms=item.timeout_ms,
            key=item.key,
        )

    def _show_native(self, notifier: Notifier, item: _Pending) -> None:
        self.withdraw(item.key)
        box: list[str] = []  # the id, known once notify returns

        def on_action(action_id: str) -> None:  # the notifier's thread
            self._emit(self._actionFromNotifier, item.key, box[0] if box else "", action_id)

        def on_click() -> None:  # the notifier's thread
            self._emit(self._clickFromNotifier, item.key, box[0] if box else "")

        box.append(
            notifier.notify(item.title, item.message, list(item.actions), on_action, on_click)
        )
        self._ids[item.key] = box[0]

    @staticmethod
    def _emit(signal: Any, *args: str) -> None:
        with contextlib.suppress(RuntimeError):  # the bridge is gone (the app quit)
            signal.emit(*args)

    @Slot(str, str, str)
    def _on_action(self, key: str, notification_id: str, action_id: str) -> None:
        self._forget(key, notification_id)
        self.actionInvoked.emit(key, action_id)

    @Slot(str, str)
    def _on_click(self, key: str, notification_id: str) -> None:
        self._forget(key, notification_id)
        self.clicked.emit(key)

    def _forget(self, key: str, notification_id: str) -> None:
        if self._ids.get(key) == notification_id:
            del self._ids[key]

    # ---- the probe ---------------------------------------------------------------------------

    def _probe(self) -> Notifier | None:
        """On a worker: a notifier whose server answers, or None."""
        notifier: Notifier | None = None
        try:
            notifier = self._factory()
            if notifier.available():
                importlib.import_module("desktop_notifier")  # its first use is on the GUI
            else:
                notifier.close(CLOSE_TIMEOUT)
                notifier = None
        except Exception as exc:
            log.info("native notifications unavailable: %s", exc)
            if notifier is not None:
                with contextlib.suppress(Exception):
                    notifier.close(CLOSE_TIMEOUT)
            notifier = None
        return notifier

    def _on_probed(self, notifier: Notifier | None) -> None:
        if not isValid(self):  # the bridge was deleted meanwhile
            if notifier is not None:
                notifier.close(CLOSE_TIMEOUT)
            return
        self._settle(notifier)

    def _settle(self, notifier: Notifier | None) -> None:
        if self._closed:
            if notifier is not None:
                notifier.close(CLOSE_TIMEOUT)
            return
        self._notifier = notifier
        self._native = notifier is not None
        log.info("notifications: %s", "native" if self._native else "tray")
        pending, self._pending = self._pending, []
        for item in pending:
            self._deliver(item)
        self.availabilityKnown.emit(self._native)
