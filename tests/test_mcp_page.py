"""Settings → MCP servers against a real stdio MCP server (tests/mcp_servers.py), mcp.json on
disk and a memory keyring: add, connect, disable, set the approval rule, import, remove."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.core.mcp.manager import McpManager
from app.core.mcp.secret_access import SecretAccess, token_key
from app.core.mcp.status import ServerState, Status
from app.core.paths import mcp_path
from app.core.rules import RuleDecision, rule_from_legacy_pattern
from app.core.runtime import Runtime
from app.core.secrets import SecretStore
from app.ui.settings import mcp_page, mcp_signin
from app.ui.settings.mcp_page import McpPage
from tests import test_settings_dialog as base
from tests.fixtures_keyring import MemoryKeyring
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
                page.status_label.text() == "Could not start"
                and "boom: no config" in page.output_box.toPlainText()
                and page.output_box.isVisible()
            ),
            timeout=30,
            what="the failure with the stderr tail",
        )
        # one start's output (the manager's copy), not every restart's
        assert page.output_box.toPlainText().count("boom: no config") == 1
        assert "boom: no config" in page.status_line("broken")
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
        # each problem is shown under the field it is about, in plain words
        assert page.editor.field_error("name") == "Give this server a name."
        assert page.editor.name_edit.hasFocus()
        page.editor.name_edit.setText("remote")
        assert page.editor.field_error("name") == ""  # typing clears it
        page.editor.transport_combo.setCurrentIndex(1)
        page.editor.url_edit.setText("ftp://nope")
        assert not await page.save_editor()
        assert "http" in page.editor.field_error("url")
        page.editor.url_edit.setText("https://mcp.example.com/mcp")
        page.editor.headers_edit.setPlainText("X-Team: blue")
        page.editor.auth_combo.setCurrentIndex(page.editor.auth_combo.findData("token"))
        assert not await page.save_editor()  # a token sign-in needs the token
        assert "access token" in page.editor.field_error("token")
        page.editor.token_edit.setText(TOKEN)
        page.editor.rule_combo.setCurrentIndex(page.editor.rule_combo.findData("deny"))
        assert await page.save_editor()
        saved = mcp_json(runtime)["remote"]
        assert saved["url"] == "https://mcp.example.com/mcp"
        assert saved["headers"] == {
            "X-Team": "blue",
            "Authorization": "keyring:mcp/remote/oauth_token",
        }
        assert saved["auth"] == "none"  # the token is the sign-in: no browser round trip
        assert runtime.secrets.get("mcp/remote/oauth_token") == f"Bearer {TOKEN}"
        # editing again keeps the stored token without showing it
        page.select("remote")
        assert page.editor.auth_kind() == "token"
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
        assert page.message.text() == "No server was imported; kept existing files, gh."

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


def test_a_token_argument_typed_into_the_form_goes_to_the_keyring(
    page: McpPage, qloop: Any, runtime: Runtime
) -> None:
    """The form's arguments go through the same secret mover as an import: a `--token=…`
    or `--api-key VALUE` typed there never stays in clear in mcp.json."""
    flag = "flag-secret-42"

    async def body() -> None:
        fill_stdio(page, "notes")
        page.editor.args_edit.setText(f"{SERVER} stdio --token={TOKEN} --api-key {flag}")
        assert await page.save_editor()
        text = mcp_path(runtime.home).read_text("utf-8")
        assert TOKEN not in text and flag not in text
        args = mcp_json(runtime)["notes"]["args"]
        assert args[2] == "--token=${keyring:mcp/notes/arg3}"
        assert runtime.secrets.get("mcp/notes/arg3") == TOKEN
        assert runtime.secrets.get("mcp/notes/arg5") == flag
        # the form shows the references; saving again changes nothing
        page.select("notes")
        assert TOKEN not in page.editor.args_edit.text()
        assert await page.save_editor()
        assert mcp_json(runtime)["notes"]["args"] == args
        assert runtime.secrets.get("mcp/notes/arg3") == TOKEN

    run(qloop, body())


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
    assert role == "error" and "timeout must be" in text and "Press Edit" not in text
    assert "Save server" in text  # the form drops the bad hidden field: saving fixes it


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
    assert "cannot be used" in page.status_label.text() and "timeout" in page.status_shown()


# ---- remote servers that need the user to sign in (OAuth) ---------------------------------


class _Unauthorized(BaseHTTPRequestHandler):
    """A remote MCP server that answers every request 401: Deskhand must ask to sign in."""

    def _deny(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Bearer realm="test"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_DELETE = _deny

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def unauthorized_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Unauthorized)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/mcp"
    server.shutdown()
    server.server_close()
    thread.join(5)


class SignInStub(McpManager):
    """A real manager whose `sign_in` skips the browser round trip (no OAuth server here):
    it waits until the test lets it go, records the thread it ran on, stores a sign-in
    record as a real sign-in does, and reports the server ready. Everything else — starting,
    the 401, `signed_in`, `sign_out`, `reload` — is the real manager."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate = threading.Event()
        self.returned = threading.Event()
        self.threads: list[threading.Thread] = []
        #: What the browser round trip ends in: READY, or STARTING (time ran out first).
        self.outcome = Status.READY

    def sign_in(self, name: str, timeout: float = 300.0) -> ServerState | None:
        self.threads.append(threading.current_thread())
        try:
            if not self.gate.wait(30):
                raise TimeoutError("the test never let the sign-in finish")
            if self.outcome is Status.STARTING:  # still waiting for the browser
                return ServerState(name, "http", Status.STARTING)
            cfg = self.config(name)
            assert cfg is not None and cfg.url is not None and self.secrets is not None
            record = {"url": cfg.url, "tokens": {"access_token": ACCESS, "token_type": "Bearer"}}
            self.secrets.set(token_key(name), json.dumps(record))
            return ServerState(name, "http", Status.READY, tools=["search", "fetch"])
        finally:
            self.returned.set()


