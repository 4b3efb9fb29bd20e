"""The real window against the scripted model server (pytest-qt, offscreen, qasync loop)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QPushButton

from app.core.events import TextDelta
from app.core.providers.base import ChatMessage
from app.core.runtime import Runtime
from app.core.settings import ProviderAccount
from app.core.threads import GuiThreadError
from app.ui.icons import app_icon
from app.ui.main_window import MainWindow
from app.ui.tray import Tray
from tests.fakellm import ScriptedLLM, error, hang, text, tool_calls
from tests.fixtures_qt import wait_until

pytestmark = pytest.mark.gui
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "files"
    path.mkdir()
    return path


@pytest.fixture
def runtime(home: Path, root: Path, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rt = Runtime(home, entry_points=False)
    account = ProviderAccount(
        kind="openai", label="Scripted", base_url=llm.openai_base_url, model="scripted-model"
    )

    def configure(settings):
        settings.providers.append(account)
        settings.active_provider = account.id
        settings.files.allowed_roots = [str(root)]

    rt.settings = rt.settings_store.update(configure)
    yield rt
    rt.close()


@pytest.fixture
def window(runtime, qtbot, qloop):
    tray = Tray(app_icon())
    win = MainWindow(runtime, tray)
    qtbot.addWidget(win)
    win.show()
    yield win
    win.stop_background_work()
    tray.hide()


def buttons(win: MainWindow, label: str) -> list[QPushButton]:
    """The visible approval buttons whose label (the text without its shortcut) is `label`."""
    return [
        b
        for b in win.chat_view.findChildren(QPushButton)
        if b.property("choice_label") == label and b.isVisible()
    ]


def type_and_send(qtbot, win: MainWindow, message: str) -> None:
    win.composer.edit.setFocus()
    qtbot.keyClicks(win.composer.edit, message)
    qtbot.keyClick(win.composer.edit, Qt.Key.Key_Return)


def stored(win: MainWindow) -> list[ChatMessage]:
    return win.runtime.store.load_messages(win.controller.conversation_id)


def test_send_and_see_the_streamed_answer(window, llm, qtbot, qloop):
    llm.add(text("Hello **there**, streamed in pieces.", chunk_size=2))

    async def body():
        type_and_send(qtbot, window, "hi")
        assert window.composer.text() == ""
        await wait_until(
            lambda: not window.controller.busy and len(llm.requests) == 1, what="the turn to finish"
        )
        await wait_until(lambda: window.chat_view.message_count() == 2)

    qloop.run_until_complete(body())
    assert [m.content for m in stored(window)] == ["hi", "Hello **there**, streamed in pieces."]
    assert window.sidebar.list.count() == 1
    assert window.title_label.text() == "hi"
    assert llm.requests[0].body["model"] == "scripted-model"


def test_approve_from_the_card(window, llm, root, qtbot, qloop):
    target = root / "made.txt"
    llm.add(tool_calls(("w1", "fs_write_file", {"path": str(target), "content": "yes"})))
    llm.add(text("Written."))

    async def body():
        type_and_send(qtbot, window, "make a file")
        await wait_until(lambda: buttons(window, "Allow once"), what="approval buttons")
        assert not target.exists()
        qtbot.mouseClick(buttons(window, "Allow once")[0], Qt.MouseButton.LeftButton)
        await wait_until(lambda: not window.controller.busy, what="the turn to finish")

    qloop.run_until_complete(body())
    assert target.read_text() == "yes"
    assert not buttons(window, "Allow once")


def test_deny_from_the_card(window, llm, root, qtbot, qloop):
    target = root / "never.txt"
    llm.add(tool_calls(("w1", "fs_write_file", {"path": str(target), "content": "no"})))
    llm.add(text("OK, I will not."))

    async def body():
        type_and_send(qtbot, window, "make a file")
        await wait_until(lambda: buttons(window, "Deny"), what="approval buttons")
        qtbot.mouseClick(buttons(window, "Deny")[0], Qt.MouseButton.LeftButton)
        await wait_until(lambda: not window.controller.busy, what="the turn to finish")

    qloop.run_until_complete(body())
    assert not target.exists()
    tool_msg = next(m for m in stored(window) if m.role == "tool")
    assert "declined" in tool_msg.content


def test_stop_mid_stream(window, llm, qtbot, qloop):
    llm.add(hang("partial words"))

    seen: list[str] = []
    window.controller.agentEvent.connect(
        lambda e: seen.append(e.text) if isinstance(e, TextDelta) else None
    )

    async def body():
        type_and_send(qtbot, window, "go")
        await wait_until(lambda: "".join(seen) == "partial words", what="the partial answer")
        assert window.composer.send_button.text() == "Stop"
        qtbot.keyClick(window, Qt.Key.Key_Escape)
        await wait_until(lambda: not window.controller.busy, what="stop")

    qloop.run_until_complete(body())
    llm.wait_for_disconnects(1)
    assert [m.content for m in stored(window)] == ["go", "partial words"]
    assert window.composer.send_button.text() == "Send"


def test_provider_error_offers_retry_and_keeps_the_message(window, llm, qtbot, qloop):
    llm.add(error(401))
    llm.add(text("Now it works."))

    async def body():
        type_and_send(qtbot, window, "please answer")
        await wait_until(lambda: not window.controller.busy and len(llm.requests) == 1)
        window.chat_view.retryRequested.emit()
        await wait_until(
            lambda: len(llm.requests) == 2 and not window.controller.busy, what="the retry"
        )

    qloop.run_until_complete(body())
    assert [m.content for m in stored(window)] == ["please answer", "Now it works."]


def test_search_history_and_open_a_hit(window, qtbot, qloop):
    store = window.runtime.store
    conv = store.create_conversation("Kubernetes notes")
    store.append_message(conv, ChatMessage("user", "how do I drain a node safely"))
    store.append_message(store.create_conversation("Other"), ChatMessage("user", "pasta recipe"))
    window.sidebar.refresh()
    assert window.sidebar.list.count() == 2

    async def body():
        window.sidebar.focus_search()
        qtbot.keyClicks(window.sidebar.search, "drain")
        await wait_until(
            lambda: (
                window.sidebar.list.count() == 1
                and "Kubernetes notes" in window.sidebar.list.item(0).text()
            )
        )
        window.sidebar.list.itemClicked.emit(window.sidebar.list.item(0))

    qloop.run_until_complete(body())
    assert window.controller.conversation_id == conv
    assert window.chat_view.message_count() == 1


def test_delete_with_undo(window, qtbot, qloop):
    store = window.runtime.store
    conv = store.create_conversation("Keep me")
    store.append_message(conv, ChatMessage("user", "important"))
    window.sidebar.refresh()
    window.open_conversation(conv)
    window.delete_current()
    assert store.get_conversation(conv).deleted_at is not None
    assert window.sidebar.list.count() == 0 and window.undo_bar.isVisible()
    qtbot.mouseClick(window.undo_bar.button, Qt.MouseButton.LeftButton)
    assert store.get_conversation(conv).deleted_at is None
    assert window.controller.conversation_id == conv


def test_approval_while_hidden_notifies_through_the_tray(window, llm, root, qtbot, qloop):
    llm.add(tool_calls(("w1", "fs_write_file", {"path": str(root / "x"), "content": "x"})))
    llm.add(text("done"))

    async def body():
        type_and_send(qtbot, window, "write x")
        window.hide()
        await wait_until(lambda: window.controller.pending_approvals(), what="approval")
        assert window.tray.sent[-1][0] == "Deskhand needs your approval"
        window.controller.decide("w1", "deny")
        await wait_until(lambda: not window.controller.busy)

    qloop.run_until_complete(body())


def test_window_state_and_last_conversation_are_restored(runtime, qtbot, qloop):
    store = runtime.store
    conv = store.create_conversation("Remember me")
    store.append_message(conv, ChatMessage("user", "hello"))
    first = MainWindow(runtime)
    qtbot.addWidget(first)
    first.resize(760, 560)  # the minimum is 720 × 500
    first.splitter.setSizes([300, 600])
    first.open_conversation(conv)
    first.composer.set_text("unsent draft")
    first.save_state()
    second = MainWindow(runtime)
    qtbot.addWidget(second)
    assert second.controller.conversation_id == conv
    assert second.size().width() == 760
    assert second.composer.text() == "unsent draft"


def test_shortcuts_are_wired(window):
    shortcuts = {
        a.text(): a.shortcut().toString() for a in window.findChildren(type(window.new_action))
    }
    assert shortcuts["New chat"] == "Ctrl+N"
    assert shortcuts["Search chats"] == "Ctrl+K"
    assert shortcuts["Settings…"] == "Ctrl+,"
    assert shortcuts["Focus message box"] == "Ctrl+L"
    assert shortcuts["Stop"] == "Esc"


def test_first_run_offers_a_local_server_and_then_chats(home, llm, qtbot, qloop, monkeypatch):
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    rt = Runtime(home, entry_points=False)
    llm.add(text("Hi from the local model."))
    try:

        async def body():
            win = MainWindow(rt)
            qtbot.addWidget(win)
            win.local_candidates = [
                ("Ollama", llm.openai_base_url),
                ("LM Studio", "http://127.0.0.1:9/v1"),
            ]
            win.show()
            assert win.chat_stack.currentIndex() == 1
            assert win.model_picker.button.parts()[0] == "No model connected"
            await wait_until(lambda: win.setup_card.buttons, what="a detected server")
            assert [b.text() for b in win.setup_card.buttons] == [
                "Use Ollama (2 models — fake-model)"
            ]
            qtbot.mouseClick(win.setup_card.buttons[0], Qt.MouseButton.LeftButton)
            assert win.chat_stack.currentIndex() == 0
            assert (
                rt.settings_store.load().active_provider_account().base_url == llm.openai_base_url
            )
            type_and_send(qtbot, win, "hello")
            await wait_until(lambda: not win.controller.busy and llm.requests[-1].method == "POST")
            win.stop_background_work()

        qloop.run_until_complete(body())
    finally:
        rt.close()


def test_without_any_server_the_card_says_so(home, qtbot, qloop, monkeypatch):
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    rt = Runtime(home, entry_points=False)
    try:

        async def body():
            win = MainWindow(rt)
            qtbot.addWidget(win)
            win.local_candidates = [("Ollama", "http://127.0.0.1:9/v1")]
            win.show()
            await wait_until(lambda: "No local server answered" in win.setup_card.status.text())
            assert win.setup_card.buttons == []

        qloop.run_until_complete(body())
    finally:
        rt.close()


def test_opening_the_window_imports_no_heavy_module(tmp_path: Path):
    code = textwrap.dedent(
        """
        import asyncio, json, sys
        from PySide6.QtWidgets import QApplication
        import qasync
        app = QApplication([])
        asyncio.set_event_loop(qasync.QEventLoop(app))
        from app.ui.main import App
        gui = App(app, sys.argv[1])
        gui.show()
        app.processEvents()
        heavy = ("docker", "kubernetes", "playwright", "caldav", "mcp", "httpx")
        loaded = sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in heavy})
        impls = sorted(m for m in sys.modules if m.startswith("tools.") and m.count(".") >= 2
                       and not m.endswith(".manifest"))
        print(json.dumps({"heavy": loaded, "impls": impls, "visible": gui.window.isVisible()}))
        """
    )
    env = {
        "QT_QPA_PLATFORM": "offscreen",
        "PYTHONPATH": str(REPO),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
    }
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "home")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"heavy": [], "impls": [], "visible": True}


def test_the_header_shows_the_accounts_tools_act_on(window, qtbot, qloop, monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    qtbot.waitUntil(window.refresh_accounts().done)
    assert window.accounts_label.text() == ""  # only the local Docker: nothing to choose
    added = window.runtime.accounts.add("docker", "build box", {"host": "ssh://me@build"})
    window.runtime.accounts.set_active("docker", added.id)
    qtbot.waitUntil(window.refresh_accounts().done)  # read in a worker thread
    assert window.accounts_label.text() == "Docker: build box"
    # reading them on the window's thread (YAML, contexts) is what the guard refuses
    with pytest.raises(GuiThreadError):
        window.runtime.accounts.active_summary()


def test_the_thread_guard_logs_instead_of_failing_for_users(monkeypatch, caplog):
    from app.core.threads import forget_gui_thread, mark_gui_thread, off_gui_thread

    calls: list[int] = []

    @off_gui_thread
    def blocking(x: int) -> int:
        calls.append(x)
        return x * 2

    mark_gui_thread()
    try:
        monkeypatch.setenv("DESKHAND_STRICT_THREADS", "0")
        assert blocking(2) == 4 and blocking(3) == 6  # works, and says so once
        assert sum("ran on the GUI thread" in r.message for r in caplog.records) == 1
        monkeypatch.setenv("DESKHAND_STRICT_THREADS", "1")
        with pytest.raises(GuiThreadError, match="blocking"):
            blocking(4)
        assert calls == [2, 3]
        import threading

        done: list[int] = []
        worker = threading.Thread(target=lambda: done.append(blocking(5)))
        worker.start()
        worker.join()
        assert done == [10]  # any other thread is fine
    finally:
        forget_gui_thread()


def test_the_first_keystroke_loads_the_first_turn_off_the_gui_thread(window, qtbot, monkeypatch):
    import threading

    calls: list[str] = []
    real = window.runtime.warm_up

    def recording() -> None:
        calls.append(threading.current_thread().name)
        real()

    monkeypatch.setattr(window.runtime, "warm_up", recording)
    qtbot.keyClicks(window.composer.edit, "hel")
    qtbot.waitUntil(lambda: "registry" in window.runtime.__dict__)
    qtbot.keyClicks(window.composer.edit, "lo")
    assert len(calls) == 1 and calls[0].startswith("deskhand-off-gui")
    assert "app.core.agent" in sys.modules


def test_the_first_keystroke_loads_the_http_clients_async_backend_off_the_gui_thread():
    """httpx's first request takes an anyio lock, which imports anyio's asyncio backend: the
    window loads it on a worker at the first keystroke, so the first turn does not (a fresh
    process: this one has it already)."""
    code = (
        "import sys, threading\n"
        "from app.core.runtime import Runtime\n"
        "import tempfile\n"
        "rt = Runtime(tempfile.mkdtemp(), entry_points=False, load_secrets=False)\n"
        "before = 'anyio._backends._asyncio' in sys.modules\n"
        "t = threading.Thread(target=rt.warm_http, name='deskhand-off-gui_x')\n"
        "t.start(); t.join()\n"
        "print(before, 'anyio._backends._asyncio' in sys.modules)\n"
    )
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["False", "True"]


def test_warm_up_refuses_the_gui_thread(window):
    with pytest.raises(GuiThreadError):
        window.runtime.warm_up()


def test_reopening_a_chat_builds_its_tools_off_the_gui_thread(window, monkeypatch):
    import threading

    store = window.runtime.store
    conv_id = store.create_conversation("Earlier")
    store.append_message(conv_id, ChatMessage("user", "hello there"))
    threads: list[str] = []
    real = window.runtime.open_conversation

    built = threading.Event()

    def recording(conversation_id: str | None = None):
        threads.append(threading.current_thread().name)
        assert built.wait(10), "the window waited for the conversation to build"
        return real(conversation_id)

    monkeypatch.setattr(window.runtime, "open_conversation", recording)
    window.open_conversation(conv_id)  # returns while the worker is still building
    assert window.controller.conversation_id == conv_id  # known at once, for the sidebar
    assert window.chat_view.message_count() == 1  # shown from the store meanwhile
    built.set()
    conversation = window.controller.conversation  # waits for the worker
    assert conversation is not None and conversation.id == conv_id
    assert [m.content for m in conversation.messages] == ["hello there"]
    assert len(threads) == 1 and threads[0].startswith("deskhand-off-gui")


def test_a_turn_builds_its_client_agent_and_prompt_off_the_gui_thread(
    window, llm, qtbot, qloop, monkeypatch
):
    """The HTTP client (its TLS context), the conversation's tools, the agent and its
    system prompt (a scan of the skill folders) cost tens of ms: a turn does none of them
    on the GUI thread (bench/loop_stall.py)."""
    import threading

    import app.core.providers as providers

    gui = threading.current_thread()
    threads: dict[str, object] = {}
    real_make, real_open = providers.make_provider, window.runtime.open_conversation
    real_agent = window.runtime.make_agent

    def make(config):
        threads["client"] = threading.current_thread()
        return real_make(config)

    def open_conversation(conversation_id=None):
        threads["tools"] = threading.current_thread()
        return real_open(conversation_id)

    def make_agent(*args, **kwargs):
        threads["agent"] = threading.current_thread()
        return real_agent(*args, **kwargs)

    monkeypatch.setattr(providers, "make_provider", make)
    monkeypatch.setattr(window.runtime, "open_conversation", open_conversation)
    monkeypatch.setattr(window.runtime, "make_agent", make_agent)
    (window.runtime.home / "skills").mkdir()  # the prompt lists skills: a scan
    window._warmed = True  # as if typing had not started it: the send must
    llm.add(text("done"))

    async def body():
        window.composer.set_text("hi")
        window.composer.submit()
        await wait_until(lambda: len(llm.requests) == 1 and not window.controller.busy)

    qloop.run_until_complete(body())
    assert set(threads) == {"client", "tools", "agent"}
    assert all(thread is not gui for thread in threads.values())
    assert [m.content for m in stored(window)] == ["hi", "done"]


def test_a_turn_does_no_guarded_work_on_the_gui_thread(window, llm, qloop, monkeypatch):
    """Keyring access, the skills scan and the system prompt are guarded (app.core.threads):
    a whole turn with a stored key and a skill runs without tripping the guard."""
    import traceback

    from app.core import threads
    from app.core.secrets import SecretStore, secret_key
    from app.ui.off_gui import run_off_gui
    from tests.fixtures_keyring import MemoryKeyring

    tripped: list[str] = []
    real_strict = threads.strict

    def noting_strict() -> bool:  # the guard asks this only on the GUI thread
        tripped.append("".join(traceback.format_stack(limit=8)))
        return real_strict()

    runtime = window.runtime
    runtime.secrets = SecretStore(backend=MemoryKeyring(), home=runtime.home)
    key = secret_key("provider", runtime.settings.active_provider_account().id, "api_key")
    run_off_gui(lambda: runtime.secrets.set(key, "sk-turn-0123")).result(timeout=10)
    skill = window.runtime.home / "skills" / "notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: notes\ndescription: Take notes.\n---\nBody\n")
    monkeypatch.setattr(threads, "strict", noting_strict)
    llm.add(text("done"))

    async def body():
        window.composer.set_text("hi")
        window.composer.submit()
        await wait_until(lambda: len(llm.requests) == 1 and not window.controller.busy)

    qloop.run_until_complete(body())
    assert tripped == []
    assert [m.content for m in stored(window)] == ["hi", "done"]
    request = llm.requests[0]
    assert request.headers["authorization"] == "Bearer sk-turn-0123"  # the keyring was read
    assert "notes" in request.body["messages"][0]["content"]  # the skills were scanned
    with pytest.raises(GuiThreadError):
        window.runtime.system_prompt()
    with pytest.raises(GuiThreadError):
        window.runtime.skills.discover()
    with pytest.raises(GuiThreadError):
        window.runtime.secrets.get(key)


def test_the_first_keystroke_prepares_the_file_tools_places_off_the_gui_thread(
    window, qtbot, monkeypatch
):
    import threading

    calls: list[str] = []
    monkeypatch.setattr(
        window.runtime, "warm_file_places", lambda: calls.append(threading.current_thread().name)
    )
    qtbot.keyClicks(window.composer.edit, "x")
    qtbot.waitUntil(lambda: bool(calls))
    assert calls[0].startswith("deskhand-off-gui")


def test_the_first_keystroke_also_warms_the_code_highlighter(window, qtbot):
    from app.ui.chat.render import COMMON_LEXERS, _lexer

    _lexer.cache_clear()
    qtbot.keyClicks(window.composer.edit, "x")
    qtbot.waitUntil(lambda: _lexer.cache_info().currsize >= len(COMMON_LEXERS))


def test_freezing_start_up_objects_hides_them_from_full_collections():
    import gc

    from app.ui.gc_guard import MainThreadCollector

    before = gc.get_freeze_count()
    try:
        MainThreadCollector.freeze()
        assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()


def test_a_send_pressed_while_starting_sends_what_was_typed_and_keeps_the_draft(
    runtime, llm, qtbot, qloop
):
    """The window's early composer (before the runtime): typing works, Send waits; once
    whole, the window sends exactly what was typed, to the chat picked meanwhile, and the
    chat's saved draft stays saved."""
    frame, _first, picked = _early_frame(runtime, qtbot, "saved", "an old draft")
    frame.sidebar.conversationSelected.emit(picked)  # a click on a chat while starting
    frame.composer.edit.insertPlainText("typed while starting")
    frame.composer.submit()
    assert frame.composer.text() == "typed while starting"  # held, not lost
    llm.add(text("ok"))

    async def body():
        frame.attach(runtime, Tray(app_icon()))
        await wait_until(lambda: len(llm.requests) == 1 and not frame.controller.busy)

    qloop.run_until_complete(body())
    frame.stop_background_work()
    assert frame.controller.conversation_id == picked
    assert [m.content for m in runtime.store.load_messages(picked)] == [
        "typed while starting",
        "ok",
    ]
    assert frame.ui_state.drafts.get(picked) == "saved"


