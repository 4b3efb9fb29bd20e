"""One-step provider connection: base URLs as typed, Test that fills and picks the model,
errors next to the field that caused them, Cancel and time-outs, the setup card's Connect;
and an account without a key never touching the keyring. Real HTTP to the scripted model
server, real widgets (offscreen), the real gnome-keyring where the keyring is the point."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Coroutine, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from keyring.backend import KeyringBackend
from PySide6.QtCore import Qt

from app.core.local_servers import LocalServer
from app.core.providers.urls import normalize_base_url, with_scheme
from app.core.runtime import Runtime
from app.core.secrets import SecretStore, secret_key
from app.core.settings import ProviderAccount
from app.ui.model_picker import ModelPicker
from app.ui.settings.presets import PRESETS, url_problem
from app.ui.settings.providers_page import ProvidersPage
from app.ui.setup_card import SetupCard
from tests.fakellm import ScriptedLLM, error, hang, text
from tests.fixtures_keyring import MemoryKeyring
from tests.fixtures_qt import wait_until

pytestmark = pytest.mark.gui

OTHER = next(p for p in PRESETS if p.name.startswith("Other"))
KEY = "sk-test-77aa0c3e9b"


def run(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    return loop.run_until_complete(asyncio.wait_for(coro, timeout=30))


# ---- base URLs as people type them --------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "typed", "expected"),
    [
        ("openai", "127.0.0.1:11434", "http://127.0.0.1:11434/v1"),
        ("openai", "localhost:1234/v1/", "http://localhost:1234/v1"),
        ("openai", "http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1"),
        ("openai", " api.openai.com/v1 ", "https://api.openai.com/v1"),
        ("openai", "https://openrouter.ai/api/v1/chat/completions", "https://openrouter.ai/api/v1"),
        ("openai", "http://box:8000/v1/models", "http://box:8000/v1"),
        ("openai", "http://gpu.lan:9000/openai/", "http://gpu.lan:9000/openai"),
        ("openai", "192.168.1.20:8000", "http://192.168.1.20:8000/v1"),
        ("openai", "gpu-box:8000", "http://gpu-box:8000/v1"),
        ("openai", "ollama.local:11434", "http://ollama.local:11434/v1"),
        ("openai", "[::1]:8080", "http://[::1]:8080/v1"),
        # a public host without a scheme: https, so a key never crosses the internet in clear
        ("openai", "llm.example.com/v1", "https://llm.example.com/v1"),
        ("openai", "8.8.8.8:8000", "https://8.8.8.8:8000/v1"),
        ("openai", "http://llm.example.com/v1", "http://llm.example.com/v1"),
        ("anthropic", "api.anthropic.com", "https://api.anthropic.com"),
        ("anthropic", "https://api.anthropic.com/v1/", "https://api.anthropic.com"),
        ("anthropic", "https://api.anthropic.com/v1/messages", "https://api.anthropic.com"),
    ],
)
def test_base_urls_are_made_what_each_kind_expects(kind: str, typed: str, expected: str) -> None:
    assert normalize_base_url(kind, typed) == expected
    assert url_problem(typed) is None


def test_only_urls_that_cannot_name_a_server_are_refused() -> None:
    assert with_scheme("ftp://x/v1") == "ftp://x/v1"
    for bad in ("", "not a url", "ftp://example.com/v1", "http://:80/v1", "host:99999"):
        assert url_problem(bad), bad


# ---- the providers page ------------------------------------------------------------------


@pytest.fixture
def runtime(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    rt = Runtime(home, entry_points=False)
    rt.secrets = SecretStore(backend=MemoryKeyring(), home=home)
    yield rt
    rt.close()


@pytest.fixture
def page(qtbot: Any, qloop: asyncio.AbstractEventLoop, runtime: Runtime) -> ProvidersPage:
    widget = ProvidersPage(runtime)
    qtbot.addWidget(widget)
    widget.resize(900, 600)
    widget.show()
    return widget


def add_account(qtbot: Any, page: ProvidersPage, url: str) -> ProviderAccount:
    """An OpenAI-compatible account, its URL typed the way a user does."""
    account = page.add_account(OTHER)
    page.url_edit.selectAll()
    qtbot.keyClick(page.url_edit, Qt.Key.Key_Backspace)
    qtbot.keyClicks(page.url_edit, url)
    return account


def models_shown(page: ProvidersPage) -> list[str]:
    return [page.model_combo.itemText(i) for i in range(page.model_combo.count())]


async def click_test(qtbot: Any, page: ProvidersPage) -> str:
    """Click Test; the result line once the page says the test ended."""
    ended: asyncio.Future[bool] = asyncio.get_event_loop().create_future()

    def done(_account: str, ok: bool) -> None:
        if not ended.done():
            ended.set_result(ok)

    page.tested.connect(done)
    try:
        qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)
        await ended
    finally:
        page.tested.disconnect(done)
    return page.test_result.text()


def test_test_accepts_a_bare_address_fills_the_models_and_picks_the_first(
    qtbot: Any, qloop: Any, page: ProvidersPage, llm: ScriptedLLM
) -> None:
    account = add_account(qtbot, page, f"127.0.0.1:{llm.port}")  # no scheme, no /v1

    async def body() -> str:
        llm.add(text("OK"))
        return await click_test(qtbot, page)

    result = run(qloop, body())
    assert result == "✓ Connected: 2 models available; “fake-model” answered"
    assert page.url_edit.text() == llm.openai_base_url == account.base_url
    assert models_shown(page) == ["fake-model", "fake-model-large"]
    assert page.model_combo.currentText() == account.model == "fake-model"
    assert [(r.method, r.path) for r in llm.requests] == [
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
    ]
    assert llm.requests[1].body["model"] == "fake-model"
    assert not any(page.field_error(f) for f in ("url", "key", "model"))


def test_test_keeps_the_current_model_when_the_server_lists_it(
    qtbot: Any, qloop: Any, page: ProvidersPage, llm: ScriptedLLM
) -> None:
    account = add_account(qtbot, page, llm.openai_base_url + "/")
    page.model_combo.setEditText("fake-model-large")

    async def body() -> None:
        llm.add(text("OK"))
        await click_test(qtbot, page)
        page.model_combo.setEditText("gone-model")  # not listed: the first one instead
        llm.add(text("OK"))
        await click_test(qtbot, page)

    run(qloop, body())
    assert [r.body["model"] for r in llm.requests if r.method == "POST"] == [
        "fake-model-large",
        "fake-model",
    ]
    assert account.model == "fake-model"


def test_unreachable_server_is_an_error_at_the_url_cleared_by_editing(
    qtbot: Any, qloop: Any, page: ProvidersPage, unused_port: int
) -> None:
    add_account(qtbot, page, f"127.0.0.1:{unused_port}")
    result = run(qloop, click_test(qtbot, page))
    assert result == "✗ Not connected: see the base URL above."
    assert page.field_error("url").startswith(f"Could not reach http://127.0.0.1:{unused_port}/v1")
    assert "Is the server running?" in page.field_error("url")
    assert page.url_edit.property("invalid") is True
    assert page.field_error("key") == page.field_error("model") == ""
    qtbot.keyClick(page.url_edit, Qt.Key.Key_Backspace)  # any edit clears it
    assert page.field_error("url") == ""
    assert page.url_edit.property("invalid") is False


class _WebPage(BaseHTTPRequestHandler):
    """An ordinary web server: HTML everywhere, 404 under /v1."""

    def do_GET(self) -> None:
        status = 404 if self.path.startswith("/v1/") else 200
        body = b"<html><body>Hello</body></html>"
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def web_page() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _WebPage)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("path", ["", "/site"])
def test_a_web_page_is_not_an_api_error_at_the_url(
    qtbot: Any, qloop: Any, page: ProvidersPage, web_page: str, path: str
) -> None:
    add_account(qtbot, page, web_page + path)
    run(qloop, click_test(qtbot, page))
    error_text = page.field_error("url")
    assert "it is not a model API" in error_text
    assert ("HTTP 404" if not path else "not with JSON") in error_text


def test_refused_key_is_an_error_at_the_key_without_the_key(
    qtbot: Any, qloop: Any, page: ProvidersPage, llm: ScriptedLLM
) -> None:
    add_account(qtbot, page, llm.openai_base_url)
    qtbot.keyClicks(page.key_edit, KEY)

    async def body() -> None:
        llm.add(error(401))  # the scripted server echoes the key, as real ones do
        await click_test(qtbot, page)

    run(qloop, body())
    assert page.field_error("key") == (
        "The server refused the key (HTTP 401). Check it and try again."
    )
    assert page.test_result.text() == "✗ Not connected: see the API key above."
    assert KEY not in page.field_error("key") + page.test_result.text()
    assert llm.requests[-1].headers["authorization"] == f"Bearer {KEY}"
    qtbot.keyClick(page.key_edit, Qt.Key.Key_Backspace)
    assert page.field_error("key") == ""


def test_a_server_without_models_is_an_error_at_the_model(
    qtbot: Any, qloop: Any, page: ProvidersPage
) -> None:
    with ScriptedLLM(models=()) as empty:
        add_account(qtbot, page, empty.openai_base_url)
        run(qloop, click_test(qtbot, page))
        assert page.field_error("model").startswith("The server lists no models.")
        assert page.test_result.text() == "✗ Not connected: see the model above."
        assert [r.method for r in empty.requests] == ["GET"]  # nothing was asked of a model


def test_a_new_test_clears_the_errors_of_the_last(
    qtbot: Any, qloop: Any, page: ProvidersPage, llm: ScriptedLLM
) -> None:
    add_account(qtbot, page, llm.openai_base_url)

    async def body() -> None:
        llm.add(error(401))
        await click_test(qtbot, page)
        assert page.field_error("key")
        llm.add(hang("OK"))
        qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)
        await asyncio.to_thread(llm.wait_for_hang)
        assert page.field_error("key") == ""  # cleared as soon as the new test started
        assert page.test_result.text() == "Connecting…"
        llm.release()
        await wait_until(lambda: page.test_result.text().startswith("✓"), what="success")

    run(qloop, body())


def test_cancel_stops_a_test(qtbot: Any, qloop: Any, page: ProvidersPage, llm: ScriptedLLM) -> None:
    add_account(qtbot, page, llm.openai_base_url)
    assert page.cancel_button.isHidden()

    async def body() -> None:
        llm.add(hang("OK"))
        qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)
        await asyncio.to_thread(llm.wait_for_hang)
        assert page.cancel_button.isVisible() and not page.test_button.isEnabled()
        qtbot.mouseClick(page.cancel_button, Qt.MouseButton.LeftButton)
        await wait_until(lambda: page.test_result.text() == "Test cancelled.", what="cancel")
        await asyncio.to_thread(llm.wait_for_disconnects, 1)  # the request was dropped

    run(qloop, body())
    assert page.test_button.isEnabled() and page.cancel_button.isHidden()
    assert page.test_result.property("role") == "error"


def test_a_model_that_does_not_answer_times_out_at_the_model(
    qtbot: Any, qloop: Any, page: ProvidersPage, llm: ScriptedLLM
) -> None:
    add_account(qtbot, page, llm.openai_base_url)
    page.test_timeout = 3.0  # listing the models, which comes first, fits on a busy machine

    async def body() -> None:
        llm.add(hang())
        await click_test(qtbot, page)

    run(qloop, body())
    assert page.field_error("model") == (
        "“fake-model” did not answer in time: the server may still be loading it. "
        "Try again in a moment."
    )
    llm.release()


def test_saved_base_url_is_normalised(
    qtbot: Any, qloop: Any, page: ProvidersPage, runtime: Runtime, llm: ScriptedLLM
) -> None:
    add_account(qtbot, page, f"127.0.0.1:{llm.port}/")
    assert page.problem() is None
    saved = runtime.settings_store.update(page.patch())
    assert saved.providers[0].base_url == llm.openai_base_url


# ---- the setup card ----------------------------------------------------------------------


@pytest.fixture
def card(qtbot: Any, qloop: Any) -> SetupCard:
    widget = SetupCard()
    qtbot.addWidget(widget)
    widget.show()
    return widget


def test_setup_card_connects_to_a_typed_address(
    qtbot: Any, qloop: Any, card: SetupCard, llm: ScriptedLLM
) -> None:
    used: list[LocalServer] = []
    card.useServerRequested.connect(used.append)
    qtbot.keyClicks(card.url_edit, f"127.0.0.1:{llm.port}")

    async def body() -> None:
        qtbot.keyClick(card.url_edit, Qt.Key.Key_Return)
        await wait_until(lambda: used, what="the server to be used")

    run(qloop, body())
    assert used == [LocalServer(f"127.0.0.1:{llm.port}", llm.openai_base_url, list(llm.models))]
    assert card.url_error.isHidden()


def test_setup_card_says_what_is_wrong_under_the_address(
    qtbot: Any, qloop: Any, card: SetupCard, unused_port: int
) -> None:
    used: list[Any] = []
    card.useServerRequested.connect(used.append)
    qtbot.keyClicks(card.url_edit, f"127.0.0.1:{unused_port}")

    async def body() -> None:
        qtbot.mouseClick(card.connect_button, Qt.MouseButton.LeftButton)
        await wait_until(lambda: card.url_error.isVisible(), what="the error")

    run(qloop, body())
    assert card.url_error.text().startswith("Could not reach")
    assert used == []
    qtbot.keyClicks(card.url_edit, "1")
    assert card.url_error.isHidden()


def test_setup_card_connect_can_be_cancelled(qtbot: Any, qloop: Any, card: SetupCard) -> None:
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        qtbot.keyClicks(card.url_edit, f"127.0.0.1:{silent.getsockname()[1]}")

        async def body() -> None:
            qtbot.mouseClick(card.connect_button, Qt.MouseButton.LeftButton)
            await wait_until(lambda: card.connect_button.text() == "Cancel", what="connecting")
            qtbot.mouseClick(card.connect_button, Qt.MouseButton.LeftButton)
            await wait_until(lambda: card.url_error.isVisible(), what="the stop")

        run(qloop, body())
    assert card.url_error.text() == "Stopped. Nothing was connected."
    assert card.connect_button.text() == "Connect" and card.url_edit.isEnabled()


# ---- no key, no keyring -------------------------------------------------------------------


class RecordingKeyring(KeyringBackend):
    """The real keyring backend, with every access written down."""

    priority = 1  # type: ignore[assignment]

    def __init__(self, real: KeyringBackend) -> None:
        super().__init__()
        self.real = real
        self.calls: list[tuple[str, str]] = []

    def get_password(self, service: str, username: str) -> str | None:
        self.calls.append(("get", username))
        return self.real.get_password(service, username)

    def set_password(self, service: str, username: str, password: str) -> None:
        self.calls.append(("set", username))
        self.real.set_password(service, username, password)

    def delete_password(self, service: str, username: str) -> None:
        self.calls.append(("delete", username))
        self.real.delete_password(service, username)


@pytest.fixture
def recorded(keyring_env: dict[str, str], home: Path) -> RecordingKeyring:
    from keyring.backends.SecretService import Keyring

    return RecordingKeyring(Keyring())


def keyless_runtime(home: Path, backend: KeyringBackend, url: str) -> Runtime:
    rt = Runtime(home, entry_points=False)
    rt.secrets = SecretStore(backend=backend, home=home)
    local = ProviderAccount(id="local1", kind="openai", label="Ollama", base_url=url)

    def add(settings: Any) -> None:
        settings.providers = [local]
        settings.active_provider = local.id

    rt.settings = rt.settings_store.update(add)
    return rt


@pytest.mark.keyring
def test_a_keyless_account_never_touches_the_keyring(
    qtbot: Any,
    qloop: Any,
    home: Path,
    recorded: RecordingKeyring,
    llm: ScriptedLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rt = keyless_runtime(home, recorded, llm.openai_base_url)
    try:
        # used: the chat's config, a scheduled task's config
        assert rt.provider_config().api_key is None
        assert rt.account_provider_config("local1").api_key is None
        # listed, tested and saved on the providers page
        page = ProvidersPage(rt)
        qtbot.addWidget(page)
        page.show()

        async def on_the_page() -> None:
            await page.load_key_states()
            llm.add(text("OK"))
            await page.test_connection()
            await page.store_keys()

        run(qloop, on_the_page())
        assert page.test_result.text().startswith("✓ Connected")
        assert "No key stored" in page.key_status.text() or "Not needed" in page.key_status.text()
        rt.settings = rt.settings_store.update(page.patch())
        # listed in the model picker
        picker = ModelPicker(rt)
        qtbot.addWidget(picker)
        picker.open_popup()
        run(qloop, wait_until(lambda: (x := picker.listing("local1")) and not x.loading))
        assert picker.listing("local1").models == list(llm.models)  # type: ignore[union-attr]
        picker.popup.hide()
        # a new start: nothing stored, so nothing is read
        again = Runtime(home, entry_points=False)
        again.secrets = SecretStore(backend=recorded, home=home)
        again.secrets.start_loading()
        assert again.secrets.wait_loaded(5)
        again.close()
        assert recorded.calls == []
    finally:
        rt.close()


@pytest.mark.keyring
def test_an_account_with_a_key_still_reads_it_from_the_keyring(
    home: Path, recorded: RecordingKeyring, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other side of the test above: the recorder sees keyring use when there is a key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rt = keyless_runtime(home, recorded, llm.openai_base_url)
    try:
        rt.secrets.set(secret_key("provider", "local1", "api_key"), KEY)
        assert rt.provider_config().api_key == KEY
        assert ("get", "provider/local1/api_key") in recorded.calls
    finally:
        rt.close()


def test_a_key_stored_by_another_process_is_found(home: Path, llm: ScriptedLLM) -> None:
    """The index of names is read again, so a key another Deskhand stored is not missed."""
    backend = MemoryKeyring()
    rt = keyless_runtime(home, backend, llm.openai_base_url)
    try:
        assert rt.provider_config().api_key is None
        other = SecretStore(backend=backend, home=home)  # e.g. the CLI, meanwhile
        other.set(secret_key("provider", "local1", "api_key"), KEY)
        assert rt.provider_config().api_key == KEY
    finally:
        rt.close()


# ---- where keys go, stale results, plain text ---------------------------------------------


def saved_account(runtime: Runtime, url: str, key: str | None = KEY) -> ProviderAccount:
    account = ProviderAccount(id="acc", kind="openai", label="A", base_url=url)

    def add(settings: Any) -> None:
        settings.providers = [account]
        settings.active_provider = account.id

    runtime.settings = runtime.settings_store.update(add)
    if key:
        runtime.secrets.set(secret_key("provider", "acc", "api_key"), key)
    return account


def retype(qtbot: Any, edit: Any, text: str) -> None:
    edit.selectAll()
    qtbot.keyClick(edit, Qt.Key.Key_Backspace)
    qtbot.keyClicks(edit, text)


def test_a_url_moved_to_another_server_says_the_stored_key_stays(
    qtbot: Any, qloop: Any, runtime: Runtime, llm: ScriptedLLM
) -> None:
    """Next to the key: the stored key is for the saved server; pasting it again sends it
    to the new one. The same server typed differently keeps the key."""
    saved_account(runtime, "https://llm.example.com/v1")
    page = ProvidersPage(runtime)
    qtbot.addWidget(page)
    page.show()
    run(qloop, page.load_key_states())
    assert page.key_status.text().startswith("✓ A key is stored")
    retype(qtbot, page.url_edit, "llm.example.com:443/v1/")  # the same server
    assert page.key_status.text().startswith("✓ A key is stored")
    retype(qtbot, page.url_edit, llm.openai_base_url)
    assert page.key_status.text() == (
        f"The stored key is for https://llm.example.com; paste it again to use it with "
        f"http://127.0.0.1:{llm.port}."
    )
    run(qloop, page._ask_server(page.current(), "…", page._fetch))  # type: ignore[arg-type]
    assert llm.requests[-1].headers.get("authorization") is None
    qtbot.keyClicks(page.key_edit, KEY)  # pasted again: it goes
    run(qloop, page._ask_server(page.current(), "…", page._fetch))  # type: ignore[arg-type]
    assert llm.requests[-1].headers.get("authorization") == f"Bearer {KEY}"


def test_a_url_with_a_user_name_or_password_is_refused(
    qtbot: Any, qloop: Any, page: ProvidersPage, llm: ScriptedLLM
) -> None:
    for url in ("http://admin:hunter2@gpu.lan:8000/v1", "https://api.openai.com@evil.example/v1"):
        assert url_problem(url) == "Put the key in the API key field, not in the address."
    add_account(qtbot, page, f"user:pw@127.0.0.1:{llm.port}")
    result = run(qloop, click_test(qtbot, page))
    assert result == ""
    assert page.field_error("url") == "Put the key in the API key field, not in the address."
    assert llm.requests == []


def test_a_look_alike_host_is_listed_in_its_ascii_form(qtbot: Any, page: ProvidersPage) -> None:
    from app.ui.settings.account_list import DETAIL_ROLE

    page.add_account(OTHER)
    typed = "https://\u0430pi.openai.com/v1"  # Cyrillic а (QTest types Latin-1 only)
    page.url_edit.setText(typed)
    page.url_edit.textEdited.emit(typed)
    item = page.account_list.currentItem()
    assert item.data(DETAIL_ROLE) == "OpenAI-compatible · xn--pi-6kc.openai.com"
    assert "https://xn--pi-6kc.openai.com/v1" in item.toolTip()


def test_editing_the_url_or_key_clears_the_last_result_and_the_url_its_models(
    qtbot: Any, qloop: Any, page: ProvidersPage, llm: ScriptedLLM
) -> None:
    add_account(qtbot, page, llm.openai_base_url)
    llm.add(text("OK"))
    assert run(qloop, click_test(qtbot, page)).startswith("✓ Connected")
    assert models_shown(page) == ["fake-model", "fake-model-large"]
    qtbot.keyClicks(page.key_edit, "sk-new")
    assert page.test_result.text() == ""
    assert models_shown(page) == ["fake-model", "fake-model-large"]  # same server
    llm.add(text("OK"))
    assert run(qloop, click_test(qtbot, page)).startswith("✓ Connected")
    qtbot.keyClick(page.url_edit, Qt.Key.Key_Backspace)
    assert page.test_result.text() == ""
    assert models_shown(page) == []
    assert page.model_combo.currentText() == "fake-model"  # the name typed stays
    page.account_list.setCurrentRow(0)  # and nothing comes back on the next visit
    assert page.test_result.text() == "" and models_shown(page) == []


def test_a_key_for_a_plain_http_server_elsewhere_gets_a_note(
    qtbot: Any, page: ProvidersPage
) -> None:
    add_account(qtbot, page, "http://llm.example.com/v1")
    assert page.url_note.isHidden()  # no key: nothing to send
    qtbot.keyClicks(page.key_edit, KEY)
    assert page.url_note.isVisible()
    assert page.url_note.text() == "This key would be sent unencrypted (http://)."
    for local in ("http://192.168.1.20:8000/v1", "gpu-box:8000", "https://llm.example.com/v1"):
        retype(qtbot, page.url_edit, local)
        assert page.url_note.isHidden(), local
    retype(qtbot, page.url_edit, "http://8.8.8.8:8000/v1")
    assert page.url_note.isVisible()


def test_setup_card_shows_a_servers_names_as_they_are(qtbot: Any, card: SetupCard) -> None:
    """An "&" in a button's text would mark a shortcut key (and vanish); control characters
    are escaped."""
    card.show_servers([LocalServer("R&D box", "http://127.0.0.1:1/v1", ["a&b\x1b[31m"])])
    (button,) = card.buttons
    assert button.text() == "Use R&&D box (1 model — a&&b⟨U+001B⟩[31m)"
