"""The one way a tool call runs: validate → classify → decide → ask → run → redact → cap →
label → record.

The agent loop, `deskhand tools call`, the window and scheduled work all call
`CallPipeline.call`; nothing else may hand a call to the runner (tests/test_pipeline.py
checks every call site). Deskhand decides how dangerous a call is: a tool's declared
operations can only make it stricter, a third-party source is untrusted until the user
trusts it, rules look at what the call acts on (its subject), and some calls are never
covered by any rule or `--yes`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core import untrusted
from app.core.approval import ApprovalRequest, Approver, Decision, Proposal, Verdict
from app.core.events import AgentEvent, ApprovalDecided, ApprovalRequested, ToolProgress
from app.core.rules import Evaluation, Matcher, Rule, RuleBook, RuleDecision, Scope
from app.core.sources import TrustStore, describe, folder_fingerprint
from app.core.visible import one_line, visible
from integrations.spec import Account, AccountDirectory
from tools.redact import TRIPWIRE, Tripwire
from tools.registry import ToolRegistry, ToolSource
from tools.runner import Classification, InvalidCall, ToolRunner
from tools.session import ToolSession
from tools.spec import (
    Escalation,
    Operation,
    Progress,
    Subject,
    ToolContext,
    ToolManifest,
    ToolResult,
)
from tools.views import JobsView, SettingsView

if TYPE_CHECKING:
    from app.core.jobs import JobBook

log = logging.getLogger(__name__)

DECLINED = "The user declined this call. Do not retry it; ask the user or choose another way."
DENY_RULE = "This call is blocked by a deny rule in Deskhand's settings."
NEVER_BY_YES = (
    "{tool} was not run: {reason}. Deskhand never approves this automatically (not even with "
    "--yes); run it where someone can answer the question."
)

Emit = Callable[[AgentEvent], None]

@dataclass
class ToolEnvironment:
    """What tools reach while running, handed to every call's ToolContext."""

    home: Path
    settings: SettingsView | None = None
    account_resolver: Callable[[str], Account] | None = None
    accounts: AccountDirectory | None = None
    #: conversation id → the services mapping tools reach with ctx.service(name).
    services: Callable[[str | None], Mapping[str, object] | None] = lambda _cid: None
    #: skill name → its folder, to fingerprint skills' scripts as a source.
    skill_folder: Callable[[str], Path | None] = lambda _name: None
    #: Blocks until every stored secret is known to the tripwire (True when done).
    secrets_ready: Callable[[], bool] | None = None
    #: A command-line run (no window): with no folders chosen, file tools may use the
    #: current folder; in the window they wait for the user's choice.
    headless: bool = True


@dataclass(frozen=True)
class ChildBounds:
    """A sub-agent's pipeline (app/core/delegation.py): the only tools it has, its profile
    (allow rules, in memory), and its parent. Each of its calls is decided twice — by the
    parent's rules, in the parent's conversation, and by the profile — and the stricter
    answer counts, so a child never gets more than both allow."""

    agent: str
    tools: frozenset[str]
    profile: RuleBook
    parent_conversation_id: str | None
    #: What the child reads counts for the parent at once (its taint flows up, §5.8).
    parent_session: ToolSession


@dataclass
class CallFacts:
    """What Deskhand worked out about one call before deciding."""

    manifest: ToolManifest
    params: Any
    source: ToolSource
    trusted: bool
    subject: Subject
    escalation: Escalation | None
    evaluation: Evaluation = field(default_factory=lambda: Evaluation(None))
    #: A sub-agent's call: what its agent's profile says (ChildBounds).
    profile_evaluation: Evaluation = field(default_factory=lambda: Evaluation(None))
    #: The card's words from the tool's own hooks (only for a call that asks).
    summary: str | None = None
    preview: str | None = None


@dataclass
class CallOutcome:
    result: ToolResult
    #: "ok", "error", "denied", "invalid"
    status: str
    manifest: ToolManifest | None = None


@dataclass
class _Verdict:
    verdict: Verdict
    reason: str | None = None
    never_covered: bool = False


