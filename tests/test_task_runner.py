"""Scheduled runs end to end (§5.14): a scripted model over real HTTP, the one pipeline,
real files, and a real freedesktop notification server on a private D-Bus session. Time is
the scheduler's clock, moved by the test; nothing sleeps."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from app.core.approval import Decision
from app.core.notifications import ALLOW_ONCE, DENY, REVIEW, Action, Notifier
from app.core.rules import Rule, RuleDecision, Scope
from app.core.runtime import Runtime
from app.core.task_approvals import UnattendedApprovals
from app.core.task_runner import RunOutcome, TaskRunner, finished_notice
from app.core.task_scheduler import ScheduleLock, TaskScheduler
from app.core.tasks import Budget, Schedule, TaskBusy, parse_allow
from tests.clock import Clock as SharedClock
from tests.fakellm import ScriptedLLM, text, tool_calls
from tests.fixtures_notify import NotificationServer
from tests.fixtures_qt import wait_until

START = datetime(2026, 11, 24, 7, 0, tzinfo=UTC)
WAIT = 20.0


class Clock(SharedClock):
    def __init__(self, now: datetime = START) -> None:
        super().__init__(now)


@pytest.fixture
def world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM
) -> Iterator[dict[str, Any]]:
    user = tmp_path / "user"
    work = user / "work"
    work.mkdir(parents=True)
    home = tmp_path / "deskhand-home"
    home.mkdir()
    settings = {
        "files": {"allowed_roots": [str(work)], "folders_chosen": True},
        "providers": [
            {
                "id": "local",
                "kind": "openai",
                "label": "scripted",
                "base_url": llm.openai_base_url,
                "model": "scripted",
            }
        ],
        "active_provider": "local",
    }
    (home / "settings.json").write_text(json.dumps(settings))
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.chdir(work)
    made: dict[str, Any] = {"home": home, "work": work}
    yield made
    for runtime in made.get("runtimes", []):
        runtime.close()


SENT: list[tuple[Notifier, str]] = []


@pytest.fixture(autouse=True)
def record_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every notification sent in this process, so `press` can wait until it is shown."""
    notify = Notifier.notify
    SENT.clear()

    def recorded(self: Notifier, *args: Any, **kwargs: Any) -> str:
        notification_id = notify(self, *args, **kwargs)
        SENT.append((self, notification_id))
        return notification_id

    monkeypatch.setattr(Notifier, "notify", recorded)


def press(server: NotificationServer, shown: Any, key: str) -> None:
    """A user's click. A button answers once the notifier knows the server's id for it (a
    person never clicks faster); the test saw it on the server, so wait for that first."""
    sender, notification_id = SENT[-1]
    assert sender.wait_shown(notification_id, WAIT)
    server.press(shown.id, key)


@pytest.fixture
def notifier(server: NotificationServer) -> Iterator[Notifier]:
    notifier = Notifier()
    try:
        yield notifier
    finally:
        notifier.close()


def buttons(shown: Any) -> list[str]:
    """The buttons' keys ("default" is a click on the body, not a button)."""
    return [key for key in shown.actions[::2] if key != "default"]


def runtime_for(world: dict[str, Any]) -> Runtime:
    runtime = Runtime(world["home"])
    world.setdefault("runtimes", []).append(runtime)
    return runtime


def write_call(path: Path, content: str = "report") -> Any:
    return tool_calls(("w1", "fs_write_file", {"path": str(path), "content": content}))


def announcer(notifier: Notifier | None, told: list[RunOutcome]) -> Callable[[RunOutcome], None]:
    def announce(outcome: RunOutcome) -> None:
        told.append(outcome)
        if notifier is not None:
            title, message = finished_notice(outcome)
            notifier.notify(title, message, [Action("open", "Open")], lambda _key: None)

    return announce


def add_task(
    runtime: Runtime,
    *,
    at: datetime | None = None,
    cron: str | None = None,
    allow: tuple[str, ...] = (),
    budget: Budget | None = None,
    now: datetime = START,
):
    schedule = (
        Schedule.recurring(cron, "Europe/Paris") if cron else Schedule.once(at, "Europe/Paris")
    )
    return runtime.tasks.add(
        "Nightly report",
        "Write the report",
        schedule,
        now=now,
        profile=[parse_allow(line) for line in allow],
        budget=budget,
    )


