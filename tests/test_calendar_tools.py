"""Calendar tools through the real registry and runner: the local .ics calendar (read back
with the icalendar package) and CalDAV against a real Radicale server."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import icalendar
import pytest

from app.core.reminders import ReminderBook
from app.core.runtime import Runtime
from app.core.store import Store
from integrations import caldav as caldav_integration
from integrations.registry import SPECS
from integrations.spec import Account
from tools.registry import ToolRegistry
from tools.runner import ToolRunner, always_asks
from tools.spec import Operation, ToolContext, ToolResult

PARIS = ZoneInfo("Europe/Paris")
TOOLS = {
    "calendar_list_calendars": {Operation.READ},
    "calendar_list_events": {Operation.READ},
    "calendar_search_events": {Operation.READ},
    "calendar_create_event": {Operation.CREATE},
    "calendar_update_event": {Operation.UPDATE},
    "calendar_delete_event": {Operation.DELETE},
    "calendar_find_free_slots": {Operation.READ},
}


def next_monday(weeks_ahead: int = 1) -> date:
    """A Monday at least a week away (so alarms and reminders are in the future)."""
    today = datetime.now(PARIS).date() + timedelta(days=7 * weeks_ahead)
    return today + timedelta(days=(7 - today.weekday()) % 7)


def at(day: date, clock: str) -> str:
    return f"{day.isoformat()}T{clock}"


class Harness:
    """Runs tools the way the app does: validation, thread pool, tripwire, previews."""

    def __init__(self, runner: ToolRunner, ctx: ToolContext, book: ReminderBook) -> None:
        self.runner = runner
        self.ctx = ctx
        self.book = book

    def __call__(self, name: str, **args: Any) -> ToolResult:
        return asyncio.run(self.runner.run(name, args, self.ctx))

    def ok(self, name: str, **args: Any) -> ToolResult:
        result = self(name, **args)
        assert result.ok, result.error
        return result

    def preview(self, name: str, **args: Any) -> str | None:
        manifest, params = self.runner.validate(name, args)
        found = self.runner.classify(manifest, params, self.ctx, asks=always_asks)
        return asyncio.run(found).preview

    def calendar_reminders(self) -> list[Any]:
        return [r for r in self.book.list() if r.source == "calendar"]


# ---- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def local(tmp_path: Path) -> Any:
    """Nothing configured: no account directory at all, only a home and the reminder book."""
    home = tmp_path / "home"
    home.mkdir()
    store = Store(home / "deskhand.db")
    book = ReminderBook(store)
    runner = ToolRunner(ToolRegistry.default(None, entry_points=False))
    ctx = ToolContext(home=home, services={"reminders": book})
    yield Harness(runner, ctx, book)
    runner.shutdown()
    store.close()


@pytest.fixture
def runtime(home: Path, keyring_env: dict[str, str]) -> Any:
    """The app's runtime: accounts in SQLite, the CalDAV password in the real keyring."""
    rt = Runtime(home, entry_points=False)
    yield rt
    rt.close()


def harness_of(rt: Runtime) -> Harness:
    ctx = ToolContext(
        home=rt.home,
        accounts=rt.accounts,
        account_resolver=rt.resolve_account,
        integration="caldav",
        services={"reminders": rt.reminders},
    )
    return Harness(rt.runner, ctx, rt.reminders)


@pytest.fixture
def dav(runtime: Runtime, radicale_calendar: Any) -> Harness:
    """The Radicale account added (password to the keyring) and made active."""
    server = radicale_calendar.server
    runtime.accounts.add(
        "caldav",
        "Radicale",
        {"url": server.url, "username": server.user, "password": server.password},
        make_active=True,
    )
    return harness_of(runtime)


def server_events(radicale_calendar: Any) -> list[icalendar.Event]:
    """What another CalDAV client sees on the server."""
    with radicale_calendar.server.client() as client:
        cal = client.calendar(url=radicale_calendar.url)
        return [
            e for obj in cal.events() for e in icalendar.Calendar.from_ical(obj.data).walk("VEVENT")
        ]


