"""Sub-agents in the window: a `delegate_agent` call's card (the agent, its task, what it is
writing, how long, its report, "Open Researcher's conversation"), the agent's own calls
nested under it and hidden with it, its questions saying who asks with only Allow once and
Deny, and what is left open when it ends or the turn is stopped.

The chat view is fed the events the agent loop gives (the shapes `app/core/delegation.py`
sends) and clicked with real mouse events; the window runs whole turns against the
scripted model server, through the real pipeline, file tools and store. A scheduled task's
question from a sub-agent is checked on its notification."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QModelIndex, QPoint, QPointF, Qt

from app.core.approval import ApprovalRequest, Decision, deny_all
from app.core.events import (
    ApprovalDecided,
    ApprovalRequested,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
    TurnFinished,
)
from app.core.notifications import ALLOW_ONCE, DENY
from app.core.providers.base import Usage
from app.core.settings import AgentDefinition
from app.core.task_approvals import UnattendedApprovals
from app.core.task_runner import TaskRunner
from app.ui.chat.approval_bar import ApprovalBar
from app.ui.chat.delegation_card import DelegationLayout
from app.ui.chat.layouts import Hit
from app.ui.chat.model import (
    AssistantMessage,
    ChatItem,
    DelegationCard,
    MarkerItem,
    ToolCard,
    ToolStatus,
    UserMessage,
)
from app.ui.chat.view import ChatView
from app.ui.main_window import MainWindow
from tests.chat_helpers import settled
from tests.fakellm import ScriptedLLM, text, tool_calls
from tests.fixtures_qt import wait_until
from tests.fixtures_runtime import RuntimeFactory
from tests.test_task_runner import START, Clock, add_task, runtime_for
from tests.test_task_runner import world as world
from tests.test_task_runs_unattended import Screen
from tools.spec import ToolResult

pytestmark = pytest.mark.gui

TASK = "What do the notes in the work folder say?\nList each file with one line about it."
REPORT = "The notes say the meeting moved to **Thursday**."
WRITER = AgentDefinition(
    name="Writer", description="Writes notes.", tools=["fs_write_file", "fs_read_file"]
)


@pytest.fixture
def view(qtbot: Any, qloop: asyncio.AbstractEventLoop) -> Iterator[ChatView]:
    widget = ChatView()
    qtbot.addWidget(widget)
    widget.resize(900, 700)
    widget.show()
    yield widget


def run(loop: asyncio.AbstractEventLoop, body: Coroutine[Any, Any, None]) -> None:
    loop.run_until_complete(asyncio.wait_for(body, 30))


def card(view: ChatView, call_id: str) -> ToolCard:
    found = [i for i in view.chat_model.items if isinstance(i, ToolCard) and i.call_id == call_id]
    assert found, f"no card for {call_id}"
    return found[0]


def delegation(view: ChatView, call_id: str = "d1") -> DelegationCard:
    found = card(view, call_id)
    assert isinstance(found, DelegationCard)
    return found


def only_step(view: ChatView, parent: str = "d1") -> ToolCard:
    """The one call the agent of delegation `parent` made (whatever id the run gave it)."""
    found = [i for i in view.chat_model.items if isinstance(i, ToolCard) and i.parent_call_id]
    assert len(found) == 1 and found[0].parent_call_id == parent, found
    return found[0]


def asking(view: ChatView) -> ApprovalBar | None:
    """The approval bar of the agent's call, once it asks."""
    steps = [i for i in view.chat_model.items if isinstance(i, ToolCard) and i.parent_call_id]
    return view.bar(steps[0].call_id) if steps else None


def point(view: ChatView, item: ChatItem, local: QPointF) -> QPoint:
    """The viewport point of `local` (item coordinates) of `item`'s row."""
    rect = view.visualRect(view.chat_model.index(item.row, 0))
    return (view.chat_delegate.origin(rect, item) + local).toPoint()


