"""The start-up path `deskhand` takes (`app.ui.main.run_gui`): the window's frame is
painted before the runtime, the settings model or the chat are imported; the chat list and
the message box come next (typing works, Send waits and then sends); nothing heavy is
loaded by then or once the whole window is up, even with MCP servers and a stored key
configured. Timings are in bench/startup.py, not here."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.core.settings_file import GeneralPeek, read_general

REPO = Path(__file__).resolve().parents[1]
#: QtNetwork too: the single-instance socket no longer needs it on Linux (3 MiB idle).
HEAVY = ("docker", "kubernetes", "playwright", "caldav", "mcp", "httpx", "yaml")
HEAVY += ("PySide6.QtNetwork",)
#: Knowledge search and documents: numpy, SQLite with its vector extension, the embedder.
HEAVY += ("numpy", "apsw", "sqlite_vec", "tokenizers", "safetensors", "wordllama")
HEAVY += ("app.core.knowledge", "app.core.memory_search", "pypdfium2", "docx", "openpyxl")
#: The built-in engine: its package, llama.cpp's bindings, the GGUF reader, the downloader.
HEAVY += ("app.core.engine", "llama_cpp", "gguf", "huggingface_hub")
#: Not needed to paint the frame: they come right after it.
AFTER_PAINT = ("pydantic", "qasync", "app.core.runtime", "app.core.settings", "app.ui.chat")

CHILD = textwrap.dedent(
    """
    import gc, json, os, sys
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication
    from app.ui import startup_timeline

    def tops(names):
        return sorted({m for m in sys.modules for n in names if m == n or m.startswith(n + ".")})

    def window():
        return [w for w in QApplication.topLevelWidgets() if hasattr(w, "composer")][0]

    report = {}

    def stored_user_messages():
        store = window().runtime.store
        return [m.content for c in store.list_conversations() for m in store.load_messages(c.id)
                if m.role == "user"]

    def wait_for_the_message(turns=[0]):
        turns[0] += 1
        if stored_user_messages() or turns[0] > 500:
            report["stored"] = stored_user_messages()
            print(json.dumps(report), flush=True)
            os._exit(0)
        QTimer.singleShot(10, wait_for_the_message)

    def marked(name, when):
        if name == "paint":
            report["at_paint"] = tops(AFTER_PAINT)
            # a worker imports from here on: a collection there could free a widget
            report["collects_by_itself_at_paint"] = gc.isenabled()
        if name == "ready":
            main = window()
            report["heavy_at_ready"] = sorted({m.split(".")[0] for m in tops(HEAVY)})
            report["chats"] = main.sidebar.list.model().rowCount()
            main.composer.edit.setFocus()
            main.composer.edit.insertPlainText("typed while starting")
            main.composer.submit()  # Send pressed before the window is whole: it waits
            report["kept_while_starting"] = main.composer.text()
        if name == "attached":
            main = window()
            report["heavy"] = sorted({m.split(".")[0] for m in tops(HEAVY)})
            report["impls"] = sorted(
                m for m in sys.modules
                if m.startswith("tools.") and m.count(".") >= 2 and not m.endswith(".manifest")
            )
            report["composer_after"] = main.composer.text()
            QTimer.singleShot(0, wait_for_the_message)

    startup_timeline.listeners.append(marked)
    from app.ui.main import run_gui
    run_gui(sys.argv[1])
    """
)
CHILD = CHILD.replace("AFTER_PAINT", repr(AFTER_PAINT)).replace("HEAVY", repr(HEAVY))


def _configured_home(home: Path) -> None:
    """A saved chat, a provider account with a key in the index, an MCP server."""
    from app.core.store import Store

    home.mkdir(parents=True)
    with Store(home / "deskhand.db") as store:
        store.create_conversation("Earlier chat")
    (home / "settings.json").write_text(
        json.dumps(
            {
                "providers": [
                    {
                        "id": "acct1",
                        "kind": "openai",
                        "label": "Work",
                        "base_url": "http://127.0.0.1:9/v1",
                        "model": "m",
                    }
                ],
                "active_provider": "acct1",
                "general": {"theme": "dark"},
            }
        ),
        "utf-8",
    )
    (home / "secrets-index.json").write_text(json.dumps(["provider/acct1/api_key"]), "utf-8")
    server = {"command": sys.executable, "args": [str(REPO / "tests" / "mcp_servers.py"), "stdio"]}
    (home / "mcp.json").write_text(json.dumps({"mcpServers": {"one": server}}), "utf-8")


def test_the_frame_paints_first_and_the_ready_window_loads_nothing_heavy(tmp_path: Path):
    home = tmp_path / "home"
    _configured_home(home)
    env = {
        "QT_QPA_PLATFORM": "offscreen",
        "PYTHONPATH": str(REPO),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "KUBECONFIG": str(tmp_path / "no-kubeconfig"),
    }
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(home)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {
        "at_paint": [],
        "collects_by_itself_at_paint": False,
        "heavy_at_ready": [],
        "chats": 1,
        "kept_while_starting": "typed while starting",
        "heavy": [],
        "impls": [],
        "composer_after": "",
        "stored": ["typed while starting"],  # sent once the window was whole
    }


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, GeneralPeek()),
        ("{not json", GeneralPeek()),
        ('["a list"]', GeneralPeek()),
        ('{"general": "dark"}', GeneralPeek()),
        ('{"general": {"theme": "neon", "start_minimized": "yes"}}', GeneralPeek()),
        ('{"general": {"theme": "dark", "start_minimized": true}}', GeneralPeek("dark", True)),
    ],
)
def test_the_frame_reads_theme_and_minimized_without_the_settings_model(
    tmp_path: Path, content: str | None, expected: GeneralPeek
):
    if content is not None:
        (tmp_path / "settings.json").write_text(content, "utf-8")
    assert read_general(tmp_path) == expected


def test_a_runtime_that_cannot_start_is_reported_and_quits(tmp_path: Path, qtbot):
    from PySide6.QtWidgets import QMessageBox

    from app.ui.main import StagedStart
    from app.ui.main_window import MainWindow

    frame = MainWindow(home=tmp_path)
    qtbot.addWidget(frame)
    quits: list[bool] = []

    class Qapp:
        def quit(self) -> None:
            quits.append(True)

    start = StagedStart(Qapp(), tmp_path, frame, store=None)  # type: ignore[arg-type]
    start._failed(PermissionError("cannot write <home>/settings.json"))
    box = start.failure
    assert box is not None and box.isVisible() and start.app is None
    assert "PermissionError: cannot write <home>/settings.json" in box.text()
    box.button(QMessageBox.StandardButton.Close).click()
    assert quits == [True]


def test_waiting_for_start_up_work_keeps_the_window_answering(qapp):
    """Before the asyncio loop exists, start-up waits for its worker with Qt's events
    running (a resize or repaint is answered); the worker's error reaches the caller."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from PySide6.QtCore import QTimer

    from app.ui.startup_timeline import wait_for

    release = threading.Event()
    ticks: list[int] = []
    timer = QTimer()
    timer.timeout.connect(lambda: (ticks.append(1), len(ticks) >= 3 and release.set()))
    timer.start(1)
    with ThreadPoolExecutor(1) as pool:
        wait_for(qapp, pool.submit(lambda: release.wait(10) or None))
        timer.stop()
        assert len(ticks) >= 3  # Qt ran while the worker waited for it
        failing = pool.submit(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            wait_for(qapp, failing)
