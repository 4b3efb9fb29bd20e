"""The window indexes and watches the knowledge folders once it has settled, and a home
without knowledge folders loads nothing of knowledge search."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import app.ui.main_window as main_window
from app.core.knowledge.embedding import BUILTIN_NAME
from app.core.knowledge.index import KnowledgeIndex
from app.ui.main_window import MainWindow
from tests.fixtures_qt import wait_until
from tests.fixtures_runtime import RuntimeFactory


def test_the_window_indexes_the_knowledge_folders_after_it_opens(
    make_runtime: RuntimeFactory,
    home: Path,
    tmp_path: Path,
    qtbot: Any,
    qloop: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "bills.md").write_text("The invoice is due on the third of March.\n", "utf-8")
    index = KnowledgeIndex(home / "knowledge.db", embedder_name=BUILTIN_NAME, dim=256)
    folder = index.add_folder(str(notes))  # added earlier; the app was closed before indexing
    index.close()
    monkeypatch.setattr(main_window, "KNOWLEDGE_START_MS", 0)
    runtime = make_runtime(roots=[notes])
    win = MainWindow(runtime)
    qtbot.addWidget(win)
    win.show()
    try:

        async def indexed() -> None:
            await wait_until(lambda: "knowledge" in runtime.__dict__, 20, "the indexer")
            await wait_until(lambda: runtime.knowledge.stats(folder.id).files == 1, 60)

        qloop.run_until_complete(indexed())
        hits = runtime.knowledge.search("when must the bill be paid")
        assert hits and hits[0].path.endswith("bills.md")
    finally:
        win.stop_background_work()


def test_a_home_without_knowledge_folders_starts_no_indexer(
    make_runtime: RuntimeFactory, home: Path
) -> None:
    runtime = make_runtime()
    assert runtime.start_knowledge() is False
    assert "knowledge" not in runtime.__dict__
    assert not (home / "knowledge.db").exists()


def test_a_purged_conversations_own_documents_leave_the_index(
    make_runtime: RuntimeFactory, home: Path, tmp_path: Path
) -> None:
    from datetime import timedelta

    report = tmp_path / "report.md"
    report.write_text("# Costs\n\nThe audit found the roof repair cost 4,200 euros.\n", "utf-8")
    runtime = make_runtime(roots=[tmp_path])
    kept = runtime.store.create_conversation("kept")
    gone = runtime.store.create_conversation("gone")
    runtime.knowledge.add_attachment(kept, report)
    runtime.knowledge.add_attachment(gone, report)
    runtime.store.delete_conversation(gone)
    assert runtime.start_knowledge() is True  # deleted, not purged: undo may bring it back
    assert {f.conversation_id for f in runtime.knowledge.all_folders()} == {kept, gone}
    runtime.store.purge_deleted(timedelta(0))
    assert runtime.start_knowledge() is True
    assert [f.conversation_id for f in runtime.knowledge.all_folders()] == [kept]


def test_a_folder_added_for_this_chat_is_indexed_and_searchable_only_there(
    make_runtime: RuntimeFactory,
    tmp_path: Path,
    qtbot: Any,
    qloop: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from PySide6.QtWidgets import QFileDialog

    from app.ui.chat.model import ErrorItem, NoticeItem

    trip = tmp_path / "trip"
    trip.mkdir()
    (trip / "plan.md").write_text("The ferry to the island leaves at seven.\n", "utf-8")
    picked = [str(trip), str(tmp_path)]  # the second is not inside the allowed folders
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: picked.pop(0))
    runtime = make_runtime(roots=[trip])
    win = MainWindow(runtime)
    qtbot.addWidget(win)
    win.show()
    try:
        win.chat_knowledge_action.trigger()

        async def indexed() -> None:
            await wait_until(lambda: win.controller.conversation_id is not None, 20)
            await wait_until(lambda: runtime.knowledge.folders(win.controller.conversation_id), 20)
            folder = runtime.knowledge.folders(win.controller.conversation_id)[0]
            await wait_until(lambda: runtime.knowledge.stats(folder.id).files == 1, 60)

        qloop.run_until_complete(indexed())
        chat = win.controller.conversation_id
        assert chat is not None
        assert runtime.store.get_conversation(chat).title == "Knowledge: trip"
        notes = [i for i in win.chat_view.chat_model.items if isinstance(i, NoticeItem)]
        assert notes and notes[-1].message.startswith(f"{trip} is now knowledge for this chat")
        assert runtime.knowledge.search("boat departure time", conversation_id=chat)
        assert not runtime.knowledge.search("boat departure time")  # not in other chats

        win.chat_knowledge_action.trigger()

        async def refused() -> None:
            await wait_until(
                lambda: any(isinstance(i, ErrorItem) for i in win.chat_view.chat_model.items),
                20,
            )

        qloop.run_until_complete(refused())
        error = [i for i in win.chat_view.chat_model.items if isinstance(i, ErrorItem)][-1]
        assert error.message.startswith("Not added as knowledge: ")
        assert len(runtime.knowledge.all_folders()) == 1
    finally:
        win.stop_background_work()
