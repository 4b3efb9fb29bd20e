"""browser_tabs: list, open, switch to and close tabs of the browser."""

from __future__ import annotations

from typing import Any

from tools.browser.actions import open_url
from tools.browser.common import page_result, run_job
from tools.browser.egress import EgressGuard
from tools.browser.host import BrowserSession
from tools.browser.manifest import Tabs
from tools.browser.policy import normalize_url, site_of
from tools.browser.snapshot import wrap_untrusted
from tools.spec import ToolContext, ToolError, ToolResult


def _listing(session: BrowserSession) -> tuple[str, list[dict[str, Any]]]:
    current = session.page()
    rows = []
    for number, page in enumerate(session.pages(), start=1):
        try:
            title = page.title()
        except Exception:
            title = ""
        rows.append({"tab": number, "title": title, "url": page.url, "current": page is current})
    lines = [
        f"{r['tab']}. {r['title'] or '(no title)'} — {r['url']}"
        + ("  ← current" if r["current"] else "")
        for r in rows
    ]
    # titles are written by the pages, so the listing is page content too
    return wrap_untrusted("browser tabs", "\n".join(lines)), rows


def _pick(session: BrowserSession, number: int | None) -> Any:
    pages = session.pages()
    if number is None:
        return session.page()
    if not 1 <= number <= len(pages):
        raise ToolError(f"There is no tab {number}; {len(pages)} tab(s) are open.")
    return pages[number - 1]


def tabs(args: Tabs, ctx: ToolContext) -> ToolResult:
    url = normalize_url(args.url) if args.url else None
    # the address was approved (user, rule or setting) once we get here; redirects are not
    guard = EgressGuard.for_call(ctx, [site_of(url)] if url else [])

    def job(session: BrowserSession) -> ToolResult:
        if args.action == "list":
            text, rows = _listing(session)
            return ToolResult(ok=True, content=f"{len(rows)} tab(s):\n{text}", data=rows)
        if args.action == "open":
            page = session.context.new_page()
            session.current = page
            session.interceptor.ensure_watched(page)  # before its first load: redirects too
            if url:
                open_url(page, url, ctx, args.timeout_seconds, guard)
            number = session.pages().index(page) + 1
            return page_result(session, page, f"Opened tab {number} at {page.url}.")
        if args.action == "switch":
            page = _pick(session, args.tab)
            session.current = page
            page.bring_to_front()
            return page_result(session, page, f"Switched to tab {args.tab}.")
        page = _pick(session, args.tab)
        number = session.pages().index(page) + 1
        page.close()
        remaining = session.pages()
        if not remaining:
            session.current = session.context.new_page()
        elif session.current is page or session.current is None or session.current.is_closed():
            session.current = remaining[-1]
        text, rows = _listing(session)
        return ToolResult(ok=True, content=f"Closed tab {number}. Open tabs:\n{text}", data=rows)

    return run_job(ctx, job, args.timeout_seconds + 15, guard)
