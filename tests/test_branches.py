"""Branches: an edited or regenerated turn keeps the earlier one, in the real SQLite store,
through the real ChatController against the scripted model server, and in the real window
(a stopped or failed regenerate leaves the earlier answer reachable; positions stay right
when the history holds a compaction summary)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.core import store as store_mod
from app.core.events import TextDelta
from app.core.history_marks import BranchInfo, Marker
from app.core.paths import db_path
from app.core.providers.base import ChatMessage, ToolCallRequest, Usage
from app.core.settings import Settings
from app.core.store import NotFoundError, Store
from app.ui.chat.model import AssistantMessage, MessageItem, UserMessage
from app.ui.controller import KEPT, STOPPED, ChatController
from app.ui.main_window import MainWindow
from tests.controller_harness import (
    contents,
    finish,
    record,
    send,
    sent_messages,
)
from tests.fakellm import error, hang, text, tool_calls
from tests.fixtures_qt import wait_until
from tests.fixtures_runtime import HOME, RuntimeFactory

PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(home: Path, clock: Clock) -> Iterator[Store]:
    s = Store(db_path(home), clock=clock)
    yield s
    s.close()


def texts(store: Store, conv: str) -> list[str]:
    return [m.content for m in store.load_messages(conv)]


def add(store: Store, conv: str, *messages: ChatMessage | str) -> None:
    """Strings alternate user/assistant by position in the conversation."""
    for msg in messages:
        if isinstance(msg, str):
            role = "user" if store.count_messages(conv) % 2 == 0 else "assistant"
            msg = ChatMessage(role, msg)
        store.append_message(conv, msg)


def snapshot(store: Store, conv: str) -> list[tuple[object, ...]]:
    """Everything stored of each live message but its row id."""
    return [
        (m.seq, m.message, m.usage, m.created_at)
        for m in store.load_messages_page(conv, limit=1000)
    ]


# ---- the store --------------------------------------------------------------------------


def test_edit_twice_then_switch_through_every_branch_and_back(store: Store) -> None:
    conv = store.create_conversation()
    add(store, conv, "hello", "hi there")
    add(
        store,
        conv,
        ChatMessage("user", "look at v1", images=[PNG]),
        ChatMessage("assistant", "", tool_calls=[ToolCallRequest("c1", "fs_list_dir", "{}")]),
        ChatMessage("tool", "a.txt", tool_call_id="c1", is_error=True),
    )
    store.append_message(conv, ChatMessage("assistant", "answer v1"), Usage(12, 34))
    store.record_tool_call_started(conv, "c1", "fs_list_dir", "{}")
    version_1 = snapshot(store, conv)

    assert store.fork_messages(conv, 2)
    assert texts(store, conv) == ["hello", "hi there"]
    assert store.list_branches(conv) == [BranchInfo(2, 2, 2)]
    add(store, conv, "question v2", "answer v2")
    version_2 = snapshot(store, conv)
    assert store.fork_messages(conv, 2)
    add(store, conv, "question v3", "answer v3")
    version_3 = snapshot(store, conv)
    assert store.list_branches(conv) == [BranchInfo(2, 3, 3)]

    assert store.switch_branch(conv, 2, 1)
    assert snapshot(store, conv) == version_1  # content, calls, images, usage, times
    assert store.list_branches(conv) == [BranchInfo(2, 1, 3)]
    assert store.switch_branch(conv, 2, 2)
    assert snapshot(store, conv) == version_2
    assert store.switch_branch(conv, 2, 3)
    assert snapshot(store, conv) == version_3
    assert store.list_branches(conv) == [BranchInfo(2, 3, 3)]
    assert store.switch_branch(conv, 2, 1)
    assert snapshot(store, conv) == version_1
    assert not store.switch_branch(conv, 2, 1)  # already shown: nothing changes
    assert snapshot(store, conv) == version_1
    assert [c.call_id for c in store.list_tool_calls(conv)] == ["c1"]  # untouched

    # a new fork inside the restored first branch becomes the last, current one
    assert store.fork_messages(conv, 2)
    assert store.list_branches(conv) == [BranchInfo(2, 4, 4)]
    assert store.switch_branch(conv, 2, 1)
    assert snapshot(store, conv) == version_1


def test_regenerate_keeps_the_earlier_answer(store: Store) -> None:
    conv = store.create_conversation()
    add(store, conv, "question", "first answer")
    assert store.fork_messages(conv, 1, take_markers_at_index=True)
    add(store, conv, ChatMessage("assistant", "second answer"))
    assert store.list_branches(conv) == [BranchInfo(1, 2, 2)]
    assert store.switch_branch(conv, 1, 1)
    assert texts(store, conv) == ["question", "first answer"]
    assert store.switch_branch(conv, 1, 2)
    assert texts(store, conv) == ["question", "second answer"]


def test_a_fork_inside_a_restored_branch_travels_with_it(store: Store) -> None:
    conv = store.create_conversation()
    add(store, conv, "hello", "hi", "plan A", "answer A")
    store.fork_messages(conv, 2)
    add(store, conv, "plan B", "answer B")
    store.switch_branch(conv, 2, 1)
    assert texts(store, conv) == ["hello", "hi", "plan A", "answer A"]

    store.fork_messages(conv, 3, take_markers_at_index=True)  # regenerate inside plan A
    add(store, conv, "answer A again")
    assert store.list_branches(conv) == [BranchInfo(2, 1, 2), BranchInfo(3, 2, 2)]

    store.switch_branch(conv, 2, 2)
    assert texts(store, conv) == ["hello", "hi", "plan B", "answer B"]
    assert store.list_branches(conv) == [BranchInfo(2, 2, 2)]  # plan A's point is not shown

    # plan B gets its own nested point; it must not be confused with plan A's
    store.fork_messages(conv, 3, take_markers_at_index=True)
    add(store, conv, "answer B again")
    store.fork_messages(conv, 3, take_markers_at_index=True)
    add(store, conv, "answer B third")
    assert store.list_branches(conv) == [BranchInfo(2, 2, 2), BranchInfo(3, 3, 3)]

    store.switch_branch(conv, 2, 1)
    assert texts(store, conv) == ["hello", "hi", "plan A", "answer A again"]
    assert store.list_branches(conv) == [BranchInfo(2, 1, 2), BranchInfo(3, 2, 2)]
    store.switch_branch(conv, 3, 1)
    assert texts(store, conv) == ["hello", "hi", "plan A", "answer A"]

    store.switch_branch(conv, 2, 2)
    assert texts(store, conv) == ["hello", "hi", "plan B", "answer B third"]
    store.switch_branch(conv, 3, 2)
    assert texts(store, conv) == ["hello", "hi", "plan B", "answer B again"]

    # forking before every branch point takes all of them along, and brings them back
    store.fork_messages(conv, 0)
    assert store.list_branches(conv) == [BranchInfo(0, 2, 2)]
    add(store, conv, "fresh start")
    store.switch_branch(conv, 0, 1)
    assert texts(store, conv) == ["hello", "hi", "plan B", "answer B again"]
    assert store.list_branches(conv) == [
        BranchInfo(0, 1, 2),
        BranchInfo(2, 2, 2),
        BranchInfo(3, 2, 3),
    ]


def test_search_finds_only_the_shown_branch(store: Store) -> None:
    conv = store.create_conversation("Trip")
    add(store, conv, "plan a trip to zanzibar", "zanzibar is lovely")
    store.fork_messages(conv, 0)
    add(store, conv, "plan a trip to reykjavik", "reykjavik is cold")
    assert store.search("zanzibar") == []
    assert {h.role for h in store.search("reykjavik")} == {"user", "assistant"}

    store.switch_branch(conv, 0, 1)
    assert store.search("reykjavik") == []
    assert len(store.search("zanzibar")) == 2


def test_deleting_a_conversation_removes_its_branches_and_markers(
    home: Path, store: Store, clock: Clock
) -> None:
    gone, kept = store.create_conversation(), store.create_conversation()
    for conv in (gone, kept):
        add(store, conv, "question", "answer")
        store.add_marker(conv, 2, "stopped", "Stopped")
        store.fork_messages(conv, 1)
    store.delete_conversation(gone)
    clock.now += timedelta(days=40).total_seconds()
    assert store.purge_deleted(timedelta(days=30)) == 1

    with contextlib.closing(sqlite3.connect(db_path(home))) as raw:
        owners = {r[0] for r in raw.execute("SELECT conversation_id FROM message_branches")}
        marked = {r[0] for r in raw.execute("SELECT conversation_id FROM conversation_markers")}
    assert owners == {kept} and marked == set()  # kept's marker travelled into its branch
    store.switch_branch(kept, 1, 1)
    assert [m.after for m in store.list_markers(kept)] == [2]


def test_bad_forks_and_switches_are_refused(store: Store) -> None:
    conv = store.create_conversation()
    add(store, conv, "question", "answer")
    assert not store.fork_messages(conv, 2)  # nothing after the end: no branch
    assert store.list_branches(conv) == []
    for index in (-1, 3):
        with pytest.raises(ValueError):
            store.fork_messages(conv, index)
    with pytest.raises(ValueError):
        store.switch_branch(conv, 1, 1)  # no branch point there
    store.fork_messages(conv, 1)
    for branch in (0, 3):
        with pytest.raises(ValueError):
            store.switch_branch(conv, 1, branch)
    with pytest.raises(NotFoundError):
        store.fork_messages("no-such-conversation", 0)
    assert texts(store, conv) == ["question"]


def test_a_version_5_history_gains_branches_markers_and_a_model(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_mod, "MIGRATIONS", store_mod.MIGRATIONS[:5])
    with Store(db_path(home)) as old:
        conv = old.create_conversation("Before")
        old.append_message(conv, ChatMessage("user", "kept across the upgrade"))
    monkeypatch.undo()
    with Store(db_path(home)) as new:
        assert texts(new, conv) == ["kept across the upgrade"]
        assert new.list_branches(conv) == [] and new.list_markers(conv) == []
        assert new.conversation_model(conv) is None


# ---- the controller --------------------------------------------------------------------


@pytest.fixture
def controller(make_runtime: RuntimeFactory, qloop) -> ChatController:
    return ChatController(make_runtime(roots=[HOME]))


def test_edit_and_resend_then_switch_back(controller: ChatController, llm, qloop) -> None:
    llm.add(text("one"), text("two"), text("two, edited"))
    seen = record(controller)

    async def body() -> None:
        await send(controller, "first")
        await send(controller, "second")
        assert controller.edit_and_resend(2, "second, edited") is True
        assert seen.of("reset") == [None]  # before the turn runs: the view shows the edit
        assert contents(controller) == ["first", "one", "second, edited"]
        await finish(controller)

    qloop.run_until_complete(body())
    assert sent_messages(llm)[-1] == ("user", "second, edited")
    assert ("assistant", "two") not in sent_messages(llm)
    assert contents(controller) == ["first", "one", "second, edited", "two, edited"]
    assert controller.branches() == [BranchInfo(2, 2, 2)]

    assert controller.switch_branch(2, 1) is True
    assert len(seen.of("reset")) == 2
    assert contents(controller) == ["first", "one", "second", "two"]
    assert controller.branches() == [BranchInfo(2, 1, 2)]
    assert controller.conversation_marks() == ([], [BranchInfo(2, 1, 2)])


def test_edit_keeps_the_attached_image_and_file(
    make_runtime: RuntimeFactory, llm, home: Path, qloop
) -> None:
    controller = ChatController(make_runtime("llava:7b", roots=[HOME]))  # a model that sees
    (home / "notes.txt").write_text("the notes", "utf-8")
    (home / "dot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"0" * 20)
    llm.add(text("seen"), text("seen again"))

    async def body() -> None:
        await send(controller, "what is this", [str(home / "notes.txt"), str(home / "dot.png")])
        assert controller.editable_text(0) == "what is this"
        controller.edit_and_resend(0, "and now?")
        await finish(controller)

    qloop.run_until_complete(body())
    assert controller.conversation is not None
    before = controller.runtime.store.list_branches(controller.conversation_id)
    assert before == [BranchInfo(0, 2, 2)]
    edited = controller.conversation.messages[0]
    assert edited.content.startswith("and now?\n\nAttached file `notes.txt`")
    assert "the notes" in edited.content and "[attached image: dot.png]" in edited.content
    assert len(edited.images) == 1 and edited.images[0].startswith("data:image/png;base64,")
    resent = str(llm.requests[1].body["messages"][-1]["content"])
    assert "and now?" in resent and "the notes" in resent and "data:image/png" in resent
    assert contents(controller)[-1] == "seen again"

    # an editor prefilled with the whole message: the files are not added twice
    llm.add(text("seen a third time"))
    whole = edited.content.replace("and now?", "third try")

    async def edit_whole() -> None:
        controller.edit_and_resend(0, whole)
        await finish(controller)

    qloop.run_until_complete(edit_whole())
    third = controller.conversation.messages[0]
    assert third.content == whole and third.images == edited.images
    assert controller.branches() == [BranchInfo(0, 3, 3)]


def test_regenerate_asks_again_without_the_earlier_answer(
    controller: ChatController, llm, home: Path, qloop
) -> None:
    (home / "a.txt").write_text("alpha", "utf-8")
    llm.add(
        tool_calls(("r1", "fs_read_file", {"path": str(home / "a.txt")})),
        text("It says alpha."),
        text("Alpha, again."),
    )

    async def body() -> None:
        await send(controller, "read a.txt")
        assert [m.role for m in controller.conversation.messages] == [
            "user",
            "assistant",
            "tool",
            "assistant",
        ]
        controller.regenerate(3)  # the final answer: the whole turn is asked again
        assert contents(controller) == ["read a.txt"]
        await finish(controller)

    qloop.run_until_complete(body())
    assert [role for role, _ in sent_messages(llm)][-1] == "user"
    assert contents(controller) == ["read a.txt", "Alpha, again."]
    assert controller.branches() == [BranchInfo(1, 2, 2)]
    controller.switch_branch(1, 1)
    assert contents(controller)[-1] == "It says alpha."
    assert controller.conversation.messages[1].tool_calls[0].id == "r1"


def test_actions_are_refused_while_busy_and_on_bad_indices(
    controller: ChatController, llm, qloop
) -> None:
    llm.add(text("answer"), hang("still going"))
    seen = record(controller)

    async def body() -> None:
        await send(controller, "question")
        for action in (
            lambda: controller.edit_and_resend(1, "not a user message"),
            lambda: controller.edit_and_resend(5, "out of range"),
            lambda: controller.edit_and_resend(-1, "negative"),
            lambda: controller.regenerate(0),  # a user message
            lambda: controller.regenerate(9),
            lambda: controller.switch_branch(1, 1),  # no branch point
        ):
            assert action() is False  # the view keeps its editor open
            assert not controller.busy
        controller.send("again")
        await wait_until(
            lambda: "still going" in "".join(e.text for e in seen.events(TextDelta)),
            what="the second answer to start",
        )
        assert controller.edit_and_resend(0, "while busy") is False
        assert controller.regenerate(1) is False
        before = list(controller.conversation.messages)
        controller.stop()
        await finish(controller)
        assert controller.conversation.messages[: len(before)] == before

    qloop.run_until_complete(body())
    assert seen.of("reset") == []
    assert len(llm.requests) == 2
    assert controller.branches() == []
    assert contents(controller) == ["question", "answer", "again", "still going"]


def test_a_new_chat_has_no_branches(controller: ChatController) -> None:
    assert controller.conversation_marks() == ([], [])
    assert controller.regenerate(0) is False
    assert controller.switch_branch(0, 1) is False
    assert controller.edit_and_resend(0, "x") is False
    assert controller.conversation is None


def test_switching_keeps_conversation_messages_in_step_with_the_store(
    controller: ChatController, llm, qloop
) -> None:
    llm.add(text("a1"), text("a2"), text("a3"))

    async def body() -> None:
        await send(controller, "q")
        controller.regenerate(1)
        await finish(controller)
        controller.regenerate(1)
        await finish(controller)

    qloop.run_until_complete(body())
    assert controller.branches() == [BranchInfo(1, 3, 3)]
    for branch, answer in ((1, "a1"), (2, "a2"), (3, "a3"), (1, "a1")):
        controller.switch_branch(1, branch)
        assert contents(controller) == ["q", answer]
    stored = controller.runtime.store.load_messages(controller.conversation_id)
    assert controller.conversation.messages == stored


def test_a_regenerate_stopped_before_any_text_shows_the_earlier_answer_again(
    controller: ChatController, llm, qloop
) -> None:
    llm.add(text("The earlier answer."), hang(""))
    seen = record(controller)

    async def body() -> None:
        await send(controller, "question")
        assert controller.regenerate(1) is True
        assert contents(controller) == ["question"]
        await wait_until(lambda: len(llm.requests) == 2, what="the regenerate request")
        controller.stop()
        await finish(controller, "the stop")

    qloop.run_until_complete(body())
    assert contents(controller) == ["question", "The earlier answer."]
    assert seen.of("reset") == [None, None]  # the fork, then the way back
    markers, branches = controller.conversation_marks()
    assert branches == [BranchInfo(1, 1, 2)]  # the empty attempt stays a branch
    assert markers == [Marker(1, "stopped", f"{STOPPED}. {KEPT}")]

    fresh = ChatController(controller.runtime)  # reopened: the same
    fresh.open(controller.conversation_id)
    assert contents(fresh) == ["question", "The earlier answer."]
    assert fresh.conversation_marks() == (markers, branches)


def test_a_failed_regenerate_shows_the_earlier_answer_with_why(
    controller: ChatController, llm, qloop
) -> None:
    llm.add(text("Answer one."), text("Answer two."), error(400, message="context too long"))

    async def body() -> None:
        await send(controller, "question")
        controller.regenerate(1)
        await finish(controller)
        assert controller.branches() == [BranchInfo(1, 2, 2)]
        controller.regenerate(1)  # the third attempt fails
        await finish(controller)

    qloop.run_until_complete(body())
    assert contents(controller) == ["question", "Answer two."]  # the one shown before
    markers, branches = controller.conversation_marks()
    assert branches == [BranchInfo(1, 2, 3)]
    [marker] = markers
    assert marker.after == 1 and marker.kind == "error"
    assert "context too long" in marker.text and marker.text.endswith(KEPT)
    controller.switch_branch(1, 1)
    assert contents(controller) == ["question", "Answer one."]


def test_a_regenerate_stopped_mid_answer_keeps_the_new_partial_one(
    controller: ChatController, llm, qloop
) -> None:
    llm.add(text("The earlier answer."), hang("A new beginn"))
    seen = record(controller)

    async def body() -> None:
        await send(controller, "question")
        controller.regenerate(1)
        await wait_until(
            lambda: "".join(e.text for e in seen.events(TextDelta)).endswith("beginn"),
            what="the new partial answer",
        )
        controller.stop()
        await finish(controller, "the stop")

    qloop.run_until_complete(body())
    assert contents(controller) == ["question", "A new beginn"]
    assert controller.conversation_marks() == (
        [Marker(2, "stopped", STOPPED)],
        [BranchInfo(1, 2, 2)],
    )


def test_a_switch_drops_tools_only_the_other_branch_used(
    controller: ChatController, llm, home: Path, qloop
) -> None:
    (home / "a.txt").write_text("alpha", "utf-8")
    llm.add(
        tool_calls(("r1", "fs_read_file", {"path": str(home / "a.txt")})),
        text("It says alpha."),
        text("I would rather not read it."),
    )

    async def body() -> None:
        await send(controller, "read a.txt")
        controller.regenerate(3)
        await finish(controller)

    qloop.run_until_complete(body())
    assert controller.conversation is not None
    offered = set(controller.runtime.new_session().active)
    assert controller.conversation.session.active == offered
    controller.switch_branch(1, 1)
    assert controller.conversation.session.active == offered | {"fs_read_file"}
    controller.switch_branch(1, 2)
    assert controller.conversation.session.active == offered


# ---- in the real window ------------------------------------------------------------------


@pytest.fixture
def make_window(make_runtime: RuntimeFactory, qtbot, qloop):
    made: list[MainWindow] = []

    def make(budget: int = 0) -> MainWindow:
        def configure(settings: Settings) -> None:
            if budget:
                settings.conversation.compact_after_chars = budget

        win = MainWindow(make_runtime(configure=configure))
        qtbot.addWidget(win)
        win.resize(1000, 760)
        win.show()
        made.append(win)
        return win

    yield make
    for win in made:
        win.stop_background_work()


def _send(qtbot, win: MainWindow, message: str) -> None:
    win.composer.edit.setFocus()
    qtbot.keyClicks(win.composer.edit, message)
    qtbot.keyClick(win.composer.edit, Qt.Key.Key_Return)


def _answers(win: MainWindow) -> list[AssistantMessage]:
    return [i for i in win.chat_view.chat_model.items if isinstance(i, AssistantMessage)]


@pytest.mark.gui
def test_a_regenerate_stopped_before_any_text_keeps_the_earlier_answer_reachable(
    make_window, llm, qtbot, qloop
):
    """Regenerate, then Stop before the new answer starts: the earlier answer went into a
    branch; the view must still offer a way back to it (a version switch somewhere, or the
    answer itself) — now and after reopening the chat."""
    window = make_window()
    llm.add(text("A careful answer worth keeping."))
    llm.add(hang(""))

    async def body():
        _send(qtbot, window, "Explain it")
        await wait_until(lambda: not window.controller.busy, what="the first turn")
        answer = _answers(window)[-1]
        assert answer.index == 1
        window.chat_view.regenerateRequested.emit(answer.index)
        await wait_until(lambda: len(llm.requests) == 2, what="the regenerate request")
        window.controller.stop()
        await wait_until(lambda: not window.controller.busy, what="the stop")

    qloop.run_until_complete(body())

    def reachable() -> bool:
        items = window.chat_view.chat_model.items
        shown = any("worth keeping" in i.plain_text() for i in items)
        switch = any(isinstance(i, MessageItem) and i.branch is not None for i in items)
        return shown or switch

    assert window.controller.branches(), "the earlier answer is archived as a branch"
    assert reachable(), "the earlier answer is archived but nothing in the view leads to it"
    conversation = window.controller.conversation_id
    window.new_chat()
    window.open_conversation(conversation)
    assert reachable(), "after reopening, nothing in the view leads to the earlier answer"


@pytest.mark.gui
def test_after_compaction_regenerate_redoes_the_answer_it_was_pressed_on(
    make_window, llm, qtbot, qloop
):
    """A compaction summary is a stored user message the live view never shows. The
    indices given to live items after a turn must still point at the right messages, or
    Regenerate on the newest answer rewinds an older turn (and hides the newest question)."""
    window = make_window(budget=2000)
    llm.add(text("Long first answer. " * 160))  # ~3000 characters
    llm.add(text("Summary one."))  # compaction before the second answer
    llm.add(text("Second answer."))
    llm.add(text("Summary two."))  # compaction before the third answer
    llm.add(text("Third answer."))
    llm.add(text("Third answer, again."))

    async def body():
        for question in ("First question", "Second question", "Third question"):
            _send(qtbot, window, question)
            await wait_until(lambda: not window.controller.busy, what=question)
        stored = [m.content for m in window.controller.conversation.messages]
        assert sum(s.startswith("[Summary of earlier conversation") for s in stored) == 2
        items = window.chat_view.chat_model.items
        newest_question = [i for i in items if isinstance(i, UserMessage)][-1]
        newest_answer = _answers(window)[-1]
        assert newest_answer.text == "Third answer."
        messages = window.controller.conversation.messages
        assert newest_question.index is not None and newest_answer.index is not None
        seen["edit opens"] = messages[newest_question.index].content
        window.chat_view.regenerateRequested.emit(newest_answer.index)
        await wait_until(lambda: not window.controller.busy, what="the regenerate")

    seen: dict[str, str] = {}
    qloop.run_until_complete(body())
    stored = [m.content for m in window.controller.conversation.messages]
    assert "Third question" in stored, (
        "Regenerate on the newest answer rewound an older turn; the history is now "
        f"{[m[:30] for m in stored]}"
    )
    assert seen["edit opens"] == "Third question", "Edit on the newest question edits another"