def test_a_task_runs_at_its_time_with_no_window_and_says_so(world, llm, server, notifier):
    """Headless at the planned time; the profile lets the write run unasked; the answer
    lands in the task's conversation and as a notification with its first lines."""
    runtime, clock, told = runtime_for(world), Clock(), []
    report = world["work"] / "report.txt"
    task = add_task(
        runtime, at=START + timedelta(hours=1), allow=(f"fs_write_file,folder={world['work']}",)
    )
    llm.add(write_call(report), text("Report written.\nAll 3 builds passed.\nNothing else."))
    runner = TaskRunner(runtime, announce=announcer(notifier, told), clock=clock)

    async def scenario() -> None:
        scheduler = TaskScheduler(runner)
        assert scheduler.tick() == []  # not yet
        assert scheduler.seconds_until_next() == 30.0  # bounded sleep, re-reads the clock
        clock.advance(hours=1)
        [run] = scheduler.tick()
        assert scheduler.tick() == []  # claimed: never a second run of the same task
        await run

    asyncio.run(scenario())
    assert report.read_text() == "report"
    [outcome] = told
    assert outcome.ok and outcome.summary.startswith("Report written.\nAll 3 builds passed.")
    stored = runtime.tasks.get(task.id)
    assert stored.next_due is None and stored.running is None  # a one-shot is over
    assert stored.last_run is not None and stored.last_run.ok and not stored.last_run.late
    assert stored.conversation_id == outcome.conversation_id
    messages = runtime.store.load_messages(outcome.conversation_id)
    assert "Write the report" in messages[0].content and "Nightly report" in messages[0].content
    assert "Report written." in messages[-1].content
    shown = server.next_shown()
    assert shown.summary == "Task done: Nightly report"
    assert shown.body.startswith("Report written.\nAll 3 builds passed.")
    assert "open" in shown.actions


def test_a_call_outside_the_profile_is_denied_when_nobody_can_be_asked(world, llm):
    runtime, clock, told = runtime_for(world), Clock(), []
    report = world["work"] / "report.txt"
    task = add_task(runtime, at=START, allow=("fs_read_file",))
    llm.add(write_call(report), text("I could not write it."))
    runner = TaskRunner(runtime, announce=announcer(None, told), clock=clock)
    asyncio.run(runner.run_now(task.id))
    assert not report.exists()
    [outcome] = told
    assert outcome.ok and "could not write" in outcome.answer
    tool_result = json.dumps(llm.requests[-1].body["messages"][-1])
    assert "declined this call" in tool_result


def test_profile_rules_count_only_in_the_tasks_runs(world, llm, capsys):
    """The same call from an ordinary headless `ask` is not covered by the task's rules."""
    from app.cli import main

    runtime = runtime_for(world)
    report = world["work"] / "report.txt"
    task = add_task(runtime, at=START, allow=(f"fs_write_file,folder={world['work']}",))
    [rule] = runtime.rules.for_task(task.id)
    assert rule.scope is Scope.TASK and rule.decision is RuleDecision.ALLOW
    llm.add(write_call(report), text("done"))
    code = main(["--home", str(world["home"]), "ask", "write", "--json"])
    assert code in (0, 3)
    assert not report.exists()
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    [result] = [e for e in events if e["type"] == "tool_result"]
    assert not result["ok"]


def test_a_deny_rule_still_wins_over_the_profile(world, llm):
    runtime, told = runtime_for(world), []
    report = world["work"] / "report.txt"
    task = add_task(runtime, at=START, allow=("fs_write_file",))
    runtime.rules.add(Rule(tool="fs_write_file", decision=RuleDecision.DENY))
    llm.add(write_call(report), text("blocked"))
    asyncio.run(TaskRunner(runtime, announce=announcer(None, told), clock=Clock()).run_now(task.id))
    assert not report.exists()


def test_removing_the_task_removes_its_rules(world):
    runtime = runtime_for(world)
    task = add_task(runtime, at=START + timedelta(hours=1), allow=("fs_read_file", "docker_*"))
    assert len(runtime.rules.for_task(task.id)) == 2
    runtime.tasks.remove(task.id)
    assert runtime.rules.for_task(task.id) == []


def test_an_approval_answered_through_the_notification(world, llm, server, notifier):
    runtime, clock, told = runtime_for(world), Clock(), []
    report = world["work"] / "report.txt"
    task = add_task(runtime, at=START)
    approvals = UnattendedApprovals(notifier.notify, notifier.withdraw)
    llm.add(write_call(report), text("Written after your OK."))
    runner = TaskRunner(runtime, ask=approvals.ask, announce=announcer(None, told), clock=clock)

    async def scenario() -> None:
        run = asyncio.ensure_future(runner.run_now(task.id))
        shown = await asyncio.to_thread(server.next_shown)
        assert shown.summary == "Task “Nightly report” asks"
        assert str(report) in shown.body  # the full arguments: what Allow once allows
        assert buttons(shown) == [ALLOW_ONCE, DENY]
        [pending] = approvals.pending()
        assert pending.task_id == task.id and pending.request.tool == "fs_write_file"
        press(server, shown, ALLOW_ONCE)
        await run

    asyncio.run(scenario())
    assert report.read_text() == "report"
    assert told[0].ok and approvals.pending() == []
    assert runtime.rules.for_task(task.id) == []  # an answer while away makes no rule


