"""What a click on a link in the conversation may do (issue: links in answers).

A link's address and its text come from the model, a page or a tool: an attacker who
prompt-injected the model chooses both. Opening one sends its address (which can carry
what the conversation read) to a site, so a click is checked like a browser navigation
(`tools/browser/policy.py`, architecture §5.8):

* Only http, https and mailto links can be opened at all (an allow-list: `javascript:`,
  `smb:` and custom handlers that could run a program are refused), and `file:` links to
  documents on this computer (a knowledge citation: `file:///…/report.pdf#page=3`): a
  document (PDF, Word, Excel, PowerPoint, OpenDocument, EPUB, Markdown, text) that exists
  and is no program opens without asking inside the allowed folders (Settings → Files) and
  asks anywhere else, or where it could run scripts (HTML, macro workbooks) or lies in a
  protected place; anything else (a script, a program, a folder, another computer's file)
  is refused. The fragment keeps only `page=N`, which `page_command` hands to a PDF viewer
  that takes one.
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

`decide` is a pure function of the address, the link's text and a `LinkState` (for a
`file:` link it also looks at the file on disk); the window only shows what it says.
`state_of` reads a conversation's state.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, unquote, urlsplit

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
#: Documents a `file:` link may open (what the documents reader and knowledge folders read).
FILE_KINDS = frozenset(
    {".pdf", ".docx", ".xlsx", ".csv", ".tsv", ".pptx", ".odt", ".epub", ".md", ".markdown"}
    | {".txt", ".text", ".log", ".rst", ".json", ".yaml", ".yml", ".toml", ".ini"}
)
#: Documents that may run scripts, macros or formulas when they open (OpenDocument holds
#: macros, a CSV cell's formula runs in a spreadsheet): a link to one always asks.
ACTIVE_FILE_KINDS = frozenset({".html", ".htm", ".xhtml", ".xlsm", ".odt", ".csv", ".tsv"})
#: A `file:` link's fragment that is kept (a PDF's page).
_PAGE_FRAGMENT = re.compile(r"page=(\d{1,6})")
_WINDOWS_DRIVE = re.compile(r"/[A-Za-z]:[/\\]")

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
    #: Folders whose documents a `file:` link opens without asking (Settings → Files:
    #: the allowed folders; knowledge folders lie in them).
    file_folders: tuple[str, ...] = ()
    #: Folders the user protected (Settings → Files): a link into one asks.
    denied_folders: tuple[str, ...] = ()
    #: Deskhand's own folder (settings, history, pasted files): protected, a link into it
    #: asks.
    home: str | None = None


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
    if scheme == "file" and len(raw) <= MAX_LINK:
        return _decide_file(raw, state)
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


# ---- files -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileTarget:
    """The document a `file:` link names: its real path (symlinks resolved), and the PDF
    page its fragment asks for."""

    path: Path
    page: int | None = None

    @property
    def url(self) -> str:
        page = f"#page={self.page}" if self.page is not None else ""
        return self.path.as_uri() + page

    @property
    def shown(self) -> str:
        page = f" (page {self.page})" if self.page is not None else ""
        return _shown(str(self.path) + page)


def file_target(url: str) -> FileTarget | str:
    """The document a `file:` link may open, or why it may not (plain words). Looks at the
    disk: the real path, that it is a file and no program."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        return f"The link names a file on another computer ({_short(parts.netloc, 60)})."
    raw = unquote(parts.path)
    if raw.replace("\\", "/").startswith("//"):  # //host/share, \\host\share, \\?\…
        return "The link names a file on another computer (a network path)."
    if _WINDOWS_DRIVE.match(raw) and sys.platform == "win32":
        raw = raw[1:]
    if not raw or "\0" in raw or not os.path.isabs(raw):
        return "The link does not name a file by its full path."
    real = Path(os.path.realpath(raw))
    kind = real.suffix.lower()
    if kind not in FILE_KINDS | ACTIVE_FILE_KINDS:
        return (
            "Deskhand opens only web and mail links, and documents on this computer; this "
            "file: link is to something else (it could be a program)."
        )
    if not real.is_file():
        return f"There is no document at {_short(str(real))} (moved or deleted?)."
    if os.name == "posix" and os.access(real, os.X_OK):
        return "The file can be run as a program, so Deskhand does not open it."
    page = _PAGE_FRAGMENT.fullmatch(parts.fragment)
    number = int(page.group(1)) if page and kind == ".pdf" and int(page.group(1)) > 0 else None
    return FileTarget(real, number)


