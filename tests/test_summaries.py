"""The one-line summaries and subjects on approval cards of the reminder, calendar, GitHub,
Slack, account and skill tools: what they say, that they name the account the call really
acts as, and that asking changes nothing, contacts no server and reads no secret."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml
from keyring.backend import KeyringBackend

from app.core.accounts import AccountDirectory
from app.core.approval import ApprovalRequest, Decision
from app.core.pipeline import CallPipeline, ToolEnvironment
from app.core.reminders import ReminderBook
from app.core.rules import RuleBook
from app.core.secrets import SecretStore
from app.core.sources import TrustStore
from app.core.store import Store
from tests.fakes_services import FakeSlack, SlackIdentity
from tools.calendar import approval as calendar_approval
from tools.calendar.common import DEFAULT_DURATION
from tools.clock import system_zone
from tools.redact import Tripwire
from tools.registry import ToolRegistry
from tools.runner import ToolRunner
from tools.session import ToolSession
from tools.spec import Subject, ToolContext

ROOT = Path(__file__).resolve().parents[1]
BERLIN = "Europe/Berlin"
GH_WORK, GH_HOME = "ghp_work-SECRET-1111", "ghp_home-SECRET-2222"
SLACK_BOT = "xoxb-SECRET-3333"
CALDAV_PASSWORD = "caldav-SECRET-4444"
REGISTRY = ToolRegistry.default(None, entry_points=False)


class CountingKeyring(KeyringBackend):
    """An in-memory keyring that notes every read: approval hooks must make none."""

    priority = 0  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[str, str] = {}
        self.reads: list[str] = []

    def get_password(self, service: str, username: str) -> str | None:
        self.reads.append(username)
        return self.items.get(username)

    def set_password(self, service: str, username: str, password: str) -> None:
        self.items[username] = password

    def delete_password(self, service: str, username: str) -> None:
        self.items.pop(username, None)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class World:
    """A real store, account directory and reminder book, as the app wires them."""

    def __init__(self, home: Path, slack_url: str = "http://127.0.0.1:9/api") -> None:
        self.home = home
        self.store = Store(home / "deskhand.db")
        self.keyring = CountingKeyring()
        self.accounts = AccountDirectory(self.store, SecretStore(backend=self.keyring))
        # Friday 27 March 2026, 20:00 in Berlin (CET, two days before the switch to CEST)
        self.clock = Clock(datetime(2026, 3, 27, 19, 0, tzinfo=UTC))
        self.book = ReminderBook(self.store, self.clock)
        self.accounts.add("github", "home", {"token": GH_HOME})
        self.accounts.add("github", "work", {"token": GH_WORK}, make_active=True)
        self.accounts.add("slack", "acme", {"token": SLACK_BOT, "base_url": slack_url})
        self.accounts.add(
            "caldav",
            "Fastmail",
            {
                "url": "https://caldav.invalid/dav",
                "username": "me",
                "password": CALDAV_PASSWORD,
                "calendar": "Work",
            },
        )
        self.keyring.reads.clear()

    def ctx(self, integration: str | None = None) -> ToolContext:
        return ToolContext(
            home=self.home,
            accounts=self.accounts,
            account_resolver=self.accounts.resolve,
            integration=integration,
            services={"reminders": self.book},
        )

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "kubeconfig"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "prod",
        "clusters": [
            {"name": "c1", "cluster": {"server": "https://127.0.0.1:1"}},
            {"name": "c2", "cluster": {"server": "https://127.0.0.1:2"}},
        ],
        "users": [{"name": "u", "user": {"token": "kube-SECRET-5555"}}],
        "contexts": [
            {"name": "dev", "context": {"cluster": "c1", "user": "u"}},
            {"name": "prod", "context": {"cluster": "c2", "user": "u"}},
        ],
    }
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(path))
    return path


@pytest.fixture
def world(home: Path, kubeconfig: Path) -> Iterator[World]:
    w = World(home)
    yield w
    assert w.keyring.reads == []  # no hook read a secret
    w.close()


def summary(world: World, name: str, /, **args: Any) -> str:
    manifest = REGISTRY.get(name)
    assert manifest is not None
    params = manifest.params(**args)
    text = REGISTRY.resolve_hook(name, "summary_line")(params, world.ctx(manifest.integration))
    assert isinstance(text, str)
    return text


def subject(world: World, name: str, /, **args: Any) -> Subject:
    manifest = REGISTRY.get(name)
    assert manifest is not None
    params = manifest.params(**args)
    found = REGISTRY.resolve_hook(name, "subject")(params, world.ctx(manifest.integration))
    assert isinstance(found, Subject)
    return found


# ---- reminders ------------------------------------------------------------------------------


def test_reminder_creation_says_when_in_plain_words(world: World):
    said = "Stretch your legs"
    assert (
        summary(world, "reminders_create", message=said, at="2026-03-27T20:15", tz=BERLIN)
        == "Remind you “Stretch your legs” at 20:15 today (Europe/Berlin)"
    )
    assert (
        summary(world, "reminders_create", message=said, in_minutes=15, tz=BERLIN)
        == "Remind you “Stretch your legs” in 15 min, at 20:15 today (Europe/Berlin)"
    )
    assert (
        summary(world, "reminders_create", message=said, at="2026-03-28T09:00", tz=BERLIN)
        == "Remind you “Stretch your legs” at 09:00 tomorrow (Europe/Berlin)"
    )
    # an offset in the time wins over the zone; shown in the zone the reminder keeps
    assert (
        summary(world, "reminders_create", message=said, at="2026-04-02T07:00Z", tz=BERLIN)
        == "Remind you “Stretch your legs” at 09:00 on Thu 2 Apr (Europe/Berlin)"
    )
    assert (
        summary(world, "reminders_create", message=said, at="2027-01-05T08:00Z", tz=BERLIN)
        == "Remind you “Stretch your legs” at 09:00 on Tue 5 Jan 2027 (Europe/Berlin)"
    )
    assert (
        summary(world, "reminders_create", message=said, at="2026-03-27T10:00", tz=BERLIN)
        == "Remind you “Stretch your legs” at 10:00 today (Europe/Berlin, in the past)"
    )


def test_reminder_without_a_zone_is_shown_in_the_users_zone(world: World):
    local = datetime(2026, 3, 27, 21, 30, tzinfo=UTC).astimezone(system_zone())
    line = summary(world, "reminders_create", message="call the bank", at="2026-03-27T21:30Z")
    assert line.startswith(f"Remind you “call the bank” at {local:%H:%M} ")
    assert "(" not in line  # the user's own zone is not named


def test_reminder_input_the_tool_refuses_is_said_plainly(world: World):
    assert summary(world, "reminders_create", message="x") == (
        "Remind you “x” (no valid time: give either a time or a number of minutes)"
    )
    assert summary(world, "reminders_create", message="x", at="soon", tz=BERLIN) == (
        "Remind you “x” at “soon” (not a valid time)"
    )
    assert summary(world, "reminders_create", message="x", in_minutes=5, tz="Mars/Base") == (
        "Remind you “x” (unknown time zone “Mars/Base”)"
    )


def test_recurring_reminder_names_its_schedule_and_first_time(world: World):
    assert summary(
        world, "reminders_create_recurring", message="standup", cron="15 9 * * 1-5", tz=BERLIN
    ) == (
        "Remind you “standup” repeatedly on the schedule “15 9 * * 1-5”, "
        "first at 09:15 on Mon 30 Mar (Europe/Berlin)"
    )
    assert summary(
        world, "reminders_create_recurring", message="standup", cron="99 * * * *", tz=BERLIN
    ) == ("Remind you “standup” repeatedly on the schedule “99 * * * *” (not a valid schedule)")


def test_cancel_and_snooze_name_the_reminder_and_change_nothing(world: World):
    at = datetime(2026, 3, 28, 9, 0, tzinfo=ZoneInfo(BERLIN))
    once = world.book.create_once("call the bank", at, BERLIN)
    standup = world.book.create_recurring("standup", "15 9 * * 1-5", BERLIN)
    before = [(r.id, r.status, r.due_at) for r in world.book.list()]
    assert summary(world, "reminders_cancel", id=once.id) == (
        "Cancel the reminder “call the bank”, due at 09:00 tomorrow (Europe/Berlin)"
    )
    assert summary(world, "reminders_cancel", id=standup.id) == (
        "Cancel the reminder “standup” (it repeats on “15 9 * * 1-5”; every time is cancelled)"
    )
    assert summary(world, "reminders_cancel", id="nope") == (
        "Cancel the reminder “nope” (no such reminder)"
    )
    assert summary(world, "reminders_snooze", id=once.id, minutes=10) == (
        "Show the reminder “call the bank” again in 10 min, at 20:10 today (Europe/Berlin)"
    )
    assert summary(world, "reminders_snooze", id=standup.id, minutes=60) == (
        "Show the reminder “standup” again in 60 min, at 21:00 today (Europe/Berlin) "
        "(once; its schedule stays)"
    )
    assert [(r.id, r.status, r.due_at) for r in world.book.list()] == before


# ---- calendar -------------------------------------------------------------------------------


def test_new_event_says_what_when_and_which_calendar(world: World):
    this_year = date.today().year
    june = date(this_year, 6, 15)
    assert summary(
        world,
        "calendar_create_event",
        title="Team sync",
        start=f"{june.isoformat()}T10:00",
        duration_minutes=30,
        account="Fastmail",
    ) == f"Add “Team sync” on {june:%a} 15 Jun 10:00–10:30 to calendar Work"
    later = date(this_year + 1, 12, 3)
    assert summary(
        world,
        "calendar_create_event",
        title="Offsite",
        start=later.isoformat(),
        end=(later + timedelta(days=2)).isoformat(),
        all_day=True,
        calendar="Team",
        attendees=["a@x.test", "b@x.test"],
        recurrence="FREQ=YEARLY",
    ) == (
        f"Add “Offsite” from {later:%a} 3 Dec {later.year} to "
        f"{later + timedelta(days=2):%a} 5 Dec {later.year} (all day) to calendar Team, "
        "repeating (FREQ=YEARLY), inviting 2 people"
    )
    # the active calendar account is the local one: no default calendar name to give
    assert summary(
        world,
        "calendar_create_event",
        title="Dentist",
        start=f"{june.isoformat()}T23:30",
        tz="Pacific/Chatham",
    ) == (
        f"Add “Dentist” from {june:%a} 15 Jun 23:30 to "
        f"{june + timedelta(days=1):%a} 16 Jun 00:30 (Pacific/Chatham) "
        "to the default calendar of On this computer"
    )
    assert DEFAULT_DURATION.total_seconds() == calendar_approval.DEFAULT_MINUTES * 60


def test_event_changes_and_deletion_are_listed_from_the_arguments(world: World):
    next_year = date.today().year + 1
    day = date(next_year, 12, 4)
    assert summary(
        world,
        "calendar_update_event",
        event_id="abc-123",
        calendar="Work",
        account="Fastmail",
        title="Team sync (moved)",
        start=f"{day.isoformat()}T11:00",
        alarm_minutes=-1,
        recurrence="",
    ) == (
        "Change the event “abc-123” in calendar Work of Fastmail (a whole series if it "
        f"repeats): title to “Team sync (moved)”, start to {day:%a} 4 Dec {next_year} 11:00, "
        "no more repeating, no alarm"
    )
    assert summary(world, "calendar_delete_event", event_id="abc-123") == (
        "Delete the event “abc-123” of On this computer (a whole series if it repeats)"
    )


def test_calendar_subject_names_the_account_and_calendar(world: World):
    named = subject(world, "calendar_delete_event", event_id="e1", account="Fastmail")
    assert named == Subject(
        account="Calendars (CalDAV) · Fastmail", target="Calendars (CalDAV) · Fastmail · Work"
    )
    local = subject(world, "calendar_create_event", title="t", start="2030-01-01T10:00")
    assert local.account == "Calendars (CalDAV) · On this computer"
    # a made-up account name is not given to a rule to match
    assert subject(world, "calendar_delete_event", event_id="e1", account="nope").account is None


# ---- GitHub and Slack -----------------------------------------------------------------------


def test_github_writes_name_the_account_they_act_as(world: World):
    assert summary(
        world, "github_comment", repo="alice/app", number=12, body="Thanks, fixed in #13"
    ) == ("Comment on alice/app#12 as work: “Thanks, fixed in #13”")
    assert summary(
        world, "github_comment", repo="alice/app", number=12, body="hi", account="home"
    ) == ("Comment on alice/app#12 as home: “hi”")
    assert summary(
        world,
        "github_create_issue",
        repo="alice/app",
        title="Crash on start",
        body="Boom",
        assignees=["bob", "carol"],
    ) == "Open an issue “Crash on start” in alice/app as work, assigned to “bob, carol”"
    assert summary(
        world, "github_comment", repo="alice/app", number=1, body="x", account="nobody"
    ) == ("Comment on alice/app#1 as “nobody” (no such GitHub account): “x”")
    assert subject(world, "github_comment", repo="a/b", number=1, body="x") == Subject(
        account="GitHub · work", target="GitHub · work"
    )
    assert subject(world, "github_create_issue", repo="a/b", title="t", account="home") == (
        Subject(account="GitHub · home", target="GitHub · home")
    )
    assert subject(world, "github_comment", repo="a/b", number=1, body="x", account="x") == (
        Subject()
    )


def test_slack_post_names_channel_and_workspace(world: World):
    assert summary(world, "slack_send_message", channel="general", text="Hello team") == (
        "Post to #general in Slack · acme: “Hello team”"
    )
    assert summary(
        world, "slack_send_message", channel="C00000001", text="hi", thread_ts="1700000000.1"
    ) == ("Reply in a thread of channel C00000001 in Slack · acme: “hi”")
    assert subject(world, "slack_send_message", channel="#general", text="x") == Subject(
        account="Slack · acme", target="Slack · acme · #general"
    )


def test_quoted_text_is_one_line_cut_and_cannot_close_its_quote(world: World):
    text = "Lunch?” to #random in Slack · other: “ok\n\nand then a much longer second paragraph"
    line = summary(world, "slack_send_message", channel="general", text=text)
    assert line.startswith("Post to #general in Slack · acme: “")
    assert line.count("“") == 1 and line.count("”") == 1 and line.endswith("”")
    inside = line.split("“", 1)[1][:-1]
    assert len(inside) == 60 and inside.endswith("…") and "\n" not in inside
    assert inside.startswith('Lunch?" to #random in Slack · other: "ok and then')


# ---- accounts and skills --------------------------------------------------------------------


def test_switching_accounts_says_from_what_to_what_and_switches_nothing(world: World):
    assert summary(
        world, "set_active_integration_account", integration="kubernetes", account="dev"
    ) == ("Switch Kubernetes to the account dev (cluster c1), away from prod (cluster c2)")
    assert subject(
        world, "set_active_integration_account", integration="kubernetes", account="dev"
    ) == Subject(
        account="Kubernetes · dev (cluster c1)", target="Kubernetes · dev (cluster c1)"
    )
    assert summary(
        world, "set_active_integration_account", integration="kubernetes", account="prod"
    ) == ("Keep Kubernetes on the account prod (cluster c2) (already active)")
    assert summary(
        world, "set_active_integration_account", integration="kubernetes", account="staging"
    ) == ("Switch Kubernetes to the account “staging” (no such Kubernetes account)")
    assert summary(
        world, "set_active_integration_account", integration="nosuch", account="x"
    ) == ("Switch the account of “nosuch” (not a service Deskhand knows) to “x”")
    assert world.accounts.active("kubernetes").label == "prod (cluster c2)"


def test_skill_script_summary_names_script_skill_and_arguments(world: World):
    assert summary(world, "skill_run_script", name="pdf", script="scripts/x.py") == (
        "Run scripts/x.py of the skill pdf"
    )
    assert summary(
        world, "skill_run_script", name="pdf", script="scripts/x.py", args=["--in", "a b.pdf"]
    ) == ("Run scripts/x.py of the skill pdf with “--in 'a b.pdf'”")


# ---- every tool, and the card end to end ----------------------------------------------------


def test_every_builtin_tool_that_changes_something_has_a_summary():
    missing = []
    for manifest in REGISTRY.manifests():
        if manifest.read_only:
            continue
        if manifest.summary_line is None:
            missing.append(manifest.name)
            continue
        assert callable(REGISTRY.resolve_hook(manifest.name, "summary_line"))
        if manifest.subject is not None:
            assert callable(REGISTRY.resolve_hook(manifest.name, "subject"))
    assert missing == [], f"tools without a summary_line hook: {missing}"


def test_manifests_stay_cheap_and_hooks_load_no_sdk():
    """Importing the manifests loads no hook; loading the hooks loads no SDK or client."""
    code = """
