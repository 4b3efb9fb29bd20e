"""Runs tool calls: validation, classification, thread pool, timeouts, cancellation,
output cap, tripwire.

Every outcome, including bad input and crashes inside a tool, becomes a `ToolResult`;
only cancellation of the awaiting task propagates. `classify` asks a call's own hooks what
it will do (escalation, subject, and for an approval card its summary and preview) in one
hop to the pool.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import difflib
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from tools.redact import TRIPWIRE, Redactor, Tripwire
from tools.registry import ToolRegistry
from tools.spec import (
    Escalation,
    Subject,
    ToolCancelled,
    ToolContext,
    ToolError,
    ToolManifest,
    ToolResult,
)

log = logging.getLogger(__name__)

DEFAULT_OUTPUT_CAP = 30_000


class InvalidCall(Exception):
    """The call cannot run as asked (unknown tool, bad JSON, schema mismatch)."""


def parse_arguments(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidCall(
            f"the arguments are not valid JSON ({exc.msg} at position {exc.pos}); "
            "send one JSON object matching the tool's schema"
        ) from None
    if not isinstance(value, dict):
        raise InvalidCall("the arguments must be a JSON object")
    return value


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:8]:
        where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"{where}: {err['msg']}")
    return "invalid arguments — " + "; ".join(parts)


def wrap_return(value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if value is None:
        return ToolResult(ok=True, content="Done.")
    if isinstance(value, str):
        return ToolResult(ok=True, content=value)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = str(value)
    return ToolResult(ok=True, content=text, data=value)


def cap_output(result: ToolResult, limit: int) -> ToolResult:
    if len(result.content) <= limit:
        return result
    shown = result.content[:limit]
    note = (
        f"\n[output truncated: showing {limit:,} of {len(result.content):,} characters; "
        "ask for a narrower range to see more]"
    )
    result.content = shown + note
    result.truncated = True
    return result


@dataclass(frozen=True)
class Classification:
    """What one call will do, in its own tool's words (hook text masked by the tripwire)."""

    escalation: Escalation | None
    subject: Subject
    #: The approval card's one-liner and preview: only when the call asks, and only from
    #: Deskhand's own hooks; None when there is none.
    summary: str | None = None
    preview: str | None = None


#: Given a call's escalation and subject: whether it will ask (so its card is needed).
AsksFn = Callable[[Escalation | None, Subject], bool]


def always_asks(_escalation: Escalation | None, _subject: Subject) -> bool:
    """`classify` as for a call that asks: the card's summary and preview too (a tool's
    own checks and tests)."""
    return True


