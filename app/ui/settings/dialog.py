"""The settings window: a page list on the left, the pages, and Save/Cancel.

Saving asks every page for a patch of what changed, stores API keys in the keyring and
applies the patches through `SettingsStore.update` — both in a worker thread — then
replaces `runtime.settings`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFrame,
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)
from qasync import asyncSlot

from app.core.runtime import Runtime
from app.core.secrets import SecretStoreError
from app.core.settings import SecretInSettingsError, Settings
from app.ui.settings.general_page import GeneralPage
from app.ui.settings.integrations_page import IntegrationsPage
from app.ui.settings.mcp_page import McpPage
from app.ui.settings.memory_page import MemoryPage
from app.ui.settings.page import SettingsPage, in_thread
from app.ui.settings.providers_page import ProvidersPage
from app.ui.settings.rules_page import RulesPage
from app.ui.settings.skills_page import SkillsPage
from app.ui.settings.sources_page import SourcesPage
from app.ui.settings.terminal_page import TerminalPage
from app.ui.settings.tools_page import ToolsPage
from app.ui.settings.widgets import muted_label, role_label

PageKey = Literal[
    "providers",
    "integrations",
    "tools",
    "terminal",
    "rules",
    "mcp",
    "sources",
    "skills",
    "memory",
    "general",
]
PAGE_KEYS: tuple[PageKey, ...] = (
    "providers",
    "integrations",
    "tools",
    "terminal",
    "rules",
    "mcp",
    "sources",
    "skills",
    "memory",
    "general",
)
NAV_TITLES = {
    "providers": "Providers",
    "integrations": "Integrations",
    "tools": "Tools",
    "terminal": "Terminal",
    "rules": "Rules",
    "mcp": "MCP servers",
    "sources": "Sources",
    "skills": "Skills",
    "memory": "Memory",
    "general": "General",
}


class SettingsDialog(QDialog):
    """Settings in pages. Emits `settingsChanged` after a successful save; the caller
    re-reads `runtime.settings` (already replaced with what was saved)."""

    settingsChanged = Signal()

    def __init__(
        self, runtime: Runtime, parent: QWidget | None = None, page: str = "providers"
    ) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self.setWindowTitle("Deskhand settings")
        self.setObjectName("settingsDialog")
        self.resize(940, 620)
        self.setMinimumSize(760, 520)
        self.providers = ProvidersPage(runtime)
        self.integrations = IntegrationsPage(runtime)
        self.tools = ToolsPage(runtime)
        self.terminal = TerminalPage(runtime)
        self.rules = RulesPage(runtime)
        self.mcp = McpPage(runtime)
        self.sources = SourcesPage(runtime)
        self.skills = SkillsPage(runtime)
        self.memory = MemoryPage(runtime)
        self.general = GeneralPage(runtime)
        self.pages: dict[PageKey, SettingsPage] = {
            "providers": self.providers,
            "integrations": self.integrations,
            "tools": self.tools,
            "terminal": self.terminal,
            "rules": self.rules,
            "mcp": self.mcp,
            "sources": self.sources,
            "skills": self.skills,
            "memory": self.memory,
            "general": self.general,
        }
        self._save_task: asyncio.Task[Any] | None = None
        self._build()
        self.show_page(page)
        #: Reading which accounts have a key stored (a task on the loop; tests await it).
        self.key_states: asyncio.Task[None] = self.providers.load_key_states()

    def _build(self) -> None:
        root = QHBoxLayout(self)
        root.setContentsMargins(0, 0, 0, 0)
        root.setSpacing(0)

        side = QFrame()
        side.setObjectName("settingsSide")
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(12, 18, 12, 12)
        side_layout.setSpacing(8)
        caption = role_label("Settings", "heading")
        caption.setContentsMargins(10, 0, 0, 6)
        side_layout.addWidget(caption)
        self.nav = QListWidget()
        self.nav.setObjectName("settingsNav")
        self.nav.setFixedWidth(168)
        self.nav.setSpacing(1)
        self.nav.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        for key in PAGE_KEYS:
            item = QListWidgetItem(NAV_TITLES[key])
            item.setData(Qt.ItemDataRole.UserRole, key)
            item.setSizeHint(QSize(0, 36))
            self.nav.addItem(item)
        side_layout.addWidget(self.nav, 1)
        root.addWidget(side)

        main = QVBoxLayout()
        main.setContentsMargins(24, 18, 24, 16)
        main.setSpacing(14)
        self.stack = QStackedWidget()
        for key in PAGE_KEYS:
            self.stack.addWidget(_with_header(self.pages[key]))
        self.nav.currentRowChanged.connect(self.stack.setCurrentIndex)
        main.addWidget(self.stack, 1)

        bottom = QHBoxLayout()
        bottom.setSpacing(8)
        self.message = role_label("", "error", wrap=True)
        bottom.addWidget(self.message, 1)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setAutoDefault(False)
        self.cancel_button.clicked.connect(self.reject)
        self.save_button = QPushButton("Save")
        self.save_button.setProperty("accent", True)
        self.save_button.setDefault(True)
        self.save_button.clicked.connect(self._on_save_clicked)
        bottom.addWidget(self.cancel_button)
        bottom.addWidget(self.save_button)
        main.addLayout(bottom)
        root.addLayout(main, 1)

    def show_page(self, page: str) -> None:
        key = page if page in PAGE_KEYS else "providers"
        self.nav.setCurrentRow(PAGE_KEYS.index(key))  # type: ignore[arg-type]

    def current_page(self) -> PageKey:
        return PAGE_KEYS[self.nav.currentRow()]

    # -- saving --

    def _problem(self) -> tuple[PageKey, str] | None:
        for key, page in self.pages.items():
            problem = page.problem()
            if problem:
                return key, problem
        return None

    async def save(self) -> bool:
        """Validate, store keys, write settings.json; True when everything was saved."""
        found = self._problem()
        if found is not None:
            key, problem = found
            self.show_page(key)
            self._show_message(f"Nothing was saved. {problem}")
            return False
        patches = [page.patch() for page in self.pages.values()]

        def apply(settings: Settings) -> None:
            for patch in patches:
                patch(settings)

        self._show_message("")
        self.save_button.setEnabled(False)
        try:
            await self.providers.store_keys()
            saved = await in_thread(self.runtime.settings_store.update, apply)
            await in_thread(self._commit_rules)
        except (SecretStoreError, SecretInSettingsError) as exc:
            self._show_message(f"Nothing was saved. {exc}")
            return False
        except OSError as exc:
            self._show_message(f"Could not write the settings or rules file: {exc}")
            return False
        finally:
            self.save_button.setEnabled(True)
        self.runtime.settings = saved
        for page in self.pages.values():
            page.mark_saved(saved)
        self.settingsChanged.emit()
        return True

    def _commit_rules(self) -> None:
        """(worker thread) Pages whose choices are approval rules write them to rules.json,
        after settings.json was saved."""
        for page in self.pages.values():
            commit = getattr(page, "commit", None)
            if callable(commit):
                commit()

    @asyncSlot()
    async def _on_save_clicked(self) -> None:
        self._save_task = asyncio.current_task()
        try:
            if await self.save():
                self.accept()
        finally:
            self._save_task = None

    def _show_message(self, text: str) -> None:
        self.message.setText(text)

    def reject(self) -> None:
        """Cancel: undo a theme previewed on the General page."""
        self.general.revert_theme_preview()
        super().reject()

    def done(self, result: int) -> None:
        if self._save_task is None:  # never cut a save short half-way
            self.providers.cancel_tasks()
            self.integrations.cancel_tasks()
            self.skills.cancel_tasks()
            self.terminal.cancel_tasks()
        super().done(result)


def _with_header(page: SettingsPage) -> QWidget:
    box = QWidget()
    layout = QVBoxLayout(box)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(4)
    layout.addWidget(role_label(page.title, "heading"))
    layout.addWidget(muted_label(page.subtitle))
    layout.addSpacing(12)
    layout.addWidget(page, 1)
    return box