# ---- the manifests --------------------------------------------------------------------------


def test_tools_are_declared_with_their_operations_and_integration():
    registry = ToolRegistry.default(None, entry_points=False)
    found = {m.name: m for m in registry.search(category="calendar")}
    assert {name: set(m.operations) for name, m in found.items()} == TOOLS
    for manifest in found.values():
        assert manifest.integration == "caldav"
        assert "caldav" not in manifest.requires  # the local calendar works without it
        assert registry.info(manifest.name).available
        assert "account" in manifest.json_schema()["properties"]
        assert (manifest.preview is not None) == (not manifest.read_only)
    assert SPECS["caldav"].secret_fields == ("password",)


# ---- the local calendar ---------------------------------------------------------------------


def test_local_event_round_trips_through_a_real_ics_file(local: Harness):
    monday = next_monday()
    created = local.ok(
        "calendar_create_event",
        title="Dentist",
        start=at(monday, "10:00"),
        duration_minutes=45,
        tz="Europe/Paris",
        location="Rue de Rivoli 1",
        description="Bring the card",
        attendees=["ann@example.com"],
        alarm_minutes=15,
    )
    uid = created.data["event"]["id"]
    path = local.ctx.home / "calendar" / "local.ics"
    parsed = icalendar.Calendar.from_ical(path.read_bytes())  # another tool reads it back
    (event,) = parsed.walk("VEVENT")
    assert str(event["UID"]) == uid and str(event["SUMMARY"]) == "Dentist"
    assert event["DTSTART"].params["TZID"] == "Europe/Paris"
    assert event["DTSTART"].dt == datetime(monday.year, monday.month, monday.day, 10, tzinfo=PARIS)
    assert event["DTEND"].dt - event["DTSTART"].dt == timedelta(minutes=45)
    assert str(event["LOCATION"]) == "Rue de Rivoli 1"
    assert str(event["ATTENDEE"]) == "mailto:ann@example.com"
    assert [str(z["TZID"]) for z in parsed.walk("VTIMEZONE")] == ["Europe/Paris"]
    (alarm,) = event.walk("VALARM")
    assert alarm["TRIGGER"].dt == timedelta(minutes=-15)
    assert not list(path.parent.glob("*.tmp"))  # the atomic write left no temp file

    (reminder,) = local.calendar_reminders()
    start_utc = event["DTSTART"].dt.astimezone(UTC)
    assert reminder.source_ref == uid and reminder.due_at == start_utc - timedelta(minutes=15)
    assert "Dentist" in reminder.message and created.data["reminder_id"] == reminder.id


def test_utc_events_are_written_in_utc(local: Harness):
    monday = next_monday()
    local.ok("calendar_create_event", title="Call", start=at(monday, "16:00Z"), tz="UTC")
    text = (local.ctx.home / "calendar" / "local.ics").read_text()
    assert f"DTSTART:{monday:%Y%m%d}T160000Z" in text


def test_times_are_shown_in_the_requested_zone(local: Harness):
    monday = next_monday()
    local.ok("calendar_create_event", title="Sync", start=at(monday, "10:00"), tz="Europe/Paris")
    listed = local.ok(
        "calendar_list_events", start=monday.isoformat(), end=at(monday, "23:00"), tz="Asia/Tokyo"
    )
    (event,) = listed.data["events"]
    assert (
        event["start"]
        == datetime(monday.year, monday.month, monday.day, 10, tzinfo=PARIS)
        .astimezone(ZoneInfo("Asia/Tokyo"))
        .isoformat()
    )
    assert (
        event["start"].endswith("+09:00") and "JST" in listed.content and "Sync" in listed.content
    )