def hit(view: ChatView, item: ChatItem, action: str) -> Hit:
    found = [h for h in view.chat_delegate.layout(item).hits if h.action == action]
    assert found, f"no {action} on {item}"
    return found[0]


def click(qtbot: Any, view: ChatView, item: ChatItem, action: str) -> None:
    where = point(view, item, hit(view, item, action).rect.center())
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=where)


def left_edge(view: ChatView, item: ChatItem) -> float:
    """Where the item's card starts in the viewport."""
    layout = view.chat_delegate.layout(item)
    rect = view.visualRect(view.chat_model.index(item.row, 0))
    return view.chat_delegate.origin(rect, item).x() + layout.frame.x()


def start(view: ChatView, call_id: str = "d1", agent: str = "Researcher", task: str = TASK) -> None:
    view.handle_event(
        ToolCallStarted(call_id, "delegate_agent", {"agent": agent, "task": task}, "agents")
    )


#: Who works for which delegation in these tests.
AGENTS = {"d1": "Researcher", "d2": "Reviewer"}


def child_started(view: ChatView, call_id: str, name: str = "fs_read_file") -> None:
    parent = call_id.split("/")[0]
    agent = AGENTS[parent]
    view.handle_event(
        ToolCallStarted(call_id, name, {"path": "~/work/notes.txt"}, "fs", ["read"], agent, parent)
    )


def finished(call_id: str, conversation_id: str = "child-1") -> ToolCallFinished:
    data = {
        "agent": "Researcher",
        "conversation_id": conversation_id,
        "stop_reason": "end_turn",
        "seconds": 4.2,
        "changed": [],
    }
    return ToolCallFinished(
        call_id, "delegate_agent", ToolResult(ok=True, content=REPORT, data=data), 4.2
    )


def child_request(call_id: str = "d1/1", agent: str = "Researcher") -> ApprovalRequest:
    return ApprovalRequest(
        call_id,
        "fs_write_file",
        "fs",
        ["create"],
        {"path": "~/work/out.txt", "content": "hi"},
        summary="Create ~/work/out.txt (1 line)",
        reason="Researcher's profile does not cover it",
        agent=agent,
    )


# ---- the delegation card -----------------------------------------------------------------