class CallPipeline:
    def __init__(
        self,
        runner: ToolRunner,
        env: ToolEnvironment,
        *,
        rules: RuleBook,
        trust: TrustStore,
        approver: Approver,
        auto_approve: bool = False,
        recorder: Any = None,
        task_id: str | None = None,
        tripwire: Tripwire = TRIPWIRE,
        bounds: ChildBounds | None = None,
        delegate: Delegate | None = None,
        jobs: JobBook | None = None,
    ) -> None:
        """`bounds`: a sub-agent's pipeline. `delegate`: how `delegate_agent` hands a task
        to a sub-agent (None: this conversation cannot delegate). `jobs`: where the job
        tools start background calls (none for a sub-agent: neither is given with bounds)."""
        self.runner = runner
        self.registry: ToolRegistry = runner.registry
        self.tripwire = tripwire
        self.env = env
        self.rules = rules
        self.trust = trust
        self.approver = approver
        #: --yes: what would ask runs, except what no rule may cover.
        self.auto_approve = auto_approve
        self.recorder = recorder
        #: A scheduled task's run: that task's profile rules count too.
        self.task_id = task_id
        #: call id → what a tool said after Stop (e.g. "the command may still be running").
        self.stopped_results: dict[str, ToolResult] = {}
        self.bounds = bounds
        self.delegate = None if bounds is not None else delegate
        self.jobs = None if bounds is not None else jobs

    # ---- the pipeline --------------------------------------------------------------------

    async def call(
        self,
        call_id: str,
        name: str,
        arguments: str | dict[str, Any] | None,
        *,
        session: ToolSession,
        conversation_id: str | None = None,
        emit: Emit = lambda _event: None,
        for_model: bool = True,
    ) -> CallOutcome:
        """Runs one call. `for_model` False (a person called the tool directly) leaves
        external content unlabelled: the label speaks to a model."""
        try:
            manifest, params = self.validate(name, arguments, session)
        except InvalidCall as exc:
            return CallOutcome(self.runner.finish(ToolResult.failure(str(exc))), "invalid")
        session.activate([manifest.name])
        # what this conversation read before (another process, a note injected) counts
        self._restore_taint(session, conversation_id)
        # nothing about this call (card, result) is shown before the tripwire knows every
        # stored secret; immediate when nothing is stored or all is loaded
        await self.secrets_known()
        source = self._source(manifest, params)
        ctx = self._context(call_id, manifest, session, conversation_id, emit)
        facts = await self.classify(manifest, params, ctx, source, conversation_id)
        verdict = self.decide(facts)
        if verdict.verdict is Verdict.DENY:
            self._decided(call_id, manifest.name, Decision.DENY, "rule", conversation_id, emit)
            return CallOutcome(ToolResult.failure(DENY_RULE), "denied", manifest)
        if verdict.verdict is Verdict.ASK:
            refused = await self._ask(call_id, facts, verdict, conversation_id, emit)
            if refused is not None:
                return CallOutcome(refused, "denied", manifest)
        try:
            result = await self.runner.run_validated(manifest, params, ctx)
        except asyncio.CancelledError:
            if ctx.late_result is not None:
                late = await self._redacted_when_ready(ctx.late_result)
                if late is not None:
                    # kept for the history ("Cancelled. <its words>"): labelled and counted
                    # as read like any other result
                    late = await self._stopped_result(late, facts, session, for_model)
                    self.keep_taint(conversation_id, call_id, self._taint_of(late, facts))
                    self.stopped_results[call_id] = late
            raise
        result = await self._after_run(result, facts, session, for_model)
        self.keep_taint(conversation_id, call_id, self._taint_of(result, facts))
        return CallOutcome(result, "ok" if result.ok else "error", manifest)

    # ---- 1. validate -----------------------------------------------------------------------

    def validate(
        self, name: str, arguments: str | dict[str, Any] | None, session: ToolSession
    ) -> tuple[ToolManifest, Any]:
        if self.bounds is not None and name not in self.bounds.tools:
            from app.core.agents import FORBIDDEN_WHY, forbidden_for_children

            if forbidden_for_children(name):
                raise InvalidCall(
                    f"{name} cannot be used here: {FORBIDDEN_WHY}. Do the work with your "
                    "own tools, or say in your answer what is left to do."
                )
            raise InvalidCall(f"{name} is not among the tools of the agent {self.bounds.agent}")
        if name in self.registry and not session.enabled(name):
            raise InvalidCall(f"{name} is turned off in Deskhand's settings")
        source = self.registry.source_of(name)
        if source.kind in ("pack", "entrypoint") and not self.trust.is_enabled(source):
            # disabled after it was imported (or the file changed): nothing of it runs
            raise InvalidCall(f"{name} comes from {describe(source)}, which is disabled")
        return self.runner.validate(name, arguments)

    # ---- 2. classify -----------------------------------------------------------------------

    async def classify(
        self,
        manifest: ToolManifest,
        params: Any,
        ctx: ToolContext,
        source: ToolSource,
        conversation_id: str | None,
    ) -> CallFacts:
        """The facts of one call, rules evaluated, from one runner hop: the tool's hooks
        say what it does, and the card's words are asked for only if the call will ask."""
        trusted = self.trust.is_trusted(source, manifest.name)
        facts = CallFacts(manifest, params, source, trusted, Subject(), None)

        def asks(escalation: Escalation | None, subject: Subject) -> bool:
            facts.escalation, facts.subject = escalation, subject
            facts.evaluation = self.rules.evaluate(
                manifest.name, source.id, subject, self._rules_conversation(conversation_id),
                self.task_id,
            )
            if self.bounds is not None:
                facts.profile_evaluation = self.bounds.profile.evaluate(
                    manifest.name, source.id, subject
                )
            verdict = self.decide(facts)  # --yes answers what it covers without a card
            yes = self.auto_approve and not verdict.never_covered
            return verdict.verdict is Verdict.ASK and not yes

        # a third party cannot describe its calls into the reach of a narrow rule
        own_subject = None if source.builtin else Subject(target=describe(source))
        found: Classification = await self.runner.classify(
            manifest, params, ctx, subject=own_subject, asks=asks
        )
        facts.summary, facts.preview = found.summary, found.preview
        return facts

    def _source(self, manifest: ToolManifest, params: Any) -> ToolSource:
        source = self.registry.source_of(manifest.name)
        if source.builtin and manifest.name == "skill_run_script":
            # the built-in runner runs the skill's own scripts: the skill is the source
            skill = str(getattr(params, "name", ""))
            folder = self.env.skill_folder(skill)
            fingerprint = folder_fingerprint(folder) if folder else "missing"
            where = f"the skill folder {folder}" if folder else "a skill that is not installed"
            return ToolSource("skill", f"skill:{skill}", fingerprint=fingerprint, origin=where)
        return source

    # ---- 3. decide -------------------------------------------------------------------------

    def decide(self, facts: CallFacts) -> _Verdict:
        """What the rules say; for a sub-agent, the stricter of what the parent's rules and
        its agent's profile say (deny > ask > allow)."""
        verdict = self._decide_by(facts, facts.evaluation)
        if self.bounds is None:
            return verdict
        bound = self._decide_by(facts, facts.profile_evaluation)
        if bound.verdict is Verdict.ASK and verdict.verdict is Verdict.ALLOW:
            why = f"the agent {self.bounds.agent}'s profile does not cover it"
            bound = replace(bound, reason=f"{why} ({bound.reason})" if bound.reason else why)
        return _stricter(verdict, bound)

    def _rules_conversation(self, conversation_id: str | None) -> str | None:
        """Whose conversation rules count: a sub-agent's are its parent's (a grant "in this
        conversation" reaches it only where its profile allows the same)."""
        return self.bounds.parent_conversation_id if self.bounds is not None else conversation_id

    def _decide_by(self, facts: CallFacts, ev: Evaluation) -> _Verdict:
        esc = facts.escalation
        if ev.decision is RuleDecision.DENY:
            return _Verdict(Verdict.DENY, DENY_RULE)
        if esc is not None and esc.never_covered:
            return _Verdict(Verdict.ASK, esc.reason, never_covered=True)
        if not facts.trusted:
            why = self.trust.why_untrusted(facts.source, facts.manifest.name)
            return _Verdict(Verdict.ASK, f"{why}, so each of its calls asks")
        if ev.decision is RuleDecision.ASK and ev.rule is not None:
            return _Verdict(Verdict.ASK, f"a rule says to ask: {ev.rule.describe()}")
        if ev.decision is RuleDecision.ALLOW and ev.rule is not None:
            if esc is None or _covers(ev.rule, esc):
                return _Verdict(Verdict.ALLOW)
            return _Verdict(Verdict.ASK, esc.reason)
        if esc is not None:
            return _Verdict(Verdict.ASK, esc.reason)
        if facts.manifest.operations <= {Operation.READ}:
            return _Verdict(Verdict.ALLOW)
        return _Verdict(Verdict.ASK, _what_it_does(facts.manifest.operations))

    # ---- 4. ask ----------------------------------------------------------------------------

    async def _ask(
        self,
        call_id: str,
        facts: CallFacts,
        verdict: _Verdict,
        conversation_id: str | None,
        emit: Emit,
    ) -> ToolResult | None:
        """None when the call may run; else the result to report instead."""
        name = facts.manifest.name
        if self.auto_approve and not verdict.never_covered:
            self._decided(call_id, name, Decision.ALLOW_ONCE, "yes", conversation_id, emit)
            return None
        request = self.request_for(call_id, facts, verdict, conversation_id)
        emit(ApprovalRequested(request))
        decision = Decision(await self.approver(request))
        if decision not in request.choices():
            decision = Decision.DENY if not decision.allows else Decision.ALLOW_ONCE
        self._decided(call_id, name, decision, "user", conversation_id, emit)
        if decision is Decision.DENY:
            if self.auto_approve and verdict.never_covered:
                reason = verdict.reason or "it is never approved automatically"
                return ToolResult.failure(NEVER_BY_YES.format(tool=name, reason=reason))
            return ToolResult.failure(DECLINED)
        self._remember(decision, request, facts)
        return None

    def request_for(
        self,
        call_id: str,
        facts: CallFacts,
        verdict: _Verdict,
        conversation_id: str | None,
    ) -> ApprovalRequest:
        manifest, params, preview = facts.manifest, facts.params, facts.preview
        arguments = self.tripwire.arguments(params.model_dump(mode="json"))
        proposals = [] if verdict.never_covered or not facts.trusted else _proposals(facts)
        return ApprovalRequest(
            call_id=call_id,
            tool=manifest.name,
            category=manifest.category,
            operations=sorted(manifest.operations),
            arguments=arguments,
            preview=visible(preview) if preview else None,
            summary=one_line(facts.summary)
            if facts.summary
            else written_summary(manifest.name, facts.source, arguments),
            target=one_line(target) if (target := facts.subject.target or facts.subject.account)
            else None,
            source=one_line(describe(facts.source)),
            source_id=one_line(facts.source.id),
            trusted=facts.trusted,
            reason=one_line(verdict.reason, 400) if verdict.reason else None,
            proposals=[replace(p, label=one_line(p.label)) for p in proposals],
            never_covered=verdict.never_covered,
            arguments_text=visible(json.dumps(arguments, indent=2, ensure_ascii=False)),
            conversation_id=conversation_id,
            agent=self.bounds.agent if self.bounds is not None else None,
        )

    def _remember(self, decision: Decision, request: ApprovalRequest, facts: CallFacts) -> None:
        if decision is Decision.TRUST_SOURCE:
            self.trust.trust(facts.source)
            return
        if not request.proposals:
            return
        if decision is Decision.ALWAYS_ALLOW:
            self.rules.add_many(request.proposals[0].rules)
        elif decision is Decision.ALWAYS_ALLOW_ANY:
            self.rules.add_many(request.proposals[-1].rules)
        elif decision is Decision.ALLOW_CONVERSATION and request.conversation_id:
            update = {"scope": Scope.CONVERSATION, "conversation_id": request.conversation_id}
            self.rules.add_many(r.model_copy(update=update) for r in request.proposals[0].rules)

    def _decided(
        self,
        call_id: str,
        tool: str,
        decision: Decision,
        how: str,
        conversation_id: str | None,
        emit: Emit,
    ) -> None:
        emit(ApprovalDecided(call_id, tool, decision, how))
        if self.recorder is not None and conversation_id is not None:
            try:
                self.recorder.record_approval(conversation_id, call_id, tool, decision.value, how)
            except Exception:  # bookkeeping never breaks a call
                log.exception("could not record an approval")

    # ---- 5. run: the context a tool gets --------------------------------------------------

    def _context(
        self,
        call_id: str,
        manifest: ToolManifest,
        session: ToolSession,
        conversation_id: str | None,
        emit: Emit,
    ) -> ToolContext:
        """The context of one call; its questions and site rules are about the tool's own
        source (for a skill's script: the built-in runner)."""
        loop = asyncio.get_running_loop()
        tripwire = self.tripwire
        source = self.registry.source_of(manifest.name)

        def sink(p: Progress) -> None:  # called from pool threads
            event = ToolProgress(p.call_id, tripwire.text(p.message), p.fraction)
            loop.call_soon_threadsafe(emit, event)

        cancel = threading.Event()
        ask = _Confirmer(self, loop, call_id, cancel, manifest, source, conversation_id, emit)
        return ToolContext(
            call_id=call_id,
            home=self.env.home,
            settings=self.env.settings,
            progress_sink=sink,
            account_resolver=self.env.account_resolver,
            integration=manifest.integration,
            cancel_event=cancel,
            registry=self.registry,
            session=session,
            accounts=self.env.accounts,
            services=self.env.services(conversation_id),
            confirm=ask,
            egress_rule=lambda site: self._site_allowed(manifest, source, site, conversation_id),
            egress_deny=lambda site: self._site_denied(manifest, source, site, conversation_id),
            secret_values=tripwire.known,
            headless=self.env.headless,
            delegate=self._delegation(call_id, manifest, session, conversation_id, emit),
            jobs=self._jobs(call_id, manifest, session, conversation_id, emit),
        )

    def _delegation(
        self,
        call_id: str,
        manifest: ToolManifest,
        session: ToolSession,
        conversation_id: str | None,
        emit: Emit,
    ) -> Callable[[str, str], Awaitable[ToolResult]] | None:
        """`ctx.delegate` for Deskhand's own `delegate_agent` in a pipeline that may
        delegate; None for anything else (a sub-agent's pipeline has no `delegate`)."""
        delegate = self.delegate
        if delegate is None or not self.registry.source_of(manifest.name).builtin:
            return None

        def run(agent: str, task: str) -> Awaitable[ToolResult]:
            return delegate(self, ParentCall(call_id, session, conversation_id, emit), agent, task)

        return run

    def _jobs(
        self,
        call_id: str,
        manifest: ToolManifest,
        session: ToolSession,
        conversation_id: str | None,
        emit: Emit,
    ) -> JobsView | None:
        """`ctx.jobs` for Deskhand's own job tools in a pipeline that has jobs."""
        if self.jobs is None or not self.registry.source_of(manifest.name).builtin:
            return None
        from app.core.jobs import JobControl

        return JobControl(self.jobs, self, ParentCall(call_id, session, conversation_id, emit))

    def _site_denied(
        self, manifest: ToolManifest, source: ToolSource, site: str, conversation_id: str | None
    ) -> bool:
        ev = self.rules.evaluate(
            manifest.name,
            source.id,
            Subject(site=site),
            self._rules_conversation(conversation_id),
            self.task_id,
        )
        return ev.decision is RuleDecision.DENY

    def _site_allowed(
        self, manifest: ToolManifest, source: ToolSource, site: str, conversation_id: str | None
    ) -> bool:
        """A deny or ask rule for the site wins; only a narrow allow rule naming it covers."""
        if not self.trust.is_trusted(source, manifest.name):
            return False
        subject = Subject(site=site)
        books = [(self.rules, self._rules_conversation(conversation_id), self.task_id)]
        if self.bounds is not None:  # a sub-agent: its profile must name the site too
            books.append((self.bounds.profile, None, None))
        for book, conversation, task in books:
            ev = book.evaluate(manifest.name, source.id, subject, conversation, task)
            named = ev.rule is not None and ev.rule.matcher.kind == "site"
            if ev.decision is not RuleDecision.ALLOW or not named:
                return False
        return True

    async def confirm_from_tool(
        self,
        call_id: str,
        manifest: ToolManifest,
        source: ToolSource,
        summary: str,
        detail: str,
        conversation_id: str | None,
        emit: Emit,
        number: int,
        never_covered: bool = False,
    ) -> bool:
        """A question a running tool asks (a page sending data during a click…; held
        writes a sandboxed command made to places that run code later, never covered)."""
        call_id = f"{call_id}~{number}"
        if self.auto_approve and not never_covered:
            self._decided(call_id, manifest.name, Decision.ALLOW_ONCE, "yes", conversation_id, emit)
            return True
        request = ApprovalRequest(
            call_id=call_id,
            tool=manifest.name,
            category=manifest.category,
            operations=sorted(manifest.operations),
            arguments={},
            preview=visible(self.tripwire.text(detail)) if detail else None,
            summary=one_line(self.tripwire.text(summary)),
            source=one_line(describe(source)),
            source_id=one_line(source.id),
            trusted=self.trust.is_trusted(source, manifest.name),
            reason="the tool asks before going on",
            conversation_id=conversation_id,
            never_covered=never_covered,
            agent=self.bounds.agent if self.bounds is not None else None,
        )
        emit(ApprovalRequested(request))
        decision = Decision(await self.approver(request))
        allowed = decision is not Decision.DENY
        final = Decision.ALLOW_ONCE if allowed else Decision.DENY
        self._decided(call_id, manifest.name, final, "user", conversation_id, emit)
        return allowed

    async def secrets_known(self) -> None:
        """Waits until the tripwire knows every stored secret (immediate when nothing is
        stored or all is loaded): nothing is shown or sent before."""
        if self.env.secrets_ready is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.env.secrets_ready)

    async def _redacted_when_ready(self, result: ToolResult) -> ToolResult | None:
        """A stopped call's last word, once the tripwire knows every secret; None when that
        takes too long (the history then says only that the call was stopped)."""
        if self.env.secrets_ready is None:
            return result
        loop = asyncio.get_running_loop()
        try:
            ready = await asyncio.wait_for(
                asyncio.shield(loop.run_in_executor(None, self.env.secrets_ready)), 5
            )
        except (TimeoutError, asyncio.CancelledError):
            return None
        return self.runner.redact(result) if ready is not False else None

    async def _stopped_result(
        self, late: ToolResult, facts: CallFacts, session: ToolSession, for_model: bool
    ) -> ToolResult:
        """A stopped call's last word, labelled (also the error text the history quotes of a
        failed one) with what it brings recorded in the session; a bare "cancelled" says
        nothing of what the tool read and stays as it is."""
        said = (late.error or late.content or "").strip().lower()
        if said in {"", "cancelled", "error: cancelled"}:
            return late
        late = await self._after_run(late, facts, session, for_model)
        if not late.ok and for_model and untrusted.MARKER in late.content:
            late.error = late.content  # the history quotes a failed call's error text
        return late

    # ---- 6–8. redact, cap, label, note what was read -----------------------------------

    async def _after_run(
        self, result: ToolResult, facts: CallFacts, session: ToolSession, for_model: bool
    ) -> ToolResult:
        params = _plain(facts.params)
        kind = facts.source.kind
        labelled, origin = untrusted.for_model(facts.manifest, kind, params, result.content)
        note = untrusted.note_origin(facts.manifest, kind, result.data) if result.ok else None
        if origin is None and note is not None:
            # a saved note taken from untrusted content, shown again: still its words
            labelled, origin = untrusted.label(result.content, note), note
        if origin is not None and for_model:  # failed results too: an error text can carry
            result.content = labelled  # a page's words
        sessions = [session]
        if self.bounds is not None:  # what a sub-agent reads, its parent has read (§5.8)
            sessions.append(self.bounds.parent_session)
        for taint_kind, what in self._taint_of(result, facts):
            for reader in sessions:
                if taint_kind == untrusted.PRIVATE:
                    reader.private_data_read = what
                else:
                    reader.last_untrusted_origin = what  # it stays in the model's context
        return result

    # ---- what the conversation read, kept with it (app/core/store/taint.py) -------------

    @staticmethod
    def _taint_of(result: ToolResult, facts: CallFacts) -> list[tuple[str, str]]:
        """(kind, what) this result brings into the conversation: untrusted content (also
        a failed result's: an error text can carry a page's words; also a saved note taken
        from untrusted content, shown again) and private data (also of a failed result: an
        error can quote what the tool read, such as the closest lines of a file)."""
        params, kind = _plain(facts.params), facts.source.kind
        found: list[tuple[str, str]] = []
        origin = untrusted.external_origin(facts.manifest, kind, params)
        if origin is None and result.ok:
            origin = untrusted.note_origin(facts.manifest, kind, result.data)
        if origin is not None:
            found.append((untrusted.UNTRUSTED, untrusted.clean_origin(origin)))
        private = untrusted.private_origin(facts.manifest, kind, params)
        if private is None and result.ok:  # a saved note that may hold private data, shown
            private = untrusted.note_private(facts.manifest, kind, result.data)
        if private is not None:
            found.append((untrusted.PRIVATE, private))
        return found

    def _restore_taint(self, session: ToolSession, conversation_id: str | None) -> None:
        """The session learns what its stored conversation read before: in another process
        (`ask --conversation`, the window, a task) or through a remembered note (never
        forgets anything it knows)."""
        read = getattr(self.recorder, "conversation_taint", None)
        if conversation_id is None or read is None:
            return
        if session.private_data_read and session.last_untrusted_origin:
            return  # nothing stored could add to what it knows
        try:
            untrusted.restore(session, read(conversation_id))
        except Exception:
            log.exception("could not read what this conversation read before")

    def keep_taint(
        self, conversation_id: str | None, call_id: str, found: list[tuple[str, str]]
    ) -> None:
        """Stores what a call's result brought into the conversation, under its call id."""
        add = getattr(self.recorder, "add_taint", None)
        if conversation_id is None or add is None:
            return
        for taint_kind, what in found:
            try:
                add(conversation_id, taint_kind, what, call_id)
            except Exception:  # this session still knows; a later process would not
                log.exception("could not keep what this conversation read")


