"""Runs tool calls: validation, thread pool, timeouts, cancellation, output cap, tripwire.

Every outcome, including bad input and crashes inside a tool, becomes a `ToolResult`;
only cancellation of the awaiting task propagates.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import difflib
import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from tools.redact import Redactor
from tools.registry import ToolRegistry
from tools.spec import (
    Escalation,
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


class ToolRunner:
    def __init__(
        self,
        registry: ToolRegistry,
        *,
        max_workers: int = 32,
        output_cap: int = DEFAULT_OUTPUT_CAP,
        secrets: Callable[[], Iterable[str]] = lambda: (),
    ) -> None:
        self.registry = registry
        self.output_cap = output_cap
        self._secrets = secrets
        self.redactor = Redactor()
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

    def known_secrets(self) -> Iterable[str]:
        """Every secret value known so far (what the tripwire masks)."""
        return self._secrets()

    def refresh_secrets(self) -> Redactor:
        """The tripwire, knowing every secret known so far."""
        self.redactor.update(self._secrets())
        return self.redactor

    def redact(self, result: ToolResult) -> ToolResult:
        self.redactor.update(self._secrets())
        result.content = self.redactor.text(result.content)
        result.data = self.redactor.data(result.data)
        if result.error:
            result.error = self.redactor.text(result.error)
        return result

    async def escalation(
        self, manifest: ToolManifest, params: Any, ctx: ToolContext
    ) -> Escalation | None:
        """Why this call must ask although its operations would not; None when it need not.
        A hook that fails asks (the safe side)."""
        try:
            fn = self.registry.resolve_escalate(manifest.name)
        except Exception as exc:
            return Escalation(f"could not check whether {manifest.name} needs approval ({exc})")
        if fn is None:
            return None
        loop = asyncio.get_running_loop()
        try:
            reason = await loop.run_in_executor(self._pool, fn, params, ctx)
        except Exception as exc:
            return Escalation(f"could not check whether {manifest.name} needs approval ({exc})")
        if not reason:
            return None
        if isinstance(reason, Escalation):
            return replace(reason, reason=self.redactor.text(reason.reason))
        return Escalation(self.redactor.text(str(reason)))

    async def preview(self, manifest: ToolManifest, params: Any, ctx: ToolContext) -> str | None:
        """What a call will do, for the approval prompt; None when the tool offers nothing."""
        try:
            fn = self.registry.resolve_preview(manifest.name)
        except Exception as exc:
            log.warning("preview of %s unavailable: %s", manifest.name, exc)
            return None
        if fn is None:
            return None
        loop = asyncio.get_running_loop()
        try:
            text = await loop.run_in_executor(self.executor_for(manifest), fn, params, ctx)
        except ToolError as exc:
            text = f"(this call will fail: {exc})"
        except Exception as exc:
            log.warning("preview of %s failed: %s", manifest.name, exc)
            return None
        self.redactor.update(self._secrets())
        return self.redactor.text(str(text)) if text is not None else None
