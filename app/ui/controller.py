"""The one object that runs the agent loop for the window and turns its events into signals.

It lives on the Qt main thread, where the qasync loop runs; blocking work (keyring, files,
building the conversation's tools and the agent with its system prompt) runs off it
(`app.ui.off_gui.run_off_gui`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from PySide6.QtCore import QObject, Signal

from app.core import compaction
from app.core.approval import ApprovalRequest, Decision
from app.core.attachments import AttachmentProblem, PasswordTries, build_user_message
from app.core.events import (
    AgentEvent,
    ApprovalRequested,
    Error,
    ToolCallFinished,
    ToolCallStarted,
)
from app.core.history_marks import BranchInfo, Marker, MarkerKind
from app.core.jobs import is_job_call
from app.core.providers.base import ChatMessage, ProviderConfig
from app.core.runtime import ConfigError, Runtime
from app.ui.off_gui import run_off_gui

if TYPE_CHECKING:  # the agent loads with the first conversation, after the window is ready
    from app.core.agent import Agent, Conversation

log = logging.getLogger(__name__)
T = TypeVar("T")

#: What a stopped turn's marker says.
STOPPED = "Stopped"
#: Said after a regenerate's marker when nothing new came and the earlier answer is back.
KEPT = "The earlier answer is kept."
#: Asks the user for an encrypted file's password: (file name, why) → the password, or None.
PasswordAsker = Callable[[str, str], Awaitable[str | None]]
#: How `build_user_message` starts the text of an attached file or image.
_ATTACHMENT_STARTS = ("Attached file `", "[attached image: ")


@dataclass
class _Turn:
    """What one running turn needs to leave its marker in the right conversation."""

    conversation: Conversation | None = None
    error: str | None = None
    waiting: bool = True
    #: A regenerate: (the index it asks again from, the branch shown there before it).
    regenerated: tuple[int, int] | None = None


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
    #: The history was rewritten (edit, regenerate, branch switch): reload the view from
    #: `conversation.messages` and `conversation_marks()`.
    historyReset = Signal()
    #: True from the start of a turn until its first event arrives (or it ends).
    waiting = Signal(bool)
    #: The conversation's provider account or model changed (`model_choice()`).
    modelChanged = Signal()
    #: How many background jobs of the conversation shown still run.
    jobsChanged = Signal(int)

    def __init__(self, runtime: Runtime, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self._conversation: Conversation | None = None
        #: The conversation being opened on a worker (its id, its future).
        self._opening: tuple[str, Future[Conversation]] | None = None
        self._task: asyncio.Task[None] | None = None
        self._running = False
        self._pending: dict[str, asyncio.Future[Decision]] = {}
        self._turn = _Turn()
        #: A model chosen for a new chat before it is stored.
        self._unsaved_model: tuple[str | None, str] | None = None
        #: The conversation whose background jobs report to this window.
        self._jobs_of = ""
        #: How the window asks for an encrypted attachment's password (None: never asked).
        self.password_asker: PasswordAsker | None = None
        self.conversationOpened.connect(self._listen_to_jobs)

    # ---- state ----------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """From the start of a turn until its end has been handled (markers written,
        `busyChanged(False)` sent), which is a loop iteration after its task is done."""
        return self._running

    @property
    def conversation(self) -> Conversation | None:
        """The conversation shown (None: a new chat not stored yet). One opened a moment ago
        may still be building on a worker thread; asking for it waits for it."""
        if self._opening is not None:
            opening, self._opening = self._opening[1], None
            self._conversation = opening.result()
        return self._conversation

    @conversation.setter
    def conversation(self, conversation: Conversation | None) -> None:
        if self._opening is not None:
            self._opening[1].cancel()
            self._opening = None
        self._conversation = conversation

    @property
    def conversation_id(self) -> str | None:
        if self._opening is not None:
            return self._opening[0]
        return self._conversation.id if self._conversation else None

    def pending_approvals(self) -> list[str]:
        return [call_id for call_id, fut in self._pending.items() if not fut.done()]

    def conversation_marks(self) -> tuple[list[Marker], list[BranchInfo]]:
        """The markers and branch points of the conversation shown (none for a new chat)."""
        conv_id = self.conversation_id
        if conv_id is None:
            return [], []
        store = self.runtime.store
        return store.list_markers(conv_id), store.list_branches(conv_id)

    def branches(self) -> list[BranchInfo]:
        return self.conversation_marks()[1]

    # ---- conversations ---------------------------------------------------------------------

    def new_chat(self) -> None:
        self.stop()
        self.conversation = None
        self._unsaved_model = None
        self.conversationOpened.emit("")
        self.modelChanged.emit()

    def open(self, conversation_id: str) -> list[ChatMessage]:
        """Switches to a stored conversation and returns its messages for the view. The
        conversation itself (tools, agent) is built on a worker thread: the first open at
        start-up imports the agent and reads every tool's manifest."""
        self.stop()
        messages = self.runtime.store.load_messages(conversation_id)
        self.conversation = None
        runtime = self.runtime
        self._opening = (
            conversation_id,
            run_off_gui(lambda: runtime.open_conversation(conversation_id)),
        )
        self._unsaved_model = None
        self.conversationOpened.emit(conversation_id)
        self.modelChanged.emit()
        return messages

    # ---- the model --------------------------------------------------------------------------

    def set_model(self, account_id: str | None, model: str) -> None:
        """The provider account (None: the active one) and model this conversation uses."""
        conv_id = self.conversation_id  # (never waits for a conversation still opening)
        if conv_id is None:
            self._unsaved_model = (account_id, model)
        else:
            self.runtime.store.set_conversation_model(conv_id, account_id, model)
        self.modelChanged.emit()

    def model_choice(self) -> tuple[str | None, str]:
        """The conversation's account and model, else the active account and its model
        (an account removed since it was chosen counts as not chosen; no model chosen means
        the account's own)."""
        active = self.runtime.settings.active_provider_account()
        fallback = (active.id, active.model) if active else (None, "")
        choice = self._choice()
        if choice is None:
            return fallback
        account_id, model = choice
        account = self._account(account_id) if account_id is not None else active
        if account_id is not None and account is None:
            return fallback
        return (account.id if account else None), model or (account.model if account else "")

    def _choice(self) -> tuple[str | None, str] | None:
        conv_id = self.conversation_id
        if conv_id is None:
            return self._unsaved_model
        return self.runtime.store.conversation_model(conv_id)

    def _account(self, account_id: str) -> Any:
        return next((p for p in self.runtime.settings.providers if p.id == account_id), None)

    def _provider_for(self, choice: tuple[str | None, str] | None) -> tuple[ProviderConfig, Any]:
        """On a worker thread: the provider's settings and its client."""
        from app.core.providers import make_provider

        config = self._provider_config(choice)
        return config, make_provider(config)

    def _provider_config(self, choice: tuple[str | None, str] | None) -> ProviderConfig:
        """Blocking (keyring): run it in an executor."""
        if choice is None:
            return self.runtime.provider_config()
        account_id, model = choice
        if account_id is not None and self._account(account_id) is None:
            return self.runtime.account_provider_config(None)
        return self.runtime.account_provider_config(account_id, model or None)

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

    def edit_and_resend(self, index: int, text: str) -> bool:
        """Replaces user message `index` (keeping its images and attached files) and runs
        the turn again; what followed it stays as an earlier branch. False when refused
        (busy, a bad index, another run writing to the conversation): the view then keeps
        its editor open."""
        original = self._message(index)
        if self.busy or original is None or original.role != "user":
            return False
        if compaction.is_summary(original) or not self._free():
            return False
        assert self.conversation is not None and self.conversation.id is not None
        edited = self._redacted(
            replace(original, content=_with_attachments(text, original.content))
        )
        store, conv_id = self.runtime.store, self.conversation.id
        if not self._rewrite(lambda: store.fork_and_append(conv_id, index, edited)):
            return False
        self._reload()
        self._start(self._run(None))
        return True

    def editable_text(self, index: int) -> str:
        """What the user typed in message `index`, without the attached files' text (which
        an edit keeps as it is)."""
        message = self._message(index)
        if message is None:
            return ""
        return _split_attachments(message.content)[0]

    def regenerate(self, index: int) -> bool:
        """Asks the model again for the answer of the turn holding assistant message `index`;
        the earlier answer stays as a branch (and comes back if nothing new comes). False
        when refused."""
        message = self._message(index)
        if self.busy or message is None or message.role != "assistant" or not self._free():
            return False
        assert self.conversation is not None and self.conversation.id is not None
        start = _turn_start(self.conversation.messages, index)
        if start is None:
            return False
        shown = next((b.current for b in self.branches() if b.index == start), 1)
        store, conv_id = self.runtime.store, self.conversation.id
        if not self._rewrite(
            lambda: store.fork_messages(conv_id, start, take_markers_at_index=True)
        ):
            return False
        self._reload()
        self._start(self._run(None), regenerated=(start, shown))
        return True

    def switch_branch(self, index: int, branch: int) -> bool:
        """Shows branch `branch` (1-based) of the branch point at message `index`. False
        when refused."""
        if self.busy or self.conversation is None or self.conversation.id is None:
            return False
        found = next((b for b in self.branches() if b.index == index), None)
        if found is None or not 1 <= branch <= found.count or branch == found.current:
            return False
        store, conv_id = self.runtime.store, self.conversation.id
        if not self._free() or not self._rewrite(
            lambda: store.switch_branch(conv_id, index, branch)
        ):
            return False
        self._reload()
        return True

    def _free(self) -> bool:
        """No other run (a scheduled task's, `deskhand ask`) writes to the conversation;
        else the user is told why their action did nothing."""
        assert self.conversation is not None and self.conversation.id is not None
        if not self.runtime.store.conversation_busy(self.conversation.id):
            return True
        self.notice.emit(_BUSY)
        return False

    def _rewrite(self, change: Callable[[], object]) -> bool:
        """Runs a store change that rewrites the history; False when it changed nothing, or
        (the user told) when another run took the conversation in the meantime."""
        from app.core.store import ConversationBusyError

        try:
            return change() is not False
        except ConversationBusyError:
            self.notice.emit(_BUSY)
            return False

    def _message(self, index: int) -> ChatMessage | None:
        """Message `index` of a stored conversation; None for a bad index."""
        if self.conversation is None or self.conversation.id is None:
            return None
        if not 0 <= index < len(self.conversation.messages):
            return None
        return self.conversation.messages[index]

    def _reload(self) -> None:
        """The history changed in the store: reload it (and the tools its live messages
        used) and have the view follow."""
        assert self.conversation is not None and self.conversation.id is not None
        self.runtime.reload_conversation(self.conversation)
        self.historyReset.emit()

    def _redacted(self, message: ChatMessage) -> ChatMessage:
        """As the agent keeps a message: with every known secret redacted."""
        return replace(message, content=self.runtime.tripwire.text(message.content))

    def stop_all(self) -> None:
        """Stop (Esc): the turn, and the conversation's background jobs."""
        self.stop()
        if self._jobs_of:
            self.runtime.jobs.stop_conversation(self._jobs_of)

    def running_jobs(self) -> int:
        return len(self.runtime.jobs.active(self._jobs_of)) if self._jobs_of else 0

    def _listen_to_jobs(self, conversation_id: str) -> None:
        """The shown conversation's jobs report here, also after the turn that started
        them (their cards, their questions); the one shown before goes back to its turn."""
        if self._jobs_of:
            self.runtime.jobs.listen(self._jobs_of, None)
        self._jobs_of = conversation_id
        if conversation_id:
            self.runtime.jobs.listen(conversation_id, self._job_event)
        self.jobsChanged.emit(self.running_jobs())

    def _job_event(self, event: AgentEvent) -> None:
        if isinstance(event, ApprovalRequested):
            self.approvalPending.emit(event.request.call_id, event.request.tool)
        self.agentEvent.emit(event)
        if isinstance(event, ToolCallStarted | ToolCallFinished) and is_job_call(event.call_id):
            self.jobsChanged.emit(self.running_jobs())

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

    def _start(
        self, coro: Coroutine[Any, Any, None], regenerated: tuple[int, int] | None = None
    ) -> None:
        turn = self._turn = _Turn(self.conversation, regenerated=regenerated)
        self._task = asyncio.ensure_future(coro)
        self._running = True
        self.busyChanged.emit(True)
        self.waiting.emit(True)
        self._task.add_done_callback(lambda task: self._finished(task, turn))

    def _mark(self, turn: _Turn, kind: MarkerKind, text: str) -> None:
        """A marker where the turn ended — through the secret tripwire, like a message (an
        error text may quote a key). A regenerate that brought nothing new puts the earlier
        answer back first and leaves its marker at the point it was asked from."""
        conv_id = turn.conversation.id if turn.conversation else None
        if conv_id is None:
            return
        store = self.runtime.store
        at = None
        try:
            text = self.runtime.tripwire.text(text)
            at = self._restore_earlier_answer(turn)
            if at is not None:
                text = f"{text}. {KEPT}" if not text.endswith(".") else f"{text} {KEPT}"
            store.add_marker(
                conv_id, store.count_messages(conv_id) if at is None else at, kind, text
            )
        except Exception:  # a marker is a help, never a reason to break the turn's end
            log.exception("could not record a %s marker", kind)
        if at is not None:
            self._reload_shown(turn)

    def _restore_earlier_answer(self, turn: _Turn) -> int | None:
        """If `turn` regenerated an answer and nothing new came at that point (stopped
        before any text, failed), shows the earlier answer again — the empty attempt stays
        a branch — and returns where the turn was asked from; else None."""
        conv_id = turn.conversation.id if turn.conversation else None
        if turn.regenerated is None or conv_id is None:
            return None
        start, earlier = turn.regenerated
        turn.regenerated = None
        store = self.runtime.store
        if any(not compaction.is_summary(m) for m in store.load_messages(conv_id)[start:]):
            return None
        try:
            store.switch_branch(conv_id, start, earlier)
        except Exception:  # another run took the conversation meanwhile: leave it be
            log.exception("could not show the earlier answer again")
            return None
        return start

    def _reload_shown(self, turn: _Turn) -> None:
        """After the end of `turn` changed its history: the view follows, if it shows that
        conversation (perhaps opened again meanwhile)."""
        ended = turn.conversation.id if turn.conversation else None
        if ended is not None and self.conversation_id == ended:
            self._reload()

    def _emit(self, event: AgentEvent, turn: _Turn | None = None) -> None:
        """Every event of a turn goes out here: the first ends the waiting."""
        turn = turn or self._turn
        if turn.waiting:
            turn.waiting = False
            self.waiting.emit(False)
        if isinstance(event, Error):
            turn.error = event.message
        self.agentEvent.emit(event)

    def _finished(self, task: asyncio.Task[None], turn: _Turn) -> None:
        """The turn ended: leave an error or "Stopped" marker where it did."""
        self._pending.clear()
        if task.cancelled():
            self._mark(turn, "stopped", STOPPED)
        elif (exc := task.exception()) is not None:
            log.error("turn failed: %s", exc, exc_info=exc)
            self._emit(Error(f"Something went wrong: {exc}", kind="internal"), turn)
        if turn.error is not None:
            self._mark(turn, "error", turn.error)
        elif self._restore_earlier_answer(turn) is not None:
            self._reload_shown(turn)  # ended with no error and no message (rare): no marker
        if turn.waiting:
            turn.waiting = False
            self.waiting.emit(False)
        self._running = False
        self.busyChanged.emit(False)
        self.conversationsChanged.emit()

    async def _prepare_and_run(self, text: str, attachments: list[str]) -> None:
        message: ChatMessage = ChatMessage("user", text)
        await self._ensure_conversation(text)
        if attachments:
            message, problems = await self._read_attachments(text, attachments)
            for problem in problems:
                self.notice.emit(f"Not attached: {problem.path} — {problem.reason}")
        await self._run(message)

    async def _read_attachments(
        self, text: str, attachments: list[str]
    ) -> tuple[ChatMessage, list[AttachmentProblem]]:
        """The message with the files' text; an encrypted document's password is asked
        (`password_asker`) and the files read again."""
        searchable = self._searchable()
        tries = PasswordTries()
        while True:
            message, problems = await _off_gui(
                functools.partial(
                    build_user_message,
                    text,
                    attachments,
                    searchable=searchable,
                    passwords=dict(tries.passwords),
                )
            )
            locked = tries.to_ask(problems)
            if not locked or self.password_asker is None:
                return message, problems
            for problem in locked:
                name = Path(problem.path).name
                tries.answer(problem.path, await self.password_asker(name, problem.reason))

    def _searchable(self) -> Callable[[Path], object] | None:
        """How a large attached document joins this conversation's knowledge (None: the
        conversation is not stored, so it goes in whole)."""
        conversation_id = self.conversation.id if self.conversation is not None else None
        if conversation_id is None:
            return None
        runtime = self.runtime
        return lambda path: runtime.knowledge.add_attachment(conversation_id, path)

    async def stored_conversation(self, title: str) -> str:
        """This conversation's id, a new chat stored first (titled `title` until its first
        message names it)."""
        await self._ensure_conversation(title)
        assert self.conversation is not None and self.conversation.id is not None
        return self.conversation.id

    async def _ensure_conversation(self, text: str) -> None:
        """The conversation the message goes to, opened (a new one stored) if need be."""
        if self._opening is not None:  # a conversation opened a moment ago is still building
            await asyncio.wrap_future(self._opening[1])
        if self.conversation is None:
            runtime = self.runtime
            self.conversation = await _off_gui(lambda: runtime.open_conversation(None))
            self._turn.conversation = self.conversation
            assert self.conversation.id is not None
            self.runtime.store.auto_title(self.conversation.id, text or "Attachment")
            if self._unsaved_model is not None:
                self.runtime.store.set_conversation_model(
                    self.conversation.id, *self._unsaved_model
                )
                self._unsaved_model = None
            self.conversationOpened.emit(self.conversation.id)
            self.conversationsChanged.emit()

    async def _run(self, message: ChatMessage | None) -> None:
        choice = self._choice()
        try:
            # the keyring, and the client's TLS context (tens of ms): off the GUI thread
            config, provider = await _off_gui(lambda: self._provider_for(choice))
        except ConfigError as exc:
            if message is not None and self.conversation is not None:
                # keep what the user typed: it is in the history, ready for a retry
                assert self.conversation.id is not None
                self.runtime.store.append_message(self.conversation.id, message)
                self.conversation.messages.append(message)
            self.setupNeeded.emit(str(exc))
            self._emit(Error(str(exc), kind="setup", retryable=True))
            return
        try:
            if not config.model:
                models = await provider.list_models()
                if not models:
                    self._emit(
                        Error("The server lists no models; pick one in Settings.", kind="setup")
                    )
                    return
                config.model = models[0]
            # the system prompt (the tools' categories, a scan of the skills): off it too
            agent = await _off_gui(lambda: self._make_agent(provider))
            assert self.conversation is not None
            # closed at once however the turn ends, so its lease is released before the
            # turn's end is handled (a regenerate may switch back then)
            async with contextlib.aclosing(agent.run(self.conversation, message)) as events:
                async for event in events:
                    if isinstance(event, ApprovalRequested):
                        self.approvalPending.emit(event.request.call_id, event.request.tool)
                    self._emit(event)
        except Exception as exc:
            from app.core.providers.base import ProviderError

            if not isinstance(exc, ProviderError):
                raise
            self._emit(Error(str(exc), kind=exc.kind, retryable=True))
        finally:
            await provider.aclose()

    def _make_agent(self, provider: Any) -> Agent:
        """On a worker thread."""
        return self.runtime.make_agent(provider, self._approver)

    async def _approver(self, request: ApprovalRequest) -> Decision:
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._pending[request.call_id] = future
        try:
            return await future
        finally:
            self._pending.pop(request.call_id, None)


