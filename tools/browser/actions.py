"""Browser tools that read or act on the current tab. Each body is a job for the browser
thread (`run_job`); Playwright waits are bounded and sliced so Stop takes effect quickly."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from tools.browser import elements
from tools.browser.common import (
    SETTLE_SECONDS,
    SLICE_MS,
    PlaywrightError,
    PlaywrightTimeout,
    first_line,
    page_result,
    run_job,
    wait_loaded,
)
from tools.browser.egress import EgressGuard
from tools.browser.host import ACTION_TIMEOUT_MS, BrowserSession
from tools.browser.manifest import (
    Click,
    Fill,
    History,
    Navigate,
    Press,
    Scroll,
    Select,
    Snapshot,
    TypeText,
    Wait,
)
from tools.browser.policy import (
    click_checked,
    click_reason,
    normalize_url,
    site_of,
)
from tools.spec import ToolContext, ToolError, ToolResult

#: Extra seconds the caller waits beyond an action's own bounds.
_ACTION_BUDGET = ACTION_TIMEOUT_MS / 1000 + SETTLE_SECONDS + 10


def open_url(
    page: Any, url: str, ctx: ToolContext, timeout: float, guard: EgressGuard | None = None
) -> Any:
    """Navigate `page` to `url` and wait until it has loaded; returns the response. What
    the browser really loads (each redirect hop) is checked by the call's egress guard."""
    started = time.monotonic()
    ctx.progress(f"Opening {url}")
    response = None
    try:
        response = page.goto(url, wait_until="commit", timeout=timeout * 1000)
    except PlaywrightTimeout:
        if guard is None or not guard.asked_seconds or guard.stopped:
            raise ToolError(
                f"{url} did not answer within {timeout:g} s — the site seems down or very slow."
            ) from None
        # the time went into asking the user, who let the load go on: keep waiting for it
    except PlaywrightError as exc:
        message = first_line(exc)
        if guard is not None and guard.stopped:
            raise ToolError(f"{url} was not opened. {' '.join(guard.stopped)}") from None
        if "Download is starting" in message:
            raise ToolError(f"{url} is a file download; use browser_download for it.") from None
        raise ToolError(f"Could not open {url}: {message}") from None
    elapsed = time.monotonic() - started - (guard.asked_seconds if guard else 0.0)
    remaining = max(0.5, timeout - elapsed)
    wait_loaded(page, ctx, remaining, url, limit=timeout)
    return response


def _lead(verb: str, page: Any, response: Any = None) -> str:
    status = getattr(response, "status", None)
    suffix = f" (HTTP {status})" if status and status >= 400 else ""
    return f"{verb} {page.url}{suffix}"


# ---- navigation --------------------------------------------------------------------------


def navigate(args: Navigate, ctx: ToolContext) -> ToolResult:
    url = normalize_url(args.url)
    # the site was approved (by the user, a rule or the setting) once we get here; a
    # redirect elsewhere is checked again when the browser makes it
    guard = EgressGuard.for_call(ctx, [site_of(url)])

    def job(session: BrowserSession) -> ToolResult:
        page = session.page()
        session.take_events()
        response = open_url(page, url, ctx, args.timeout_seconds, guard)
        return page_result(session, page, _lead("Opened", page, response))

    return run_job(ctx, job, args.timeout_seconds + 15, guard)


def snapshot(args: Snapshot, ctx: ToolContext) -> ToolResult:
    def job(session: BrowserSession) -> ToolResult:
        page = session.page()
        return page_result(session, page, f"Tab showing {page.url}", max_chars=args.max_chars)

    return run_job(ctx, job, 60)


