"""The approval policy: which calls run, which ask the user, which are refused.

Only the user (through an approver) can grant approval; nothing a tool returns or a web
page says reaches this module.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tools.spec import Operation, ToolManifest


class Verdict(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


class Decision(StrEnum):
    ALLOW_ONCE = "allow_once"
    ALWAYS_ALLOW = "always_allow"
    DENY = "deny"


def _matches(manifest: ToolManifest, patterns: Iterable[str]) -> bool:
    """A rule names a tool, a glob over names ("docker_*"), or a category ("category:fs")."""
    for pattern in patterns:
        if pattern.startswith("category:"):
            if fnmatch.fnmatchcase(manifest.category, pattern.removeprefix("category:")):
                return True
        elif fnmatch.fnmatchcase(manifest.name, pattern):
            return True
    return False


@dataclass
class ApprovalPolicy:
    always_allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)

    def verdict(self, manifest: ToolManifest) -> Verdict:
        if _matches(manifest, self.deny):  # deny wins over everything
            return Verdict.DENY
        if manifest.operations <= {Operation.READ}:
            return Verdict.ALLOW
        if _matches(manifest, self.always_allow):
            return Verdict.ALLOW
        return Verdict.ASK

    def allow_always(self, name: str) -> None:
        if name not in self.always_allow:
            self.always_allow.append(name)


@dataclass
class ApprovalRequest:
    call_id: str
    tool: str
    category: str
    operations: list[str]
    arguments: dict[str, Any]
    preview: str | None = None


Approver = Callable[[ApprovalRequest], Awaitable[Decision]]


async def deny_all(_: ApprovalRequest) -> Decision:
    """Non-interactive runs without --yes: every call that would change something is refused."""
    return Decision.DENY


async def allow_all(_: ApprovalRequest) -> Decision:
    """--yes: the user approved everything up front."""
    return Decision.ALLOW_ONCE
