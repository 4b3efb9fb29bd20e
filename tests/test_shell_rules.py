"""Rules for command lines: a line runs without asking only when an allow rule covers every
simple command in it; rules for commands that run model-written code hold in one folder;
the network needs a rule that says so; "Always allow" proposes a prefix per command."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

from app.core.rules import Matcher, Rule, RuleBook, RuleDecision, _command_matches
from tools.spec import CommandPart, Subject

TOOL = "shell_run"


def part(*words: str, prefix: str | None = None, in_folder: bool = False) -> CommandPart:
    """The part the shell tool makes of these words (parsed as bash would, with the
    coverage its program's known-inert options allow), run in the call's folder."""
    from tools.shell.hooks import part_of
    from tools.shell.parse import parse_line

    real = part_of(parse_line(shlex.join(words)).commands[0], ())
    return replace(
        real, prefix=prefix or real.prefix, in_folder=in_folder or real.in_folder
    )


def line(*parts: CommandPart, folder: str = "/work/proj", network: bool = False) -> Subject:
    return Subject(paths=(folder,), commands=parts, network=network)


def allow(prefix: str, *, folder: str = "", network: bool = False) -> Rule:
    return Rule(
        tool=TOOL,
        matcher=Matcher(kind="command", value=prefix, folder=folder, network=network),
        decision=RuleDecision.ALLOW,
    )


def decision(book: RuleBook, subject: Subject) -> RuleDecision | None:
    return book.evaluate(TOOL, "builtin", subject).decision


def test_every_simple_command_must_be_covered() -> None:
    book = RuleBook(None, [allow("git status", folder="/work/proj"), allow("ls")])
    assert decision(book, line(part("git", "status", "--short"))) is RuleDecision.ALLOW
    assert decision(book, line(part("git", "status"), part("ls", "-la"))) is RuleDecision.ALLOW
    assert decision(book, line(part("git", "status"), part("rm", "-rf", "/"))) is None
    assert decision(book, line(part("rm", "-rf", "/"), part("git", "status"))) is None


def test_a_deny_or_ask_for_one_command_wins() -> None:
    deny = Rule(tool=TOOL, matcher=Matcher(kind="command", value="rm"),
                decision=RuleDecision.DENY)
    ask = Rule(tool=TOOL, matcher=Matcher(kind="command", value="git push"),
               decision=RuleDecision.ASK)
    book = RuleBook(None, [allow("git"), allow("ls"), deny, ask])
    assert decision(book, line(part("ls"), part("rm", "x"))) is RuleDecision.DENY
    assert decision(book, line(part("ls"), part("git", "push"))) is RuleDecision.ASK
    assert decision(book, line(part("git", "push"), part("rm", "x"))) is RuleDecision.DENY


def test_a_prefix_matches_whole_words_only() -> None:
    book = RuleBook(None, [allow("git status")])
    assert decision(book, line(part("git", "statusx"))) is None
    assert decision(book, line(part("git"))) is None
    assert decision(book, line(part("git", "status; rm x"))) is None  # one odd word, not status
    assert not _command_matches("git status", "git status; rm x")  # unquoted: two commands
    assert not _command_matches("git status", "git status $(rm x)")
    assert not _command_matches("git status", "git status\nrm x")
    assert not _command_matches("git status", "$(not known before it runs) git status")


def test_model_written_code_is_allowed_in_its_folder_only() -> None:
    npm = part("npm", "test", in_folder=True)
    broad = RuleBook(None, [allow("npm test")])
    assert decision(broad, line(npm)) is None  # a rule without a folder does not cover it
    here = RuleBook(None, [allow("npm test", folder="/work/proj")])
    assert decision(here, line(npm)) is RuleDecision.ALLOW
    assert decision(here, line(npm, folder="/work/proj/sub")) is RuleDecision.ALLOW
    assert decision(here, line(npm, folder="/work/other")) is None
    assert decision(here, line(npm, folder="/work/project-evil")) is None


def test_the_network_needs_a_rule_that_allows_it() -> None:
    offline = RuleBook(None, [allow("npm install", folder="/work/proj")])
    assert decision(offline, line(part("npm", "install"))) is RuleDecision.ALLOW
    assert decision(offline, line(part("npm", "install"), network=True)) is None
    online = RuleBook(None, [allow("npm install", folder="/work/proj", network=True)])
    assert decision(online, line(part("npm", "install"), network=True)) is RuleDecision.ALLOW


def test_rules_file_stays_lean_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    book = RuleBook(path)
    book.add(allow("make", folder="/work/proj"))
    book.add(Rule(tool="fs_write_file", matcher=Matcher(kind="folder", value="/w"),
                  decision=RuleDecision.ALLOW))
    text = path.read_text()
    assert text.count('"folder"') == 2  # the make rule's folder, and a folder matcher's kind
    assert '"network"' not in text
    again = RuleBook(path)
    assert [r.matcher for r in again.rules()] == [r.matcher for r in book.rules()]
    assert "in /work/proj" in again.rules()[0].describe()


def test_always_allow_proposes_a_prefix_per_command_and_adds_them_all() -> None:
    from app.core.pipeline import CallFacts, _proposals
    from tools.registry import ToolSource
    from tools.shell.manifest import MANIFESTS
    from tools.spec import Escalation

    manifest = next(m for m in MANIFESTS if m.name == TOOL)
    subject = line(part("ls", "-la"), part("npm", "test"), part("ls", "-la"))
    facts = CallFacts(
        manifest=manifest,
        params=None,
        source=ToolSource("builtin", "builtin"),
        trusted=True,
        subject=subject,
        escalation=Escalation("runs a command on your machine, sandboxed"),
    )
    (proposal,) = _proposals(facts)  # no "any arguments" proposal for a command line
    matchers = [r.matcher for r in proposal.rules]
    assert matchers == [
        Matcher(kind="command", value="ls"),
        Matcher(kind="command", value="npm test", folder="/work/proj"),
    ]
    assert "“ls”" in proposal.label and "“npm test” in" in proposal.label
    book = RuleBook(None)
    book.add_many(proposal.rules)
    assert decision(book, subject) is RuleDecision.ALLOW


def test_a_line_with_too_many_commands_gets_no_always_allow() -> None:
    from app.core.pipeline import MAX_COMMAND_RULES, CallFacts, _proposals
    from tools.registry import ToolSource
    from tools.shell.manifest import MANIFESTS
    from tools.spec import Escalation

    manifest = next(m for m in MANIFESTS if m.name == TOOL)

    def proposals(count: int) -> list:
        parts = tuple(part("tool" + str(i), "run") for i in range(count))
        facts = CallFacts(
            manifest=manifest, params=None, source=ToolSource("builtin", "builtin"),
            trusted=True, subject=line(*parts), escalation=Escalation("runs a command"),
        )
        return _proposals(facts)

    assert len(proposals(2)) == 1 and len(proposals(2)[0].rules) == 2
    assert proposals(MAX_COMMAND_RULES + 1) == []  # the card could not name them all