def _history(args: History, ctx: ToolContext, direction: str) -> ToolResult:
    guard = EgressGuard.for_call(ctx)

    def job(session: BrowserSession) -> ToolResult:
        page = session.page()
        before = page.url
        move = page.go_back if direction == "back" else page.go_forward
        ctx.progress(f"Going {direction}")
        try:
            response = move(timeout=args.timeout_seconds * 1000, wait_until="commit")
        except PlaywrightError as exc:
            if guard.stopped and not isinstance(exc, PlaywrightTimeout):
                raise ToolError(f"Did not go {direction}. {' '.join(guard.stopped)}") from None
            if not isinstance(exc, PlaywrightTimeout):
                raise
            if guard.asked_seconds and not guard.stopped:
                response = None  # the time went into asking the user
            else:
                raise ToolError(
                    f"Going {direction} did not finish within {args.timeout_seconds:g} s."
                ) from None
        if response is None and page.url == before and guard.stopped:
            raise ToolError(f"Did not go {direction}. {' '.join(guard.stopped)}")
        if response is None and page.url == before:
            where = "previous" if direction == "back" else "next"
            raise ToolError(f"There is no {where} page in this tab's history.")
        wait_loaded(page, ctx, args.timeout_seconds, page.url)
        return page_result(session, page, _lead(f"Went {direction} to", page, response))

    return run_job(ctx, job, args.timeout_seconds + 15, guard)


def back(args: History, ctx: ToolContext) -> ToolResult:
    return _history(args, ctx, "back")


def forward(args: History, ctx: ToolContext) -> ToolResult:
    return _history(args, ctx, "forward")


# ---- acting on elements ----------------------------------------------------------------------


def _settle(session: BrowserSession, page: Any, ctx: ToolContext, expect_tab: bool) -> Any:
    """After an action: pick up a tab it opened and wait for a page it started loading."""
    (session.page() if page.is_closed() else page).wait_for_timeout(150)  # let events arrive
    if expect_tab and not session.new_pages:
        with contextlib.suppress(PlaywrightTimeout):
            session.context.wait_for_event("page", timeout=3000)
    current = session.page()  # the new tab, or another one if the action closed its own
    wait_loaded(current, ctx, SETTLE_SECONDS, "the page")
    return current


def _opened_tab_note(session: BrowserSession, before: int, page: Any) -> str:
    pages = session.pages()
    if len(pages) > before and page in pages:
        return f" It opened a new tab ({pages.index(page) + 1} of {len(pages)}), now current."
    return ""


def click(args: Click, ctx: ToolContext) -> ToolResult:
    """Clicks; whatever the click makes the page load or send is checked by the guard: the
    site the approval named (a form's, a link's) is approved, others ask."""
    asked = click_checked(ctx)
    guard = EgressGuard.for_call(ctx, sends=True)

    def job(session: BrowserSession) -> ToolResult:
        page = session.page()
        session.new_pages.clear()
        tabs_before = len(session.pages())
        locator = elements.locate(page, args, elements.masking(ctx))
        info = elements.info_of(locator, elements.masking(ctx))
        escalation = click_reason(info, ctx)
        if asked is False and escalation is not None:
            raise ToolError(
                "The page changed after the approval check: this click now "
                f"{escalation.reason}. Call browser_snapshot and try again."
            )
        if escalation is not None:
            guard.approve(escalation.site)  # what the user (or a rule) approved
        ctx.check_cancelled()
        locator.click(timeout=ACTION_TIMEOUT_MS)
        current = _settle(session, page, ctx, bool(info.get("new_tab")))
        lead = f"Clicked {elements.label(info)}." + _opened_tab_note(session, tabs_before, current)
        return page_result(session, current, lead, data={"clicked": info})

    return run_job(ctx, job, _ACTION_BUDGET, guard)


def _form_site(info: dict[str, Any] | None) -> str | None:
    if not info or not info.get("in_form"):
        return None
    return site_of(info.get("form_action") or info.get("page_url") or "")


def fill(args: Fill, ctx: ToolContext) -> ToolResult:
    guard = EgressGuard.for_call(ctx, sends=True)

    def job(session: BrowserSession) -> ToolResult:
        page = session.page()
        locator = elements.locate(page, args, elements.masking(ctx))
        info = elements.info_of(locator, elements.masking(ctx))
        if args.submit:
            guard.approve(_form_site(info))  # approved with the call (it asks: UPDATE)
        locator.fill(args.value, timeout=ACTION_TIMEOUT_MS)
        if not args.submit:
            return ToolResult(
                ok=True, content=f"Filled {elements.label(info)}.", data={"filled": info}
            )
        ctx.check_cancelled()
        locator.press("Enter", timeout=ACTION_TIMEOUT_MS)
        current = _settle(session, page, ctx, False)
        lead = f"Filled {elements.label(info)} and pressed Enter."
        return page_result(session, current, lead, data={"filled": info})

    return run_job(ctx, job, _ACTION_BUDGET, guard)


