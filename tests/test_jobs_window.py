"""Background jobs in the window: a job that outlives its turn keeps its card and its
questions, Esc stops it (and only this conversation's jobs), the Stop action says when there
is something to stop."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.core.settings import AgentDefinition, ProviderAccount, Settings
from app.ui.chat.model import ToolCard, ToolStatus
from app.ui.main_window import MainWindow
from tests.chat_helpers import settled
from tests.fakellm import ScriptedLLM, hang, text, tool_calls
from tests.fixtures_qt import wait_until
from tests.fixtures_runtime import RuntimeFactory


@pytest.fixture
def llm2() -> Iterator[ScriptedLLM]:
    """The sub-agent's own model server (its script apart from the conversation's)."""
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def window(
    make_runtime: RuntimeFactory,
    llm2: ScriptedLLM,
    tmp_path: Path,
    qtbot: Any,
    qloop: asyncio.AbstractEventLoop,
) -> Iterator[MainWindow]:
    side = ProviderAccount(kind="openai", label="side", base_url=llm2.openai_base_url, model="m")
    slow = AgentDefinition(name="Slow", description="Reads.", provider=side.id)

    def change(settings: Settings) -> None:
        settings.providers.append(side)
        settings.agents = [slow]

    work = tmp_path / "work"
    work.mkdir()
    runtime = make_runtime(roots=[work], configure=change)
    win = MainWindow(runtime)
    qtbot.addWidget(win)
    win.resize(1000, 900)
    win.show()
    yield win
    win.stop_background_work()


def run(loop: asyncio.AbstractEventLoop, body: Coroutine[Any, Any, None]) -> None:
    loop.run_until_complete(asyncio.wait_for(body, 30))


def send(qtbot: Any, win: MainWindow, message: str) -> None:
    win.composer.edit.setFocus()
    qtbot.keyClicks(win.composer.edit, message)
    qtbot.keyClick(win.composer.edit, Qt.Key.Key_Return)


def job_card(win: MainWindow) -> ToolCard | None:
    cards = [
        i
        for i in win.chat_view.chat_model.items
        if isinstance(i, ToolCard) and i.call_id == "jobs/job-1"
    ]
    return cards[0] if cards else None


def test_esc_stops_a_job_that_outlived_its_turn(
    window: MainWindow,
    llm: ScriptedLLM,
    llm2: ScriptedLLM,
    qtbot: Any,
    qloop: asyncio.AbstractEventLoop,
) -> None:
    llm.add(
        tool_calls(
            (
                "s1",
                "submit_job",
                {"tool": "delegate_agent", "arguments": {"agent": "Slow", "task": "x"}},
            )
        )
    )
    llm.add(text("It runs in the background."))
    llm2.add(hang("working"))

    async def body() -> None:
        send(qtbot, window, "start it")
        await wait_until(lambda: not window.controller.busy and job_card(window) is not None)
        await asyncio.to_thread(llm2.wait_for_hang)
        await settled(window.chat_view)
        card = job_card(window)
        assert card is not None and card.status == ToolStatus.RUNNING
        assert window.stop_action.isEnabled(), "a running job is something to stop"
        window.stop_action.trigger()
        await wait_until(lambda: window.controller.running_jobs() == 0, what="the job stopped")
        await wait_until(lambda: not window.stop_action.isEnabled(), what="Stop turned off")

    run(qloop, body())
    card = job_card(window)
    assert card is not None and card.status != ToolStatus.RUNNING
    conversation_id = window.controller.conversation_id
    job = window.runtime.jobs.get("job-1", conversation_id)
    assert job is not None and job.status == "stopped"