import json, sys
from tools.registry import ToolRegistry
r = ToolRegistry.default(None, entry_points=False)
before = sorted(m for m in sys.modules if m.endswith('.approval'))
for m in r.manifests():
    for hook in ('summary_line', 'subject'):
        if getattr(m, hook) is not None and m.category in (
            'calendar', 'reminders', 'github', 'slack', 'integrations', 'skills'
        ):
            r.resolve_hook(m.name, hook)
heavy = [m for m in ('icalendar', 'caldav', 'httpx', 'croniter', 'keyring') if m in sys.modules]
print(json.dumps({'before': before, 'heavy': heavy}))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    found = json.loads(out.stdout.strip().splitlines()[-1])
    mine = {f"tools.{c}.approval" for c in ("calendar", "reminders", "github", "slack")}
    mine |= {"tools.integrations.approval", "tools.skills.approval"}
    assert not mine & set(found["before"])
    assert found["heavy"] == []


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack({SLACK_BOT: SlackIdentity("U00000099", "deskbot")}) as fake:
        fake.add_channel("general")
        yield fake


def test_the_approval_card_carries_summary_and_target_and_no_secret(
    home: Path, kubeconfig: Path, slack: FakeSlack
):
    world = World(home, slack_url=slack.base_url)
    asked: list[ApprovalRequest] = []
    answers = [Decision.DENY, Decision.ALLOW_ONCE]
    while_asking: list[int] = []  # requests Slack had received when the card was shown

    async def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        while_asking.append(len(slack.requests))
        return answers.pop(0)

    tripwire = Tripwire({SLACK_BOT})
    runner = ToolRunner(REGISTRY, tripwire=tripwire)
    pipeline = CallPipeline(
        runner,
        ToolEnvironment(
            home=home, accounts=world.accounts, account_resolver=world.accounts.resolve
        ),
        rules=RuleBook(None),
        trust=TrustStore(None),
        approver=approver,
        tripwire=tripwire,
    )
    session = ToolSession(REGISTRY)
    # a model pasting the token into a message: the card never shows it
    text = f"Hello team, token {SLACK_BOT}"

    async def post() -> Any:
        return await pipeline.call(
            "c1", "slack_send_message", {"channel": "#general", "text": text}, session=session
        )

    try:
        denied = asyncio.run(post())
        assert denied.status == "denied" and slack.requests == []
        card = asked[0]
        assert card.summary.startswith("Post to #general in Slack · acme: “Hello team, token ")
        assert card.target == "Slack · acme · #general"
        assert SLACK_BOT not in card.summary and SLACK_BOT not in card.arguments_text
        narrow = [p.rule.matcher for p in card.proposals if p.rule.matcher.narrow]
        assert [(m.kind, m.value) for m in narrow] == [("account", "Slack · acme")]
        allowed = asyncio.run(post())
        assert allowed.status == "ok", allowed.result.content
        assert while_asking == [0, 0]  # asking contacted no server
        assert slack.requests[-1].path == "/api/chat.postMessage"
    finally:
        runner.shutdown()
        world.close()