def type_text(args: TypeText, ctx: ToolContext) -> ToolResult:
    has_target = any(v is not None for v in (args.ref, args.text, args.selector))
    budget = _ACTION_BUDGET + len(args.value) * args.delay_ms / 1000

    def job(session: BrowserSession) -> ToolResult:
        page = session.page()
        if has_target:
            locator = elements.locate(page, args, elements.masking(ctx))
            info = elements.info_of(locator, elements.masking(ctx))
            locator.press_sequentially(args.value, delay=args.delay_ms, timeout=budget * 1000)
            where = elements.label(info)
        else:
            page.keyboard.type(args.value, delay=args.delay_ms)
            where = "the focused element"
        notes = "".join(f" {n}" for n in session.guard.notes())
        return ToolResult(
            ok=True, content=f"Typed {len(args.value)} characters into {where}.{notes}"
        )

    return run_job(ctx, job, budget, EgressGuard.for_call(ctx, sends=True))


def press(args: Press, ctx: ToolContext) -> ToolResult:
    has_target = any(v is not None for v in (args.ref, args.text, args.selector))

    guard = EgressGuard.for_call(ctx, sends=True)
    enter = args.key.lower().endswith("enter")

    def job(session: BrowserSession) -> ToolResult:
        page = session.page()
        tabs_before = len(session.pages())
        if has_target:
            locator = elements.locate(page, args, elements.masking(ctx))
            info = elements.info_of(locator, elements.masking(ctx))
            where = elements.label(info)
            if enter:
                guard.approve(_form_site(info))  # approved with the call (it asks: UPDATE)
            locator.press(args.key, timeout=ACTION_TIMEOUT_MS)
        else:
            where = "the page"
            if enter:
                guard.approve(_form_site(elements.describe_focused(page)))
            page.keyboard.press(args.key)
        current = _settle(session, page, ctx, False)
        lead = f"Pressed {args.key} in {where}." + _opened_tab_note(session, tabs_before, current)
        return page_result(session, current, lead)

    return run_job(ctx, job, _ACTION_BUDGET, guard)


_OPTIONS_JS = r"""
(el) => el.tagName !== 'SELECT' ? null
  : [...el.options].map((o) => ({ value: o.value, label: o.label }))
"""


def _match_option(options: list[dict[str, str]], wanted: str, redactor: Any) -> Any:
    """The option named `wanted`: its whole label (any case), its exact value, else a label
    holding it — that last one as the tripwire shows the label, so a part of a secret in
    an option's text finds nothing."""
    w = wanted.strip().casefold()
    for option in options:
        if str(option.get("label", "")).strip().casefold() == w:
            return option
    for option in options:
        if option.get("value") == wanted:
            return option
    for option in options:
        if elements.shown_in(wanted, [str(option.get("label", ""))], redactor):
            return option
    return None


def select(args: Select, ctx: ToolContext) -> ToolResult:
    def job(session: BrowserSession) -> ToolResult:
        page = session.page()
        locator = elements.locate(page, args, elements.masking(ctx))
        info = elements.info_of(locator, elements.masking(ctx))
        options = locator.evaluate(_OPTIONS_JS)
        if options is None:
            raise ToolError(f"{elements.label(info)} is not a drop-down (select) element.")
        match = _match_option(list(options), args.option, elements.masking(ctx))
        if match is None:
            choices = ", ".join(str(o.get("label", "")) for o in options[:30])
            raise ToolError(f"{elements.label(info)} has no option {args.option!r}: {choices}")
        locator.select_option(value=match["value"], timeout=ACTION_TIMEOUT_MS)
        return ToolResult(
            ok=True,
            content=f"Selected {match['label']!r} in {elements.label(info)}.",
            data={"selected": match},
        )

    return run_job(ctx, job, _ACTION_BUDGET, EgressGuard.for_call(ctx, sends=True))


