"""Questions of scheduled runs while nobody watches (issue 16, point 3).

Each question is a notification with buttons — Allow once / Deny when the summary and the
full arguments fit it as plain text, else Review… / Deny — and a pending entry the window
can show in full and answer (`answer`). The first answer wins; no answer by the run's
deadline is None (the runner denies). An action key the notification did not offer is
ignored: a button that was never shown cannot allow anything.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.core.approval import ApprovalRequest, Decision
from app.core.notifications import ALLOW_ONCE, DENY, REVIEW, approval_actions
from app.core.visible import visible

if TYPE_CHECKING:
    from app.core.task_runner import Deadline
    from app.core.tasks import Task

log = logging.getLogger(__name__)

#: How a question is shown: (title, message, action ids and labels, on_action, on_click)
#: → a handle for `withdraw`. A core `Notifier` or the window's notification bridge.
Show = Callable[[str, str, list[Any], Callable[[str], None], Callable[[], None]], Any]


@dataclass
class Pending:
    """A question waiting for an answer."""

    task_id: str
    task_title: str
    request: ApprovalRequest
    offered: frozenset[str]
    _resolve: Callable[[Decision], None] = field(repr=False)
    handle: Any = None


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

    def pending(self) -> list[Pending]:
        with self._lock:
            return list(self._pending.values())

    def get(self, call_id: str) -> Pending | None:
        with self._lock:
            return self._pending.get(call_id)

    async def ask(
        self, task: Task, request: ApprovalRequest, deadline: Deadline
    ) -> Decision | None:
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[Decision] = loop.create_future()

        def resolve(decision: Decision) -> None:  # any thread
            loop.call_soon_threadsafe(lambda: answered.done() or answered.set_result(decision))

        actions = approval_actions(request.summary or request.tool, request.arguments_text)
        pending = Pending(task.id, task.title, request, frozenset(a.id for a in actions), resolve)
        with self._lock:
            self._pending[request.call_id] = pending
        self._changed()
        try:
            if self.show is not None:
                pending.handle = self._show(pending, actions, deadline)
            in_time = await deadline.wait(answered)
            return answered.result() if in_time else None
        finally:
            with self._lock:
                self._pending.pop(request.call_id, None)
            if pending.handle is not None and self.withdraw is not None:
                try:
                    self.withdraw(pending.handle)
                except Exception:
                    log.debug("could not withdraw a notification", exc_info=True)
            self._changed()

    def answer(self, call_id: str, decision: Decision) -> bool:
        """The window's answer (from the full question). Only Allow once or Deny."""
        pending = self.get(call_id)
        if pending is None:
            return False
        pending._resolve(Decision.ALLOW_ONCE if decision is Decision.ALLOW_ONCE else Decision.DENY)
        return True

    # ---- notifications ---------------------------------------------------------------------

    def _show(self, pending: Pending, actions: list[Any], deadline: Deadline) -> Any:
        request = pending.request
        title = f"Task “{visible(pending.task_title)}” asks"
        lines = [request.summary or request.tool]
        if request.target:
            lines.append(request.target)
        if REVIEW not in pending.offered:  # what Allow once allows, in full
            lines.append(request.arguments_text)
        minutes = max(1, round(deadline.remaining() / 60))
        lines.append(f"Denied unless you answer within {minutes} min.")
        call_id = request.call_id
        assert self.show is not None
        return self.show(
            title,
            "\n".join(lines),
            actions,
            lambda key: self._on_action(call_id, key),
            lambda: self._review(call_id),
        )

    def _on_action(self, call_id: str, key: str) -> None:
        pending = self.get(call_id)
        if pending is None:
            return
        if key not in pending.offered:
            log.warning("ignored a notification action that was not offered: %r", key)
            return
        if key == ALLOW_ONCE:
            pending._resolve(Decision.ALLOW_ONCE)
        elif key == DENY:
            pending._resolve(Decision.DENY)
        elif key == REVIEW:
            self._review(call_id)

    def _review(self, call_id: str) -> None:
        pending = self.get(call_id)
        if pending is not None and self.on_review is not None:
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
