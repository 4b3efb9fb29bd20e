"""Signing in to remote MCP servers from Settings › MCP servers.

`SignInPanel` sits under the selected server's status: "Sign in…" for a server that needs
the user to sign in, "Waiting for you to finish signing in in your browser…" with Cancel
while the browser is open, and "Sign out" (after a confirmation) for a remote OAuth server
with a stored sign-in. Every call to the `McpServers` service blocks (a browser round trip,
the keyring), so each runs on a worker thread; the state a call ends with goes to the page
through `state_changed`. Tokens are never read here, only whether a sign-in is stored.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.core.mcp.manager import SIGN_IN_WAIT
from app.core.mcp.servers import McpServers, signs_in_with_browser
from app.core.mcp.status import ServerState, Status
from app.core.visible import visible
from app.ui.settings.page import in_thread, spawn
from app.ui.settings.widgets import plural, set_role

log = logging.getLogger(__name__)

NEEDS_SIGN_IN = "Needs you to sign in"
WAITING = "Waiting for you to finish signing in in your browser…"
CANCELLED = (
    "Sign-in cancelled: Deskhand stopped waiting and no longer accepts the browser's "
    "answer. You can close that browser page."
)
SIGNED_IN = "Signed in. The sign-in is kept in the system keyring."
SIGNED_OUT = "Signed out."
#: The prefix the manager gives a sign-in that did not work.
FAILED_PREFIX = "signing in did not work"

Ask = Callable[[str, str], bool]


def is_failure(error: str | None) -> bool:
    """Whether a needs-sign-in state's error is a sign-in that did not work (rather than
    the server asking for one)."""
    return (error or "").lower().startswith(FAILED_PREFIX)


def failure_text(error: str | None) -> str:
    """Why a sign-in did not work, as one sentence for the page."""
    reason = visible(error or "the server did not say why", keep_newlines=False)
    if is_failure(reason):
        return reason[0].upper() + reason[1:]
    return f"Signing in did not work: {reason}"


class SignInPanel(QWidget):
    """Sign in / Cancel / Sign out for the server the page shows (`show_server`)."""

    #: A ServerState a sign-in, a cancel or a sign-out ended with (the page shows it).
    state_changed = Signal(object)
    #: A sign-in began or stopped waiting for the browser.
    waiting_changed = Signal()

    def __init__(self, servers: McpServers, ask: Ask, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.servers = servers
        self._ask = ask
        #: How long a sign-in waits for the browser (the manager's own limit).
        self.timeout = SIGN_IN_WAIT
        self._name: str | None = None
        self._remote = False
        self._state: ServerState | None = None
        self._waiting: dict[str, asyncio.Task[None]] = {}
        self._notes: dict[str, tuple[str, str]] = {}
        self._signed_in: dict[str, bool] = {}
        #: Each shown server's URL (a stored sign-in counts only for the URL it was made for).
        self._urls: dict[str, str | None] = {}
        self._checked: tuple[str | None, Status | None] = (None, None)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._build()
        self._refresh()

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        self.note = QLabel("")
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        self.note.setWordWrap(True)
        self.note.setProperty("role", "muted")
        layout.addWidget(self.note)
        row = QHBoxLayout()
        row.setSpacing(8)
        self.sign_in_button = QPushButton("Sign in…")
        self.sign_in_button.setProperty("accent", True)
        self.sign_in_button.setToolTip("Open the server's sign-in page in your browser")
        self.sign_in_button.clicked.connect(self.start_sign_in)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop waiting for the browser")
        self.cancel_button.clicked.connect(self.cancel_sign_in)
        self.sign_out_button = QPushButton("Sign out")
        self.sign_out_button.setToolTip("Forget this server's sign-in")
        self.sign_out_button.clicked.connect(self.start_sign_out)
        for button in (self.sign_in_button, self.cancel_button, self.sign_out_button):
            row.addWidget(button)
        row.addStretch(1)
        layout.addLayout(row)

    # -- what is shown --

    def show_server(self, name: str | None, raw: dict[str, Any], state: ServerState | None) -> None:
        """The page shows `name` (None: nothing) in `state`; re-reads whether it is signed in."""
        self._name, self._state = name, state
        self._remote = name is not None and signs_in_with_browser(name, raw)
        if name is not None:
            self._urls[name] = str(raw.get("url") or "") or None
        if name is not None and state is not None and state.status is Status.READY:
            self._notes.pop(name, None)
        checked = (name, state.status if state is not None else None)
        if name is not None and self._remote and checked != self._checked:
            self._checked = checked  # read the keyring again when the server's state moves
            self._spawn(self._check_signed_in(name))
        self._refresh()

    def waiting(self, name: str) -> bool:
        return name in self._waiting

    def _refresh(self) -> None:
        name = self._name
        state = self._state
        remote = self._remote and name is not None
        waiting = remote and name in self._waiting
        needs = state is not None and state.status is Status.NEEDS_SIGN_IN
        signed = remote and self._signed_in.get(name or "", False)
        self.sign_in_button.setVisible(remote and needs and not waiting)
        self.cancel_button.setVisible(waiting)
        self.sign_out_button.setVisible(signed and not waiting)
        text, role = "", "muted"
        if waiting:
            text = WAITING
        elif remote and name in self._notes:
            text, role = self._notes[name or ""]
        elif signed and not needs:
            text = SIGNED_IN
        self.note.setText(text)
        self.note.setVisible(bool(text))
        set_role(self.note, role)
        self.setVisible(remote and (bool(text) or needs or signed))

    def _note(self, name: str, text: str, role: str = "muted") -> None:
        self._notes[name] = (text, role)
        if name == self._name:
            self._refresh()

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any] | None:
        return spawn(self._tasks, coro)

    def cancel_tasks(self) -> None:
        """Cancel every task this panel started (a sign-in's wait included: its worker
        thread still waits for the manager, and its answer is dropped)."""
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()
        if self._waiting:
            self._waiting.clear()
            self.waiting_changed.emit()
        self._checked = (None, None)
        self._refresh()

    # -- the service, on worker threads --

    def _has_manager(self) -> bool:
        return self.servers.manager_running

    async def _check_signed_in(self, name: str) -> None:
        try:
            signed = await in_thread(self.servers.signed_in, name, self._urls.get(name))
        except Exception as exc:
            log.warning("could not read the sign-in of MCP server %s: %s", name, exc)
            signed = False
        self._signed_in[name] = signed
        if name == self._name:
            self._refresh()

    # -- sign in --

    def start_sign_in(self) -> None:
        """The user pressed Sign in…: the browser opens (from the MCP thread) and this waits
        for the answer on a worker thread."""
        name = self._name
        if name is None or name in self._waiting or not self._has_manager():
            return
        self._notes.pop(name, None)
        task = self._spawn(self._sign_in(name))
        if task is not None:
            self._waiting[name] = task
        self._refresh()
        self.waiting_changed.emit()

    async def _sign_in(self, name: str) -> None:
        try:
            state = await in_thread(self.servers.sign_in, name, self.timeout)
        except asyncio.CancelledError:
            raise
        except TimeoutError:  # the manager gave up waiting for its own loop
            self._stop_waiting(name)
            self._timed_out(name)
            return
        except Exception as exc:
            log.warning("signing in to MCP server %s failed: %s", name, exc)
            self._stop_waiting(name)
            self._note(name, failure_text(str(exc)), "error")
            return
        self._stop_waiting(name)
        self._finished(name, state)

    def _stop_waiting(self, name: str) -> asyncio.Task[None] | None:
        task = self._waiting.pop(name, None)
        if task is not None:
            self.waiting_changed.emit()
        return task

    def _finished(self, name: str, state: ServerState | None) -> None:
        if state is None:
            self._note(name, "This server is no longer in mcp.json.", "error")
            return
        if state.status is Status.READY:
            self._notes.pop(name, None)
            self._spawn(self._check_signed_in(name))
        elif state.status is Status.NEEDS_SIGN_IN:
            self._notes.pop(name, None)  # its error says why; the page shows it
        elif state.status is Status.STARTING:  # still waiting for the browser: time is up
            self._timed_out(name)
        self.state_changed.emit(state)
        if name == self._name:
            self._refresh()

    def _timed_out(self, name: str) -> None:
        """The browser never answered: say so and stop the attempt (Sign in… comes back)."""
        minutes = max(1, round(self.timeout / 60))
        self._note(
            name,
            f"You did not finish signing in within {plural(minutes, 'minute')}. "
            "Press Sign in… to try again.",
            "error",
        )
        self._spawn(self._abandon(name))

    def cancel_sign_in(self) -> None:
        """Stop waiting, and stop the attempt: the server reconnects without the sign-in, so
        the browser's answer is no longer taken and Sign in… is offered again."""
        name = self._name
        task = self._stop_waiting(name) if name is not None else None
        if name is None or task is None:
            return
        task.cancel()  # the worker thread still waits for the manager; its answer is dropped
        self._note(name, CANCELLED)
        self._spawn(self._abandon(name))

    async def _abandon(self, name: str) -> None:
        try:
            state = await in_thread(self.servers.restart, name)
        except Exception as exc:
            log.warning("could not restart MCP server %s: %s", name, exc)
            return
        if state is not None:
            self.state_changed.emit(state)

    # -- sign out --

    def start_sign_out(self) -> None:
        """Asks first; then forgets the stored sign-in (on a worker thread)."""
        name = self._name
        if name is None or not self._ask(
            "Sign out",
            f"Sign out of “{name}”? Deskhand forgets this sign-in and reconnects; the "
            "server's tools are unavailable until you sign in again.",
        ):
            return
        self._spawn(self._sign_out(name))

    async def _sign_out(self, name: str) -> None:
        self.sign_out_button.setEnabled(False)
        try:
            state = await in_thread(self.servers.sign_out, name)
        except Exception as exc:
            log.warning("signing out of MCP server %s failed: %s", name, exc)
            self._note(name, f"Could not sign out: {visible(str(exc))}", "error")
            return
        finally:
            self.sign_out_button.setEnabled(True)
        self._signed_in[name] = False
        self._note(name, SIGNED_OUT)
        if state is not None:
            self.state_changed.emit(state)
