"""Helpers shared by the browser tool implementations (imported on the first browser call)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tools.browser.config import BrowserConfig
from tools.browser.egress import EgressGuard
from tools.browser.host import BrowserHost, BrowserSession
from tools.browser.policy import remember_sites
from tools.browser.snapshot import PageSnapshot, render, take_snapshot
from tools.spec import ToolContext, ToolError, ToolResult

T = TypeVar("T")

#: Waits are done in slices this long so Stop takes effect quickly.
SLICE_MS = 250
#: After an action (click, Enter), how long to wait for a page it started to load.
SETTLE_SECONDS = 30.0

__all__ = ["SLICE_MS", "PlaywrightError", "PlaywrightTimeout", "run_job", "wait_loaded"]


def run_job(
    ctx: ToolContext,
    fn: Callable[[BrowserSession], T],
    timeout: float,
    guard: EgressGuard | None = None,
) -> T:
    """Run `fn` on this home's browser thread (starting the browser if needed), with the
    call's requests checked by `guard` (default: nothing approved beyond the usual rules,
    state-changing requests not asked about). Sites the call loaded become visited."""
    host = BrowserHost.for_home(ctx.home)
    guard = guard or EgressGuard.for_call(ctx)

    def guarded(session: BrowserSession) -> T:
        with session.guarding(guard):
            return fn(session)

    try:
        return host.run(guarded, config=BrowserConfig.from_context(ctx), ctx=ctx, timeout=timeout)
    finally:
        remember_sites(ctx, *guard.loaded)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def wait_loaded(
    page: Any, ctx: ToolContext, timeout: float, what: str, *, limit: float | None = None
) -> None:
    """Wait for DOMContentLoaded in slices (cancellable, with progress), then briefly for
    `load`. A page that never gets there ends in a clear ToolError naming `limit` (the
    caller's whole time limit; default `timeout`)."""
    started = time.monotonic()
    deadline = started + timeout
    last_report = started
    while True:
        ctx.check_cancelled()
        try:
            page.wait_for_load_state("domcontentloaded", timeout=SLICE_MS)
            break
        except PlaywrightTimeout:
            pass
        now = time.monotonic()
        if now >= deadline:
            raise ToolError(
                f"{what} did not finish loading within {limit or timeout:g} s — the page seems "
                "stuck or very slow. Try again later, or call browser_snapshot to see what has "
                "loaded so far."
            )
        if now - last_report >= 1.0:
            ctx.progress(f"Waiting for {what} to load ({now - started:.0f} s)…")
            last_report = now
    # images and late scripts: nice to have, never required
    grace = min(2.0, max(0.0, deadline - time.monotonic()))
    end = time.monotonic() + grace
    while time.monotonic() < end:
        ctx.check_cancelled()
        try:
            page.wait_for_load_state("load", timeout=SLICE_MS)
            return
        except PlaywrightTimeout:
            continue


def page_notes(session: BrowserSession) -> list[str]:
    """Dialogs the page showed (and Deskhand dismissed) since the last call."""
    _, dialogs = session.take_events()
    return [f"[The page showed a dialog, dismissed: {d}]" for d in dialogs]


def page_result(
    session: BrowserSession,
    page: Any,
    lead: str,
    *,
    max_chars: int = 12_000,
    data: dict[str, Any] | None = None,
    notes: list[str] | None = None,
) -> ToolResult:
    """The standard answer of a browser tool: status line plus the wrapped snapshot."""
    snap: PageSnapshot = take_snapshot(page, max_chars)
    all_notes = (notes or []) + session.guard.notes() + page_notes(session)
    content = render(snap, lead, all_notes)
    payload = {"tab": tab_number(session, page), **snap.to_data(), **(data or {})}
    return ToolResult(ok=True, content=content, data=payload)


def tab_number(session: BrowserSession, page: Any) -> int | None:
    pages = session.pages()
    return pages.index(page) + 1 if page in pages else None