class ToolRunner:
    def __init__(
        self,
        registry: ToolRegistry,
        *,
        max_workers: int = 32,
        output_cap: int = DEFAULT_OUTPUT_CAP,
        tripwire: Tripwire = TRIPWIRE,
    ) -> None:
        self.registry = registry
        self.output_cap = output_cap
        self.tripwire = tripwire
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="deskhand-tool"
        )
        self._dedicated: dict[str, concurrent.futures.ThreadPoolExecutor] = {}
        self._dedicated_lock = threading.Lock()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for pool in self._dedicated.values():
            pool.shutdown(wait=False, cancel_futures=True)

    def executor_for(self, manifest: ToolManifest) -> concurrent.futures.Executor:
        """Tools bound to one thread (Playwright's sync API) share a one-thread executor."""
        if manifest.thread is None:
            return self._pool
        with self._dedicated_lock:
            pool = self._dedicated.get(manifest.thread)
            if pool is None:
                pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix=f"deskhand-{manifest.thread}"
                )
                self._dedicated[manifest.thread] = pool
            return pool

    # ---- validation ---------------------------------------------------------------

    def lookup(self, name: str) -> ToolManifest:
        manifest = self.registry.get(name)
        if manifest is None:
            close = difflib.get_close_matches(name, self.registry.names(), n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise InvalidCall(
                f"there is no tool named {name!r}.{hint} Use browse_tools to find tools."
            )
        reason = self.registry.unavailable_reason(manifest)
        if reason:
            raise InvalidCall(f"{name} is unavailable: {reason}")
        return manifest

    def validate(
        self, name: str, raw_args: str | dict[str, Any] | None
    ) -> tuple[ToolManifest, Any]:
        """Returns the manifest and the validated parameter model, or raises InvalidCall."""
        manifest = self.lookup(name)
        args = parse_arguments(raw_args)
        try:
            return manifest, manifest.params.model_validate(args)
        except ValidationError as exc:
            raise InvalidCall(describe_validation_error(exc)) from None

    # ---- running --------------------------------------------------------------------

    async def run(
        self,
        name: str,
        raw_args: str | dict[str, Any] | None,
        ctx: ToolContext,
        *,
        timeout: float | None = None,
    ) -> ToolResult:
        try:
            manifest, params = self.validate(name, raw_args)
        except InvalidCall as exc:
            return self.finish(ToolResult.failure(str(exc)))
        return await self.run_validated(manifest, params, ctx, timeout=timeout)

    async def run_validated(
        self,
        manifest: ToolManifest,
        params: Any,
        ctx: ToolContext,
        *,
        timeout: float | None = None,
    ) -> ToolResult:
        loop = asyncio.get_running_loop()
        limit = timeout if timeout is not None else manifest.timeout
        if manifest.on_loop:
            return self.finish(await self._run_on_loop(manifest, params, ctx, limit))
        future = loop.run_in_executor(
            self.executor_for(manifest), self._call_sync, manifest, params, ctx
        )
        try:
            # shielded: a Stop must not orphan the body's future, whose last word we keep
            result = await asyncio.wait_for(asyncio.shield(future), timeout=limit)
        except TimeoutError:
            ctx.cancel_event.set()
            result = ToolResult.failure(
                f"{manifest.name} did not finish within {limit:g} s and was stopped"
            )
        except asyncio.CancelledError:
            ctx.cancel_event.set()  # cooperative: the body sees it at its next check
            # give the body a moment to stop what it started (a remote command…) and say
            # how that went; its last word is kept for the history
            with contextlib.suppress(BaseException):
                late = await asyncio.wait_for(asyncio.shield(future), manifest.stop_grace)
                ctx.late_result = self.finish(late)
            raise
        return self.finish(result)

    async def _run_on_loop(
        self, manifest: ToolManifest, params: Any, ctx: ToolContext, limit: float
    ) -> ToolResult:
        """A coroutine body (`ToolManifest.on_loop`), with the pool's outcomes: a timeout, a
        ToolError or a crash each become a failed result; a Stop cancels it."""
        try:
            fn = self.registry.resolve(manifest.name)
        except Exception as exc:
            log.warning("cannot load %s: %s", manifest.name, exc)
            return ToolResult.failure(f"{manifest.name} could not be loaded: {exc}")
        try:
            return wrap_return(await asyncio.wait_for(fn(params, ctx), timeout=limit))
        except TimeoutError:
            ctx.cancel_event.set()
            return ToolResult.failure(
                f"{manifest.name} did not finish within {limit:g} s and was stopped"
            )
        except asyncio.CancelledError:
            ctx.cancel_event.set()
            raise
        except ToolCancelled:
            return ToolResult.failure("cancelled")
        except ToolError as exc:
            return ToolResult.failure(str(exc))
        except Exception as exc:
            log.exception("tool %s crashed", manifest.name)
            return ToolResult.failure(f"{manifest.name} failed: {type(exc).__name__}: {exc}")

    def _call_sync(self, manifest: ToolManifest, params: Any, ctx: ToolContext) -> ToolResult:
        try:
            fn = self.registry.resolve(manifest.name)
        except Exception as exc:
            log.warning("cannot load %s: %s", manifest.name, exc)
            return ToolResult.failure(f"{manifest.name} could not be loaded: {exc}")
        try:
            return wrap_return(fn(params, ctx))
        except ToolCancelled:
            return ToolResult.failure("cancelled")
        except ToolError as exc:
            return ToolResult.failure(str(exc))
        except Exception as exc:
            log.exception("tool %s crashed", manifest.name)
            return ToolResult.failure(f"{manifest.name} failed: {type(exc).__name__}: {exc}")

    def finish(self, result: ToolResult) -> ToolResult:
        """The secret tripwire, then the output cap (a cap must never cut a secret in two,
        leaving a part the tripwire no longer recognises). Every result passes here."""
        return cap_output(self.redact(result), self.output_cap)

    def redact(self, result: ToolResult) -> ToolResult:
        redactor = self.tripwire.redactor()
        result.content = redactor.text(result.content)
        result.data = redactor.data(result.data)
        if result.error:
            result.error = redactor.text(result.error)
        return result

    # ---- classification: the call's own hooks, before anyone decides -------------------

    async def classify(
        self,
        manifest: ToolManifest,
        params: Any,
        ctx: ToolContext,
        *,
        subject: Subject | None = None,
        asks: AsksFn = lambda _escalation, _subject: False,
    ) -> Classification:
        """Why the call must ask although its operations would not (escalation), what it
        acts on (subject, with the account of its integration), and — when `asks` says it
        will ask — its summary and preview for the card, from Deskhand's own hooks only.
        All in one job on the pool, in that order. `subject` given: the tool is not asked
        (a third party cannot describe its calls into the reach of a narrow rule). A hook
        that fails leaves the safe side: escalation asks, subject stays broad."""
        if not _has_hooks(manifest, asked_for_subject=subject is None):
            return self._classify(manifest, params, ctx, subject, asks)  # nothing to wait for
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._pool, self._classify, manifest, params, ctx, subject, asks
        )

    def _classify(
        self,
        manifest: ToolManifest,
        params: Any,
        ctx: ToolContext,
        subject: Subject | None,
        asks: AsksFn,
    ) -> Classification:
        redactor = self.tripwire.redactor()
        escalation = self._escalation(manifest, params, ctx, redactor)
        if subject is None:
            subject = self._subject(manifest, params, ctx)
        if not asks(escalation, subject):
            return Classification(escalation, subject)
        if not self.registry.source_of(manifest.name).builtin:  # a skill's runner is
            return Classification(escalation, subject)  # built in: its hooks count
        summary = self._hook_text(manifest, "summary_line", params, ctx)
        preview = self._preview(manifest, params, ctx)
        return Classification(
            escalation,
            subject,
            summary=redactor.text(summary) if summary else None,
            preview=redactor.text(preview) if preview is not None else None,
        )

    def _escalation(
        self, manifest: ToolManifest, params: Any, ctx: ToolContext, redactor: Redactor
    ) -> Escalation | None:
        try:
            fn = self.registry.resolve_escalate(manifest.name)
            reason = fn(params, ctx) if fn is not None else None
        except Exception as exc:
            return Escalation(f"could not check whether {manifest.name} needs approval ({exc})")
        if not reason:
            return None
        if isinstance(reason, Escalation):
            return replace(reason, reason=redactor.text(reason.reason))
        return Escalation(redactor.text(str(reason)))

    def _subject(self, manifest: ToolManifest, params: Any, ctx: ToolContext) -> Subject:
        subject = Subject()
        if manifest.subject is not None:
            try:
                found = self.registry.resolve_hook(manifest.name, "subject")(params, ctx)
                if isinstance(found, Subject):
                    subject = found
            except Exception as exc:  # a broken hook leaves only broad rules (safe side)
                log.warning("subject of %s unavailable: %s", manifest.name, exc)
        if subject.account is None and manifest.integration:
            account = _account_label(manifest.integration, params, ctx)
            if account:
                subject = replace(subject, account=account, target=subject.target or account)
        return subject

    def _hook_text(self, manifest: ToolManifest, hook: str, params: Any, ctx: ToolContext) -> str:
        if getattr(manifest, hook) is None:
            return ""
        try:
            return str(self.registry.resolve_hook(manifest.name, hook)(params, ctx) or "")
        except Exception as exc:
            log.warning("%s of %s unavailable: %s", hook, manifest.name, exc)
            return ""

    def _preview(self, manifest: ToolManifest, params: Any, ctx: ToolContext) -> str | None:
        """What a call will do, for the approval prompt; None when the tool offers nothing."""
        try:
            fn = self.registry.resolve_preview(manifest.name)
        except Exception as exc:
            log.warning("preview of %s unavailable: %s", manifest.name, exc)
            return None
        if fn is None:
            return None
        try:
            text = fn(params, ctx)
        except ToolError as exc:
            return f"(this call will fail: {exc})"
        except Exception as exc:
            log.warning("preview of %s failed: %s", manifest.name, exc)
            return None
        return str(text) if text is not None else None


def _has_hooks(manifest: ToolManifest, *, asked_for_subject: bool) -> bool:
    """Whether classifying a call of `manifest` runs any code of its tool (or looks up its
    account): only then is it worth a hop to the pool."""
    hooks: list[object] = [manifest.escalate, manifest.summary_line, manifest.preview]
    if asked_for_subject:
        hooks += [manifest.subject, manifest.integration]
    return any(hook is not None for hook in hooks)


def _account_label(integration: str, params: Any, ctx: ToolContext) -> str | None:
    """"<integration title> · <account label>" of the account a call uses (the one it
    names, else the active one); None when there is none."""
    accounts = ctx.accounts
    if accounts is None:
        return None
    named = getattr(params, "account", None)
    try:
        account = accounts.find(integration, named) if named else accounts.active(integration)
    except Exception:
        return None
    if account is None:
        return None
    title = accounts.spec(integration).title if hasattr(accounts, "spec") else integration
    return f"{title} · {account.label}"
