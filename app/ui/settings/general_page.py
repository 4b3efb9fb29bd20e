"""The "General" page: theme, start-up, the send key and the step limit."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core import autostart
from app.core.runtime import Runtime
from app.core.settings import Settings
from app.ui.settings.page import Patch, SettingsPage
from app.ui.settings.widgets import ROW_HEIGHT, form_label, form_layout, muted_label, natural_width
from app.ui.theme import ThemeMode, apply_theme

LABEL_WIDTH = 130
THEMES: dict[ThemeMode, str] = {"system": "Follow system", "light": "Light", "dark": "Dark"}
SEND_KEYS = {"enter": "Enter (Shift+Enter for a new line)", "ctrl_enter": "Ctrl+Enter"}


class GeneralPage(SettingsPage):
    title = "General"
    subtitle = "Appearance and how the assistant behaves."

    themeChanged = Signal(str)

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self._saved: dict[str, Any] = {}
        self._build()
        self.load(runtime.settings)

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(16)

        look = QGroupBox("Appearance")
        form = _group_form(look)
        self.theme_combo = QComboBox()
        for mode, text in THEMES.items():
            self.theme_combo.addItem(text, mode)
        self.theme_combo.currentIndexChanged.connect(self._on_theme_changed)
        form.addRow(form_label("Theme", LABEL_WIDTH), natural_width(self.theme_combo))
        layout.addWidget(look)

        behaviour = QGroupBox("Behaviour")
        form = _group_form(behaviour)
        self.minimized_check = QCheckBox("Start minimized to the tray")
        self.minimized_check.setMinimumHeight(ROW_HEIGHT)
        self.login_check = QCheckBox("Start Deskhand at login")
        self.login_check.setMinimumHeight(ROW_HEIGHT)
        self.login_check.setToolTip(
            "Adds Deskhand to the programs your desktop starts when you log in, "
            "so reminders fire even if you never open it."
        )
        startup = QWidget()
        column = QVBoxLayout(startup)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(self.minimized_check)
        column.addWidget(self.login_check)
        startup_label = form_label("Start-up", LABEL_WIDTH)
        startup_label.setFixedHeight(ROW_HEIGHT)  # beside the first check box, not between
        form.addRow(startup_label, startup)
        self.send_combo = QComboBox()
        for key, text in SEND_KEYS.items():
            self.send_combo.addItem(text, key)
        form.addRow(form_label("Send message with", LABEL_WIDTH), natural_width(self.send_combo))
        self.steps_spin = QSpinBox()
        self.steps_spin.setRange(1, 200)
        self.steps_spin.setMinimumWidth(90)
        self.steps_spin.lineEdit().setTextMargins(4, 0, 0, 0)
        steps = QWidget()
        row = QHBoxLayout(steps)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(10)
        row.addWidget(self.steps_spin)
        row.addWidget(muted_label("model calls per answer before the assistant stops", wrap=False))
        row.addStretch(1)
        form.addRow(form_label("Max steps", LABEL_WIDTH), steps)
        layout.addWidget(behaviour)
        layout.addStretch(1)

    def load(self, settings: Settings) -> None:
        g = settings.general
        self.theme_combo.blockSignals(True)
        self.theme_combo.setCurrentIndex(self.theme_combo.findData(g.theme))
        self.theme_combo.blockSignals(False)
        self.minimized_check.setChecked(g.start_minimized)
        self.login_check.setChecked(g.start_at_login)
        self.send_combo.setCurrentIndex(self.send_combo.findData(g.send_key))
        self.steps_spin.setValue(settings.max_steps)
        self._saved = self._values()

    def _values(self) -> dict[str, Any]:
        return {
            "theme": self.theme_combo.currentData(),
            "start_minimized": self.minimized_check.isChecked(),
            "start_at_login": self.login_check.isChecked(),
            "send_key": self.send_combo.currentData(),
            "max_steps": self.steps_spin.value(),
        }

    def saved_theme(self) -> ThemeMode:
        theme: ThemeMode = self._saved["theme"]
        return theme

    def _on_theme_changed(self, _: int) -> None:
        mode: ThemeMode = self.theme_combo.currentData()
        _apply_to_app(mode)
        self.themeChanged.emit(mode)

    def revert_theme_preview(self) -> None:
        """Put the saved theme back if the combo box is previewing another one."""
        if self.theme_combo.currentData() != self.saved_theme():
            _apply_to_app(self.saved_theme())

    def patch(self) -> Patch:
        values = self._values()
        changed = {k: v for k, v in values.items() if v != self._saved.get(k)}

        def apply(settings: Settings) -> None:
            # Runs in the save's worker thread: the entry is written first, so a failure
            # (an OSError the dialog reports) leaves settings.json unchanged too.
            if "start_at_login" in changed:
                autostart.set_enabled(changed["start_at_login"])
            for key, value in changed.items():
                if key == "max_steps":
                    settings.max_steps = value
                else:
                    setattr(settings.general, key, value)

        return apply

    def mark_saved(self, settings: Settings) -> None:
        self._saved = self._values()


def _group_form(group: QWidget) -> QFormLayout:
    return form_layout(group, margins=(14, 16, 14, 12), spacing=(16, 12))


def _apply_to_app(mode: ThemeMode) -> None:
    app = QApplication.instance()
    if isinstance(app, QApplication):
        apply_theme(app, mode)
