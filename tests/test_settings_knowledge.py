"""Settings → Knowledge against the real knowledge service, index and embedder (pytest-qt,
offscreen, qasync): a folder added through the page is indexed and shown up to date with its
counts; progress from the indexing thread reaches the row on the GUI thread; Remove asks
first; a document that cannot be read is listed with why in plain words; a provider's
embeddings need a model name; and nothing is opened while knowledge was never used."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.knowledge.indexer import Progress
from app.core.runtime import Runtime
from app.core.secrets import SecretStore
from app.ui.settings import knowledge_page
from app.ui.settings.account_list import DETAIL_ROLE
from app.ui.settings.knowledge_page import (
    TAG_ROLE,
    KnowledgePage,
    megabytes,
    status_text,
    time_left,
)
from tests import test_settings_dialog as base
from tests.fixtures_keyring import MemoryKeyring
from tests.fixtures_qt import wait_until
from tests.test_documents import write_pdf
from tests.test_settings_dialog import run

open_dialog = base.open_dialog
restore_theme = base.restore_theme

pytestmark = pytest.mark.gui


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "allowed" / "Research"
    folder.mkdir(parents=True)
    write_pdf(folder / "handbook.pdf", ["Plants are watered on Thursdays.", "Coffee is free."])
    (folder / "notes.md").write_text("# Notes\n\nThe launch is in May.\n", "utf-8")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 50)
    return folder


@pytest.fixture
def runtime(home: Path, docs: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    rt = Runtime(home, entry_points=False)
    rt.secrets = SecretStore(backend=MemoryKeyring())

    def allow(settings: Any) -> None:
        settings.files.allowed_roots = [str(docs.parent)]
        settings.files.folders_chosen = True

    rt.settings = rt.settings_store.update(allow)
    yield rt
    rt.close()


@pytest.fixture
def chosen(monkeypatch: pytest.MonkeyPatch, docs: Path) -> list[str]:
    """The folders the system's folder dialog returns, in turn."""
    answers = [str(docs)]
    monkeypatch.setattr(knowledge_page, "choose_folder", lambda _parent: answers.pop(0))
    return answers


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """The remove question: (folder asked about, answer); answers "Cancel" first, then
    "Remove"."""
    seen: list[tuple[str, bool]] = []

    def confirm(_parent: Any, path: str) -> bool:
        answer = bool(seen)
        seen.append((path, answer))
        return answer

    monkeypatch.setattr(knowledge_page, "confirm_remove", confirm)
    return seen


def page_of(open_dialog: Any, runtime: Runtime, qloop: Any) -> KnowledgePage:
    dialog = open_dialog(runtime, page="knowledge")
    page = dialog.knowledge
    assert isinstance(page, KnowledgePage)
    if page.loading is not None:
        run(qloop, page.loading)
    return page


def row_texts(page: KnowledgePage) -> list[tuple[str, str]]:
    return [
        (page.list.item(i).text(), str(page.list.item(i).data(DETAIL_ROLE)))
        for i in range(page.list.count())
    ]


def add_docs(page: KnowledgePage, qloop: Any) -> None:
    """Add folder… as the user clicks it, until the folder is indexed."""
    page.add_button.click()

    async def indexed() -> None:
        await wait_until(
            lambda: any(text.startswith("Up to date · 2 files") for _, text in row_texts(page)),
            timeout=60,
            what="the folder to be indexed",
        )

    run(qloop, indexed())


# ---- plain words -----------------------------------------------------------------------------


def test_progress_reads_as_files_megabytes_and_time_left():
    running = Progress(3, 120, 800, 34_000_000, 210_000_000, 150.0, "/x/a.pdf", "indexing")
    assert status_text(running, None, False) == (
        "Indexing 120 of 800 files · 34 MB of 210 MB · about 2 min left"
    )
    assert megabytes(400_000) == "0.4 MB" and megabytes(1_204_000_000) == "1,204 MB"
    assert time_left(None) == "" and time_left(20) == "less than a minute left"
    assert time_left(7200) == "about 2.0 h left"
    paused = Progress(3, 12, 40, 1_000_000, 4_000_000, None, None, "paused")
    assert status_text(paused, None, True) == "Paused at 12 of 40 files"
    error = Progress(3, 0, 0, 0, 0, None, None, "error", "it is no longer allowed")
    assert status_text(error, None, False) == "Not indexing: it is no longer allowed"


# ---- the page --------------------------------------------------------------------------------


def test_without_knowledge_nothing_is_opened_and_the_list_says_how_to_start(
    open_dialog: Any, runtime: Runtime, qloop: Any
):
    page = page_of(open_dialog, runtime, qloop)
    assert page.list.count() == 0 and page.empty_label.isVisibleTo(page)
    assert not page.remove_button.isEnabled()
    assert not (runtime.home / "knowledge.db").exists()
    assert "knowledge" not in runtime.__dict__


