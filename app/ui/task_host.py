"""The window process's part in scheduled tasks (docs/architecture.md §5.14).

It holds the schedule when no other process does (`tasks.lock`: else `deskhand tasks serve`
runs it and the window only shows and edits tasks), runs due tasks and "Run now" through
the core runner on the GUI loop, puts their questions on native notifications through the
bridge, opens the full question (Review…, or a click) with the task's conversation, and
tells the user when a run ends.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

if TYPE_CHECKING:
    from app.core.task_approvals import Pending, UnattendedApprovals
    from app.core.task_runner import RunOutcome, TaskRunner
    from app.core.task_scheduler import ScheduleLock, TaskScheduler
    from app.ui.notify_bridge import Notifications

from app.ui.off_gui import run_off_gui

log = logging.getLogger(__name__)
#: Imports the runner's modules before `start`; a plain thread (qasync's QThreads abort
#: the process if one still runs at quit).

TASK_KEY = "task:"
QUESTION_KEY = "task-question:"
OPEN = "open"


class TaskHost(QObject):
    #: A run started or ended, or a question came or went: the Tasks window refreshes.
    changed = Signal()
    #: conversation id → (question key, text): what runs wait for, by task conversation.
    questionsChanged = Signal(dict)

    def __init__(
        self,
        runtime: Any,
        notifications: Notifications,
        open_conversation: Callable[[str], bool],
        window: QWidget,
    ) -> None:
        super().__init__(window)
        self.runtime = runtime
        self.notifications = notifications
        self.open_conversation = open_conversation
        self.window = window
        self.lock: ScheduleLock | None = None
        self.runner: TaskRunner | None = None
        self.scheduler: TaskScheduler | None = None
        self.approvals: UnattendedApprovals | None = None
        #: notification key → (on_action, on_click) of a question on screen
        self._questions: dict[str, tuple[Callable[[str], None], Callable[[], None]]] = {}
        #: task id → its conversation, for the "Task done" notification's Open
        self._conversations: dict[str, str] = {}
        self._dialogs: dict[str, QWidget] = {}
        self._runs: set[asyncio.Task[Any]] = set()
        #: The runner's clock (tests move it); None is the real one.
        self.clock: Callable[[], Any] | None = None
        self._starting = False  # `start_soon` is importing
        self._stopped = False
        notifications.actionInvoked.connect(self._action)
        notifications.clicked.connect(self._clicked)

    # ---- life ------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self.runner is not None

    def has_tasks(self) -> bool:
        """Whether the home has a task book (written with the first task)."""
        from app.core.paths import TASKS_FILE

        return (self.runtime.home / TASKS_FILE).exists()

    def start_soon(self) -> None:
        """`start` once the runner's modules (the agent, the rules, the task book: 80 ms
        and more) were imported on a worker thread, not on the GUI thread."""
        if self.started or self._starting:
            return
        self._starting = True
        run_off_gui(lambda: _import_task_modules(), lambda _: self._imported(), self._imported)

    def _imported(self, failure: BaseException | None = None) -> None:
        self._starting = False
        if failure is not None:
            log.warning("the task runner could not be loaded: %r", failure)
        elif not self._stopped:
            self.start()

    def start(self) -> None:
        """On the running loop: build the runner, and run the schedule if this process may."""
        if self.started:
            return
        from app.core.task_approvals import UnattendedApprovals
        from app.core.task_runner import TaskRunner
        from app.core.task_scheduler import ScheduleLock, TaskScheduler

        self.approvals = UnattendedApprovals(
            self._show_question,
            self._withdraw_question,
            on_review=self.review,
            on_change=self._questions_changed,
        )
        self.runner = TaskRunner(
            self.runtime, ask=self.approvals.ask, announce=self._finished, clock=self.clock
        )
        self.lock = ScheduleLock(self.runtime.home)
        if self.lock.acquire():
            self.scheduler = TaskScheduler(self.runner, on_change=self.changed.emit)
            self.scheduler.start()
        else:
            log.info("another Deskhand process runs the scheduled tasks of this home")

    @property
    def runs_schedule(self) -> bool:
        return self.scheduler is not None

    def poke(self) -> None:
        """Tasks changed (edited, paused, added): plan again now (starting the host if
        this is the first task)."""
        if not self.started and self.has_tasks():
            self.start_soon()
        if self.scheduler is not None:
            self.scheduler.poke()
        self.changed.emit()

    def stop(self) -> None:
        self._stopped = True
        if self.scheduler is not None:
            self.scheduler.stop()
        for run in list(self._runs):
            run.cancel()
        for dialog in list(self._dialogs.values()):
            dialog.close()
        if self.lock is not None:
            self.lock.release()

    # ---- running by hand -------------------------------------------------------------------

    def run_now(self, task_id: str) -> str | None:
        """Starts a run now; None, or why it cannot start (shown to the user)."""
        from app.core.tasks import TaskError

        if self.runner is None:
            self.start()
        if self.runner is None:
            return "Tasks are not ready yet; try again in a moment."
        try:
            ticket = self.runner.claim(task_id)
        except TaskError as exc:
            return str(exc)
        run = asyncio.ensure_future(self.runner.execute(ticket))
        self._runs.add(run)
        run.add_done_callback(self._run_ended)
        self.changed.emit()
        return None

    def _run_ended(self, run: asyncio.Task[Any]) -> None:
        self._runs.discard(run)
        self.changed.emit()

    # ---- what the user is told ---------------------------------------------------------------

    def _finished(self, outcome: RunOutcome) -> None:
        from app.core.notifications import Action
        from app.core.task_runner import finished_notice

        title, message = finished_notice(outcome)
        task_id = outcome.task.id
        if outcome.conversation_id:
            self._conversations[task_id] = outcome.conversation_id
        self.notifications.show(
            title, message, key=TASK_KEY + task_id, actions=[Action(OPEN, "Open")]
        )
        self.changed.emit()

    def _show_question(
        self,
        title: str,
        message: str,
        actions: list[Any],
        on_action: Callable[[str], None],
        on_click: Callable[[], None],
    ) -> str:
        key = QUESTION_KEY + uuid.uuid4().hex
        self._questions[key] = (on_action, on_click)
        self.notifications.show(title, message, key=key, actions=actions)
        return key

    def _withdraw_question(self, key: str) -> None:
        self._questions.pop(key, None)
        self.notifications.withdraw(key)
        found = next(
            (k for k, d in self._dialogs.items() if d.property("questionKey") == key), None
        )
        if found is not None:  # answered elsewhere or out of time: the dialog goes too
            self._dialogs.pop(found).close()

    def _action(self, key: str, action: str) -> None:
        if key in self._questions:
            self._questions[key][0](action)
        elif key.startswith(TASK_KEY) and action == OPEN:
            self.open_task_conversation(key.removeprefix(TASK_KEY))

    def _clicked(self, key: str) -> None:
        if key in self._questions:
            self._questions[key][1]()
        elif key.startswith(TASK_KEY):
            self.open_task_conversation(key.removeprefix(TASK_KEY))

    def open_task_conversation(self, task_id: str) -> bool:
        conversation_id = self._conversations.get(task_id)
        if conversation_id is None:
            from app.core.tasks import TaskError

            try:
                conversation_id = self.runtime.tasks.get(task_id).conversation_id
            except TaskError:
                return False
        return bool(conversation_id) and self.open_conversation(conversation_id)

    # ---- the full question -----------------------------------------------------------------

    def review(self, pending: Pending) -> None:
        """Opens the task's conversation and the whole question over it, with Allow once /
        Deny (the answer goes to the waiting run)."""
        from app.ui.task_question import TaskQuestionDialog

        self.open_task_conversation(pending.task_id)
        key = pending.key  # Deskhand's own: two runs' models may use the same call id
        dialog = self._dialogs.get(key)
        if dialog is None:
            dialog = TaskQuestionDialog(pending, self.window)
            dialog.setProperty("questionKey", pending.handle or "")
            dialog.answered.connect(lambda decision: self._answer(key, decision))
            dialog.finished.connect(lambda _code: self._dialogs.pop(key, None))
            self._dialogs[key] = dialog
            dialog.open()
        dialog.raise_()
        dialog.activateWindow()

    def _questions_changed(self) -> None:
        from app.core.tasks import TaskError

        waiting: dict[str, tuple[str, str]] = {}
        for pending in self.approvals.pending() if self.approvals is not None else []:
            conversation_id = self._conversations.get(pending.task_id)
            if conversation_id is None:
                try:
                    conversation_id = self.runtime.tasks.get(pending.task_id).conversation_id
                except TaskError:
                    continue
            what = pending.request.summary or pending.request.tool
            text = f"“{pending.task_title}” waits for your answer: {what}"
            if conversation_id:
                waiting.setdefault(conversation_id, (pending.key, text))
        self.questionsChanged.emit(waiting)
        self.changed.emit()

    def review_key(self, key: str) -> None:
        pending = self.approvals.get(key) if self.approvals is not None else None
        if pending is not None:
            self.review(pending)

    def _answer(self, key: str, decision: Any) -> None:
        if self.approvals is not None:
            self.approvals.answer(key, decision)


def _import_task_modules() -> None:
    import app.core.task_approvals
    import app.core.task_runner
    import app.core.task_scheduler  # noqa: F401
