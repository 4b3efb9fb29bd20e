"""The one object that runs the agent loop for the window and turns its events into signals.

It lives on the Qt main thread, where the qasync loop runs; blocking work (keyring, files)
goes to an executor.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.core.agent import Conversation
from app.core.approval import ApprovalRequest, Decision
from app.core.attachments import build_user_message
from app.core.events import ApprovalRequested, Error
from app.core.providers.base import ChatMessage
from app.core.runtime import ConfigError, Runtime

log = logging.getLogger(__name__)


class ChatController(QObject):
    busyChanged = Signal(bool)
    agentEvent = Signal(object)
    #: The conversation shown changed: id, or "" for a new chat not yet stored.
    conversationOpened = Signal(str)
    conversationsChanged = Signal()
    approvalPending = Signal(str, str)  # call id, tool name
    #: No usable provider: the window shows the setup card. Carries the reason.
    setupNeeded = Signal(str)
    notice = Signal(str)

    def __init__(self, runtime: Runtime, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self.conversation: Conversation | None = None
        self._task: asyncio.Task[None] | None = None
        self._pending: dict[str, asyncio.Future[Decision]] = {}

    # ---- state ----------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def conversation_id(self) -> str | None:
        return self.conversation.id if self.conversation else None

    def pending_approvals(self) -> list[str]:
        return [call_id for call_id, fut in self._pending.items() if not fut.done()]

    # ---- conversations ---------------------------------------------------------------------

    def new_chat(self) -> None:
        self.stop()
        self.conversation = None
        self.conversationOpened.emit("")

    def open(self, conversation_id: str) -> list[ChatMessage]:
        """Switches to a stored conversation and returns its messages for the view."""
        self.stop()
        self.conversation = self.runtime.open_conversation(conversation_id)
        self.conversationOpened.emit(conversation_id)
        return self.conversation.messages

    # ---- turns --------------------------------------------------------------------------------

    def send(self, text: str, attachments: list[str] | None = None) -> None:
        if self.busy:
            return
        self._start(self._prepare_and_run(text, list(attachments or [])))

    def retry(self) -> None:
        """Runs the model again on the history as it is (after an error)."""
        if self.busy or self.conversation is None:
            return
        self._start(self._run(None))

    def stop(self) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_result(Decision.DENY)
        if self.busy and self._task is not None:
            self._task.cancel()

    def decide(self, call_id: str, decision: str) -> None:
        future = self._pending.get(call_id)
        if future is not None and not future.done():
            future.set_result(Decision(decision))

    def _start(self, coro: Any) -> None:
        self._task = asyncio.ensure_future(coro)
        self.busyChanged.emit(True)
        self._task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._pending.clear()
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.error("turn failed: %s", exc, exc_info=exc)
            self.agentEvent.emit(Error(f"Something went wrong: {exc}", kind="internal"))
        self.busyChanged.emit(False)
        self.conversationsChanged.emit()

    async def _prepare_and_run(self, text: str, attachments: list[str]) -> None:
        message: ChatMessage = ChatMessage("user", text)
        if attachments:
            loop = asyncio.get_running_loop()
            message, problems = await loop.run_in_executor(
                None, build_user_message, text, attachments
            )
            for problem in problems:
                self.notice.emit(f"Not attached: {problem.path} — {problem.reason}")
        if self.conversation is None:
            self.conversation = self.runtime.open_conversation(None)
            self.runtime.store.auto_title(self.conversation.id, text or "Attachment")
            self.conversationOpened.emit(self.conversation.id)
            self.conversationsChanged.emit()
        await self._run(message)

    async def _run(self, message: ChatMessage | None) -> None:
        from app.core.providers import make_provider

        loop = asyncio.get_running_loop()
        try:
            config = await loop.run_in_executor(None, self.runtime.provider_config)
        except ConfigError as exc:
            if message is not None and self.conversation is not None:
                # keep what the user typed: it is in the history, ready for a retry
                self.runtime.store.append_message(self.conversation.id, message)
                self.conversation.messages.append(message)
            self.setupNeeded.emit(str(exc))
            self.agentEvent.emit(Error(str(exc), kind="setup", retryable=True))
            return
        provider = make_provider(config)
        try:
            if not config.model:
                models = await provider.list_models()
                if not models:
                    self.agentEvent.emit(
                        Error("The server lists no models; pick one in Settings.", kind="setup")
                    )
                    return
                config.model = models[0]
            agent = self.runtime.make_agent(provider, self._approver)
            assert self.conversation is not None
            async for event in agent.run(self.conversation, message):
                if isinstance(event, ApprovalRequested):
                    self.approvalPending.emit(event.request.call_id, event.request.tool)
                self.agentEvent.emit(event)
        except Exception as exc:
            from app.core.providers.base import ProviderError

            if not isinstance(exc, ProviderError):
                raise
            self.agentEvent.emit(Error(str(exc), kind=exc.kind, retryable=True))
        finally:
            await provider.aclose()

    async def _approver(self, request: ApprovalRequest) -> Decision:
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._pending[request.call_id] = future
        try:
            return await future
        finally:
            self._pending.pop(request.call_id, None)