@dataclass(frozen=True)
class ParentCall:
    """The `delegate_agent` call a sub-agent works for: where its events and taint go."""

    call_id: str
    session: ToolSession
    conversation_id: str | None
    emit: Emit


#: (the parent's pipeline, its call, agent name, task) → the sub-agent's result.
Delegate = Callable[[CallPipeline, ParentCall, str, str], Awaitable[ToolResult]]


def _stricter(a: _Verdict, b: _Verdict) -> _Verdict:
    """deny > ask > allow; between two questions, one no rule may cover wins."""
    rank = {Verdict.DENY: 2, Verdict.ASK: 1, Verdict.ALLOW: 0}
    if rank[a.verdict] != rank[b.verdict]:
        return a if rank[a.verdict] > rank[b.verdict] else b
    if a.verdict is Verdict.ASK:
        first = a if a.never_covered or not b.never_covered else b
        return replace(first, never_covered=a.never_covered or b.never_covered)
    return a


class _Confirmer:
    """`ctx.confirm` for one call: hops from the tool's thread to the loop and waits,
    giving up (False) if the call is cancelled meanwhile."""

    def __init__(
        self,
        pipeline: CallPipeline,
        loop: asyncio.AbstractEventLoop,
        call_id: str,
        cancelled: threading.Event,
        manifest: ToolManifest,
        source: ToolSource,
        conversation_id: str | None,
        emit: Emit,
    ) -> None:
        self._pipeline = pipeline
        self._loop = loop
        self._call_id = call_id
        self._cancelled = cancelled
        self._about = (manifest, source)
        self._conversation_id = conversation_id
        self._emit = emit
        self._count = 0
        self._lock = threading.Lock()
        self._loop_thread = threading.get_ident()  # built on the loop's own thread

    def __call__(self, summary: str, detail: str = "", never_covered: bool = False) -> bool:
        if threading.get_ident() == self._loop_thread:
            # waiting here would block the very loop that must show the question
            raise RuntimeError("ctx.confirm must be called from a tool thread, not the loop")
        with self._lock:
            self._count += 1
            number = self._count
        manifest, source = self._about
        question = self._pipeline.confirm_from_tool(
            self._call_id,
            manifest,
            source,
            summary,
            detail,
            self._conversation_id,
            self._emit,
            number,
            never_covered,
        )
        future = asyncio.run_coroutine_threadsafe(question, self._loop)
        while True:
            try:
                return bool(future.result(timeout=0.1))
            except concurrent.futures.TimeoutError:
                if self._cancelled.is_set():
                    future.cancel()
                    return False