ACCESS = "at-9f8e7d6c5b4a3921"


def install_manager(runtime: Runtime, cls: type[McpManager] = McpManager) -> list[str]:
    """`runtime.mcp` as the runtime makes it, with a url opener that records instead of
    opening a browser; returns what it was asked to open."""
    opened: list[str] = []
    secrets = runtime.secrets
    manager = cls(
        mcp_path(runtime.home),
        home=runtime.home,
        get_secret=secrets.get,
        open_url=opened.append,
        secrets=SecretAccess(get=secrets.get, set=secrets.set, delete=secrets.delete),
    )
    runtime.__dict__["mcp"] = manager
    return opened


def write_servers(runtime: Runtime, servers: dict[str, Any]) -> None:
    mcp_path(runtime.home).write_text(json.dumps({"mcpServers": servers}))


def open_page(qtbot: Any, qloop: Any, runtime: Runtime) -> McpPage:
    from app.ui import theme

    theme.apply_theme(QApplication.instance(), "light")  # type: ignore[arg-type]
    page = McpPage(runtime)
    qtbot.addWidget(page)
    page.resize(720, 560)
    page.show()
    run(qloop, asyncio.shield(page.ensure_loaded()))
    return page


def status_of(page: McpPage, name: str) -> Status | None:
    state = page.states.get(name)
    return state.status if state is not None else None


def row_detail(page: McpPage, name: str) -> str:
    for row in range(page.server_list.count()):
        item = page.server_list.item(row)
        if item.text() == name:
            return str(item.data(mcp_page.DETAIL_ROLE))
    raise AssertionError(f"no row {name}")


async def connect_until(page: McpPage, wanted: dict[str, Status]) -> None:
    await page.connect_servers()
    await wait_until(
        lambda: all(status_of(page, n) is s for n, s in wanted.items()),
        timeout=30,
        what=f"the servers to be {wanted}",
    )


