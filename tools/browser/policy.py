"""Approval hooks, subjects, summaries and previews for the browser tools, and the sites a
conversation visited.

A "site" is scheme + host + port with the default port written out
("https://example.com:443"), computed the way the browser parses addresses
(`tools.browser.urls`). Sites visited in a conversation are kept in
`ctx.session.notes["browser_sites"]`; only the browser code adds to it, after the user (or a
rule, or the setting) let the load happen. Nothing a page says reaches these functions except
the element facts read from the DOM, and those can only make a call ask, never skip asking.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tools.browser import urls
from tools.browser.config import BrowserConfig
from tools.spec import Escalation, Subject, ToolContext, ToolError
from tools.summary_text import clean

SITES_NOTE = "browser_sites"
#: call id → whether browser_click's approval hook made that call ask (see `click_checked`).
CLICK_CHECKS_NOTE = "browser_click_checks"
_LOCAL_HOST = re.compile(r"^(localhost|127\.\d+\.\d+\.\d+|\[::1\])(:\d+)?([/?#]|$)", re.I)
_HOST_PORT = re.compile(r"^[^/\\:?#@]+:\d+([/\\?#]|$)")


def site_of(url: str) -> str | None:
    """scheme://host:port of an absolute http(s)/ws(s) address as the browser reads it
    (WHATWG URL rules: backslashes, tabs/newlines, user@host, %-encoded and Unicode hosts,
    IPv4 in any form, IPv6); None when it has no such origin or the browser would refuse it."""
    origin = urls.parse_origin(url)
    return origin.site if origin is not None else None


def normalize_url(raw: str) -> str:
    """An absolute http(s) URL (or about:blank) as the browser will read it; ToolError for
    other schemes (file:, javascript:, …) and for addresses whose site cannot be told."""
    url = urls.clean(raw)
    if url.lower() == "about:blank":
        return "about:blank"
    if urls.scheme_of(url) is None or _HOST_PORT.match(url):
        url = ("http://" if _LOCAL_HOST.match(url) else "https://") + url.lstrip("/\\")
    scheme = urls.scheme_of(url)
    if scheme not in ("http", "https"):
        raise ToolError(
            f"Only http and https pages can be opened, not {scheme}: addresses "
            "(use the file tools for local files)."
        )
    if site_of(url) is None:
        raise ToolError(
            f"{raw!r} is not a web address Deskhand can check (its host or port is not valid, "
            "or it uses characters a browser would read differently)."
        )
    return url


def visited_sites(ctx: ToolContext) -> set[str]:
    notes = getattr(ctx.session, "notes", None)
    if notes is None:
        return set()
    sites = notes.get(SITES_NOTE)
    if not isinstance(sites, set):
        sites = notes[SITES_NOTE] = set(sites or ())
    return sites


def remember_sites(ctx: ToolContext, *addresses: str) -> None:
    """Note sites as visited; takes URLs or sites (a site is its own URL)."""
    notes = getattr(ctx.session, "notes", None)
    if notes is None:
        return
    sites = visited_sites(ctx)
    sites.update(s for s in map(site_of, addresses) if s)


def private_data_read(ctx: ToolContext) -> str | None:
    """What private data this conversation has read (set by the call pipeline), if any."""
    value = getattr(ctx.session, "private_data_read", None)
    return str(value) if value else None


def egress_reason(site: str, ctx: ToolContext, what: str = "opens") -> str | None:
    """Why loading `site` must ask: private data was read (then "visited before" is not
    enough: the address itself can carry the data out), or the site is new in this
    conversation (unless Settings → Browser → ask_new_sites is off)."""
    private = private_data_read(ctx)
    if private:
        return (
            f"{what} {site} after this conversation read private data ({private}); the "
            "address or the page could carry it out"
        )
    if site in visited_sites(ctx) or not BrowserConfig.from_context(ctx).ask_new_sites:
        return None
    return f"{what} {site}, a site not visited before in this conversation"


def new_site_reason(url: str, ctx: ToolContext) -> Escalation | None:
    site = site_of(url)
    if site is None:
        return None
    reason = egress_reason(site, ctx)
    return Escalation(reason, egress=True, site=site) if reason else None


# ---- escalate hooks (run on the runner's pool; never start the browser) --------------------


def new_site(args: Any, ctx: ToolContext) -> Escalation | None:
    """browser_navigate: opening an address sends it out; ask unless the site was visited
    before (and no private data was read) or the setting allows new sites."""
    try:
        url = normalize_url(args.url)
    except ToolError:
        return None  # the call itself fails with the reason
    return new_site_reason(url, ctx)


def new_tab_site(args: Any, ctx: ToolContext) -> Escalation | None:
    if args.action != "open" or not args.url:
        return None
    return new_site(args, ctx)


def _inspect(args: Any, ctx: ToolContext) -> dict[str, Any] | None:
    """The target element's facts; None if the browser is not open. ToolError if the
    element cannot be inspected (missing, page busy)."""
    from tools.browser import elements
    from tools.browser.host import BrowserHost

    host = BrowserHost.existing(ctx.home)
    if host is None:
        return None
    return host.run_if_open(lambda s: elements.describe(s.page(), args))


def click_reason(info: dict[str, Any], ctx: ToolContext) -> Escalation | None:
    """Why clicking this element must ask: it submits a form (data leaves for the form's
    site), or it follows a link to a site that needs asking (see `egress_reason`)."""
    if info.get("submits") or (info.get("buttonish") and info.get("in_form")):
        target = info.get("form_action") or info.get("page_url") or "the site"
        site = site_of(target)
        return Escalation(
            f"submits a form ({info.get('form_method') or 'GET'} {target})", egress=True, site=site
        )
    href = info.get("href")
    if not href or site_of(href) is None:
        return None
    site = site_of(href)
    assert site is not None
    reason = egress_reason(site, ctx, "follows a link to")
    return Escalation(reason, egress=True, site=site) if reason else None


def click_needs_approval(args: Any, ctx: ToolContext) -> Escalation | None:
    """browser_click asks when it submits a form or follows a link to a site that needs
    asking, and when the element cannot be checked (the safe side). The answer is noted for
    the click itself, which refuses if the element changed into one that would have asked."""
    try:
        info = _inspect(args, ctx)
    except ToolError as exc:
        reason: Escalation | None = Escalation(f"could not check what this click does ({exc})")
    else:
        reason = click_reason(info, ctx) if info is not None else None
    notes = getattr(ctx.session, "notes", None)
    if notes is not None and ctx.call_id:
        notes.setdefault(CLICK_CHECKS_NOTE, {})[ctx.call_id] = reason is not None
    return reason


def click_checked(ctx: ToolContext) -> bool | None:
    """Whether the approval hook made this call ask (None: the hook did not run)."""
    notes = getattr(ctx.session, "notes", None)
    if notes is None or not ctx.call_id:
        return None
    checked: bool | None = notes.get(CLICK_CHECKS_NOTE, {}).pop(ctx.call_id, None)
    return checked


def _submit_escalation(info: dict[str, Any] | None, what: str) -> Escalation | None:
    if not info or not info.get("in_form"):
        return None
    target = info.get("form_action") or info.get("page_url") or ""
    method = info.get("form_method") or "GET"
    return Escalation(f"{what} ({method} {target})", egress=True, site=site_of(target))


def fill_sends(args: Any, ctx: ToolContext) -> Escalation | None:
    """browser_fill with submit=True sends the form: egress to the form's site."""
    if not args.submit:
        return None
    try:
        info = _inspect(args, ctx)
    except ToolError:
        info = None
    return _submit_escalation(info, "fills in and submits a form")


