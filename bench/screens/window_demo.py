"""The real main window with a realistic conversation, driven through the scripted model
server: a rate-limit error retried, an answer with a code block and a table, a finished tool
card and a write awaiting approval. Grabs a PNG (for docs/ and for looking at it).

Scenes (`--scene`): `approval` (the above), `actions` (a regenerated answer with its
version switch and hover actions, a selection, a denied call and a Stopped turn), `new` (a
new chat with its starter prompts), `picker` (the model picker open; needs a real X server
such as Xvfb with QT_QPA_PLATFORM=xcb, since the list is a window of its own).

Run (offscreen or under Xvfb):
  .venv/bin/python bench/screens/window_demo.py --out docs/window-light.png
  .venv/bin/python bench/screens/window_demo.py --dark --out docs/window-dark.png
  .venv/bin/python bench/screens/window_demo.py --scene actions --width 800 --height 600
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

ANSWER = """Here is a small script that reports disk usage per folder:

```python
import shutil
from pathlib import Path

def usage(root: Path) -> list[tuple[str, int]]:
    sizes = []
    for child in sorted(root.iterdir()):
        if child.is_dir():
            total = sum(f.stat().st_size for f in child.rglob("*") if f.is_file())
            sizes.append((child.name, total))
    return sizes
```

On your home folder it found:

| Folder | Size | Files |
|---|---:|---:|
| Projects | 4.2 GB | 38,112 |
| Downloads | 1.7 GB | 412 |
| Documents | 320 MB | 1,204 |

Want me to save it as `disk_usage.py` in your Projects folder?"""


async def drive(window, llm, root: Path) -> None:
    from tests.fakellm import error, text, tool_calls
    from tests.fixtures_qt import wait_until

    for _ in range(4):  # more than the provider retries by itself
        llm.add(error(429, retry_after=0))
    llm.add(tool_calls(("c1", "fs_list_dir", {"path": str(root)}), text_before=""))
    llm.add(text(ANSWER, chunk_size=40))
    window.send("How much space do my folders use? Write me a script for it.", [])
    await wait_until(lambda: not window.controller.busy, what="first turn")
    window.controller.retry()
    await wait_until(lambda: not window.controller.busy, what="retry")
    script = (root / "Projects" / "disk_usage.py").as_posix()
    llm.add(
        tool_calls(
            ("c2", "fs_write_file", {"path": script, "content": ANSWER.split("```")[1][7:]}),
            text_before="Saving it now.",
        )
    )
    window.send("Yes, save it please.", [])
    await wait_until(lambda: window.controller.pending_approvals(), what="approval")


async def drive_actions(window, llm, root: Path) -> None:
    """A regenerated answer (version 2 of 2) hovered with part of it selected, a denied
    write and a turn the user stopped."""
    from PySide6.QtCore import QEvent, QPoint, Qt
    from PySide6.QtGui import QMouseEvent

    from app.ui.chat.model import AssistantMessage
    from tests.fakellm import hang, text, tool_calls
    from tests.fixtures_qt import wait_until

    view = window.chat_view
    llm.add(tool_calls(("d1", "fs_delete", {"path": str(root / "Downloads")})))
    llm.add(text("Understood, I left your Downloads folder alone."))
    window.send("Clean up my Downloads folder", [])
    await wait_until(lambda: window.controller.pending_approvals(), what="approval")
    window.controller.decide("d1", "deny")
    await wait_until(lambda: not window.controller.busy, what="denied turn")
    llm.add(text("Lisbon in May: warm days, few crowds, and the jacaranda trees in bloom."))
    llm.add(text(ANSWER.split("On your home")[0].strip(), chunk_size=40))
    window.send("Write me a script that reports disk usage per folder.", [])
    await wait_until(lambda: not window.controller.busy, what="answer")
    window.chat_view.regenerateRequested.emit(view.chat_model.items[-1].index)
    await wait_until(lambda: not window.controller.busy, what="regenerated answer")
    llm.add(hang("Here is a long essay about the history of"))
    window.send("Write a long essay about Lisbon's history", [])
    await wait_until(lambda: any("history of" in i.plain_text() for i in view.chat_model.items))
    window.controller.stop()
    await wait_until(lambda: not window.controller.busy, what="stop")
    answer = next(
        i
        for i in reversed(view.chat_model.items)
        if isinstance(i, AssistantMessage) and i.branch is not None
    )
    await asyncio.sleep(0.6)  # rows measured exactly (the view settles after a turn)
    view.scrollTo(view.chat_model.index(answer.row, 0))
    await asyncio.sleep(0.3)
    view.select_range((answer.row, 0, 10), (answer.row, 1, 40))
    rect = view.visualRect(view.chat_model.index(answer.row, 0))
    point = QPoint(rect.center().x(), rect.bottom() - 30)
    move = QMouseEvent(
        QEvent.Type.MouseMove,
        point,
        view.viewport().mapToGlobal(point),
        Qt.MouseButton.NoButton,
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
    )
    view.mouseMoveEvent(move)


async def drive_new(window, llm, root: Path) -> None:
    window.new_chat()


async def drive_picker(window, llm, root: Path) -> None:
    """The header's model picker open over a finished answer, filtered by a typed word."""
    from tests.fakellm import text
    from tests.fixtures_qt import wait_until

    llm.add(text("Lisbon in May: warm days, few crowds, and the jacaranda trees in bloom."))
    window.send("When is the best time to visit Lisbon?", [])
    await wait_until(lambda: not window.controller.busy, what="answer")
    picker = window.model_picker
    picker.open_popup()
    await wait_until(
        lambda: all(not (x := picker.listing(a.id)) or not x.loading for a in picker._accounts()),
        what="the model lists",
    )
    picker.refresh()
    picker.open_popup()
    await asyncio.sleep(0.3)


