"""Data leaving the machine through the browser (§5.8): sites as the browser parses them,
egress escalations, and the checks on what the browser really sends (redirects, page
navigations, state-changing requests), against Debian's Chromium and two local sites
(127.0.0.1 on two ports = two sites)."""

from __future__ import annotations

import html
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.fixtures_browser import BrowserDriver
from tools.browser.policy import site_of
from tools.browser.urls import DEFAULT_PORTS
from tools.spec import Escalation, Subject

# ---- two local sites -----------------------------------------------------------------------


def _page(title: str, body: str) -> bytes:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
        f"</title></head><body>{body}</body></html>"
    ).encode()


@dataclass
class Site:
    server: ThreadingHTTPServer
    #: (method, path with query, body) of every request received.
    requests: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def site(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "/") -> str:
        return self.site + path

    def hits(self, method: str | None = None) -> list[tuple[str, str, str]]:
        return [r for r in self.requests if method is None or r[0] == method]


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _body(self) -> str:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length).decode(errors="replace") if length else ""

        def _send(self, status: int, body: bytes = b"", **headers: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Access-Control-Allow-Origin", "*")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _handle(self, method: str) -> None:
            body = self._body()
            site.requests.append((method, self.path, body))
            parts = urlsplit(self.path)
            to = parse_qs(parts.query).get("to", [""])[0]
            quoted = html.escape(to, quote=True)
            if parts.path == "/redirect":
                return self._send(302, Location=to)
            if parts.path == "/meta":
                meta = f"<meta http-equiv='refresh' content='0; url={quoted}'>"
                return self._send(200, _page("Moving", meta + "<p>Moving…</p>"))
            if parts.path == "/js":
                script = html.escape(f"location.href = {to!r}")
                button = f'<button onclick="{script}">Go there</button>'
                return self._send(200, _page("Script link", button))
            if parts.path == "/post":
                script = (
                    f"fetch({to!r}, {{method: 'POST', body: 'secret=42'}})"
                    ".then(() => document.getElementById('out').textContent = 'sent')"
                    ".catch(() => document.getElementById('out').textContent = 'failed')"
                )
                button = f'<button onclick="{html.escape(script)}">Save</button>'
                return self._send(200, _page("Saver", button + "<p id='out'></p>"))
            if parts.path == "/beacon":
                script = f"navigator.sendBeacon({to!r}, 'secret=42')"
                button = f'<button onclick="{html.escape(script)}">Like</button>'
                return self._send(200, _page("Liker", button))
            if parts.path == "/form":
                form = f"<form method='post' action='{quoted}'><input name='q' value='x'>"
                form += "<button>Send</button></form>"
                return self._send(200, _page("Form", form))
            return self._send(200, _page(f"Page {parts.path}", f"<h1>Page {parts.path}</h1>"))

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

    return Handler


def _serve() -> Iterator[Site]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    server.daemon_threads = True
    site = Site(server)
    server.RequestHandlerClass = _handler(site)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="egress-site", daemon=True
    )
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def site_a() -> Iterator[Site]:
    yield from _serve()


@pytest.fixture
def site_b() -> Iterator[Site]:
    yield from _serve()


# ---- sites as the browser parses them --------------------------------------------------------

