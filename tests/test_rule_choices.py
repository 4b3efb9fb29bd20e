"""The Allow / Ask / Never that Settings shows per tool and per MCP server is what
`RuleBook.evaluate` decides, checked over a generated table of rule books (several tools and
sources, wildcard tool and source patterns, narrow and any-argument rules, conversation,
task and always scopes, every decision).

Where the choice differs from `evaluate` by design, the difference is tested here too:
- no rule decides: the choice is the pipeline's default (a read-only tool runs, any other
  asks; a server's tools ask);
- the choice holds outside conversations and task runs: inside one, that conversation's or
  task's rules join it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from app.core.approval import Verdict
from app.core.rules import (
    BUILTIN,
    Matcher,
    Rule,
    RuleBook,
    RuleChoice,
    RuleDecision,
    Scope,
    choice_for,
    forget_server_choice,
    rule_from_legacy_pattern,
    server_choice,
    set_choice,
    set_server_choice,
    stricter,
    unruled_decision,
)
from tests.test_approval import manifest, verdict
from tools.spec import Operation, Subject


@dataclass(frozen=True)
class Tool:
    name: str
    source: str
    read_only: bool


TOOLS = (
    Tool("fs_write_file", BUILTIN, False),
    Tool("fs_read_file", BUILTIN, True),
    Tool("docker_prune", BUILTIN, False),
    Tool("mcp__git__log", "mcp:git", False),
    Tool("mcp__git__status", "mcp:git", True),
    Tool("pack_convert", "pack:extra.py", False),
)
TOOL_PATTERNS = ("fs_*", "docker_*", "mcp__git__*", "mcp__*", "*", "*_file", "pack_convert")
SOURCE_PATTERNS = (BUILTIN, "mcp:git", "mcp:*", "pack:*", "*", "mcp:other")
NARROW = (
    Matcher(kind="folder", value="/srv/notes"),
    Matcher(kind="path", value="/srv/*.txt"),
    Matcher(kind="site", value="https://*.example.com:443"),
    Matcher(kind="account", value="Docker · prod"),
    Matcher(kind="command", value="git status"),
)
#: A call whose arguments no narrow rule of the table covers.
UNCOVERED = Subject(
    paths=("/elsewhere/notes.md",),
    site="https://other.org:443",
    account="Docker · dev",
    command="whoami",
)
CONVERSATIONS = ("c1", "c2")
TASKS = ("t1",)


def random_rule(rng: random.Random, tools: tuple[Tool, ...] = TOOLS) -> Rule:
    if rng.random() < 0.5:  # the tool's own name and source: what the pages write
        tool = rng.choice(tools)
        name, source = tool.name, tool.source
    else:
        name = rng.choice(TOOL_PATTERNS + tuple(t.name for t in tools))
        source = rng.choice(SOURCE_PATTERNS)
    matcher = Matcher() if rng.random() < 0.6 else rng.choice(NARROW)
    roll = rng.random()
    scope, conversation, task = Scope.ALWAYS, None, None
    if roll < 0.2:
        scope, conversation = Scope.CONVERSATION, rng.choice(CONVERSATIONS)
    elif roll < 0.3:
        scope, task = Scope.TASK, rng.choice(TASKS)
    return Rule(
        tool=name,
        source=source,
        matcher=matcher,
        decision=rng.choice(list(RuleDecision)),
        scope=scope,
        conversation_id=conversation,
        task_id=task,
    )


def books(count: int = 500, seed: int = 27) -> list[list[Rule]]:
    rng = random.Random(seed)
    return [[random_rule(rng) for _ in range(rng.randint(0, 7))] for _ in range(count)]


BOOKS = books()


def own_rule(rule: Rule, tool: Tool) -> bool:
    return (
        rule.tool == tool.name
        and rule.source == tool.source
        and rule.matcher.kind == "any"
        and rule.scope is Scope.ALWAYS
    )


def promoted(rules: list[Rule], *, conversation: str | None = None, task: str | None = None):
    """The rules of one conversation (or task) as if they held always."""
    out = []
    for rule in rules:
        if (conversation and rule.conversation_id == conversation) or (
            task and rule.task_id == task
        ):
            rule = rule.model_copy(
                update={"scope": Scope.ALWAYS, "conversation_id": None, "task_id": None}
            )
        out.append(rule)
    return out


def test_the_tools_page_shows_what_evaluate_decides_for_arguments_no_narrow_rule_covers():
    decided = 0
    for rules in BOOKS:
        book = RuleBook(None, rules)
        for tool in TOOLS:
            shown = choice_for(book, tool.name, tool.source, read_only=tool.read_only)
            found = book.evaluate(tool.name, tool.source, UNCOVERED)
            assert shown.decision is (found.decision or unruled_decision(tool.read_only)), (
                rules,
                tool,
            )
            decided += found.decision is not None
    assert decided > 400  # the table exercises rules, not only the default


def test_the_choice_names_the_wildcard_rule_only_when_no_own_rule_decides_it():
    named = own = 0
    for rules in BOOKS:
        book = RuleBook(None, rules)
        for tool in TOOLS:
            shown = choice_for(book, tool.name, tool.source, read_only=tool.read_only)
            decided_by_own = any(
                own_rule(r, tool) and r.decision is shown.decision for r in rules
            )
            if decided_by_own:
                own += 1
                assert shown.set_by is None
            elif shown.set_by is not None:
                named += 1
                assert not own_rule(shown.set_by, tool)
                assert shown.set_by.decision is shown.decision
                assert shown.set_by.applies_to(tool.name, tool.source, UNCOVERED, None)
            else:  # nothing decides: the default
                assert book.evaluate(tool.name, tool.source, UNCOVERED).decision is None
    assert named > 50 and own > 50


def test_with_no_rule_the_choice_is_what_the_pipeline_does_by_default():
    """By design `evaluate` says nothing here; the page shows the pipeline's default."""
    empty = RuleBook(None)
    for ops, read_only in (
        ({Operation.READ}, True),
        ({Operation.UPDATE}, False),
        ({Operation.READ, Operation.EXECUTE}, False),
        ({Operation.DELETE}, False),
    ):
        tool = manifest("fs_thing", *ops)
        assert tool.read_only is read_only
        assert empty.evaluate(tool.name, BUILTIN, UNCOVERED).decision is None
        shown = choice_for(empty, tool.name, read_only=tool.read_only)
        assert shown == RuleChoice(unruled_decision(read_only))
        assert shown.decision.value == verdict(tool).value