def test_an_added_folder_is_indexed_and_shown_with_its_counts(
    open_dialog: Any, runtime: Runtime, qloop: Any, docs: Path, chosen: list[str]
):
    page = page_of(open_dialog, runtime, qloop)
    add_docs(page, qloop)
    [(name, text)] = row_texts(page)
    assert name.endswith("allowed/Research")
    assert text.startswith("Up to date · 2 files, ") and text.endswith("· 1 problem")
    assert [f.path for f in runtime.knowledge.folders(None)] == [str(docs.resolve())]
    assert page.list.item(0).data(TAG_ROLE) is None  # nothing to call out
    assert "being indexed" in page.status.text()


def test_a_document_that_cannot_be_read_is_listed_with_why(
    open_dialog: Any, runtime: Runtime, qloop: Any, chosen: list[str]
):
    page = page_of(open_dialog, runtime, qloop)
    add_docs(page, qloop)

    async def listed() -> None:
        await wait_until(lambda: page.problem_list.count() == 1, what="the problem")

    run(qloop, listed())
    item = page.problem_list.item(0)
    assert item.text() == "broken.pdf"
    assert "damaged" in str(item.data(DETAIL_ROLE))
    assert page.problem_list.isVisibleTo(page) and not page.no_problems.isVisibleTo(page)


def test_progress_from_the_indexing_thread_is_shown_on_the_gui_thread(
    open_dialog: Any, runtime: Runtime, qloop: Any, chosen: list[str]
):
    page = page_of(open_dialog, runtime, qloop)
    add_docs(page, qloop)
    folder_id = runtime.knowledge.folders(None)[0].id
    gui = threading.current_thread()
    handled: list[threading.Thread] = []
    page.progressed.connect(lambda _p: handled.append(threading.current_thread()))
    news = Progress(folder_id, 3, 10, 2_500_000, 9_000_000, 30.0, "/x/b.pdf", "indexing")
    thread = threading.Thread(target=page._heard, args=(news,))
    thread.start()
    thread.join()

    async def shown() -> None:
        await wait_until(lambda: row_texts(page)[0][1].startswith("Indexing 3 of 10"))

    run(qloop, shown())
    assert row_texts(page)[0][1] == (
        "Indexing 3 of 10 files · 2.5 MB of 9.0 MB · less than a minute left"
    )
    assert page.list.item(0).data(TAG_ROLE) == ("Indexing", True)
    assert handled == [gui]


def test_pause_and_resume_follow_the_folder(
    open_dialog: Any, runtime: Runtime, qloop: Any, chosen: list[str]
):
    page = page_of(open_dialog, runtime, qloop)
    add_docs(page, qloop)
    task = page.pause_or_resume()
    assert task is not None
    run(qloop, task)
    assert runtime.knowledge.folders(None)[0].paused
    assert row_texts(page)[0][1].startswith("Paused")
    assert page.pause_button.text() == "Resume"
    task = page.pause_or_resume()
    assert task is not None
    run(qloop, task)
    assert not runtime.knowledge.folders(None)[0].paused
    assert page.pause_button.text() == "Pause"


def test_remove_asks_first_and_cancel_keeps_the_folder(
    open_dialog: Any,
    runtime: Runtime,
    qloop: Any,
    docs: Path,
    chosen: list[str],
    asked: list[tuple[str, bool]],
):
    page = page_of(open_dialog, runtime, qloop)
    add_docs(page, qloop)
    assert page.remove_selected() is None  # Cancel
    assert len(runtime.knowledge.folders(None)) == 1 and page.list.count() == 1
    task = page.remove_selected()  # Remove
    assert task is not None
    run(qloop, task)
    assert [answer for _, answer in asked] == [False, True]
    assert asked[0][0].endswith("allowed/Research")
    assert runtime.knowledge.folders(None) == [] and page.list.count() == 0
    assert runtime.knowledge.search("plants", k=3) == []


def test_a_folder_outside_the_allowed_folders_is_not_added_and_says_why(
    open_dialog: Any, runtime: Runtime, qloop: Any, tmp_path: Path, monkeypatch: Any
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setattr(knowledge_page, "choose_folder", lambda _parent: str(elsewhere))
    page = page_of(open_dialog, runtime, qloop)
    task = page.add_folder()
    assert task is not None
    run(qloop, task)
    assert page.status.text().startswith("Not added: ")
    assert page.list.count() == 0


def test_a_providers_embeddings_need_a_model_name(open_dialog: Any, runtime: Runtime, qloop: Any):
    page = page_of(open_dialog, runtime, qloop)
    form = page.embedder_form
    combo = form.editor("embedder")
    model = form.editor("model")
    assert not model.isEnabled()
    combo.setCurrentIndex(combo.findData("provider"))
    assert model.isEnabled()
    assert (page.problem() or "").startswith("Embedding model:")
    model.setText("nomic-embed-text")
    assert page.problem() is None
    page.patch()(runtime.settings)
    assert runtime.settings.knowledge.embedder == "provider"
    assert runtime.settings.knowledge.model == "nomic-embed-text"


def test_a_file_name_with_markup_shows_as_it_is_in_the_tooltips() -> None:
    from PySide6.QtGui import QTextDocument

    from app.ui.plain_text import plain_tooltip

    tip = plain_tooltip("/docs/<b>urgent</b>.pdf\nit is damaged & cut")
    shown = QTextDocument()
    shown.setHtml(tip)
    assert shown.toPlainText() == "/docs/<b>urgent</b>.pdf\nit is damaged & cut"
