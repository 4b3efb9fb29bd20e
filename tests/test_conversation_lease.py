"""A conversation with a second writer: a scheduled task's run (same process) or
`deskhand ask --conversation` (another process) appends to a conversation while the window
edits it. The fork never leaves a tool result in the live history whose assistant tool call
went into the archived branch (providers refuse that: 400).

Every agent run holds the conversation's lease in the store while it runs; edit,
regenerate and branch switches are refused while another run holds one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.approval import ApprovalRequest, Decision
from app.core.events import TurnFinished
from app.core.paths import db_path
from app.core.providers import make_provider
from app.core.providers.base import ChatMessage, ToolCallRequest
from app.core.store import LEASE_STALE_SECONDS, ConversationBusyError, Store
from app.ui.controller import ChatController
from tests.controller_harness import finish, record, sent_messages
from tests.fakellm import ScriptedLLM, text, tool_calls
from tests.fixtures_qt import wait_until
from tests.fixtures_runtime import HOME, RuntimeFactory


def _orphans(messages: list[ChatMessage]) -> list[str]:
    """Tool results with no earlier assistant message calling them."""
    called: set[str] = set()
    lost = []
    for m in messages:
        called.update(c.id for c in m.tool_calls)
        if m.role == "tool" and m.tool_call_id not in called:
            lost.append(m.tool_call_id or "")
    return lost


def test_edit_while_another_run_waits_in_the_conversation_leaves_no_orphan_tool_result(
    home: Path, llm: ScriptedLLM, make_runtime: RuntimeFactory, qloop
) -> None:
    rt = make_runtime(roots=[HOME])
    other = Store(rt.store.path)  # the other writer (CLI process, task run)
    try:
        conv = other.create_conversation("Shared")
        # the other run (holding the conversation's lease, as every agent run does): its
        # question and a tool call now waiting for approval
        other.take_lease(conv, "other-run")
        other.append_message(conv, ChatMessage("user", "Clean up my downloads"))
        call = ToolCallRequest("call_1", "fs_list", '{"path": "."}')
        other.append_message(conv, ChatMessage("assistant", "", tool_calls=[call]))
        llm.add(text("Here is a tidier plan."))
        controller = ChatController(rt)
        controller.open(conv)
        seen = record(controller)
        notices: list[str] = []
        controller.notice.connect(notices.append)
        assert controller.edit_and_resend(0, "Only list my downloads") is False
        assert not controller.busy and seen.of("reset") == []
        assert notices and "Wait until it ends" in notices[0]
        # the approval comes; the other run stores the call's result as it always does
        other.append_message(conv, ChatMessage("tool", "a.txt b.txt", tool_call_id="call_1"))
        live = rt.store.load_messages(conv)
        assert _orphans(live) == [], [(m.role, m.content[:30]) for m in live]
        assert rt.store.list_branches(conv) == []
        other.release_lease(conv, "other-run")  # the other run ended

        controller.open(conv)
        assert controller.edit_and_resend(0, "Only list my downloads") is True
        qloop.run_until_complete(finish(controller))
        live = rt.store.load_messages(conv)
        assert [m.content for m in live] == ["Only list my downloads", "Here is a tidier plan."]
        assert _orphans(live) == []
    finally:
        other.close()
        rt.close()


def test_a_task_run_waiting_for_approval_blocks_edit_regenerate_and_switch(
    home: Path, llm: ScriptedLLM, make_runtime: RuntimeFactory, qloop
) -> None:
    """A real second agent run in this process (as a scheduled task's is) on the
    conversation the window shows: while it waits for an approval, nothing rewrites it."""
    rt = make_runtime(roots=[HOME])
    llm.add(text("First answer."), text("Second answer."))
    write = {"path": str(home / "plan.txt"), "content": "plan"}
    llm.add(tool_calls(("call_1", "fs_write_file", write)), text("Not written."))
    controller = ChatController(rt)
    asked: asyncio.Future[Decision] = qloop.create_future()
    questions: list[str] = []

    async def approver(request: ApprovalRequest) -> Decision:
        questions.append(request.tool)
        return await asked

    async def task_run(conv_id: str) -> list[object]:
        provider = make_provider(rt.provider_config())
        try:
            agent = rt.make_agent(provider, approver)
            conversation = rt.open_conversation(conv_id)
            return [e async for e in agent.run(conversation, "Scheduled: write my plan")]
        finally:
            await provider.aclose()

    async def body() -> None:
        controller.send("Hello")
        await finish(controller)
        assert controller.regenerate(1) is True
        await finish(controller)
        conv_id = controller.conversation_id
        assert conv_id is not None and rt.store.list_branches(conv_id)
        assert not rt.store.conversation_busy(conv_id)
        run = asyncio.ensure_future(task_run(conv_id))
        await wait_until(lambda: rt.store.conversation_busy(conv_id), what="the task's lease")
        await wait_until(lambda: questions == ["fs_write_file"], what="the task's question")
        before = rt.store.load_messages(conv_id)
        assert controller.edit_and_resend(0, "Hello again") is False
        assert controller.regenerate(1) is False
        assert controller.switch_branch(1, 1) is False
        assert rt.store.load_messages(conv_id) == before and not controller.busy
        asked.set_result(Decision.DENY)
        events = await run
        assert isinstance(events[-1], TurnFinished)
        assert not rt.store.conversation_busy(conv_id), "the lease outlived its run"
        assert controller.switch_branch(1, 1) is True  # free again

    try:
        qloop.run_until_complete(body())
    finally:
        rt.close()
    assert len(llm.requests) == 4


# ---- the lease in the store ----------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def _dead_pid() -> int:
    """The id of a process that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_lease_is_taken_renewed_released_and_refuses_forks(home: Path) -> None:
    clock = Clock()
    with Store(db_path(home), clock=clock) as store:
        conv, elsewhere = store.create_conversation(), store.create_conversation()
        for content in ("question", "answer"):
            store.append_message(conv, ChatMessage("user", content))
        store.take_lease(conv, "run-1")
        assert store.conversation_busy(conv) and not store.conversation_busy(elsewhere)
        with pytest.raises(ConversationBusyError, match="another run"):
            store.fork_messages(conv, 1)
        with pytest.raises(ConversationBusyError):
            store.fork_and_append(conv, 0, ChatMessage("user", "edited"))
        assert [m.content for m in store.load_messages(conv)] == ["question", "answer"]
        assert store.list_branches(conv) == []

        clock.now += LEASE_STALE_SECONDS - 60
        store.renew_lease(conv, "run-1")  # the run kept a message: still live
        clock.now += LEASE_STALE_SECONDS - 60
        assert store.conversation_busy(conv)
        store.release_lease(conv, "run-1")
        assert not store.conversation_busy(conv)
        assert store.fork_messages(conv, 1)


def test_a_stale_lease_is_ignored(home: Path) -> None:
    clock = Clock()
    with Store(db_path(home), clock=clock) as store:
        conv = store.create_conversation()
        store.append_message(conv, ChatMessage("user", "question"))
        store.take_lease(conv, "forgotten-run")
        clock.now += LEASE_STALE_SECONDS + 1  # no message, no heartbeat for too long
        assert not store.conversation_busy(conv)
        assert store.fork_messages(conv, 0)

        store.append_message(conv, ChatMessage("user", "again"))
        with contextlib.closing(sqlite3.connect(db_path(home))) as raw, raw:
            raw.execute(  # a run of a process that crashed: recent, but its process is gone
                "INSERT INTO conversation_leases VALUES (?, 'crashed-run', ?, ?)",
                (conv, _dead_pid(), clock.now),
            )
        assert not store.conversation_busy(conv)
        assert store.fork_messages(conv, 0)


def test_edit_stores_the_fork_and_the_edited_message_in_one_transaction(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store(db_path(home)) as store:
        conv = store.create_conversation()
        store.append_message(conv, ChatMessage("user", "question"))
        store.append_message(conv, ChatMessage("assistant", "answer"))

        def full_disk(*_args: object) -> int:
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(store, "_insert_message", full_disk)
        with pytest.raises(sqlite3.OperationalError):
            store.fork_and_append(conv, 0, ChatMessage("user", "edited"))
        monkeypatch.undo()
        assert [m.content for m in store.load_messages(conv)] == ["question", "answer"]
        assert store.list_branches(conv) == []  # nothing half done

        store.fork_and_append(conv, 0, ChatMessage("user", "edited"))
        assert [m.content for m in store.load_messages(conv)] == ["edited"]
        assert store.switch_branch(conv, 0, 1)
        assert [m.content for m in store.load_messages(conv)] == ["question", "answer"]


# ---- the safety net: no orphan result reaches the model ---------------------------------


def test_a_tool_result_without_its_call_is_never_sent(
    home: Path,
    llm: ScriptedLLM,
    make_runtime: RuntimeFactory,
    qloop,
    caplog: pytest.LogCaptureFixture,
) -> None:
    rt = make_runtime(roots=[HOME])
    try:
        conv = rt.store.create_conversation("Shared")
        rt.store.append_message(conv, ChatMessage("user", "Clean up my downloads"))
        rt.store.append_message(conv, ChatMessage("assistant", "Shall I?"))
        # what a second writer could leave: a result whose call went into another branch
        rt.store.append_message(conv, ChatMessage("tool", "a.txt", tool_call_id="lost_1"))
        llm.add(text("Done."))
        controller = ChatController(rt)
        controller.open(conv)
        controller.send("Yes, go on")
        with caplog.at_level(logging.WARNING, logger="app.core.agent"):
            qloop.run_until_complete(finish(controller))
        sent = sent_messages(llm)
        assert [role for role, _ in sent if role != "system"] == ["user", "assistant", "user"]
        assert "lost_1" in caplog.text
    finally:
        rt.close()
