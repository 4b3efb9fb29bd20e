"""The "Skills" page: the skills found in <home>/skills and the extra skill folders, each
with a check box (unchecked: listed in `settings.skills.disabled` on Save), a button that
opens the skills folder, and import of a skill folder or a .zip into <home>/skills.

An import is checked before anything lands in <home>/skills: the SKILL.md must parse, the
name must be new, and a zip may hold no absolute path, no `..`, no link and nothing too big.
Copying and extracting run in a worker thread; listing the skills is a quick folder scan.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
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
from app.core.skills import SKILL_FILE, Skill, SkillError, SkillLibrary, _read, parse_skill_md
from app.ui.settings.page import Patch, SettingsPage, in_thread
from app.ui.settings.widgets import muted_label, plural, role_label, set_role

NAME_ROLE = Qt.ItemDataRole.UserRole
MAX_ZIP_FILES = 2000
MAX_ZIP_BYTES = 50_000_000


# ---- import (blocking; runs in a worker thread) ------------------------------------------


def _skill_name(folder: Path) -> str:
    skill_file = folder / SKILL_FILE
    if not skill_file.is_file():
        raise SkillError(f"{folder.name} has no {SKILL_FILE}")
    try:
        meta, _ = parse_skill_md(_read(skill_file))
    except UnicodeDecodeError:
        raise SkillError(f"{SKILL_FILE} is not UTF-8 text") from None
    return meta["name"]


def _skill_root(folder: Path) -> Path:
    """The folder holding SKILL.md: `folder` itself or its single subfolder."""
    if (folder / SKILL_FILE).is_file():
        return folder
    entries = [p for p in folder.iterdir() if not p.name.startswith((".", "__MACOSX"))]
    if len(entries) == 1 and entries[0].is_dir() and (entries[0] / SKILL_FILE).is_file():
        return entries[0]
    raise SkillError(f"no {SKILL_FILE} at the top of the import")


def _safe_extract(archive: Path, target: Path) -> None:
    """Extract `archive` into `target`, refusing any member that could land outside it."""
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise SkillError(f"{archive.name} is not a readable zip file: {exc}") from None
    with zf:
        members = zf.infolist()
        if len(members) > MAX_ZIP_FILES:
            raise SkillError(f"the zip holds more than {MAX_ZIP_FILES} files")
        if sum(m.file_size for m in members) > MAX_ZIP_BYTES:
            raise SkillError(f"the zip unpacks to more than {MAX_ZIP_BYTES // 1_000_000} MB")
        root = target.resolve()
        for member in members:
            name = member.filename.replace("\\", "/")
            parts = PurePosixPath(name).parts
            if (
                name.startswith("/")
                or (parts and parts[0].endswith(":"))
                or ".." in parts
                or "\0" in name
            ):
                raise SkillError(f"the zip has an unsafe path: {member.filename!r}")
            if stat.S_ISLNK(member.external_attr >> 16):
                raise SkillError(f"the zip has a link, which is not allowed: {member.filename!r}")
            dest = (root / name).resolve()
            if not dest.is_relative_to(root):
                raise SkillError(f"the zip has an unsafe path: {member.filename!r}")
        for member in members:
            dest = root / member.filename.replace("\\", "/")
            if member.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                with zf.open(member) as src, dest.open("wb") as out:
                    shutil.copyfileobj(src, out)  # never more than the declared size
            except (zipfile.BadZipFile, RuntimeError, NotImplementedError) as exc:
                # RuntimeError: encrypted; NotImplementedError: an unknown compression
                raise SkillError(f"cannot extract {member.filename!r}: {exc}") from None


def import_skill(source: Path, skills_dir: Path) -> str:
    """Copy a skill folder, or extract a skill zip, into `skills_dir/<name>`; the name.
    SkillError (nothing written) when it is not a valid, new skill."""
    source = Path(source)
    skills_dir.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        name = _skill_name(source)
        dest = skills_dir / name
        if dest.exists():
            raise SkillError(f"a skill folder named {name!r} already exists")
        if dest.resolve().is_relative_to(source.resolve()):
            raise SkillError("cannot import a folder into itself")
        # links stay links: a skill script that points outside its folder is refused when run
        shutil.copytree(source, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        return name
    if not source.is_file():
        raise SkillError(f"{source} does not exist")
    with tempfile.TemporaryDirectory(dir=skills_dir, prefix=".import-") as tmp:
        content = Path(tmp) / "content"
        content.mkdir()
        _safe_extract(source, content)
        root = _skill_root(content)
        name = _skill_name(root)
        dest = skills_dir / name
        if dest.exists():
            raise SkillError(f"a skill folder named {name!r} already exists")
        os.replace(root, dest)  # same file system: the skill appears whole or not at all
        return name


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
            self.skills_dir.mkdir(parents=True, exist_ok=True)
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
        except (SkillError, OSError, shutil.Error) as exc:
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
