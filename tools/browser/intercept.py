"""Wiring the egress guard into the browser (browser thread only).

Two hooks, because neither alone sees every request that matters:

* A Playwright context route sees the first request of every page, popup and worker before
  it leaves, but never a redirect hop (the browser follows 30x itself). It checks
  state-changing requests and every main-frame navigation's first request.
* A CDP `Fetch` session per page, enabled for documents, sees each HTTP redirect hop of a
  main-frame navigation before it is sent. It checks those hops.

A request waits in the browser until its handler answers; handlers only run while a
browser job is running, so a page cannot load anything between tool calls either.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from tools.browser.egress import SAFE_METHODS, EgressGuard

log = logging.getLogger(__name__)

_PATTERNS = [{"urlPattern": "*", "resourceType": "Document", "requestStage": "Request"}]


class Interceptor:
    """Routes every request of one browser context through `guard()` (the current call's)."""

    def __init__(self, context: Any, guard: Any) -> None:
        self._context = context
        self._guard = guard  # () -> EgressGuard
        #: page → (cdp session, main frame id); None while attaching
        self._watched: dict[Any, tuple[Any, str] | None] = {}
        self._hops: dict[str, str] = {}  # network id → last URL (for redirect messages)
        context.route("**/*", self._on_route)

    # ---- pages ----------------------------------------------------------------------------

    def watch(self, page: Any) -> None:
        """Start checking this page's main-frame requests (idempotent)."""
        if page in self._watched or page.is_closed():
            return
        self._watched[page] = None
        try:
            cdp = self._context.new_cdp_session(page)
            tree = cdp.send("Page.getFrameTree")
            main = tree["frameTree"]["frame"]["id"]
            cdp.on("Fetch.requestPaused", lambda event: self._on_paused(cdp, main, event))
            cdp.send("Fetch.enable", {"patterns": _PATTERNS})
        except Exception as exc:  # the page closed while we attached
            log.debug("could not watch a page: %s", exc)
            self._watched.pop(page, None)
            return
        self._watched[page] = (cdp, main)
        page.on("close", lambda _page: self._watched.pop(page, None))

    def ensure_watched(self, page: Any, timeout: float = 5.0) -> None:
        """Watch `page` and return once its redirect checks are on (an event handler may be
        attaching it concurrently: Playwright runs handlers interleaved with the caller)."""
        self.watch(page)
        deadline = time.monotonic() + timeout
        while self._watched.get(page, ()) is None and time.monotonic() < deadline:
            page.wait_for_timeout(20)

    # ---- handlers -------------------------------------------------------------------------

    def _on_paused(self, cdp: Any, main: str, event: dict[str, Any]) -> None:
        request = event.get("request") or {}
        url = str(request.get("url") or "")
        method = str(request.get("method") or "GET").upper()
        hop_key = str(event.get("networkId") or event.get("requestId"))
        is_hop = bool(event.get("redirectedRequestId"))
        previous = self._hops.get(hop_key) if is_hop else None
        allowed = True
        try:
            if event.get("frameId") == main and is_hop:
                guard: EgressGuard = self._guard()
                if method not in SAFE_METHODS:
                    # a 307/308 redirect re-sends the form's data to the new address
                    allowed = guard.allow_send(url, method)
                if allowed:
                    allowed = guard.allow_navigation(url, from_url=previous)
        except Exception:
            log.exception("checking a navigation failed; stopping it")
            allowed = False
        finally:
            self._hops[hop_key] = url
            if len(self._hops) > 500:
                self._hops.clear()
            command = "Fetch.continueRequest" if allowed else "Fetch.failRequest"
            params: dict[str, Any] = {"requestId": event["requestId"]}
            if not allowed:
                # not BlockedByClient: its error page confuses the next load's bookkeeping
                params["errorReason"] = "Aborted"
            with contextlib.suppress(Exception):  # the page may be gone
                cdp.send(command, params)

    def _on_route(self, route: Any) -> None:
        request = route.request
        allowed = True
        try:
            guard: EgressGuard = self._guard()
            method = request.method.upper()
            if method not in SAFE_METHODS and (guard.check_sends or _main_frame_nav(request)):
                allowed = guard.allow_send(request.url, method)
            if allowed and _main_frame_nav(request):
                allowed = guard.allow_navigation(request.url)
        except Exception:
            log.exception("checking a request failed; stopping it")
            allowed = False
        with contextlib.suppress(Exception):
            if allowed:
                route.continue_()
            else:
                route.abort("aborted")  # no error page: the tab stays where it was


def _main_frame_nav(request: Any) -> bool:
    try:
        return bool(request.is_navigation_request()) and request.frame.parent_frame is None
    except Exception:  # service-worker requests have no frame
        return False
