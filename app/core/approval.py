"""What an approval question carries and what the user can answer.

Only the user (through an approver) can grant approval; nothing a tool returns or a web
page says reaches this module. The decision itself is made by the call pipeline
(app/core/pipeline.py) from the rules (app/core/rules.py) and the trust in the tool's
source (app/core/sources.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the chat view imports this module at start-up
    from app.core.rules import Rule


class Verdict(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


class Decision(StrEnum):
    ALLOW_ONCE = "allow_once"
    #: Allow calls like this one (the narrowest proposal) for the rest of the conversation.
    ALLOW_CONVERSATION = "allow_conversation"
    #: Always allow calls like this one: the narrowest proposal (this folder, this site…).
    ALWAYS_ALLOW = "always_allow"
    #: Always allow this tool with any arguments: the deliberate broad choice.
    ALWAYS_ALLOW_ANY = "always_allow_any"
    #: Trust the tool's source (this version of the MCP server or pack) and allow this call.
    TRUST_SOURCE = "trust_source"
    DENY = "deny"

    @property
    def allows(self) -> bool:
        return self is not Decision.DENY


@dataclass(frozen=True)
class Proposal:
    """A rule an approval card offers, with what it covers in plain words."""

    label: str
    rule: Rule
    #: More rules added with it (a command line's other simple commands).
    extra: tuple[Rule, ...] = ()

    @property
    def rules(self) -> tuple[Rule, ...]:
        return (self.rule, *self.extra)


@dataclass
class ApprovalRequest:
    call_id: str
    tool: str
    category: str
    operations: list[str]
    arguments: dict[str, Any]
    preview: str | None = None
    #: One plain-language line on top of the card ("Delete container web-1 on host work").
    summary: str = ""
    #: The account, host or cluster the call acts on ("Docker · prod-host").
    target: str | None = None
    #: Where the tool comes from, in plain words, and whether the user trusts that source.
    source: str = "Deskhand"
    source_id: str = "builtin"
    trusted: bool = True
    #: Why this call asks (a new site, an untrusted source, a rule that says ask…).
    reason: str | None = None
    #: Rules an "always" answer would add, narrowest first; empty when none may cover it.
    proposals: list[Proposal] = field(default_factory=list)
    #: No rule and no --yes covers this call (it makes something executable, …).
    never_covered: bool = False
    #: The full arguments as JSON, control characters made visible.
    arguments_text: str = ""
    conversation_id: str | None = None
    #: The sub-agent whose call this is ("Researcher"); None for the conversation's own.
    #: Its question is answered once: no rule, trust or conversation grant comes of it.
    agent: str | None = None

    def choices(self) -> list[Decision]:
        """What the user may answer to this request, in the order cards show them."""
        if self.never_covered or self.agent:
            return [Decision.ALLOW_ONCE, Decision.DENY]
        if not self.trusted:
            return [Decision.ALLOW_ONCE, Decision.TRUST_SOURCE, Decision.DENY]
        choices = [Decision.ALLOW_ONCE]
        if self.proposals:
            if self.conversation_id is not None:  # `tools call` has no conversation
                choices.append(Decision.ALLOW_CONVERSATION)
            choices.append(Decision.ALWAYS_ALLOW)
            if self.proposals[-1].rule.matcher.narrow is False and len(self.proposals) > 1:
                choices.append(Decision.ALWAYS_ALLOW_ANY)
        choices.append(Decision.DENY)
        return choices


Approver = Callable[[ApprovalRequest], Awaitable[Decision]]


async def deny_all(_: ApprovalRequest) -> Decision:
    """Non-interactive runs without --yes: every call that would change something is refused."""
    return Decision.DENY


async def allow_all(_: ApprovalRequest) -> Decision:
    """--yes: the user approved everything up front (the pipeline never lets it cover what
    no rule may cover)."""
    return Decision.ALLOW_ONCE