def test_sign_in_is_offered_only_to_a_remote_server_that_needs_it(
    qtbot: Any, qloop: Any, runtime: Runtime, restore_theme: None, unauthorized_url: str
) -> None:
    write_servers(
        runtime,
        {
            "wiki": {"url": unauthorized_url},
            "no-auth": {"url": unauthorized_url, "auth": "none"},
            "notes": {"command": sys.executable, "args": [SERVER, "stdio"]},
        },
    )
    opened = install_manager(runtime)
    page = open_page(qtbot, qloop, runtime)
    run(
        qloop,
        connect_until(
            page, {"wiki": Status.NEEDS_SIGN_IN, "no-auth": Status.FAILED, "notes": Status.READY}
        ),
    )
    page.select("wiki")
    assert page.status_label.text() == "Needs you to sign in"
    assert "needs you to sign in" in page.status_detail.text()  # the state's own words
    assert page.signin.sign_in_button.isVisible()
    assert page.signin.sign_in_button.property("accent")
    assert not page.signin.sign_out_button.isVisible()
    assert row_detail(page, "wiki") == "Needs you to sign in"
    for other in ("no-auth", "notes"):
        page.select(other)
        assert not page.signin.sign_in_button.isVisible(), other
        assert not page.signin.isVisible(), other
    assert opened == []  # nothing opened a browser by itself


def test_sign_in_runs_off_the_gui_thread_and_the_row_becomes_ready(
    qtbot: Any, qloop: Any, runtime: Runtime, restore_theme: None, unauthorized_url: str
) -> None:
    write_servers(runtime, {"wiki": {"url": unauthorized_url}})
    install_manager(runtime, SignInStub)
    manager: SignInStub = runtime.mcp
    page = open_page(qtbot, qloop, runtime)

    async def body() -> None:
        await connect_until(page, {"wiki": Status.NEEDS_SIGN_IN})
        qtbot.mouseClick(page.signin.sign_in_button, Qt.MouseButton.LeftButton)
        # sign_in blocks on its worker thread; the page keeps running and says what it waits for
        await wait_until(lambda: manager.threads, what="sign_in to be waiting for the browser")
        assert page.signin.cancel_button.isVisible()
        assert page.signin.note.text() == mcp_signin.WAITING
        assert not page.signin.sign_in_button.isVisible()
        assert not page.status_detail.isVisible()  # no "press Sign in" while the browser is open
        manager.gate.set()
        await wait_until(lambda: page.status_label.text() == "Ready · 2 tools", what="ready")
        assert row_detail(page, "wiki") == "Ready · 2 tools"
        assert page.status_label.toolTip() == "<p>search, fetch</p>"
        # the stored sign-in is found (off the GUI thread) and can be undone
        await wait_until(lambda: page.signin.sign_out_button.isVisible(), what="Sign out")
        assert not page.signin.cancel_button.isVisible()
        assert page.signin.note.text() == mcp_signin.SIGNED_IN

    run(qloop, body())
    assert manager.threads and manager.threads[0] is not threading.main_thread()
    assert ACCESS not in page.status_shown()  # tokens are never shown


def test_a_sign_in_that_does_not_work_says_why(
    qtbot: Any, qloop: Any, runtime: Runtime, restore_theme: None, unauthorized_url: str
) -> None:
    """The real sign-in against a server that refuses everything: registration fails."""
    write_servers(runtime, {"wiki": {"url": unauthorized_url}})
    opened = install_manager(runtime)
    page = open_page(qtbot, qloop, runtime)

    async def body() -> None:
        await connect_until(page, {"wiki": Status.NEEDS_SIGN_IN})
        qtbot.mouseClick(page.signin.sign_in_button, Qt.MouseButton.LeftButton)
        await wait_until(lambda: not page.signin.waiting("wiki"), timeout=30, what="the end")
        assert "Signing in did not work" in page.status_detail.text()
        assert "401" in page.status_detail.text()
        assert page.status_detail.property("role") == "error"
        assert page.status_label.text() == "Needs you to sign in"
        assert page.signin.sign_in_button.isVisible()  # try again
        assert not page.signin.cancel_button.isVisible()

    run(qloop, body())
    assert opened == []  # it failed before any sign-in page existed


