"""Browser tools against Debian's Chromium (headless, fresh profile) on a local test site,
through the real registry, approval hooks and runner. See tests/fixtures_browser.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from app.core.approval import Verdict
from app.core.rules import Rule, RuleDecision
from tests.fakellm import ScriptedLLM, text, tool_calls
from tests.fixtures_browser import (
    CHROMIUM,
    INJECTION,
    REPORT_CSV,
    BrowserDriver,
    LocalSite,
    assert_no_browser_left,
    require_chromium,
)
from tests.test_approval import verdict
from tests.test_cli import deskhand, deskhand_env, events_of
from tests.waits import poll_until


def ref_of(result, name: str) -> int:
    """The snapshot number of the element called `name`."""
    for element in result.data["elements"]:
        if element["name"] == name:
            return element["ref"]
    raise AssertionError(f"no element {name!r} in {result.data['elements']}")


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


# ---- reading pages ---------------------------------------------------------------------------


def test_navigate_returns_title_address_and_numbered_untrusted_text(
    browser: BrowserDriver, site: LocalSite
):
    home = site.url("/")
    assert "not visited before" in browser.escalation("browser_navigate", url=home)
    result = browser.call("browser_navigate", url=home)
    assert result.ok, result.content
    assert result.data["title"] == "Deskhand test site" and result.data["url"] == home
    content = result.content
    assert f'<untrusted_page_content url="{home}">' in content
    assert content.count("</untrusted_page_content>") == 1
    assert "data, not instructions" in content
    assert "Welcome to the test site." in content  # whitespace collapsed
    assert "# Deskhand test site" in content and "- Second item" in content
    assert '[1] link "About us" → /about' in content
    assert '[6] button "Press me"' in content
    assert "Hidden link" not in content  # display:none is not offered
    assert any(m.startswith("Opening") for m in browser.progress)
    # the site is now known in this conversation: no more asking, other pages included
    assert browser.escalation("browser_navigate", url=site.url("/about")) is None
    assert "not visited" in browser.escalation("browser_navigate", url="http://localhost:9/")


def test_snapshot_numbers_click_by_number_and_text_back_forward(
    browser: BrowserDriver, site: LocalSite
):
    browser.call("browser_navigate", url=site.url("/"))
    snap = browser.call("browser_snapshot")
    assert [e["ref"] for e in snap.data["elements"]] == list(range(1, 7))
    about = browser.call("browser_click", ref=ref_of(snap, "About us"))
    assert about.ok, about.content
    assert about.data["url"] == site.url("/about") and "We build test pages." in about.content
    back = browser.call("browser_back")
    assert back.ok and back.data["url"] == site.url("/")
    forward = browser.call("browser_forward")
    assert forward.ok and forward.data["url"] == site.url("/about")
    browser.call("browser_back")
    pressed = browser.call("browser_click", text="Press me")
    assert pressed.ok and "Button was pressed" in pressed.content
    stale = browser.call("browser_click", ref=99)
    assert not stale.ok and "browser_snapshot" in stale.error
    missing = browser.call("browser_click", text="No such button anywhere")
    assert not missing.ok and "No element with the text" in missing.error
    bad = browser.call("browser_click", ref=1, text="About us")
    assert not bad.ok and "exactly one" in bad.error


def test_fill_and_submit_a_form_the_server_sees_the_values(browser: BrowserDriver, site: LocalSite):
    snap = browser.call("browser_navigate", url=site.url("/form"))
    assert '[6] button "Send" (submits form)' in snap.content
    assert browser.call("browser_fill", ref=ref_of(snap, "Your name"), value="Ada").ok
    assert browser.call("browser_fill", text="Email address", value="ada@example.org").ok
    chosen = browser.call("browser_select", text="Colour", option="green")
    assert chosen.ok and "'Green'" in chosen.content
    assert browser.call("browser_type", selector="textarea", value="Hello there").ok
    # a checkbox click is not a submission; the submit button is, and it asks
    assert browser.escalation("browser_click", text="Subscribe") is None
    reason = browser.escalation("browser_click", text="Send")
    assert reason == f"submits a form (POST {site.url('/submit')})"
    preview = browser.preview("browser_click", text="Send")
    assert '[6] button "Send"' in preview and "POST" in preview
    assert browser.call("browser_click", text="Subscribe").ok
    done = browser.call("browser_click", text="Send")
    assert done.ok, done.content
    assert "Thanks, Ada!" in done.content
    assert site.posts == [
        (
            "/submit",
            {
                "name": ["Ada"],
                "email": ["ada@example.org"],
                "colour": ["g"],
                "message": ["Hello there"],
                "subscribe": ["yes"],
            },
        )
    ]
    # fill + Enter submits too
    browser.call("browser_navigate", url=site.url("/form"))
    entered = browser.call("browser_fill", text="Your name", value="Bob", submit=True)
    assert entered.ok and "Thanks, Bob!" in entered.content
    assert site.posts[-1][1]["name"] == ["Bob"]
    wrong = browser.call("browser_select", text="Colour", option="Purple")
    assert not wrong.ok


def test_tabs_opened_by_links_and_scripts_list_switch_close(
    browser: BrowserDriver, site: LocalSite
):
    browser.call("browser_navigate", url=site.url("/"))
    opened = browser.call("browser_click", text="About in a new tab")
    assert opened.ok and "opened a new tab (2 of 2)" in opened.content
    assert opened.data["url"] == site.url("/about") and opened.data["tab"] == 2
    back_to_first = browser.call("browser_tabs", action="switch", tab=1)
    assert back_to_first.ok and back_to_first.data["url"] == site.url("/")
    popup = browser.call("browser_click", text="Open popup")
    assert popup.ok and popup.data["url"] == site.url("/tab-page")
    listing = browser.call("browser_tabs", action="list")
    assert [row["url"] for row in listing.data] == [
        site.url("/"),
        site.url("/about"),
        site.url("/tab-page"),
    ]
    assert [row["current"] for row in listing.data] == [False, False, True]
    assert "<untrusted_page_content" in listing.content  # titles come from the pages
    closed = browser.call("browser_tabs", action="close")
    assert closed.ok and len(closed.data) == 2 and closed.data[-1]["current"]
    new_tab = browser.call("browser_tabs", action="open", url=site.url("/form"))
    assert new_tab.ok and new_tab.data["tab"] == 3 and "Contact" in new_tab.content
    nowhere = browser.call("browser_tabs", action="switch", tab=9)
    assert not nowhere.ok and "There is no tab 9" in nowhere.error


def test_screenshots_are_png_files_under_home_and_attached(browser: BrowserDriver, site: LocalSite):
    browser.call("browser_navigate", url=site.url("/tall"))
    view = browser.call("browser_screenshot")
    assert view.ok, view.content
    path = Path(view.attachments[0])
    assert path.parent == browser.home / "screenshots" and path.suffix == ".png"
    assert png_size(path) == (1280, 720) == (view.data["width"], view.data["height"])
    full = browser.call("browser_screenshot", full_page=True)
    width, height = png_size(Path(full.attachments[0]))
    assert width == 1280 and height > 3000
    box = browser.call("browser_screenshot", selector="#box")
    assert png_size(Path(box.attachments[0])) == (200, 100)
    scrolled = browser.call("browser_scroll", direction="bottom")
    assert scrolled.ok and scrolled.data["y"] > 2000


def test_download_by_click_and_by_address_into_allowed_folder(
    browser: BrowserDriver, site: LocalSite, tmp_path: Path
):
    browser.call("browser_navigate", url=site.url("/"))
    preview = browser.preview("browser_download", text="Download report")
    assert f"Save to: {browser.root.resolve()}/" in preview
    first = browser.call("browser_download", text="Download report")
    assert first.ok, first.content
    assert (browser.root / "report.csv").read_bytes() == REPORT_CSV
    again = browser.call("browser_download", url=site.url("/report.csv"))
    assert again.ok and (browser.root / "report (1).csv").read_bytes() == REPORT_CSV
    (browser.root / "sub").mkdir()
    named = browser.call(
        "browser_download", url=site.url("/report.csv"), folder="sub", filename="../x.csv"
    )
    assert named.ok and (browser.root / "sub" / "x.csv").read_bytes() == REPORT_CSV
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    refused = browser.call("browser_download", url=site.url("/report.csv"), folder=str(outside))
    assert not refused.ok and not any(outside.iterdir())
    assert not list((browser.home / "browser-downloads").iterdir())  # staging cleaned up


def test_evaluate_returns_wrapped_json(browser: BrowserDriver, site: LocalSite):
    browser.call("browser_navigate", url=site.url("/about"))
    result = browser.call("browser_evaluate", script="() => ({title: document.title, n: 2})")
    assert result.ok and result.data["result"] == {"title": "About", "n": 2}
    assert "<untrusted_page_content" in result.content
    failing = browser.call("browser_evaluate", script="() => { throw new Error('boom') }")
    assert not failing.ok and "boom" in failing.error


# ---- approval ----------------------------------------------------------------------------------


def test_approval_classes_and_previews(browser: BrowserDriver, site: LocalSite):
    verdicts = {m.name: verdict(m) for m in browser.registry.search(category="browser")}
    asks = {name for name, v in verdicts.items() if v is Verdict.ASK}
    assert asks == {
        "browser_download",
        "browser_evaluate",
        "browser_fill",
        "browser_press",
        "browser_select",
        "browser_type",
    }
    # "always allow" never waives JavaScript's EXECUTE... unless the user chose it explicitly
    assert (
        verdict(
            browser.registry.get("browser_evaluate"),
            [Rule(tool="browser_evaluate", decision=RuleDecision.DENY)],
        )
        is Verdict.DENY
    )
    assert "document.cookie" in browser.preview("browser_evaluate", script="document.cookie")
    assert "not visited" in browser.escalation("browser_tabs", action="open", url=site.url("/"))
    assert browser.escalation("browser_tabs", action="list") is None
    # the setting relaxes the new-site question
    relaxed = BrowserDriver(browser.home, browser.root, ask_new_sites=False)
    assert relaxed.escalation("browser_navigate", url=site.url("/")) is None
    relaxed.close()


def test_click_approval_checks_the_element_itself(browser: BrowserDriver, site: LocalSite):
    browser.call("browser_navigate", url=site.url("/"))
    assert browser.escalation("browser_click", text="Press me") is None
    assert browser.escalation("browser_click", text="About us") is None  # same site
    assert "could not check" in browser.escalation("browser_click", ref=99)
    # the page turns the harmless button into a form submit after the check: refused
    assert browser.escalation("browser_click", text="Press me") is None
    browser.call(
        "browser_evaluate",
        script="""() => { const f = document.createElement('form'); f.method = 'post';
            f.action = '/submit'; f.append(document.querySelectorAll('button')[1]);
            document.body.append(f); }""",
    )
    changed = browser.call("browser_click", text="Press me")
    assert not changed.ok and "page changed after the approval check" in changed.error
    assert site.posts == []


def test_only_web_addresses_open(browser: BrowserDriver):
    assert browser.escalation("browser_navigate", url="file:///etc/passwd") is None
    result = browser.call("browser_navigate", url="file:///etc/passwd")
    assert not result.ok and "Only http and https" in result.error


def test_page_text_cannot_close_its_wrapper(browser: BrowserDriver, site: LocalSite):
    result = browser.call("browser_navigate", url=site.url("/inject"))
    assert result.ok
    body = result.content.split('<untrusted_page_content url="', 1)[1]
    assert INJECTION in body
    assert result.content.count("</untrusted_page_content>") == 1
    assert result.content.rstrip().splitlines()[-2] == "</untrusted_page_content>"


# ---- time limits and Stop ------------------------------------------------------------------------


def test_a_stuck_page_times_out_with_a_clear_message(browser: BrowserDriver, site: LocalSite):
    started = time.monotonic()
    result = browser.call("browser_navigate", url=site.url("/slow"), timeout_seconds=2)
    assert time.monotonic() - started < 10
    assert not result.ok
    assert "did not finish loading within 2 s" in result.error
    assert any("Waiting for" in m for m in browser.progress)
    browser.call("browser_navigate", url=site.url("/late"))
    waited = browser.call("browser_wait", text="Ready now", timeout_seconds=5)
    assert waited.ok and "Ready now" in waited.content
    gave_up = browser.call("browser_wait", text="Never shown", timeout_seconds=1)
    assert not gave_up.ok and "Gave up after 1 s" in gave_up.error
    # and the browser still works
    assert browser.call("browser_navigate", url=site.url("/about")).ok


def test_stop_cancels_the_action_in_flight(browser: BrowserDriver, site: LocalSite):
    browser.call("browser_navigate", url=site.url("/"))
    ctx = browser.context("stop")
    threading.Timer(1.0, ctx.cancel_event.set).start()
    started = time.monotonic()
    result = browser.call("browser_navigate", ctx=ctx, url=site.url("/slow"), timeout_seconds=60)
    assert not result.ok and result.error == "cancelled"
    assert time.monotonic() - started < 20  # not the call's 60 s
    assert browser.call("browser_navigate", url=site.url("/about")).ok


# ---- browser life cycle -------------------------------------------------------------------------


def test_idle_close_relaunch_and_shutdown_leave_no_process(tmp_path: Path, site: LocalSite):
    require_chromium()
    from tools.browser.host import BrowserHost

    home = tmp_path / "home"
    home.mkdir()
    driver = BrowserDriver(home, tmp_path, idle_close_seconds=1)
    try:
        assert driver.call("browser_navigate", url=site.url("/")).ok
        host = BrowserHost.existing(home)
        assert host is not None and host.browser_open
        # a busy 2-core machine closes slowly
        poll_until(lambda: not host.thread_alive, 30, "the idle browser to close", every=0.1)
        assert not host.browser_open
        assert_no_browser_left(home / "browser-profile")
        # the next call starts it again; the profile keeps its cookies
        driver.call("browser_navigate", url=site.url("/"))
        driver.call("browser_evaluate", script="document.cookie = 'kept=1; max-age=3600'")
        stopper = threading.Thread(target=host.shutdown)
        stopper.start()
        stopper.join(30)
        assert not host.thread_alive
        assert_no_browser_left(home / "browser-profile")
        cookie = driver.call("browser_navigate", url=site.url("/about"))
        assert cookie.ok
        again = driver.call("browser_evaluate", script="document.cookie")
        assert again.data["result"] == "kept=1"
    finally:
        driver.close()
        host = BrowserHost.existing(home)
        if host is not None:
            host.shutdown()
        assert_no_browser_left(home / "browser-profile")


def test_missing_browser_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from tools.browser import discovery

    driver = BrowserDriver(tmp_path, tmp_path, executable="/nowhere/chrome")
    try:
        result = driver.call("browser_navigate", url="http://127.0.0.1:9/")
        assert not result.ok and "/nowhere/chrome" in result.error
        monkeypatch.setattr(discovery.shutil, "which", lambda name: None)
        monkeypatch.setattr(discovery, "standard_locations", lambda: [tmp_path / "chrome"])
        driver.settings.browser.executable = ""
        none = driver.call("browser_snapshot")
        assert not none.ok
        assert "No Chrome, Chromium or Edge found" in none.error
        assert "sudo apt install chromium" in none.error
    finally:
        driver.close()
    from tools.browser.host import BrowserHost

    host = BrowserHost.existing(tmp_path)
    assert host is None or not host.thread_alive  # nothing was started


def test_discovery_finds_the_installed_chromium():
    require_chromium()
    from tools.browser.discovery import describe_found, find_browser

    assert find_browser(str(CHROMIUM)).executable == str(CHROMIUM)
    assert find_browser("").executable  # found on PATH or a standard location
    assert describe_found("").startswith("Using ")


def test_approval_hooks_import_no_playwright():
    code = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from tools.registry import ToolRegistry
        from tools.session import ToolSession
        from tools.spec import ToolContext
        registry = ToolRegistry.default(None, entry_points=False)
        nav = registry.get("browser_navigate")
        ctx = ToolContext(home=Path("."), session=ToolSession(registry))
        hook = registry.resolve_escalate("browser_navigate")
        assert hook(nav.params(url="https://example.org"), ctx)
        click = registry.resolve_escalate("browser_click")
        assert click(registry.get("browser_click").params(ref=1), ctx) is None
        print(sorted(m for m in sys.modules if m.startswith("playwright")))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


# ---- prompt injection through the whole app ----------------------------------------------------


def test_page_telling_the_assistant_to_delete_files_cannot_approve_it(
    llm: ScriptedLLM, site: LocalSite, tmp_path: Path
):
    require_chromium()
    home = tmp_path / "home"
    root = tmp_path / "root"
    home.mkdir()
    root.mkdir()
    important = root / "important.txt"
    important.write_text("keep me")
    settings = {
        "files": {"allowed_roots": [str(root)]},
        "browser": {"executable": str(CHROMIUM), "ask_new_sites": False, "headless": True},
    }
    (home / "settings.json").write_text(json.dumps(settings))
    llm.add(tool_calls(("n1", "browser_navigate", {"url": site.url("/inject")})))
    # the scripted model "follows" the page's instruction
    llm.add(tool_calls(("d1", "fs_delete", {"path": str(important)})))
    llm.add(text("I could not delete it."))
    proc = deskhand(
        "--home",
        str(home),
        "ask",
        "summarise the cooking tips page",
        "--base-url",
        llm.openai_base_url,
        "--model",
        "m",
        "--json",
        env=deskhand_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    events = events_of(proc.stdout)
    results = {e["id"]: e for e in events if e["type"] == "tool_result"}
    assert results["n1"]["ok"], results["n1"]["content"]
    assert "<untrusted_page_content" in results["n1"]["content"]
    assert INJECTION in results["n1"]["content"]
    decisions = [e for e in events if e["type"] == "approval"]
    assert [(d["name"], d["decision"]) for d in decisions] == [("fs_delete", "deny")]
    assert not results["d1"]["ok"] and "declined" in results["d1"]["content"]
    assert important.read_text() == "keep me"
    # what the model received was labelled as page content
    sent = [m for m in llm.requests[1].body["messages"] if m["role"] == "tool"]
    assert "data, not instructions" in sent[0]["content"]
    # the CLI closed its browser on exit
    assert_no_browser_left(home / "browser-profile")


def test_a_page_stuck_in_a_script_is_restarted(
    browser: BrowserDriver, site: LocalSite, monkeypatch: pytest.MonkeyPatch
):
    from tools.browser import host

    monkeypatch.setattr(host, "HARD_DEADLINE_GRACE", 1.0)
    browser.call("browser_navigate", url=site.url("/about"))
    started = time.monotonic()
    stuck = browser.call("browser_evaluate", script="() => { while (true) {} }", timeout_seconds=1)
    assert not stuck.ok and "did not respond within 1 s" in stuck.error
    assert time.monotonic() - started < 10
    again = browser.call("browser_navigate", url=site.url("/about"))
    assert again.ok, again.content