# ---- proposals and summaries -------------------------------------------------------------


def _covers(rule: Rule, escalation: Escalation) -> bool:
    """A narrow allow rule waives an escalation; for egress, only if it names that site."""
    if not rule.matcher.narrow:
        return False
    if escalation.site is not None and rule.matcher.kind == "site":
        return rule.matcher.matches(Subject(site=escalation.site))
    return escalation.site is None


def _proposals(facts: CallFacts) -> list[Proposal]:
    """Narrowest useful rule first; the broad any-arguments rule last, and only when the
    call has no escalation (a broad rule could not waive it anyway)."""
    manifest, subject, source = facts.manifest, facts.subject, facts.source
    friendly = manifest.name
    out: list[Proposal] = []

    def rule(matcher: Matcher) -> Rule:
        return Rule(
            tool=manifest.name,
            source=source.id,
            matcher=matcher,
            decision=RuleDecision.ALLOW,
            origin="“Always allow” on an approval card",
        )

    site = facts.escalation.site if facts.escalation and facts.escalation.site else subject.site
    if subject.commands:
        return _command_proposals(facts, rule)
    if subject.paths:
        folder = _common_folder(subject.paths)
        out.append(
            Proposal(
                f"{friendly} in {_short(folder)}", rule(Matcher(kind="folder", value=folder))
            )
        )
    elif site:
        out.append(Proposal(f"{friendly} on {site}", rule(Matcher(kind="site", value=site))))
    elif subject.command:
        out += _one_string_proposal(friendly, subject.command, rule)
    elif subject.account:
        out.append(
            Proposal(
                f"{friendly} for {subject.account}",
                rule(Matcher(kind="account", value=subject.account)),
            )
        )
    if facts.escalation is None:
        out.append(Proposal(f"{friendly} with any arguments", rule(Matcher())))
    return out


