"""The settings dialog against real services: the scripted model server over HTTP, a real
gnome-keyring for API keys, and settings.json on disk (pytest-qt, offscreen, qasync)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QCheckBox, QLineEdit, QScrollArea, QSpinBox

from app.core.local_servers import Candidate
from app.core.rules import Rule, RuleDecision
from app.core.runtime import Runtime
from app.core.secrets import SERVICE, SecretStore, secret_key
from app.ui import theme
from app.ui.settings import dialog as dialog_module
from app.ui.settings.dialog import PAGE_KEYS, SettingsDialog
from app.ui.settings.presets import PRESETS
from app.ui.settings.providers_page import ProvidersPage
from tests.fakellm import ScriptedLLM, error, hang
from tests.fixtures_keyring import MemoryKeyring
from tests.fixtures_qt import restore_look, saved_look, wait_until

pytestmark = pytest.mark.gui

OTHER = next(p for p in PRESETS if p.name.startswith("Other"))
OPENAI = next(p for p in PRESETS if p.name == "OpenAI")
KEY = "sk-test-4f9c2b7e1d"
#: Where to save screenshots to look at (DESKHAND_SHOTS=folder); none by default.
SHOTS = os.environ.get("DESKHAND_SHOTS")


def run(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    return loop.run_until_complete(asyncio.wait_for(coro, timeout=30))


@pytest.fixture
def restore_theme(qapp: QApplication) -> Iterator[None]:
    """The QApplication outlives this module: put its look back as it was."""
    look = saved_look(qapp)
    yield
    follower = qapp.findChild(theme._SchemeFollower)
    if follower is not None:
        follower.setParent(None)
        follower.deleteLater()
    restore_look(qapp, look)


@pytest.fixture
def runtime(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    rt = Runtime(home, entry_points=False)
    rt.secrets = SecretStore(backend=MemoryKeyring())
    yield rt
    rt.close()


@pytest.fixture
def open_dialog(
    qtbot: Any, qloop: asyncio.AbstractEventLoop, restore_theme: None, qapp: QApplication
) -> Iterator[Any]:
    """Opens dialogs. Save closes a dialog: with no other window, Qt would then quit the
    application and stop the loop mid-test, as the real app (which keeps a tray) does not."""
    quit_on_close = qapp.quitOnLastWindowClosed()
    qapp.setQuitOnLastWindowClosed(False)

    def make(runtime: Runtime, page: str = "providers") -> SettingsDialog:
        dialog = SettingsDialog(runtime, page=page)
        qtbot.addWidget(dialog)
        dialog.show()
        run(qloop, asyncio.shield(dialog.key_states))  # a task must not outlive the loop
        return dialog

    yield make
    qapp.setQuitOnLastWindowClosed(quit_on_close)


def saved_json(runtime: Runtime) -> dict[str, Any]:
    return json.loads(runtime.settings_store.path.read_text("utf-8"))


def add_server_account(qtbot: Any, page: ProvidersPage, url: str) -> Any:
    """Add an OpenAI-compatible account the way a user does: preset, then type the URL."""
    account = page.add_account(OTHER)
    retype(qtbot, page.url_edit, url)
    assert account.base_url == url
    return account


def retype(qtbot: Any, edit: Any, text: str) -> None:
    """Replace a line edit's text by typing, so the edit signals fire as for a user."""
    edit.selectAll()
    qtbot.keyClick(edit, Qt.Key.Key_Backspace)
    qtbot.keyClicks(edit, text)


async def click_save(qtbot: Any, dialog: SettingsDialog) -> list[bool]:
    saved: list[bool] = []
    dialog.settingsChanged.connect(lambda: saved.append(True))
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    return saved


