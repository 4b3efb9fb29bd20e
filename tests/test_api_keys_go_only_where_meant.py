"""Where API keys go (the header model picker, Test after an unsaved URL edit, the index of
secret names) and untrusted server text shown as plain text, never rich text. Real HTTP to
small scripted servers, real widgets (offscreen)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import Qt as GuiQt
from PySide6.QtGui import QTextDocument

from app.core.runtime import Runtime
from app.core.secrets import SecretStore, secret_key
from app.core.settings import ProviderAccount
from app.ui.model_picker import KIND_ROLE, ModelPicker
from app.ui.settings.presets import PRESETS, url_problem
from app.ui.settings.providers_page import ProvidersPage
from tests.fakellm import ScriptedLLM, text
from tests.fixtures_keyring import MemoryKeyring
from tests.fixtures_qt import wait_until
from tests.fixtures_runtime import RuntimeFactory

pytestmark = pytest.mark.gui

OTHER = next(p for p in PRESETS if p.name.startswith("Other"))
ENV_KEY = "sk-env-openai-0123456789abcdef"
STORED = "sk-stored-for-server-a-9f8e7d"


def run(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    return loop.run_until_complete(asyncio.wait_for(coro, timeout=30))


class ModelsServer:
    """GET /v1/models answers `payload` with `status` once `gate` is set; records the
    Authorization header of every request."""

    def __init__(self, payload: Any, status: int = 200) -> None:
        self.payload, self.status = payload, status
        self.gate = threading.Event()
        self.gate.set()
        self.auth: list[str | None] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.auth.append(self.headers.get("Authorization"))
                owner.gate.wait(20)
                body = json.dumps(owner.payload).encode()
                self.send_response(owner.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def servers() -> Iterator[list[ModelsServer]]:
    made: list[ModelsServer] = []
    yield made
    for server in made:
        server.close()


def models(*names: str) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": n, "object": "model"} for n in names]}


# ---- 1. the picker sends the environment's OpenAI key to every key-less account ----------


def test_picker_does_not_send_the_environment_key_to_other_servers(
    qtbot: Any,
    qloop: Any,
    home: Path,
    servers: list[ModelsServer],
    monkeypatch: Any,
    make_runtime: RuntimeFactory,
) -> None:
    """OPENAI_API_KEY is a key for api.openai.com. Opening the header's list asks every
    account's server for its models; an Ollama / LAN / third-party account with no key of
    its own must not receive the OpenAI key."""
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    third_party = ModelsServer(models("llama3"))
    servers.append(third_party)
    rt = make_runtime(
        accounts=[
            ProviderAccount(id="lan", kind="openai", label="LAN box", base_url=third_party.url)
        ],
        keyring="memory",
    )
    try:
        picker = ModelPicker(rt)
        qtbot.addWidget(picker)
        picker.show()
        picker.open_popup()
        run(qloop, wait_until(lambda: third_party.auth, what="the models request"))
        assert third_party.auth == [None], "the OpenAI key from the environment was sent"
    finally:
        rt.close()


# ---- 2. Test after an unsaved URL edit sends the stored key to the new host ---------------


def test_test_does_not_send_the_stored_key_to_a_host_typed_but_not_saved(
    qtbot: Any,
    qloop: Any,
    home: Path,
    servers: list[ModelsServer],
    monkeypatch: Any,
    make_runtime: RuntimeFactory,
) -> None:
    """Account A has a key stored for server A. The user edits its base URL to another
    host (not saved, key not retyped) and clicks Test: the new host gets A's key."""
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    a, b = ModelsServer(models("m")), ModelsServer(models("m"))
    servers += [a, b]
    rt = make_runtime(
        accounts=[ProviderAccount(id="acc", kind="openai", label="A", base_url=a.url)],
        keyring="memory",
    )
    rt.secrets.set(secret_key("provider", "acc", "api_key"), STORED)
    try:
        page = ProvidersPage(rt)
        qtbot.addWidget(page)
        page.show()
        page.url_edit.selectAll()
        qtbot.keyClick(page.url_edit, Qt.Key.Key_Backspace)
        qtbot.keyClicks(page.url_edit, b.url)
        run(qloop, page._ask_server(page.current(), "…", page._fetch))  # Refresh models
        assert b.auth, "server B was not asked"
        assert b.auth == [None], "the key stored for server A went to server B"
    finally:
        rt.close()


# ---- 3. the index of names drops a key stored while the background load runs -------------


class SlowKeyring(MemoryKeyring):
    """get_password of `slow` waits for `release` (a keyring unlock prompt, a slow D-Bus)."""

    def __init__(self, slow: str) -> None:
        super().__init__()
        self.slow = slow
        self.entered = threading.Event()
        self.release = threading.Event()

    def get_password(self, service: str, username: str) -> str | None:
        if username == self.slow:
            self.entered.set()
            self.release.wait(10)
        return super().get_password(service, username)


