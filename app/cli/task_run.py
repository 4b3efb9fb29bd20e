"""Running tasks without the window: `deskhand tasks run ID` and `deskhand tasks serve`.

`run` asks on the terminal when someone is there, else through notifications when a
notification server answers, else refuses what the profile does not allow. `serve` is the
background process for desktops where the window is not kept open: it holds the schedule
(one process per home), runs due tasks and shows due reminders, until stopped.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.core.approval import ApprovalRequest, Decision
    from app.core.reminders import Delivery
    from app.core.runtime import Runtime
    from app.core.task_runner import Asker, Deadline, RunOutcome
    from app.core.tasks import Task

log = logging.getLogger(__name__)

SNOOZE_MINUTES = 10
MCP_WAIT = 1.5
SHOWN_WAIT = 10.0


def run_task_now(runtime: Runtime, task_id: str) -> tuple[bool, str]:
    """One run by hand, headless; (ok, answer)."""
    from app.core.task_runner import TaskRunner

    notifier = _notifier() if not _terminal() else None
    try:
        runner = TaskRunner(runtime, ask=_asker(notifier), announce=_announcer(notifier))
        runtime.start_mcp()
        runtime.wait_mcp(MCP_WAIT)
        outcome = asyncio.run(runner.run_now(task_id))
        return outcome.ok, outcome.answer
    finally:
        if notifier is not None:
            notifier.close()


def serve(runtime: Runtime) -> int:
    """Runs the schedule (tasks and reminders) until SIGINT/SIGTERM."""
    from app.core.task_scheduler import ScheduleLock

    lock = ScheduleLock(runtime.home)
    if not lock.acquire():
        print(
            "deskhand tasks serve: another Deskhand process (the window, or another "
            "`tasks serve`) already runs the reminders and tasks of this home",
            file=sys.stderr,
        )
        return 1
    notifier = _notifier()
    try:
        if notifier is None:
            print(
                "deskhand tasks serve: no notification server answers; results are kept in "
                "each task's history and conversation, and questions outside a task's "
                "profile are refused",
                file=sys.stderr,
            )
        runtime.start_mcp()
        asyncio.run(_serve(runtime, notifier))
        return 0
    finally:
        lock.release()
        if notifier is not None:
            notifier.close()


async def _serve(runtime: Runtime, notifier: Any) -> None:
    from app.core.scheduler import Scheduler
    from app.core.task_runner import TaskRunner
    from app.core.task_scheduler import TaskScheduler

    runner = TaskRunner(runtime, ask=_asker(notifier), announce=_announcer(notifier))
    tasks = TaskScheduler(runner)
    reminders = Scheduler(runtime.reminders, _reminder_delivery(runtime, notifier))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    tasks.start()
    reminders.start()
    print("deskhand: running reminders and scheduled tasks; Ctrl+C stops", file=sys.stderr)
    await stop.wait()
    tasks.stop()
    reminders.stop()
    await tasks.idle()


# ---- who answers, who is told --------------------------------------------------------------


def _terminal() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


def _notifier() -> Any:
    """A notifier when a notification server answers, else None."""
    from app.core.notifications import Notifier

    notifier = Notifier()
    if notifier.available():
        return notifier
    notifier.close()
    return None


def _asker(notifier: Any) -> Asker | None:
    if _terminal():
        return _terminal_asker
    if notifier is None:
        return None
    from app.core.task_approvals import UnattendedApprovals

    return UnattendedApprovals(notifier.notify, notifier.withdraw).ask


async def _terminal_asker(task: Task, request: ApprovalRequest, deadline: Deadline) -> Decision:
    from app.cli.output import interactive_approver

    print(f"Task “{task.title}” asks:", file=sys.stderr)
    return await interactive_approver(request)


def _announcer(notifier: Any) -> Any:
    def announce(outcome: RunOutcome) -> None:
        from app.core.task_runner import finished_notice

        title, message = finished_notice(outcome)
        log.info("%s: %s", title, message.splitlines()[0] if message else "")
        if notifier is not None:
            notifier.notify(title, message, [], lambda _key: None)

    return announce


def _reminder_delivery(runtime: Runtime, notifier: Any) -> Any:
    """Due reminders as notifications with Snooze and Done buttons."""
    from app.core.notifications import Action
    from app.core.visible import visible

    def deliver(delivery: Delivery) -> None:
        reminder = delivery.reminder
        title = "Reminder (late)" if delivery.late else "Reminder"
        print(f"{title}: {visible(reminder.message)}", file=sys.stderr)
        if notifier is None:
            return

        def act(key: str) -> None:
            book = runtime.reminders
            if key == "done":
                book.done(reminder.id)
                print(f"Reminder done: {visible(reminder.message)}", file=sys.stderr)
            elif key == "snooze":
                book.snooze(reminder.id, SNOOZE_MINUTES)
                print(
                    f"Reminder snoozed {SNOOZE_MINUTES} min: {visible(reminder.message)}",
                    file=sys.stderr,
                )

        actions = [Action("snooze", f"Snooze {SNOOZE_MINUTES} min"), Action("done", "Done")]
        notification_id = notifier.notify(title, reminder.message, actions, act)

        def said_when_shown() -> None:  # its buttons answer from then on
            if notifier.wait_shown(notification_id, SHOWN_WAIT):
                print(
                    f"Reminder shown with Snooze and Done: {visible(reminder.message)}",
                    file=sys.stderr,
                )

        threading.Thread(target=said_when_shown, daemon=True).start()

    return deliver
