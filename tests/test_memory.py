"""Memory: the tools over the real store (FTS5), injection into new conversations within a
budget (preferences first), and private conversations that are never remembered from."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.core.agent import Agent, Conversation
from app.core.approval import ApprovalPolicy, Verdict, allow_all
from app.core.memory import INJECT_HEADER, MemoryRefused, MemoryService
from app.core.providers import make_provider
from app.core.providers.base import ProviderConfig
from app.core.settings import Settings
from app.core.store import Store
from tests.fakellm import ScriptedLLM, text, tool_calls
from tools.registry import ToolRegistry
from tools.runner import ToolRunner
from tools.session import ToolSession
from tools.spec import ToolContext


@pytest.fixture
def store(tmp_path: Path):
    s = Store(tmp_path / "deskhand.db")
    yield s
    s.close()


@pytest.fixture
def runner():
    r = ToolRunner(ToolRegistry.default(None, entry_points=False))
    yield r
    r.shutdown()


def call(runner: ToolRunner, name: str, args: dict, service: MemoryService, home: Path):
    ctx = ToolContext(home=home, services={"memory": service})
    return asyncio.run(runner.run(name, args, ctx))


def test_store_search_update_delete_list_through_the_tools(store, runner, tmp_path):
    conv = store.create_conversation()
    memory = MemoryService(store).for_conversation(conv)

    stored = call(runner, "memory_store", {"content": "The cat is called Mia"}, memory, tmp_path)
    assert stored.ok, stored.content
    mem_id = stored.data["id"]
    assert stored.data["kind"] == "fact" and stored.data["source_conversation"] == conv
    call(
        runner,
        "memory_store",
        {"content": "Prefers answers in British English", "kind": "preference"},
        memory,
        tmp_path,
    )

    found = call(runner, "memory_search", {"query": "cat"}, memory, tmp_path)
    assert found.ok and [m["id"] for m in found.data["memories"]] == [mem_id]
    assert "Mia" in found.content

    updated = call(
        runner,
        "memory_update",
        {"id": mem_id, "content": "The cat is called Momo"},
        memory,
        tmp_path,
    )
    assert updated.ok and updated.data["content"] == "The cat is called Momo"
    assert call(runner, "memory_search", {"query": "Mia"}, memory, tmp_path).data == {
        "memories": []
    }, "the FTS index follows updates"
    assert call(runner, "memory_search", {"query": "momo"}, memory, tmp_path).data["memories"]

    listed = call(runner, "memory_list", {"kind": "preference"}, memory, tmp_path)
    assert [m["content"] for m in listed.data["memories"]] == ["Prefers answers in British English"]

    deleted = call(runner, "memory_delete", {"id": mem_id}, memory, tmp_path)
    assert deleted.ok
    assert call(runner, "memory_search", {"query": "cat"}, memory, tmp_path).data["memories"] == []
    again = call(runner, "memory_delete", {"id": mem_id}, memory, tmp_path)
    assert not again.ok and "no memory" in again.content


def test_search_ranks_with_fts_and_falls_back_to_any_word(store):
    memory = MemoryService(store)
    memory.remember("Works on the Deskhand project in Python")
    best = memory.remember("Python is the favourite language; Python everywhere", "preference")
    memory.remember("Lives in Lyon")
    ranked = memory.search("python")
    assert ranked[0].id == best.id and len(ranked) == 2
    # no memory holds both words: any word matches, ranked
    assert {m.content for m in memory.search("Lyon python")} >= {"Lives in Lyon"}
    assert memory.search('"; DROP TABLE memories; --') == []


def test_kinds_and_size_are_checked(store):
    memory = MemoryService(store)
    with pytest.raises(MemoryRefused):
        memory.remember("x", "opinion")
    with pytest.raises(MemoryRefused):
        memory.remember("   ")


def test_memory_tools_ask_before_changing_anything(runner):
    policy = ApprovalPolicy()
    verdicts = {
        name: policy.verdict(runner.registry.get(name))
        for name in ("memory_store", "memory_update", "memory_delete", "memory_search")
    }
    assert verdicts == {
        "memory_store": Verdict.ASK,
        "memory_update": Verdict.ASK,
        "memory_delete": Verdict.ASK,
        "memory_search": Verdict.ALLOW,
    }


def test_private_conversation_is_never_remembered_from(store, runner, tmp_path):
    conv = store.create_conversation()
    assert store.is_private(conv) is False
    store.set_private(conv, True)
    assert store.is_private(conv) is True
    memory = MemoryService(store).for_conversation(conv)
    result = call(runner, "memory_store", {"content": "secret plan"}, memory, tmp_path)
    assert not result.ok and "private" in result.content
    assert store.memory_rows() == []
    # an existing memory cannot be rewritten from a private conversation either
    kept = MemoryService(store).remember("Likes tea")
    assert not call(
        runner, "memory_update", {"id": kept.id, "content": "secret"}, memory, tmp_path
    ).ok
    store.set_private(conv, False)
    assert call(runner, "memory_store", {"content": "now fine"}, memory, tmp_path).ok


def test_injection_keeps_the_budget_and_puts_preferences_first(store):
    memory = MemoryService(store)
    for i in range(30):
        memory.remember(f"Fact number {i} about gardening and tomatoes")
    memory.remember("Answer briefly, without emoji", "preference")
    memory.remember("Use metric units", "preference")
    memory.remember("Renew the passport before March", "task")

    block = memory.prompt_block("how do I renew my passport", 300)
    assert len(block) <= 300
    lines = block.splitlines()
    assert lines[0] == INJECT_HEADER
    assert "(preference)" in lines[1] and "(preference)" in lines[2]
    assert "passport" in lines[3], "the most relevant other memory comes next"
    assert memory.prompt_block("anything", 0) == ""
    assert MemoryService(store, enabled=False).prompt_block("passport", 1000) == ""


def test_agent_injects_memories_and_binds_the_conversation(llm: ScriptedLLM, tmp_path):
    store = Store(tmp_path / "deskhand.db")
    registry = ToolRegistry.default(None, entry_points=False)
    runner = ToolRunner(registry)
    memory = MemoryService(store)
    memory.remember("Prefers short answers", "preference")
    settings = Settings()
    settings.memory.inject_chars = 500
    provider = make_provider(
        ProviderConfig(kind="openai", base_url=llm.openai_base_url, model="m", max_retries=0)
    )
    agent = Agent(
        provider,
        runner,
        home=tmp_path,
        approver=allow_all,
        recorder=store,
        settings=settings,
        system_prompt="You are a test.",
        services={"memory": memory},
    )
    conv = Conversation(ToolSession(registry), store.create_conversation())
    llm.add(tool_calls(("c1", "memory_store", {"content": "Has a dog named Rex"})), text("Noted."))

    async def turn() -> None:
        async for _ in agent.run(conv, "remember my dog Rex"):
            pass
        await provider.aclose()

    asyncio.run(turn())
    system = llm.requests[0].body["messages"][0]
    assert system["role"] == "system"
    assert "You are a test." in system["content"] and "Prefers short answers" in system["content"]
    [row] = [r for r in store.memory_rows() if "Rex" in r["content"]]
    assert row["source_conversation"] == conv.id
    runner.shutdown()
    store.close()