#: Address → the site the browser loads (None: the browser refuses it, or Deskhand does).
URL_TRICKS: dict[str, str | None] = {
    "https://example.com": "https://example.com:443",
    "HTTP://EXAMPLE.com:80/x": "http://example.com:80",
    "https://example.com:0443/": "https://example.com:443",
    "http://example.com:8080": "http://example.com:8080",
    # backslashes are slashes in special schemes
    "https:\\\\evil.com\\x": "https://evil.com:443",
    "https:/\\/\\evil.com": "https://evil.com:443",
    "https://good.com\\@evil.com/": "https://good.com:443",
    "http:evil.com/a": "http://evil.com:80",
    # tabs/newlines anywhere, C0 controls and spaces around
    " \t https://ex\nample.com/ \x01": "https://example.com:443",
    "https://goo\tgle.com\r@evil.com": "https://evil.com:443",
    # userinfo: the host follows the last @ of the authority
    "https://good.com@evil.com/": "https://evil.com:443",
    "https://user:pw@good.com:8443@evil.com:444/": "https://evil.com:444",
    "https://good.com?@evil.com/": "https://good.com:443",
    "https://good.com#@evil.com/": "https://good.com:443",
    "http://a@/": None,
    # percent-encoded hosts
    "https://%65xample.com/": "https://example.com:443",
    "http://example.com%2eevil.com/": "http://example.com.evil.com:80",
    "http://ex%2Fample.com/": None,
    "http://ex%00ample.com": None,
    # IDNA, punycode, case, full-width and ideographic dots
    "https://MÜNCHEN.de": "https://xn--mnchen-3ya.de:443",
    "https://xn--mnchen-3ya.de/": "https://xn--mnchen-3ya.de:443",
    "https://faß.de": "https://xn--fa-hia.de:443",
    "https://ｅｘａｍｐｌｅ．ｃｏｍ/": "https://example.com:443",
    "http://ex\u3002ample.com/": "http://ex.ample.com:80",
    # IPv4 in decimal, octal, hex and short forms
    "http://2130706433/": "http://127.0.0.1:80",
    "http://0x7f.1/": "http://127.0.0.1:80",
    "http://0177.0.0.1/": "http://127.0.0.1:80",
    "http://0x7f000001/": "http://127.0.0.1:80",
    "http://127.1/": "http://127.0.0.1:80",
    "http://4294967295/": "http://255.255.255.255:80",
    "http://256.0.0.1/": None,
    "http://1.2.3.4.5/": None,
    "http://foo.0x/": None,
    # trailing dots are part of the host
    "http://example.com./": "http://example.com.:80",
    "https://EXAMPLE.COM.": "https://example.com.:443",
    # IPv6 brackets
    "http://[::1]:8080/": "http://[::1]:8080",
    "http://[0:0:0:0:0:0:0:1]/": "http://[::1]:80",
    "http://[::ffff:1.2.3.4]/": "http://[::ffff:102:304]:80",
    "http://[1:2:0:0:0:6:7:8]/": "http://[1:2::6:7:8]:80",
    "http://[::1%25eth0]/": None,
    # ports
    "https://a:b@c:99999": None,
    "http://example.com:8x/": None,
    # not web sites
    "javascript:alert(1)": None,
    "//evil.com": None,
    "file:///etc/passwd": None,
}


def test_each_url_trick_resolves_to_the_site_the_browser_loads(browser: BrowserDriver):
    for url, expected in URL_TRICKS.items():
        assert site_of(url) == expected, url
    # and Chromium's own parser agrees on every one it accepts
    browser.call("browser_navigate", url="about:blank")
    from tools.browser.host import BrowserHost

    host = BrowserHost.existing(browser.home)
    assert host is not None
    script = """(urls) => urls.map((u) => { try { const x = new URL(u);
        return [x.protocol.slice(0, -1), x.hostname, x.port]; } catch (e) { return null; } })"""
    parsed = host.run_if_open(lambda s: s.page().evaluate(script, list(URL_TRICKS)))
    assert parsed is not None
    for url, found in zip(URL_TRICKS, parsed, strict=True):
        theirs = None
        if found and found[0] in DEFAULT_PORTS:
            theirs = f"{found[0]}://{found[1]}:{found[2] or DEFAULT_PORTS[found[0]]}"
        assert site_of(url) == theirs, (url, theirs)


def test_addresses_deskhand_cannot_place_are_refused_not_guessed(browser: BrowserDriver):
    # Chromium accepts these; Deskhand cannot be sure which site they are, so it refuses
    for url in ("https://☃.net/", "http://xn--zz/", "http://ex ample.com/"):
        result = browser.call("browser_navigate", url=url)
        assert not result.ok and "not a web address Deskhand can check" in result.error


# ---- escalations ----------------------------------------------------------------------------


def test_navigation_is_egress_to_its_site(browser: BrowserDriver, site_a: Site):
    found = browser.escalate("browser_navigate", url=site_a.url("/x?q=1"))
    assert isinstance(found, Escalation) and found.egress
    assert found.site == f"http://127.0.0.1:{site_a.port}"
    trick = browser.escalate("browser_navigate", url=f"http://good.com@127.1:{site_a.port}/")
    assert trick.site == f"http://127.0.0.1:{site_a.port}"
    opened = browser.escalate("browser_tabs", action="open", url="https:\\\\evil.com\\x")
    assert opened.egress and opened.site == "https://evil.com:443"