def test_the_collector_freezes_what_an_import_made_and_collects_the_rest(tmp_path, monkeypatch):
    """After start-up, a stretch in which modules were imported (the MCP SDK on a worker)
    leaves thousands of long-lived objects: they are frozen, not walked on the GUI thread.
    Garbage made without an import is still collected."""
    import gc
    import sys

    from app.ui.gc_guard import IMPORT_BURST_OBJECTS, MainThreadCollector

    (tmp_path / "burst_module_for_collector.py").write_text(
        f"TABLE = [[i] for i in range({IMPORT_BURST_OBJECTS * 2})]\n", "utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    collector = MainThreadCollector(interval_ms=60_000, freeze_imports=True)
    try:
        gc.collect()
        collector.tick()  # the collector's module count is now the current one
        frozen_before = gc.get_freeze_count()
        import burst_module_for_collector  # noqa: F401

        assert gc.get_count()[0] > IMPORT_BURST_OBJECTS
        assert collector.tick() == 0
        assert gc.get_freeze_count() >= frozen_before + IMPORT_BURST_OBJECTS

        class Cycle:
            me: object = None

        for _ in range(gc.get_threshold()[0] + 10):  # young garbage, no import meanwhile
            loop = Cycle()
            loop.me = loop
        del loop
        assert collector.tick() > 0
    finally:
        collector.stop()
        gc.unfreeze()
        sys.modules.pop("burst_module_for_collector", None)


def test_garbage_a_freeze_kept_is_swept_once_the_app_is_not_in_front(tmp_path, monkeypatch, qapp):
    """Freezing an import burst also freezes the garbage waiting at that moment (here a
    cycle holding 1 MB); it is freed when the user is elsewhere, not kept for the session."""
    import gc
    import sys
    import weakref

    from PySide6.QtCore import Qt

    from app.ui.gc_guard import IMPORT_BURST_OBJECTS, MainThreadCollector

    (tmp_path / "second_burst_module.py").write_text(
        f"TABLE = [[i] for i in range({IMPORT_BURST_OBJECTS * 2})]\n", "utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    collector = MainThreadCollector(qapp, interval_ms=60_000, freeze_imports=True)

    class Holder:
        me: object = None
        payload = b""

    try:
        gc.collect()
        collector.tick()
        garbage = Holder()
        garbage.me, garbage.payload = garbage, bytes(1 << 20)
        alive = weakref.ref(garbage)
        del garbage
        import second_burst_module  # noqa: F401

        assert collector.tick() == 0 and collector.sweep_due
        assert alive() is not None  # frozen with the import's objects
        qapp.applicationStateChanged.emit(Qt.ApplicationState.ApplicationActive)
        assert alive() is not None  # in front: no full collection now
        qapp.applicationStateChanged.emit(Qt.ApplicationState.ApplicationInactive)
        assert alive() is None and not collector.sweep_due
        assert gc.get_freeze_count() > 0  # what lives stays out of later collections
    finally:
        collector.stop()
        collector.setParent(None)
        gc.unfreeze()
        sys.modules.pop("second_burst_module", None)


# ---- start-up puts the window together one part per turn of the loop -------------------------
# (`MainWindow.attach_steps`, `App.build_step`): whatever the user does between two parts —
# typing, a click on a chat, closing, Quit — lands as it would in a whole window.


def _early_frame(runtime: Any, qtbot: Any, picked_draft: str = "", first_draft: str = "") -> Any:
    """The frame as start-up has it before the runtime: chat list and composer only, over
    two chats ("First", last open; "Picked")."""
    from app.ui.ui_state import UiState

    store = runtime.store
    first, picked = store.create_conversation("First"), store.create_conversation("Picked")
    drafts = {c: d for c, d in ((first, first_draft), (picked, picked_draft)) if d}
    state = UiState(last_conversation=first, drafts=drafts)
    state.save(runtime.home / "ui_state.json")
    del runtime.__dict__["store"]  # the frame opens the store itself, as at start-up
    store.close()
    frame = MainWindow(home=runtime.home)
    qtbot.addWidget(frame)
    runtime.adopt_store(frame.build_early())
    frame.show()
    return frame, first, picked


def test_no_part_shows_a_window_of_its_own_and_typing_reaches_the_message_box(
    runtime, qtbot, qloop
):
    frame, _first, _picked = _early_frame(runtime, qtbot)
    frame.activateWindow()
    qtbot.waitExposed(frame)
    frame.composer.edit.setFocus()
    typed = ""
    for n, _ in enumerate(frame.attach_steps(runtime, Tray(app_icon())), start=1):
        QApplication.processEvents()
        shown = [w for w in QApplication.topLevelWidgets() if w.isVisible() and w is not frame]
        assert shown == [], f"part {n} showed {shown}"
        qtbot.keyClicks(frame.composer.edit, str(n % 10))
        typed += str(n % 10)
    assert frame.composer.text() == typed
    frame.stop_background_work()


def test_the_chat_pane_shows_in_the_last_part_laid_out_once_at_its_size(runtime, qtbot, qloop):
    """Until the last part the early placeholder is what shows; the new chat pane, still
    hidden, opens the last chat laid out at the size it will show at (and is painted off
    screen; the menu bar and the message box's place are already taken), so showing it
    lays nothing out again: the chat keeps its size and no message is laid out twice, in
    the last part or in the events after it. The menus are there, and usable once whole."""
    from app.core.providers.base import ChatMessage

    frame, first, _picked = _early_frame(runtime, qtbot)
    for n in range(6):
        runtime.store.append_message(first, ChatMessage(role="user", content=f"question {n}"))
        runtime.store.append_message(
            first, ChatMessage(role="assistant", content=f"answer {n} " + "words " * 40)
        )
    qtbot.waitExposed(frame)
    placeholder = frame._early_pane
    pane_width = placeholder.width()
    hidden_sizes: list[Any] = []
    for _ in frame.attach_steps(runtime, Tray(app_icon())):
        QApplication.processEvents()
        assert placeholder.isVisible() and not frame.attached
        titles = frame.menuBar().actions()
        assert [a.text() for a in titles] == ["&File", "&Edit", "&View", "&Chat"]
        assert not any(a.isEnabled() for a in titles)  # no empty menu opens meanwhile
        if frame.chat_view.window() is frame and not frame.chat_view.isVisible():
            hidden_sizes.append(frame.chat_view.size())
    # the loop ended with the last part: the pane shows, the placeholder is gone
    assert frame.attached and frame.chat_view.isVisible()
    assert hidden_sizes[-1].width() == pane_width  # its size while hidden
    built, size = frame.chat_view.chat_delegate.layouts_built, frame.chat_view.size()
    assert size == hidden_sizes[-1] and built > 0
    QApplication.processEvents()
    qtbot.wait(50)
    assert frame.chat_view.size() == size
    assert frame.chat_view.chat_delegate.layouts_built == built
    assert all(a.isEnabled() for a in frame.menuBar().actions())
    assert frame.splitter.count() == 2
    frame.stop_background_work()


def test_a_chat_picked_between_any_two_parts_gets_the_held_send_and_keeps_its_draft(
    runtime, llm, qtbot, qloop
):
    """A Send pressed while starting goes, once, with what was typed, to the chat picked
    meanwhile — a click comes after every part here; the chat's own draft stays saved."""
    frame, first, picked = _early_frame(runtime, qtbot, "saved draft", "first's draft")
    frame.composer.edit.insertPlainText("typed while starting")
    frame.composer.submit()  # held until the window is whole
    llm.add(text("ok"))
    for _ in frame.attach_steps(runtime, Tray(app_icon())):
        frame.sidebar.conversationSelected.emit(picked)

    async def settled() -> None:
        await wait_until(lambda: len(runtime.store.load_messages(picked)) >= 2, timeout=10)
        await wait_until(lambda: not frame.controller.busy, timeout=10)

    qloop.run_until_complete(settled())
    frame.stop_background_work()
    assert [m.content for m in runtime.store.load_messages(picked)] == [
        "typed while starting",
        "ok",
    ]
    assert len(llm.requests) == 1
    assert frame.ui_state.drafts.get(picked) == "saved draft"
    assert frame.ui_state.drafts.get(first) == "first's draft"  # the chat left keeps its own


def test_closing_or_quitting_while_the_app_is_put_together_is_heard(
    runtime, qtbot, qloop, monkeypatch
):
    """A close between two parts keeps the window closed (it is not shown again when the
    App is whole), and Quit then reaches a whole App."""
    from app.ui.main import App

    frame, _first, _picked = _early_frame(runtime, qtbot)
    heard: list[tuple[str, bool]] = []

    def noted(what: str) -> Any:
        return lambda self: heard.append((what, hasattr(self, "notifications")))

    monkeypatch.setattr(App, "quit", noted("quit"))
    monkeypatch.setattr(App, "_window_closing", noted("close"))
    app = App(QApplication.instance(), runtime.home, window=frame, runtime=runtime, staged=True)
    while True:
        more = app.build_step()
        if frame.attached and not heard:
            frame.close()
            frame.quitRequested.emit()
        if not more:
            break
    try:
        assert heard == [("close", True), ("quit", True)]
    finally:
        app.stop_reminders()
        frame.stop_background_work()
        app.collector.stop()


def test_the_collector_makes_no_full_collection_until_start_up_is_done(monkeypatch):
    """A full collection while the window is put together held the interpreter lock for
    15 ms; once start-up is done, full collections run again (what start-up made frozen)."""
    import gc

    from app.ui.gc_guard import MainThreadCollector

    collected: list[int] = []
    monkeypatch.setattr(gc, "collect", lambda generation=2: collected.append(generation) or 0)
    monkeypatch.setattr(gc, "get_count", lambda: (10, 10, 10))
    monkeypatch.setattr(gc, "get_threshold", lambda: (1, 1, 1))
    collector = MainThreadCollector(interval_ms=60_000, starting=True)
    try:
        collector.tick()
        collector.start_up_done()
        assert collector.freeze_imports and collector.sweep_due
        collector.tick()
    finally:
        collector.stop()
        gc.unfreeze()
    assert collected == [1, 2]