def test_add_provider_refresh_models_and_test_connection(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, llm: ScriptedLLM
) -> None:
    dialog = open_dialog(runtime)
    page = dialog.providers

    async def body() -> None:
        account = add_server_account(qtbot, page, llm.openai_base_url)
        assert page.active == account.id  # the first account becomes the active one

        qtbot.mouseClick(page.refresh_button, Qt.MouseButton.LeftButton)
        await wait_until(lambda: page.model_combo.count() == 2, what="the model list")
        assert [page.model_combo.itemText(i) for i in range(2)] == list(llm.models)
        assert page.model_combo.currentText() == "fake-model"
        assert page.test_result.text() == "✓ 2 models available"

        llm.add(hang("OK"))  # the one-token ping blocks until released
        qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)
        await asyncio.to_thread(llm.wait_for_hang)
        assert not page.test_button.isEnabled()
        assert not page.refresh_button.isEnabled()
        llm.release()
        await wait_until(lambda: page.test_result.text().startswith("✓"), what="the result")
        assert page.test_result.text() == "✓ Connected: 2 models available; “fake-model” answered"
        assert page.test_button.isEnabled()
        assert llm.requests[-1].body["model"] == "fake-model"

        saved = await click_save(qtbot, dialog)
        await wait_until(lambda: saved, what="settingsChanged")

    run(qloop, body())
    assert not dialog.isVisible()  # Save closes the dialog
    data = saved_json(runtime)
    assert data["providers"][0]["base_url"] == llm.openai_base_url
    assert data["providers"][0]["model"] == "fake-model"
    assert data["active_provider"] == data["providers"][0]["id"]
    assert runtime.settings.active_provider_account() is not None
    assert runtime.provider_config().model == "fake-model"


def test_rejected_key_shows_a_readable_failure_without_the_key(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, llm: ScriptedLLM
) -> None:
    dialog = open_dialog(runtime)
    page = dialog.providers

    async def body() -> None:
        add_server_account(qtbot, page, llm.openai_base_url)
        qtbot.keyClicks(page.key_edit, KEY)
        page.model_combo.setEditText("fake-model")
        llm.add(error(401))  # the fake server echoes the key in its message, like real ones
        qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)
        await wait_until(lambda: page.test_result.text().startswith("✗"), what="the failure")

    run(qloop, body())
    # said next to the key field (errors go next to the field that caused them)
    said = page.field_error("key")
    assert "refused the key" in said and "HTTP 401" in said
    assert KEY not in said + page.test_result.text()
    assert page.test_result.property("role") == "error"
    assert llm.requests[-1].headers["authorization"] == f"Bearer {KEY}"  # the typed key was used


def test_unreachable_server_says_so(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, unused_port: int
) -> None:
    dialog = open_dialog(runtime)
    page = dialog.providers

    async def body() -> None:
        add_server_account(qtbot, page, f"http://127.0.0.1:{unused_port}/v1")
        qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)
        await wait_until(lambda: page.test_result.text().startswith("✗"), what="the failure")

    run(qloop, body())
    assert "Could not reach" in page.field_error("url")


@pytest.mark.keyring
def test_api_key_goes_to_the_real_keyring_and_never_to_settings_json(
    qtbot: Any, qloop: Any, open_dialog: Any, home: Path, keyring_env: dict[str, str]
) -> None:
    import keyring

    runtime = Runtime(home, entry_points=False)  # the real keyring, via keyring_env
    try:
        dialog = open_dialog(runtime)
        page = dialog.providers

        async def body() -> str:
            account = page.add_account(OPENAI)
            qtbot.keyClicks(page.key_edit, KEY)
            assert "when you save" in page.key_status.text()
            saved = await click_save(qtbot, dialog)
            await wait_until(lambda: saved, what="settingsChanged")
            return account.id

        account_id = run(qloop, body())
        username = secret_key("provider", account_id, "api_key")
        assert keyring.get_password(SERVICE, username) == KEY
        on_disk = runtime.settings_store.path.read_text("utf-8")
        assert KEY not in on_disk
        assert saved_json(runtime)["providers"][0]["id"] == account_id

        # Reopened: the key is known to be stored, but not shown.
        again = open_dialog(runtime)
        page = again.providers

        async def reopened() -> None:
            await wait_until(lambda: page.forget_button.isEnabled(), what="the key state")

        run(qloop, reopened())
        assert page.key_edit.text() == ""
        assert "stored in the system keyring" in page.key_status.text()
        assert KEY not in page.key_edit.placeholderText()

        # Removing the account removes its key.
        async def remove() -> None:
            page.remove_selected()
            saved = await click_save(qtbot, again)
            await wait_until(lambda: saved, what="settingsChanged")

        run(qloop, remove())
        assert keyring.get_password(SERVICE, username) is None
        assert saved_json(runtime)["providers"] == []
    finally:
        runtime.close()


