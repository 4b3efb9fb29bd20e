from __future__ import annotations

from pydantic import BaseModel

from app.core.approval import ApprovalPolicy, Verdict
from tools.spec import Operation, ToolManifest


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


READ = manifest("fs_read_file", Operation.READ)
WRITE = manifest("fs_write_file", Operation.CREATE, Operation.UPDATE)
DELETE = manifest("docker_remove", Operation.DELETE, category="docker")
MIXED = manifest("fs_sync", Operation.READ, Operation.EXECUTE)


def test_defaults_read_runs_everything_else_asks():
    policy = ApprovalPolicy()
    assert policy.verdict(READ) is Verdict.ALLOW
    assert policy.verdict(WRITE) is Verdict.ASK
    assert policy.verdict(DELETE) is Verdict.ASK
    assert policy.verdict(MIXED) is Verdict.ASK


def test_always_allow_by_name_glob_and_category():
    assert ApprovalPolicy(always_allow=["fs_write_file"]).verdict(WRITE) is Verdict.ALLOW
    assert ApprovalPolicy(always_allow=["docker_*"]).verdict(DELETE) is Verdict.ALLOW
    assert ApprovalPolicy(always_allow=["category:fs"]).verdict(WRITE) is Verdict.ALLOW
    assert ApprovalPolicy(always_allow=["category:fs"]).verdict(DELETE) is Verdict.ASK


def test_deny_beats_allow_even_for_reads():
    policy = ApprovalPolicy(always_allow=["fs_*", "category:fs"], deny=["fs_write_file"])
    assert policy.verdict(WRITE) is Verdict.DENY
    assert policy.verdict(READ) is Verdict.ALLOW
    assert ApprovalPolicy(deny=["category:fs"]).verdict(READ) is Verdict.DENY


