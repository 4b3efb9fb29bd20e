"""`file:` links in answers (knowledge citations): a document inside the allowed folders opens
at once — a PDF at its page where the viewer takes one — anything else asks as links do, and
scripts, programs, folders and other computers' files are refused (app/core/links.py), in
the real window (offscreen) against the scripted model."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.core import links
from app.core.links import FileTarget, LinkState, decide, page_command
from app.ui.main_window import MainWindow
from tests.fixtures_qt import wait_until
from tests.fixtures_runtime import RuntimeFactory
from tests.test_documents import write_pdf
from tests.test_link_prompt import _answer, _click_link


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    folder = tmp_path / "allowed"
    folder.mkdir()
    write_pdf(folder / "hand book.pdf", ["Welcome.", "Plants are watered on Thursdays."])
    (folder / "notes.md").write_text("# Notes\n", "utf-8")
    return folder


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "report.md").write_text("# Report\n", "utf-8")
    (folder / "page.html").write_text("<script>alert(1)</script>", "utf-8")
    return folder


def _state(*folders: Path) -> LinkState:
    return LinkState(file_folders=tuple(str(f) for f in folders))


# ---- the decision --------------------------------------------------------------------------


def test_a_document_in_an_allowed_folder_opens_at_once_with_its_page(allowed: Path):
    pdf = allowed / "hand book.pdf"
    decision = decide(pdf.as_uri() + "#page=2", "[1]", _state(allowed))
    assert decision.action == "open"
    assert decision.url == pdf.resolve().as_uri() + "#page=2"
    assert decision.shown == f"{pdf.resolve()} (page 2)"


def test_only_a_pdf_page_is_kept_from_the_fragment(allowed: Path):
    note = (allowed / "notes.md").as_uri()
    assert decide(note + "#page=2", None, _state(allowed)).url == (allowed / "notes.md").as_uri()
    pdf = (allowed / "hand book.pdf").as_uri()
    assert decide(pdf + "#zoom=400&x=1", None, _state(allowed)).url == pdf


def test_a_document_outside_the_allowed_folders_or_one_that_runs_scripts_asks(
    allowed: Path, elsewhere: Path
):
    outside = decide((elsewhere / "report.md").as_uri(), None, _state(allowed))
    assert outside.action == "confirm"
    assert "outside the folders Deskhand may use" in outside.reasons[0]
    page = decide((elsewhere / "page.html").as_uri(), None, _state(elsewhere))
    assert page.action == "confirm" and "scripts, macros or formulas" in page.reasons[0]


@pytest.mark.parametrize("name", ["sheet.csv", "table.tsv", "letter.odt", "budget.xlsm"])
def test_a_document_that_can_run_formulas_or_macros_asks_even_in_the_allowed_folders(
    allowed: Path, name: str
):
    (allowed / name).write_text("=cmd|' /C calc'!A0\n", "utf-8")
    decision = decide((allowed / name).as_uri(), None, _state(allowed))
    assert decision.action == "confirm"
    assert decision.reasons == (
        "A file of this kind can run scripts, macros or formulas when it opens.",
    )


def test_a_pdf_or_a_text_file_in_the_allowed_folders_opens_at_once(allowed: Path):
    for name in ("report.pdf", "notes.txt", "slides.pptx"):
        (allowed / name).write_bytes(b"%PDF-1.4\n" if name.endswith(".pdf") else b"x")
        assert decide((allowed / name).as_uri(), None, _state(allowed)).action == "open"


def test_a_symlink_is_judged_by_where_it_leads(allowed: Path, elsewhere: Path):
    (allowed / "shortcut.md").symlink_to(elsewhere / "report.md")
    decision = decide((allowed / "shortcut.md").as_uri(), None, _state(allowed))
    assert decision.action == "confirm"
    assert decision.url == (elsewhere / "report.md").resolve().as_uri()


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("run-me.sh", "only web and mail links"),
        ("missing.pdf", "no document at"),
        ("tool.md", "run as a program"),
        ("folder.pdf", "no document at"),
    ],
)
def test_programs_scripts_folders_and_missing_files_are_refused(
    allowed: Path, name: str, words: str
):
    path = allowed / name
    if name == "run-me.sh":
        path.write_text("rm -rf ~\n")
    if name == "tool.md":
        path.write_text("# x\n")
        path.chmod(0o755)
    if name == "folder.pdf":
        path.mkdir()
    decision = decide(path.as_uri(), None, _state(allowed))
    assert decision.action == "refuse" and decision.url == ""
    assert words in decision.reasons[0]


def test_a_file_on_another_computer_is_refused():
    decision = decide("file://server/share/report.pdf", None, _state(Path("/")))
    assert decision.action == "refuse" and "another computer" in decision.reasons[0]


def test_the_viewer_gets_the_page_when_it_takes_one(allowed: Path):
    target = FileTarget((allowed / "hand book.pdf").resolve(), 7)
    found = {"evince": "/usr/bin/evince", "firefox": "/usr/bin/firefox"}

    def which(name: str) -> str | None:
        return found.get(name)

    assert page_command(target, "org.gnome.Evince.desktop", which) == [
        "/usr/bin/evince",
        "--page-index=7",
        str(target.path),
    ]
    assert page_command(target, "firefox_firefox.desktop", which) == [
        "/usr/bin/firefox",
        target.path.as_uri() + "#page=7",
    ]
    assert page_command(target, "okularApplication_pdf.desktop", which) is None  # not there
    assert page_command(target, "some-viewer.desktop", which) is None
    assert page_command(FileTarget(target.path), "org.gnome.Evince.desktop", which) is None


# ---- in the window -----------------------------------------------------------------------------


@pytest.fixture
def window(make_runtime: RuntimeFactory, allowed: Path, qtbot: Any, qloop: Any):
    win = MainWindow(make_runtime(roots=[allowed]))
    qtbot.addWidget(win)
    win.resize(1000, 760)
    win.show()
    yield win
    win.stop_background_work()


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What reached the system's opener or was started as a viewer."""
    seen: list[str] = []
    monkeypatch.setattr(
        "app.ui.main_window.QDesktopServices.openUrl",
        lambda url: seen.append(bytes(url.toEncoded().data()).decode()) or True,
    )
    monkeypatch.setattr(
        "app.ui.chat.link_prompt.QProcess.startDetached",
        lambda program, args: (seen.append(" ".join([program, *args])) or True, 1),
    )
    return seen


