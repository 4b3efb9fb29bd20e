"""Native desktop notifications with action buttons, over `desktop-notifier`.

Freedesktop notifications over D-Bus on Linux, the notification centre on macOS, toasts on
Windows. Everything shown comes from tools, servers or the model and is untrusted: it is
sent as plain text (control characters made visible, markup escaped), and actions only
ever run from the user's click on a button the app itself chose.

Callbacks run on the notifier's asyncio loop thread; a Qt caller must hand them over to its
own thread (a queued signal) before touching widgets.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import sys
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from app.core.visible import visible

log = logging.getLogger(__name__)

_BUS_NAME = "org.freedesktop.Notifications"
_OBJECT_PATH = "/org/freedesktop/Notifications"
PROBE_TIMEOUT = 2.0
APPROVAL_TEXT_LIMIT = 300

ALLOW_ONCE = "allow_once"
DENY = "deny"
REVIEW = "review"


@dataclass(frozen=True)
class Action:
    """A button on a notification: `id` comes back to `on_action`, `label` is shown."""

    id: str
    label: str


def plain_text(text: str) -> str:
    """Untrusted text for a notification body: controls visible, markup characters escaped
    (freedesktop servers with `body-markup` interpret `<b>`, `<a href>`, `&amp;`)."""
    return html.escape(visible(text), quote=False)


def approval_actions(
    summary: str, arguments_text: str, limit: int = APPROVAL_TEXT_LIMIT
) -> list[Action]:
    """Allow once / Deny only when the summary and the FULL arguments fit the notification
    as plain text (so the user sees everything they approve); else Review… / Deny."""
    shown = visible(summary) + "\n" + visible(arguments_text)
    if len(shown) <= limit:
        return [Action(ALLOW_ONCE, "Allow once"), Action(DENY, "Deny")]
    return [Action(REVIEW, "Review…"), Action(DENY, "Deny")]


class Notifier:
    """Sends notifications from any thread. Runs its own asyncio loop on a daemon thread,
    or uses `loop` (which must be running, e.g. the Qt main loop under qasync)."""

    def __init__(
        self, app_name: str = "Deskhand", loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        self._app_name = app_name
        self._thread: threading.Thread | None = None
        if loop is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=loop.run_forever, name="deskhand-notify", daemon=True
            )
            self._thread.start()
        self._loop = loop
        self._lock: asyncio.Lock | None = None
        self._backend: Any = None
        self._shown: dict[str, threading.Event] = {}

    # -- public, any thread ---------------------------------------------------------------

    def notify(
        self,
        title: str,
        message: str,
        actions: list[Action],
        on_action: Callable[[str], None],
        on_click: Callable[[], None] | None = None,
    ) -> str:
        """Shows a notification; returns its id at once (sending happens on the loop).
        `on_action(action.id)` runs when a button is pressed, `on_click()` when the body is."""
        from desktop_notifier import Button, Notification

        notification_id = uuid.uuid4().hex
        shown = self._shown[notification_id] = threading.Event()

        def forget() -> None:
            self._shown.pop(notification_id, None)

        buttons = tuple(
            Button(
                title=visible(a.label, keep_newlines=False),
                identifier=a.id,
                on_pressed=_guarded(forget, on_action, a.id),
            )
            for a in actions
        )
        notification = Notification(
            title=visible(title, keep_newlines=False),
            message=plain_text(message),
            buttons=buttons,
            on_dispatched=shown.set,
            on_clicked=_guarded(forget, on_click) if on_click else forget,
            on_dismissed=forget,
            identifier=notification_id,
        )
        self._submit(self._send(notification, shown))
        return notification_id

    def wait_shown(self, notification_id: str, timeout: float = PROBE_TIMEOUT) -> bool:
        """Whether the server accepted the notification within `timeout` (its buttons
        answer only from then on); False too once it was answered, closed or withdrawn.
        Blocks; never call it on the loop."""
        event = self._shown.get(notification_id)
        return event is not None and event.wait(timeout)

    def withdraw(self, notification_id: str) -> None:
        """Removes a notification if it is still shown; no callback runs for it."""
        self._shown.pop(notification_id, None)
        self._submit(self._withdraw(notification_id))

    def available(self, timeout: float = PROBE_TIMEOUT) -> bool:
        """Whether a notification server answers (Linux: on the session bus). False means
        the caller falls back to the tray balloon. Blocks; never call it on the loop."""
        if self._on_loop_thread():
            raise RuntimeError("Notifier.available() would block its own loop")
        future = asyncio.run_coroutine_threadsafe(self.probe(timeout), self._loop)
        try:
            return future.result(timeout + 1.0)
        except Exception:
            return False

    async def probe(self, timeout: float = PROBE_TIMEOUT) -> bool:
        """`available()` for callers already on an event loop."""
        if not sys.platform.startswith("linux"):
            # the notification centre (macOS: asks the user once; an unsigned app is refused)
            # or toasts (Windows); no permission means the tray
            try:
                return bool(await self._notifier().request_authorisation())
            except Exception as exc:
                log.info("native notifications not allowed: %s", exc)
                return False
        try:
            return await asyncio.wait_for(_server_answers(), timeout)
        except Exception as exc:  # no bus, no server, timeout: all mean "not available"
            log.info("no notification server: %s", exc)
            return False

    def close(self, timeout: float = 5.0) -> None:
        """Finishes what was submitted, then stops the loop this notifier started (not a
        loop it was given)."""
        if self._thread is None:
            return
        if not self._on_loop_thread():
            drained = asyncio.run_coroutine_threadsafe(self._drain(), self._loop)
            with contextlib.suppress(Exception):
                drained.result(timeout)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():  # an unclosed loop warns when it is collected
            self._loop.close()

    # -- on the loop ----------------------------------------------------------------------

    async def _send(self, notification: Any, shown: threading.Event) -> None:
        async with self._serial():
            # desktop-notifier logs and swallows a failed send: then it was never shown.
            await self._notifier().send_notification(notification)
            if not shown.is_set():
                self._shown.pop(notification.identifier, None)

    async def _withdraw(self, notification_id: str) -> None:
        async with self._serial():
            with contextlib.suppress(LookupError):  # already closed by the user or server
                await self._notifier().clear(notification_id)

    async def _drain(self) -> None:
        """Returns once every send and withdraw submitted before it is done (FIFO lock)."""
        async with self._serial():
            pass

    def _notifier(self) -> Any:
        if self._backend is None:
            from desktop_notifier import DesktopNotifier

            self._backend = DesktopNotifier(app_name=self._app_name, app_icon=None)
        return self._backend

    def _serial(self) -> asyncio.Lock:
        """One send or withdraw at a time, so a withdraw never overtakes its send."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def _submit(self, coro: Any) -> None:
        future: Future[None] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        future.add_done_callback(_log_failure)

    def _on_loop_thread(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False


async def _server_answers() -> bool:
    from dbus_fast import Message, MessageType
    from dbus_fast.aio import MessageBus

    bus = await MessageBus().connect()
    try:
        reply = await bus.call(
            Message(
                destination=_BUS_NAME,
                path=_OBJECT_PATH,
                interface=_BUS_NAME,
                member="GetServerInformation",
            )
        )
        return reply is not None and reply.message_type == MessageType.METHOD_RETURN
    finally:
        bus.disconnect()


def _guarded(
    forget: Callable[[], None], callback: Callable[..., None], *args: Any
) -> Callable[[], None]:
    """Forgets the notification, then runs the callback; its exceptions are logged, not
    raised into the D-Bus dispatcher."""

    def run() -> None:
        forget()
        try:
            callback(*args)
        except Exception:
            log.exception("notification callback failed")

    return run


def _log_failure(future: Future[None]) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.warning("notification failed: %s", exc)
