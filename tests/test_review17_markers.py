"""Review of issue 17's stored markers: an error marker is stored text like a message, so
it goes through the secret tripwire like a message does (docs/architecture.md §5.9)."""

from __future__ import annotations

import pytest

from app.ui.controller import ChatController
from tests.controller_harness import send
from tests.fakellm import ScriptedLLM, error
from tests.fixtures_runtime import HOME, RuntimeFactory

#: Known to the tripwire from the environment (§5.9), but not the scripted account's key.
OTHER_KEY = "sk-ant-api03-review17-Zq8vXk2LmN4pR7sT9uW1yA3bC5dE"


def test_an_error_marker_is_stored_with_known_secrets_redacted(
    make_runtime: RuntimeFactory, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch, qloop
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", OTHER_KEY)
    rt = make_runtime(roots=[HOME])
    llm.add(error(400, message=f"upstream refused key {OTHER_KEY}"))
    controller = ChatController(rt)
    try:
        qloop.run_until_complete(send(controller, "Hello"))
        assert controller.conversation_id is not None
        markers = rt.store.list_markers(controller.conversation_id)
        assert [m.kind for m in markers] == ["error"]
        assert rt.runner.refresh_secrets().text(OTHER_KEY) != OTHER_KEY  # the tripwire knows it
        assert OTHER_KEY not in markers[0].text, "the marker stored a known secret as it came"
    finally:
        rt.close()
