"""Approval hooks and previews for the browser tools, and the sites a conversation visited.

A "site" is scheme + host [+ port]. Sites visited in a conversation are kept in
`ctx.session.notes["browser_sites"]`; only the navigation code adds to it, after the user
(or the setting) let the call run. Nothing a page says reaches these functions except the
element facts read from the DOM, and those can only make a call ask, never skip asking.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

from tools.browser.config import BrowserConfig
from tools.spec import ToolContext, ToolError

SITES_NOTE = "browser_sites"
#: call id → whether browser_click's approval hook made that call ask (see `click_checked`).
CLICK_CHECKS_NOTE = "browser_click_checks"
_LOCAL_HOST = re.compile(r"^(localhost|127\.\d+\.\d+\.\d+|\[::1\])(:\d+)?([/?#]|$)", re.I)
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def normalize_url(raw: str) -> str:
    """An absolute http(s) URL (or about:blank); ToolError for other schemes (file:, …)."""
    url = raw.strip()
    if url.lower() == "about:blank":
        return "about:blank"
    if not _SCHEME.match(url) or re.match(r"^[^/:]+:\d+", url):
        url = ("http://" if _LOCAL_HOST.match(url) else "https://") + url.lstrip("/")
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        raise ToolError(
            f"Only http and https pages can be opened, not {parts.scheme}: addresses "
            "(use the file tools for local files)."
        )
    if not parts.hostname:
        raise ToolError(f"{raw!r} is not a web address")
    return url


def site_of(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname.lower()}{port}"


def visited_sites(ctx: ToolContext) -> set[str]:
    notes = getattr(ctx.session, "notes", None)
    if notes is None:
        return set()
    sites = notes.get(SITES_NOTE)
    if not isinstance(sites, set):
        sites = notes[SITES_NOTE] = set(sites or ())
    return sites


def remember_sites(ctx: ToolContext, *urls: str) -> None:
    notes = getattr(ctx.session, "notes", None)
    if notes is None:
        return
    sites = visited_sites(ctx)
    sites.update(s for s in map(site_of, urls) if s)


def new_site_reason(url: str, ctx: ToolContext) -> str | None:
    if not BrowserConfig.from_context(ctx).ask_new_sites:
        return None
    site = site_of(url)
    if site is None or site in visited_sites(ctx):
        return None
    return f"opens {site}, a site not visited before in this conversation"


# ---- escalate hooks (run on the runner's pool; never start the browser) --------------------


def new_site(args: Any, ctx: ToolContext) -> str | None:
    """browser_navigate: ask before opening a site for the first time."""
    try:
        url = normalize_url(args.url)
    except ToolError:
        return None  # the call itself fails with the reason
    return new_site_reason(url, ctx)


def new_tab_site(args: Any, ctx: ToolContext) -> str | None:
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


def click_reason(info: dict[str, Any], ctx: ToolContext) -> str | None:
    """Why clicking this element must ask: it submits a form or opens a new site."""
    if info.get("submits") or (info.get("buttonish") and info.get("in_form")):
        target = info.get("form_action") or info.get("page_url") or "the site"
        return f"submits a form ({info.get('form_method') or 'GET'} {target})"
    href = info.get("href")
    return new_site_reason(href, ctx) if href else None


def click_needs_approval(args: Any, ctx: ToolContext) -> str | None:
    """browser_click asks when it submits a form or follows a link to a new site, and when
    the element cannot be checked (the safe side). The answer is noted for the click itself,
    which refuses if the element changed into one that would have asked."""
    try:
        info = _inspect(args, ctx)
    except ToolError as exc:
        reason: str | None = f"could not check what this click does ({exc})"
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