def _decide_file(raw: str, state: LinkState) -> LinkDecision:
    target = file_target(raw)
    if isinstance(target, str):
        return _refuse(raw, target)
    reasons: list[str] = []
    where = _short(str(target.path.parent))
    if not _within_any(target.path, state.file_folders):
        reasons.append(
            f"The file is in {where}, outside the folders Deskhand may use (Settings → Files)."
        )
    elif _within_any(target.path, state.denied_folders):
        reasons.append(f"The file is in {where}, a folder you protected (Settings → Files).")
    protected = _protected(target.path, state.home)
    if protected:
        reasons.append(f"The file is in a protected place ({protected}).")
    if target.path.suffix.lower() in ACTIVE_FILE_KINDS:
        reasons.append("A file of this kind can run scripts, macros or formulas when it opens.")
    action: Action = "confirm" if reasons else "open"
    return LinkDecision(action, target.url, target.shown, tuple(reasons))


def _within_any(path: Path, folders: Sequence[str]) -> bool:
    for folder in folders:
        root = Path(os.path.realpath(os.path.expanduser(folder)))
        if path == root or root in path.parents:
            return True
    return False


def _protected(path: Path, home: str | None) -> str | None:
    """The label of the protected place (keys, keyrings, histories, Deskhand's own folder
    `home`…) `path` is in."""
    from tools.fs.protected import protected_places

    own = Path(os.path.realpath(home)) if home else None
    hit = protected_places(Path.home(), own).by_path(path)
    return hit.label if hit is not None else None


# ---- opening a PDF at a page ------------------------------------------------------------------

#: PDF viewers that open at a page, by a word of their desktop entry's name: the programs
#: to look for and their arguments ({page}, {path}, {url}: the file: address with #page=N,
#: which browsers read).
PAGE_VIEWERS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("evince", ("evince",), ("--page-index={page}", "{path}")),
    ("okular", ("okular",), ("--page", "{page}", "{path}")),
    ("atril", ("atril",), ("--page-index={page}", "{path}")),
    ("xreader", ("xreader",), ("--page-index={page}", "{path}")),
    ("zathura", ("zathura",), ("--page={page}", "{path}")),
    ("qpdfview", ("qpdfview",), ("{path}#{page}",)),
    ("firefox", ("firefox",), ("{url}",)),
    ("chromium", ("chromium", "chromium-browser"), ("{url}",)),
    ("google-chrome", ("google-chrome", "google-chrome-stable"), ("{url}",)),
    ("microsoft-edge", ("microsoft-edge", "microsoft-edge-stable"), ("{url}",)),
    ("brave", ("brave-browser", "brave"), ("{url}",)),
)


def page_command(
    target: FileTarget,
    viewer: str | None,
    which: Callable[[str], str | None] | None = None,
) -> list[str] | None:
    """The command that opens the PDF `target` at its page with the system's PDF viewer
    (`viewer`: its desktop entry, e.g. "org.gnome.Evince.desktop"), when that viewer takes
    a page; None: open the file the usual way (at its start)."""
    if target.page is None or not viewer or target.path.suffix.lower() != ".pdf":
        return None
    name = viewer.lower()
    find = which or shutil.which
    for word, programs, arguments in PAGE_VIEWERS:
        if word not in name:
            continue
        program = next((found for p in programs if (found := find(p))), None)
        if program is None:
            return None
        values = {"page": str(target.page), "path": str(target.path), "url": target.url}
        return [program, *(a.format_map(values) for a in arguments)]
    return None


def pdf_viewer() -> str | None:
    """The desktop entry of the system's PDF viewer (Linux, from xdg-mime; None elsewhere
    or when it cannot tell). Runs a program: call it off the GUI thread."""
    program = shutil.which("xdg-mime") if sys.platform.startswith("linux") else None
    if program is None:
        return None
    try:
        found = subprocess.run(
            [program, "query", "default", "application/pdf"],
            capture_output=True,
            text=True,
            timeout=3,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return found.stdout.strip() or None


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
    *,
    home: Path | None = None,
) -> LinkState:
    """The `LinkState` of a conversation: `session` its `ToolSession` (None: a new chat),
    `settings` the app settings (for Browser → ask about new sites), `rules` the RuleBook
    and `trust` the trust store (for the browser's `site` rules, which count only for a
    trusted browser tool, as in the pipeline); `home` Deskhand's own folder."""
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

    files = getattr(settings, "files", None)
    return LinkState(
        visited=frozenset(visited),
        private_data_read=str(private) if private else None,
        ask_new_sites=bool(ask) if ask is not None else True,
        site_rule=site_rule,
        file_folders=tuple(str(f) for f in getattr(files, "allowed_roots", None) or ()),
        denied_folders=tuple(str(f) for f in getattr(files, "denied_paths", None) or ()),
        home=str(home) if home is not None else None,
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
