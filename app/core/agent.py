"""The agent loop: model turn → approved tool calls in the pool → results → next turn.

One loop serves the GUI, the CLI and the tests; all of them consume `AgentEvent`s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from app.core import compaction, untrusted
from app.core.events import (
    AgentEvent,
    Error,
    Notice,
    ReasoningDelta,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)
from app.core.pipeline import CallPipeline
from app.core.providers import vision
from app.core.providers.base import (
    BadRequestError,
    ChatMessage,
    Provider,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    ReasoningChunk,
    ServerError,
    StreamDone,
    TextChunk,
    ToolCallReady,
    ToolCallRequest,
    ToolSpec,
    UnreachableError,
    Usage,
)
from tools.redact import StreamRedactor, Tripwire
from tools.runner import InvalidCall, parse_arguments
from tools.session import ToolSession
from tools.spec import ToolResult
from tools.views import SettingsView

log = logging.getLogger(__name__)

#: After this many model turns in a row whose every tool call was malformed, give up.
MAX_INVALID_ROUNDS = 3
#: A run renews its conversation lease at least this often (seconds), even while it waits.
LEASE_HEARTBEAT = 60.0
CANCELLED = "Cancelled by the user before it finished."


class Recorder(Protocol):
    """The part of the store the loop writes to (every message as soon as it is complete)."""

    def append_message(self, conv_id: str, msg: ChatMessage, usage: Usage | None = None) -> int:
        ...


@dataclass
class Conversation:
    session: ToolSession
    id: str | None = None
    messages: list[ChatMessage] = field(default_factory=list)
    #: Memories told to the model, chosen once at the conversation's first turn here.
    memory_note: str | None = None
    #: The last round's tool images (data URLs by call id): sent with the next request
    #: only, never stored (`vision.request_view`).
    tool_images: dict[str, list[str]] = field(default_factory=dict)

    def restore_active_tools(self) -> None:
        """Tools used earlier in the conversation stay callable after a restart."""
        used = [c.name for m in self.messages for c in m.tool_calls]
        self.session.activate(used)

    def rebuild_active_tools(self, offered: Iterable[str]) -> None:
        """The active set as a fresh open would make it: `offered` (always sent) and the
        tools the live messages used — none that only an archived branch used."""
        self.session.active.clear()
        self.session.activate(offered)
        self.restore_active_tools()


class _Done:
    pass


_DONE = _Done()


@dataclass(frozen=True)
class TurnSetup:
    """What shapes a turn besides the model and the tools: the instructions, the step
    budget, and where memories and the compaction budget come from."""

    system_prompt: str | None = None
    max_steps: int = 25
    #: Tokens (in and out, all steps) after which the turn ends once its round of calls is
    #: done (a sub-agent's budget); None: no limit.
    max_tokens: int | None = None
    #: The memory injection and compaction budgets (`memory`, `conversation`).
    settings: SettingsView | None = None
    #: The app services; "memory" chooses the note the model is told.
    services: Mapping[str, Any] | None = None


class Agent:
    """Talks with the model; every tool call goes through `pipeline`, every text kept or
    shown through `tripwire`. `Runtime.make_agent` builds one."""

    def __init__(
        self,
        provider: Provider,
        pipeline: CallPipeline,
        *,
        tripwire: Tripwire,
        recorder: Recorder | None = None,
        setup: TurnSetup = TurnSetup(),
    ) -> None:
        self.provider = provider
        self.pipeline = pipeline
        self.tripwire = tripwire
        self.recorder = recorder
        self.settings = setup.settings
        self.system_prompt = setup.system_prompt
        self.max_steps = setup.max_steps
        self.max_tokens = setup.max_tokens
        self.services = setup.services
        #: Calls of the current round whose start reached the store.
        self._started_rows: set[str] = set()
        self._save_failures: list[str] = []
        #: The server refused tools for this model: keep talking without them.
        self._tools_unsupported = False
        #: Summarising failed once this turn: send the full history instead of retrying.
        self._compaction_failed = False
        #: The conversation lease of the run going on (renewed with every message kept).
        self._lease: _Lease | None = None

    # ---- persistence ----------------------------------------------------------------

    def _append(self, conv: Conversation, msg: ChatMessage, usage: Usage | None = None) -> None:
        """Keeps a message — with every known secret redacted, so none reaches the history
        or a later model request."""
        msg = self._redacted(msg)
        conv.messages.append(msg)
        if self.recorder is None or conv.id is None:
            return
        if self._lease is not None:
            self._lease.renew()
        try:
            self.recorder.append_message(conv.id, msg, usage)
        except Exception as exc:  # e.g. a full disk: keep the turn going, warn once
            log.error("could not save a message: %s", exc)
            self._save_failures.append(str(exc))

    def _note_attachments(self, conv: Conversation, msg: ChatMessage) -> None:
        """An attached file or image is the user's private data and text from outside the
        conversation (a PDF from the web can carry instructions): like a file the
        assistant read, it makes sending anything out ask, now and when the conversation
        is continued (§5.8). Kept with no call: it stays while the conversation does."""
        from app.core.attachments import attached_names

        names = attached_names(msg.content)
        if not names:
            return
        what = untrusted.clean_origin(f"attached file {names[-1]}")
        conv.session.last_untrusted_origin = what
        conv.session.private_data_read = what
        add = getattr(self.recorder, "add_taint", None)
        if add is None or conv.id is None:
            return
        for kind in (untrusted.UNTRUSTED, untrusted.PRIVATE):
            try:
                add(conv.id, kind, what)
            except Exception:  # this run still knows; a later one would not
                log.exception("could not keep what this conversation was given")

    def _redacted(self, msg: ChatMessage) -> ChatMessage:
        redactor = self.tripwire.redactor()
        content = redactor.text(msg.content)
        calls = [
            replace(c, arguments=redactor.text(c.arguments)) if isinstance(c.arguments, str) else c
            for c in msg.tool_calls
        ]
        if content == msg.content and calls == msg.tool_calls:
            return msg
        return replace(msg, content=content, tool_calls=calls)

    async def _secrets_known(self) -> None:
        """Model requests wait until the tripwire knows every stored secret."""
        await self.pipeline.secrets_known()

    def _save_warning(self) -> Notice | None:
        """One readable warning per failed stretch of saving (then quiet until it recovers)."""
        if not self._save_failures:
            return None
        detail = self._save_failures[-1]
        self._save_failures.clear()
        return Notice(
            f"Deskhand could not save this conversation to its history ({detail}). "
            "The chat goes on, but free some disk space to keep it.",
            kind="store",
        )

    def _record(self, method: str, *args: Any) -> None:
        if self.recorder is None:
            return
        try:
            getattr(self.recorder, method)(*args)
        except Exception:  # bookkeeping must never break a turn
            log.exception("could not record %s", method)

    # ---- the loop ---------------------------------------------------------------------

    async def run(
        self, conv: Conversation, user_message: str | ChatMessage | None
    ) -> AsyncGenerator[AgentEvent, None]:
        """One user turn. `None` continues from the history as it is (retry after an error).

        While it runs it holds the conversation's lease in the store, so nobody rewrites
        the history under it (an edit in the window while a task or `deskhand ask` runs)."""
        lease = _Lease.take(self.recorder, conv.id)
        self._lease = lease
        try:
            async for event in self._turn(conv, user_message):
                yield event
        finally:
            self._lease = None
            lease.release()

    async def _turn(
        self, conv: Conversation, user_message: str | ChatMessage | None
    ) -> AsyncIterator[AgentEvent]:
        if user_message is not None:
            if isinstance(user_message, str):
                user_message = ChatMessage("user", user_message)
            # redacted with every stored secret known, not just those loaded so far
            await self._secrets_known()
            self._append(conv, user_message)
            self._note_attachments(conv, user_message)
            if user_message.images and not self._takes_images():
                model = self.provider.config.model
                yield Notice(_images_not_sent(model), kind=vision.IMAGES_NOT_SENT)
        usage = Usage()
        invalid_rounds = 0
        for step in range(1, self.max_steps + 1):
            text: list[str] = []
            calls: list[ToolCallRequest] = []
            stop_reason = "end_turn"
            specs = [] if self._tools_unsupported else self._tool_specs(conv)
            async for notice in self._compact(conv):
                yield notice
            await self._secrets_known()
            # every consumer (terminal, --json, the window) gets the deltas redacted
            shown = _ShownStream(self.tripwire)
            try:
                async for event in self.provider.stream(
                    self._request_messages(conv),
                    specs,
                    system=self.system_prompt,
                    known_tools={m.name for m in conv.session.enabled_manifests()},
                ):
                    if isinstance(event, TextChunk):
                        text.append(event.text)
                        if delta := shown.text.feed(event.text):
                            yield TextDelta(delta)
                    elif isinstance(event, ReasoningChunk):
                        if delta := shown.reasoning.feed(event.text):
                            yield ReasoningDelta(delta)
                    elif isinstance(event, ToolCallReady):
                        calls.append(event.call)
                    elif isinstance(event, StreamDone):
                        stop_reason = event.stop_reason
                        usage.add(event.usage)
            except ProviderError as exc:
                for held in shown.flush():
                    yield held
                if specs and not text and _rejects_tools(exc):
                    self._tools_unsupported = True
                    yield Notice(
                        "This model cannot call tools (the server said: "
                        f"{exc}). It will answer without them; choose a tool-capable model "
                        "in Settings → Providers to let Deskhand act for you.",
                        kind="no_tools",
                    )
                    continue
                self._keep_partial(conv, text)
                message = self.tripwire.text(str(exc))  # a server may echo a key
                yield Error(message, kind=exc.kind, retryable=_retryable(exc))
                return
            except (asyncio.CancelledError, GeneratorExit):
                self._keep_partial(conv, text)
                raise
            for held in shown.flush():
                yield held
            calls = _unique_ids(calls)
            self._append(conv, ChatMessage("assistant", "".join(text), tool_calls=calls), usage)
            conv.tool_images.clear()  # the model has seen them
            if warning := self._save_warning():
                yield warning
            if not calls:
                yield TurnFinished(usage, stop_reason, step)
                return
            outcome = _RoundOutcome()
            async for call_event in self._run_calls(conv, calls, outcome):
                yield call_event
            if warning := self._save_warning():
                yield warning
            if self.max_tokens is not None and usage.total >= self.max_tokens:
                yield TurnFinished(usage, "max_tokens", step)
                return
            invalid_rounds = invalid_rounds + 1 if outcome.all_invalid(len(calls)) else 0
            if invalid_rounds >= MAX_INVALID_ROUNDS:
                yield Error(
                    "The model kept sending tool calls that could not run "
                    f"({MAX_INVALID_ROUNDS} rounds in a row). Try rephrasing, or another model.",
                    kind="invalid_tool_calls",
                )
                return
        yield TurnFinished(usage, "max_steps", self.max_steps)

    # ---- context: memories and compaction ---------------------------------------------

    def _request_messages(self, conv: Conversation) -> list[ChatMessage]:
        """The history as the model gets it, led by the memories chosen for this
        conversation — as the user's labelled notes (data), never as system instructions.
        The note is not stored: it is chosen again when the conversation is reopened.
        Everything here (note, history, tool calls, system prompt) is masked again at the
        one exit to the model (`providers._http.masked_payload`)."""
        if conv.memory_note is None:
            conv.memory_note = self._memory_note(conv)
        view = without_orphan_results(compaction.request_view(conv.messages))
        view = vision.request_view(view, takes=self._takes_images(), fresh=conv.tool_images)
        if not conv.memory_note:
            return view
        return [ChatMessage("user", conv.memory_note), *view]

    def _memory_note(self, conv: Conversation) -> str:
        if self.services is None:
            return ""
        try:
            memory = self.services["memory"]
        except KeyError:
            return ""
        bind = getattr(memory, "for_conversation", None)
        if callable(bind):
            memory = bind(conv.id)
        budget = getattr(getattr(self.settings, "memory", None), "inject_chars", 2000)
        query = next(
            (m.content for m in conv.messages if m.role == "user" and not compaction.is_summary(m)),
            "",
        )
        try:
            return str(memory.context_message(query, budget))
        except Exception:  # memories are a help, never a reason to fail a turn
            log.exception("could not read memories")
            return ""

    async def _compact(self, conv: Conversation) -> AsyncIterator[AgentEvent]:
        """Summarise older turns once the history passes the budget (app/core/compaction.py)."""
        conversation = getattr(self.settings, "conversation", None)
        budget = getattr(conversation, "compact_after_chars", 0)
        if not budget or self._compaction_failed:
            return
        summarised = 0
        for _ in range(compaction.MAX_ROUNDS):
            plan = compaction.plan(conv.messages, budget)
            if plan is None:
                break
            try:
                summary = await compaction.summarise(self.provider, plan, conv.messages, budget)
            except ProviderError as exc:
                self._compaction_failed = True
                yield Notice(
                    f"This conversation is long, and summarising its older part failed ({exc}); "
                    "the full history is sent instead.",
                    kind="compaction",
                )
                return
            self._append(conv, summary)
            summarised = plan.cut
        if summarised:
            yield Notice(
                f"The first {summarised} messages were summarised to fit the model's context; "
                "the full conversation stays in the history.",
                kind="compaction",
            )

    def _keep_partial(self, conv: Conversation, text: list[str]) -> None:
        """A stopped or failed stream keeps what the user already saw."""
        partial = "".join(text)
        if partial:
            self._append(conv, ChatMessage("assistant", partial))

    def _takes_images(self) -> bool:
        return vision.model_takes_images(self.provider.config)

    def _tool_specs(self, conv: Conversation) -> list[ToolSpec]:
        return [ToolSpec(m.name, m.description, m.json_schema()) for m in conv.session.visible()]

    # ---- tool calls ---------------------------------------------------------------------

    async def _run_calls(
        self, conv: Conversation, calls: list[ToolCallRequest], outcome: _RoundOutcome
    ) -> AsyncIterator[AgentEvent]:
        """Runs a message's calls concurrently, yielding their events as they happen."""
        queue: asyncio.Queue[AgentEvent | _Done] = asyncio.Queue()
        finished: set[str] = set()
        self._started_rows.clear()
        tasks = [
            asyncio.create_task(self._one_call(conv, call, queue, outcome, finished))
            for call in calls
        ]
        waiter = asyncio.create_task(_signal_when_done(tasks, queue))
        try:
            while True:
                event = await queue.get()
                if isinstance(event, _Done):
                    break
                yield event
        finally:
            if not waiter.done():
                waiter.cancel()
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, waiter, return_exceptions=True)
            for call in calls:  # every call keeps an answer, so the history stays valid
                if call.id not in finished:
                    said = self.pipeline.stopped_results.pop(call.id, None)
                    self._finish(conv, call, ToolResult.failure(_stopped(said)), "cancelled")

    async def _one_call(
        self,
        conv: Conversation,
        call: ToolCallRequest,
        queue: asyncio.Queue[AgentEvent | _Done],
        outcome: _RoundOutcome,
        finished: set[str],
    ) -> None:
        started = time.monotonic()
        try:
            shown_args: dict[str, Any] | str = self.tripwire.data(parse_arguments(call.arguments))
        except InvalidCall:
            shown_args = self.tripwire.text(call.arguments)
        manifest = self.pipeline.registry.get(call.name)
        await queue.put(
            ToolCallStarted(
                call.id,
                call.name,
                shown_args,
                manifest.category if manifest else "",
                sorted(manifest.operations) if manifest else [],
            )
        )
        if self.recorder is not None and conv.id is not None:
            self._record(
                "record_tool_call_started",
                conv.id,
                call.id,
                call.name,
                self.tripwire.text(call.arguments),
            )
            self._started_rows.add(call.id)
        try:
            result, status = await self._decide_and_run(conv, call, queue, outcome)
        except Exception as exc:  # a bug here must not hang the turn
            log.exception("tool call %s failed inside the loop", call.name)
            result, status = ToolResult.failure(f"internal error: {exc}"), "error"
        if result.attachments:
            result = await self._with_images(conv, call, result, outcome)
        self._finish(conv, call, result, status)
        finished.add(call.id)
        await queue.put(ToolCallFinished(call.id, call.name, result, time.monotonic() - started))

    async def _decide_and_run(
        self,
        conv: Conversation,
        call: ToolCallRequest,
        queue: asyncio.Queue[AgentEvent | _Done],
        outcome: _RoundOutcome,
    ) -> tuple[ToolResult, str]:
        done = await self.pipeline.call(
            call.id,
            call.name,
            call.arguments,
            session=conv.session,
            conversation_id=conv.id,
            emit=queue.put_nowait,
        )
        if done.status == "invalid":
            outcome.invalid += 1
            return done.result, "error"
        return done.result, done.status

    async def _with_images(
        self, conv: Conversation, call: ToolCallRequest, result: ToolResult, outcome: _RoundOutcome
    ) -> ToolResult:
        """The images the tool saved for this call go with the next request (when the model
        takes images); its text says whether they did, and why not."""
        home, takes = self.pipeline.env.home, self._takes_images()
        async with outcome.image_lock:  # one round's calls share one image allowance
            found = await asyncio.to_thread(
                vision.tool_images, result.attachments, home, takes=takes, budget=outcome.images
            )
        if found.urls:
            conv.tool_images[call.id] = found.urls
        return replace(result, content=vision.with_notes(result.content, found.notes))

    def _finish(
        self, conv: Conversation, call: ToolCallRequest, result: ToolResult, status: str
    ) -> None:
        self._append(
            conv,
            ChatMessage("tool", result.content, tool_call_id=call.id, is_error=not result.ok),
        )
        if call.id in self._started_rows:
            self._record(
                "record_tool_call_finished",
                call.id,
                status,
                result.content,
                result.data,
                result.error,
            )


