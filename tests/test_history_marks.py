"""Error and "Stopped" markers: kept in the store where the turn ended, moved with their
branch, recorded by the real ChatController; and the waiting signal of a turn."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.events import Error, TextDelta, TurnFinished
from app.core.history_marks import BranchInfo, Marker
from app.core.paths import db_path
from app.core.providers.base import ChatMessage
from app.core.store import NotFoundError, Store
from app.ui.controller import STOPPED, ChatController
from tests.controller_harness import contents, finish, record, send
from tests.fakellm import error, hang, text, tool_calls
from tests.fixtures_qt import wait_until
from tests.fixtures_runtime import HOME, RuntimeFactory

pytestmark = pytest.mark.runtime(roots=[HOME])


@pytest.fixture
def store(home: Path) -> Iterator[Store]:
    s = Store(db_path(home))
    yield s
    s.close()


def add(store: Store, conv: str, *texts: str) -> None:
    for content in texts:
        role = "user" if store.count_messages(conv) % 2 == 0 else "assistant"
        store.append_message(conv, ChatMessage(role, content))


def texts(store: Store, conv: str) -> list[str]:
    return [m.content for m in store.load_messages(conv)]


# ---- the store --------------------------------------------------------------------------


def test_markers_are_listed_in_place(store: Store) -> None:
    conv = store.create_conversation()
    add(store, conv, "q1")
    store.add_marker(conv, 1, "error", "The server refused the request.")
    add(store, conv, "a1")
    store.add_marker(conv, 2, "stopped", STOPPED)
    store.add_marker(conv, 0, "error", "first")
    assert store.list_markers(conv) == [
        Marker(0, "error", "first"),
        Marker(1, "error", "The server refused the request."),
        Marker(2, "stopped", "Stopped"),
    ]
    assert store.list_markers(store.create_conversation()) == []
    with pytest.raises(NotFoundError):
        store.add_marker("no-such-conversation", 0, "error", "x")


def test_an_edit_keeps_the_earlier_turns_marker_and_moves_later_ones(store: Store) -> None:
    conv = store.create_conversation()
    add(store, conv, "q1", "partial answer")
    store.add_marker(conv, 2, "stopped", STOPPED)  # the first turn was stopped
    add(store, conv, "q2")
    store.add_marker(conv, 3, "error", "Rate limited.")
    add(store, conv, "a2")

    store.fork_messages(conv, 2)  # edit q2
    assert store.list_markers(conv) == [Marker(2, "stopped", STOPPED)]
    add(store, conv, "q2 edited", "a2 edited")
    assert store.list_markers(conv) == [Marker(2, "stopped", STOPPED)]

    store.switch_branch(conv, 2, 1)
    assert store.list_markers(conv) == [
        Marker(2, "stopped", STOPPED),
        Marker(3, "error", "Rate limited."),
    ]
    store.switch_branch(conv, 2, 2)
    assert store.list_markers(conv) == [Marker(2, "stopped", STOPPED)]


def test_a_regenerate_takes_the_failed_attempts_marker_along(store: Store) -> None:
    conv = store.create_conversation()
    add(store, conv, "question")
    store.add_marker(conv, 1, "error", "Server unreachable.")  # then a retry answered
    add(store, conv, "first answer")

    store.fork_messages(conv, 1, take_markers_at_index=True)
    assert store.list_markers(conv) == []
    add(store, conv, "second answer")
    store.switch_branch(conv, 1, 1)
    assert texts(store, conv) == ["question", "first answer"]
    assert store.list_markers(conv) == [Marker(1, "error", "Server unreachable.")]
    store.switch_branch(conv, 1, 2)
    assert store.list_markers(conv) == []
    store.switch_branch(conv, 1, 1)  # and it stays with its branch, back and forth
    assert store.list_markers(conv) == [Marker(1, "error", "Server unreachable.")]


def test_the_marker_of_a_failed_regenerate_stays_with_that_empty_branch(store: Store) -> None:
    conv = store.create_conversation()
    add(store, conv, "question", "first answer")
    store.fork_messages(conv, 1, take_markers_at_index=True)
    store.add_marker(conv, 1, "error", "Server unreachable.")  # the new branch is empty
    assert store.list_branches(conv) == [BranchInfo(1, 2, 2)]

    store.switch_branch(conv, 1, 1)
    assert texts(store, conv) == ["question", "first answer"]
    assert store.list_markers(conv) == []  # never shown before the first answer
    store.switch_branch(conv, 1, 2)
    assert texts(store, conv) == ["question"]
    assert store.list_markers(conv) == [Marker(1, "error", "Server unreachable.")]

    add(store, conv, "retried answer")  # a retry fills the branch; the marker stays with it
    store.switch_branch(conv, 1, 1)
    assert store.list_markers(conv) == []
    store.switch_branch(conv, 1, 2)
    assert texts(store, conv) == ["question", "retried answer"]
    assert store.list_markers(conv) == [Marker(1, "error", "Server unreachable.")]


# ---- the controller --------------------------------------------------------------------


@pytest.fixture
def controller(runtime, qloop) -> ChatController:
    return ChatController(runtime)


def reopened(runtime, conversation_id: str) -> ChatController:
    fresh = ChatController(runtime)
    fresh.open(conversation_id)
    return fresh


def test_a_provider_error_leaves_an_error_marker(controller, runtime, llm, qloop) -> None:
    llm.add(error(400, message="context too long"))
    seen = record(controller)

    async def body() -> None:
        await send(controller, "please answer")

    qloop.run_until_complete(body())
    [shown] = seen.events(Error)
    again = reopened(runtime, controller.conversation_id)
    assert contents(again) == ["please answer"]
    assert again.conversation_marks() == ([Marker(1, "error", shown.message)], [])
    assert "context too long" in shown.message


def test_a_denied_call_is_not_an_error(controller, runtime, llm, home: Path, qloop) -> None:
    llm.add(
        tool_calls(("w1", "fs_write_file", {"path": str(home / "x.txt"), "content": "no"})),
        text("Fine, I will not."),
    )
    controller.approvalPending.connect(lambda call_id, _tool: controller.decide(call_id, "deny"))

    async def body() -> None:
        await send(controller, "write a file")

    qloop.run_until_complete(body())
    assert not (home / "x.txt").exists()
    assert contents(controller)[-1] == "Fine, I will not."
    assert controller.conversation_marks() == ([], [])


def test_stop_mid_stream_keeps_the_partial_answer_and_marks_it(
    controller, runtime, llm, make_runtime: RuntimeFactory, qloop
) -> None:
    llm.add(hang("partial words"))
    seen = record(controller)

    async def body() -> None:
        controller.send("go")
        await wait_until(
            lambda: "".join(e.text for e in seen.events(TextDelta)) == "partial words",
            what="the partial answer",
        )
        controller.stop()
        await finish(controller, "the stop")

    qloop.run_until_complete(body())
    llm.wait_for_disconnects(1)
    conv_id = controller.conversation_id
    runtime.close()

    later = make_runtime(roots=[HOME])  # the app started again
    try:
        again = reopened(later, conv_id)
        assert contents(again) == ["go", "partial words"]
        assert again.conversation_marks() == ([Marker(2, "stopped", STOPPED)], [])
    finally:
        later.close()


def test_stop_before_any_answer(controller, llm, qloop) -> None:
    llm.add(hang(""))
    seen = record(controller)

    async def body() -> None:
        controller.send("go")
        await wait_until(lambda: len(llm.requests) == 1, what="the request")
        assert seen.of("waiting") == [True]
        controller.stop()
        await finish(controller, "the stop")

    qloop.run_until_complete(body())
    assert seen.of("waiting") == [True, False]
    assert seen.events() == []
    assert contents(controller) == ["go"]
    assert controller.conversation_marks() == ([Marker(1, "stopped", STOPPED)], [])


def test_stop_right_after_send_leaves_nothing_half_done(controller, llm, qloop) -> None:
    seen = record(controller)
    controller.send("go")  # stopped before the turn even started: no conversation yet
    controller.stop()

    async def body() -> None:
        await finish(controller, "the stop")

    qloop.run_until_complete(body())
    assert seen.of("waiting") == [True, False]
    assert controller.conversation is None and llm.requests == []


def test_waiting_ends_with_the_first_event(controller, llm, qloop) -> None:
    llm.add(text("Hello there", chunk_size=3))
    seen = record(controller)

    async def body() -> None:
        await send(controller, "hi")

    qloop.run_until_complete(body())
    names = [(name, value if name != "event" else type(value)) for name, value in seen.log]
    assert names[:3] == [("busy", True), ("waiting", True), ("waiting", False)]
    assert names[3] == ("event", TextDelta)
    assert seen.of("waiting") == [True, False]
    assert isinstance(seen.events()[-1], TurnFinished)
    assert controller.conversation_marks() == ([], [])


def test_an_internal_failure_is_shown_and_marked(
    controller, runtime, llm, monkeypatch: pytest.MonkeyPatch, qloop
) -> None:
    def broken(*_args, **_kwargs):
        raise RuntimeError("the tool registry is unreadable")

    monkeypatch.setattr(runtime, "make_agent", broken)
    seen = record(controller)

    async def body() -> None:
        await send(controller, "hi")

    qloop.run_until_complete(body())
    [shown] = seen.events(Error)
    assert shown.kind == "internal" and "the tool registry is unreadable" in shown.message
    assert controller.conversation_marks() == ([Marker(0, "error", shown.message)], [])
    assert seen.of("waiting") == [True, False]