def _one_string_proposal(
    friendly: str, command: str, rule: Callable[[Matcher], Rule]
) -> list[Proposal]:
    """A command given as one string (docker exec, kubectl exec): its first two words when
    what follows them is known to be inert for that program, else exactly the command."""
    import shlex

    from tools.shell.programs import coverage

    try:
        words = shlex.split(command)
    except ValueError:
        return []
    if not words:
        return []
    cover = coverage(words, min(2, len(words)))
    value = shlex.join(words[: cover.proposal])
    if cover.exact:
        matcher = Matcher(kind="command", value=value, exact=True)
        return [Proposal(f"{friendly} for exactly “{value}”", rule(matcher))]
    more = " …" if cover.proposal < len(words) else ""
    return [Proposal(f"{friendly} for “{value}{more}”", rule(Matcher(kind="command", value=value)))]


#: "Always allow" on a command line adds at most this many prefix rules (all named on the
#: card); a longer line gets no such offer.
MAX_COMMAND_RULES = 6


def _command_proposals(facts: CallFacts, make: Callable[[Matcher], Rule]) -> list[Proposal]:
    """One proposal for a command line: a prefix rule per distinct simple command (bound to
    the folder for commands that run code the model can write; with the network when the
    call used it). Never an "any arguments" rule."""
    subject = facts.subject
    folder = os.path.commonpath(subject.paths) if subject.paths else ""  # working folders
    outside = [
        p
        for part in subject.commands
        if part.in_folder
        for p in part.folders
        if not folder or os.path.commonpath([folder, p]) != folder
    ]
    if outside:  # `cd ../other && make`, `pytest /elsewhere/t.py`: no folder rule fits
        return []
    rules: list[Rule] = []
    shown: list[str] = []
    for part in subject.commands:
        if not part.prefix:  # nothing a rule could safely name (code from its input…)
            return []
        matcher = Matcher(
            kind="command",
            value=part.prefix,
            folder=folder if part.in_folder else "",
            network=subject.network,
            exact=part.exact,
        )
        if any(r.matcher == matcher for r in rules):
            continue
        rules.append(make(matcher))
        where = f" in {_short(folder)}" if part.in_folder and folder else ""
        shown.append(f"{'exactly ' if part.exact else ''}“{part.prefix}”{where}")
    net = ", with the network" if subject.network else ""
    label = f"{facts.manifest.name} for {', '.join(shown)}{net}"
    if not rules or len(rules) > MAX_COMMAND_RULES or len(label) > 200:
        return []  # the card must be able to name every rule it would add
    return [Proposal(label, rules[0], tuple(rules[1:]))]