class _Lease:
    """A run's lease on its stored conversation (`Store.take_lease`): taken at the start,
    renewed with each message and every LEASE_HEARTBEAT seconds, released at the end. A
    recorder without leases (a test's) or a conversation not stored: nothing is held."""

    def __init__(self, recorder: Any, conv_id: str | None) -> None:
        self.recorder = recorder
        self.conv_id = conv_id
        self.owner = f"run-{uuid.uuid4().hex}"
        self._beat: asyncio.Task[None] | None = None

    @classmethod
    def take(cls, recorder: Any, conv_id: str | None) -> _Lease:
        lease = cls(recorder if hasattr(recorder, "take_lease") else None, conv_id)
        if lease.recorder is None or conv_id is None:
            return lease
        try:
            lease.recorder.take_lease(conv_id, lease.owner)
        except Exception:  # the lease protects the history; failing to take it is no reason
            log.exception("could not take the conversation's lease")  # to refuse the turn
            return lease
        lease._beat = asyncio.get_running_loop().create_task(lease._heartbeat())
        return lease

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(LEASE_HEARTBEAT)
            self.renew()

    def renew(self) -> None:
        if self.recorder is None or self.conv_id is None:
            return
        try:
            self.recorder.renew_lease(self.conv_id, self.owner)
        except Exception:
            log.exception("could not renew the conversation's lease")

    def release(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
        if self.recorder is None or self.conv_id is None:
            return
        with contextlib.suppress(Exception):
            self.recorder.release_lease(self.conv_id, self.owner)
        self.recorder = None


def without_orphan_results(messages: list[ChatMessage]) -> list[ChatMessage]:
    """`messages` without tool results whose call no earlier assistant message made:
    providers refuse such a request, and one can only come from a history another writer
    changed under a run. Each one dropped is logged."""
    called: set[str] = set()
    kept: list[ChatMessage] = []
    for msg in messages:
        called.update(c.id for c in msg.tool_calls)
        if msg.role == "tool" and msg.tool_call_id not in called:
            log.warning("dropped a tool result with no call before it (%s)", msg.tool_call_id)
            continue
        kept.append(msg)
    return kept


@dataclass
class _ShownStream:
    """The tripwire on a streamed reply: the answer's and the reasoning's deltas pass it
    before any consumer sees them. A secret split across chunks is still caught (the end
    that could begin one is held back, see `StreamRedactor`); `flush` gives what is held
    when the stream ends (or fails)."""

    def __init__(self, tripwire: Tripwire) -> None:
        self.text: StreamRedactor = tripwire.stream()
        self.reasoning: StreamRedactor = tripwire.stream()

    def flush(self) -> list[AgentEvent]:
        held: list[AgentEvent] = []
        if thought := self.reasoning.flush():
            held.append(ReasoningDelta(thought))
        if answer := self.text.flush():
            held.append(TextDelta(answer))
        return held


class _RoundOutcome:
    def __init__(self) -> None:
        self.invalid = 0
        #: What is left of the round's image allowance, taken one call at a time.
        self.images = vision.ImageBudget()
        self.image_lock = asyncio.Lock()

    def all_invalid(self, total: int) -> bool:
        return total > 0 and self.invalid == total


async def _signal_when_done(tasks: Iterable[asyncio.Task[None]], queue: asyncio.Queue[Any]) -> None:
    await asyncio.gather(*tasks, return_exceptions=True)
    await queue.put(_DONE)


def _unique_ids(calls: list[ToolCallRequest]) -> list[ToolCallRequest]:
    """Each call of a round gets its own id (some servers repeat one): an approval, a card
    and a result must never be shared by two calls. Renamed in the history too; a model's
    id never holds "/" or "~" (see below)."""
    seen: set[str] = set()
    out = []
    for call in calls:
        # "/" and "~" are Deskhand's own in ids outside a conversation (a sub-agent's call
        # `<delegation>/<n>`, a job's `jobs/<id>`, a tool's question `<call>~<n>`)
        base = (call.id or "call").replace("/", "_").replace("~", "_")
        new_id, n = base, 2
        while new_id in seen:
            new_id, n = f"{base}_{n}", n + 1
        seen.add(new_id)
        out.append(call if new_id == call.id else replace(call, id=new_id))
    return out


def _stopped(said: ToolResult | None) -> str:
    """What the history says of a call stopped mid-way, with the tool's own last word when
    it has one (e.g. "the command may still be running in web-1")."""
    detail = (said.error or said.content) if said is not None else ""
    if not detail or detail.strip().lower() in {"cancelled", "error: cancelled"}:
        return CANCELLED
    return f"{CANCELLED} {detail}"


def _images_not_sent(model: str) -> str:
    return (
        f"The attached images were not sent: {model or 'this model'} does not take images "
        "(it is told an image was attached). Choose a model that takes images, or set "
        "Images to On for this provider account in Settings → Providers if this one does."
    )


def _rejects_tools(exc: ProviderError) -> bool:
    """Ollama: "… does not support tools"; others: "tools are not supported", "tool_choice"."""
    text = str(exc).lower()
    return (
        isinstance(exc, BadRequestError)
        and "tool" in text
        and ("support" in text or "not allowed" in text or "unknown" in text)
    )


def _retryable(exc: ProviderError) -> bool:
    return isinstance(exc, RateLimitError | ServerError | UnreachableError | ProviderTimeout)