def test_private_data_makes_a_visited_site_ask(browser: BrowserDriver, site_a: Site):
    assert browser.call("browser_navigate", url=site_a.url("/")).ok
    assert browser.escalate("browser_navigate", url=site_a.url("/other")) is None
    browser.session.private_data_read = "the file ~/notes/salary.txt"
    found = browser.escalate("browser_navigate", url=site_a.url("/other?d=42"))
    assert isinstance(found, Escalation) and found.egress
    assert found.site == site_a.site
    assert "salary.txt" in found.reason and "private data" in found.reason
    # the setting relaxes only the new-site question, never this one
    relaxed = BrowserDriver(browser.home, browser.root, ask_new_sites=False)
    relaxed.session = browser.session
    assert "salary.txt" in relaxed.escalation("browser_navigate", url=site_a.url("/"))
    relaxed.session = type(browser.session)(relaxed.registry)
    assert relaxed.escalation("browser_navigate", url="https://example.org/") is None
    relaxed.close()


def test_a_submit_click_is_egress_to_the_form_s_site(
    browser: BrowserDriver, site_a: Site, site_b: Site
):
    browser.call("browser_navigate", url=site_a.url(f"/form?to={site_b.url('/collect')}"))
    found = browser.escalate("browser_click", text="Send")
    assert isinstance(found, Escalation) and found.egress and found.site == site_b.site
    assert found.reason == f"submits a form (POST {site_b.url('/collect')})"
    # a submit button's formaction wins over the form's action: the hook reports it
    browser.call(
        "browser_evaluate",
        script=f"() => document.querySelector('button')"
        f".setAttribute('formaction', '{site_a.url('/elsewhere')}')",
    )
    assert browser.escalate("browser_click", text="Send").site == site_a.site


# ---- what the browser really loads ----------------------------------------------------------


def test_a_redirect_to_another_site_asks_and_is_not_loaded_when_denied(
    browser: BrowserDriver, site_a: Site, site_b: Site
):
    target = site_b.url("/landing?leak=42")
    browser.answer = False
    result = browser.call("browser_navigate", url=site_a.url(f"/redirect?to={target}"))
    assert not result.ok
    assert [s for s, _ in browser.asked] == [
        f"The page is redirecting from {site_a.site} to {site_b.site}"
    ]
    assert target in browser.asked[0][1]
    assert "Deskhand stopped the page" in result.error and site_b.site in result.error
    assert site_b.requests == []  # nothing reached the other site
    # nobody to ask: stopped too, and said so
    browser.answer = None
    again = browser.call("browser_navigate", url=site_a.url(f"/redirect?to={target}"))
    assert not again.ok and "nobody could be asked" in again.error
    assert site_b.requests == []
    # allowed: the page loads
    browser.answer = True
    allowed = browser.call("browser_navigate", url=site_a.url(f"/redirect?to={target}"))
    assert allowed.ok and allowed.data["url"] == target
    assert site_b.hits("GET") == [("GET", "/landing?leak=42", "")]


def test_a_redirect_within_the_approved_site_does_not_ask(browser: BrowserDriver, site_a: Site):
    browser.answer = False
    result = browser.call("browser_navigate", url=site_a.url(f"/redirect?to={site_a.url('/x')}"))
    assert result.ok and result.data["url"] == site_a.url("/x") and browser.asked == []


def test_meta_refresh_and_script_navigation_to_another_site_ask(
    browser: BrowserDriver, site_a: Site, site_b: Site
):
    browser.answer = False
    meta = browser.call("browser_navigate", url=site_a.url(f"/meta?to={site_b.url('/m')}"))
    assert meta.ok and meta.data["url"].startswith(site_a.url("/meta"))
    # on a loaded machine the refresh may fire just after the call returned: a request made
    # between calls is held and checked by the next call
    for _ in range(50):
        if browser.asked:
            break
        browser.call("browser_snapshot")
    assert browser.asked and site_b.site in browser.asked[0][0]
    browser.call("browser_navigate", url=site_a.url(f"/js?to={site_b.url('/j?d=1')}"))
    clicked = browser.call("browser_click", text="Go there")
    assert clicked.ok and clicked.data["url"].startswith(site_a.url("/js"))
    assert "Deskhand stopped the page" in clicked.content
    assert site_b.requests == []


