"""Questions of scheduled runs while nobody watches (docs/architecture.md §5.14).

Each question is a notification with buttons — Allow once / Deny when the summary and the
full arguments fit it as plain text, else Review… / Deny — and a pending entry the window
can show in full and answer (`Pending.answer`). The first answer wins; no answer by the
run's deadline is None (the runner denies). An action key the notification did not offer
is ignored: a button that was never shown cannot allow anything.

What an attacker (a prompt-injected model, a hostile MCP server) must not get from this:

- An answer meant for one question allowing another: questions are told apart by a key of
  our own, never by the call id the model chose (two runs, or one run, may repeat an id),
  and every button is bound to its own question; an answer after the question ended
  (answered, withdrawn, out of time) does nothing.
- A flood: a run puts one question on screen at a time; the others wait their turn (and
  are denied at the run's deadline like any unanswered question).
- A blind "yes" to a call no rule may cover (creating a task, planting something that
  runs): such a question offers only Review… / Deny, so it is answered with the whole
  question in the window; with no window to review in, it is denied at once.
- Misleading words: everything shown is made visible (controls, bidi overrides), the
  title is one line, and a call of a third-party tool says where it comes from and
  whether the user trusts that source.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.core.approval import ApprovalRequest, Decision
from app.core.notifications import (
    ALLOW_ONCE,
    APPROVAL_TEXT_LIMIT,
    DENY,
    REVIEW,
    Action,
    approval_actions,
)
from app.core.rules import BUILTIN
from app.core.visible import one_line, visible

if TYPE_CHECKING:
    from app.core.task_runner import Deadline
    from app.core.tasks import Task

log = logging.getLogger(__name__)

#: How a question is shown: (title, message, action ids and labels, on_action, on_click)
#: → a handle for `withdraw`. A core `Notifier` or the window's notification bridge.
Show = Callable[[str, str, list[Any], Callable[[str], None], Callable[[], None]], Any]
TITLE_CHARS = 60


@dataclass
class Pending:
    """A question waiting for an answer. `key` is ours (unique); the call id is the model's."""

    task_id: str
    task_title: str
    request: ApprovalRequest
    offered: frozenset[str]
    _resolve: Callable[[Decision], None] = field(repr=False)
    handle: Any = None
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: Set once the question ended (answered, withdrawn, out of time): answers are ignored.
    closed: bool = False

    @property
    def call_id(self) -> str:
        return self.request.call_id

    def answer(self, decision: Decision) -> bool:
        """The window's answer from the full question: Allow once or Deny, nothing more.
        False when the question already ended."""
        if self.closed:
            return False
        self._resolve(Decision.ALLOW_ONCE if decision is Decision.ALLOW_ONCE else Decision.DENY)
        return True