def test_update_moves_the_event_and_its_reminder_delete_cancels_it(local: Harness):
    monday = next_monday()
    created = local.ok(
        "calendar_create_event",
        title="Review",
        start=at(monday, "14:00"),
        end=at(monday, "15:30"),
        tz="Europe/Paris",
        alarm_minutes=10,
    )
    uid = created.data["event"]["id"]
    (first,) = local.calendar_reminders()
    preview = local.preview(
        "calendar_update_event", event_id=uid, start=at(monday, "16:00"), tz="Europe/Paris"
    )
    assert preview is not None and "Review" in preview and "16:00" in preview
    updated = local.ok(
        "calendar_update_event",
        event_id=uid,
        title="Design review",
        start=at(monday, "16:00"),
        tz="Europe/Paris",
    )
    assert updated.data["event"]["end"].startswith(f"{monday.isoformat()}T17:30")  # kept 1h30
    assert local.book.get(first.id).status == "cancelled"
    (second,) = local.calendar_reminders()
    new_start = datetime(monday.year, monday.month, monday.day, 16, tzinfo=PARIS)
    assert second.due_at == new_start.astimezone(UTC) - timedelta(minutes=10)
    parsed = icalendar.Calendar.from_ical((local.ctx.home / "calendar" / "local.ics").read_bytes())
    (event,) = parsed.walk("VEVENT")
    assert str(event["SUMMARY"]) == "Design review" and int(event["SEQUENCE"]) == 1

    preview = local.preview("calendar_delete_event", event_id=uid)
    assert preview is not None and "Design review" in preview
    local.ok("calendar_delete_event", event_id=uid)
    assert local.calendar_reminders() == []
    parsed = icalendar.Calendar.from_ical((local.ctx.home / "calendar" / "local.ics").read_bytes())
    assert list(parsed.walk("VEVENT")) == []


def test_events_written_by_another_app_are_read_and_expanded(local: Harness):
    monday = next_monday()
    cal = icalendar.Calendar()
    cal.add("prodid", "-//Other app//EN")
    cal.add("version", "2.0")
    weekly = icalendar.Event()
    weekly.add("uid", "weekly-1@other")
    weekly.add("summary", "Team standup")
    weekly.add("dtstart", datetime.combine(monday, datetime.min.time(), PARIS) + timedelta(hours=9))
    weekly.add("duration", timedelta(minutes=15))
    weekly.add("rrule", {"freq": "weekly", "count": 10})
    holiday = icalendar.Event()
    holiday.add("uid", "holiday@other")
    holiday.add("summary", "Holiday")
    holiday.add("dtstart", monday + timedelta(days=2))
    holiday.add("dtend", monday + timedelta(days=3))
    cal.add_component(weekly)
    cal.add_component(holiday)
    path = local.ctx.home / "calendar" / "local.ics"
    path.parent.mkdir(parents=True)
    path.write_bytes(cal.to_ical())

    listed = local.ok(
        "calendar_list_events",
        start=monday.isoformat(),
        end=(monday + timedelta(days=21)).isoformat(),
        tz="Europe/Paris",
    )
    standups = [e for e in listed.data["events"] if e["title"] == "Team standup"]
    assert [e["start"][:16] for e in standups] == [
        f"{monday + timedelta(days=7 * i)}T09:00" for i in range(3)
    ]
    assert all(e["recurring"] for e in standups)
    (day_off,) = [e for e in listed.data["events"] if e["all_day"]]
    assert day_off["start"] == (monday + timedelta(days=2)).isoformat()

    found = local.ok("calendar_search_events", query="standup", tz="Europe/Paris")
    assert [e["id"] for e in found.data["events"]] == ["weekly-1@other"]  # listed once

    stopped = local.ok("calendar_update_event", event_id="weekly-1@other", recurrence="")
    assert "repeats: FREQ=WEEKLY;COUNT=10 → —" in stopped.content
    again = local.ok(
        "calendar_list_events",
        start=monday.isoformat(),
        end=(monday + timedelta(days=21)).isoformat(),
        tz="Europe/Paris",
    )
    assert [e["title"] for e in again.data["events"]] == ["Team standup", "Holiday"]