def test_inside_a_conversation_or_task_run_its_own_rules_join_the_choice():
    """By design the page shows what holds outside any conversation or task run."""
    differs = 0
    for rules in BOOKS:
        book = RuleBook(None, rules)
        for tool in TOOLS:
            outside = choice_for(book, tool.name, tool.source, read_only=tool.read_only)
            for conversation in CONVERSATIONS:
                inside = book.evaluate(tool.name, tool.source, UNCOVERED, conversation)
                joined = RuleBook(None, promoted(rules, conversation=conversation))
                expected = choice_for(joined, tool.name, tool.source, read_only=tool.read_only)
                got = inside.decision or unruled_decision(tool.read_only)
                assert got is expected.decision
                differs += got is not outside.decision
            for task in TASKS:
                run = book.evaluate(tool.name, tool.source, UNCOVERED, None, task)
                joined = RuleBook(None, promoted(rules, task=task))
                expected = choice_for(joined, tool.name, tool.source, read_only=tool.read_only)
                assert (run.decision or unruled_decision(tool.read_only)) is expected.decision
    assert differs > 20


def test_set_choice_makes_the_choice_unless_a_stricter_wildcard_rule_decides():
    for rules in BOOKS[:120]:
        for tool in TOOLS:
            for wanted in RuleDecision:
                book = RuleBook(None, rules)
                set_choice(book, tool.name, tool.source, wanted, read_only=tool.read_only)
                after = book.rules()
                shown = choice_for(book, tool.name, tool.source, read_only=tool.read_only)
                if shown.decision is not wanted:
                    assert shown.set_by is not None and stricter(shown.decision, wanted)
                others = [r for r in rules if not own_rule(r, tool)]
                assert [r for r in after if not own_rule(r, tool)] == others
                assert len(after) - len(others) <= 1