def test_tool_calls_choice_is_saved_with_the_account(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, llm: ScriptedLLM
) -> None:
    dialog = open_dialog(runtime)
    page = dialog.providers
    anthropic = next(p for p in PRESETS if p.kind == "anthropic")
    combo = page.tool_combo

    async def body() -> None:
        claude = page.add_account(anthropic)
        assert not combo.isVisible()  # Anthropic has native tool use only: no choice
        assert not page.tool_hint.isVisible()
        account = add_server_account(qtbot, page, llm.openai_base_url)
        assert combo.isVisible() and page.tool_hint.isVisible()
        items = [combo.itemText(i) for i in range(combo.count())]
        assert items == ["Automatic (recommended)", "Native tool_calls only", "Off (chat only)"]
        assert combo.currentText() == "Automatic (recommended)"
        hint = page.tool_hint.text()
        combo.setCurrentIndex(combo.findText("Off (chat only)"))
        assert account.tool_format == "none"
        assert page.tool_hint.text() != hint
        page.account_list.setCurrentRow(page._index_of(claude.id))  # away and back
        assert not combo.isVisible()
        page.account_list.setCurrentRow(page._index_of(account.id))
        assert combo.isVisible() and combo.currentText() == "Off (chat only)"
        saved = await click_save(qtbot, dialog)
        await wait_until(lambda: saved, what="settingsChanged")

    run(qloop, body())
    providers = saved_json(runtime)["providers"]
    assert [p["tool_format"] for p in providers] == ["auto", "none"]
    assert runtime.settings.providers[1].tool_format == "none"
    reopened = open_dialog(runtime)  # the choice is shown again
    reopened.providers.account_list.setCurrentRow(1)
    assert reopened.providers.tool_combo.currentText() == "Off (chat only)"


def test_tool_toggles_rules_and_folders_persist(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, tmp_path: Path
) -> None:
    dialog = open_dialog(runtime, page="tools")
    tools = dialog.tools
    assert dialog.current_page() == "tools"
    assert tools.rule("fs_read_file") == "allow"  # READ runs by default
    assert tools.rule("fs_delete") == "ask"
    assert tools.rule_choices("fs_read_file") == ["Allow", "Never"]

    tools.set_enabled("fs_move", False)
    tools.set_rule("fs_delete", "deny")
    tools.set_rule("fs_write_file", "allow")
    tools.set_rule("fs_read_file", "deny")
    tools.add_root(str(tmp_path))
    # Meanwhile the chat grants "always allow" for another tool: saving must keep it.
    runtime.rules.add(Rule(tool="fs_copy", decision=RuleDecision.ALLOW, origin="a card"))

    async def body() -> None:
        saved = await click_save(qtbot, dialog)
        await wait_until(lambda: saved, what="settingsChanged")

    run(qloop, body())
    data = saved_json(runtime)
    assert data["tools"]["disabled"] == ["fs_move"]
    # rules, not the per-tool lists of earlier versions
    assert data["approvals"] == {"always_allow": [], "deny": []}
    stored = json.loads((runtime.home / "rules.json").read_text())["rules"]
    got = {(r["tool"], r["source"], r["decision"], r["matcher"]["kind"]) for r in stored}
    assert got == {
        ("fs_delete", "builtin", "deny", "any"),
        ("fs_read_file", "builtin", "deny", "any"),
        ("fs_write_file", "builtin", "allow", "any"),
        ("fs_copy", "builtin", "allow", "any"),
    }
    assert data["files"]["allowed_roots"] == [str(tmp_path)]
    assert data["files"]["folders_chosen"] is True
    assert runtime.new_session().enabled("fs_move") is False
    # back to "Ask": the tool's rule goes away, nothing else does
    reopened = open_dialog(runtime, page="tools")
    assert reopened.tools.rule("fs_delete") == "deny"
    reopened.tools.set_rule("fs_delete", "ask")

    async def again() -> None:
        saved = await click_save(qtbot, reopened)
        await wait_until(lambda: saved, what="settingsChanged")

    run(qloop, again())
    assert {(r.tool, r.decision.value) for r in runtime.rules.rules()} == {
        ("fs_read_file", "deny"),
        ("fs_write_file", "allow"),
        ("fs_copy", "allow"),
    }


