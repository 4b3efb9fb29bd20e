"""Reminders and the scheduler with an injectable clock: due, late, DST, catch-up, snooze."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from app.core.reminders import Delivery, ReminderBook, ReminderError
from app.core.scheduler import Scheduler
from app.core.store import Store
from tests.clock import Clock

BERLIN = "Europe/Berlin"


@pytest.fixture
def clock() -> Clock:
    return Clock(datetime(2026, 3, 27, 8, 0, tzinfo=UTC))


@pytest.fixture
def book(tmp_path, clock):
    store = Store(tmp_path / "deskhand.db")
    yield ReminderBook(store, clock)
    store.close()


def test_one_shot_fires_once_when_due(book, clock):
    r = book.create_once("call the bank", datetime(2026, 3, 27, 17, 0, tzinfo=ZoneInfo(BERLIN)))
    assert r.due_at == datetime(2026, 3, 27, 16, 0, tzinfo=UTC)  # CET = UTC+1 before the switch
    assert book.collect_due() == []
    clock.now = r.due_at
    [delivery] = book.collect_due()
    assert delivery.reminder.message == "call the bank" and not delivery.late
    assert delivery.reminder.status == "fired"
    clock.advance(minutes=5)
    assert book.collect_due() == []


def test_recurring_keeps_local_time_across_dst(book, clock):
    r = book.create_recurring("standup", "15 9 * * 1-5", BERLIN)  # Friday 27 March 2026
    assert r.local_due().strftime("%a %H:%M") == "Fri 09:15"
    assert r.due_at.hour == 8  # UTC+1
    clock.now = r.due_at
    [first] = book.collect_due()
    nxt = first.reminder
    assert nxt.local_due().strftime("%a %d %H:%M") == "Mon 30 09:15"  # after the DST switch
    assert nxt.due_at.hour == 7  # UTC+2 now
    assert nxt.fired_count == 1 and nxt.status == "scheduled"


def test_a_sleeping_machine_gets_one_late_coalesced_delivery(book, clock):
    r = book.create_recurring("drink water", "0 * * * *", "UTC")  # hourly
    clock.now = r.due_at + timedelta(hours=5, minutes=10)  # asleep for five hours
    deliveries = book.collect_due()
    assert len(deliveries) == 1
    [d] = deliveries
    assert d.late and d.missed == 5 and d.due_at == r.due_at
    assert d.reminder.due_at == r.due_at + timedelta(hours=6)  # next one in the future
    assert book.collect_due() == []


def test_restart_catch_up_fires_once(tmp_path, clock):
    path = tmp_path / "deskhand.db"
    with Store(path) as store:
        ReminderBook(store, clock).create_once(
            "was due while closed", clock.now + timedelta(minutes=30)
        )
    clock.advance(hours=3)  # Deskhand was not running
    with Store(path) as store:
        [d] = ReminderBook(store, clock).collect_due()
        assert d.late and d.reminder.message == "was due while closed"
    with Store(path) as store:
        assert ReminderBook(store, clock).collect_due() == []


def test_clock_jumping_back_does_not_refire(book, clock):
    r = book.create_once("once", clock.now + timedelta(minutes=1))
    clock.now = r.due_at
    assert len(book.collect_due()) == 1
    clock.advance(hours=-2)
    clock.advance(hours=4)
    assert book.collect_due() == []


def test_cancel_snooze_done(book, clock):
    r = book.create_once("tea", clock.now + timedelta(minutes=10))
    book.cancel(r.id)
    clock.advance(minutes=11)
    assert book.collect_due() == []
    s = book.create_once("stretch", clock.now + timedelta(minutes=1))
    clock.advance(minutes=1)
    [d] = book.collect_due()
    snoozed = book.snooze(d.reminder.id, 15)
    assert snoozed.status == "scheduled" and snoozed.due_at == clock.now + timedelta(minutes=15)
    clock.advance(minutes=15)
    assert [x.reminder.id for x in book.collect_due()] == [s.id]
    assert book.done(s.id).status == "done"
    daily = book.create_recurring("journal", "0 21 * * *", "UTC")
    copy = book.snooze(daily.id, 5)
    assert copy.id != daily.id and copy.source == "snooze" and copy.source_ref == daily.id
    assert book.get(daily.id).due_at == daily.due_at


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda b, c: b.create_once("x", c.now - timedelta(hours=1)), "in the past"),
        (lambda b, c: b.create_recurring("x", "61 * * * *", "UTC"), "invalid cron"),
        (lambda b, c: b.create_recurring("x", "0 9 * * *", "Mars/Olympus"), "unknown time zone"),
        (lambda b, c: b.create_once("  ", c.now + timedelta(hours=1)), "needs a message"),
        (lambda b, c: b.snooze("nope", 5), "no reminder"),
    ],
)
def test_bad_input_is_refused_clearly(book, clock, call, message):
    with pytest.raises(ReminderError, match=message):
        call(book, clock)


def test_scheduler_delivers_and_replans_when_poked(book, clock):
    delivered: list[Delivery] = []
    both_delivered = threading.Event()

    def deliver(delivery: Delivery) -> None:
        delivered.append(delivery)
        if len(delivered) == 2:
            both_delivered.set()

    scheduler = Scheduler(book, deliver, max_sleep=30)
    assert scheduler.seconds_until_next() == 30
    r = book.create_once("soon", clock.now + timedelta(seconds=12))
    assert scheduler.seconds_until_next() == 12
    clock.advance(seconds=12)
    assert [d.reminder.id for d in scheduler.tick()] == [r.id]
    assert [d.reminder.id for d in delivered] == [r.id]

    async def run_briefly():
        scheduler.start()
        book.create_once("now", clock.now)
        scheduler.poke()
        assert await asyncio.to_thread(both_delivered.wait, 30)  # 30 s bounds a hang only
        scheduler.stop()

    asyncio.run(run_briefly())
    assert [d.reminder.message for d in delivered] == ["soon", "now"]


def test_a_failing_notification_does_not_block_others(book, clock):
    book.create_once("a", clock.now)
    book.create_once("b", clock.now)
    shown: list[str] = []

    def deliver(d: Delivery) -> None:
        if d.reminder.message == "a":
            raise RuntimeError("tray gone")
        shown.append(d.reminder.message)

    Scheduler(book, deliver).tick()
    assert shown == ["b"]


def test_ask_creates_a_persisted_reminder_at_the_right_time(llm, tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.fakellm import text, tool_calls

    repo = Path(__file__).resolve().parents[1]
    home = tmp_path / "home"
    home.mkdir()
    llm.add(tool_calls(("r1", "reminders_create", {"message": "stretch", "in_minutes": 2})))
    llm.add(text("I'll remind you in 2 minutes."))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(PYTHONPATH=str(repo), PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    before = datetime.now(UTC)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "--home",
            str(home),
            "ask",
            "remind me in 2 minutes to stretch",
            "--base-url",
            llm.openai_base_url,
            "--model",
            "m",
            "--json",
            "--yes",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=repo,
    )
    after = datetime.now(UTC)
    assert proc.returncode == 0, proc.stderr
    result = next(json.loads(x) for x in proc.stdout.splitlines() if '"tool_result"' in x)
    assert result["ok"], result
    system = llm.requests[0].body["messages"][0]["content"]
    assert "Now: " in system and "reminders" in system
    with Store(home / "deskhand.db") as store:
        [reminder] = ReminderBook(store).list()
    assert reminder.message == "stretch"
    assert before + timedelta(minutes=2) <= reminder.due_at <= after + timedelta(minutes=2)
