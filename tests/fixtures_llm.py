"""Fixtures for the scripted model server (see tests/fakellm.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.fakellm import ScriptedLLM


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedLLM]:
    """A started `ScriptedLLM` on 127.0.0.1, stopped after the test.

    NO_PROXY is extended so that a proxy configured on the machine (also for
    subprocesses started by the test) never sees the loopback traffic."""
    for name in ("NO_PROXY", "no_proxy"):
        current = os.environ.get(name, "")
        monkeypatch.setenv(name, ",".join(filter(None, [current, "127.0.0.1", "localhost"])))
    with ScriptedLLM() as server:
        yield server
