"""GitHub and Slack tools against fake services on 127.0.0.1 that speak the real REST shapes,
and (the tests marked "shared") against the real services when tokens are provided:

    DESKHAND_TEST_GITHUB_TOKEN   [DESKHAND_TEST_GITHUB_REPO=octocat/Hello-World]
                                 [DESKHAND_TEST_GITHUB_FILE=README]
                                 [DESKHAND_TEST_GITHUB_URL=https://api.github.com]
    DESKHAND_TEST_SLACK_TOKEN    [DESKHAND_TEST_SLACK_CHANNEL=general]

The real runs only read. The last test drives `deskhand ask --json --yes` end to end with two
GitHub accounts and then scans everything written to disk or sent to the model for tokens.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from integrations import github as github_integration
from integrations import registry as integration_registry
from integrations import slack as slack_integration
from integrations.spec import Account
from tests.fakellm import ScriptedLLM, text, tool_calls
from tests.fakes_services import FakeGitHub, FakeSlack, SlackIdentity
from tools.github.manifest import MANIFESTS as GITHUB_TOOLS
from tools.redact import Tripwire
from tools.registry import ToolRegistry
from tools.runner import ToolRunner, always_asks
from tools.slack.manifest import MANIFESTS as SLACK_TOOLS
from tools.spec import Operation, ToolContext, ToolResult

GH_ALICE, GH_BOB = "ghp_alice-SECRET-1111", "ghp_bob-SECRET-2222"
SLACK_BOT = "xoxb-SECRET-3333"
README = b"# App\n\nHello from the fake repository.\n"


# ---- harness ---------------------------------------------------------------------------


class Directory:
    """An in-memory account directory with the surface tools use (`ctx.accounts`)."""

    def __init__(self, *accounts: Account) -> None:
        self.accounts = list(accounts)
        self.chosen: dict[str, str] = {}

    def list(self, integration: str) -> list[Account]:
        return [a for a in self.accounts if a.integration == integration]

    def find(self, integration: str, ref: str) -> Account:
        for account in self.list(integration):
            if ref in (account.id, account.label):
                return account
        raise LookupError(f"no {integration} account {ref!r}")

    def active(self, integration: str) -> Account | None:
        listed = self.list(integration)
        chosen = self.chosen.get(integration)
        return next((a for a in listed if a.id == chosen), listed[0] if listed else None)

    def set_active(self, integration: str, ref: str) -> Account:
        account = self.find(integration, ref)
        self.chosen[integration] = account.id
        return account

    def with_secrets(self, account: Account) -> Account:
        return account

    def resolve(self, integration: str) -> Account:
        account = self.active(integration)
        if account is None:
            raise LookupError(f"no {integration} account is set up")
        return account


class Tools:
    """Runs the GitHub and Slack tools the way the agent does (validation, thread, tripwire)."""

    def __init__(self, directory: Directory, home: Path) -> None:
        registry = ToolRegistry()
        registry.add(GITHUB_TOOLS + SLACK_TOOLS)
        secrets = {v for a in directory.accounts for v in a.secrets.values()}
        self.runner = ToolRunner(registry, tripwire=Tripwire(secrets))
        self.directory = directory
        self.home = home

    def ctx(self, integration: str) -> ToolContext:
        return ToolContext(
            home=self.home,
            accounts=self.directory,
            account_resolver=self.directory.resolve,
            integration=integration,
        )

    def __call__(self, name: str, **args: Any) -> ToolResult:
        manifest = self.runner.lookup(name)
        ctx = self.ctx(manifest.integration or "")
        return asyncio.run(self.runner.run(name, args, ctx))

    def preview(self, name: str, **args: Any) -> str | None:
        manifest, params = self.runner.validate(name, args)
        ctx = self.ctx(manifest.integration or "")
        return asyncio.run(self.runner.classify(manifest, params, ctx, asks=always_asks)).preview

    def close(self) -> None:
        self.runner.shutdown()


def gh_account(label: str, token: str, base_url: str) -> Account:
    return Account(label, "github", label, {"base_url": base_url}, {"token": token})


def slack_account(label: str, token: str, base_url: str) -> Account:
    return Account(label, "slack", label, {"base_url": base_url}, {"token": token})


def clock(epoch: float) -> str:
    return time.strftime("%H:%M", time.localtime(epoch))


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with FakeGitHub({GH_ALICE: "alice", GH_BOB: "bob"}) as fake:
        fake.add_repo("alice/app", files={"README": README, "src/main.py": b"print('hi')\n"})
        fake.add_issue("alice/app", "Crash on start", author="bob", labels=("bug",), body="Boom")
        fake.add_issue("alice/app", "Add dark mode", author="carol", labels=("feature",))
        fake.add_issue("alice/app", "Fix crash", author="alice", pull=True, labels=("bug",))
        fake.add_issue("alice/app", "Old idea", author="bob", state="closed")
        fake.add_comment("alice/app", 1, "Seen it too", "carol")
        fake.add_comment("alice/app", 1, "Fixed in #3", "alice")
        fake.add_repo("alice/secret", private=True)
        fake.add_repo("bob/work", issues=3)
        yield fake


@pytest.fixture
def gh_tools(gh: FakeGitHub, tmp_path: Path) -> Iterator[Tools]:
    directory = Directory(
        gh_account("personal", GH_ALICE, gh.base_url), gh_account("work", GH_BOB, gh.base_url)
    )
    tools = Tools(directory, tmp_path)
    yield tools
    tools.close()


@pytest.fixture
def sl() -> Iterator[FakeSlack]:
    with FakeSlack({SLACK_BOT: SlackIdentity("U00000099", "deskbot")}) as fake:
        ada = fake.add_user("ada", "Ada Lovelace", "ada@acme.test")
        grace = fake.add_user("grace", "Grace Hopper", "grace@acme.test")
        fake.add_user("helper", "Helper Bot", bot=True)
        general = fake.add_channel("general")
        fake.add_channel("random")
        fake.add_channel("secret-plans", private=True)
        fake.add_channel("lounge", member=False)
        fake.add_channel("old", archived=True)
        fake.post(general, ada, "Good morning")
        fake.post(general, grace, "Standup in 5")
        fake.post(general, ada, "On my way")
        yield fake


@pytest.fixture
def sl_tools(sl: FakeSlack, tmp_path: Path) -> Iterator[Tools]:
    tools = Tools(Directory(slack_account("acme", SLACK_BOT, sl.base_url)), tmp_path)
    yield tools
    tools.close()


# ---- shared: the fake, or the real service when a token is given ------------------------


@dataclass
class GitHubTarget:
    tools: Tools
    repo: str
    file: str
    fake: FakeGitHub | None


def targets(token_variable: str) -> list[str]:
    """The real service only when a token is given: CI runs no skipped tests."""
    return ["fake", "real"] if os.environ.get(token_variable) else ["fake"]


@pytest.fixture(params=targets("DESKHAND_TEST_GITHUB_TOKEN"))
def github_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GitHubTarget]:
    if request.param == "fake":
        fake = request.getfixturevalue("gh")
        tools = Tools(Directory(gh_account("personal", GH_ALICE, fake.base_url)), tmp_path)
        yield GitHubTarget(tools, "alice/app", "README", fake)
    else:
        token = os.environ.get("DESKHAND_TEST_GITHUB_TOKEN")
        if not token:
            pytest.skip("set DESKHAND_TEST_GITHUB_TOKEN to run against the real GitHub")
        base = os.environ.get("DESKHAND_TEST_GITHUB_URL", github_integration.DEFAULT_BASE_URL)
        tools = Tools(Directory(gh_account("real", token, base)), tmp_path)
        repo = os.environ.get("DESKHAND_TEST_GITHUB_REPO", "octocat/Hello-World")
        yield GitHubTarget(tools, repo, os.environ.get("DESKHAND_TEST_GITHUB_FILE", "README"), None)
    tools.close()


@dataclass
class SlackTarget:
    tools: Tools
    channel: str | None
    fake: FakeSlack | None


@pytest.fixture(params=targets("DESKHAND_TEST_SLACK_TOKEN"))
def slack_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SlackTarget]:
    if request.param == "fake":
        fake = request.getfixturevalue("sl")
        tools = Tools(Directory(slack_account("acme", SLACK_BOT, fake.base_url)), tmp_path)
        yield SlackTarget(tools, "#general", fake)
    else:
        token = os.environ.get("DESKHAND_TEST_SLACK_TOKEN")
        if not token:
            pytest.skip("set DESKHAND_TEST_SLACK_TOKEN to run against the real Slack")
        account = slack_account("real", token, slack_integration.DEFAULT_BASE_URL)
        tools = Tools(Directory(account), tmp_path)
        yield SlackTarget(tools, os.environ.get("DESKHAND_TEST_SLACK_CHANNEL"), None)
    tools.close()


def test_shared_github_connection_and_bad_token(github_target: GitHubTarget):
    account = github_target.tools.directory.accounts[0]
    assert "Signed in to GitHub as" in github_integration.SPEC.test_connection(account)
    bad = gh_account("bad", "ghp_not-a-real-token", account.fields["base_url"])
    with pytest.raises(github_integration.GitHubError, match="the token was rejected"):
        github_integration.SPEC.test_connection(bad)


def test_shared_github_repos_issues_search_and_files(github_target: GitHubTarget):
    run, repo = github_target.tools, github_target.repo
    owner = repo.split("/")[0]
    repos = run("github_list_repos", owner=owner, limit=100)
    assert repos.ok, repos.content
    assert repo in [r["full_name"] for r in repos.data]
    issues = run("github_list_issues", repo=repo, state="all", limit=5)
    assert issues.ok and 0 < len(issues.data) <= 5, issues.content
    first = issues.data[0]
    got = run("github_get_issue", repo=repo, number=first["number"], comments=3)
    assert got.ok and got.data["title"] == first["title"]
    assert len(got.data["comments"]) <= 3
    word = max(first["title"].split(), key=len)
    found = run("github_search_issues", query=word, repo=repo, limit=5)
    assert found.ok and isinstance(found.data, list), found.content
    file = run("github_read_file", repo=repo, path=github_target.file, max_bytes=2000)
    assert file.ok and file.content.strip(), file.content
    if github_target.fake is not None:
        assert first["number"] in [r["number"] for r in found.data]
        assert file.content == README.decode()


def test_shared_slack_health_channels_users_messages(slack_target: SlackTarget):
    run = slack_target.tools
    health = run("slack_health")
    assert health.ok and health.content.startswith("Slack OK"), health.content
    account = run.directory.accounts[0]
    assert "Connected to Slack workspace" in slack_integration.SPEC.test_connection(account)
    channels = run("slack_list_channels", limit=50)
    assert channels.ok and channels.data, channels.content
    users = run("slack_search_users", query="", limit=5)
    assert users.ok and 0 < len(users.data) <= 5
    if slack_target.channel:
        messages = run("slack_read_messages", channel=slack_target.channel, limit=5)
        assert messages.ok and len(messages.data) <= 5, messages.content
    bad = slack_account("bad", "xoxb-not-a-real-token", account.fields["base_url"])
    with pytest.raises(slack_integration.SlackError, match="the token was rejected"):
        slack_integration.SPEC.test_connection(bad)


# ---- declarations ------------------------------------------------------------------------


def test_specs_and_manifests():
    for spec_id in ("github", "slack"):
        spec = integration_registry.SPECS[spec_id]
        assert spec.secret_fields == ("token",)
        assert next(f for f in spec.fields if f.name == "base_url").default.startswith("https://")
    writes = {"github_create_issue", "github_comment", "slack_send_message"}
    for manifest in GITHUB_TOOLS + SLACK_TOOLS:
        assert manifest.integration == manifest.category
        assert "account" in manifest.json_schema()["properties"]
        wanted = {Operation.CREATE} if manifest.name in writes else {Operation.READ}
        assert manifest.operations == wanted, manifest.name
        assert (manifest.preview is not None) == (manifest.name in writes)
    assert len(GITHUB_TOOLS) == 7 and len(SLACK_TOOLS) == 5


# ---- GitHub against the fake ------------------------------------------------------------


def test_github_link_pagination_follows_next_up_to_the_limit(gh: FakeGitHub, gh_tools: Tools):
    gh.add_repo("alice/big", issues=230)
    some = gh_tools("github_list_issues", repo="alice/big", limit=150)
    assert some.ok and len(some.data) == 150
    assert some.data[0]["number"] == 230 and "more exist" in some.content
    pages = [r for r in gh.requests if r.path == "/repos/alice/big/issues"]
    assert [r.query.get("page", "1") for r in pages] == ["1", "2"]
    assert pages[0].query["per_page"] == "100"
    everything = gh_tools("github_list_issues", repo="alice/big", limit=500)
    assert len(everything.data) == 230 and "more exist" not in everything.content
    assert len([r for r in gh.requests if r.path == "/repos/alice/big/issues"]) == 5


def test_github_enterprise_prefix_and_small_pages(tmp_path: Path):
    with FakeGitHub({GH_ALICE: "alice"}, prefix="/api/v3", max_per_page=2) as fake:
        fake.add_repo("alice/app", issues=5)
        tools = Tools(Directory(gh_account("ghe", GH_ALICE, fake.base_url)), tmp_path)
        try:
            listed = tools("github_list_issues", repo="alice/app")
        finally:
            tools.close()
    assert [r["number"] for r in listed.data] == [5, 4, 3, 2, 1]
    assert {r.path for r in fake.requests} == {"/api/v3/repos/alice/app/issues"}
    assert len(fake.requests) == 3


def test_github_issue_filters(gh_tools: Tools):
    prs = gh_tools("github_list_issues", repo="alice/app", kind="pull_requests")
    assert [(r["number"], r["kind"]) for r in prs.data] == [(3, "pull_request")]
    bugs = gh_tools("github_list_issues", repo="alice/app", kind="issues", labels=["bug"])
    assert [r["number"] for r in bugs.data] == [1]
    closed = gh_tools("github_list_issues", repo="alice/app", state="closed")
    assert [r["title"] for r in closed.data] == ["Old idea"]
    search = gh_tools("github_search_issues", query="crash", kind="pull_requests")
    assert [(r["repo"], r["number"]) for r in search.data] == [("alice/app", 3)]
    exact = gh_tools("github_list_issues", repo="alice/app", state="all", limit=4)
    assert len(exact.data) == 4 and "more exist" not in exact.content
    none = gh_tools("github_list_issues", repo="bob/work", labels=["nope"])
    assert none.ok and none.data == [] and none.content.startswith("No open")


def test_github_get_issue_with_comments_and_pull_details(gh_tools: Tools):
    issue = gh_tools("github_get_issue", repo="alice/app", number=1)
    assert issue.ok and issue.data["body"] == "Boom"
    assert [c["author"] for c in issue.data["comments"]] == ["carol", "alice"]
    assert "--- alice at" in issue.content and "Fixed in #3" in issue.content
    pull = gh_tools("github_get_issue", repo="alice/app", number=3)
    assert pull.data["pull"] == {
        "head": "feature-3",
        "base": "main",
        "merged": False,
        "draft": False,
    }
    assert "feature-3 → main (not merged)" in pull.content
    missing = gh_tools("github_get_issue", repo="alice/app", number=99)
    assert not missing.ok and "not found" in missing.error


def test_github_create_issue_and_comment_with_previews(gh: FakeGitHub, gh_tools: Tools):
    preview = gh_tools.preview(
        "github_create_issue", repo="alice/app", title="Docs", body="Write them", labels=["docs"]
    )
    assert preview is not None and "Open an issue in alice/app as personal" in preview
    assert "Labels: docs" in preview and "Write them" in preview
    assert not any(r.method == "POST" for r in gh.requests)  # a preview changes nothing
    made = gh_tools("github_create_issue", repo="alice/app", title="Docs", labels=["docs"])
    assert made.ok and made.data["number"] == 5
    post = gh.requests[-1]
    assert (post.method, post.path, post.token) == ("POST", "/repos/alice/app/issues", GH_ALICE)
    assert post.body == {"title": "Docs", "body": "", "labels": ["docs"]}
    said = gh_tools("github_comment", repo="alice/app", number=5, body="On it", account="work")
    assert said.ok, said.content
    assert (
        gh.requests[-1].token == GH_BOB and gh.repos["alice/app"].comments[5][0]["body"] == "On it"
    )
    preview = gh_tools.preview(
        "github_comment", repo="alice/app", number=5, body="x", account="work"
    )
    assert preview is not None and "Comment on alice/app#5 as work" in preview
    invalid = gh_tools("github_create_issue", repo="not a repo", title="x")
    assert not invalid.ok


def test_github_named_account_and_private_repos(gh: FakeGitHub, gh_tools: Tools):
    mine = gh_tools("github_list_repos")
    assert {r["full_name"] for r in mine.data} == {"alice/app", "alice/secret"}
    theirs = gh_tools("github_list_repos", account="work")
    assert [r["full_name"] for r in theirs.data] == ["bob/work"]
    hidden = gh_tools("github_list_issues", repo="alice/secret", account="work")
    assert not hidden.ok and "cannot see it" in hidden.error
    unknown = gh_tools("github_list_repos", account="nobody")
    assert not unknown.ok and "no github account 'nobody'" in unknown.error
    assert gh.tokens_seen() == [GH_ALICE, GH_BOB, GH_BOB]


def test_github_read_file_folder_truncation_and_binary(gh: FakeGitHub, gh_tools: Tools):
    gh.repos["alice/app"].files["logo.png"] = b"\x89PNG\r\n\x1a\n\x00\xff"
    folder = gh_tools("github_read_file", repo="alice/app", path="src")
    assert folder.ok and folder.data == {
        "entries": [{"name": "main.py", "type": "file", "size": None}]
    }
    cut = gh_tools("github_read_file", repo="alice/app", path="README", max_bytes=5, ref="main")
    assert cut.content.startswith("# App") and "[truncated: showing 5 of" in cut.content
    assert cut.data["truncated"] and gh.requests[-1].query == {"ref": "main"}
    binary = gh_tools("github_read_file", repo="alice/app", path="logo.png")
    assert not binary.ok and "binary" in binary.error
    gh.repos["alice/app"].files["docs/a #1?.md"] = "ünïcode\n".encode()
    odd = gh_tools("github_read_file", repo="alice/app", path="/docs/a #1?.md")
    assert odd.ok and odd.content == "ünïcode\n"
    missing = gh_tools("github_read_file", repo="alice/app", path="nope.txt")
    assert not missing.ok and "not found" in missing.error


def test_github_rate_limit_and_rejected_token(gh: FakeGitHub, gh_tools: Tools):
    reset = gh.rate_limit_next()
    limited = gh_tools("github_list_repos")
    assert not limited.ok
    assert f"rate limited this token until {clock(reset)} (reset)" in limited.error
    gh.fail_next(429, {"message": "slow down"}, {"Retry-After": "120"})
    again = gh_tools("github_list_repos")
    assert "rate limited" in again.error and "retry after 120s" in again.error
    gh.fail_next(401, {"message": "Bad credentials"})
    rejected = gh_tools("github_list_issues", repo="alice/app")
    assert not rejected.ok and "the token was rejected" in rejected.error
    assert gh_tools("github_list_repos").ok  # nothing sticks


def test_github_unreachable_and_tokenless(tmp_path: Path, unused_port: int):
    base = f"http://127.0.0.1:{unused_port}"
    tools = Tools(
        Directory(gh_account("gone", GH_ALICE, base), gh_account("x", "", base)), tmp_path
    )
    try:
        gone = tools("github_list_repos")
        empty = tools("github_list_repos", account="x")
    finally:
        tools.close()
    assert not gone.ok and f"could not reach GitHub at {base}" in gone.error
    assert not empty.ok and "has no token" in empty.error


# ---- Slack against the fake ---------------------------------------------------------------


def test_slack_cursor_pagination(sl: FakeSlack, sl_tools: Tools):
    sl.max_page = 2
    channels = sl_tools("slack_list_channels")
    assert [c["name"] for c in channels.data] == ["general", "random", "secret-plans", "lounge"]
    cursors = [r.query.get("cursor") for r in sl.requests if r.path == "/api/conversations.list"]
    assert len(cursors) == 2 and cursors[0] is None and cursors[1]
    public = sl_tools("slack_list_channels", include_private=False, include_archived=True, limit=3)
    assert [c["name"] for c in public.data] == ["general", "random", "lounge"]
    assert "more exist" in public.content and "[not a member]" in public.content


def test_slack_search_users(sl_tools: Tools):
    by_mail = sl_tools("slack_search_users", query="grace@acme")
    assert [u["real_name"] for u in by_mail.data] == ["Grace Hopper"]
    by_name = sl_tools("slack_search_users", query="@ADA")
    assert by_name.data[0]["id"] == "U00000001" and "<ada@acme.test>" in by_name.content
    assert sl_tools("slack_search_users", query="zzz").data == []


def test_slack_read_and_send_messages(sl: FakeSlack, sl_tools: Tools):
    read = sl_tools("slack_read_messages", channel="#general", limit=2)
    assert [(m["author"], m["text"]) for m in read.data] == [
        ("grace", "Standup in 5"),
        ("ada", "On my way"),
    ]
    assert "more exist" in read.content
    preview = sl_tools.preview("slack_send_message", channel="general", text="Hello team")
    assert preview == "Post to general as acme:\n\nHello team"
    sent = sl_tools("slack_send_message", channel="general", text="Hello team")
    assert sent.ok and sent.content.startswith("Posted to #general as acme")
    post = sl.requests[-1]
    assert post.method == "POST" and post.path == "/api/chat.postMessage"
    assert post.body == {"channel": "C00000001", "text": "Hello team"} and post.token == SLACK_BOT
    assert sl.messages["C00000001"][0]["text"] == "Hello team"
    outside = sl_tools("slack_send_message", channel="C00000004", text="hi")
    assert not outside.ok and "not a member of that channel" in outside.error
    nowhere = sl_tools("slack_read_messages", channel="#nope")
    assert not nowhere.ok and "no Slack channel named #nope" in nowhere.error


def test_slack_failures_are_readable(sl: FakeSlack, sl_tools: Tools):
    sl.fail_next(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "30"})
    before = time.time()
    limited = sl_tools("slack_health")
    assert not limited.ok and "Slack rate limited auth.test until" in limited.error
    assert limited.error.split("until ")[1].split()[0] in {
        clock(before + 30),
        clock(time.time() + 30),
    }
    sl.fail_next(200, {"ok": False, "error": "missing_scope", "needed": "channels:read"})
    scope = sl_tools("slack_list_channels")
    assert "lacks the scope channels:read" in scope.error
    sl.fail_next(200, {"ok": False, "error": "token_revoked"})
    revoked = sl_tools("slack_health")
    assert "the token was rejected (token_revoked)" in revoked.error
    assert sl_tools("slack_health").ok


# ---- two GitHub accounts through `deskhand ask`, then a scan for secrets -------------------


def test_two_github_accounts_end_to_end_and_no_secret_leaks(
    gh: FakeGitHub, llm: ScriptedLLM, keyring_env: dict[str, str], tmp_path: Path
):
    from tests.test_cli import deskhand, deskhand_env, events_of

    home = tmp_path / "home"
    home.mkdir()
    env = deskhand_env(**keyring_env)
    for label, token, extra in (("personal", GH_ALICE, ["--use"]), ("work", GH_BOB, [])):
        added = deskhand(
            "--home", str(home), "accounts", "add", "github", "--label", label,
            "--field", f"base_url={gh.base_url}", "--secret", "token", *extra,
            env=env, stdin=token + "\n",
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
    listing = {"repo": "alice/app", "state": "all"}
    llm.add(tool_calls(("c1", "github_list_issues", listing)))
    switch = {"integration": "github", "account": "work"}
    llm.add(tool_calls(("c2", "set_active_integration_account", switch)))
    llm.add(tool_calls(("c3", "github_list_issues", listing)))
    llm.add(tool_calls(("c4", "github_list_issues", {**listing, "account": "personal"})))
    llm.add(text("Four items either way."))
    proc = deskhand(
        "--home", str(home), "ask", "list the issues of alice/app, then with my work account",
        "--base-url", llm.openai_base_url, "--model", "m", "--json", "--yes",
        env={**env, "OPENAI_API_KEY": "sk-model-key"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    events = events_of(proc.stdout)
    results = {e["id"]: e for e in events if e["type"] == "tool_result"}
    assert all(r["ok"] for r in results.values()), results
    approvals = [e for e in events if e["type"] == "approval"]
    assert [(a["name"], a["decision"]) for a in approvals] == [
        ("set_active_integration_account", "allow_once")
    ], approvals
    assert "(personal)" in results["c1"]["content"] and "(work)" in results["c3"]["content"]
    assert "(personal)" in results["c4"]["content"]  # a named account, without switching
    assert gh.tokens_seen() == [GH_ALICE, GH_BOB, GH_ALICE]

    written = [home / "settings.json", *home.glob("deskhand.db*"), *home.glob("logs/*.log")]
    assert (home / "deskhand.db").exists() and list(home.glob("logs/*.log"))
    sent = [json.dumps(r.body) for r in llm.requests]
    assert len(sent) == 5
    for secret in (GH_ALICE, GH_BOB):
        for path in written:
            if path.exists():
                assert secret.encode() not in path.read_bytes(), path
        assert not any(secret in body for body in sent)
        assert secret not in proc.stdout and secret not in proc.stderr