def test_set_choice_writes_a_rule_only_when_the_default_would_not_hold():
    book = RuleBook(None)
    set_choice(book, "fs_write_file", BUILTIN, RuleDecision.ASK, read_only=False)
    set_choice(book, "fs_read_file", BUILTIN, RuleDecision.ALLOW, read_only=True)
    assert book.rules() == []
    set_choice(book, "fs_read_file", BUILTIN, RuleDecision.ASK, read_only=True)
    assert [(r.tool, r.decision) for r in book.rules()] == [("fs_read_file", RuleDecision.ASK)]
    assert book.rules()[0].origin == "Settings → Tools"

    # "Ask" under a wildcard allow needs its own rule, or the wildcard would allow
    book = RuleBook(None, [Rule(tool="fs_*", decision=RuleDecision.ALLOW)])
    assert choice_for(book, "fs_write_file", read_only=False).set_by is not None
    set_choice(book, "fs_write_file", BUILTIN, RuleDecision.ASK, read_only=False)
    assert choice_for(book, "fs_write_file", read_only=False) == RuleChoice(RuleDecision.ASK)


def test_set_choice_leaves_the_tools_narrow_conversation_and_task_rules():
    kept = [
        Rule(tool="fs_write_file", decision=RuleDecision.ALLOW, matcher=NARROW[0]),
        Rule(
            tool="fs_write_file",
            decision=RuleDecision.ALLOW,
            scope=Scope.CONVERSATION,
            conversation_id="c1",
        ),
        Rule(tool="fs_write_file", decision=RuleDecision.DENY, scope=Scope.TASK, task_id="t1"),
    ]
    book = RuleBook(None, [*kept, Rule(tool="fs_write_file", decision=RuleDecision.DENY)])
    assert choice_for(book, "fs_write_file", read_only=False).decision is RuleDecision.DENY
    set_choice(book, "fs_write_file", BUILTIN, RuleDecision.ASK, read_only=False)
    assert book.rules() == kept


def test_a_rule_book_file_is_written_once_per_choice(tmp_path):
    path = tmp_path / "rules.json"
    book = RuleBook(path)
    set_choice(book, "fs_write_file", BUILTIN, RuleDecision.ALLOW, read_only=False)
    set_choice(book, "fs_write_file", BUILTIN, RuleDecision.DENY, read_only=False)
    again = RuleBook(path)
    assert [(r.tool, r.decision) for r in again.rules()] == [("fs_write_file", RuleDecision.DENY)]
    assert choice_for(again, "fs_write_file", read_only=False) == RuleChoice(RuleDecision.DENY)


# ---- MCP servers ----------------------------------------------------------------------------

SERVERS = ("git", "My-Git")
SERVER_TOOLS = (
    Tool("mcp__git__log", "mcp:git", False),
    Tool("mcp__my_git__log", "mcp:My-Git", False),
)
#: A tool of each server that no rule of the table names on its own.
FRESH = {"git": "mcp__git__fresh", "My-Git": "mcp__my_git__fresh"}
SERVER_PATTERNS = ("*", "mcp__*", "mcp__git__*", "mcp__my_git__*", "mcp__git__log")
SERVER_SOURCES = ("mcp:git", "mcp:My-Git", "mcp:my_git", "mcp:*", "*", BUILTIN)