def test_concurrent_creates_all_land_in_the_file(local: Harness):
    monday = next_monday()

    async def create_many() -> list[ToolResult]:
        calls = [
            local.runner.run(
                "calendar_create_event",
                {"title": f"Slot {i}", "start": at(monday, f"{8 + i:02d}:00"), "tz": "UTC"},
                local.ctx,
            )
            for i in range(8)
        ]
        return await asyncio.gather(*calls)

    results = asyncio.run(create_many())
    assert all(r.ok for r in results), [r.error for r in results]
    parsed = icalendar.Calendar.from_ical((local.ctx.home / "calendar" / "local.ics").read_bytes())
    assert sorted(str(e["SUMMARY"]) for e in parsed.walk("VEVENT")) == [
        f"Slot {i}" for i in range(8)
    ]


def test_free_slots_in_the_local_calendar_respect_working_hours(local: Harness):
    monday = next_monday()
    for title, start, end in (
        ("A", "10:00", "11:00"),
        ("B", "10:30", "12:00"),
        ("C", "16:00", "17:30"),
    ):
        local.ok(
            "calendar_create_event",
            title=title,
            start=at(monday, start),
            end=at(monday, end),
            tz="Europe/Paris",
        )
    sunday = monday - timedelta(days=1)
    result = local.ok(
        "calendar_find_free_slots",
        start=sunday.isoformat(),
        end=(monday + timedelta(days=1)).isoformat(),
        tz="Europe/Paris",
        min_minutes=30,
    )
    assert [(s["start"][11:16], s["end"][11:16]) for s in result.data["slots"]] == [
        ("09:00", "10:00"),
        ("12:00", "16:00"),
    ]  # Sunday is not a working day; 17:00 ends the day
    assert result.data["slots"][0]["start"].startswith(monday.isoformat())


def test_bad_input_gives_readable_errors(local: Harness):
    monday = next_monday()
    bad_zone = local("calendar_create_event", title="X", start=at(monday, "10:00"), tz="Mars/Base")
    assert not bad_zone.ok and "unknown time zone 'Mars/Base'" in bad_zone.error
    backwards = local(
        "calendar_create_event", title="X", start=at(monday, "10:00"), end=at(monday, "09:00")
    )
    assert not backwards.ok and "ends" in backwards.error and "before it starts" in backwards.error
    garbled = local("calendar_list_events", start="next tuesday")
    assert not garbled.ok and "ISO 8601" in garbled.error
    both = local(
        "calendar_create_event",
        title="X",
        start=at(monday, "10:00"),
        end=at(monday, "11:00"),
        duration_minutes=30,
    )
    assert not both.ok and "not both" in both.error
    missing = local("calendar_delete_event", event_id="nope@x")
    assert not missing.ok and "no event with id 'nope@x'" in missing.error
    rule = local("calendar_create_event", title="X", start=at(monday, "10:00"), recurrence="often")
    assert not rule.ok and "RRULE" not in rule.error and "FREQ=WEEKLY" in rule.error


def test_local_works_without_the_caldav_package(local: Harness, monkeypatch):
    monkeypatch.setitem(sys.modules, "caldav", None)  # `import caldav` now fails
    monday = next_monday()
    assert local("calendar_create_event", title="Offline", start=at(monday, "10:00")).ok
    account = Account("x", "caldav", "Work", {"url": "http://127.0.0.1:1/"})
    with pytest.raises(caldav_integration.CalDavUnavailable, match="pip install caldav"):
        caldav_integration.connect(account)


def test_nothing_configured_means_the_local_calendar(home: Path, monkeypatch):
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    rt = Runtime(home, entry_points=False)
    try:
        active = rt.accounts.active("caldav")
        assert active.id == "local" and active.discovered and active.fields["url"] == ""
        listed = harness_of(rt).ok("calendar_list_calendars")
        assert listed.data == {
            "account": "On this computer",
            "calendars": [{"id": "local", "name": "Local", "default": True}],
        }
    finally:
        rt.close()


# ---- CalDAV against Radicale ----------------------------------------------------------------


