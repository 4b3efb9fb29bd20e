"""Pages built only from the settings model: General (theme, chat text size, start-up, the
send key, the step limit, when long conversations are summarised), Instructions (the
system prompt), Browser and Security."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QGroupBox,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core import autostart
from app.core.runtime import Runtime, default_system_prompt
from app.core.settings import (
    BrowserSettings,
    ConversationSettings,
    EngineSettings,
    GeneralSettings,
    SecuritySettings,
    Settings,
)
from app.ui.settings.form import FormPage
from app.ui.settings.page import Patch
from app.ui.theme import ThemeMode, apply_theme


class GeneralPage(FormPage):
    title = "General"
    subtitle = "Appearance and how the assistant behaves."

    themeChanged = Signal(str)

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(runtime, parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(16)
        self.appearance = self.add_form(layout, "Appearance", _general, ["theme", "font_size"])
        self.behaviour = self.add_form(
            layout, "Behaviour", _general, ["send_key", "start_minimized", "start_at_login"]
        )
        self.limits = self.add_form(
            layout, "Conversations", _root, ["max_steps", "max_parallel_jobs"]
        )
        group = self.limits.parentWidget()
        assert isinstance(group, QGroupBox)
        self.conversations = self.add_form(layout, group, _conversation, ["compact_after_chars"])
        self.engine = self.add_form(
            layout, "Models on this computer", _engine, ["idle_minutes", "endpoint"]
        )
        layout.addStretch(1)
        self.theme_combo = self.appearance.editor("theme", QComboBox)
        self.font_spin = self.appearance.editor("font_size", QSpinBox)
        self.send_combo = self.behaviour.editor("send_key", QComboBox)
        self.minimized_check = self.behaviour.editor("start_minimized", QCheckBox)
        self.login_check = self.behaviour.editor("start_at_login", QCheckBox)
        self.steps_spin = self.limits.editor("max_steps", QSpinBox)
        self.theme_combo.currentIndexChanged.connect(self._on_theme_changed)

    def saved_theme(self) -> ThemeMode:
        theme: ThemeMode = self.appearance.saved.theme
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
        apply_forms = super().patch()
        login = self.behaviour.changes().get("start_at_login")

        def apply(settings: Settings) -> None:
            # Runs in the save's worker thread: the entry is written first, so a failure
            # (an OSError the dialog reports) leaves settings.json unchanged too.
            if login is not None:
                autostart.set_enabled(login)
            apply_forms(settings)

        return apply


class InstructionsPage(FormPage):
    title = "Instructions"
    subtitle = "Your own instructions for the assistant, in your words."

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(runtime, parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(10)
        self.form = self.add_form(layout, None, _root, ["system_prompt"])
        layout.setStretch(0, 1)
        self.edit = self.form.editor("system_prompt", QPlainTextEdit)
        self.edit.setPlaceholderText("Empty: the built-in instructions are used.")
        self.builtin_button = QPushButton("Start from the built-in instructions")
        self.builtin_button.setAutoDefault(False)
        self.builtin_button.setToolTip("Puts the built-in instructions in the box to edit.")
        self.builtin_button.clicked.connect(self.use_builtin)
        row = QHBoxLayout()
        row.addWidget(self.builtin_button)
        row.addStretch(1)
        layout.addLayout(row)

    def use_builtin(self) -> None:
        """Fill the box with the built-in instructions (saved only if the user saves)."""
        self.edit.setPlainText(default_system_prompt())


class BrowserPage(FormPage):
    title = "Browser"
    subtitle = "The web browser the assistant uses to read and work on sites."

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(runtime, parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.form = self.add_form(layout, "Browser", _browser)
        layout.addStretch(1)


class SecurityPage(FormPage):
    title = "Security"
    subtitle = "Where Deskhand keeps API keys, tokens and passwords. Never in plain text."

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(runtime, parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.form = self.add_form(layout, "Secrets", _security)
        self.keyring_combo = self.form.editor("keyring", QComboBox)
        layout.addStretch(1)


def _general(settings: Settings) -> GeneralSettings:
    return settings.general


def _root(settings: Settings) -> Settings:
    return settings


def _conversation(settings: Settings) -> ConversationSettings:
    return settings.conversation


def _engine(settings: Settings) -> EngineSettings:
    return settings.engine


def _browser(settings: Settings) -> BrowserSettings:
    return settings.browser


def _security(settings: Settings) -> SecuritySettings:
    return settings.security


def chat_font(base: QFont, font_size: int) -> QFont:
    """The font the chat should use for `settings.general.font_size` (0: `base` as is)."""
    font = QFont(base)
    if font_size > 0:
        font.setPointSize(font_size)
    return font


def _apply_to_app(mode: ThemeMode) -> None:
    app = QApplication.instance()
    if isinstance(app, QApplication):
        apply_theme(app, mode)