class UnattendedApprovals:
    """`ask` is the runner's `Asker`. `show`/`withdraw` put questions on screen; `on_review`
    (window) opens the full question; `on_change` is told when the pending set changes."""

    def __init__(
        self,
        show: Show | None = None,
        withdraw: Callable[[Any], None] | None = None,
        *,
        on_review: Callable[[Pending], None] | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.show = show
        self.withdraw = withdraw
        self.on_review = on_review
        self.on_change = on_change
        self._pending: dict[str, Pending] = {}
        self._lock = threading.Lock()
        #: a run (its deadline) → the lock that keeps its questions one at a time on screen
        self._turns: weakref.WeakKeyDictionary[Deadline, asyncio.Lock] = weakref.WeakKeyDictionary()

    def pending(self) -> list[Pending]:
        with self._lock:
            return list(self._pending.values())

    def get(self, key: str) -> Pending | None:
        """The pending question with this key (or, when exactly one has it, call id)."""
        with self._lock:
            found = self._pending.get(key)
            if found is not None:
                return found
            by_call = [p for p in self._pending.values() if p.request.call_id == key]
            return by_call[0] if len(by_call) == 1 else None

    async def ask(
        self, task: Task, request: ApprovalRequest, deadline: Deadline
    ) -> Decision | None:
        actions = self._actions(request)
        if not any(a.id == ALLOW_ONCE for a in actions) and self.on_review is None:
            # only the whole question may allow this, and there is no window to show it in
            log.info("task %s: %s needs review; nobody can review it here", task.id, request.tool)
            return Decision.DENY
        turn = self._turns.setdefault(deadline, asyncio.Lock())
        if not await _acquire(turn, deadline):
            return None
        try:
            return await self._ask(task, request, deadline, actions)
        finally:
            turn.release()

    async def _ask(
        self, task: Task, request: ApprovalRequest, deadline: Deadline, actions: list[Action]
    ) -> Decision | None:
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[Decision] = loop.create_future()

        def resolve(decision: Decision) -> None:  # any thread
            def settle() -> None:
                if not answered.done():
                    answered.set_result(decision)

            loop.call_soon_threadsafe(settle)

        pending = Pending(task.id, task.title, request, frozenset(a.id for a in actions), resolve)
        with self._lock:
            self._pending[pending.key] = pending
        self._changed()
        try:
            if self.show is not None:
                pending.handle = self._show(pending, actions, deadline)
            in_time = await deadline.wait(answered)
            return answered.result() if in_time else None
        finally:
            pending.closed = True
            with self._lock:
                self._pending.pop(pending.key, None)
            if pending.handle is not None and self.withdraw is not None:
                try:
                    self.withdraw(pending.handle)
                except Exception:
                    log.debug("could not withdraw a notification", exc_info=True)
            self._changed()

    def answer(self, key: str, decision: Decision) -> bool:
        """The window's answer (from the full question). Only Allow once or Deny. `key` is
        the pending question's key; a call id is accepted only while it is unambiguous."""
        pending = self.get(key)
        return pending is not None and pending.answer(decision)

    # ---- notifications ---------------------------------------------------------------------

    @staticmethod
    def _head(request: ApprovalRequest) -> list[str]:
        """What the call is and where its tool comes from, each on one visible line; a
        sub-agent's call says who asks ("Researcher wants to: …")."""
        summary = request.summary or request.tool
        if request.agent:
            summary = f"{one_line(request.agent, 40)} wants to: {summary}"
        lines = [one_line(summary)]
        if request.target:
            lines.append(one_line(request.target))
        if request.source_id != BUILTIN:
            trust = "you trust it" if request.trusted else "you have not trusted it"
            lines.append(one_line(f"From {request.source} ({trust})"))
        return lines

    def _actions(self, request: ApprovalRequest) -> list[Action]:
        """Review… / Deny for a call no rule may cover (the window shows it whole); else
        Allow once only when everything it allows fits the notification."""
        if request.never_covered:
            return [Action(REVIEW, "Review…"), Action(DENY, "Deny")]
        head = "\n".join(self._head(request))
        return approval_actions(head, request.arguments_text, APPROVAL_TEXT_LIMIT)

    def _show(self, pending: Pending, actions: list[Action], deadline: Deadline) -> Any:
        request = pending.request
        title = f"Task “{one_line(pending.task_title, TITLE_CHARS)}” asks"
        lines = self._head(request)
        if REVIEW not in pending.offered:  # what Allow once allows, in full
            lines.append(visible(request.arguments_text))
        elif request.never_covered:
            lines.append("Deskhand never allows this from a notification: press Review….")
        minutes = max(1, round(deadline.remaining() / 60))
        lines.append(f"Denied unless you answer within {minutes} min.")
        assert self.show is not None
        return self.show(
            title,
            "\n".join(lines),
            actions,
            lambda key: self._on_action(pending, key),
            lambda: self._review(pending),
        )

    def _on_action(self, question: Pending | str, key: str) -> None:
        """A notification button: `question` is the Pending it was made for (or its key)."""
        pending = self.get(question) if isinstance(question, str) else question
        if pending is None or pending.closed:
            log.info("ignored an answer to a question that already ended")
            return
        if key not in pending.offered:
            log.warning("ignored a notification action that was not offered: %r", key)
            return
        if key == ALLOW_ONCE:
            pending._resolve(Decision.ALLOW_ONCE)
        elif key == DENY:
            pending._resolve(Decision.DENY)
        elif key == REVIEW:
            self._review(pending)

    def _review(self, pending: Pending) -> None:
        if not pending.closed and self.on_review is not None:
            try:
                self.on_review(pending)
            except Exception:
                log.exception("could not open the question for review")

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:
                log.exception("pending-approvals listener failed")


async def _acquire(lock: asyncio.Lock, deadline: Deadline) -> bool:
    """Takes `lock` unless the deadline comes first (then it is not held)."""
    taking = asyncio.ensure_future(lock.acquire())
    try:
        if await deadline.wait(taking):
            return True
    except BaseException:  # cancelled while waiting its turn: never keep the lock
        _give_back(taking, lock)
        raise
    _give_back(taking, lock)
    return False


def _give_back(taking: asyncio.Future[Any], lock: asyncio.Lock) -> None:
    if taking.done() and not taking.cancelled() and taking.exception() is None:
        lock.release()  # it was taken just as the deadline came
    else:
        taking.cancel()
