"""Review 17b: the header model picker under timing a server controls — a list that arrives
late moves the highlighted row, and "Refresh the lists" loses track of its own fetch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.core.settings import ProviderAccount
from app.ui.model_picker import ACCOUNT_ROLE, MODEL_ROLE, REFRESH, ModelPicker
from tests.fixtures_qt import wait_until
from tests.fixtures_runtime import RuntimeFactory
from tests.test_review17b_keys import ModelsServer, models, run

pytestmark = pytest.mark.gui


@pytest.fixture
def servers() -> Iterator[list[ModelsServer]]:
    made: list[ModelsServer] = []
    yield made
    for server in made:
        server.close()


def settled(picker: ModelPicker, account_id: str) -> bool:
    listing = picker.listing(account_id)
    return listing is not None and not listing.loading


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