def test_category_checkbox_disables_all_its_tools(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime
) -> None:
    dialog = open_dialog(runtime, page="tools")
    fs = dialog.tools.tool_item("fs_read_file").parent()
    fs.setCheckState(0, Qt.CheckState.Unchecked)
    assert not dialog.tools.is_enabled("fs_write_file")

    async def body() -> None:
        assert await dialog.save()

    run(qloop, body())
    disabled = saved_json(runtime)["tools"]["disabled"]
    assert {m.name for m in runtime.registry.manifests() if m.category == "fs"} == set(disabled)


def test_theme_applies_immediately_and_cancel_restores_it(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, qapp: QApplication
) -> None:
    dialog = open_dialog(runtime, page="general")
    combo = dialog.general.theme_combo
    window = QPalette.ColorRole.Window

    combo.setCurrentIndex(combo.findData("light"))
    light = qapp.palette().color(window)
    assert dialog.palette().color(window) == light  # the open window was restyled
    combo.setCurrentIndex(combo.findData("dark"))
    dark = qapp.palette().color(window)
    assert dark != light
    assert dark.lightness() < light.lightness()
    assert dialog.palette().color(window) == dark
    assert theme.current_theme(qapp) == "dark"

    dialog.reject()  # saved theme is "system"; offscreen reports no scheme → light
    assert qapp.palette().color(window) == light
    assert runtime.settings_store.path.exists() is False


def test_general_settings_save(qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime) -> None:
    dialog = open_dialog(runtime, page="general")
    g = dialog.general
    g.theme_combo.setCurrentIndex(g.theme_combo.findData("dark"))
    g.minimized_check.setChecked(True)
    g.send_combo.setCurrentIndex(g.send_combo.findData("ctrl_enter"))
    g.steps_spin.setValue(40)
    g.font_spin.setValue(14)

    async def body() -> None:
        assert await dialog.save()

    run(qloop, body())
    data = saved_json(runtime)
    assert data["general"] == {
        "theme": "dark",
        "font_size": 14,
        "start_minimized": True,
        "start_at_login": False,
        "send_key": "ctrl_enter",
    }
    assert data["max_steps"] == 40
    assert runtime.settings.max_steps == 40
    assert runtime.settings.general.font_size == 14


