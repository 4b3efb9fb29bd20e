"""The composer with MCP servers, on real Qt widgets (offscreen) and the real
test server (tests/mcp_servers.py over stdio): resources attached from the + menu, prompts
offered after "/" and filled in a small form. Without MCP nothing of it shows, and nothing
MCP is imported."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QFileDialog, QLabel

from app.core.attachments import build_user_message
from app.core.mcp.catalog import ResourceEntry, resource_entries
from app.core.mcp.manager import McpManager
from app.ui.composer import Composer
from app.ui.mcp_picker import PromptForm, ResourcePicker
from tests.fixtures_qt import wait_until
from tests.test_mcp import SERVER, write_config
from tests.test_settings_dialog import restore_theme, run

pytestmark = pytest.mark.gui
__all__ = ["restore_theme"]  # a fixture used by name

PROMPT_TEXT = "[Prompt /notes:summarize from the MCP server notes]\n\nSummarize cats."


@pytest.fixture(scope="module")
def manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpManager]:
    home = tmp_path_factory.mktemp("composer-mcp")
    config = write_config(home, {"notes": {"command": sys.executable, "args": [SERVER, "stdio"]}})
    manager = McpManager(config, home=home)
    manager.tool_manifests(wait=30)
    yield manager
    manager.shutdown()


@pytest.fixture
def composer(qtbot: Any, qloop: Any, restore_theme: None, manager: McpManager) -> Composer:
    from app.ui import theme

    theme.apply_theme(QApplication.instance(), "light")  # type: ignore[arg-type]
    widget = Composer()
    widget.set_mcp(lambda: manager)
    qtbot.addWidget(widget)
    widget.resize(760, 120)
    widget.show()
    return widget


class Sent(list[tuple[str, list[str]]]):
    def __call__(self, text: str, files: list[str]) -> None:
        self.append((text, files))


@pytest.fixture
def sent(composer: Composer) -> Sent:
    record = Sent()
    composer.sendRequested.connect(record)
    return record


def open_picker(qtbot: Any, composer: Composer) -> ResourcePicker:
    qtbot.mouseClick(composer.attach_button, Qt.MouseButton.LeftButton)
    menu = composer.attach_menu
    assert menu is not None and menu.isVisible()
    actions = {a.text(): a for a in menu.actions()}
    assert list(actions) == ["Files…", "From an MCP server…"]
    actions["From an MCP server…"].trigger()
    picker = composer.picker
    assert picker is not None and picker.isVisible()
    return picker


def shown_items(picker: ResourcePicker) -> list[str]:
    rows = [picker.list.item(i) for i in range(picker.list.count())]
    return [item.text() for item in rows if not item.isHidden()]


# ---- resources ---------------------------------------------------------------------------------


def test_the_attach_menu_lists_the_resources_with_a_filter(qtbot: Any, composer: Composer) -> None:
    picker = open_picker(qtbot, composer)
    assert shown_items(picker) == ["hello\nnotes · note://hello"]
    assert picker.list.currentItem() is not None
    qtbot.keyClicks(picker.filter, "nothing like it")
    assert shown_items(picker) == [] and picker.empty.text() == "No resource matches."
    assert not picker.list.isVisible() and picker.empty.isVisible()
    picker.filter.clear()
    qtbot.keyClicks(picker.filter, "NOTES hel")  # server and name, any case
    assert shown_items(picker) == ["hello\nnotes · note://hello"]


def test_attaching_a_resource_adds_a_chip_and_sends_its_labelled_content(
    qtbot: Any, qloop: Any, composer: Composer, sent: Sent
) -> None:
    picker = open_picker(qtbot, composer)
    qtbot.keyClick(picker.filter, Qt.Key.Key_Return)
    assert not picker.isVisible()
    (chip,) = composer.mcp_chips
    assert chip.label.text() == "hello · notes"
    assert chip.status.text() == "reading…"
    composer.edit.setPlainText("What does the note say?")
    composer.submit()  # still reading: nothing goes yet
    assert sent == [] and composer.text() == "What does the note say?"

    run(qloop, composer.settle())
    assert chip.ready and not chip.status.isVisible()
    composer.submit()
    ((text, files),) = sent
    assert text == "What does the note say?"
    assert [Path(f).name for f in files] == ["hello (MCP notes).txt"]
    message, problems = build_user_message(text, files)
    assert problems == []
    assert "[Untrusted data from MCP server notes (resource note://hello)" in message.content
    assert "Hello from a resource" in message.content
    assert composer.mcp_chips == [] and composer.text() == ""


def test_a_read_error_shows_next_to_the_chip_and_sends_nothing(
    qloop: Any, composer: Composer, sent: Sent
) -> None:
    chip = composer.attach_resource(
        ResourceEntry(server="notes", uri="note://missing", name="missing")
    )
    run(qloop, composer.settle())
    assert chip.state == "error" and chip.status.isVisible()
    reason = "Not attached: the MCP server answered with an error: Unknown resource: note://missing"
    assert chip.status.text().startswith("Not attached: the MCP server answered")
    assert reason in chip.status.toolTip()  # the whole reason, where the chip is too small
    assert chip.status.textFormat() == Qt.TextFormat.PlainText
    composer.submit()  # nothing to send: no text, and the failed resource is not sent
    assert sent == []
    composer.edit.setPlainText("hi")
    composer.submit()
    assert sent == [("hi", [])]


def test_a_hostile_resource_name_is_shown_as_plain_text(qloop: Any, composer: Composer) -> None:
    (entry,) = resource_entries(
        "notes",
        [SimpleNamespace(uri="note://missing", name="<b>bold</b>\u202eexe", description="<i>")],
    )
    chip = composer.attach_resource(entry)
    assert chip.label.textFormat() == Qt.TextFormat.PlainText
    assert chip.label.text() == "<b>bold</b>⟨U+202E⟩exe · notes"
    assert "&lt;i&gt;" in chip.label.toolTip()
    run(qloop, composer.settle())


def test_removing_a_chip_while_reading_drops_it(qloop: Any, composer: Composer) -> None:
    chip = composer.attach_resource(ResourceEntry(server="notes", uri="note://hello", name="h"))
    composer.remove_mcp_chip(chip)
    run(qloop, composer.settle())
    assert composer.mcp_chips == [] and not chip.ready
    assert not composer._chips_box.isVisible()


# ---- prompts ---------------------------------------------------------------------------------


def slash_popup(composer: Composer) -> Any:
    completer = composer.edit.completer
    return completer.popup() if completer is not None else None


def popup_rows(composer: Composer) -> list[str]:
    completer = composer.edit.completer
    assert completer is not None
    model = completer.completionModel()
    return [model.index(i, 0).data() for i in range(model.rowCount())]


def test_slash_offers_the_prompts_and_filling_one_puts_its_text_in_the_composer(
    qtbot: Any, qloop: Any, composer: Composer, sent: Sent
) -> None:
    qtbot.keyClicks(composer.edit, "/")
    popup = slash_popup(composer)
    assert popup is not None and popup.isVisible()
    assert popup_rows(composer) == ["/notes:summarize   Ask for a summary."]
    qtbot.keyClicks(composer.edit, "summ")
    assert popup.isVisible() and popup.currentIndex().row() == 0
    qtbot.keyClick(popup, Qt.Key.Key_Return)

    form = composer.prompt_form
    assert isinstance(form, PromptForm) and form.isVisible()
    assert composer.text() == ""  # the "/" text made way for the form
    labels = [w.text() for w in form.findChildren(QLabel)]
    assert "topic *" in labels and "/notes:summarize" in labels
    form.insert_button.click()  # the required argument is empty
    assert form.message.text() == "/notes:summarize needs a value for: topic"
    qtbot.keyClicks(form.fields["topic"], "cats")
    qtbot.keyClick(form.fields["topic"], Qt.Key.Key_Return)
    assert not form.insert_button.isEnabled()
    assert form.message.text() == "Getting the prompt from notes…"

    run(qloop, composer.settle())
    assert composer.prompt_form is None
    assert composer.text() == PROMPT_TEXT
    assert sent == []  # the user reads, edits and sends it
    composer.set_text(composer.text() + " Briefly.")
    composer.submit()
    assert sent == [(PROMPT_TEXT + " Briefly.", [])]


def test_escape_closes_the_popup_and_other_text_is_not_a_command(
    qtbot: Any, composer: Composer, sent: Sent
) -> None:
    qtbot.keyClicks(composer.edit, "/nothing-like-it")
    assert slash_popup(composer) is None or not slash_popup(composer).isVisible()
    composer.edit.clear()
    qtbot.keyClicks(composer.edit, "/")
    popup = slash_popup(composer)
    assert popup.isVisible()
    qtbot.keyClick(popup, Qt.Key.Key_Escape)
    assert not popup.isVisible()
    qtbot.keyClicks(composer.edit, "etc/hosts is broken")
    assert not popup.isVisible()
    qtbot.keyClick(composer.edit, Qt.Key.Key_Return)
    assert sent == [("/etc/hosts is broken", [])]


def test_cancelling_the_form_leaves_the_composer_as_it_was(
    qtbot: Any, composer: Composer, manager: McpManager
) -> None:
    (prompt,) = manager.prompts()
    form = composer.choose_prompt(prompt)
    qtbot.keyClick(form.fields["topic"], Qt.Key.Key_Escape)
    assert composer.prompt_form is None and form.cancel.is_set()
    assert composer.text() == ""


# ---- without MCP -----------------------------------------------------------------------------


def test_without_mcp_the_plus_button_picks_files_and_slash_offers_nothing(
    qtbot: Any, qloop: Any, restore_theme: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    picked = tmp_path / "notes.txt"
    picked.write_text("x")
    asked: list[str] = []
    filters: list[str] = []

    def dialog(parent: Any, title: str, folder: str, choices: str) -> tuple[list[str], str]:
        asked.append(title)
        filters.append(choices)
        return [str(picked)], ""

    monkeypatch.setattr(QFileDialog, "getOpenFileNames", dialog)
    composer = Composer()
    composer.set_mcp(lambda: None)  # as the window's runtime before any server started
    qtbot.addWidget(composer)
    composer.show()
    qtbot.mouseClick(composer.attach_button, Qt.MouseButton.LeftButton)
    assert asked == ["Attach files"] and composer.attach_menu is None
    assert composer.attachments == [str(picked)]
    # documents and images first, any file still allowed
    assert filters[0].startswith("Documents and images (*.pdf *.docx")
    assert filters[0].endswith(";;All files (*)")
    qtbot.keyClicks(composer.edit, "/")
    assert composer.edit.completer is None
    assert composer.open_resource_picker() is None


def test_the_window_without_mcp_json_imports_nothing_mcp(tmp_path: Path) -> None:
    """The real window, its + button clicked and "/" typed: no MCP module is loaded."""
    code = textwrap.dedent(
        """
        import asyncio, json, sys
        from PySide6.QtCore import Qt
        from PySide6.QtTest import QTest
        from PySide6.QtWidgets import QApplication, QFileDialog
        import qasync
        app = QApplication([])
        asyncio.set_event_loop(qasync.QEventLoop(app))
        QFileDialog.getOpenFileNames = staticmethod(lambda *a, **k: ([], ""))
        from app.ui.main import App
        gui = App(app, sys.argv[1])
        gui.show()
        app.processEvents()
        composer = gui.window.composer
        QTest.mouseClick(composer.attach_button, Qt.MouseButton.LeftButton)
        QTest.keyClicks(composer.edit, "/")
        app.processEvents()
        mine = ("app.core.mcp.manager", "app.core.mcp.catalog", "app.ui.mcp_picker")
        loaded = sorted(m for m in sys.modules if m == "mcp" or m.startswith("mcp.")
                        or m in mine)
        print(json.dumps({"loaded": loaded, "menu": composer.attach_menu is not None,
                          "completer": composer.edit.completer is not None}))
        """
    )
    env = {"QT_QPA_PLATFORM": "offscreen", "DESKHAND_HOME": str(tmp_path), "CI": "true"}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**_base_env(), **env},
        cwd=Path(__file__).resolve().parents[1],
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"loaded": [], "menu": False, "completer": False}


def _base_env() -> dict[str, str]:
    import os

    keep = ("PATH", "HOME", "LANG", "PYTHONPATH", "XDG_RUNTIME_DIR", "TMPDIR")
    return {k: v for k, v in os.environ.items() if k in keep}


def test_the_window_offers_the_servers_once_they_started(
    qtbot: Any, qloop: Any, home: Path, markers: Path
) -> None:
    from app.core.runtime import Runtime
    from app.ui.main_window import MainWindow

    write_config(home, {"notes": {"command": sys.executable, "args": [SERVER, "stdio"]}})
    runtime = Runtime(home, entry_points=False)
    window = MainWindow(runtime)
    qtbot.addWidget(window)
    try:
        assert window.composer.mcp_manager() is None  # nothing started yet
        assert runtime.start_mcp()

        async def body() -> None:
            await wait_until(lambda: window.composer.mcp_manager() is not None)
            await wait_until(lambda: runtime.mcp.prompts(), timeout=30, what="the prompts")

        run(qloop, body())
        assert window.composer.mcp_manager() is runtime.mcp
    finally:
        window.stop_background_work()
        runtime.close()
        asyncio.set_event_loop(qloop)
