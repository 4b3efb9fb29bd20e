"""Settings → Skills: skills listed from a home with two skill folders, one disabled and
saved through the dialog's save, imports of a folder and a zip, and unsafe zips refused."""

from __future__ import annotations

import io
import json
import os
import stat
import zipfile
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.core.runtime import Runtime
from app.core.skills import SkillLibrary
from app.ui.settings import skills_page
from app.ui.settings.skills_page import SkillsPage
from tests import test_settings_dialog as base
from tests.test_settings_dialog import run

runtime = base.runtime
open_dialog = base.open_dialog
restore_theme = base.restore_theme

pytestmark = pytest.mark.gui

#: Where to save screenshots to look at (DESKHAND_SHOTS=folder); none by default.
SHOTS = os.environ.get("DESKHAND_SHOTS")


def skill_md(name: str, description: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n# {name}\nDo the thing.\n"


def write_skill(folder: Path, name: str, description: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_md(name, description), "utf-8")
    return folder


def make_zip(path: Path, files: dict[str, str], links: dict[str, str] | None = None) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    path.write_bytes(buffer.getvalue())
    return path


@pytest.fixture
def skills_home(home: Path) -> Path:
    write_skill(home / "skills" / "pdf-forms", "pdf-forms", "Fill in PDF forms.")
    write_skill(home / "skills" / "release-notes", "release-notes", "Write release notes.")
    (home / "skills" / "not-a-skill").mkdir()  # no SKILL.md: not listed
    return home


def grab(widget: Any, name: str) -> None:
    if SHOTS:
        widget.grab().save(str(Path(SHOTS) / name))


def test_lists_skills_and_disabling_one_is_saved(
    skills_home: Path, runtime: Runtime, open_dialog: Any, qtbot: Any, qloop: Any
) -> None:
    dialog = open_dialog(runtime, page="general")
    page = SkillsPage(runtime)
    qtbot.addWidget(page)
    dialog.pages["skills"] = page  # type: ignore[index]  # as the lead registers it
    assert page.names() == ["pdf-forms", "release-notes"]
    assert all(page.item(n).checkState() == Qt.CheckState.Checked for n in page.names())
    page.resize(700, 420)
    page.show()
    grab(page, "skills_page.png")

    page.set_enabled("release-notes", False)
    assert run(qloop, dialog.save())
    saved = json.loads(runtime.settings_store.path.read_text("utf-8"))
    assert saved["skills"]["disabled"] == ["release-notes"]
    assert runtime.settings.skills.disabled == ["release-notes"]
    library = SkillLibrary.from_settings(runtime.home, runtime.settings)
    assert [s.name for s in library.discover()] == ["pdf-forms"]

    # a reopened page shows it unchecked; checking it again removes it from the list
    again = SkillsPage(runtime)
    qtbot.addWidget(again)
    assert again.item("release-notes").checkState() == Qt.CheckState.Unchecked
    again.set_enabled("release-notes", True)
    again.patch()(runtime.settings)
    assert runtime.settings.skills.disabled == []


def test_unchanged_page_leaves_other_disabled_names(
    skills_home: Path, runtime: Runtime, qtbot: Any
) -> None:
    runtime.settings.skills.disabled = ["offline-skill"]  # from a folder not there now
    page = SkillsPage(runtime)
    qtbot.addWidget(page)
    page.set_enabled("pdf-forms", False)
    settings = runtime.settings.model_copy(deep=True)
    page.patch()(settings)
    assert settings.skills.disabled == ["offline-skill", "pdf-forms"]


def test_import_a_folder_and_a_zip(
    skills_home: Path, runtime: Runtime, tmp_path: Path, qtbot: Any, qloop: Any, monkeypatch: Any
) -> None:
    page = SkillsPage(runtime)
    qtbot.addWidget(page)
    folder = write_skill(tmp_path / "src" / "whatever", "csv-clean", "Clean up CSV files.")
    (folder / "clean.py").write_text("print('ok')\n", "utf-8")
    monkeypatch.setattr(skills_page, "choose_folder", lambda parent: str(folder))
    qtbot.mouseClick(page.import_folder_button, Qt.MouseButton.LeftButton)

    async def body() -> None:
        from tests.fixtures_qt import wait_until

        await wait_until(lambda: "csv-clean" in page.names(), what="the imported folder")

    run(qloop, body())
    assert (skills_home / "skills" / "csv-clean" / "clean.py").is_file()
    assert folder.is_dir()  # copied, not moved

    archive = make_zip(
        tmp_path / "mail.zip",
        {
            "mail-triage/SKILL.md": skill_md("mail-triage", "Sort the inbox."),
            "mail-triage/scripts/run.sh": "echo hi\n",
        },
    )
    assert run(qloop, page.import_path(archive))
    assert "mail-triage" in page.names()
    assert (skills_home / "skills" / "mail-triage" / "scripts" / "run.sh").is_file()
    assert "Imported" in page.status.text()
    # SKILL.md at the top of the zip works too
    flat = make_zip(tmp_path / "flat.zip", {"SKILL.md": skill_md("flat", "A flat zip.")})
    assert run(qloop, page.import_path(flat))
    assert (skills_home / "skills" / "flat" / "SKILL.md").is_file()
    # the same name again is refused
    assert not run(qloop, page.import_path(archive))
    assert "already exists" in page.status.text()
    assert not [p for p in (skills_home / "skills").iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(
    "files, links, why",
    [
        ({"SKILL.md": skill_md("evil", "x"), "../escaped.txt": "x"}, None, "unsafe path"),
        ({"SKILL.md": skill_md("evil", "x"), "a/../../escaped.txt": "x"}, None, "unsafe path"),
        ({"SKILL.md": skill_md("evil", "x"), "/tmp/abs-escape.txt": "x"}, None, "unsafe path"),
        ({"SKILL.md": skill_md("evil", "x")}, {"link": "/etc/passwd"}, "link"),
        ({"README.md": "no skill here"}, None, "no SKILL.md"),
        ({"SKILL.md": "no front matter"}, None, "front matter"),
    ],
)
def test_unsafe_or_invalid_zip_is_refused(
    skills_home: Path,
    runtime: Runtime,
    tmp_path: Path,
    qtbot: Any,
    qloop: Any,
    files: dict[str, str],
    links: dict[str, str] | None,
    why: str,
) -> None:
    page = SkillsPage(runtime)
    qtbot.addWidget(page)
    before = sorted(p.name for p in (skills_home / "skills").iterdir())
    archive = make_zip(tmp_path / "bad.zip", files, links)
    assert not run(qloop, page.import_path(archive))
    assert why in page.status.text()
    assert sorted(p.name for p in (skills_home / "skills").iterdir()) == before
    assert not (tmp_path / "escaped.txt").exists()
    assert not (skills_home / "escaped.txt").exists()
    assert page.names() == ["pdf-forms", "release-notes"]


def test_not_a_zip_is_refused(skills_home: Path, runtime: Runtime, tmp_path: Path, qtbot, qloop):
    page = SkillsPage(runtime)
    qtbot.addWidget(page)
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"not a zip")
    assert not run(qloop, page.import_path(junk))
    assert "not a readable zip" in page.status.text()


def test_empty_home_says_how_to_add_skills(runtime: Runtime, qtbot: Any) -> None:
    page = SkillsPage(runtime)
    qtbot.addWidget(page)
    page.show()
    assert page.names() == []
    assert page.empty_label.isVisible() and "SKILL.md" in page.empty_label.text()


def test_corrupt_member_is_refused_and_nothing_is_left(
    skills_home: Path, runtime: Runtime, tmp_path: Path, qtbot: Any, qloop: Any
) -> None:
    page = SkillsPage(runtime)
    qtbot.addWidget(page)
    archive = make_zip(
        tmp_path / "broken.zip",
        {"broken/SKILL.md": skill_md("broken", "Broken."), "broken/data.txt": "x" * 1000},
    )
    raw = bytearray(archive.read_bytes())
    at = raw.index(b"x" * 100)  # stored uncompressed: spoil the data, so the CRC fails
    raw[at : at + 10] = b"y" * 10
    archive.write_bytes(bytes(raw))
    assert not run(qloop, page.import_path(archive))
    assert "cannot extract" in page.status.text()
    assert sorted(p.name for p in (skills_home / "skills").iterdir()) == [
        "not-a-skill",
        "pdf-forms",
        "release-notes",
    ]


def test_refresh_finds_new_skills_and_open_folder_creates_it(
    runtime: Runtime, qtbot: Any, monkeypatch: Any
) -> None:
    opened: list[str] = []
    monkeypatch.setattr(
        skills_page.QDesktopServices, "openUrl", lambda url: opened.append(url.toLocalFile())
    )
    page = SkillsPage(runtime)
    qtbot.addWidget(page)
    qtbot.mouseClick(page.open_button, Qt.MouseButton.LeftButton)
    skills_dir = Path(runtime.home) / "skills"
    assert skills_dir.is_dir() and opened == [str(skills_dir)]
    page.set_enabled("nothing", False)  # unknown names are ignored
    write_skill(skills_dir / "later", "later", "Added while the page is open.")
    qtbot.mouseClick(page.refresh_button, Qt.MouseButton.LeftButton)
    assert page.names() == ["later"] and not page.empty_label.isVisibleTo(page)
