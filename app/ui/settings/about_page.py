"""The "About" page: which Deskhand this is (version, Python, Qt, PySide6, platform), its home
folder with a button to open it, and "Copy diagnostics" — versions, platform and paths only
(the user's home directory as `~`), never a setting's value, a key or an address."""

from __future__ import annotations

import functools
import os
import platform
import sys
from pathlib import Path

import PySide6
from PySide6.QtCore import Qt, QUrl, qVersion
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import (
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core import paths
from app.core.runtime import Runtime
from app.core.settings import Settings
from app.ui.settings.page import Patch, SettingsPage
from app.ui.settings.widgets import form_label, form_layout, muted_label, role_label, set_role

LICENCE = "MIT"
LABEL_WIDTH = 130


def app_version() -> str:
    """The installed package's version (pyproject.toml's in a plain checkout)."""
    from app.version import version

    return version()


def readme_path() -> Path | None:
    """README.md next to the app (a checkout or a bundle), if there is one."""
    path = Path(__file__).resolve().parents[3] / "README.md"
    return path if path.is_file() else None


@functools.cache
def versions() -> list[tuple[str, str]]:
    """(Read once: the package metadata and `platform` read files.)"""
    return [
        ("Deskhand", app_version()),
        ("Python", f"{platform.python_version()} ({platform.python_implementation()})"),
        ("Qt", qVersion()),
        ("PySide6", PySide6.__version__),
        ("Platform", platform.platform()),
    ]


def diagnostics(home: Path) -> str:
    """Plain text to paste into a bug report: versions, platform and Deskhand's paths, with
    the user's home directory shown as `~` (it usually holds the user's name)."""
    lines = [f"{name}: {value}" for name, value in versions()]
    app = QGuiApplication.instance()
    if isinstance(app, QGuiApplication):
        lines.append(f"Qt platform: {app.platformName()}")
    lines += [
        f"Executable: {tilde(sys.executable)}",
        f"Home folder: {tilde(home)}",
        f"Settings file: {tilde(paths.settings_path(home))}",
        f"Logs: {tilde(paths.logs_dir(home))}",
    ]
    return "\n".join(lines) + "\n"


def tilde(path: str | Path) -> str:
    """`path` with the user's home directory replaced by `~` (`~/.local/share/deskhand`);
    a path elsewhere is shown as it is."""
    path = Path(path)
    try:
        home = Path.home()
    except (KeyError, RuntimeError):  # no home directory known
        return str(path)
    for base in dict.fromkeys((home, home.resolve())):
        if base == Path(base.anchor):
            continue  # a home of "/" would turn every path into ~
        try:
            inside = path.relative_to(base)
        except ValueError:
            continue
        return "~" if inside == Path() else f"~{os.sep}{inside}"
    return str(path)


def open_folder(path: Path) -> bool:
    """Show `path` in the system's file manager (tests replace this)."""
    return QDesktopServices.openUrl(QUrl.fromLocalFile(str(path)))


class AboutPage(SettingsPage):
    title = "About"
    subtitle = "Which Deskhand this is, and where it keeps your data."
    reports_edits = True  # nothing to edit

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(16)
        layout.addWidget(self._versions_group())
        layout.addWidget(self._data_group())
        layout.addWidget(self._licence_group())
        layout.addStretch(1)

    def _versions_group(self) -> QGroupBox:
        group = QGroupBox("Version")
        form = _group_form(group)
        self.version_labels: dict[str, QLabel] = {}
        for name, value in versions():
            label = _value_label(value)
            self.version_labels[name] = label
            form.addRow(form_label(name, LABEL_WIDTH), label)
        return group

    def _data_group(self) -> QGroupBox:
        group = QGroupBox("Your data")
        form = _group_form(group)
        self.home_label = _value_label(str(self.runtime.home))
        form.addRow(form_label("Home folder", LABEL_WIDTH), self.home_label)
        self.open_button = QPushButton("Open folder")
        self.open_button.setAutoDefault(False)
        self.open_button.clicked.connect(self.open_home)
        self.copy_button = QPushButton("Copy diagnostics")
        self.copy_button.setAutoDefault(False)
        self.copy_button.setToolTip(
            "Copies Deskhand's, Python's and Qt's versions, the platform, and where the "
            "program and Deskhand's folders are (your home folder written as ~), for a bug "
            "report. No settings, keys, addresses or conversations."
        )
        self.copy_button.clicked.connect(self.copy_diagnostics)
        buttons = QWidget()
        row = QHBoxLayout(buttons)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(8)
        row.addWidget(self.open_button)
        row.addWidget(self.copy_button)
        row.addStretch(1)
        form.addRow(QWidget(), buttons)
        self.status = role_label("", "muted", wrap=True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        form.addRow(QWidget(), self.status)
        return group

    def _licence_group(self) -> QGroupBox:
        group = QGroupBox("Licence")
        form = _group_form(group)
        form.addRow(form_label("Licence", LABEL_WIDTH), _value_label(f"{LICENCE} licence"))
        self.readme = readme_path()
        if self.readme is not None:
            self.readme_button = QPushButton("Open README")
            self.readme_button.setAutoDefault(False)
            self.readme_button.setToolTip(str(self.readme))
            self.readme_button.clicked.connect(self.open_readme)
            box = QWidget()
            row = QHBoxLayout(box)
            row.setContentsMargins(0, 0, 0, 0)
            row.addWidget(self.readme_button)
            row.addStretch(1)
            form.addRow(form_label("Read me", LABEL_WIDTH), box)
        form.addRow(
            QWidget(),
            muted_label("Deskhand is free software: use, change and share it under that licence."),
        )
        return group

    # -- actions --

    def open_home(self) -> None:
        if not open_folder(self.runtime.home):
            self._say(f"Could not open {self.runtime.home}. Open it in your file manager.", "error")

    def open_readme(self) -> None:
        if self.readme is not None and not open_folder(self.readme):
            self._say(f"Could not open {self.readme}.", "error")

    def copy_diagnostics(self) -> None:
        QGuiApplication.clipboard().setText(diagnostics(self.runtime.home))
        self._say("Copied. Paste it into your bug report.", "ok")

    def _say(self, text: str, role: str) -> None:
        self.status.setText(text)
        set_role(self.status, role)

    # -- nothing to save --

    def has_changes(self) -> bool | None:
        return False

    def patch(self) -> Patch:
        def apply(settings: Settings) -> None:
            return None

        return apply


def _group_form(group: QWidget) -> QFormLayout:
    return form_layout(group, margins=(14, 16, 14, 12), spacing=(16, 10))


def _value_label(text: str) -> QLabel:
    """A value to read and select (a path may be long: it wraps)."""
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    label.setWordWrap(True)
    label.setMinimumHeight(24)
    return label
