"""The "Terminal" page: whether commands run in the OS sandbox, whether this system has one
(probed off the GUI thread; "Check again" probes anew), and a command's default time limit.

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
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core.runtime import Runtime
from app.core.settings import Settings
from app.core.visible import visible
from app.ui.settings.page import Patch, SettingsPage, in_thread, spawn
from app.ui.settings.widgets import (
    ROW_HEIGHT,
    form_label,
    form_layout,
    muted_label,
    natural_width,
    role_label,
    set_role,
)

if TYPE_CHECKING:
    from tools.shell.sandbox import SandboxInfo

SandboxChoice = Literal["auto", "off"]

CHOICES: dict[SandboxChoice, str] = {
    "auto": "Sandboxed where this system allows (recommended)",
    "off": "Never sandboxed — every command asks",
}
EXPLANATION = (
    "In the sandbox a command can change files only in the folders you allowed "
    "(Settings\u00a0→\u00a0Tools); the rest of the system is read-only, your keys and "
    "Deskhand's own data are hidden from it, and it has no network unless a rule allows it. "
    "A command that runs without the sandbox always asks you first."
)
CHECKING = "Checking whether this system has a sandbox…"
TIMEOUT_RANGE = (1, 3600)
LABEL_WIDTH = 130  # as on the General page


def status_text(info: SandboxInfo) -> str:
    """The probe's result in one line: what sandbox there is, or why there is none."""
    if info.available:
        return f"Sandbox available: {info.kind}"
    return f"No sandbox on this system: {visible(info.why, keep_newlines=False)}"


def run_probe(refresh: bool) -> SandboxInfo:
    """(worker thread) Run the platform's sandbox probe; cached unless `refresh`."""
    from tools.shell.sandbox import probe

    return probe(refresh=refresh)


class TerminalPage(SettingsPage):
    title = "Terminal"
    subtitle = "How the assistant runs commands and code on this computer."

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self._saved: dict[str, Any] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._probed = False
        #: The latest probe result shown (None until one finished).
        self.info: SandboxInfo | None = None
        self._build()
        self.load(runtime.settings)

    # -- building --

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(16)
        layout.addWidget(self._sandbox_group())
        layout.addWidget(self._limits_group())
        layout.addStretch(1)

    def _sandbox_group(self) -> QGroupBox:
        group = QGroupBox("Sandbox")
        form = _group_form(group)
        self.choice_combo = QComboBox()
        for key, text in CHOICES.items():
            self.choice_combo.addItem(text, key)
        form.addRow(form_label("Run commands", LABEL_WIDTH), natural_width(self.choice_combo))
        self.explanation = muted_label(EXPLANATION)
        form.addRow(QWidget(), self.explanation)

        self.status = role_label(CHECKING, "muted", wrap=True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # the probe quotes a program
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.check_button = QPushButton("Check again")
        self.check_button.setAutoDefault(False)
        self.check_button.setToolTip("Run the sandbox once more to see whether it works now.")
        self.check_button.clicked.connect(self.check_again)
        status_label = form_label("This system", LABEL_WIDTH)
        status_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        # both level with the button's text: a wrapped status grows downwards
        top = max(0, (ROW_HEIGHT - self.status.fontMetrics().height()) // 2)
        status_label.setContentsMargins(0, top, 0, 0)
        self.status.setContentsMargins(0, top, 0, 0)
        form.addRow(status_label, _status_row(self.status, self.check_button))
        return group

    def _limits_group(self) -> QGroupBox:
        group = QGroupBox("Limits")
        form = _group_form(group)
        self.timeout_spin = QSpinBox()
        self.timeout_spin.setRange(*TIMEOUT_RANGE)
        self.timeout_spin.setSuffix(" s")
        self.timeout_spin.setMinimumWidth(100)
        self.timeout_spin.lineEdit().setTextMargins(4, 0, 0, 0)
        row = QWidget()
        line = QHBoxLayout(row)
        line.setContentsMargins(0, 0, 0, 0)
        line.setSpacing(10)
        line.addWidget(self.timeout_spin)
        note = "before a command is stopped, unless a call sets its own"
        line.addWidget(muted_label(note, wrap=True), 1)
        form.addRow(form_label("Time limit", LABEL_WIDTH), row)
        return group

    # -- settings --

    def load(self, settings: Settings) -> None:
        shell = settings.shell
        self.choice_combo.setCurrentIndex(self.choice_combo.findData(shell.sandbox))
        self.timeout_spin.setValue(shell.timeout)
        self._saved = self._values()

    def choice(self) -> SandboxChoice:
        choice: SandboxChoice = self.choice_combo.currentData()
        return choice

    def _values(self) -> dict[str, Any]:
        return {"sandbox": self.choice(), "timeout": self.timeout_spin.value()}

    def patch(self) -> Patch:
        changed = {k: v for k, v in self._values().items() if v != self._saved.get(k)}

        def apply(settings: Settings) -> None:
            for key, value in changed.items():
                setattr(settings.shell, key, value)

        return apply

    def mark_saved(self, settings: Settings) -> None:
        self._saved = self._values()

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


def _group_form(group: QWidget) -> QFormLayout:
    return form_layout(group, margins=(14, 16, 14, 12), spacing=(16, 12))


def _status_row(status: QLabel, button: QPushButton) -> QWidget:
    """The status stretches and wraps; the button keeps its width, level with line one."""
    box = QWidget()
    row = QHBoxLayout(box)
    row.setContentsMargins(0, 0, 0, 0)
    row.setSpacing(12)
    row.addWidget(status, 1, Qt.AlignmentFlag.AlignTop)
    row.addWidget(button, 0, Qt.AlignmentFlag.AlignTop)
    return box