def press_sends(args: Any, ctx: ToolContext) -> Escalation | None:
    """browser_press Enter in a form field submits the form: egress to the form's site."""
    if not args.key.lower().endswith("enter"):
        return None
    from tools.browser import elements
    from tools.browser.host import BrowserHost

    host = BrowserHost.existing(ctx.home)
    if host is None:
        return None
    has_target = any(v is not None for v in (args.ref, args.text, args.selector))
    try:
        info = host.run_if_open(
            lambda s: elements.describe(s.page(), args)
            if has_target
            else elements.describe_focused(s.page())
        )
    except ToolError:
        info = None
    return _submit_escalation(info, "presses Enter in a form (submits it)")


# ---- subjects and one-line summaries (approval card, argument rules) -----------------------


def current_site(ctx: ToolContext) -> str | None:
    """The site of the current tab, if the browser is open (never starts it)."""
    from tools.browser.host import BrowserHost

    host = BrowserHost.existing(ctx.home)
    if host is None:
        return None
    try:
        url = host.run_if_open(lambda s: s.page().url)
    except ToolError:
        return None
    return site_of(url) if url else None


def _subject(site: str | None) -> Subject:
    return Subject(site=site, target=f"Browser · {site}" if site else "Browser")


def subject_navigate(args: Any, ctx: ToolContext) -> Subject:
    try:
        return _subject(site_of(normalize_url(args.url)))
    except ToolError:
        return _subject(None)