def test_system_mode_follows_the_os_scheme(
    qapp: QApplication, restore_theme: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    hints = QGuiApplication.styleHints()
    assert theme.apply_theme(qapp, "system") == theme.system_scheme()
    # The offscreen platform has no OS scheme to switch: stand in for the OS going dark.
    monkeypatch.setattr(theme, "system_scheme", lambda: "dark")
    hints.colorSchemeChanged.emit(Qt.ColorScheme.Dark)
    assert theme.current_theme(qapp) == "dark"
    assert qapp.palette().color(QPalette.ColorRole.Window).name() == theme.DARK.window

    assert theme.apply_theme(qapp, "light") == "light"  # an explicit choice ignores the OS
    hints.colorSchemeChanged.emit(Qt.ColorScheme.Dark)
    assert theme.current_theme(qapp) == "light"
    assert qapp.palette().color(QPalette.ColorRole.Window).name() == theme.LIGHT.window


@pytest.mark.parametrize("url", ["not a url", "", "ftp://example.com/v1", "http://:80/v1"])
def test_invalid_base_url_refuses_to_save(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, url: str
) -> None:
    dialog = open_dialog(runtime)
    page = dialog.providers
    account = page.add_account(OTHER)
    retype(qtbot, page.url_edit, url)
    assert account.base_url == url.strip()
    dialog.show_page("general")

    async def body() -> None:
        qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
        await wait_until(lambda: dialog.message.text(), what="the refusal")

    run(qloop, body())
    assert dialog.message.text().startswith("Nothing was saved.")
    assert dialog.current_page() == "providers"  # shows where the problem is
    assert page.field_error("url")  # next to the URL field
    assert page.url_edit.property("invalid") is True
    assert dialog.isVisible()
    assert not runtime.settings_store.path.exists()
    assert runtime.settings.providers == []


def test_detect_local_servers_adds_them(
    qtbot: Any,
    qloop: Any,
    open_dialog: Any,
    runtime: Runtime,
    llm: ScriptedLLM,
    unused_port: int,
) -> None:
    dialog = open_dialog(runtime)
    page = dialog.providers
    page.local_candidates = (
        Candidate("Ollama", llm.openai_base_url),
        Candidate("LM Studio", f"http://127.0.0.1:{unused_port}/v1"),
    )

    async def body() -> None:
        qtbot.mouseClick(page.detect_button, Qt.MouseButton.LeftButton)
        await wait_until(lambda: page.detect_result.text().startswith("Found"), what="detection")
        qtbot.mouseClick(page.detect_button, Qt.MouseButton.LeftButton)  # a second time
        await wait_until(lambda: "already set up" in page.detect_result.text(), what="again")

    run(qloop, body())
    assert [(a.label, a.base_url, a.model) for a in page.accounts] == [
        ("Ollama", llm.openai_base_url, "fake-model")
    ]
    assert page.active == page.accounts[0].id
    assert page.model_combo.count() == 2


# ---- one save behaviour: Save only with changes, problems marked, unsaved changes asked ----


def visit_every_page(qloop: Any, dialog: SettingsDialog) -> None:
    """Show each page once, letting what they load when shown finish."""

    async def body() -> None:
        for key in PAGE_KEYS:
            dialog.show_page(key)
            await asyncio.sleep(0)
        await asyncio.gather(*dialog.terminal.pending(), return_exceptions=True)

    run(qloop, body())


def test_save_is_enabled_only_while_something_changed(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime
) -> None:
    dialog = open_dialog(runtime, page="general")
    visit_every_page(qloop, dialog)
    assert not dialog.save_button.isEnabled()  # opening and looking changes nothing

    spin = dialog.general.font_spin
    spin.setFocus()
    qtbot.keyClick(spin, Qt.Key.Key_Up)  # 0 → 1: not a valid size, but a change
    assert dialog.save_button.isEnabled()
    spin.setValue(0)  # back as it was
    assert not dialog.save_button.isEnabled()

    dialog.tools.set_enabled("fs_move", False)  # a page that does not report edits itself
    assert dialog.save_button.isEnabled()
    dialog.tools.set_enabled("fs_move", True)
    assert not dialog.save_button.isEnabled()

    dialog.browser.form.editor("headless", QCheckBox).setChecked(False)

    async def save() -> None:
        saved = await click_save(qtbot, dialog)
        await wait_until(lambda: saved, what="settingsChanged")

    run(qloop, save())
    assert saved_json(runtime)["browser"]["headless"] is False
    assert not dialog.save_button.isEnabled()


def test_a_problem_keeps_the_window_open_and_marks_its_page(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime
) -> None:
    dialog = open_dialog(runtime, page="general")
    dialog.general.font_spin.setValue(5)
    field_error = dialog.general.appearance.error_label("font_size")
    assert field_error.isVisible()  # shown as soon as it is typed
    assert field_error.text() == "Use 8 points or more, or 0 for the system size."
    dialog.show_page("about")

    async def body() -> None:
        qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
        await wait_until(lambda: dialog.message.text(), what="the refusal")

    run(qloop, body())
    assert dialog.isVisible()
    assert dialog.current_page() == "general"  # taken to the page with the problem
    problem = "Chat text size: Use 8 points or more, or 0 for the system size."
    assert dialog.message.text() == f"Nothing was saved. {problem}"
    assert dialog.problem_labels["general"].isVisible()
    assert dialog.problem_labels["general"].text() == problem
    item = dialog.nav.item(PAGE_KEYS.index("general"))
    assert dialog.problem_of("general") == problem and not item.icon().isNull()
    assert dialog.problem_of("browser") is None
    assert not runtime.settings_store.path.exists()

    dialog.general.font_spin.setValue(12)  # fixed: the mark goes at once
    assert dialog.problem_of("general") is None and item.icon().isNull()
    assert not dialog.problem_labels["general"].isVisible()
    assert run(qloop, dialog.save())
    assert saved_json(runtime)["general"]["font_size"] == 12


def _unwritable(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """settings.json cannot be written (a full disk, a read-only folder)."""
    path = str(runtime.settings_store.path)

    def refuse(settings: Any) -> None:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(runtime.settings_store, "save", refuse)


def _save_and_wait(qtbot: Any, qloop: Any, dialog: SettingsDialog) -> None:
    async def body() -> None:
        qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
        await wait_until(lambda: dialog.message.text(), what="the message")
        await wait_until(dialog.save_button.isEnabled, what="the save to end")

    run(qloop, body())


def test_keys_stored_before_settings_json_failed_are_named_not_nothing_saved(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    dialog = open_dialog(runtime)
    page = dialog.providers
    account = page.add_account(OPENAI)
    qtbot.keyClicks(page.key_edit, KEY)
    _unwritable(runtime, monkeypatch)
    _save_and_wait(qtbot, qloop, dialog)

    said = dialog.message.text()
    assert "Nothing was saved" not in said
    assert said.startswith(
        "The API keys were updated in the keyring, but the other settings were not saved."
    )
    assert f"Permission denied ({runtime.settings_store.path})." in said
    assert runtime.secrets.get(secret_key("provider", account.id, "api_key")) == KEY
    assert not runtime.settings_store.path.exists() and runtime.settings.providers == []
    assert dialog.isVisible() and dialog.save_button.isEnabled()  # the user may try again


def test_settings_json_failing_with_no_key_change_says_nothing_was_saved(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    dialog = open_dialog(runtime, page="general")
    dialog.general.font_spin.setValue(14)
    _unwritable(runtime, monkeypatch)
    _save_and_wait(qtbot, qloop, dialog)
    assert dialog.message.text() == (
        "Nothing was saved: the settings file could not be written. "
        f"Permission denied ({runtime.settings_store.path})."
    )


class _RefusingSecondKey(MemoryKeyring):
    """Takes the first key it is given and refuses the others."""

    def set_password(self, service: str, username: str, password: str) -> None:
        if self.items:
            raise RuntimeError("the collection is read-only")
        super().set_password(service, username, password)


def test_a_key_the_keyring_refuses_after_another_was_stored_says_which_part_stayed(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime
) -> None:
    backend = _RefusingSecondKey()
    runtime.secrets = SecretStore(backend=backend)
    dialog = open_dialog(runtime)
    page = dialog.providers
    for _ in range(2):
        page.add_account(OPENAI)
        qtbot.keyClicks(page.key_edit, KEY)
    _save_and_wait(qtbot, qloop, dialog)

    said = dialog.message.text()
    assert said.startswith(
        "The settings were not saved: the keyring refused an API key change. Could not save"
    )
    assert said.endswith("Key changes made before it are kept in the keyring.")
    assert KEY not in said
    assert len(backend.items) == 1 and not runtime.settings_store.path.exists()


def test_a_single_key_refused_says_nothing_was_saved(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime
) -> None:
    backend = _RefusingSecondKey()
    backend.items[("other", "x")] = "taken"  # so that even the first key is refused
    runtime.secrets = SecretStore(backend=backend)
    dialog = open_dialog(runtime)
    page = dialog.providers
    page.add_account(OPENAI)
    qtbot.keyClicks(page.key_edit, KEY)
    _save_and_wait(qtbot, qloop, dialog)
    assert dialog.message.text().startswith("Nothing was saved. Could not save")
    assert not runtime.settings_store.path.exists()


def test_rules_that_cannot_be_written_after_the_settings_say_what_was_saved(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    dialog = open_dialog(runtime, page="general")
    dialog.general.font_spin.setValue(14)

    def refuse() -> None:
        raise PermissionError(13, "Permission denied", "rules.json")

    monkeypatch.setattr(dialog.mcp, "commit", refuse)
    _save_and_wait(qtbot, qloop, dialog)
    assert dialog.message.text() == (
        "The settings were saved, but the approval rules were not: Permission denied "
        "(rules.json). Press Save to try the rules again."
    )
    assert saved_json(runtime)["general"]["font_size"] == 14
    assert runtime.settings.general.font_size == 14  # what is saved is in use


@pytest.mark.parametrize("answer", ["cancel", "discard", "save"])
def test_closing_with_unsaved_changes_asks(
    qtbot: Any,
    qloop: Any,
    open_dialog: Any,
    runtime: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
) -> None:
    asked: list[str] = []

    def ask(parent: Any) -> str:
        asked.append(parent.windowTitle())
        return answer

    monkeypatch.setattr(dialog_module, "ask_unsaved", ask)
    dialog = open_dialog(runtime, page="memory")
    qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
    assert not dialog.isVisible() and asked == []  # nothing changed: closes, no question

    dialog = open_dialog(runtime, page="memory")
    dialog.memory.form.editor("enabled", QCheckBox).setChecked(False)
    saved: list[bool] = []
    dialog.settingsChanged.connect(lambda: saved.append(True))

    async def body() -> None:
        qtbot.keyClick(dialog, Qt.Key.Key_Escape)
        if answer == "save":
            await wait_until(lambda: saved, what="the save")

    run(qloop, body())
    assert asked == ["Deskhand settings"]
    assert dialog.isVisible() == (answer == "cancel")
    if answer == "save":
        assert saved_json(runtime)["memory"]["enabled"] is False
    else:
        assert not runtime.settings_store.path.exists()


def test_every_model_page_saves_its_fields(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime
) -> None:
    dialog = open_dialog(runtime, page="instructions")
    assert dialog.instructions.edit.toPlainText() == ""  # None: the built-in ones
    qtbot.mouseClick(dialog.instructions.builtin_button, Qt.MouseButton.LeftButton)
    assert dialog.instructions.edit.toPlainText().strip()  # the built-in text, to edit
    dialog.instructions.edit.setPlainText("Answer in French.\nBe brief.")
    browser = dialog.browser.form
    browser.editor("executable", QLineEdit).setText("/opt/chromium/chrome")
    browser.editor("idle_close_seconds", QSpinBox).setValue(600)
    browser.editor("ask_new_sites", QCheckBox).setChecked(False)
    combo = dialog.security.keyring_combo
    combo.setCurrentIndex(combo.findData("encrypted_file"))
    dialog.memory.form.editor("inject_chars", QSpinBox).setValue(4000)
    dialog.general.conversations.editor("compact_after_chars", QSpinBox).setValue(0)
    assert run(qloop, dialog.save())
    data = saved_json(runtime)
    assert data["system_prompt"] == "Answer in French.\nBe brief."
    assert data["browser"] == {
        "executable": "/opt/chromium/chrome",
        "headless": True,
        "ask_new_sites": False,
        "idle_close_seconds": 600,
    }
    assert data["security"] == {"keyring": "encrypted_file"}
    assert data["memory"] == {"enabled": True, "inject_chars": 4000}
    assert data["conversation"] == {"compact_after_chars": 0}

    again = open_dialog(runtime, page="instructions")  # empty again: back to the built-in
    again.instructions.edit.setPlainText("   ")
    assert run(qloop, again.save())
    assert saved_json(runtime)["system_prompt"] is None


def test_an_older_settings_file_loads_and_keeps_what_the_user_did_not_touch(
    qtbot: Any, qloop: Any, open_dialog: Any, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    older = {
        "version": 1,
        "general": {"theme": "dark", "start_minimized": True, "send_key": "ctrl_enter"},
        "browser": {"idle_close_seconds": 0, "headless": False},  # 0: hand-edited
        "max_steps": 150,
        "system_prompt": "Mine.",
        "shell": {"sandbox": "off", "timeout": 600},
    }
    (home / "settings.json").write_text(json.dumps(older))
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    rt = Runtime(home, entry_points=False)
    rt.secrets = SecretStore(backend=MemoryKeyring())
    try:
        assert not list(home.glob("settings.json.corrupt-*"))
        assert rt.settings.browser.idle_close_seconds == 300  # out of range: the default
        dialog = open_dialog(rt, page="general")
        assert dialog.general.theme_combo.currentData() == "dark"
        assert dialog.general.font_spin.text() == "System default"
        assert dialog.general.steps_spin.value() == 150
        assert dialog.instructions.edit.toPlainText() == "Mine."
        assert dialog.terminal.choice() == "off"
        dialog.general.font_spin.setValue(16)
        assert run(qloop, dialog.save())
        data = saved_json(rt)
        assert data["general"]["font_size"] == 16
        assert data["general"]["theme"] == "dark" and data["general"]["send_key"] == "ctrl_enter"
        assert data["max_steps"] == 150 and data["system_prompt"] == "Mine."
        assert data["shell"] == {"sandbox": "off", "timeout": 600}
        assert data["browser"]["headless"] is False
    finally:
        rt.close()


MODEL_PAGES = ("terminal", "browser", "memory", "general", "instructions", "security", "about")


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_every_page_fits_800_by_600(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, qapp: QApplication, mode: str
) -> None:
    theme.apply_theme(qapp, mode)  # type: ignore[arg-type]
    dialog = open_dialog(runtime)
    dialog.resize(800, 600)
    assert (dialog.width(), dialog.height()) == (800, 600)
    visit_every_page(qloop, dialog)
    for key in PAGE_KEYS:
        dialog.show_page(key)
        qapp.processEvents()
        scroll = dialog.stack.currentWidget().findChild(QScrollArea, "settingsPageScroll")
        assert scroll is not None
        page = dialog.pages[key]
        # never squeezed below its minimum: what does not fit scrolls, it is not cut off
        assert page.width() >= page.minimumSizeHint().width(), f"{key} is cut off"
        assert page.height() >= page.minimumSizeHint().height(), f"{key} is cut off"
        if key in MODEL_PAGES:  # the pages built from the settings model fit in width
            assert not scroll.horizontalScrollBar().isVisible(), f"{key} is too wide"
            assert scroll.widget().width() <= scroll.viewport().width()
        if SHOTS:
            dialog.grab().save(f"{SHOTS}/settings-{key}-{mode}.png")
    for button in (dialog.save_button, dialog.cancel_button):
        corner = button.mapTo(dialog, button.rect().bottomRight())
        assert dialog.rect().contains(corner), "the buttons are cut off"
    assert dialog.nav.count() == len(PAGE_KEYS)


def test_opening_builds_only_the_page_shown_and_a_click_builds_the_next(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime
) -> None:
    dialog = open_dialog(runtime, page="general")
    assert set(dialog.pages) == {"general"}
    dialog.nav.setCurrentRow(PAGE_KEYS.index("browser"))  # as a click in the list does
    assert set(dialog.pages) == {"general", "browser"}
    box = dialog.stack.currentWidget()
    assert box.isAncestorOf(dialog.pages["browser"])


def test_closing_cancels_a_running_task_of_every_page(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime
) -> None:
    dialog = open_dialog(runtime, page="sources")
    listing = dialog.sources.refresh()  # started when the page showed, not finished yet
    waits: dict[str, asyncio.Task[Any]] = {}
    for key in PAGE_KEYS:
        task = dialog.page(key).start_task(asyncio.Event().wait())
        assert task is not None
        waits[key] = task

    dialog.reject()

    async def settled() -> None:
        await asyncio.wait([listing, *waits.values()], timeout=10)

    run(qloop, settled())
    assert listing.cancelled()
    assert [key for key, task in waits.items() if not task.cancelled()] == []
    assert dialog.pages == {}  # dropped: the next open builds them afresh


def test_reopening_shows_the_settings_changed_meanwhile_and_saves_from_there(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime
) -> None:
    dialog = open_dialog(runtime, page="general")
    first = dialog.general
    first.font_spin.setValue(13)  # edited, then closed without saving
    dialog.reject()

    def elsewhere(settings: Any) -> None:  # e.g. the window changed a setting
        settings.general.font_size = 15
        settings.max_steps = 33

    runtime.settings = runtime.settings_store.update(elsewhere)
    dialog.show_page("general")
    dialog.open()
    assert dialog.general is not first
    assert dialog.general.font_spin.value() == 15
    assert dialog.general.steps_spin.value() == 33
    assert not dialog.save_button.isEnabled()  # nothing edited in this opening

    dialog.general.font_spin.setValue(11)
    assert dialog.save_button.isEnabled()
    assert run(qloop, dialog.save())
    assert saved_json(runtime)["general"]["font_size"] == 11
    assert saved_json(runtime)["max_steps"] == 33