def test_private_data_makes_a_page_navigation_to_a_visited_site_ask(
    browser: BrowserDriver, site_a: Site, site_b: Site
):
    assert browser.call("browser_navigate", url=site_b.url("/")).ok  # visited
    browser.call("browser_navigate", url=site_a.url(f"/js?to={site_b.url('/j?d=1')}"))
    browser.session.private_data_read = "your calendar"
    browser.answer = False
    clicked = browser.call("browser_click", text="Go there")
    assert clicked.ok and clicked.data["url"].startswith(site_a.url("/js"))
    assert browser.asked and "your calendar" in browser.asked[0][1]
    assert site_b.hits() == [("GET", "/", "")]


def test_a_click_that_posts_to_another_site_asks_and_is_aborted_when_denied(
    browser: BrowserDriver, site_a: Site, site_b: Site
):
    browser.call("browser_navigate", url=site_a.url(f"/post?to={site_b.url('/api/save')}"))
    assert browser.escalation("browser_click", text="Save") is None  # a plain button
    browser.answer = False
    denied = browser.call("browser_click", text="Save")
    assert denied.ok and "failed" in denied.content
    assert browser.asked[0][0] == (f"The page wants to send data to {site_b.site} (POST /api/save)")
    assert site_b.requests == []
    browser.answer = True
    browser.asked.clear()
    sent = browser.call("browser_click", text="Save")
    assert sent.ok and len(browser.asked) == 1
    assert site_b.hits("POST") == [("POST", "/api/save", "secret=42")]


def test_a_beacon_during_a_click_asks_too(browser: BrowserDriver, site_a: Site, site_b: Site):
    browser.call("browser_navigate", url=site_a.url(f"/beacon?to={site_b.url('/b')}"))
    browser.answer = None  # nobody to ask: stopped
    result = browser.call("browser_click", text="Like")
    assert result.ok and "Deskhand stopped the page from trying to send data" in result.content
    assert site_b.requests == []


def test_an_approved_form_submission_goes_through_but_not_its_redirect_elsewhere(
    browser: BrowserDriver, site_a: Site, site_b: Site
):
    # the form posts to site A (approved with the click), which redirects to site B
    action = site_a.url(f"/redirect?to={site_b.url('/after')}")
    browser.call("browser_navigate", url=site_a.url(f"/form?to={action}"))
    browser.answer = False
    result = browser.call("browser_click", text="Send")
    assert result.ok
    assert [m for m, _, _ in site_a.hits("POST")] == ["POST"]
    assert browser.asked and site_b.site in browser.asked[0][0]
    assert site_b.requests == []


# ---- subjects and summaries -------------------------------------------------------------------


def test_subjects_and_summary_lines(browser: BrowserDriver, site_a: Site):
    url = site_a.url("/login")
    subject = browser.hook("browser_navigate", "subject", url=url)
    assert subject == Subject(site=site_a.site, target=f"Browser · {site_a.site}")
    assert browser.hook("browser_navigate", "summary_line", url=url) == f"Open {url}"
    browser.call("browser_navigate", url=site_a.url("/form?to=/submit"))
    line = browser.hook("browser_click", "summary_line", text="Send")
    assert line == f"Click “Send” on 127.0.0.1:{site_a.port}"
    assert browser.hook("browser_click", "subject", text="Send").site == site_a.site
    assert browser.hook("browser_fill", "subject", text="q", value="x").site == site_a.site


def test_a_deny_rule_for_a_site_stops_a_redirect_there_without_asking(
    browser: BrowserDriver, site_a: Site, site_b: Site
):
    """A site the user never wants data sent to is refused mid-call, not asked about."""
    target = site_b.url("/landing?leak=42")
    browser.answer = True  # even a person who would say yes is not asked
    ctx = browser.context("browser_navigate")
    ctx._egress_deny = lambda site: site == site_b.site
    result = browser.call("browser_navigate", ctx, url=site_a.url(f"/redirect?to={target}"))
    assert not result.ok and "Deskhand stopped the page" in result.error
    assert browser.asked == [] and site_b.requests == []