def subject_tabs(args: Any, ctx: ToolContext) -> Subject:
    if args.action == "open" and args.url:
        return subject_navigate(args, ctx)
    return _subject(current_site(ctx))


def subject_click(args: Any, ctx: ToolContext) -> Subject:
    """Where the click sends the user: the form's or link's site, else the page's site."""
    info = _safe_inspect(args, ctx)
    if info:
        escalation = click_reason(info, ctx)
        if escalation is not None and escalation.site:
            return _subject(escalation.site)
        return _subject(site_of(info.get("page_url") or ""))
    return _subject(current_site(ctx))


def subject_page(args: Any, ctx: ToolContext) -> Subject:
    """Tools acting on the current page (fill, type, press, select, download, evaluate…)."""
    url = getattr(args, "url", None)
    if url:
        site = site_of(url)
        if site:
            return _subject(site)
    return _subject(current_site(ctx))


def _target_name(args: Any, ctx: ToolContext) -> str:
    info = _safe_inspect(args, ctx)
    if info is not None:
        name = info.get("name") or info.get("kind") or "element"
        return f"“{clean(name, 80)}”"
    if args.ref is not None:
        return f"element [{args.ref}]"
    return f"“{clean(args.text or args.selector or '', 80)}”"


def _on_site(ctx: ToolContext) -> str:
    site = current_site(ctx)
    return f" on {site.split('://', 1)[1]}" if site else ""


def summary_navigate(args: Any, ctx: ToolContext) -> str:
    try:
        return f"Open {normalize_url(args.url)}"
    except ToolError:
        return f"Open {clean(args.url, 80)}"


def summary_tabs(args: Any, ctx: ToolContext) -> str:
    if args.action == "open":
        return f"Open a new tab at {summary_navigate(args, ctx)[5:]}" if args.url else "Open a tab"
    if args.action == "switch":
        return f"Switch to browser tab {args.tab}"
    if args.action == "close":
        return f"Close browser tab {args.tab}" if args.tab else "Close the current browser tab"
    return "List the browser tabs"


def summary_click(args: Any, ctx: ToolContext) -> str:
    return f"Click {_target_name(args, ctx)}{_on_site(ctx)}"


def summary_fill(args: Any, ctx: ToolContext) -> str:
    then = " and submit" if args.submit else ""
    return f"Type {clean(repr(args.value), 40)} into {_target_name(args, ctx)}{then}"


def summary_type(args: Any, ctx: ToolContext) -> str:
    has_target = any(v is not None for v in (args.ref, args.text, args.selector))
    where = _target_name(args, ctx) if has_target else "the focused field"
    return f"Type {clean(repr(args.value), 40)} into {where}{_on_site(ctx)}"