def test_an_unanswered_approval_is_denied_at_the_budget(world, llm, server, notifier):
    runtime, clock, told = runtime_for(world), Clock(), []
    report = world["work"] / "report.txt"
    add_task(runtime, at=START, budget=Budget(max_seconds=600))
    approvals = UnattendedApprovals(notifier.notify, notifier.withdraw)
    llm.add(write_call(report), text("Nobody answered."))
    runner = TaskRunner(runtime, ask=approvals.ask, announce=announcer(None, told), clock=clock)
    scheduler = TaskScheduler(runner)

    async def scenario() -> None:
        [run] = scheduler.tick()
        shown = await asyncio.to_thread(server.next_shown)
        assert "Denied unless you answer within 10 min." in shown.body
        clock.advance(seconds=599)
        scheduler.poke()
        await asyncio.sleep(0)
        assert not run.done() and len(approvals.pending()) == 1  # still within the budget
        clock.advance(seconds=2)
        scheduler.poke()  # the clock moved past the budget: the question is denied
        await run
        closed = await asyncio.to_thread(server.interface.closed.get, True, WAIT)
        assert closed == shown.id  # the notification is withdrawn

    asyncio.run(scenario())
    assert not report.exists()
    [outcome] = told
    assert not outcome.ok and "time budget of 10 minutes" in outcome.answer
    assert approvals.pending() == []


def test_a_button_that_was_not_offered_allows_nothing(world, llm, server, notifier):
    """Long arguments: only Review… / Deny are offered; a forged Allow once is ignored."""
    runtime, clock, told = runtime_for(world), Clock(), []
    report = world["work"] / "report.txt"
    task = add_task(runtime, at=START)
    reviewed: list[str] = []
    approvals = UnattendedApprovals(
        notifier.notify, notifier.withdraw, on_review=lambda p: reviewed.append(p.request.tool)
    )
    llm.add(write_call(report, "x" * 2000), text("ok"))
    runner = TaskRunner(runtime, ask=approvals.ask, announce=announcer(None, told), clock=clock)

    async def scenario() -> None:
        run = asyncio.ensure_future(runner.run_now(task.id))
        shown = await asyncio.to_thread(server.next_shown)
        assert buttons(shown) == [REVIEW, DENY]
        assert "x" * 400 not in shown.body  # arguments that do not fit are not half shown
        [pending] = approvals.pending()
        # desktop-notifier drops a key it did not send; should one get through, it is
        # still checked against what this question offered
        approvals._on_action(pending.request.call_id, ALLOW_ONCE)
        await asyncio.sleep(0)
        assert approvals.pending() == [pending]  # still waiting: nothing was allowed
        assert not run.done()
        assert approvals.answer(pending.request.call_id, Decision.DENY)  # the window's answer
        await run

    asyncio.run(scenario())
    assert not report.exists()


def test_catch_up_after_a_restart_runs_once_late(world, llm):
    """Closed for five hourly runs: one run, marked late, the missed ones coalesced."""
    runtime, told = runtime_for(world), []
    task = add_task(runtime, cron="0 * * * *")
    first = task.next_due
    assert first is not None
    llm.add(text("Caught up."))
    later = Clock(first + timedelta(hours=4, minutes=30))
    restarted = runtime_for(world)  # a new process: the same files
    runner = TaskRunner(restarted, announce=announcer(None, told), clock=later)

    async def scenario() -> None:
        scheduler = TaskScheduler(runner)
        runs = scheduler.tick()
        assert len(runs) == 1
        await scheduler.idle()
        assert scheduler.tick() == []

    asyncio.run(scenario())
    [outcome] = told
    assert outcome.late and outcome.missed == 4
    assert "running late" in json.dumps(llm.requests[0].body["messages"])
    stored = restarted.tasks.get(task.id)
    assert stored.next_due == first + timedelta(hours=5)
    assert stored.last_run is not None and stored.last_run.late and stored.last_run.missed == 4