def test_cancel_stops_waiting_and_offers_sign_in_again(
    qtbot: Any, qloop: Any, runtime: Runtime, restore_theme: None, unauthorized_url: str
) -> None:
    write_servers(runtime, {"wiki": {"url": unauthorized_url}})
    install_manager(runtime, SignInStub)
    manager: SignInStub = runtime.mcp
    seen: list[Status] = []
    manager.subscribe(lambda state: seen.append(state.status))
    page = open_page(qtbot, qloop, runtime)

    async def body() -> None:
        await connect_until(page, {"wiki": Status.NEEDS_SIGN_IN})
        qtbot.mouseClick(page.signin.sign_in_button, Qt.MouseButton.LeftButton)
        await wait_until(lambda: manager.threads, what="sign_in to be waiting for the browser")
        waiting = page.signin._waiting["wiki"]
        seen.clear()
        qtbot.mouseClick(page.signin.cancel_button, Qt.MouseButton.LeftButton)
        assert page.signin.note.text() == mcp_signin.CANCELLED
        assert not page.signin.cancel_button.isVisible()
        # the attempt is stopped: the server restarts without it and asks again
        await wait_until(
            lambda: seen[-1:] == [Status.NEEDS_SIGN_IN] and Status.STARTING in seen,
            timeout=30,
            what="the server to restart and ask again",
        )
        await wait_until(lambda: page.signin.sign_in_button.isVisible(), what="Sign in… again")
        manager.gate.set()  # the abandoned call ends; nothing is left to show its result
        await wait_until(manager.returned.is_set, what="the abandoned call to end")
        assert waiting.cancelled()

    run(qloop, body())
    assert status_of(page, "wiki") is Status.NEEDS_SIGN_IN
    assert page.status_label.text() == "Needs you to sign in"


