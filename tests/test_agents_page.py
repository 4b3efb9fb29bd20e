"""Settings → Agents against the real AgentBook, the real tool registry and settings.json on
disk (pytest-qt, offscreen, qasync): Deskhand's agents listed "Built in" and read-only but
duplicable, the user's added, edited and removed through the page, each problem shown by
its field with nothing saved, and saving done off the GUI thread."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.core.runtime import Runtime
from app.core.settings import ProviderAccount, Settings
from app.ui.settings import agents_page
from app.ui.settings.agents_page import BUILTIN_ROLE, AgentEditor, AgentsPage
from tests import test_settings_dialog as base
from tests.fixtures_qt import wait_until
from tests.test_settings_dialog import run, saved_json

runtime = base.runtime
open_dialog = base.open_dialog
restore_theme = base.restore_theme

pytestmark = pytest.mark.gui

NOTE_TAKER = {
    "name": "Note taker",
    "description": "Files meeting notes.",
    "tools": ["fs_read_file", "fs_write_file"],
}


@dataclass
class Question:
    """The remove question: the names it asked about, and the answers still to give
    (Remove when none are left)."""

    names: list[str] = field(default_factory=list)
    answers: list[bool] = field(default_factory=list)

    def __call__(self, _parent: Any, name: str) -> bool:
        self.names.append(name)
        return self.answers.pop(0) if self.answers else True


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> Question:
    question = Question()
    monkeypatch.setattr(agents_page, "confirm_remove", question)
    return question


def agents_page_of(open_dialog: Any, runtime: Runtime) -> AgentsPage:
    """The page as the settings window shows it (built through its registration)."""
    dialog = open_dialog(runtime, page="agents")
    assert dialog.current_page() == "agents"
    page = dialog.agents
    assert isinstance(page, AgentsPage)
    return page


def saved_agents(runtime: Runtime) -> list[dict[str, Any]]:
    if not runtime.settings_store.path.exists():
        return []
    agents: list[dict[str, Any]] = saved_json(runtime).get("agents", [])
    return agents


def retype(qtbot: Any, edit: Any, text: str) -> None:
    edit.selectAll()
    qtbot.keyClick(edit, Qt.Key.Key_Backspace)
    qtbot.keyClicks(edit, text)


async def click_save(qtbot: Any, editor: AgentEditor) -> None:
    """Save as the user does; returns when the book has answered."""
    qtbot.mouseClick(editor.save_button, Qt.MouseButton.LeftButton)
    task = editor.saving
    assert task is not None
    await task


def test_lists_deskhand_agents_as_built_in_then_the_users_own(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime
) -> None:
    runtime.agents.add(NOTE_TAKER)
    page = agents_page_of(open_dialog, runtime)

    assert page.names() == ["Researcher", "Reviewer", "Note taker"]
    marks = [page.list.item(row).data(BUILTIN_ROLE) for row in range(page.list.count())]
    assert marks == [True, True, False]
    spoken = page.list.item(0).data(Qt.ItemDataRole.AccessibleTextRole)
    assert spoken == "Researcher, built in"

    assert page.select("Note taker")
    assert page.detail.name.text() == "Note taker"
    assert page.detail.tools.text() == "fs_read_file\nfs_write_file"
    assert page.detail.model.text() == "Same as the conversation"
    assert not page.detail.tag.isVisible() and not page.detail.note.isVisible()
    assert page.select("Researcher")
    assert page.detail.tag.isVisible() and page.detail.note.isVisible()
    assert page.detail.tools.text() == "Every built-in tool that only reads"


def test_adding_an_agent_through_the_editor_saves_it_in_settings_json(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, tmp_path: Path
) -> None:
    work = ProviderAccount(kind="openai", label="Work", base_url="http://127.0.0.1:9/v1")

    def add_account(settings: Settings) -> None:
        settings.providers = [work]

    runtime.settings = runtime.settings_store.update(add_account)
    notes = tmp_path / "notes"
    dialog = open_dialog(runtime, page="agents")
    page: AgentsPage = dialog.agents

    async def body() -> None:
        qtbot.mouseClick(page.add_button, Qt.MouseButton.LeftButton)
        editor = page.editor
        assert editor is not None and editor.isVisible()
        accounts = [editor.account.itemText(i) for i in range(editor.account.count())]
        assert accounts == ["Same as the conversation", "Work"]
        assert editor.tools.toPlainText() == "read-only"  # the definition's default
        qtbot.keyClicks(editor.name, "Note taker")
        qtbot.keyClicks(editor.description, "Files meeting notes.")
        qtbot.keyClicks(editor.instructions, "Write short Markdown notes.")
        editor.account.setCurrentIndex(accounts.index("Work"))
        qtbot.keyClicks(editor.model, "small-model")
        editor.tools.setPlainText("read-only\nfs_write_file")
        editor.allow.setPlainText(f"fs_write_file,folder={notes}")
        editor.steps.setValue(7)
        editor.tokens.setValue(50_000)
        qtbot.keyClick(editor.name, Qt.Key.Key_Return)  # the editor's default button
        task = editor.saving
        assert task is not None
        await task
        await wait_until(lambda: page.editor is None, what="the editor to close")

    run(qloop, body())
    [saved] = saved_agents(runtime)
    assert saved["name"] == "Note taker"
    assert saved["description"] == "Files meeting notes."
    assert saved["instructions"] == "Write short Markdown notes."
    assert (saved["provider"], saved["model"]) == (work.id, "small-model")
    assert saved["tools"] == ["read-only", "fs_write_file"]
    assert saved["allow"] == [f"fs_write_file,folder={notes}"]
    assert (saved["max_steps"], saved["max_tokens"]) == (7, 50_000)
    agent = runtime.agents.get("note taker")
    assert agent is not None and agent.id == saved["id"]

    assert page.names() == ["Researcher", "Reviewer", "Note taker"]
    assert page.selected_name() == "Note taker"
    assert page.detail.model.text() == "Work · small-model"
    assert page.status.text() == "Saved the agent “Note taker”."
    assert not dialog.save_button.isEnabled()  # saved at once: nothing waits for Save


@pytest.mark.parametrize(
    ("field", "name", "tools", "allow", "expected"),
    [
        ("tools", "Helper", "fs_read_file\nfs_nope", "", "No tool is called 'fs_nope'"),
        (
            "allow",
            "Helper",
            "shell_run",
            "shell_run,command=python",
            "a rule for “python” alone would let a run execute anything",
        ),
        ("name", "note TAKER", "fs_read_file", "", "There is already an agent called 'Note taker'"),
        ("name", "reviewer", "fs_read_file", "", "'reviewer' is the name of an agent Deskhand"),
    ],
)
def test_a_bad_entry_is_shown_by_its_field_and_nothing_is_saved(
    qtbot: Any,
    qloop: Any,
    open_dialog: Any,
    runtime: Runtime,
    field: str,
    name: str,
    tools: str,
    allow: str,
    expected: str,
) -> None:
    runtime.agents.add(NOTE_TAKER)
    before = runtime.settings_store.path.read_bytes()
    page = agents_page_of(open_dialog, runtime)
    editor = page.open_editor("add")
    assert editor is not None

    async def body() -> None:
        qtbot.keyClicks(editor.name, name)
        qtbot.keyClicks(editor.description, "Helps.")
        editor.tools.setPlainText(tools)
        editor.allow.setPlainText(allow)
        await click_save(qtbot, editor)

    run(qloop, body())
    assert expected in editor.error(field)
    others = [row for row in ("name", "tools", "allow", "model", "limits", "") if row != field]
    assert [row for row in others if editor.error(row)] == []
    assert editor.fields[field].property("invalid") is True
    assert editor.isVisible() and page.editor is editor  # open, with everything typed
    assert editor.name.text() == name
    assert runtime.settings_store.path.read_bytes() == before
    assert page.names() == ["Researcher", "Reviewer", "Note taker"]

    if field == "name":
        retype(qtbot, editor.name, "Helper")
    else:
        getattr(editor, field).setPlainText("fs_read_file")
    assert editor.error(field) == ""  # changing the field takes its problem away
    assert editor.fields[field].property("invalid") is False


def test_builtins_cannot_be_edited_or_removed_but_can_be_duplicated(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, asked: Question
) -> None:
    page = agents_page_of(open_dialog, runtime)
    assert page.select("Reviewer")
    assert not page.edit_button.isEnabled()
    assert not page.remove_button.isEnabled()
    assert page.duplicate_button.isEnabled()
    page.list.setFocus()
    qtbot.keyClick(page.list, Qt.Key.Key_Delete)
    qtbot.keyClick(page.list, Qt.Key.Key_Return)
    assert asked.names == [] and page.editor is None  # neither asked nor opened
    reviewer = runtime.agents.get("Reviewer")
    assert reviewer is not None

    async def body() -> None:
        qtbot.mouseClick(page.duplicate_button, Qt.MouseButton.LeftButton)
        editor = page.editor
        assert editor is not None
        assert editor.name.text() == "Reviewer copy"
        assert editor.name.selectedText() == "Reviewer copy"  # typing replaces it
        assert editor.instructions.toPlainText() == reviewer.instructions
        assert editor.tools.toPlainText().splitlines() == reviewer.tools
        await click_save(qtbot, editor)
        await wait_until(lambda: page.editor is None, what="the editor to close")

    run(qloop, body())
    [copy] = saved_agents(runtime)
    assert copy["name"] == "Reviewer copy"
    assert copy["tools"] == reviewer.tools and copy["max_steps"] == reviewer.max_steps
    assert copy["id"] != reviewer.id
    assert page.names() == ["Researcher", "Reviewer", "Reviewer copy"]
    assert page.selected_name() == "Reviewer copy"
    assert page.edit_button.isEnabled() and page.remove_button.isEnabled()
    assert runtime.agents.builtin("Reviewer")


def test_remove_asks_and_removes_the_agent(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, asked: Question
) -> None:
    runtime.agents.add(NOTE_TAKER)
    runtime.agents.add({**NOTE_TAKER, "name": "Sorter", "description": "Sorts."})
    page = agents_page_of(open_dialog, runtime)
    assert page.select("Note taker")
    asked.answers.append(False)

    assert page.remove_selected() is None  # "Cancel"
    assert asked.names == ["Note taker"]
    assert [a["name"] for a in saved_agents(runtime)] == ["Note taker", "Sorter"]

    async def body() -> None:
        page.list.setFocus()
        qtbot.keyClick(page.list, Qt.Key.Key_Delete)  # asks again: "Remove"
        await wait_until(lambda: "Note taker" not in page.names(), what="the removal")

    run(qloop, body())
    assert asked.names == ["Note taker", "Note taker"]
    assert [a["name"] for a in saved_agents(runtime)] == ["Sorter"]
    assert runtime.agents.get("Note taker") is None
    assert page.names() == ["Researcher", "Reviewer", "Sorter"]
    assert page.status.text() == "Removed the agent “Note taker”."


def test_editing_renames_the_agent_and_keeps_its_id(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime
) -> None:
    added = runtime.agents.add(NOTE_TAKER)
    page = agents_page_of(open_dialog, runtime)
    assert page.select("Note taker")

    async def body() -> None:
        page.list.setFocus()
        qtbot.keyClick(page.list, Qt.Key.Key_Return)  # Enter opens the selected agent
        editor = page.editor
        assert editor is not None and editor.mode == "edit"
        assert editor.save_button.text() == "Save"
        retype(qtbot, editor.name, "Minute taker")
        editor.steps.setValue(30)
        await click_save(qtbot, editor)
        await wait_until(lambda: page.editor is None, what="the editor to close")

    run(qloop, body())
    [saved] = saved_agents(runtime)
    assert (saved["id"], saved["name"], saved["max_steps"]) == (added.id, "Minute taker", 30)
    assert saved["tools"] == NOTE_TAKER["tools"]
    assert page.names() == ["Researcher", "Reviewer", "Minute taker"]
    assert page.detail.limits.text().startswith("At most 30 steps")


def test_saving_waits_off_the_gui_thread_and_the_editor_says_so(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime
) -> None:
    page = agents_page_of(open_dialog, runtime)
    editor = page.open_editor("add")
    assert editor is not None
    qtbot.keyClicks(editor.name, "Slow")
    qtbot.keyClicks(editor.description, "Waits for the settings file.")
    lock = runtime.settings_store._lock  # the writer's lock: held, the save must wait

    async def body() -> None:
        lock.acquire()
        try:
            qtbot.mouseClick(editor.save_button, Qt.MouseButton.LeftButton)
            task = editor.saving
            assert task is not None
            for _ in range(20):  # the GUI thread keeps running while the worker waits
                await asyncio.sleep(0)
            assert not task.done()
            assert editor.status.text() == "Saving…"
            assert not editor.save_button.isEnabled() and not editor.cancel_button.isEnabled()
            qtbot.keyClick(editor, Qt.Key.Key_Escape)  # never left half-way
            assert editor.isVisible()
            assert runtime.agents.get("Slow") is None
        finally:
            lock.release()
        await task
        await wait_until(lambda: page.editor is None, what="the editor to close")

    run(qloop, body())
    assert [a["name"] for a in saved_agents(runtime)] == ["Slow"]
    assert page.selected_name() == "Slow"


def test_escape_closes_the_editor_without_saving(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime
) -> None:
    page = agents_page_of(open_dialog, runtime)
    editor = page.open_editor("add")
    assert editor is not None
    qtbot.keyClicks(editor.name, "Unsaved")
    qtbot.keyClicks(editor.description, "Never saved.")
    qtbot.keyClick(editor.name, Qt.Key.Key_Escape)
    assert page.editor is None
    assert saved_agents(runtime) == []
    assert page.names() == ["Researcher", "Reviewer"]