def test_a_run_never_overlaps_the_previous_run(world, llm):
    runtime = runtime_for(world)
    task = add_task(runtime, at=START)
    runner = TaskRunner(runtime, clock=Clock())
    runner.claim(task.id)
    with pytest.raises(TaskBusy):
        runner.claim(task.id)


def test_the_step_budget_ends_a_run(world, llm):
    runtime, told = runtime_for(world), []
    task = add_task(runtime, at=START, allow=("fs_list_dir",), budget=Budget(max_steps=2))
    listing = ("l", "fs_list_dir", {"path": str(world["work"])})
    llm.add(tool_calls(listing), tool_calls(listing), tool_calls(listing))
    asyncio.run(TaskRunner(runtime, announce=announcer(None, told), clock=Clock()).run_now(task.id))
    [outcome] = told
    assert not outcome.ok and "Stopped after 2 steps" in outcome.answer
    assert runtime.tasks.get(task.id).last_run.summary.startswith("Stopped after 2 steps")


def test_an_unreachable_model_is_a_failed_run_not_a_stuck_one(world):
    runtime, told = runtime_for(world), []
    settings = json.loads((world["home"] / "settings.json").read_text())
    settings["providers"][0]["base_url"] = "http://127.0.0.1:9/v1"
    (world["home"] / "settings.json").write_text(json.dumps(settings))
    runtime = runtime_for(world)
    task = add_task(runtime, at=START)
    asyncio.run(TaskRunner(runtime, announce=announcer(None, told), clock=Clock()).run_now(task.id))
    [outcome] = told
    assert not outcome.ok and outcome.answer.startswith("The run failed")
    assert runtime.tasks.get(task.id).running is None


def test_only_one_process_runs_the_schedule(tmp_path):
    first, second = ScheduleLock(tmp_path), ScheduleLock(tmp_path)
    assert first.acquire()
    assert not second.acquire()
    first.release()
    assert second.acquire()
    second.release()


# ---- the command line ----------------------------------------------------------------------


def test_cli_run_asks_through_a_notification_when_no_terminal(world, llm, server, capsys):
    from app.cli import main

    home, report = world["home"], world["work"] / "report.txt"
    llm.add(write_call(report), text("Written.\nSecond line."))
    code = main(
        [
            "--home",
            str(home),
            "tasks",
            "add",
            "--title",
            "Report",
            "--prompt",
            "Write it",
            "--cron",
            "0 8 * * *",
            "--allow",
            "fs_read_file",
        ]
    )
    assert code == 0
    [task] = json.loads(_out(main, capsys, "--home", str(home), "tasks", "list", "--json"))
    result: list[int] = []
    worker = threading.Thread(
        target=lambda: result.append(main(["--home", str(home), "tasks", "run", task["id"]]))
    )
    worker.start()
    shown = server.next_shown()
    assert shown.summary == "Task “Report” asks" and buttons(shown) == [ALLOW_ONCE, DENY]
    press(server, shown, ALLOW_ONCE)
    worker.join(WAIT)
    assert result == [0]
    assert report.read_text() == "report"
    assert "Written.\nSecond line." in capsys.readouterr().out
    done = server.next_shown()
    assert done.summary == "Task done: Report"


def _out(main: Any, capsys: Any, *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return str(capsys.readouterr().out)


def test_serve_runs_tasks_and_reminders_with_no_window(world, llm, server, tmp_path):
    """`deskhand tasks serve` — the background process without the window — runs a task at
    its (real) time and shows a due reminder with Snooze / Done buttons that work."""
    import os
    import signal
    import subprocess
    import sys

    home, report = world["home"], world["work"] / "report.txt"
    runtime = runtime_for(world)
    now = datetime.now(UTC)
    runtime.tasks.add(
        "Soon",
        "Write the report",
        Schedule.once(now + timedelta(seconds=1)),
        now=now,
        profile=[parse_allow(f"fs_write_file,folder={world['work']}")],
    )
    reminder = runtime.reminders.create_once("Stretch", now)
    llm.add(write_call(report), text("The report is written."))
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "--home", str(home), "tasks", "serve"],
        cwd=Path(__file__).resolve().parents[1],
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        bufsize=0,  # unbuffered: a line read is never left waiting in a buffer select misses
    )
    try:
        seen = {shown.summary: shown for shown in (server.next_shown(), server.next_shown())}
        assert set(seen) == {"Reminder", "Task done: Soon"}
        assert buttons(seen["Reminder"]) == ["snooze", "done"]
        assert seen["Task done: Soon"].body == "The report is written."
        assert report.read_text() == "report"
        shown_line = _line_with(proc, "Reminder shown with Snooze and Done")
        assert shown_line.startswith("Reminder shown with Snooze and Done: Stretch"), shown_line
        server.press(seen["Reminder"].id, "done")
        done_line = _line_with(proc, "Reminder done")
        assert done_line.startswith("Reminder done: Stretch"), done_line
        assert runtime.reminders.get(reminder.id).status == "done"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 0, err.decode()
    assert runtime.tasks.list()[0].last_run.ok  # type: ignore[union-attr]