def summary_press(args: Any, ctx: ToolContext) -> str:
    return f"Press {clean(args.key, 30)}{_on_site(ctx)}"


def summary_select(args: Any, ctx: ToolContext) -> str:
    return f"Choose {clean(repr(args.option), 40)} in {_target_name(args, ctx)}"


def summary_download(args: Any, ctx: ToolContext) -> str:
    source = clean(args.url, 80) if args.url else f"what {_target_name(args, ctx)} links to"
    return f"Download {source} into {args.folder}"


def summary_evaluate(args: Any, ctx: ToolContext) -> str:
    return f"Run JavaScript in the current page{_on_site(ctx)}"


# ---- previews (shown in the approval prompt) -------------------------------------------


def _safe_inspect(args: Any, ctx: ToolContext) -> dict[str, Any] | None:
    try:
        return _inspect(args, ctx)
    except ToolError:
        return None


def _element_text(args: Any, ctx: ToolContext) -> str:
    info = _safe_inspect(args, ctx)
    if info is None:
        named = f"[{args.ref}]" if args.ref is not None else repr(args.text or args.selector or "")
        return f"element {named}"
    from tools.browser.elements import label

    where = info.get("page_url") or ""
    return f"{label(info)} on {where}" if where else label(info)


def preview_click(args: Any, ctx: ToolContext) -> str:
    info = _safe_inspect(args, ctx)
    text = f"Click {_element_text(args, ctx)}"
    if info and info.get("in_form"):
        text += f"\nForm: {info.get('form_method')} {info.get('form_action')}"
    elif info and info.get("href"):
        text += f"\nLink to: {info['href']}"
    return text


def preview_fill(args: Any, ctx: ToolContext) -> str:
    then = "\nThen press Enter (submits the form)." if args.submit else ""
    return f"Fill {_element_text(args, ctx)} with:\n{args.value}{then}"


def preview_type(args: Any, ctx: ToolContext) -> str:
    where = _element_text(args, ctx) if args.ref or args.text or args.selector else "the page"
    return f"Type into {where}:\n{args.value}"


def preview_press(args: Any, ctx: ToolContext) -> str:
    where = _element_text(args, ctx) if args.ref or args.text or args.selector else "the page"
    note = " (may submit a form)" if args.key.lower().endswith("enter") else ""
    return f"Press {args.key} in {where}{note}"


def preview_select(args: Any, ctx: ToolContext) -> str:
    return f"Choose {args.option!r} in {_element_text(args, ctx)}"


def preview_download(args: Any, ctx: ToolContext) -> str:
    from tools.browser.capture import destination_folder

    folder = destination_folder(args, ctx)
    name = args.filename or "(the name the site suggests)"
    source = args.url or f"what clicking {_element_text(args, ctx)} downloads"
    return f"Download {source}\nSave to: {folder}/{name}"


def preview_evaluate(args: Any, ctx: ToolContext) -> str:
    return f"Run this JavaScript in the current page:\n\n{args.script}"


def jsonable(value: Any, limit: int) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str, indent=1)
    return text if len(text) <= limit else text[:limit] + "\n… (cut)"


def download_makes_something_run(args: Any, ctx: ToolContext) -> Escalation | None:
    """A download into a place whose files run by themselves (a git hooks folder, autostart,
    systemd units…) is an EXECUTE change no rule covers, as it is for the file tools."""
    from tools.fs import autorun
    from tools.fs.sandbox import Sandbox

    try:
        folder = Sandbox.from_context(ctx).resolve(args.folder)
    except Exception:
        return None  # the download itself refuses a folder outside the sandbox
    found = autorun.classify(folder / "download", autorun.autorun_places(Path.home()))
    if found is None:
        return None
    return Escalation(found.reason("downloads"), never_covered=True)
