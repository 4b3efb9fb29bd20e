"""What a click on a link in the conversation may do (issue: links in answers).

A link's address and its text come from the model, a page or a tool: an attacker who
prompt-injected the model chooses both. Opening one sends its address (which can carry
what the conversation read) to a site, so a click is checked like a browser navigation
(`tools/browser/policy.py`, architecture §5.8):

* Only http, https and mailto links can be opened at all (an allow-list: `file:`,
  `javascript:`, `smb:` and custom handlers that could run a program are refused).
* The address is rewritten into the one that will really be opened and shown: the host as
  the browser reads it (WHATWG rules, `tools.browser.urls`: punycode for Unicode names,
  IPv4 in dotted form), no user name or password (`https://good.com@evil.com` goes to
  evil.com), every character outside printable ASCII percent-encoded. `mailto:` keeps only
  the fields in `MAILTO_FIELDS` (never `attach=` or any other a mail program may read).
* The click asks (`confirm`, with the reasons in plain words) when the link's text does not
  show that address, the host is a punycode (lookalike) name, the address held a user name,
  fields were dropped from a mail link, the site is new to this conversation (its browser
  has not been let load it, no `site` allow rule names it, and Settings → Browser → ask
  about new sites is on), or the conversation has read private data (then only a `site`
  allow rule for the browser lets it open without asking). A `site` deny rule refuses it.

`decide` is a pure function of the address, the link's text and a `LinkState`; the window
only shows what it says. `state_of` reads a conversation's state.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote, unquote

from app.core.visible import visible

Action = Literal["open", "confirm", "refuse"]
SiteRule = Literal["allow", "ask", "deny"]

#: Schemes a link may open (everything else is refused).
OPENABLE = frozenset({"http", "https", "mailto"})
#: The only fields a `mailto:` link keeps (RFC 6068 header fields a mail program fills in
#: and shows). `attach`, `attachment`, `x-…` and the rest are dropped.
MAILTO_FIELDS = frozenset({"to", "cc", "bcc", "subject", "body"})
#: Sites the user opened from links in this conversation (`ToolSession.notes`). Kept apart
#: from the browser's own visited sites: a click of the user's does not let the model's
#: browser go there.
LINK_SITES_NOTE = "link_sites"
#: The browser's visited sites (`tools.browser.policy.SITES_NOTE`).
BROWSER_SITES_NOTE = "browser_sites"
#: The tool whose `site` rules say where the conversation may navigate.
NAVIGATE_TOOL = "browser_navigate"
#: Longest address shown or opened.
MAX_LINK = 4000

#: Characters kept as they are in a path, query or fragment; all else is percent-encoded.
_SAFE = "!$%&'()*+,-./:;=?@_~"
#: A "%" that does not start a %XX escape (encoded as %25).
_LONE_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _no_rule(site: str) -> SiteRule | None:
    return None


@dataclass(frozen=True)
class LinkState:
    """What the conversation showing the link has done (see `state_of`)."""

    #: Sites its browser was let load, and sites the user opened from its links.
    visited: frozenset[str] = frozenset()
    #: What private data it has read, in plain words (`ToolSession.private_data_read`).
    private_data_read: str | None = None
    #: Settings → Browser → ask about new sites.
    ask_new_sites: bool = True
    #: What the `site` rules for the browser say about a site ("allow" only for a narrow
    #: allow rule naming it).
    site_rule: Callable[[str], SiteRule | None] = field(default=_no_rule)


@dataclass(frozen=True)
class LinkDecision:
    action: Action
    #: The address to open (rewritten as described above); "" when refused.
    url: str
    #: The real target for people: `url` (or, when refused, the address as given) with
    #: controls and invisible characters made visible, cut to MAX_LINK characters.
    shown: str
    #: Why it asks or is refused, in plain words (empty for "open").
    reasons: tuple[str, ...] = ()
    #: scheme://host:port for web links.
    site: str | None = None
    #: Fields dropped from a mailto link.
    dropped: tuple[str, ...] = ()


def decide(url: str, text: str | None, state: LinkState | None = None) -> LinkDecision:
    """What a click on a link to `url` whose text reads `text` (None: not known) does."""
    state = state or LinkState()
    from tools.browser import urls

    raw = urls.clean(url)
    scheme = urls.scheme_of(raw)
    if scheme not in OPENABLE:
        kind = f"a {scheme}: link" if scheme else "not a full web or mail address"
        return _refuse(url, f"Deskhand opens only web and mail links; this is {kind}.")
    if len(raw) > MAX_LINK:
        return _refuse(url, f"The address is too long to check ({len(raw)} characters).")
    if scheme == "mailto":
        return _decide_mail(raw, text, state)
    return _decide_web(raw, text, state)


# ---- web ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Web:
    url: str
    site: str
    host: str
    userinfo: str


def _web(raw: str) -> _Web | None:
    """The address the browser would load, rewritten unambiguously; None if it has no
    site Deskhand can tell."""
    from tools.browser import urls

    origin = urls.parse_origin(raw)
    if origin is None or origin.scheme not in ("http", "https"):
        return None
    rest = raw[raw.index(":") + 1 :].lstrip("/\\")
    end = next((i for i, c in enumerate(rest) if c in "/\\?#"), len(rest))
    authority, tail = rest[:end], rest[end:]
    at = authority.rfind("@")
    userinfo = authority[:at] if at >= 0 else ""
    tail, hash_mark, fragment = tail.partition("#")
    path, question_mark, query = tail.partition("?")
    path = path.replace("\\", "/") or "/"
    port = "" if origin.port == urls.DEFAULT_PORTS[origin.scheme] else f":{origin.port}"
    address = (
        f"{origin.scheme}://{origin.host}{port}{_encode(path)}"
        f"{question_mark}{_encode(query)}{hash_mark}{_encode(fragment)}"
    )
    return _Web(address, origin.site, origin.host, userinfo)


def _decide_web(raw: str, text: str | None, state: LinkState) -> LinkDecision:
    web = _web(raw)
    if web is None:
        return _refuse(
            raw,
            "Deskhand cannot tell which site this address belongs to (its host or port is "
            "not valid, or a browser would read it differently).",
        )
    site, host = web.site, web.host
    rule = state.site_rule(site)
    if rule == "deny":
        return LinkDecision(
            "refuse",
            "",
            _shown(web.url),
            (f"A rule blocks {site}.",),
            site,
        )
    reasons: list[str] = []
    if web.userinfo:
        reasons.append(
            f"The address starts with “{_short(unquote(web.userinfo))}@”, which is not the "
            f"site: the link goes to {host}."
        )
    if any(label.startswith("xn--") for label in host.split(".")):
        reasons.append(
            f"The site's name uses letters that can imitate another site's; its real name is "
            f"{host}."
        )
    if not _text_shows(text, web.url, raw):
        reasons.append(_hidden_reason(text, site))
    if state.private_data_read and rule != "allow":
        reasons.append(
            f"This conversation has read private data ({_short(state.private_data_read)}); "
            f"the address could carry it to {site}."
        )
    elif rule == "ask":
        reasons.append(f"A rule asks before opening {site}.")
    elif site not in state.visited and rule != "allow" and state.ask_new_sites:
        reasons.append(f"{site} is a site this conversation has not opened before.")
    action: Action = "confirm" if reasons else "open"
    return LinkDecision(action, web.url, _shown(web.url), tuple(reasons), site)


def _text_shows(text: str | None, url: str, raw: str) -> bool:
    """Whether the link's text is its address (as typed, or as it will be opened; the
    scheme and a lone trailing slash may be left out)."""
    if text is None:
        return False
    shown = text.strip()
    if not shown:
        return False
    if shown in (raw, url):
        return True
    candidates = [shown] if "://" in shown else [f"https://{shown}", f"http://{shown}"]
    for candidate in candidates:
        web = _web(candidate)
        if web is not None and not web.userinfo and web.url == url:
            return True
    return False


def _hidden_reason(text: str | None, site: str) -> str:
    from tools.browser import urls

    if text is None or not text.strip():
        return f"The link's text does not show where it goes ({site})."
    words = text.strip()
    claimed = urls.parse_origin(words if "://" in words else f"https://{words}")
    if claimed is not None and "." in claimed.host and claimed.site != site:
        return (
            f"The link's text looks like an address (“{_short(words)}”) but the link goes "
            f"to {site}."
        )
    return f"The link's text (“{_short(words)}”) does not show where it goes."


# ---- mail -----------------------------------------------------------------------------------


def _decide_mail(raw: str, text: str | None, state: LinkState) -> LinkDecision:
    body = raw[raw.index(":") + 1 :].split("#", 1)[0]
    to, _, query = body.partition("?")
    kept: list[str] = []
    dropped: list[str] = []
    for part in query.split("&") if query else ():
        key, _, value = part.partition("=")
        name = unquote(key).strip().lower()
        if name in MAILTO_FIELDS:
            kept.append(f"{name}={_field(value)}")
        elif name:
            dropped.append(name)
    address = "mailto:" + _field(to) + ("?" + "&".join(kept) if kept else "")
    reasons: list[str] = []
    if dropped:
        names = ", ".join(sorted({_short(n, 40) for n in dropped}))
        reasons.append(
            f"Removed from the mail link: {names} (a mail link may fill in only the "
            "address, subject, body, cc and bcc; an attachment could send your files)."
        )
    recipients = unquote(to).strip()
    words = (text or "").strip()
    if not words or words not in (recipients, raw, address, f"mailto:{recipients}"):
        reasons.append(
            f"The link's text (“{_short(words)}”) does not show the mail it writes."
            if words
            else "The link's text does not show the mail it writes."
        )
    if state.private_data_read:
        reasons.append(
            f"This conversation has read private data ({_short(state.private_data_read)}); "
            "the mail could carry it out."
        )
    action: Action = "confirm" if reasons else "open"
    return LinkDecision(action, address, _shown(address), tuple(reasons), None, tuple(dropped))


# ---- helpers --------------------------------------------------------------------------------


def _encode(text: str) -> str:
    """Percent-encodes everything but printable ASCII that is safe in a URL (existing
    %XX escapes are kept, so nothing is encoded twice)."""
    return quote(_LONE_PERCENT.sub("%25", text), safe=_SAFE)


def _field(text: str) -> str:
    """A mailto address list or field value decoded once and encoded again, so that no
    `?`, `&`, `=` or `#` hidden as %XX can start another field in a mail program."""
    return quote(unquote(text), safe="@,!$'()*+-._~;:/")


def _shown(address: str) -> str:
    return visible(address[:MAX_LINK], keep_newlines=False)


def _short(text: str, limit: int = 80) -> str:
    flat = visible(text, keep_newlines=False)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _refuse(url: str, reason: str) -> LinkDecision:
    return LinkDecision("refuse", "", _shown(url), (reason,))


# ---- a conversation's state -----------------------------------------------------------------


def state_of(
    session: Any,
    settings: Any = None,
    rules: Any = None,
    trust: Any = None,
    conversation_id: str | None = None,
) -> LinkState:
    """The `LinkState` of a conversation: `session` its `ToolSession` (None: a new chat),
    `settings` the app settings (for Browser → ask about new sites), `rules` the RuleBook
    and `trust` the trust store (for the browser's `site` rules, which count only for a
    trusted browser tool, as in the pipeline)."""
    notes = getattr(session, "notes", None) or {}
    visited: set[str] = set()
    for key in (BROWSER_SITES_NOTE, LINK_SITES_NOTE):
        visited.update(str(s) for s in notes.get(key) or ())
    browser = getattr(settings, "browser", None)
    ask = getattr(browser, "ask_new_sites", True)
    private = getattr(session, "private_data_read", None)
    registry = getattr(session, "registry", None)

    def site_rule(site: str) -> SiteRule | None:
        if rules is None:
            return None
        from app.core.rules import RuleDecision
        from tools.spec import Subject

        source = registry.source_of(NAVIGATE_TOOL) if registry is not None else None
        source_id = getattr(source, "id", "builtin")
        try:
            ev = rules.evaluate(NAVIGATE_TOOL, source_id, Subject(site=site), conversation_id)
        except Exception:  # rules that cannot be read never let a link open unasked
            return "ask"
        if ev.decision is RuleDecision.DENY:
            return "deny"
        if ev.decision is RuleDecision.ASK:
            return "ask"
        trusted = source is None or trust is None or trust.is_trusted(source, NAVIGATE_TOOL)
        narrow = ev.rule is not None and ev.rule.matcher.kind == "site"
        if ev.decision is RuleDecision.ALLOW and narrow and trusted:
            return "allow"
        return None

    return LinkState(
        visited=frozenset(visited),
        private_data_read=str(private) if private else None,
        ask_new_sites=bool(ask) if ask is not None else True,
        site_rule=site_rule,
    )


def remember_opened(session: Any, decision: LinkDecision) -> None:
    """The user opened `decision`'s web link: its site is no longer new for links of this
    conversation (the browser's own list is not touched)."""
    notes = getattr(session, "notes", None)
    if notes is None or decision.site is None or decision.action == "refuse":
        return
    sites = notes.get(LINK_SITES_NOTE)
    if not isinstance(sites, set):
        sites = notes[LINK_SITES_NOTE] = set(sites or ())
    sites.add(decision.site)