def _line_with(proc: Any, wanted: str) -> str:
    """The first line of `proc`'s stderr containing `wanted` (waits at most WAIT each), or
    everything it printed meanwhile (for the failure message)."""
    import selectors

    seen: list[str] = []
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stderr, selectors.EVENT_READ)
        while sel.select(WAIT):
            line = proc.stderr.readline().decode()
            if not line:
                break
            if wanted in line:
                return line
            seen.append(line)
    return "".join(seen)


def test_two_processes_never_lose_each_others_rules(tmp_path):
    """The window and `tasks serve` each hold the rules file: a change by one is seen by the
    other, and neither write drops the other's rule."""
    from app.core.rules import RuleBook, Subject

    window, serve = RuleBook(tmp_path / "rules.json"), RuleBook(tmp_path / "rules.json")
    deny = window.add(Rule(tool="docker_*", decision=RuleDecision.DENY))
    assert serve.evaluate("docker_prune", "builtin", Subject()).decision is RuleDecision.DENY
    serve.replace_task_rules("t1", [Rule(tool="fs_read_file", decision=RuleDecision.ALLOW)])
    assert {r.id for r in window.rules()} >= {deny.id}
    assert [r.tool for r in window.for_task("t1")] == ["fs_read_file"]
    window.remove(deny.id)
    assert serve.evaluate("docker_prune", "builtin", Subject()).decision is None


def test_quitting_during_a_run_records_it_as_stopped(world, llm):
    from tests.fakellm import hang

    runtime = runtime_for(world)
    task = add_task(runtime, at=START)
    llm.add(hang("Half an ans"))
    runner = TaskRunner(runtime, clock=Clock())

    async def scenario() -> None:
        run = asyncio.ensure_future(runner.run_now(task.id))
        await wait_until(lambda: llm.requests, what="the model to be asked (the run under way)")
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(scenario())
    stored = runtime.tasks.get(task.id)
    assert stored.running is None
    assert stored.last_run is not None and not stored.last_run.ok
    assert stored.last_run.summary.startswith("Stopped: Deskhand quit during the run.")


def test_a_stored_secret_never_reaches_the_history_or_the_notification(world, llm):
    runtime, told = runtime_for(world), []
    secret = "sk-live-7Qz3VbN9xK2mPw8R"
    runtime.tripwire.remember({secret})  # as if read from the keyring
    task = add_task(runtime, at=START)
    llm.add(text(f"Done. The key you gave me is {secret}."))
    asyncio.run(TaskRunner(runtime, announce=announcer(None, told), clock=Clock()).run_now(task.id))
    [outcome] = told
    assert secret not in outcome.answer and secret not in finished_notice(outcome)[1]
    assert secret not in runtime.tasks.get(task.id).last_run.summary
    assert secret not in (world["home"] / "tasks.json").read_text()


def test_no_known_secret_reaches_a_notification(world, llm, server, notifier, tmp_path):
    """The tripwire's notifications exit: a run's answer streams every form of two known
    secrets (raw, base64, Basic, URL-encoded) in 3-character chunks; what the real
    notification server shows of it — and the task's history — shows none readable."""
    from tests.test_tripwire_exits import assert_unreadable, payload
    from tools.redact import TRIPWIRE

    values = [f"sk-{uuid.uuid4().hex}/+{uuid.uuid4().hex[:6]}", f"pw {uuid.uuid4().hex[:20]}&="]
    TRIPWIRE.remember(values)
    runtime, clock, told = runtime_for(world), Clock(), []
    task = add_task(runtime, at=START)
    llm.add(text(payload(values), chunk_size=3))
    runner = TaskRunner(runtime, announce=announcer(notifier, told), clock=clock)

    async def scenario() -> None:
        await runner.run_now(task.id)

    asyncio.run(scenario())
    shown = server.next_shown()
    assert shown.summary.startswith("Task done")
    [outcome] = told
    history = runtime.tasks.get(task.id).history[-1]
    assert_unreadable(
        values,
        notification=shown.summary + "\n" + shown.body,
        announced=outcome.summary,
        history=history.model_dump_json(),
    )
    assert "[redacted]" in shown.body
