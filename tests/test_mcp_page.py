"""Settings → MCP servers against a real stdio MCP server (tests/mcp_servers.py), mcp.json on
disk and a memory keyring: add, connect, disable, set the approval rule, import, remove."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication

from app.core.mcp.status import Status
from app.core.paths import mcp_path
from app.core.rules import RuleDecision, rule_from_legacy_pattern
from app.core.runtime import Runtime
from app.ui.settings import mcp_page
from app.ui.settings.mcp_page import McpPage
from tests import test_settings_dialog as base
from tests.fixtures_qt import wait_until
from tests.test_settings_dialog import run

runtime = base.runtime
restore_theme = base.restore_theme

pytestmark = pytest.mark.gui

SERVER = str(Path(__file__).with_name("mcp_servers.py"))
TOKEN = "tok-5e6f7a8b9c0d"


def mcp_json(runtime: Runtime) -> dict[str, Any]:
    return json.loads(mcp_path(runtime.home).read_text("utf-8"))["mcpServers"]


@pytest.fixture
def page(qtbot: Any, qloop: Any, runtime: Runtime, restore_theme: None) -> McpPage:
    from app.ui import theme

    theme.apply_theme(QApplication.instance(), "light")  # type: ignore[arg-type]
    widget = McpPage(runtime)
    qtbot.addWidget(widget)
    widget.resize(720, 560)  # its size in the settings dialog
    widget.show()
    run(qloop, asyncio.shield(widget.ensure_loaded()))
    return widget


@pytest.fixture
def confirmations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    asked: list[str] = []

    def yes(parent: Any, title: str, text: str) -> bool:
        asked.append(text)
        return True

    monkeypatch.setattr(mcp_page, "confirm", yes)
    return asked


def fill_stdio(page: McpPage, name: str, env: str = "") -> None:
    page.add_server()
    editor = page.editor
    editor.name_edit.setText(name)
    editor.transport_combo.setCurrentIndex(0)
    editor.command_edit.setText(sys.executable)
    editor.args_edit.setText(f"{SERVER} stdio")
    editor.env_edit.setPlainText(env)


def test_add_connect_disable_remove(
    page: McpPage, qloop: Any, runtime: Runtime, confirmations: list[str]
) -> None:
    async def body() -> None:
        fill_stdio(page, "notes", env=f"MCP_TEST_TOKEN={TOKEN}\nPLAIN=hello")
        assert await page.save_editor()
        saved = mcp_json(runtime)["notes"]
        assert saved["command"] == sys.executable
        assert saved["args"] == [SERVER, "stdio"]
        # the token went to the keyring; mcp.json only refers to it
        assert saved["env"]["MCP_TEST_TOKEN"] == "keyring:mcp/notes/MCP_TEST_TOKEN"
        assert saved["env"]["PLAIN"] == "hello"
        assert runtime.secrets.get("mcp/notes/MCP_TEST_TOKEN") == TOKEN
        assert TOKEN not in mcp_path(runtime.home).read_text("utf-8")
        assert page.current_name() == "notes"

        await page.connect_servers()
        await wait_until(
            lambda: page.states.get("notes") and page.states["notes"].status is Status.READY,
            timeout=30,
            what="the server to be ready",
        )
        await wait_until(lambda: "Ready · 10 tools" in page.status_label.text(), what="status")
        assert page.server_list.currentItem().data(mcp_page.DETAIL_ROLE) == "Ready · 10 tools"
        # the manager resolved the keyring reference when it started the server
        assert len(runtime.mcp.states()[0].tools) == 10

        # disable through the form, as a user does
        page.editor.enabled_check.setChecked(False)
        assert await page.save_editor()
        assert mcp_json(runtime)["notes"]["disabled"] is True
        assert mcp_json(runtime)["notes"]["env"]["PLAIN"] == "hello"
        assert page.status_label.text() == "Disabled"
        assert page.server_list.currentItem().data(mcp_page.DETAIL_ROLE) == "Disabled"
        assert runtime.mcp.states()[0].status is Status.DISABLED  # stopped and re-read
        # enabled again: it restarts by itself, since servers were connected
        await page.set_enabled("notes", True)
        assert "disabled" not in mcp_json(runtime)["notes"]
        await wait_until(lambda: "Ready · 10 tools" in page.status_label.text(), timeout=30)

        page.select("notes")
        assert await page.remove_selected()
        assert confirmations and "notes" in confirmations[0]
        assert mcp_json(runtime) == {}
        assert page.server_list.count() == 0
        assert runtime.secrets.get("mcp/notes/MCP_TEST_TOKEN") is None  # its secret too
        await wait_until(lambda: runtime.mcp.states() == [], what="the manager to forget it")

    run(qloop, body())


def test_failed_server_shows_stderr(page: McpPage, qloop: Any, runtime: Runtime) -> None:
    async def body() -> None:
        page.add_server()
        page.editor.name_edit.setText("broken")
        page.editor.command_edit.setText(sys.executable)
        page.editor.args_edit.setText(
            "-c \"import sys; print('boom: no config', file=sys.stderr); sys.exit(2)\""
        )
        assert await page.save_editor()
        await page.connect_servers()
        await wait_until(
            lambda: (
                "Failed" in page.status_label.text()
                and "boom: no config" in page.status_label.text()
            ),
            timeout=30,
            what="the failure with the stderr tail",
        )
        assert page.grab().save("/tmp/mcp_page_failed.png")
        # the arguments read back as typed, and split the same way
        page.select("broken")
        args = page.editor.args_edit.text()
        assert args == "-c \"import sys; print('boom: no config', file=sys.stderr); sys.exit(2)\""
        assert await page.save_editor()
        assert mcp_json(runtime)["broken"]["args"][0] == "-c"

    run(qloop, body())


def test_edit_validation_and_rule(
    page: McpPage, qloop: Any, runtime: Runtime, confirmations: list[str]
) -> None:
    async def body() -> None:
        page.add_server()
        assert not await page.save_editor()
        assert "name" in page.editor.error_label.text()
        page.editor.name_edit.setText("remote")
        page.editor.transport_combo.setCurrentIndex(1)
        page.editor.url_edit.setText("ftp://nope")
        assert not await page.save_editor()
        assert "http" in page.editor.error_label.text()
        page.editor.url_edit.setText("https://mcp.example.com/mcp")
        page.editor.headers_edit.setPlainText("X-Team: blue")
        page.editor.token_edit.setText(TOKEN)
        page.editor.rule_combo.setCurrentIndex(page.editor.rule_combo.findData("deny"))
        assert await page.save_editor()
        saved = mcp_json(runtime)["remote"]
        assert saved["url"] == "https://mcp.example.com/mcp"
        assert saved["headers"] == {
            "X-Team": "blue",
            "Authorization": "keyring:mcp/remote/oauth_token",
        }
        assert runtime.secrets.get("mcp/remote/oauth_token") == f"Bearer {TOKEN}"
        # editing again keeps the stored token without showing it
        page.select("remote")
        assert page.editor.token_stored and page.editor.token_edit.text() == ""
        assert "Authorization" not in page.editor.headers_edit.toPlainText()
        assert await page.save_editor()
        assert mcp_json(runtime)["remote"]["headers"]["Authorization"].startswith("keyring:")

        # the rule is saved with the dialog's Save, as a rule for every tool of the server
        def server_rules(name: str) -> set[tuple[str, str, str]]:
            return {
                (r.tool, r.decision.value, r.matcher.kind)
                for r in runtime.rules.rules()
                if r.source == f"mcp:{name}"
            }

        def save() -> None:
            page.patch()(runtime.settings)
            page.commit()
            page.mark_saved(runtime.settings)

        save()
        assert server_rules("remote") == {("*", "deny", "any")}
        assert runtime.settings.approvals.deny == []  # not the lists of earlier versions
        page.editor.rule_combo.setCurrentIndex(page.editor.rule_combo.findData("allow"))
        save()
        assert server_rules("remote") == {("*", "allow", "any")}
        # renaming moves the rule to the new name
        page.editor.name_edit.setText("remote2")
        assert await page.save_editor()
        assert list(mcp_json(runtime)) == ["remote2"]
        save()
        assert server_rules("remote2") == {("*", "allow", "any")}
        assert server_rules("remote") == set()
        # removing the server drops its rule (at the dialog's Save) and its token
        page.select("remote2")
        assert await page.remove_selected()
        assert runtime.secrets.get("mcp/remote/oauth_token") is None
        save()
        assert server_rules("remote2") == set()

    run(qloop, body())


def test_import_claude_desktop_config(
    page: McpPage, qloop: Any, runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"]},
                    "gh": {
                        "command": "gh-mcp",
                        "env": {"GITHUB_TOKEN": TOKEN},
                    },
                },
                "globalShortcut": "Ctrl+Space",
            }
        )
    )
    monkeypatch.setattr(mcp_page, "choose_config_file", lambda parent, start: source)

    async def body() -> None:
        await page.import_from_file()
        servers = mcp_json(runtime)
        assert set(servers) == {"files", "gh"}
        assert servers["gh"]["env"]["GITHUB_TOKEN"] == "keyring:mcp/gh/GITHUB_TOKEN"
        assert runtime.secrets.get("mcp/gh/GITHUB_TOKEN") == TOKEN
        assert [page.server_list.item(i).text() for i in range(2)] == ["files", "gh"]
        assert "Imported 2 servers" in page.message.text()

        # the platform's default location (XDG_CONFIG_HOME here): existing ones are kept
        config_home = tmp_path / "xdg"
        (config_home / "Claude").mkdir(parents=True)
        (config_home / "Claude" / "claude_desktop_config.json").write_text(
            source.read_text("utf-8")
        )
        monkeypatch.setattr(sys, "platform", "linux")
        monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
        await page.import_from(None)
        assert "Imported 0 servers" in page.message.text()
        assert "kept existing files, gh" in page.message.text()

        # a broken file is reported, nothing changes
        source.write_text("{not json")
        await page.import_from_file()
        assert "Could not import" in page.message.text()
        assert set(mcp_json(runtime)) == {"files", "gh"}

    run(qloop, body())


def test_screenshot(page: McpPage, qloop: Any, tmp_path: Path) -> None:
    async def body() -> None:
        fill_stdio(page, "notes", env=f"MCP_TEST_TOKEN={TOKEN}")
        assert await page.save_editor()
        await page.connect_servers()
        await wait_until(lambda: "Ready" in page.status_label.text(), timeout=30)

    run(qloop, body())
    out = Path("/tmp/mcp_page.png")
    assert page.grab().save(str(out))


def test_opens_with_existing_servers_and_rules(
    qtbot: Any, qloop: Any, runtime: Runtime, restore_theme: None
) -> None:
    mcp_path(runtime.home).write_text(
        json.dumps(
            {
                "mcpServers": {
                    "off": {"command": "x", "disabled": True},
                    "web": {"url": "https://example.com/sse"},
                }
            }
        )
    )
    # a rule kept from an earlier version's per-tool list
    runtime.rules.add(rule_from_legacy_pattern("mcp__web__*", RuleDecision.DENY))
    page = McpPage(runtime)
    qtbot.addWidget(page)
    page.show()
    run(qloop, asyncio.shield(page.ensure_loaded()))
    assert [page.server_list.item(i).text() for i in range(2)] == ["off", "web"]
    assert page.server_list.item(0).data(mcp_page.DETAIL_ROLE) == "Disabled"
    page.select("web")
    assert page.editor.transport() == "http"
    assert page.editor.url_edit.text() == "https://example.com/sse"
    assert page.editor.rule() == "deny"
    assert not page.editor.command_edit.isVisible()
    before = runtime.rules.rules()
    page.patch()(runtime.settings)  # nothing changed, nothing moves
    page.commit()
    assert runtime.rules.rules() == before


def test_the_stderr_tail_on_the_page_masks_secrets_and_controls() -> None:
    """The page's handler sees a server's log record before the root handlers' redaction."""
    import logging

    tail = mcp_page.stderr_tail()
    token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    logging.getLogger("deskhand.mcp.leaky").warning("[leaky] auth failed for %s\x1b[2J", token)
    [line] = tail.tail("leaky")
    assert token not in line and "\x1b" not in line and "auth failed" in line