def test_a_key_saved_while_secrets_load_is_still_used(home: Path, monkeypatch: Any) -> None:
    """The start-up load reads the names, reads each secret, then *replaces* the index
    with what it read. A key saved in between (Settings → Save) disappears from the index;
    `api_key_for` then never asks the keyring: requests go out without the key (or with the
    environment's)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    old = secret_key("provider", "old", "api_key")
    new = secret_key("provider", "new", "api_key")
    backend = SlowKeyring(slow=old)
    store = SecretStore(backend=backend, home=home)
    backend.items[("deskhand", old)] = "sk-old-value-123"
    store._index.add(old)  # stored by an earlier session
    store.start_loading()
    assert backend.entered.wait(10)
    store.set(new, "sk-new-value-456")  # the user saves a new account's key meanwhile
    backend.release.set()
    assert store.wait_loaded(10)
    account = ProviderAccount(id="new", kind="openai", label="New", base_url="http://x:1/v1")
    fresh = SecretStore(backend=backend, home=home)  # the next start
    assert store.api_key_for(account) == "sk-new-value-456"
    assert fresh.api_key_for(account) == "sk-new-value-456"


# ---- 4. untrusted server text rendered as rich text --------------------------------------

HOSTILE = '<img width="900" height="900" src="x">gpt'


def test_test_result_shows_a_servers_model_name_as_plain_text(
    qtbot: Any, qloop: Any, home: Path, monkeypatch: Any
) -> None:
    """Test picks the server's first model and writes “<name>” answered into the result
    line, a QLabel left in AutoText: a name with markup is rendered as HTML (here a
    900×900 image box that blows up the settings page)."""
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with ScriptedLLM(models=(HOSTILE,)) as llm:
        llm.add(text("OK"))
        rt = Runtime(home, entry_points=False)
        rt.secrets = SecretStore(backend=MemoryKeyring(), home=home)
        try:
            page = ProvidersPage(rt)
            qtbot.addWidget(page)
            page.show()
            account = page.add_account(OTHER)
            account.base_url = llm.openai_base_url
            page._load_form()
            run(qloop, page._ask_server(account, "…", page._test))
            label = page.test_result
            assert HOSTILE in label.text()
            rich = label.textFormat() != Qt.TextFormat.PlainText and GuiQt.mightBeRichText(
                label.text()
            )
            assert not rich, "a server's model name is rendered as HTML"
            assert label.sizeHint().height() < 200
        finally:
            rt.close()


def as_tooltip(tip: str) -> tuple[str, list[str]]:
    """The text a QToolTip shows for `tip` and the links in it (a tooltip that might be
    rich text is rendered as HTML)."""
    if not GuiQt.mightBeRichText(tip):
        return tip, []
    doc = QTextDocument()
    doc.setHtml(tip)
    links: list[str] = []
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isAnchor():
                links.append(fmt.anchorHref())
            it += 1
        block = block.next()
    return doc.toPlainText(), links


def test_picker_error_tooltip_is_plain_text(
    qtbot: Any, qloop: Any, home: Path, servers: list[ModelsServer], make_runtime: RuntimeFactory
) -> None:
    """A server's error message goes into the error row's tooltip; Qt renders a tooltip
    that looks like HTML as HTML."""
    bad = ModelsServer({"error": {"message": '<a href="https://evil.example">Sign in</a>'}}, 503)
    servers.append(bad)
    rt = make_runtime(
        accounts=[ProviderAccount(id="x", kind="openai", label="X", base_url=bad.url)],
        keyring="memory",
    )
    try:
        picker = ModelPicker(rt)
        qtbot.addWidget(picker)
        picker.show()
        picker.open_popup()
        run(qloop, wait_until(lambda: (x := picker.listing("x")) and not x.loading))
        items = [picker.popup.list.item(i) for i in range(picker.popup.list.count())]
        tips = [i.toolTip() for i in items if i.data(KIND_ROLE) == "error" and i.toolTip()]
        assert tips, "no error row"
        # A tooltip may be escaped rich text (<p>…</p>): what matters is how Qt shows it.
        for tip in tips:
            shown, links = as_tooltip(tip)
            assert '<a href="https://evil.example">Sign in</a>' in shown, shown
            assert not links, "the server's markup became a link"
    finally:
        rt.close()


# ---- 5. a base URL with a user name and password ---------------------------------------


def test_a_base_url_with_a_password_is_refused() -> None:
    """`http://admin:hunter2@gpu.lan:8000/v1` is accepted: the password is written to
    settings.json in clear, shown in the account list (and, from the setup card, becomes
    the account's name) and httpx sends it as Basic auth, replacing the API key header."""
    assert url_problem("http://admin:hunter2@gpu.lan:8000/v1")
    assert url_problem("api.openai.com@evil.example/v1")