def test_sign_out_asks_first_and_forgets_the_sign_in(
    qtbot: Any,
    qloop: Any,
    runtime: Runtime,
    restore_theme: None,
    unauthorized_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_servers(runtime, {"wiki": {"url": unauthorized_url}})
    record = {"url": unauthorized_url, "tokens": {"access_token": ACCESS, "token_type": "Bearer"}}
    runtime.secrets.set(token_key("wiki"), json.dumps(record))  # an earlier sign-in
    install_manager(runtime)
    answers: list[bool] = [False, True]
    asked: list[str] = []

    def answer(parent: Any, title: str, text: str) -> bool:
        asked.append(text)
        return answers.pop(0)

    monkeypatch.setattr(mcp_page, "confirm", answer)
    page = open_page(qtbot, qloop, runtime)

    async def body() -> None:
        page.select("wiki")
        await wait_until(lambda: page.signin.sign_out_button.isVisible(), what="Sign out")
        assert ACCESS not in page.status_shown()
        qtbot.mouseClick(page.signin.sign_out_button, Qt.MouseButton.LeftButton)
        assert len(asked) == 1 and "wiki" in asked[0]
        assert runtime.secrets.get(token_key("wiki")) is not None  # "No" keeps it
        await page.connect_servers()
        qtbot.mouseClick(page.signin.sign_out_button, Qt.MouseButton.LeftButton)
        assert len(asked) == 2
        await wait_until(
            lambda: runtime.secrets.get(token_key("wiki")) is None, what="the sign-in to go"
        )
        # the manager reconnected without it: the server asks the user to sign in
        await wait_until(
            lambda: status_of(page, "wiki") is Status.NEEDS_SIGN_IN, timeout=30, what="401"
        )
        await wait_until(lambda: page.signin.sign_in_button.isVisible(), what="Sign in…")
        assert not page.signin.sign_out_button.isVisible()
        assert page.signin.note.text() == mcp_signin.SIGNED_OUT

    run(qloop, body())


def test_server_text_is_plain_and_long_lines_wrap(
    qtbot: Any, qloop: Any, runtime: Runtime, restore_theme: None
) -> None:
    """An error that looks like HTML stays text; a long path never widens the page."""
    write_servers(runtime, {"web": {"url": "https://example.com/mcp"}})
    page = open_page(qtbot, qloop, runtime)
    long_path = "/srv/" + "x" * 200 + ".json"
    page._on_state(
        ServerState(
            "web",
            "http",
            Status.FAILED,
            error=f"<b>bold</b> <a href='https://evil.example'>click</a> {long_path}\x1b[2J",
            stderr=["<img src='https://evil.example/p.png'>", long_path],
        )
    )
    page.select("web")
    assert page.status_label.textFormat() == Qt.TextFormat.PlainText
    assert page.status_detail.textFormat() == Qt.TextFormat.PlainText
    assert page.status_label.text() == "Could not start"
    assert "<b>bold</b>" in page.status_detail.text()
    assert "\x1b" not in page.status_shown() and "⟨U+001B⟩" in page.status_shown()
    assert long_path in page.status_shown()
    assert "<img" in page.output_box.toPlainText()  # a plain-text box: shown, not loaded
    area = page.detail_area
    assert area.widget().minimumSizeHint().width() <= area.viewport().width()


def test_the_smallest_dialog_shows_sign_in_unclipped(
    qtbot: Any, qloop: Any, runtime: Runtime, restore_theme: None, unauthorized_url: str
) -> None:
    from app.ui.settings.dialog import SettingsDialog

    write_servers(runtime, {"work-wiki": {"url": unauthorized_url}})
    install_manager(runtime)
    dialog = SettingsDialog(runtime, page="mcp")
    qtbot.addWidget(dialog)
    dialog.resize(dialog.minimumSize())
    dialog.show()
    page = dialog.mcp
    run(qloop, asyncio.shield(page.ensure_loaded()))
    run(qloop, connect_until(page, {"work-wiki": Status.NEEDS_SIGN_IN}))
    run(qloop, asyncio.shield(dialog.key_states))
    viewport = page.detail_area.viewport()
    assert page.detail_area.widget().width() <= viewport.width()  # nothing cut off at the right
    for widget in (page.signin.sign_in_button, page.status_label, page.connect_button):
        assert widget.isVisible()
        corner = widget.mapTo(viewport, widget.rect().bottomRight())
        assert viewport.rect().contains(corner), widget


def test_a_sign_in_that_times_out_says_so_and_offers_sign_in_again(
    qtbot: Any, qloop: Any, runtime: Runtime, restore_theme: None, unauthorized_url: str
) -> None:
    write_servers(runtime, {"wiki": {"url": unauthorized_url}})
    install_manager(runtime, SignInStub)
    manager: SignInStub = runtime.mcp
    manager.outcome = Status.STARTING
    manager.gate.set()
    page = open_page(qtbot, qloop, runtime)

    async def body() -> None:
        await connect_until(page, {"wiki": Status.NEEDS_SIGN_IN})
        qtbot.mouseClick(page.signin.sign_in_button, Qt.MouseButton.LeftButton)
        await wait_until(lambda: "did not finish signing in" in page.signin.note.text())
        assert "5 minutes" in page.signin.note.text()
        assert page.signin.note.property("role") == "error"
        # the attempt is stopped and the server asks again
        await wait_until(
            lambda: (
                page.signin.sign_in_button.isVisible()
                and status_of(page, "wiki") is Status.NEEDS_SIGN_IN
            ),
            timeout=30,
            what="Sign in… again",
        )
        assert "did not finish signing in" in page.status_shown()

    run(qloop, body())


# ---- the page's states: empty, editing, a server in trouble ---------------------------------


def test_with_no_server_the_page_explains_and_adds_from_pasted_json(
    page: McpPage, qloop: Any, runtime: Runtime, qtbot: Any
) -> None:
    assert page.empty_view.isVisible() and not page.main_view.isVisible()
    assert page.empty_add_button.isVisible() and page.empty_paste.isVisible()

    async def body() -> None:
        assert not await page.import_text("{not json")
        assert page.empty_paste.error_label.text().startswith("This is not valid JSON")
        assert not await page.import_text('{"mcpServers": {"x": {"timeout": 5}}}')
        assert "None of these servers can be used" in page.empty_paste.error_label.text()
        assert mcp_path(runtime.home).exists() is False  # nothing was written
        # a "name": {…} pair as servers' instructions show it, with a secret
        pasted = f'"notes": {{"command": "npx", "env": {{"API_TOKEN": "{TOKEN}"}}}},'
        assert await page.import_text(pasted)
        assert mcp_json(runtime)["notes"]["env"]["API_TOKEN"] == "keyring:mcp/notes/API_TOKEN"
        assert runtime.secrets.get("mcp/notes/API_TOKEN") == TOKEN
        assert page.main_view.isVisible() and not page.empty_view.isVisible()
        assert page.current_name() == "notes"
        assert "Imported 1 server" in page.message.text()

    run(qloop, body())


class _RefusingKeyring(MemoryKeyring):
    """Refuses the secrets of the server named `gh` (as a locked or picky keyring would)."""

    def set_password(self, service: str, username: str, password: str) -> None:
        if username.startswith("mcp/gh/"):
            raise RuntimeError("the keyring refused the item")
        super().set_password(service, username, password)


def test_a_pasted_server_whose_secret_the_keyring_refuses_is_not_added_and_the_text_stays(
    page: McpPage, qloop: Any, runtime: Runtime
) -> None:
    runtime.secrets = SecretStore(backend=_RefusingKeyring())
    pasted = json.dumps({"gh": {"command": "npx", "env": {"GITHUB_TOKEN": TOKEN}}})

    async def body() -> None:
        assert not await page.import_text(pasted)
        assert page.empty_view.isVisible()  # nothing was added
        assert page.empty_paste.edit.toPlainText() == pasted  # nothing pasted is lost
        shown = page.empty_paste.error_label.text()
        assert shown.startswith("Not added:\n• Server 'gh': could not store its secret in the")
        assert shown.endswith("; nothing was written for it.")
        assert TOKEN not in shown
        assert not mcp_path(runtime.home).exists()
        assert not page.empty_message.isVisible()  # said once, under the box

        # one good, one refused: the good one is added, the text stays in the box in view
        both = json.dumps(
            {
                "notes": {"command": "npx", "env": {"API_TOKEN": TOKEN}},
                "gh": {"command": "npx", "env": {"GITHUB_TOKEN": TOKEN}},
            }
        )
        page.empty_paste.edit.setPlainText(both)
        assert not await page.import_text(both)
        assert list(mcp_json(runtime)) == ["notes"]
        assert TOKEN not in mcp_path(runtime.home).read_text("utf-8")
        assert page.main_view.isVisible() and page.paste_panel.isVisible()
        assert page.paste_panel.edit.toPlainText() == both
        assert "Server 'gh': could not store" in page.paste_panel.error_label.text()
        assert page.message.text() == (
            "Imported 1 server; 1 secret moved to the keyring. Some were not added: see the "
            "pasted text above."
        )
        assert page.message.property("role") == "error"

    run(qloop, body())


def test_an_imported_file_whose_secret_the_keyring_refuses_says_what_was_not_added(
    page: McpPage, qloop: Any, runtime: Runtime, tmp_path: Path
) -> None:
    runtime.secrets = SecretStore(backend=_RefusingKeyring())
    source = tmp_path / "claude_desktop_config.json"
    servers = {"gh": {"command": "npx", "env": {"GITHUB_TOKEN": TOKEN}}}
    source.write_text(json.dumps({"mcpServers": servers}), "utf-8")
    run(qloop, page.import_from(source))
    said = page.empty_message.text()
    assert said.startswith("No server was imported.\nNot added:\n• Server 'gh': could not")
    assert "the keyring refused the item" in said and TOKEN not in said
    assert page.empty_message.property("role") == "error"
    assert not mcp_path(runtime.home).exists()


def test_a_pasted_name_with_a_control_character_is_refused_in_plain_words(
    page: McpPage, qloop: Any, runtime: Runtime
) -> None:
    pasted = json.dumps({"gh\u0000\u202e": {"command": "npx", "env": {"GITHUB_TOKEN": TOKEN}}})

    async def body() -> None:
        page.empty_paste.edit.setPlainText(pasted)
        assert not await page.import_text(pasted)
        shown = page.empty_paste.error_label.text()
        assert "invisible or control character (U+0000)" in shown
        assert "\u202e" not in shown and "\x00" not in shown
        assert page.empty_paste.edit.toPlainText() == pasted
        assert not mcp_path(runtime.home).exists()

    run(qloop, body())


def test_add_from_the_empty_page_and_cancel_goes_back(page: McpPage, qtbot: Any) -> None:
    qtbot.mouseClick(page.empty_add_button, Qt.MouseButton.LeftButton)
    assert page.main_view.isVisible() and page.editor.heading.text() == "New MCP server"
    assert page.editor.name_edit.hasFocus()
    qtbot.mouseClick(page.editor.cancel_button, Qt.MouseButton.LeftButton)
    assert page.empty_view.isVisible()


def test_a_failed_server_says_why_in_plain_words_with_retry_edit_remove(
    qtbot: Any, qloop: Any, runtime: Runtime, restore_theme: None
) -> None:
    write_servers(runtime, {"gone": {"command": "no-such-program-4d2c"}})
    install_manager(runtime)
    page = open_page(qtbot, qloop, runtime)
    run(qloop, connect_until(page, {"gone": Status.FAILED}))
    shown = page.status_shown()
    assert page.status_label.text() == "Could not start"
    assert "could not find the program “no-such-program-4d2c”" in shown
    assert "FileNotFoundError" not in shown and "Errno" not in shown  # never a raw error
    assert row_detail(page, "gone") == "Could not start"
    for button in (page.retry_button, page.edit_button, page.remove_server_button):
        assert button.isVisible()
    qtbot.mouseClick(page.edit_button, Qt.MouseButton.LeftButton)
    assert page.editor.command_edit.hasFocus()  # what a failed start most often needs
    seen: list[Status] = []
    runtime.mcp.subscribe(lambda state: seen.append(state.status))
    qtbot.mouseClick(page.retry_button, Qt.MouseButton.LeftButton)
    run(qloop, wait_until(lambda: Status.FAILED in seen[1:] or seen[-1:] == [Status.FAILED]))
    assert Status.STARTING in seen  # it really started again


def test_the_server_output_box_folds(
    page: McpPage, qloop: Any, qtbot: Any, runtime: Runtime
) -> None:
    write_servers(runtime, {"web": {"url": "https://example.com/mcp"}})
    run(qloop, page.reload())
    page._on_state(ServerState("web", "http", Status.FAILED, error="", stderr=["line one"]))
    assert page.output_box.isVisible() and "1 line" in page.output_heading.text()
    qtbot.mouseClick(page.output_heading, Qt.MouseButton.LeftButton)
    assert not page.output_box.isVisible()
    assert "line one" not in page.status_shown()
    assert "stopped before it was ready" in page.status_detail.text()


def test_plain_reasons() -> None:
    reason = mcp_page.plain_reason
    assert reason("ConnectError: All connection attempts failed").startswith(
        "Deskhand could not reach the server"
    )
    assert reason("HTTPStatusError: Client error '404 Not Found' for url 'https://x/mcp'") == (
        "The server answered with an error (HTTP 404). Check the URL."
    )
    assert reason("McpError: Connection closed") == "The server stopped before it was ready."
    assert reason("weird\x1b[2J thing") == "Weird⟨U+001B⟩[2J thing."
    assert reason(None) == "The server stopped before it was ready."


def test_cancel_tasks_cancels_what_the_page_and_its_sign_in_started(
    qtbot: Any, qloop: Any, runtime: Runtime, restore_theme: None, unauthorized_url: str
) -> None:
    write_servers(runtime, {"wiki": {"url": unauthorized_url}})
    install_manager(runtime, SignInStub)
    manager: SignInStub = runtime.mcp
    page = open_page(qtbot, qloop, runtime)

    async def body() -> None:
        await connect_until(page, {"wiki": Status.NEEDS_SIGN_IN})
        qtbot.mouseClick(page.signin.sign_in_button, Qt.MouseButton.LeftButton)
        await wait_until(lambda: manager.threads, what="sign_in to be waiting for the browser")
        started = [*page._tasks, *page.signin._tasks]
        assert started
        page.cancel_tasks()
        await wait_until(lambda: all(task.done() for task in started), what="the tasks to end")
        assert any(task.cancelled() for task in started)
        assert not page._tasks and not page.signin._tasks
        assert not page.signin.waiting("wiki")
        manager.gate.set()  # the abandoned call ends; nothing shows its result
        await wait_until(manager.returned.is_set, what="the abandoned call to end")
        # shown again, the page reads mcp.json afresh and follows the servers again
        await page.ensure_loaded()
        assert page.server_list.count() == 1

    run(qloop, body())
