"""Drives the real ChatController on a runtime from tests/fixtures_runtime.py (the scripted
model server, tests/fakellm.py), with everything it signals recorded in order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.core.events import AgentEvent
from app.ui.controller import ChatController
from tests.fakellm import ScriptedLLM
from tests.fixtures_qt import wait_until


@dataclass
class Recorded:
    """Every signal of one controller, in the order they came."""

    log: list[tuple[str, Any]] = field(default_factory=list)

    def of(self, kind: str) -> list[Any]:
        return [value for name, value in self.log if name == kind]

    def events(self, cls: type[AgentEvent] | None = None) -> list[Any]:
        found = self.of("event")
        return [e for e in found if cls is None or isinstance(e, cls)]


def record(controller: ChatController) -> Recorded:
    seen = Recorded()
    controller.agentEvent.connect(lambda e: seen.log.append(("event", e)))
    controller.waiting.connect(lambda on: seen.log.append(("waiting", on)))
    controller.historyReset.connect(lambda: seen.log.append(("reset", None)))
    controller.modelChanged.connect(lambda: seen.log.append(("model", None)))
    controller.setupNeeded.connect(lambda why: seen.log.append(("setup", why)))
    controller.busyChanged.connect(lambda busy: seen.log.append(("busy", busy)))
    return seen


async def finish(controller: ChatController, what: str = "the turn to finish") -> None:
    await wait_until(lambda: not controller.busy, what=what)


async def send(controller: ChatController, text: str, attachments: list[str] | None = None) -> None:
    controller.send(text, attachments)
    assert controller.busy
    await finish(controller)


def contents(controller: ChatController) -> list[str]:
    """The shown history's texts — checked to be what the store holds, too."""
    assert controller.conversation is not None and controller.conversation.id is not None
    shown = [m.content for m in controller.conversation.messages]
    assert shown == [
        m.content for m in controller.runtime.store.load_messages(controller.conversation.id)
    ]
    return shown


def sent_messages(llm: ScriptedLLM, request: int = -1) -> list[tuple[str, str]]:
    """(role, text) of what a model request carried."""
    out = []
    for m in llm.requests[request].body["messages"]:
        content = m.get("content") or ""
        if isinstance(content, list):
            content = " ".join(part.get("text", "") for part in content)
        out.append((m["role"], content))
    return out
