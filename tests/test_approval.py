"""What the pipeline decides for a call of a built-in tool when nothing about its arguments
matters: by its declared operations, then by the rules (earlier versions' per-tool lists
included, as `rule_from_legacy_pattern` turns them into rules)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

from app.core.approval import Verdict, deny_all
from app.core.pipeline import CallFacts, CallPipeline, ToolEnvironment
from app.core.rules import Rule, RuleBook, RuleDecision, rule_from_legacy_pattern
from app.core.sources import TrustStore
from tools.registry import BUILTIN_SOURCE, ToolRegistry
from tools.runner import ToolRunner
from tools.spec import Operation, Subject, ToolManifest


class P(BaseModel):
    pass


def manifest(name: str, *ops: Operation, category: str = "fs") -> ToolManifest:
    return ToolManifest(
        name=name,
        category=category,
        description="x.",
        params=P,
        operations=frozenset(ops),
        impl="x:y",
    )


def verdict(tool: ToolManifest, rules: Iterable[Rule] = ()) -> Verdict:
    """`CallPipeline.decide` for a call of the built-in `tool` whose arguments no narrow rule
    covers and that nothing escalates."""
    book = RuleBook(None, rules)
    pipeline = CallPipeline(
        ToolRunner(ToolRegistry()),
        ToolEnvironment(home=Path()),
        rules=book,
        trust=TrustStore(None),
        approver=deny_all,
    )
    facts = CallFacts(
        manifest=tool,
        params=None,
        source=BUILTIN_SOURCE,
        trusted=True,
        subject=Subject(),
        escalation=None,
    )
    facts.evaluation = book.evaluate(tool.name, BUILTIN_SOURCE.id, facts.subject)
    return pipeline.decide(facts).verdict


def legacy(always_allow: Iterable[str] = (), deny: Iterable[str] = ()) -> list[Rule]:
    return [rule_from_legacy_pattern(p, RuleDecision.ALLOW) for p in always_allow] + [
        rule_from_legacy_pattern(p, RuleDecision.DENY) for p in deny
    ]


READ = manifest("fs_read_file", Operation.READ)
WRITE = manifest("fs_write_file", Operation.CREATE, Operation.UPDATE)
DELETE = manifest("docker_remove", Operation.DELETE, category="docker")
MIXED = manifest("fs_sync", Operation.READ, Operation.EXECUTE)


def test_without_rules_reads_run_and_everything_else_asks():
    assert verdict(READ) is Verdict.ALLOW
    assert verdict(WRITE) is Verdict.ASK
    assert verdict(DELETE) is Verdict.ASK
    assert verdict(MIXED) is Verdict.ASK


def test_legacy_always_allow_by_name_glob_and_category():
    assert verdict(WRITE, legacy(always_allow=["fs_write_file"])) is Verdict.ALLOW
    assert verdict(DELETE, legacy(always_allow=["docker_*"])) is Verdict.ALLOW
    assert verdict(WRITE, legacy(always_allow=["category:fs"])) is Verdict.ALLOW
    assert verdict(DELETE, legacy(always_allow=["category:fs"])) is Verdict.ASK


def test_legacy_deny_beats_allow_even_for_reads():
    rules = legacy(always_allow=["fs_*", "category:fs"], deny=["fs_write_file"])
    assert verdict(WRITE, rules) is Verdict.DENY
    assert verdict(READ, rules) is Verdict.ALLOW
    assert verdict(READ, legacy(deny=["category:fs"])) is Verdict.DENY


def test_an_ask_rule_makes_even_a_read_ask():
    assert verdict(READ, [Rule(tool="fs_*", decision=RuleDecision.ASK)]) is Verdict.ASK
