"""The provider account and model a conversation talks to: stored per conversation, used by
the real ChatController's turns, with the active account as the fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.events import Error
from app.core.history_marks import Marker
from app.core.paths import db_path
from app.core.store import NotFoundError, Store
from app.ui.controller import ChatController
from tests.controller_harness import contents, record, send
from tests.fakellm import text
from tests.fixtures_runtime import HOME, RuntimeFactory

pytestmark = pytest.mark.runtime("model-a", "model-b", roots=[HOME])


def test_the_store_keeps_a_choice_per_conversation(home: Path) -> None:
    with Store(db_path(home)) as store:
        first, second = store.create_conversation(), store.create_conversation()
        assert store.conversation_model(first) is None
        store.set_conversation_model(first, "acct-1", "big-model")
        store.set_conversation_model(second, None, "small-model")
        assert store.conversation_model(first) == ("acct-1", "big-model")
        assert store.conversation_model(second) == (None, "small-model")
        store.clear_conversation_model(first)
        assert store.conversation_model(first) is None
        with pytest.raises(NotFoundError):
            store.conversation_model("no-such-conversation")
        with pytest.raises(NotFoundError):
            store.set_conversation_model("no-such-conversation", None, "m")
    with Store(db_path(home)) as reopened:
        assert reopened.conversation_model(second) == (None, "small-model")


@pytest.fixture
def controller(runtime, qloop) -> ChatController:
    return ChatController(runtime)


def accounts(runtime) -> tuple[str, str]:
    a, b = runtime.settings.providers
    return a.id, b.id


def test_a_new_chat_uses_the_active_account(controller, runtime, llm, qloop) -> None:
    a, _ = accounts(runtime)
    assert controller.model_choice() == (a, "model-a")
    llm.add(text("hi"))

    async def body() -> None:
        await send(controller, "hello")

    qloop.run_until_complete(body())
    assert llm.requests[-1].body["model"] == "model-a"
    assert runtime.store.conversation_model(controller.conversation_id) is None


def test_a_model_chosen_before_the_first_message_is_stored_with_the_chat(
    controller, runtime, llm, qloop
) -> None:
    _, b = accounts(runtime)
    seen = record(controller)
    controller.set_model(b, "model-b-large")
    assert seen.of("model") == [None]
    assert controller.model_choice() == (b, "model-b-large")
    llm.add(text("from b"), text("from b again"))

    async def body() -> None:
        await send(controller, "hello")
        await send(controller, "more")

    qloop.run_until_complete(body())
    assert [r.body["model"] for r in llm.requests] == ["model-b-large", "model-b-large"]
    conv_id = controller.conversation_id
    assert runtime.store.conversation_model(conv_id) == (b, "model-b-large")

    again = ChatController(runtime)
    again.open(conv_id)
    assert again.model_choice() == (b, "model-b-large")
    again.new_chat()
    assert again.model_choice() == (accounts(runtime)[0], "model-a")


def test_changing_the_model_mid_conversation(controller, runtime, llm, qloop) -> None:
    a, b = accounts(runtime)
    llm.add(text("one"), text("two"), text("three"))

    async def body() -> None:
        await send(controller, "first")
        controller.set_model(b, "")  # the account's own model
        assert controller.model_choice() == (b, "model-b")
        await send(controller, "second")
        controller.set_model(None, "model-z")  # whichever account is active
        assert controller.model_choice() == (a, "model-z")
        await send(controller, "third")

    qloop.run_until_complete(body())
    assert [r.body["model"] for r in llm.requests] == ["model-a", "model-b", "model-z"]


def test_a_removed_account_falls_back_to_the_active_one(controller, runtime, llm, qloop) -> None:
    a, b = accounts(runtime)
    llm.add(text("one"), text("two"))

    async def body() -> None:
        controller.set_model(b, "model-b")
        await send(controller, "first")

        def drop_b(settings) -> None:
            settings.providers = [p for p in settings.providers if p.id != b]

        runtime.settings = runtime.settings_store.update(drop_b)
        assert controller.model_choice() == (a, "model-a")
        await send(controller, "second")

    qloop.run_until_complete(body())
    assert [r.body["model"] for r in llm.requests] == ["model-b", "model-a"]


def test_without_any_model_the_message_stays_and_setup_is_offered(
    make_runtime: RuntimeFactory, qloop
) -> None:
    rt = make_runtime(llm=None)
    try:
        controller = ChatController(rt)
        assert controller.model_choice() == (None, "")
        seen = record(controller)

        async def body() -> None:
            await send(controller, "are you there?")

        qloop.run_until_complete(body())
        [shown] = seen.events(Error)
        assert shown.kind == "setup" and shown.retryable
        assert seen.of("setup") == [shown.message]
        assert seen.of("waiting") == [True, False]
        assert contents(controller) == ["are you there?"]
        assert controller.conversation_marks() == ([Marker(1, "error", shown.message)], [])

        controller.set_model("gone-account", "m")  # a choice naming no account: still setup
        qloop.run_until_complete(body())
        assert [e.kind for e in seen.events(Error)] == ["setup", "setup"]
    finally:
        rt.close()
