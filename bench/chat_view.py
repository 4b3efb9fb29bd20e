"""The chat view under load: event-loop responsiveness while streaming, and opening a
10,000-message conversation.

1. A view holding 200 long messages (markdown with code and tables, ~1.5k chars each)
   receives 5,000 tokens (~4 chars) at 2,000 tokens/s through `handle_event(TextDelta)`
   from a task on the qasync loop. A 1 ms repeating timer records the time between its
   ticks: the event-loop gap. Target: p99 ≤ 16 ms.
2. `load_history` of 10,000 messages, then the first paint.
3. The same stream into the 10,000-message conversation.
4. Why QTreeView: the cost of one row changing height with 10,000 rows, QListView vs
   QTreeView (same trivial delegate).

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python bench/chat_view.py
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import qasync
from PySide6.QtCore import QAbstractListModel, QModelIndex, QSize, Qt, QTimer
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QListView,
    QStyledItemDelegate,
    QTreeView,
)

from app.core.events import TextDelta, TurnFinished
from app.core.providers.base import ChatMessage, Usage
from app.ui.chat.render import STATS
from app.ui.chat.view import ChatView

TOKENS = 5_000
RATE = 2_000.0  # tokens per second

BODY = """## Step {i}: what changed

The service reads its settings at start-up and keeps a **cached copy**; see the
[configuration guide](https://example.org/config) for every key. Values from the
environment win over the file, and `DEBUG=1` turns on verbose logging for this module.
Secrets never belong in the file: put them in the keyring and refer to them by name.

```python
def load(path: str) -> dict[str, str]:
    result: dict[str, str] = {{}}
    for line in open(path, encoding="utf-8"):
        key, _, value = line.partition("=")
        result[key.strip()] = value.strip()
    return result
```

| key | default | meaning |
|-----|---------|---------|
| `timeout` | 30 | seconds before a request fails |
| `retries` | 3 | attempts on 429 and 5xx |
| `region` | eu-west-1 | where the bucket lives |
| `pool_size` | 8 | connections kept open to the database |
| `log_level` | info | one of debug, info, warning, error |

> Note: the `region` key is read only once. Changing it later needs a full restart,
> and buckets created in the old region are not moved for you.

Afterwards restart the worker so the new values apply; nothing else needs to change and
the old cache is dropped automatically within a minute. If the worker runs under systemd,
`systemctl restart worker` is enough; in a container, recreate it so the new environment
is picked up. Watch the log for the line *settings loaded* followed by the list of keys
that differ from the defaults — that is the quickest way to confirm the change took.
"""


def history(n: int, questions: bool = True) -> list[ChatMessage]:
    """`n` messages; with `questions`, every other one is a short user question."""
    return [
        ChatMessage("user", f"What changed in step {i}?")
        if questions and i % 2 == 0
        else ChatMessage("assistant", BODY.format(i=i))
        for i in range(n)
    ]


def answer_tokens(n: int) -> list[str]:
    text = ""
    i = 0
    while len(text) < n * 4:
        text += BODY.format(i=i) + "\n"
        i += 1
    return [text[k : k + 4] for k in range(0, n * 4, 4)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def stream_and_measure(view: ChatView) -> dict[str, float]:
    gaps: list[float] = []
    last = time.perf_counter()

    def tick() -> None:
        nonlocal last
        now = time.perf_counter()
        gaps.append((now - last) * 1000)
        last = now

    timer = QTimer()
    timer.setTimerType(Qt.TimerType.PreciseTimer)
    timer.setInterval(1)
    timer.timeout.connect(tick)
    tokens = answer_tokens(TOKENS)
    STATS.reset()
    flushes = view.flushes
    await asyncio.sleep(0.1)
    timer.start()
    start = time.perf_counter()
    sent = 0
    while sent < len(tokens):
        due = min(len(tokens), int((time.perf_counter() - start) * RATE) + 1)
        while sent < due:
            view.handle_event(TextDelta(tokens[sent]))
            sent += 1
        await asyncio.sleep(0.001)
    view.handle_event(TurnFinished(Usage(), "end_turn"))
    await asyncio.sleep(0.1)
    timer.stop()
    elapsed = time.perf_counter() - start
    gaps = gaps[1:]
    return {
        "seconds": elapsed,
        "p50": statistics.median(gaps),
        "p99": percentile(gaps, 0.99),
        "max": max(gaps),
        "flushes": view.flushes - flushes,
        "renders": STATS.total,
    }


def report_stream(title: str, r: dict[str, float]) -> None:
    print(f"{title}")
    print(
        f"  event-loop gap  p50 {r['p50']:.2f} ms   p99 {r['p99']:.2f} ms   max {r['max']:.2f} ms"
        f"   (target p99 ≤ 16 ms)"
    )
    print(
        f"  {TOKENS} tokens in {r['seconds']:.2f} s; {int(r['flushes'])} model updates"
        f" (≤ 1 per frame); {int(r['renders'])} documents rendered"
    )


def load_10k(view: ChatView, app: QApplication) -> tuple[float, float, int, int]:
    messages = history(10_000)
    STATS.reset()
    view.chat_delegate.layouts_built = 0
    start = time.perf_counter()
    view.load_history(messages)
    loaded = time.perf_counter()
    view.viewport().repaint()
    app.processEvents()
    painted = time.perf_counter()
    return (
        (loaded - start) * 1000,
        (painted - start) * 1000,
        view.chat_delegate.layouts_built,
        STATS.total,
    )


# ---- QListView vs QTreeView --------------------------------------------------------------


class _Heights(QAbstractListModel):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.heights = [40 + (i % 7) * 10 for i in range(n)]

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.heights)

    def data(self, index: QModelIndex, role: int = 0) -> None:
        return None


class _Delegate(QStyledItemDelegate):
    def __init__(self, model: _Heights) -> None:
        super().__init__()
        self.model = model

    def sizeHint(self, option: object, index: QModelIndex) -> QSize:
        return QSize(100, self.model.heights[index.row()])


def row_height_change_ms(app: QApplication, cls: type[QAbstractItemView]) -> float:
    model = _Heights(10_000)
    view = cls()
    view.setModel(model)
    delegate = _Delegate(model)
    view.setItemDelegate(delegate)
    view.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
    if isinstance(view, QTreeView):
        view.setHeaderHidden(True)
        view.setRootIsDecorated(False)
    view.resize(800, 600)
    view.show()
    app.processEvents()
    view.scrollToBottom()
    app.processEvents()
    times = []
    last = model.index(len(model.heights) - 1, 0)
    for _ in range(15):
        model.heights[-1] += 5
        start = time.perf_counter()
        if isinstance(view, QListView):  # QListView ignores dataChanged for sizes
            delegate.sizeHintChanged.emit(last)
        else:
            model.dataChanged.emit(last, last)
        app.processEvents()
        times.append((time.perf_counter() - start) * 1000)
    view.close()
    return statistics.median(times)


def main() -> None:
    app = QApplication.instance() or QApplication(sys.argv[:1])
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)

    view = ChatView()
    view.resize(1000, 800)
    view.show()
    view.load_history(history(200, questions=False))
    app.processEvents()
    chars = statistics.mean(len(m.content) for m in history(200, questions=False))
    r = loop.run_until_complete(stream_and_measure(view))
    report_stream(f"1. streaming into a view holding 200 messages of ~{chars:.0f} chars", r)

    big = ChatView()
    big.resize(1000, 800)
    big.show()
    app.processEvents()
    loaded, painted, layouts, renders = load_10k(big, app)
    print("2. load_history(10,000 messages)")
    print(
        f"  load {loaded:.0f} ms, + first paint {painted:.0f} ms total;"
        f" {layouts} items laid out, {renders} documents rendered"
    )
    r = loop.run_until_complete(stream_and_measure(big))
    report_stream("3. streaming into the 10,000-message view", r)

    tree = row_height_change_ms(app, QTreeView)
    lst = row_height_change_ms(app, QListView)
    print("4. one row changes height, 10,000 rows (median, incl. repaint)")
    print(f"  QTreeView {tree:.1f} ms   QListView {lst:.1f} ms")


if __name__ == "__main__":
    main()