def test_the_card_shows_the_agent_its_task_and_what_it_writes_then_its_report(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        start(view)
        item = delegation(view)
        view.handle_event(ToolProgress("d1", "Researcher started"))
        await settled(view)
        layout = view.chat_delegate.layout(item)
        assert isinstance(layout, DelegationLayout)
        assert (layout.title, layout.task) == ("Researcher", TASK.splitlines()[0])
        assert layout.progress == "Researcher started"
        assert item.status == ToolStatus.RUNNING and item.seconds is None  # time runs on
        view.handle_event(ToolProgress("d1", "Researcher: …the meeting moved to Thurs"))
        await settled(view)
        layout = view.chat_delegate.layout(item)
        assert layout.progress == "…the meeting moved to Thurs"  # the card names it already
        assert not any(h.action == "open_conversation" for h in layout.hits)
        view.handle_event(finished("d1"))
        await settled(view)
        layout = view.chat_delegate.layout(item)
        assert layout.progress == ""
        assert item.status == ToolStatus.OK and item.seconds == 4.2
        assert [d.toPlainText() for _, d in layout.docs] == [
            "The notes say the meeting moved to Thursday."
        ]
        assert hit(view, item, "open_conversation").payload == "child-1"
        said = view.chat_model.data(view.chat_model.index(item.row, 0))
        assert said.startswith("Sub-agent Researcher — done")

    run(qloop, body())


def test_a_long_report_shows_its_start_until_it_is_opened(
    view: ChatView, qloop: asyncio.AbstractEventLoop, qtbot: Any
) -> None:
    report = "\n\n".join(f"Finding {n}: the file says something." for n in range(40))

    async def body() -> None:
        start(view)
        result = ToolResult(ok=True, content=report, data={"conversation_id": "child-1"})
        view.handle_event(ToolCallFinished("d1", "delegate_agent", result, 1.0))
        await settled(view)
        item = delegation(view)
        short = view.chat_delegate.layout(item)
        assert short.report_clip is not None
        click(qtbot, view, item, "toggle_result")
        await settled(view)
        whole = view.chat_delegate.layout(item)
        assert whole.report_clip is None and whole.height > short.height + 200

    run(qloop, body())


def test_open_the_agents_conversation_is_offered_once_it_finished_and_not_during_a_turn(
    view: ChatView, qloop: asyncio.AbstractEventLoop, qtbot: Any
) -> None:
    wanted: list[str] = []
    view.conversationRequested.connect(wanted.append)

    async def body() -> None:
        start(view)
        view.handle_event(finished("d1"))
        await settled(view)
        item = delegation(view)
        view.set_busy(True)  # the parent's turn goes on: opening would stop it
        click(qtbot, view, item, "open_conversation")
        assert wanted == []
        view.set_busy(False)
        click(qtbot, view, item, "open_conversation")
        assert wanted == ["child-1"]

    run(qloop, body())


# ---- the agent's calls -------------------------------------------------------------------


def test_an_agents_calls_sit_under_its_card_even_after_another_delegation_started(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        start(view, "d1")
        start(view, "d2", agent="Reviewer", task="Review the notes")
        child_started(view, "d2/1")
        child_started(view, "d1/1")
        child_started(view, "d1/2", "fs_search_files")
        await settled(view)
        rows = [(type(i).__name__, getattr(i, "call_id", "")) for i in view.chat_model.items]
        assert rows == [
            ("DelegationCard", "d1"),
            ("ToolCard", "d1/1"),
            ("ToolCard", "d1/2"),
            ("DelegationCard", "d2"),
            ("ToolCard", "d2/1"),
        ]
        assert [i.row for i in view.chat_model.items] == list(range(5))
        first = card(view, "d1/1")
        assert first.title == "Researcher · Read file"
        assert card(view, "d2/1").title == "Reviewer · Read file"
        assert [s.call_id for s in delegation(view, "d1").steps] == ["d1/1", "d1/2"]
        outer = left_edge(view, delegation(view, "d1"))
        assert left_edge(view, first) >= outer + 30  # indented under its delegation
        assert left_edge(view, delegation(view, "d2")) == outer

    run(qloop, body())


def test_a_step_arriving_while_the_answer_streams_goes_above_it_and_keeps_the_selection(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    """A delegation run as a background job: the parent answers meanwhile, and the agent's
    calls still go under its card, above the answer, which stays one message."""

    async def body() -> None:
        start(view)
        view.handle_event(TextDelta("Researcher is on it. "))
        await settled(view)
        answer = view.chat_model.items[-1]
        assert isinstance(answer, AssistantMessage)
        view.select_range((answer.row, 0, 0), (answer.row, 0, 10))
        child_started(view, "d1/1")
        view.handle_event(TextDelta("Meanwhile, here is the plan."))
        await settled(view)
        assert [type(i).__name__ for i in view.chat_model.items] == [
            "DelegationCard",
            "ToolCard",
            "AssistantMessage",
        ]
        assert answer.text == "Researcher is on it. Meanwhile, here is the plan."
        assert view.selected_text() == "Researcher"

    run(qloop, body())


def test_n_steps_hides_and_shows_the_agents_calls(
    view: ChatView, qloop: asyncio.AbstractEventLoop, qtbot: Any
) -> None:
    async def body() -> None:
        start(view)
        child_started(view, "d1/1")
        await settled(view)
        item = delegation(view)
        click(qtbot, view, item, "toggle_steps")
        assert item.collapsed and view.isRowHidden(1, QModelIndex())
        child_started(view, "d1/2")  # a call that starts meanwhile stays hidden too
        assert view.isRowHidden(card(view, "d1/2").row, QModelIndex())
        await settled(view)
        click(qtbot, view, item, "toggle_steps")
        assert not item.collapsed
        assert not any(view.isRowHidden(r, QModelIndex()) for r in range(3))

    run(qloop, body())


def test_the_agents_question_says_who_asks_and_offers_only_allow_once_and_deny(
    view: ChatView, qloop: asyncio.AbstractEventLoop, qtbot: Any
) -> None:
    decided: list[tuple[str, str]] = []
    view.approvalDecided.connect(lambda call_id, value: decided.append((call_id, value)))

    async def body() -> None:
        start(view)
        child_started(view, "d1/1", "fs_write_file")
        await settled(view)
        click(qtbot, view, delegation(view), "toggle_steps")  # hidden: the question opens it
        view.handle_event(ApprovalRequested(child_request()))
        await settled(view)
        item = card(view, "d1/1")
        assert not delegation(view).collapsed and not view.isRowHidden(item.row, QModelIndex())
        layout = view.chat_delegate.layout(item)
        assert layout.summary_doc.toPlainText() == (
            "Researcher wants to: Create ~/work/out.txt (1 line)"
        )
        bar = view.bar("d1/1")
        assert isinstance(bar, ApprovalBar) and bar.isVisible()
        assert bar.choices() == [Decision.ALLOW_ONCE, Decision.DENY]
        assert bar.geometry().x() >= left_edge(view, item)  # inside the nested card
        qtbot.mouseClick(bar.button(Decision.ALLOW_ONCE), Qt.MouseButton.LeftButton)
        assert decided == [("d1/1", Decision.ALLOW_ONCE.value)]
        assert view.bar("d1/1") is None and item.status == ToolStatus.RUNNING

    run(qloop, body())


def test_a_call_the_agent_left_open_shows_stopped_when_the_delegation_ends(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        start(view)
        child_started(view, "d1/1", "fs_write_file")
        view.handle_event(ApprovalRequested(child_request()))
        child_started(view, "d1/2")
        view.handle_event(ToolCallFinished("d1/2", "fs_read_file", ToolResult(True, "x"), 0.1))
        # its time budget ran out while it waited for the answer
        view.handle_event(finished("d1"))
        await settled(view)
        asked, read = card(view, "d1/1"), card(view, "d1/2")
        assert asked.status == ToolStatus.CANCELLED and asked.seconds is not None
        assert view.bar("d1/1") is None
        assert read.status == ToolStatus.OK
        # the answer that comes late (the card no longer asks) changes nothing
        view.handle_event(ApprovalDecided("d1/1", "fs_write_file", Decision.DENY))
        assert asked.status == ToolStatus.CANCELLED

    run(qloop, body())


def test_stopping_the_turn_shows_the_delegation_and_its_open_calls_stopped(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        start(view)
        child_started(view, "d1/1", "fs_write_file")
        view.handle_event(ApprovalRequested(child_request()))
        await settled(view)
        view.finish_streaming()  # what the window does when Stop (Esc) ended the turn
        await settled(view)
        assert delegation(view).status == ToolStatus.CANCELLED
        assert card(view, "d1/1").status == ToolStatus.CANCELLED
        assert view.bar("d1/1") is None
        assert isinstance(view.chat_model.items[-1], MarkerItem)

    run(qloop, body())


def test_a_finished_delegation_of_another_turn_is_not_marked_stopped(
    view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    async def body() -> None:
        start(view)
        child_started(view, "d1/1")
        view.handle_event(ToolCallFinished("d1/1", "fs_read_file", ToolResult(True, "x"), 0.1))
        view.handle_event(finished("d1"))
        view.handle_event(TurnFinished(Usage(), "end_turn", 2))
        view.finish_streaming()
        await settled(view)
        assert delegation(view).status == ToolStatus.OK
        assert not any(isinstance(i, MarkerItem) for i in view.chat_model.items)

    run(qloop, body())


def test_a_stored_delegation_offers_its_agents_conversation_when_reopened(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, view: ChatView, qloop: asyncio.AbstractEventLoop
) -> None:
    from app.core.providers import make_provider

    runtime = make_runtime()
    llm.add(tool_calls(("d1", "delegate_agent", {"agent": "Researcher", "task": "Say hi"})))
    llm.add(text("hi from Researcher"))
    llm.add(text("It said hi."))
    provider = make_provider(runtime.provider_config())
    agent = runtime.make_agent(provider, deny_all)
    conversation = runtime.open_conversation(None)

    async def turn() -> None:
        try:
            [_ async for _ in agent.run(conversation, "ask Researcher to say hi")]
        finally:
            await provider.aclose()

    qloop.run_until_complete(turn())
    assert conversation.id is not None
    [child] = runtime.store.child_conversations(conversation.id)
    view.load_history(
        runtime.store.load_messages(conversation.id),
        runtime.store.list_tool_calls(conversation.id),
    )
    item = delegation(view)
    assert (item.title, item.task, item.status) == ("Researcher", "Say hi", ToolStatus.OK)
    assert hit(view, item, "open_conversation").payload == child.id
    assert "hi from Researcher" in item.result


# ---- in the window, against the scripted model -------------------------------------------


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def window(
    make_runtime: RuntimeFactory, work: Path, qtbot: Any, qloop: asyncio.AbstractEventLoop
) -> Iterator[MainWindow]:
    runtime = make_runtime(roots=[work], configure=lambda s: setattr(s, "agents", [WRITER]))
    win = MainWindow(runtime)
    qtbot.addWidget(win)
    win.resize(1000, 900)
    win.show()
    yield win
    win.stop_background_work()


def send(qtbot: Any, win: MainWindow, message: str) -> None:
    win.composer.edit.setFocus()
    qtbot.keyClicks(win.composer.edit, message)
    qtbot.keyClick(win.composer.edit, Qt.Key.Key_Return)


def test_in_the_window_a_delegation_shows_its_steps_and_its_report_and_its_conversation_opens(
    window: MainWindow, llm: ScriptedLLM, work: Path, qtbot: Any, qloop: asyncio.AbstractEventLoop
) -> None:
    notes = work / "notes.txt"
    notes.write_text("the meeting moved to Thursday", "utf-8")
    llm.add(tool_calls(("d1", "delegate_agent", {"agent": "Researcher", "task": TASK})))
    llm.add(tool_calls(("c1", "fs_read_file", {"path": str(notes)})))
    llm.add(text("The note says the meeting moved to Thursday."))
    llm.add(text("Your meeting is on Thursday."))
    view = window.chat_view
    wanted: list[str] = []
    view.conversationRequested.connect(wanted.append)

    async def body() -> None:
        send(qtbot, window, "when is the meeting?")
        await wait_until(lambda: len(llm.requests) == 4 and not window.controller.busy)
        await settled(view)

    run(qloop, body())
    item = delegation(view)
    step = only_step(view)
    assert step.call_id.startswith("d1/")
    assert (item.status, step.status) == (ToolStatus.OK, ToolStatus.OK)
    assert step.row == item.row + 1 and step.title == "Researcher · Read file"
    assert item.steps == [step]
    assert "Thursday" in item.result
    parent = window.controller.conversation_id
    assert parent is not None
    [child] = window.runtime.store.child_conversations(parent)
    click(qtbot, view, item, "open_conversation")
    assert wanted == [child.id]
    assert window.controller.conversation_id == child.id  # the window opened it
    shown = [i.plain_text() for i in view.chat_model.items if isinstance(i, UserMessage)]
    assert shown == [TASK]


def test_in_the_window_the_agents_question_is_answered_on_its_card(
    window: MainWindow, llm: ScriptedLLM, work: Path, qtbot: Any, qloop: asyncio.AbstractEventLoop
) -> None:
    target = work / "out.txt"
    llm.add(tool_calls(("d1", "delegate_agent", {"agent": "Writer", "task": "write hi"})))
    llm.add(tool_calls(("w1", "fs_write_file", {"path": str(target), "content": "hi"})))
    llm.add(text("Wrote it."))
    llm.add(text("Done."))
    view = window.chat_view

    async def body() -> None:
        send(qtbot, window, "have Writer write hi to out.txt")
        bar = await wait_until(lambda: asking(view), what="the agent's question")
        await settled(view)
        layout = view.chat_delegate.layout(only_step(view))
        assert layout.summary_doc.toPlainText().startswith("Writer wants to: ")
        assert bar.choices() == [Decision.ALLOW_ONCE, Decision.DENY]
        qtbot.mouseClick(bar.button(Decision.ALLOW_ONCE), Qt.MouseButton.LeftButton)
        await wait_until(lambda: not window.controller.busy, what="the turn")

    run(qloop, body())
    assert target.read_text("utf-8") == "hi"
    assert only_step(view).status == ToolStatus.OK
    assert delegation(view).status == ToolStatus.OK


def test_in_the_window_stop_leaves_no_call_of_the_agent_running(
    window: MainWindow, llm: ScriptedLLM, work: Path, qtbot: Any, qloop: asyncio.AbstractEventLoop
) -> None:
    target = work / "out.txt"
    llm.add(tool_calls(("d1", "delegate_agent", {"agent": "Writer", "task": "write hi"})))
    llm.add(tool_calls(("w1", "fs_write_file", {"path": str(target), "content": "hi"})))
    view = window.chat_view

    async def body() -> None:
        send(qtbot, window, "have Writer write hi to out.txt")
        await wait_until(lambda: asking(view), what="the agent's question")
        qtbot.keyClick(window, Qt.Key.Key_Escape)
        await wait_until(lambda: not window.controller.busy, what="the turn to stop")
        await settled(view)

    run(qloop, body())
    assert not target.exists()
    cards = [i for i in view.chat_model.items if isinstance(i, ToolCard)]
    assert cards and not any(c.status in (ToolStatus.RUNNING, ToolStatus.AWAITING) for c in cards)
    assert only_step(view).status == ToolStatus.CANCELLED
    assert asking(view) is None


# ---- a scheduled task's question ---------------------------------------------------------


def test_a_scheduled_runs_question_from_a_sub_agent_names_it_on_the_notification(
    world: dict[str, Any], llm: ScriptedLLM
) -> None:
    runtime = runtime_for(world)
    runtime.settings = runtime.settings_store.update(lambda s: setattr(s, "agents", [WRITER]))
    target = world["work"] / "out.txt"
    task = add_task(runtime, at=START + timedelta(minutes=1))
    llm.add(tool_calls(("d1", "delegate_agent", {"agent": "Writer", "task": "write hi"})))
    llm.add(tool_calls(("w1", "fs_write_file", {"path": str(target), "content": "hi"})))
    llm.add(text("Wrote it."), text("Done."))
    screen = Screen()
    approvals = UnattendedApprovals(screen.show, screen.withdraw, on_review=lambda _p: None)
    runner = TaskRunner(runtime, ask=approvals.ask, announce=lambda _o: None, clock=Clock())

    async def scenario() -> None:
        running = asyncio.ensure_future(runner.run_now(task.id))
        await screen.until_shown(1)
        [shown] = screen.shown
        assert shown.message.splitlines()[0].startswith("Writer wants to: ")
        assert {ALLOW_ONCE, DENY} <= set(shown.actions)
        approvals.pending()[0].answer(Decision.ALLOW_ONCE)
        await running

    asyncio.run(scenario())
    assert target.read_text("utf-8") == "hi"