_VERBS = {
    Operation.CREATE: "create",
    Operation.UPDATE: "change",
    Operation.DELETE: "delete",
    Operation.EXECUTE: "run",
}


def _what_it_does(operations: frozenset[Operation]) -> str:
    verbs = [_VERBS[o] for o in (Operation.CREATE, Operation.UPDATE, Operation.DELETE,
                                 Operation.EXECUTE) if o in operations]
    if not verbs:
        return "it may change something"
    listed = verbs[0] if len(verbs) == 1 else f"{', '.join(verbs[:-1])} or {verbs[-1]}"
    return f"it would {listed} something"


def _short(path: str) -> str:
    """~ for the user's home, as people write it."""
    home = str(Path.home())
    if path == home:
        return "~"
    if path.startswith(home + os.sep):
        return "~" + path[len(home):]
    return path


def _common_folder(paths: tuple[str, ...]) -> str:
    folders = [p if os.path.isdir(p) else os.path.dirname(p) for p in paths]
    try:
        return os.path.commonpath(folders) or folders[0]
    except ValueError:  # different drives
        return folders[0]


def written_summary(tool: str, source: ToolSource, arguments: dict[str, Any]) -> str:
    """Deskhand's own one-liner for a call whose source cannot be asked for one."""
    parts = []
    for key, value in list(arguments.items())[:4]:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{key}={one_line(str(text), 60)}")
    more = "…" if len(arguments) > 4 else ""
    args = f" with {', '.join(parts)}{more}" if parts else ""
    who = "" if source.builtin else f" ({describe(source)})"
    return one_line(f"Run {tool}{who}{args}", 240)


def _plain(params: Any) -> dict[str, Any]:
    dump = getattr(params, "model_dump", None)
    try:
        return dump(mode="json") if callable(dump) else {}
    except Exception:
        return {}
