"""What a click on a link in the conversation may do (`app.core.links`): checked like a
browser navigation, only web and mail links, the real target rewritten and shown."""

from __future__ import annotations

from types import SimpleNamespace
from urllib.parse import parse_qsl, urlsplit

import pytest

from app.core.links import (
    LINK_SITES_NOTE,
    LinkState,
    decide,
    remember_opened,
    state_of,
)
from app.core.rules import Matcher, Rule, RuleBook, RuleDecision

SITE = "https://example.org:443"
KNOWN = LinkState(visited=frozenset({SITE}))


def test_a_link_that_shows_its_visited_target_opens() -> None:
    for text in ("https://example.org/docs", "example.org/docs", " https://example.org/docs "):
        decision = decide("https://example.org/docs", text, KNOWN)
        assert decision.action == "open", (text, decision.reasons)
        assert decision.url == decision.shown == "https://example.org/docs"
        assert decision.site == SITE


@pytest.mark.parametrize("text", ["the docs", "", None, "https://example.org/other"])
def test_text_that_hides_the_target_asks_and_names_the_real_site(text: str | None) -> None:
    decision = decide("https://example.org/docs?token=1", text, KNOWN)
    assert decision.action == "confirm"
    assert decision.shown == "https://example.org/docs?token=1"
    assert any("text" in r for r in decision.reasons), decision.reasons


def test_text_that_looks_like_another_address_says_so() -> None:
    decision = decide("https://evil.example/x", "https://bank.example/login", KNOWN)
    assert decision.action == "confirm"
    assert any("bank.example" in r and "https://evil.example:443" in r for r in decision.reasons), (
        decision.reasons
    )


def test_a_new_site_asks_and_a_visited_one_does_not() -> None:
    new = decide("https://other.example/", "https://other.example/", KNOWN)
    assert new.action == "confirm"
    assert new.reasons == (
        "https://other.example:443 is a site this conversation has not opened before.",
    )
    quiet = LinkState(ask_new_sites=False)
    assert decide("https://other.example/", "https://other.example/", quiet).action == "open"


def test_after_private_data_even_a_visited_site_asks_unless_a_site_rule_allows_it() -> None:
    tainted = LinkState(visited=frozenset({SITE}), private_data_read="file ~/notes.txt")
    decision = decide("https://example.org/?q=secret", "https://example.org/?q=secret", tainted)
    assert decision.action == "confirm"
    assert any("private data (file ~/notes.txt)" in r for r in decision.reasons)
    allowed = LinkState(
        private_data_read="file ~/notes.txt",
        site_rule=lambda site: "allow" if site == SITE else None,
    )
    url = "https://example.org/?q=secret"
    assert decide(url, url, allowed).action == "open"


def test_a_site_deny_rule_refuses_and_an_ask_rule_asks() -> None:
    url = "https://example.org/"
    denied = decide(url, url, LinkState(site_rule=lambda site: "deny"))
    assert denied.action == "refuse" and denied.url == ""
    asked = decide(url, url, LinkState(visited=frozenset({SITE}), site_rule=lambda s: "ask"))
    assert asked.action == "confirm"


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(document.cookie)",
        " JaVaScRiPt:alert(1)",
        "java\tscript:alert(1)",
        "file:///etc/passwd",
        "smb://host/share/run.exe",
        "ms-settings:privacy",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:msgbox",
        "/relative/path",
        "ftp://example.org/x",
        "ws://example.org/",
    ],
)
def test_anything_but_http_https_and_mailto_is_refused(url: str) -> None:
    decision = decide(url, url, KNOWN)
    assert decision.action == "refuse"
    assert decision.url == ""
    assert decision.reasons and "only web and mail links" in decision.reasons[0]


def test_a_unicode_lookalike_host_is_shown_and_opened_in_punycode() -> None:
    url = "https://аpple.com/login"  # the first letter is Cyrillic
    decision = decide(url, url, LinkState(ask_new_sites=False))
    assert decision.action == "confirm"
    assert decision.url == decision.shown == "https://xn--pple-43d.com/login"
    assert any("xn--pple-43d.com" in r for r in decision.reasons)


def test_userinfo_is_not_the_site_and_is_dropped() -> None:
    url = "https://good.com@evil.com/path"
    decision = decide(url, url, LinkState(ask_new_sites=False))
    assert decision.action == "confirm"
    assert decision.url == "https://evil.com/path"
    assert decision.site == "https://evil.com:443"
    assert any("good.com@" in r and "evil.com" in r for r in decision.reasons)
    for tricky in ("https://good.com%40evil.com@evil.com/", "https://good.com:443@evil.com/"):
        assert urlsplit(decide(tricky, tricky).url).hostname == "evil.com"