def server_books(count: int = 300, seed: int = 28) -> list[list[Rule]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        rules = []
        for _ in range(rng.randint(0, 6)):
            if rng.random() < 0.3:
                rule = random_rule(rng, SERVER_TOOLS)
            else:
                rule = random_rule(rng, SERVER_TOOLS).model_copy(
                    update={
                        "tool": rng.choice(SERVER_PATTERNS),
                        "source": rng.choice(SERVER_SOURCES),
                    }
                )
            rules.append(rule)
        out.append(rules)
    return out


SERVER_BOOKS = server_books()


def test_the_mcp_page_shows_what_evaluate_decides_for_every_tool_of_the_server():
    decided = 0
    for rules in SERVER_BOOKS:
        book = RuleBook(None, rules)
        for server in SERVERS:
            found = book.evaluate(FRESH[server], f"mcp:{server}", UNCOVERED)
            shown = server_choice(book, server)
            # by design: with no rule a server's tools ask (a read-only one runs once the
            # server is trusted; the page shows the server as a whole)
            assert shown.decision is (found.decision or RuleDecision.ASK), (rules, server)
            decided += found.decision is not None
    assert decided > 150


def test_set_server_choice_makes_the_choice_unless_a_stricter_wildcard_rule_decides():
    for rules in SERVER_BOOKS[:150]:
        for server in SERVERS:
            for wanted in RuleDecision:
                book = RuleBook(None, rules)
                set_server_choice(book, server, wanted)
                shown = server_choice(book, server)
                if shown.decision is not wanted:
                    assert shown.set_by is not None and stricter(shown.decision, wanted)
                found = book.evaluate(FRESH[server], f"mcp:{server}", UNCOVERED)
                assert (found.decision or RuleDecision.ASK) is shown.decision


def test_set_server_choice_replaces_the_servers_rules_and_their_earlier_form():
    legacy = rule_from_legacy_pattern("mcp__web__*", RuleDecision.DENY)
    other = Rule(tool="*", source="mcp:other", decision=RuleDecision.ALLOW)
    book = RuleBook(None, [legacy, other])
    assert server_choice(book, "web") == RuleChoice(RuleDecision.DENY)
    set_server_choice(book, "web", RuleDecision.ALLOW)
    assert [(r.tool, r.source, r.decision) for r in book.rules()] == [
        ("*", "mcp:other", RuleDecision.ALLOW),
        ("*", "mcp:web", RuleDecision.ALLOW),
    ]
    assert book.rules()[1].origin == "Settings → MCP servers"
    set_server_choice(book, "web", RuleDecision.ASK)  # the default: no rule
    assert book.rules() == [other]


def test_a_wildcard_rule_decides_a_server_and_is_named():
    everything = Rule(tool="*", source="mcp:*", decision=RuleDecision.DENY)
    book = RuleBook(None, [everything])
    assert server_choice(book, "web") == RuleChoice(RuleDecision.DENY, everything)
    one_tool = Rule(tool="mcp__web__search", source="mcp:web", decision=RuleDecision.DENY)
    assert server_choice(RuleBook(None, [one_tool]), "web") == RuleChoice(RuleDecision.ASK)


def test_forgetting_a_server_removes_only_its_own_rules():
    mine = Rule(tool="*", source="mcp:web", decision=RuleDecision.ALLOW)
    narrow = Rule(tool="*", source="mcp:web", decision=RuleDecision.ASK, matcher=NARROW[2])
    wildcard = Rule(tool="*", source="mcp:*", decision=RuleDecision.ALLOW)
    book = RuleBook(None, [mine, narrow, wildcard])
    forget_server_choice(book, "web")
    assert book.rules() == [narrow, wildcard]


def test_the_pages_verdicts_match_the_pipelines_for_built_in_tools():
    """The same rule book, seen by the Tools page and by the pipeline's decision."""
    for rules in BOOKS[:100]:
        for tool in (t for t in TOOLS if t.source == BUILTIN):
            ops = {Operation.READ} if tool.read_only else {Operation.UPDATE}
            decided = verdict(manifest(tool.name, *ops), rules)
            shown = choice_for(RuleBook(None, rules), tool.name, read_only=tool.read_only)
            assert decided is Verdict(shown.decision.value), (rules, tool)


def test_setting_the_same_choice_again_keeps_the_rule_as_it_was(tmp_path):
    book = RuleBook(tmp_path / "rules.json")
    set_choice(book, "fs_write_file", BUILTIN, RuleDecision.DENY, read_only=False)
    [before] = book.rules()
    set_choice(
        book, "fs_write_file", BUILTIN, RuleDecision.DENY, read_only=False, origin="elsewhere"
    )
    assert book.rules() == [before]


def test_a_servers_earlier_rule_that_no_call_matches_does_not_hide_the_deciding_wildcard():
    # "category:mcp:my_git" became source mcp:my_git, which calls of "My-Git" do not carry
    inert = rule_from_legacy_pattern("category:mcp:my_git", RuleDecision.DENY)
    wildcard = Rule(tool="*", source="mcp:*", decision=RuleDecision.DENY)
    book = RuleBook(None, [inert, wildcard])
    assert server_choice(book, "My-Git") == RuleChoice(RuleDecision.DENY, wildcard)
    set_server_choice(book, "My-Git", RuleDecision.ALLOW)  # the earlier form is cleaned up
    assert inert not in book.rules() and wildcard in book.rules()
    assert server_choice(book, "My-Git") == RuleChoice(RuleDecision.DENY, wildcard)
