"""The "Skills" page: the skills found in <home>/skills and the extra skill folders, each
with a check box (unchecked: listed in `settings.skills.disabled` on Save), a button that
opens the skills folder, and import of a skill folder or a .zip into <home>/skills.

The import itself (checks, copy, extraction) is `app.core.skill_import`, run in a worker
thread; listing the skills is a quick folder scan.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)
from qasync import asyncSlot

from app.core.runtime import Runtime
from app.core.settings import Settings
from app.core.skill_import import IMPORT_ERRORS, import_skill, make_skills_folder
from app.core.skills import SKILL_FILE, Skill, SkillLibrary
from app.ui.settings.page import Patch, SettingsPage, in_thread
from app.ui.settings.widgets import muted_label, plural, role_label, set_role

NAME_ROLE = Qt.ItemDataRole.UserRole


# ---- choosing what to import (tests replace these) ----------------------------------------


def choose_folder(parent: QWidget) -> str:
    return QFileDialog.getExistingDirectory(parent, "Import a skill folder")


def choose_zip(parent: QWidget) -> str:
    path, _ = QFileDialog.getOpenFileName(parent, "Import a skill zip", "", "Zip files (*.zip)")
    return path


class SkillsPage(SettingsPage):
    title = "Skills"
    subtitle = (
        "Instructions the assistant can load for particular tasks. Unchecked skills are "
        "not offered to the assistant."
    )

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self._saved: list[str] = list(runtime.settings.skills.disabled)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._build()
        self.reload()

    @property
    def skills_dir(self) -> Path:
        return Path(self.runtime.home) / "skills"

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(10)
        self.list = QListWidget()
        self.list.setObjectName("skillList")
        self.list.setWordWrap(True)
        self.list.setSpacing(2)
        layout.addWidget(self.list, 1)
        self.empty_label = muted_label(
            f"No skills yet. A skill is a folder with a {SKILL_FILE}; put it in "
            f"{self.skills_dir} or import one."
        )
        layout.addWidget(self.empty_label)

        row = QHBoxLayout()
        row.setSpacing(8)
        self.open_button = QPushButton("Open skills folder")
        self.import_folder_button = QPushButton("Import folder…")
        self.import_zip_button = QPushButton("Import zip…")
        self.refresh_button = QPushButton("Refresh")
        for button in (self.open_button, self.import_folder_button, self.import_zip_button):
            button.setAutoDefault(False)
            row.addWidget(button)
        row.addStretch(1)
        self.refresh_button.setAutoDefault(False)
        row.addWidget(self.refresh_button)
        layout.addLayout(row)
        self.status = role_label("", "muted", wrap=True)
        layout.addWidget(self.status)

        self.open_button.clicked.connect(self.open_folder)
        self.refresh_button.clicked.connect(self.reload)
        self.import_folder_button.clicked.connect(self._on_import_folder)
        self.import_zip_button.clicked.connect(self._on_import_zip)

    # -- listing --

    def _all_skills(self) -> list[Skill]:
        library = SkillLibrary.from_settings(Path(self.runtime.home), self.runtime.settings)
        library.disabled = frozenset()  # list them all; the check box says which are off
        return library.discover()

    def reload(self) -> None:
        """Scan the skill folders again, keeping the check boxes the user changed."""
        disabled = set(self.disabled()) if self.list.count() else set(self._saved)
        self.list.clear()
        for skill in self._all_skills():
            item = QListWidgetItem(f"{skill.name}\n{skill.description}")
            item.setData(NAME_ROLE, skill.name)
            item.setToolTip(f"{skill.description}\n{skill.folder}")
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            off = skill.name in disabled
            item.setCheckState(Qt.CheckState.Unchecked if off else Qt.CheckState.Checked)
            self.list.addItem(item)
        self.empty_label.setVisible(self.list.count() == 0)
        self.list.setVisible(self.list.count() > 0)

    def names(self) -> list[str]:
        return [self.list.item(i).data(NAME_ROLE) for i in range(self.list.count())]

    def item(self, name: str) -> QListWidgetItem | None:
        for i in range(self.list.count()):
            if self.list.item(i).data(NAME_ROLE) == name:
                return self.list.item(i)
        return None

    def set_enabled(self, name: str, enabled: bool) -> None:
        item = self.item(name)
        if item is not None:
            item.setCheckState(Qt.CheckState.Checked if enabled else Qt.CheckState.Unchecked)

    def disabled(self) -> list[str]:
        """Unchecked skills, plus disabled names not found now (a folder may be offline)."""
        shown = set(self.names())
        off = [
            self.list.item(i).data(NAME_ROLE)
            for i in range(self.list.count())
            if self.list.item(i).checkState() != Qt.CheckState.Checked
        ]
        return sorted({*off, *(n for n in self._saved if n not in shown)})

    # -- actions --

    def open_folder(self) -> None:
        try:
            make_skills_folder(self.skills_dir)
        except OSError as exc:
            self._show(f"Could not create {self.skills_dir}: {exc}", "error")
            return
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.skills_dir)))

    @asyncSlot()
    async def _on_import_folder(self) -> None:
        path = choose_folder(self)
        if path:
            await self.import_path(Path(path))

    @asyncSlot()
    async def _on_import_zip(self) -> None:
        path = choose_zip(self)
        if path:
            await self.import_path(Path(path))

    async def import_path(self, source: Path) -> bool:
        """Import a skill folder or zip (in a thread); says how it went on the page."""
        buttons = (self.import_folder_button, self.import_zip_button)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        for b in buttons:
            b.setEnabled(False)
        self._show(f"Importing {source.name}…", "muted")
        try:
            name = await in_thread(import_skill, source, self.skills_dir)
        except IMPORT_ERRORS as exc:
            self._show(f"Not imported: {exc}", "error")
            return False
        finally:
            for b in buttons:
                b.setEnabled(True)
            if task is not None:
                self._tasks.discard(task)
        self.reload()
        self._show(f"Imported the skill {name}. {plural(self.list.count(), 'skill')} now.", "ok")
        return True

    def cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    def _show(self, text: str, role: str) -> None:
        self.status.setText(text)
        set_role(self.status, role)

    # -- saving --

    def patch(self) -> Patch:
        disabled = self.disabled()
        changed = disabled != sorted(self._saved)

        def apply(settings: Settings) -> None:
            if changed:
                settings.skills.disabled = list(disabled)

        return apply

    def mark_saved(self, settings: Settings) -> None:
        self._saved = list(settings.skills.disabled)