def test_the_target_is_what_the_browser_would_load() -> None:
    decision = decide("HTTPS://Example.ORG:443\\a b?q=ü\u202e#f", "x", KNOWN)
    assert decision.url == "https://example.org/a%20b?q=%C3%BC%E2%80%AE#f"
    assert decision.site == SITE
    assert decide("http://0x7f.1:8080/", "x").url == "http://127.0.0.1:8080/"
    shown = decide("https://example.org/\u202egnp.exe", "x", KNOWN).shown
    assert "\u202e" not in shown and shown.isascii()


def test_mailto_keeps_only_the_safe_fields() -> None:
    url = (
        "mailto:a@b.example?subject=Hi&attach=/etc/passwd&Attachment=~/.ssh/id_rsa"
        "&BODY=hello%20there&x-extra=1&cc=c@d.example&%61ttach=/x&bcc=e@f.example&to=g@h"
    )
    decision = decide(url, "a@b.example", LinkState())
    fields = parse_qsl(decision.url.partition("?")[2])
    assert [k for k, _ in fields] == ["subject", "body", "cc", "bcc", "to"]
    assert dict(fields)["body"] == "hello there"
    assert "attach" not in decision.url.lower()
    assert decision.action == "confirm"
    assert {"attach", "attachment", "x-extra"} <= set(decision.dropped)
    assert any("attach" in r for r in decision.reasons)


def test_mailto_cannot_smuggle_a_field_through_encoding() -> None:
    for url in (
        "mailto:a@b.example%3Fattach%3D%2Fetc%2Fpasswd",
        "mailto:a@b.example?body=x%26attach%3D%2Fetc%2Fpasswd",
    ):
        opened = decide(url, "a@b.example").url
        address, _, query = opened.partition("?")
        assert "?" not in address and "&" not in query
        assert [k for k, _ in parse_qsl(query)] in ([], ["body"])


def test_a_plain_mail_link_opens_and_private_data_makes_it_ask() -> None:
    assert decide("mailto:a@b.example", "a@b.example").action == "open"
    assert decide("mailto:a@b.example", "a@b.example").url == "mailto:a@b.example"
    assert decide("mailto:a@b.example", "write to us").action == "confirm"
    tainted = LinkState(private_data_read="calendar")
    assert decide("mailto:a@b.example?body=x", "a@b.example", tainted).action == "confirm"


def test_a_huge_address_is_refused() -> None:
    url = "https://example.org/" + "a" * 5000
    assert decide(url, url, KNOWN).action == "refuse"


def test_the_state_of_a_conversation() -> None:
    session = SimpleNamespace(
        notes={"browser_sites": {SITE}},
        private_data_read=None,
        registry=None,
    )
    settings = SimpleNamespace(browser=SimpleNamespace(ask_new_sites=True))
    book = RuleBook(None)
    book.add(
        Rule(
            tool="browser_navigate",
            decision=RuleDecision.ALLOW,
            matcher=Matcher(kind="site", value="https://docs.example:443"),
        )
    )
    book.add(
        Rule(
            tool="browser_navigate",
            decision=RuleDecision.DENY,
            matcher=Matcher(kind="site", value="https://evil.example:443"),
        )
    )
    state = state_of(session, settings, book)
    assert SITE in state.visited
    assert state.site_rule("https://docs.example:443") == "allow"
    assert state.site_rule("https://evil.example:443") == "deny"
    assert state.site_rule("https://other.example:443") is None
    assert decide("https://docs.example/", "https://docs.example/", state).action == "open"
    assert decide("https://evil.example/", "https://evil.example/", state).action == "refuse"

    opened = decide("https://new.example/", "https://new.example/", state)
    assert opened.action == "confirm"
    remember_opened(session, opened)
    assert session.notes[LINK_SITES_NOTE] == {"https://new.example:443"}
    assert session.notes["browser_sites"] == {SITE}, "a click must not widen the browser's list"
    again = decide("https://new.example/", "https://new.example/", state_of(session, settings))
    assert again.action == "open"
    session.private_data_read = "file ~/notes.txt"
    assert decide("https://new.example/", "https://new.example/", state_of(session)).action == (
        "confirm"
    )
    assert state_of(None).visited == frozenset()