SCENES = {"approval": drive, "actions": drive_actions, "new": drive_new, "picker": drive_picker}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dark", action="store_true")
    parser.add_argument("--scene", choices=sorted(SCENES), default="approval")
    parser.add_argument("--out", default="window.png")
    parser.add_argument("--width", type=int, default=1180)
    parser.add_argument("--height", type=int, default=860)
    parser.add_argument("--hold", type=float, default=0, help="stay open this many seconds")
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"

    import qasync
    from PySide6.QtWidgets import QApplication

    from app.core.settings import ProviderAccount
    from app.ui.main import App
    from tests.fakellm import ScriptedLLM

    work = Path(tempfile.mkdtemp(prefix="deskhand-demo-"))
    root = work / "home"
    for folder in ("Projects", "Downloads", "Documents"):
        (root / folder).mkdir(parents=True)
    qapp = QApplication(sys.argv)
    loop = qasync.QEventLoop(qapp)
    asyncio.set_event_loop(loop)
    models = ("llama3.1:8b", "qwen2.5-coder:7b", "mistral-small:24b", "phi4:14b")
    with ScriptedLLM(models=models) as llm, ScriptedLLM(models=("gemma-3-12b",)) as studio:
        from app.core.settings import Settings, SettingsStore

        store = SettingsStore(work / "deskhand" / "settings.json")
        (work / "deskhand").mkdir()
        settings = Settings()
        account = ProviderAccount(
            kind="openai", label="Ollama", base_url=llm.openai_base_url, model="llama3.1:8b"
        )
        settings.providers.append(account)
        settings.providers.append(
            ProviderAccount(kind="openai", label="LM Studio", base_url=studio.openai_base_url)
        )
        settings.active_provider = account.id
        settings.files.allowed_roots = [str(root)]
        settings.general.theme = "dark" if args.dark else "light"
        store.save(settings)
        app = App(qapp, work / "deskhand")
        store_ = app.runtime.store
        for title in ("Kubernetes: drain a node", "Fix flaky CI test", "Trip to Lisbon"):
            from app.core.providers.base import ChatMessage

            conv = store_.create_conversation(title)
            store_.append_message(conv, ChatMessage("user", title))
        app.window.sidebar.refresh()
        app.window.resize(args.width, args.height)
        app.show()
        with loop:
            loop.run_until_complete(SCENES[args.scene](app.window, llm, root))
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:
                qapp.processEvents()
            if args.scene == "picker":  # the list is a window of its own: grab the screen
                area = app.window.frameGeometry()
                app.window.screen().grabWindow(0).copy(area).save(args.out)
            else:
                app.window.grab().save(args.out)
            print(f"saved {args.out}", flush=True)
            if args.hold:
                loop.run_until_complete(asyncio.sleep(args.hold))
            app.window.controller.stop()


if __name__ == "__main__":
    main()
