"""Settings → About: versions, the home folder, and diagnostics without secrets
(pytest-qt, offscreen, a real runtime and settings.json)."""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import PySide6
import pytest
from PySide6.QtCore import Qt, qVersion
from PySide6.QtGui import QGuiApplication

from app.core.runtime import Runtime
from app.core.secrets import SecretStore
from app.core.settings import ProviderAccount
from app.ui.settings import about_page
from app.ui.settings.about_page import AboutPage
from app.version import version
from tests.fixtures_keyring import MemoryKeyring

pytestmark = pytest.mark.gui

KEY = "sk-about-7d1e93c2aa"
PRIVATE_URL = "https://models.internal.example/v1"


@pytest.fixture
def runtime(home: Path) -> Iterator[Runtime]:
    rt = Runtime(home, entry_points=False)
    rt.secrets = SecretStore(backend=MemoryKeyring())
    account = ProviderAccount(kind="openai", label="Work", base_url=PRIVATE_URL, model="m")
    rt.settings = rt.settings_store.update(lambda s: s.providers.append(account))
    rt.secrets.set(f"provider/{account.id}/api_key", KEY)
    yield rt
    rt.close()


@pytest.fixture
def page(runtime: Runtime, qtbot: Any) -> AboutPage:
    page = AboutPage(runtime)
    qtbot.addWidget(page)
    page.resize(600, 700)
    page.show()
    return page


def test_shows_the_versions(page: AboutPage) -> None:
    shown = {name: label.text() for name, label in page.version_labels.items()}
    assert shown["Deskhand"] == version() != "unknown"
    assert shown["Qt"] == qVersion()
    assert shown["PySide6"] == PySide6.__version__
    assert shown["Python"].startswith(platform.python_version())
    assert page.home_label.text() == str(page.runtime.home)
    assert page.home_label.textFormat() == Qt.TextFormat.PlainText


def test_open_folder_opens_the_home_folder_only_when_clicked(
    page: AboutPage, qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[Path] = []
    monkeypatch.setattr(about_page, "open_folder", lambda path: opened.append(path) or True)
    assert opened == []
    qtbot.mouseClick(page.open_button, Qt.MouseButton.LeftButton)
    assert opened == [page.runtime.home]

    monkeypatch.setattr(about_page, "open_folder", lambda path: False)
    qtbot.mouseClick(page.open_button, Qt.MouseButton.LeftButton)
    assert page.status.text().startswith("Could not open")
    assert page.status.property("role") == "error"


def test_copy_diagnostics_has_versions_and_paths_but_no_secrets(
    page: AboutPage, qtbot: Any
) -> None:
    QGuiApplication.clipboard().setText("")
    qtbot.mouseClick(page.copy_button, Qt.MouseButton.LeftButton)
    text = QGuiApplication.clipboard().text()
    assert f"Deskhand: {version()}" in text
    assert f"Qt: {qVersion()}" in text and f"PySide6: {PySide6.__version__}" in text
    assert f"Settings file: {page.runtime.home / 'settings.json'}" in text
    assert KEY not in text and PRIVATE_URL not in text and "Work" not in text
    assert page.status.text() == "Copied. Paste it into your bug report."


def test_nothing_to_save(page: AboutPage, runtime: Runtime) -> None:
    before = runtime.settings.model_copy(deep=True)
    page.patch()(runtime.settings)
    assert runtime.settings == before
    assert page.has_changes() is False


def test_copy_diagnostics_writes_the_users_home_directory_as_a_tilde(
    page: AboutPage, qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_home = page.runtime.home.parent  # the data folder inside the user's home directory
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.setenv("USERPROFILE", str(user_home))  # what Windows' Path.home() reads
    program = user_home / ".venv" / "bin" / "python"
    monkeypatch.setattr(about_page.sys, "executable", str(program))
    QGuiApplication.clipboard().setText("")
    qtbot.mouseClick(page.copy_button, Qt.MouseButton.LeftButton)
    text = QGuiApplication.clipboard().text()

    name = page.runtime.home.name
    sep = os.sep
    assert f"Home folder: ~{sep}{name}\n" in text
    assert f"Settings file: ~{sep}{name}{sep}settings.json\n" in text
    assert f"Logs: ~{sep}{name}{sep}logs\n" in text
    assert f"Executable: ~{sep}.venv{sep}bin{sep}python\n" in text
    assert str(user_home) not in text
    assert "~" in page.copy_button.toolTip() and "home folder" in page.copy_button.toolTip()


def test_tilde_leaves_other_paths_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user_home = tmp_path / "al"
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.setenv("USERPROFILE", str(user_home))
    assert about_page.tilde(user_home) == "~"
    assert about_page.tilde(tmp_path / "alice" / "x") == str(tmp_path / "alice" / "x")  # not ~ice
    assert about_page.tilde(tmp_path / "elsewhere") == str(tmp_path / "elsewhere")
    monkeypatch.setenv("HOME", "/")
    monkeypatch.setenv("USERPROFILE", "/")
    assert about_page.tilde(tmp_path) == str(tmp_path)  # a home of / hides nothing
