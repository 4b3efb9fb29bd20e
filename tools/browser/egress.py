"""What the browser may send while a browser tool runs: the per-call egress guard.

The approval hooks decide on the address a call names; this guard decides on the requests
the browser really makes during the call (`tools.browser.intercept` feeds it every
main-frame navigation, every redirect hop and every state-changing request):

* A main-frame navigation (the first request, each HTTP redirect hop, a meta refresh, a
  script's `location = …`) may load a site the call was approved for, or (http → https) the
  same host upgraded; otherwise the same question as for a model-chosen address applies:
  once private data was read it asks, else visited sites and (with ask_new_sites off) new
  ones load.
* A state-changing request (anything but GET/HEAD/OPTIONS: form posts, fetch/XHR,
  sendBeacon) during an action that makes the page send (click, fill, type, press, select,
  evaluate) asks unless it goes to a site approved for this call.

Asking uses `ctx.confirm` from the browser thread (it blocks until the user answers); one
answer per site and call. Without a ctx, or when nobody can be asked, the request is
stopped, and `stopped` says so in plain words for the tool's result. An allow rule with a
matching site, when the app provides `ctx.egress_covered(site)`, counts as approval.
Imports no playwright.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from tools.browser.config import BrowserConfig
from tools.browser.policy import private_data_read, remember_sites, site_of, visited_sites
from tools.spec import ToolContext

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _no_pause() -> AbstractContextManager[None]:
    return contextlib.nullcontext()


@dataclass
class EgressGuard:
    ctx: ToolContext | None = None
    #: Sites approved for this call (by the user, a rule, or the call's own checks).
    approved: set[str] = field(default_factory=set)
    #: Ask about state-changing requests (the action makes the page send data).
    check_sends: bool = False
    #: Site → the answer given during this call.
    decisions: dict[str, bool] = field(default_factory=dict)
    #: Plain words: what was stopped during this call.
    stopped: list[str] = field(default_factory=list)
    #: Sites main-frame navigations loaded during this call (noted as visited afterwards).
    loaded: set[str] = field(default_factory=set)
    #: Seconds spent waiting for the user's answers.
    asked_seconds: float = 0.0
    #: Set by the browser host: marks time spent asking so its deadline waits for the user.
    pause: Callable[[], AbstractContextManager[None]] = _no_pause

    @classmethod
    def for_call(
        cls, ctx: ToolContext | None, approved: Iterable[str | None] = (), *, sends: bool = False
    ) -> EgressGuard:
        return cls(ctx=ctx, approved={s for s in approved if s}, check_sends=sends)

    def approve(self, *sites: str | None) -> None:
        self.approved.update(s for s in sites if s)

    # ---- decisions ----------------------------------------------------------------------

    def allow_navigation(self, url: str, *, from_url: str | None = None) -> bool:
        """May the main frame load `url` (a first request or a redirect hop from `from_url`)?"""
        site = site_of(url)
        if site is None:
            return urlsplit(url).scheme.lower() not in ("http", "https", "ws", "wss", "ftp")
        if site in self.approved or self._upgrade_of_approved(site):
            self.loaded.add(site)
            return True
        private = private_data_read(self.ctx) if self.ctx is not None else None
        if self.ctx is not None and not private:
            config = BrowserConfig.from_context(self.ctx)
            if site in visited_sites(self.ctx) or not config.ask_new_sites:
                self.loaded.add(site)
                return True
        origin = site_of(from_url or "")
        if origin and origin != site:
            summary = f"The page is redirecting from {origin} to {site}"
        else:
            summary = f"The page wants to open {site}"
        why = (
            f"This conversation has read private data ({private}); the address can carry it "
            "out."
            if private
            else "This site was not approved for this action."
        )
        allowed = self._ask(site, summary, f"{why}\n\nAddress: {url}", "open")
        if allowed:
            self.loaded.add(site)
        return allowed

    def allow_send(self, url: str, method: str) -> bool:
        """May the page send this state-changing request?"""
        if method.upper() in SAFE_METHODS:
            return True
        site = site_of(url)
        if site is None:
            scheme = urlsplit(url).scheme.lower()
            return scheme not in ("http", "https", "ws", "wss", "ftp")  # blob:, data: stay local
        if site in self.approved:
            return True
        parts = urlsplit(url)
        path = parts.path or "/"
        summary = f"The page wants to send data to {site} ({method.upper()} {path})"
        detail = f"Full address: {url}\nAllow only if you expect this page to send data there."
        return self._ask(site, summary, detail, f"send data ({method.upper()} {path})")

    # ---- helpers ------------------------------------------------------------------------

    def _upgrade_of_approved(self, site: str) -> bool:
        """https://host:443 when http://host:80 was approved (a plain upgrade, same host)."""
        if not site.startswith("https://") or not site.endswith(":443"):
            return False
        return f"http://{site[len('https://') : -len(':443')]}:80" in self.approved

    def _covered(self, site: str) -> bool:
        check = getattr(self.ctx, "egress_covered", None)
        if not callable(check):
            return False
        try:
            return bool(check(site))
        except Exception:
            return False

    def _refused(self, site: str) -> bool:
        check = getattr(self.ctx, "egress_refused", None)
        if not callable(check):
            return False
        try:
            return bool(check(site))
        except Exception:
            return True  # cannot tell: the safe side

    def _ask(self, site: str, summary: str, detail: str, verb: str) -> bool:
        if site in self.decisions:
            allowed = self.decisions[site]
        elif self._refused(site):  # a deny rule names this site: no question
            allowed = self.decisions[site] = False
        elif self._covered(site):
            allowed = self.decisions[site] = True
        elif self.ctx is None:
            allowed = self.decisions[site] = False
        else:
            started = time.monotonic()
            with self.pause():
                allowed = bool(self.ctx.confirm(summary, detail))
            self.asked_seconds += time.monotonic() - started
            self.decisions[site] = allowed
        if allowed:
            self.approve(site)
            if self.ctx is not None:
                remember_sites(self.ctx, site)
        else:
            note = f"Deskhand stopped the page from trying to {verb} {site}"
            note += " (declined, or nobody could be asked)."
            if note not in self.stopped:
                self.stopped.append(note)
        return allowed

    def notes(self) -> list[str]:
        return [f"[{s}]" for s in self.stopped]

    def stopped_error(self, fallback: str) -> str:
        return " ".join(self.stopped) if self.stopped else fallback