def test_caldav_create_list_update_delete(dav: Harness, radicale_calendar: Any):
    monday = next_monday()
    calendars = dav.ok("calendar_list_calendars")
    assert [c["name"] for c in calendars.data["calendars"]] == [radicale_calendar.name]

    preview = dav.preview(
        "calendar_create_event",
        title="Planning",
        start=at(monday, "10:00"),
        tz="Europe/Paris",
        location="Room 4",
    )
    assert preview is not None and "Planning" in preview and "Room 4" in preview
    assert "Radicale" in preview and "10:00" in preview
    created = dav.ok(
        "calendar_create_event",
        title="Planning",
        start=at(monday, "10:00"),
        duration_minutes=30,
        tz="Europe/Paris",
        location="Room 4",
        alarm_minutes=5,
    )
    uid = created.data["event"]["id"]
    (on_server,) = server_events(radicale_calendar)
    assert str(on_server["UID"]) == uid and on_server["DTSTART"].params["TZID"] == "Europe/Paris"
    assert [r.source_ref for r in dav.calendar_reminders()] == [uid]

    listed = dav.ok(
        "calendar_list_events",
        start=monday.isoformat(),
        end=(monday + timedelta(days=1)).isoformat(),
        tz="America/New_York",
    )
    (event,) = listed.data["events"]
    assert event["title"] == "Planning" and event["start"][11:16] == "04:00"
    assert event["alarm_minutes"] == 5 and radicale_calendar.name in listed.content

    dav.ok(
        "calendar_update_event",
        event_id=uid,
        title="Planning (moved)",
        start=at(monday, "10:00+00:00"),
    )
    (on_server,) = server_events(radicale_calendar)
    assert str(on_server["SUMMARY"]) == "Planning (moved)"
    moved = datetime(monday.year, monday.month, monday.day, 10, tzinfo=UTC)
    assert on_server["DTSTART"].dt == moved
    assert on_server["DTSTART"].params["TZID"] == "Europe/Paris"  # it keeps its own zone
    assert on_server["DTEND"].dt - on_server["DTSTART"].dt == timedelta(minutes=30)

    preview = dav.preview("calendar_delete_event", event_id=uid)
    assert preview is not None and "Planning (moved)" in preview
    dav.ok("calendar_delete_event", event_id=uid)
    assert server_events(radicale_calendar) == []
    assert dav.calendar_reminders() == []
    again = dav("calendar_delete_event", event_id=uid)
    assert not again.ok and "no event with id" in again.error


def test_caldav_weekly_rule_is_expanded_and_searchable(dav: Harness, radicale_calendar: Any):
    monday = next_monday()
    dav.ok(
        "calendar_create_event",
        title="Weekly 1:1 with Sam",
        start=at(monday, "15:00"),
        tz="Europe/Paris",
        recurrence="FREQ=WEEKLY;COUNT=8",
    )
    # An event made by another client, straight on the server.
    other = icalendar.Event()
    other.add("uid", "lunch@other-client")
    other.add("summary", "Lunch")
    other.add("dtstart", datetime.combine(monday, datetime.min.time(), PARIS) + timedelta(hours=12))
    other.add("dtend", datetime.combine(monday, datetime.min.time(), PARIS) + timedelta(hours=13))
    other.add("rrule", {"freq": "daily", "count": 3})
    other_cal = icalendar.Calendar()
    other_cal.add("prodid", "-//Other//EN")
    other_cal.add("version", "2.0")
    other_cal.add_component(other)
    other_cal.add_missing_timezones()
    with radicale_calendar.server.client() as client:
        client.calendar(url=radicale_calendar.url).save_event(other_cal.to_ical().decode())

    window_start = monday + timedelta(days=7)
    listed = dav.ok(
        "calendar_list_events",
        start=window_start.isoformat(),
        end=(window_start + timedelta(days=14)).isoformat(),
        tz="Europe/Paris",
    )
    assert [(e["title"], e["start"][:16]) for e in listed.data["events"]] == [
        ("Weekly 1:1 with Sam", f"{window_start}T15:00"),
        ("Weekly 1:1 with Sam", f"{window_start + timedelta(days=7)}T15:00"),
    ]
    lunches = dav.ok(
        "calendar_list_events",
        start=monday.isoformat(),
        end=(monday + timedelta(days=7)).isoformat(),
        tz="UTC",
    )
    assert [e["start"] for e in lunches.data["events"] if e["title"] == "Lunch"] == [
        f"{monday + timedelta(days=i)}T11:00:00+00:00" for i in range(3)
    ]

    found = dav.ok("calendar_search_events", query="sam", tz="Europe/Paris")
    (hit,) = found.data["events"]
    assert hit["recurring"] and hit["start"].startswith(f"{monday}T15:00")


