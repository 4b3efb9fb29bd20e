"""The "Terminal" page: whether commands run in the OS sandbox and a command's default time
limit (both built from the settings model), and whether this system has a sandbox (probed off
the GUI thread; "Check again" probes anew).

`tools.shell.sandbox` is imported only inside the probe, so opening the settings window
neither imports it nor runs bubblewrap until this page is shown."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Literal

from PySide6.QtCore import Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core.runtime import Runtime
from app.core.settings import Settings, ShellSettings
from app.core.visible import visible
from app.ui.settings.form import FormPage, SettingsForm
from app.ui.settings.page import in_thread, spawn
from app.ui.settings.widgets import ROW_HEIGHT, role_label, set_role

if TYPE_CHECKING:
    from tools.shell.sandbox import SandboxInfo

SandboxChoice = Literal["auto", "off"]

CHECKING = "Checking whether this system has a sandbox…"


def status_text(info: SandboxInfo) -> str:
    """The probe's result in one line: what sandbox there is, or why there is none."""
    if info.available:
        return f"Sandbox available: {info.kind}"
    return f"No sandbox on this system: {visible(info.why, keep_newlines=False)}"


def run_probe(refresh: bool) -> SandboxInfo:
    """(worker thread) Run the platform's sandbox probe; cached unless `refresh`."""
    from tools.shell.sandbox import probe

    return probe(refresh=refresh)


class TerminalPage(FormPage):
    title = "Terminal"
    subtitle = "How the assistant runs commands and code on this computer."

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(runtime, parent)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._probed = False
        #: The latest probe result shown (None until one finished).
        self.info: SandboxInfo | None = None
        self._build()

    # -- building --

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(16)
        self.sandbox_form = self.add_form(layout, "Sandbox", _shell, ["sandbox"])
        self.limits_form = self.add_form(layout, "Limits", _shell, ["timeout"])
        self.choice_combo = self.sandbox_form.editor("sandbox", QComboBox)
        self.timeout_spin = self.limits_form.editor("timeout", QSpinBox)
        self._add_status(self.sandbox_form)
        layout.addStretch(1)

    def _add_status(self, form: SettingsForm[ShellSettings]) -> None:
        self.status = role_label(CHECKING, "muted", wrap=True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # the probe quotes a program
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.check_button = QPushButton("Check again")
        self.check_button.setAutoDefault(False)
        self.check_button.setToolTip("Run the sandbox once more to see whether it works now.")
        self.check_button.clicked.connect(self.check_again)
        status_label = form.add_row("This system", _status_row(self.status, self.check_button))
        status_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        # both level with the button's text: a wrapped status grows downwards
        top = max(0, (ROW_HEIGHT - self.status.fontMetrics().height()) // 2)
        status_label.setContentsMargins(0, top, 0, 0)
        self.status.setContentsMargins(0, top, 0, 0)

    # -- settings --

    def choice(self) -> SandboxChoice:
        choice: SandboxChoice = self.choice_combo.currentData()
        return choice

    # -- the probe --

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._probed:
            self._probed = True
            self._spawn(self.refresh_status(refresh=False))

    def check_again(self) -> None:
        """Probe the sandbox anew (off the GUI thread) and show what it says."""
        self._spawn(self.refresh_status(refresh=True))

    async def refresh_status(self, refresh: bool) -> SandboxInfo:
        """Run the probe in a worker thread, then show its result."""
        self.check_button.setEnabled(False)
        self.status.setText(CHECKING)
        set_role(self.status, "muted")
        try:
            info = await in_thread(run_probe, refresh)
        finally:
            self.check_button.setEnabled(True)
        self.info = info
        self.status.setText(status_text(info))
        set_role(self.status, "ok" if info.available else "error")
        return info

    def pending(self) -> set[asyncio.Task[Any]]:
        """Probes still running (tests await them)."""
        return set(self._tasks)

    def cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        spawn(self._tasks, coro)


def _shell(settings: Settings) -> ShellSettings:
    return settings.shell


def _status_row(status: QLabel, button: QPushButton) -> QWidget:
    """The status stretches and wraps; the button keeps its width, level with line one."""
    box = QWidget()
    row = QHBoxLayout(box)
    row.setContentsMargins(0, 0, 0, 0)
    row.setSpacing(12)
    row.addWidget(status, 1, Qt.AlignmentFlag.AlignTop)
    row.addWidget(button, 0, Qt.AlignmentFlag.AlignTop)
    return box