def test_a_bad_entry_is_shown_with_its_field_and_the_others_run(
    qtbot: Any, qloop: Any, runtime: Runtime, restore_theme: None
) -> None:
    mcp_path(runtime.home).write_text(
        json.dumps(
            {
                "mcpServers": {
                    "broken": {"command": "x", "timeout": "fast"},
                    "web": {"url": "https://example.com/mcp", "disabled": True},
                }
            }
        )
    )
    states = {s.name: s for s in runtime.mcp.states()}
    assert states["broken"].status is Status.INVALID
    assert states["web"].status is Status.DISABLED  # the good entry is still there
    text, role = mcp_page.status_text(states["broken"], [])
    assert role == "error" and "timeout" in text and "broken" in text


def test_a_bad_entry_shows_its_problem_before_any_server_started(
    qtbot: Any, qloop: Any, runtime: Runtime, restore_theme: None
) -> None:
    mcp_path(runtime.home).write_text(
        json.dumps({"mcpServers": {"broken": {"command": "x", "timeout": "fast"}}})
    )
    page = McpPage(runtime)
    qtbot.addWidget(page)
    page.show()
    run(qloop, asyncio.shield(page.ensure_loaded()))
    assert "mcp" not in runtime.__dict__  # nothing was started to learn this
    page.select("broken")
    assert "cannot be used" in page.status_label.text() and "timeout" in page.status_label.text()