def test_caldav_free_slots_around_busy_events(dav: Harness):
    monday = next_monday()
    for title, start, end in (("Standup", "09:00", "09:30"), ("Workshop", "13:00", "15:15")):
        dav.ok(
            "calendar_create_event",
            title=title,
            start=at(monday, start),
            end=at(monday, end),
            tz="Europe/Paris",
        )
    result = dav.ok(
        "calendar_find_free_slots",
        start=monday.isoformat(),
        end=(monday + timedelta(days=1)).isoformat(),
        tz="Europe/Paris",
        work_start="08:30",
        work_end="18:00",
        min_minutes=45,
    )
    assert [(s["start"][11:16], s["end"][11:16], s["minutes"]) for s in result.data["slots"]] == [
        ("09:30", "13:00", 210),
        ("15:15", "18:00", 165),
    ]  # 08:30–09:00 is shorter than 45 min
    assert result.data["busy_count"] == 2


def test_another_account_can_be_named(runtime: Runtime, radicale_calendar: Any):
    server = radicale_calendar.server
    runtime.accounts.add(
        "caldav",
        "Work server",
        {"url": server.url, "username": server.user, "password": server.password},
    )
    dav = harness_of(runtime)
    assert runtime.accounts.active("caldav").id == "local"  # adding does not switch
    monday = next_monday()
    dav.ok(
        "calendar_create_event",
        title="On the server",
        start=at(monday, "10:00"),
        account="Work server",
    )
    dav.ok("calendar_create_event", title="On this computer", start=at(monday, "11:00"))
    assert [str(e["SUMMARY"]) for e in server_events(radicale_calendar)] == ["On the server"]
    local_file = runtime.home / "calendar" / "local.ics"
    assert (
        "On this computer" in local_file.read_text()
        and "On the server" not in local_file.read_text()
    )
    unknown = dav("calendar_list_calendars", account="Nope")
    assert not unknown.ok and "no caldav account 'Nope'" in unknown.error


def test_wrong_password_is_a_clear_error(runtime: Runtime, radicale_server: Any):
    runtime.accounts.add(
        "caldav",
        "Radicale",
        {"url": radicale_server.url, "username": radicale_server.user, "password": "not-it-123"},
        make_active=True,
    )
    result = harness_of(runtime)("calendar_list_events")
    assert not result.ok
    assert "wrong user name or password" in result.error and radicale_server.url in result.error
    account = runtime.resolve_account("caldav")
    with pytest.raises(caldav_integration.CalDavProblem, match="wrong user name or password"):
        SPECS["caldav"].test_connection(account)


def test_right_password_passes_the_connection_test(runtime: Runtime, radicale_calendar: Any):
    server = radicale_calendar.server
    runtime.accounts.add(
        "caldav",
        "Radicale",
        {"url": server.url, "username": server.user, "password": server.password},
        make_active=True,
    )
    message = SPECS["caldav"].test_connection(runtime.resolve_account("caldav"))
    assert f"as {server.user}" in message and radicale_calendar.name in message
    assert server.password not in message


def test_server_down_is_a_clear_error(runtime: Runtime, unused_port: int):
    url = f"http://127.0.0.1:{unused_port}/"
    runtime.accounts.add(
        "caldav", "Gone", {"url": url, "username": "u", "password": "pw-123456"}, make_active=True
    )
    result = harness_of(runtime)("calendar_list_calendars")
    assert not result.ok
    assert "cannot reach the CalDAV server" in result.error and url in result.error
    assert "connection refused" in result.error
    with pytest.raises(caldav_integration.CalDavProblem, match="cannot reach"):
        SPECS["caldav"].test_connection(runtime.resolve_account("caldav"))
