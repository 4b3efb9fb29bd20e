"""The model picker in the chat header, against real servers: the scripted model server
over HTTP, a closed port and a server that never answers (pytest-qt, offscreen, qasync); a
list that arrives late does not move the highlighted row, and "Refresh the lists" keeps
track of its own fetch."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit, QVBoxLayout, QWidget

from app.core.runtime import Runtime
from app.core.settings import ProviderAccount
from app.ui.model_picker import ACCOUNT_ROLE, KIND_ROLE, MODEL_ROLE, NEEDS_KEY, REFRESH, ModelPicker
from tests.fakellm import ScriptedLLM
from tests.fixtures_keyring import MemoryKeyring
from tests.fixtures_qt import wait_until
from tests.fixtures_runtime import RuntimeFactory
from tests.test_api_keys_go_only_where_meant import ModelsServer, models

pytestmark = pytest.mark.gui


def run(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    return loop.run_until_complete(asyncio.wait_for(coro, timeout=30))


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A server that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.fixture
def two_servers(
    home: Path, llm: ScriptedLLM, unused_port: int, make_runtime: RuntimeFactory
) -> Iterator[Runtime]:
    rt = make_runtime(
        accounts=[
            ProviderAccount(
                id="ollama",
                kind="openai",
                label="Ollama",
                base_url=llm.openai_base_url,
                model="fake-model",
            ),
            ProviderAccount(
                id="down",
                kind="openai",
                label="LM Studio",
                base_url=f"http://127.0.0.1:{unused_port}/v1",
            ),
            ProviderAccount(id="claude", kind="anthropic", label="Claude", base_url=llm.base_url),
        ],
        keyring="memory",
    )
    yield rt
    rt.close()


@pytest.fixture
def window(qtbot: Any, qloop: Any) -> Iterator[QWidget]:
    """A bare window with a line edit before the picker (to Tab from)."""
    widget = QWidget()
    widget.setLayout(QVBoxLayout())
    widget.edit = QLineEdit()  # type: ignore[attr-defined]
    widget.layout().addWidget(widget.edit)  # type: ignore[attr-defined]
    qtbot.addWidget(widget)
    yield widget


def place(window: QWidget, picker: ModelPicker) -> ModelPicker:
    window.layout().addWidget(picker)
    window.show()
    return picker


def rows(picker: ModelPicker) -> list[tuple[str, str]]:
    items = [picker.popup.list.item(i) for i in range(picker.popup.list.count())]
    return [(str(i.data(KIND_ROLE)), i.text()) for i in items]


def settled(picker: ModelPicker, *ids: str) -> bool:
    return all((x := picker.listing(i)) is not None and not x.loading for i in ids)


def test_lists_every_accounts_models_and_an_unreachable_one_says_why(
    qtbot: Any, qloop: Any, window: QWidget, two_servers: Runtime, llm: ScriptedLLM
) -> None:
    picker = place(window, ModelPicker(two_servers))
    assert picker.button.parts() == ("fake-model", "Ollama")  # the active account's
    picker.open_popup()
    assert picker.popup.isVisible()
    run(qloop, wait_until(lambda: settled(picker, "ollama", "down", "claude"), what="lists"))
    shown = rows(picker)
    assert shown[:4] == [
        ("header", "Ollama"),
        ("model", "fake-model"),
        ("model", "fake-model-large"),
        ("header", "LM Studio"),
    ]
    kind, why = shown[4]
    assert kind == "error" and why.startswith("Could not reach http://127.0.0.1:")
    assert shown[5:] == [
        ("header", "Claude"),
        ("model", "fake-model"),
        ("model", "fake-model-large"),
        ("action", "Refresh the lists"),
        ("action", "Connect a provider…"),
    ]
    # the model in use is selected, so Enter keeps it
    assert picker.popup.list.currentItem().data(MODEL_ROLE) == "fake-model"
    assert picker.popup.list.currentRow() == 1
    assert [r.headers.get("anthropic-version") is not None for r in llm.requests].count(True) == 1


def test_a_server_that_never_answers_does_not_hold_up_the_others(
    qtbot: Any,
    qloop: Any,
    window: QWidget,
    home: Path,
    llm: ScriptedLLM,
    silent_port: int,
    make_runtime: RuntimeFactory,
) -> None:
    rt = make_runtime(
        accounts=[
            ProviderAccount(
                id="slow", kind="openai", label="Slow", base_url=f"127.0.0.1:{silent_port}"
            ),
            ProviderAccount(id="fast", kind="openai", label="Fast", base_url=llm.openai_base_url),
        ],
        keyring="memory",
    )
    try:
        picker = place(window, ModelPicker(rt))
        picker.fetch_timeout = 3.0  # the fast server answers well within it on a busy machine
        picker.open_popup()
        run(qloop, wait_until(lambda: settled(picker, "fast"), what="the fast server"))
        assert not settled(picker, "slow")
        assert ("note", "Loading models…") in rows(picker)
        assert ("model", "fake-model-large") in rows(picker)
        run(qloop, wait_until(lambda: settled(picker, "slow"), what="the time-out"))
        assert picker.listing("slow").error == (  # type: ignore[union-attr]
            "The server did not answer in time. Check the address."
        )
        assert ("error", "The server did not answer in time. Check the address.") in rows(picker)
    finally:
        rt.close()


def test_keyboard_tab_enter_type_arrows_enter(
    qtbot: Any, qloop: Any, window: QWidget, two_servers: Runtime
) -> None:
    picker = place(window, ModelPicker(two_servers))
    chosen: list[tuple[str, str]] = []
    picker.chosen.connect(lambda a, m: chosen.append((a, m)))
    window.activateWindow()
    window.edit.setFocus()  # type: ignore[attr-defined]
    qtbot.keyClick(window.edit, Qt.Key.Key_Tab)  # type: ignore[attr-defined]
    assert window.focusWidget() is picker.button  # Tab reaches it
    assert picker.button.accessibleName() == "Model"
    assert "fake-model from Ollama" in picker.button.accessibleDescription()

    qtbot.keyClick(picker.button, Qt.Key.Key_Return)
    assert picker.popup.isVisible()
    run(qloop, wait_until(lambda: settled(picker, "ollama", "down", "claude"), what="lists"))
    qtbot.keyClicks(picker.popup.filter, "LARGE")
    assert [t for k, t in rows(picker) if k == "model"] == ["fake-model-large"] * 2
    qtbot.keyClick(picker.popup.filter, Qt.Key.Key_Down)  # the second match: Claude's
    qtbot.keyClick(picker.popup.filter, Qt.Key.Key_Return)
    assert chosen == [("claude", "fake-model-large")]
    assert not picker.popup.isVisible()
    assert picker.choice() == ("claude", "fake-model-large")
    assert picker.button.parts() == ("fake-model-large", "Claude")

    qtbot.keyClick(picker.button, Qt.Key.Key_Space)  # Space opens too; Esc closes
    assert picker.popup.isVisible()
    assert picker.popup.filter.text() == ""
    qtbot.keyClick(picker.popup.filter, Qt.Key.Key_Escape)
    assert not picker.popup.isVisible()
    assert chosen == [("claude", "fake-model-large")]


def test_typing_on_the_button_opens_the_list_filtered(
    qtbot: Any, qloop: Any, window: QWidget, two_servers: Runtime
) -> None:
    picker = place(window, ModelPicker(two_servers))
    picker.button.setFocus()
    qtbot.keyClicks(picker.button, "c")
    assert picker.popup.isVisible() and picker.popup.filter.text() == "c"
    qtbot.keyClicks(picker.popup.filter, "laude")
    run(qloop, wait_until(lambda: settled(picker, "claude"), what="Claude's list"))
    assert [t for k, t in rows(picker) if k in ("header", "model")] == [
        "Claude",
        "fake-model",
        "fake-model-large",
    ]
    qtbot.keyClicks(picker.popup.filter, " nothing-like-this")
    assert ("note", "No model matches “claude nothing-like-this”.") in rows(picker)


def test_lists_are_kept_for_the_session_until_refresh(
    qtbot: Any, qloop: Any, window: QWidget, two_servers: Runtime, llm: ScriptedLLM
) -> None:
    picker = place(window, ModelPicker(two_servers))
    picker.open_popup()
    run(qloop, wait_until(lambda: settled(picker, "ollama", "down", "claude"), what="lists"))
    asked = len(llm.requests)
    assert asked == 2  # Ollama and Claude (same server)
    picker.popup.hide()
    picker.open_popup()
    assert settled(picker, "ollama", "claude") and len(llm.requests) == asked
    llm.models = ("fresh-model",)
    refresh = next(
        picker.popup.list.item(i)
        for i in range(picker.popup.list.count())
        if picker.popup.list.item(i).text() == "Refresh the lists"
    )
    picker.popup.list.setCurrentItem(refresh)
    qtbot.keyClick(picker.popup.filter, Qt.Key.Key_Return)
    assert picker.popup.isVisible()  # stays open, loading again
    run(qloop, wait_until(lambda: settled(picker, "ollama", "down", "claude"), what="again"))
    assert len(llm.requests) == asked + 2
    assert [t for k, t in rows(picker) if k == "model"] == ["fresh-model", "fresh-model"]


def test_connect_a_provider_entry(
    qtbot: Any, qloop: Any, window: QWidget, home: Path, make_runtime: RuntimeFactory
) -> None:
    rt = make_runtime(accounts=[], keyring="memory")
    try:
        picker = place(window, ModelPicker(rt))
        asked: list[bool] = []
        picker.connectRequested.connect(lambda: asked.append(True))
        assert picker.button.parts() == ("No model connected", "")
        picker.open_popup()
        assert rows(picker) == [
            ("note", "No provider is set up yet."),
            ("action", "Connect a provider…"),
        ]
        qtbot.keyClick(picker.popup.filter, Qt.Key.Key_Return)
        assert asked == [True] and not picker.popup.isVisible()
    finally:
        rt.close()


def test_set_choice_shows_it_without_emitting(
    qtbot: Any, qloop: Any, window: QWidget, two_servers: Runtime
) -> None:
    picker = place(window, ModelPicker(two_servers))
    chosen: list[Any] = []
    picker.chosen.connect(lambda *a: chosen.append(a))
    picker.set_choice("claude", "fake-model-large")
    assert picker.choice() == ("claude", "fake-model-large")
    assert picker.button.parts() == ("fake-model-large", "Claude")
    picker.set_choice("claude", "")  # the account's own model: none saved
    assert picker.button.parts() == ("default model", "Claude")
    picker.set_choice(None, "")  # the active account
    assert picker.button.parts() == ("fake-model", "Ollama")
    picker.set_choice("removed-account", "x")  # gone: the active one is shown
    assert picker.button.parts() == ("fake-model", "Ollama")
    assert chosen == []


def test_model_names_are_plain_text(
    qtbot: Any, qloop: Any, window: QWidget, home: Path, make_runtime: RuntimeFactory
) -> None:
    hostile = "<b>bold</b>\u202eevil\x1b[31m"
    with ScriptedLLM(models=(hostile,)) as server:
        rt = make_runtime(
            accounts=[
                ProviderAccount(
                    id="x", kind="openai", label="<i>X</i>", base_url=server.openai_base_url
                )
            ],
            keyring="memory",
        )
        try:
            picker = place(window, ModelPicker(rt))
            picker.open_popup()
            run(qloop, wait_until(lambda: settled(picker, "x"), what="the list"))
            (model,) = [t for k, t in rows(picker) if k == "model"]
            assert model == "<b>bold</b>⟨U+202E⟩evil⟨U+001B⟩[31m"
            assert ("header", "<i>X</i>") in rows(picker)
            qtbot.keyClick(picker.popup.filter, Qt.Key.Key_Return)
            assert picker.choice() == ("x", hostile)  # the real id is what is chosen
            assert picker.button.parts()[0] == model
        finally:
            rt.close()


def test_a_long_list_shows_a_hundred_models_and_finds_the_rest_by_typing(
    qtbot: Any, qloop: Any, window: QWidget, home: Path, make_runtime: RuntimeFactory
) -> None:
    """OpenRouter-sized lists: 100 rows per account, a note for the rest, which typing
    finds; the model in use is shown even when it is not among the first 100."""
    names = tuple(f"m{i}" for i in range(500))
    with ScriptedLLM(models=names) as server:
        rt = make_runtime(
            accounts=[
                ProviderAccount(
                    id="x", kind="openai", label="X", base_url=server.openai_base_url, model="m450"
                )
            ],
            keyring="memory",
        )
        try:
            picker = place(window, ModelPicker(rt))
            picker.open_popup()
            run(qloop, wait_until(lambda: settled(picker, "x"), what="the list"))
            models = [t for k, t in rows(picker) if k == "model"]
            assert models == [f"m{i}" for i in range(100)] + ["m450"]
            assert ("note", "399 more: type to filter.") in rows(picker)
            assert picker.popup.list.currentItem().data(MODEL_ROLE) == "m450"
            assert picker.popup.list.height() <= 380
            qtbot.keyClicks(picker.popup.filter, "m49")
            assert [t for k, t in rows(picker) if k == "model"] == ["m49"] + [
                f"m{i}" for i in range(490, 500)
            ]
            assert not any(t.endswith("type to filter.") for _, t in rows(picker))
        finally:
            rt.close()


class KeyedServer:
    """GET /v1/models: 401 without `Bearer <key>`, the models with it."""

    def __init__(self, key: str) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        owner = self
        self.auth: list[str | None] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                got = self.headers.get("Authorization")
                owner.auth.append(got)
                ok = got == f"Bearer {key}"
                body = json.dumps(
                    {"data": [{"id": "secret-model"}]} if ok else {"error": {"message": "no"}}
                ).encode()
                self.send_response(200 if ok else 401)
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
        self.server.shutdown()
        self.server.server_close()


def test_a_401_without_a_key_asks_the_keyring_once_more(
    qtbot: Any,
    qloop: Any,
    window: QWidget,
    home: Path,
    monkeypatch: Any,
    make_runtime: RuntimeFactory,
) -> None:
    """The index of names lost the account's key (another process, an old bug): the
    request goes without it, the server says 401, the keyring is asked once, and the
    list comes with the key it had."""
    from app.core.secrets import secret_key

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = KeyedServer("sk-found-again-123")
    rt = make_runtime(
        accounts=[ProviderAccount(id="x", kind="openai", label="X", base_url=server.url)],
        keyring="memory",
    )
    try:
        backend = rt.secrets._backend
        assert isinstance(backend, MemoryKeyring)
        backend.items[("deskhand", secret_key("provider", "x", "api_key"))] = "sk-found-again-123"
        picker = place(window, ModelPicker(rt))
        picker.open_popup()
        run(qloop, wait_until(lambda: settled(picker, "x"), what="the list"))
        assert server.auth == [None, "Bearer sk-found-again-123"]
        assert [t for k, t in rows(picker) if k == "model"] == ["secret-model"]
    finally:
        server.close()
        rt.close()


def test_a_401_with_no_key_anywhere_says_so_once(
    qtbot: Any,
    qloop: Any,
    window: QWidget,
    home: Path,
    monkeypatch: Any,
    make_runtime: RuntimeFactory,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = KeyedServer("sk-nobody-has-it")
    rt = make_runtime(
        accounts=[ProviderAccount(id="x", kind="openai", label="X", base_url=server.url)],
        keyring="memory",
    )
    try:
        picker = place(window, ModelPicker(rt))
        picker.open_popup()
        run(qloop, wait_until(lambda: settled(picker, "x"), what="the list"))
        assert server.auth == [None]
        assert ("error", NEEDS_KEY) in rows(picker)
    finally:
        server.close()
        rt.close()


def test_the_provider_host_is_shown_in_its_ascii_form(
    qtbot: Any, qloop: Any, window: QWidget, home: Path, make_runtime: RuntimeFactory
) -> None:
    """A look-alike host ("аpi.openai.com" with a Cyrillic а) shows as the punycode name
    it really is."""
    rt = make_runtime(
        accounts=[
            ProviderAccount(
                id="x", kind="openai", label="OpenAI", base_url="https://\u0430pi.openai.com/v1"
            )
        ],
        keyring="memory",
    )
    try:
        picker = place(window, ModelPicker(rt))
        tip = picker.button.toolTip()
        assert "https://xn--pi-6kc.openai.com" in tip
        assert "\u0430pi" not in tip
    finally:
        rt.close()


# ---- timing a server controls: late lists and refreshes ----------------------------------


@pytest.fixture
def servers() -> Iterator[list[ModelsServer]]:
    made: list[ModelsServer] = []
    yield made
    for server in made:
        server.close()


def test_a_late_list_does_not_move_the_highlighted_model(
    qtbot: Any, qloop: Any, home: Path, servers: list[ModelsServer], make_runtime: RuntimeFactory
) -> None:
    """The user types "m", sees B's "m-b" highlighted and presses Enter. If A's list
    arrives in between (a server can time that), the highlight jumps to A's first model
    and Enter picks a model the user never saw highlighted."""
    slow, fast = ModelsServer(models("m-a")), ModelsServer(models("m-b"))
    slow.gate.clear()
    servers += [slow, fast]
    rt = make_runtime(
        accounts=[
            ProviderAccount(id="a", kind="openai", label="A", base_url=slow.url),
            ProviderAccount(id="b", kind="openai", label="B", base_url=fast.url),
        ],
        keyring="memory",
    )
    try:
        picker = ModelPicker(rt)
        qtbot.addWidget(picker)
        picker.show()
        picker.open_popup()
        run(qloop, wait_until(lambda: settled(picker, "b"), what="B's list"))
        qtbot.keyClicks(picker.popup.filter, "m")
        item = picker.popup.list.currentItem()
        assert (item.data(ACCOUNT_ROLE), item.data(MODEL_ROLE)) == ("b", "m-b")
        slow.gate.set()
        run(qloop, wait_until(lambda: settled(picker, "a"), what="A's list"))
        with qtbot.waitSignal(picker.chosen) as chosen:
            qtbot.keyClick(picker.popup.filter, Qt.Key.Key_Return)
        assert chosen.args == ["b", "m-b"], "Enter picked a model that was not highlighted"
    finally:
        rt.close()


def test_refresh_while_open_keeps_track_of_the_new_fetch(
    qtbot: Any, qloop: Any, home: Path, servers: list[ModelsServer], make_runtime: RuntimeFactory
) -> None:
    """Refresh cancels fetch 1 and starts fetch 2 under the same account id; fetch 1's
    `finally` then pops fetch 2 from `_tasks`, so `cancel()` (window closing) and the next
    refresh can no longer stop it, and its stale answer lands after a later refresh."""
    hanging = ModelsServer(models("m"))
    hanging.gate.clear()
    servers.append(hanging)
    rt = make_runtime(
        accounts=[ProviderAccount(id="x", kind="openai", label="X", base_url=hanging.url)],
        keyring="memory",
    )
    try:
        picker = ModelPicker(rt)
        qtbot.addWidget(picker)
        picker.show()
        picker.open_popup()
        run(qloop, wait_until(lambda: hanging.auth, what="fetch 1"))
        first = picker._tasks["x"]
        picker._activate("action", "", REFRESH)
        run(qloop, wait_until(lambda: len(hanging.auth) == 2, what="fetch 2"))
        run(qloop, wait_until(first.done, what="fetch 1's cancellation (its finally) to run"))
        task = picker._tasks.get("x")
        assert task is not None and not task.done(), "the running fetch is no longer tracked"
    finally:
        hanging.gate.set()
        rt.close()