_SCROLL_JS = r"""
([direction, pages]) => {
  const el = document.scrollingElement || document.documentElement;
  const step = window.innerHeight * pages;
  if (direction === 'top') window.scrollTo(0, 0);
  else if (direction === 'bottom') window.scrollTo(0, el.scrollHeight);
  else window.scrollBy(0, direction === 'up' ? -step : step);
  return { y: Math.round(window.scrollY), view: window.innerHeight, height: el.scrollHeight };
}
"""


def scroll(args: Scroll, ctx: ToolContext) -> ToolResult:
    has_target = any(v is not None for v in (args.ref, args.text, args.selector))

    def job(session: BrowserSession) -> ToolResult:
        page = session.page()
        if has_target:
            locator = elements.locate(page, args, elements.masking(ctx))
            locator.scroll_into_view_if_needed(timeout=ACTION_TIMEOUT_MS)
            what = f"to {elements.label(elements.info_of(locator, elements.masking(ctx)))}"
            direction, amount = "down", 0.0
        else:
            what, direction, amount = args.direction, args.direction, args.pages
        pos = page.evaluate(_SCROLL_JS, [direction, amount])
        page.wait_for_timeout(200)  # lazy-loaded content
        bottom = min(pos["y"] + pos["view"], pos["height"])
        return ToolResult(
            ok=True,
            content=f"Scrolled {what}: showing {pos['y']}–{bottom} px of {pos['height']} px.",
            data=pos,
        )

    return run_job(ctx, job, _ACTION_BUDGET)


# ---- waiting ---------------------------------------------------------------------------------


def wait(args: Wait, ctx: ToolContext) -> ToolResult:
    redactor = elements.masking(ctx)
    # plain CSS only: Playwright's text engines would match the raw page (a secret's start)
    selector = elements.plain_selector(args.selector) if args.selector is not None else None

    def check(page: Any) -> bool:
        # text and address are matched as redacted: a wait must not answer yes/no about
        # the characters of a secret on the page
        try:
            if args.text is not None:
                found = page.get_by_text(args.text)
                found.first.wait_for(state="visible", timeout=SLICE_MS)
                if not elements.shown_in(args.text, found.all_inner_texts(), redactor):
                    page.wait_for_timeout(SLICE_MS)
                    return False
            elif selector is not None:
                page.locator(selector).first.wait_for(state="visible", timeout=SLICE_MS)
            elif args.url_contains is not None:
                if args.url_contains not in redactor.text(page.url):
                    page.wait_for_timeout(SLICE_MS)
                    return False
            else:
                page.wait_for_load_state("load", timeout=SLICE_MS)
            return True
        except PlaywrightTimeout:
            return False
        except PlaywrightError as exc:
            raise ToolError(f"Cannot wait for that: {first_line(exc)}") from None

    if args.text is not None:
        goal = f"the text {args.text!r} to appear"
    elif args.selector is not None:
        goal = f"an element matching {args.selector!r} to appear"
    elif args.url_contains is not None:
        goal = f"the address to contain {args.url_contains!r}"
    else:
        goal = "the page to finish loading"

    def job(session: BrowserSession) -> ToolResult:
        page = session.page()
        started = time.monotonic()
        last_report = started
        ctx.progress(f"Waiting for {goal}")
        while not check(page):
            ctx.check_cancelled()
            now = time.monotonic()
            if now - started >= args.timeout_seconds:
                raise ToolError(
                    f"Gave up after {args.timeout_seconds:g} s waiting for {goal} on {page.url}."
                )
            if now - last_report >= 1.0:
                ctx.progress(f"Waiting for {goal} ({now - started:.0f} s)…")
                last_report = now
        waited = time.monotonic() - started
        return page_result(session, page, f"Done waiting for {goal} ({waited:.1f} s).")

    return run_job(ctx, job, args.timeout_seconds + 15)
