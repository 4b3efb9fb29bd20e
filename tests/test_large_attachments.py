"""A large attached document goes in as its outline and start, joins the conversation's
knowledge, and the model reads the rest by page with knowledge_read — in the window (the
real ChatController) and headless (`deskhand ask --attach`, a real subprocess), both against
the scripted model server. Small documents stay inline, as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.attachments import LARGE_DOCUMENT_CHARS, build_user_message
from app.core.runtime import Runtime
from app.ui.controller import ChatController
from tests.controller_harness import send
from tests.fakellm import ScriptedLLM, text, tool_calls
from tests.fixtures_runtime import HOME, RuntimeFactory
from tests.test_documents import write_pdf

REPO = Path(__file__).resolve().parents[1]
SECRET_PAGE = 30
KEY = "The lighthouse key hangs behind the blue door of the boathouse."


def big_pdf(path: Path, pages: int = 40) -> Path:
    """About 2,000 characters a page; page SECRET_PAGE says where the key is."""
    texts = []
    for n in range(1, pages + 1):
        filler = " ".join(f"Section {n}.{i}: the figures were reviewed." for i in range(45))
        texts.append(f"{KEY} {filler}" if n == SECRET_PAGE else filler)
    return write_pdf(path, texts)


def test_a_large_document_goes_in_as_its_outline_and_is_made_searchable(tmp_path: Path):
    pdf = big_pdf(tmp_path / "report.pdf")
    made: list[Path] = []

    message, problems = build_user_message("Where is the key?", [str(pdf)], searchable=made.append)

    assert problems == []
    assert made == [pdf.resolve()]
    content = message.content
    assert len(content) < LARGE_DOCUMENT_CHARS / 4
    assert content.startswith("Where is the key?\n\nAttached file `report.pdf` (PDF, 40 pages;")
    assert f'knowledge_read(path="{pdf.resolve()}", location="page 1")' in content
    assert "- pages 1–40" in content
    assert "Section 1.0: the figures were reviewed" in content  # its start
    assert KEY not in content  # page 30 is read on demand
    assert '<untrusted_data origin="attached file report.pdf"' in content


def test_a_small_document_stays_inline_and_is_not_indexed(tmp_path: Path):
    pdf = write_pdf(tmp_path / "memo.pdf", ["Short memo.", KEY])
    made: list[Path] = []
    message, problems = build_user_message("", [str(pdf)], searchable=made.append)
    assert problems == [] and made == []
    assert KEY in message.content and "knowledge_read" not in message.content


def test_without_a_way_to_search_it_a_large_document_goes_in_whole_as_before(tmp_path: Path):
    pdf = big_pdf(tmp_path / "report.pdf")
    message, _ = build_user_message("", [str(pdf)])
    assert KEY in message.content and "knowledge_read" not in message.content


def test_a_large_document_that_cannot_be_indexed_goes_in_whole_and_says_why(tmp_path: Path):
    pdf = big_pdf(tmp_path / "report.pdf")

    def refuse(path: Path) -> None:
        raise ValueError("the disk is full")

    message, problems = build_user_message("", [str(pdf)], searchable=refuse)
    assert problems == []
    assert "could not be made searchable (the disk is full)" in message.content
    assert KEY in message.content


def test_a_large_markdown_file_is_outlined_by_its_headings(tmp_path: Path):
    note = tmp_path / "notes.md"
    chapters = [f"## Chapter {n}\n\n" + "A line of notes about the plan. " * 120 for n in range(20)]
    note.write_text("# Notes\n\n" + "\n\n".join(chapters), "utf-8")
    made: list[Path] = []
    message, _ = build_user_message("", [str(note)], searchable=made.append)
    assert made == [note.resolve()]
    assert "Chapter 19" in message.content.split("The start:")[0]  # in the outline
    assert len(message.content) < 10_000 < note.stat().st_size


# ---- the window ----------------------------------------------------------------------------


@pytest.mark.runtime(roots=[HOME])
def test_in_the_window_the_model_reads_the_page_it_needs(
    runtime: Runtime, llm: ScriptedLLM, qloop, tmp_path: Path
):
    pdf = big_pdf(tmp_path / "report.pdf")
    where = str(pdf.resolve())
    llm.add(
        tool_calls(("r1", "knowledge_read", {"path": where, "location": f"page {SECRET_PAGE}"})),
        text("Behind the blue door."),
    )
    controller = ChatController(runtime)

    async def body() -> None:
        await send(controller, "Where is the key?", [str(pdf)])

    qloop.run_until_complete(body())
    first, second = (json.dumps(r.body) for r in llm.requests)
    assert "knowledge_read" in first and KEY not in first
    assert KEY in second  # the page, read through the tool
    [folder] = [f for f in runtime.knowledge.folders(controller.conversation_id) if f.path == where]
    assert folder.conversation_id == controller.conversation_id
    assert runtime.knowledge.folders(None) == [], "searchable in that conversation only"


# ---- headless ---------------------------------------------------------------------------------


def _ask(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("DESKHAND_HOME", None)
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "--home", str(home), "ask", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )


def test_ask_attach_reads_a_large_document_by_page(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, tmp_path: Path
):
    pdf = big_pdf(tmp_path / "report.pdf")
    home = make_runtime(roots=[HOME]).home
    where = str(pdf.resolve())
    llm.add(
        tool_calls(("r1", "knowledge_read", {"path": where, "location": str(SECRET_PAGE)})),
        text("Behind the blue door."),
    )

    proc = _ask(home, "Where is the key?", "--attach", str(pdf))

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Behind the blue door."
    first, second = (json.dumps(r.body) for r in llm.requests)
    assert "Attached file `report.pdf` (PDF, 40 pages;" in first and KEY not in first
    assert KEY in second
