"""The settings dialog against real services: the scripted model server over HTTP, a real
gnome-keyring for API keys, and settings.json on disk (pytest-qt, offscreen, qasync)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from app.core.local_servers import Candidate
from app.core.rules import Rule, RuleDecision
from app.core.runtime import Runtime
from app.core.secrets import SERVICE, SecretStore, secret_key
from app.ui import theme
from app.ui.settings.dialog import SettingsDialog
from app.ui.settings.presets import PRESETS
from app.ui.settings.providers_page import ProvidersPage
from tests.fakellm import ScriptedLLM, error, hang
from tests.fixtures_keyring import MemoryKeyring
from tests.fixtures_qt import wait_until

pytestmark = pytest.mark.gui

OTHER = next(p for p in PRESETS if p.name.startswith("Other"))
OPENAI = next(p for p in PRESETS if p.name == "OpenAI")
KEY = "sk-test-4f9c2b7e1d"


def run(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    return loop.run_until_complete(asyncio.wait_for(coro, timeout=30))


@pytest.fixture
def restore_theme(qapp: QApplication) -> Iterator[None]:
    """The QApplication outlives this module: put its look back as it was."""
    style, palette, sheet = qapp.style().name(), QPalette(qapp.palette()), qapp.styleSheet()
    yield
    follower = qapp.findChild(theme._SchemeFollower)
    if follower is not None:
        follower.setParent(None)
        follower.deleteLater()
    qapp.setStyleSheet(sheet)
    qapp.setPalette(palette)
    qapp.setStyle(style)


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
    result = page.test_result.text()
    assert "API key was rejected" in result and "HTTP 401" in result
    assert KEY not in result
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
    assert "Could not reach" in page.test_result.text()


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
    assert [tools.rule_combo("fs_read_file").itemText(i) for i in range(2)] == ["Allow", "Never"]

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

    async def body() -> None:
        assert await dialog.save()

    run(qloop, body())
    data = saved_json(runtime)
    assert data["general"] == {
        "theme": "dark",
        "start_minimized": True,
        "start_at_login": False,
        "send_key": "ctrl_enter",
    }
    assert data["max_steps"] == 40
    assert runtime.settings.max_steps == 40


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
    assert page.error_label.isVisible() and page.error_label.text()
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