async def _off_gui(fn: Callable[[], T]) -> T:
    """`fn` on a worker, awaited on the GUI thread's loop."""
    return await asyncio.wrap_future(run_off_gui(fn))


_BUSY = (
    "Another run is answering in this conversation (a scheduled task, or `deskhand ask`). "
    "Wait until it ends, then try again."
)


def _turn_start(messages: list[ChatMessage], index: int) -> int | None:
    """The index of the first message after the user message that started the turn holding
    `messages[index]`; None if no user message comes before it."""
    for i in range(index - 1, -1, -1):
        msg = messages[i]
        if msg.role == "user" and not compaction.is_summary(msg):
            return i + 1
    return None


def _split_attachments(content: str) -> tuple[str, str]:
    """(what the user typed, the attached files' text that `build_user_message` added)."""
    cuts = [content.find("\n\n" + start) for start in _ATTACHMENT_STARTS]
    cuts = [c for c in cuts if c >= 0]
    if content.startswith(_ATTACHMENT_STARTS):
        return "", content
    if not cuts:
        return content, ""
    cut = min(cuts)
    return content[:cut], content[cut + 2 :]


def _with_attachments(text: str, original: str) -> str:
    """The edited text followed by the original message's attached files (unless the
    edited text still carries them: an editor prefilled with the whole message)."""
    attached = _split_attachments(original)[1]
    if not attached or _split_attachments(text)[1]:
        return text
    return f"{text}\n\n{attached}" if text else attached