def test_a_citation_in_an_answer_opens_the_pdf_at_its_page(
    window: MainWindow,
    llm: Any,
    qtbot: Any,
    qloop: Any,
    opened: list[str],
    allowed: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(links, "pdf_viewer", lambda: "org.gnome.Evince.desktop")
    monkeypatch.setattr(links.shutil, "which", lambda name: f"/usr/bin/{name}")
    pdf = (allowed / "hand book.pdf").resolve()
    _answer(window, llm, qtbot, qloop, f"On Thursdays [1]({pdf.as_uri()}#page=2).")
    _click_link(window, qtbot)
    assert window.link_prompt is None  # inside the allowed folders: no question

    async def started() -> None:
        await wait_until(lambda: opened, what="the viewer to start")

    qloop.run_until_complete(started())
    assert opened == [f"/usr/bin/evince --page-index=2 {pdf}"]


def test_without_a_viewer_that_takes_pages_the_file_opens_at_its_start(
    window: MainWindow,
    llm: Any,
    qtbot: Any,
    qloop: Any,
    opened: list[str],
    allowed: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(links, "pdf_viewer", lambda: None)
    pdf = (allowed / "hand book.pdf").resolve()
    _answer(window, llm, qtbot, qloop, f"See [1]({pdf.as_uri()}#page=2).")
    _click_link(window, qtbot)

    async def started() -> None:
        await wait_until(lambda: opened, what="the file to open")

    qloop.run_until_complete(started())
    assert opened == [pdf.as_uri()]  # no fragment: openers take a file, not a page


def test_a_document_outside_the_allowed_folders_asks_first(
    window: MainWindow, llm: Any, qtbot: Any, qloop: Any, opened: list[str], elsewhere: Path
):
    report = (elsewhere / "report.md").resolve()
    _answer(window, llm, qtbot, qloop, f"It is in [the report]({report.as_uri()}).")
    _click_link(window, qtbot)
    prompt = window.link_prompt
    assert prompt is not None and prompt.isVisible()
    assert prompt.target.toPlainText() == str(report)
    assert opened == []
    qtbot.mouseClick(prompt.open_button, Qt.MouseButton.LeftButton)
    assert opened == [report.as_uri()]


def test_a_file_gone_after_the_question_is_not_opened(
    window: MainWindow, llm: Any, qtbot: Any, qloop: Any, opened: list[str], elsewhere: Path
):
    report = (elsewhere / "report.md").resolve()
    _answer(window, llm, qtbot, qloop, f"It is in [the report]({report.as_uri()}).")
    _click_link(window, qtbot)
    prompt = window.link_prompt
    assert prompt is not None
    os.remove(report)  # swapped for nothing (or a program) while the question was up
    qtbot.mouseClick(prompt.open_button, Qt.MouseButton.LeftButton)
    assert opened == []
    assert window.refused_link is not None and "no document at" in window.refused_link.text()
