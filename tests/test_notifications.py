"""Notifications with actions against a real freedesktop notification server.

The server is a small one of our own (dbus-fast) speaking org.freedesktop.Notifications on a
private session bus started here: dunst, the Debian daemon, needs an X display to run, and
ours can record what arrives and press buttons (emit ActionInvoked) like a user would.
"""

# No `from __future__ import annotations`: the server's D-Bus signatures are annotations.

import asyncio
import contextlib
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.notifications import (
    ALLOW_ONCE,
    DENY,
    REVIEW,
    Action,
    Notifier,
    approval_actions,
    plain_text,
)
from tests.conftest import service_unavailable
from tests.fixtures_notify import WAIT, NotificationServer, Shown, _first_line, _stop

# dunst, the Debian daemon, shows the context menu of a notification through "dmenu": this
# one records the menu and picks the entry containing the text in the file `want`.
_DMENU = """#!/bin/sh
cat > "{root}/menu.txt"
grep -F -m1 -- "$(cat "{root}/want")" "{root}/menu.txt"
"""
_DUNSTRC = """[global]
    dmenu = {root}/dmenu
    markup = full
    history_length = 20
"""


class Dunst:
    """dunst on a private X display (Xvfb) and the private session bus."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.env = env

    def ctl(self, *args: str) -> str:
        done = subprocess.run(
            ["dunstctl", *args], env=self.env, capture_output=True, text=True, timeout=WAIT
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def choose(self, entry: str) -> None:
        """Opens the newest notification's context menu and picks `entry` (a user's click
        on a button). Returns before dunst has run the menu: wait for the callback."""
        (self.root / "want").write_text(entry)
        self.ctl("context")

    def last_menu(self) -> str:
        """The menu dunst offered last (written before the pick is made)."""
        return (self.root / "menu.txt").read_text()

    def history(self) -> list[dict[str, str]]:
        data = json.loads(self.ctl("history"))["data"][0]
        return [{key: value["data"] for key, value in item.items()} for item in data]


@pytest.fixture
def dunst(session_bus: str) -> Iterator[Dunst]:
    missing = [exe for exe in ("dunst", "dunstctl", "Xvfb") if not shutil.which(exe)]
    if missing:
        service_unavailable(f"notifications: {', '.join(missing)} not installed")
    root = Path(tempfile.mkdtemp(prefix="dh-dunst-"))
    (root / "dmenu").write_text(_DMENU.format(root=root))
    (root / "dmenu").chmod(0o700)
    (root / "dunstrc").write_text(_DUNSTRC.format(root=root))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        xvfb = subprocess.Popen(
            ["Xvfb", "-displayfd", "1", "-nolisten", "tcp"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        procs.append(xvfb)
        display = _first_line(xvfb)
        if not display:
            service_unavailable("notifications: Xvfb did not start")
        env = {**os.environ, "DISPLAY": f":{display}", "DBUS_SESSION_BUS_ADDRESS": session_bus}
        log = (root / "dunst.log").open("wb")
        proc = subprocess.Popen(
            ["dunst", "-conf", str(root / "dunstrc")],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        procs.append(proc)
        _wait_for_server(proc, root / "dunst.log")
        yield Dunst(root, env)
    finally:
        for proc in reversed(procs):
            _stop(proc)
        shutil.rmtree(root, ignore_errors=True)


def _wait_for_server(proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until the daemon owns the notifications name (bounded; fails if it exits)."""
    probe = Notifier()
    try:
        deadline = time.monotonic() + WAIT
        while not probe.available():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)  # poll interval of a bounded readiness loop
                service_unavailable(f"notifications: dunst exited: {log.read_text()[-800:]}")
            if time.monotonic() > deadline:
                service_unavailable(f"notifications: dunst not ready after {WAIT}s")
    finally:
        probe.close()


@pytest.fixture
def notifier() -> Iterator[Notifier]:
    n = Notifier(app_name="Deskhand")
    try:
        yield n
    finally:
        n.close()


class Calls:
    """What the notifier called back, in order, from its loop thread."""

    def __init__(self) -> None:
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()

    def on_action(self, action_id: str) -> None:
        self.events.put(("action", action_id))

    def on_click(self) -> None:
        self.events.put(("click", None))

    def next(self) -> tuple[str, Any]:
        return self.events.get(timeout=WAIT)


APPROVE = [Action(ALLOW_ONCE, "Allow once"), Action(DENY, "Deny")]


def shown_on(server: NotificationServer, notifier: Notifier, nid: str) -> Shown:
    """The notification as the server got it, once the notifier knows it was shown (a
    user cannot press a button before that; the test could)."""
    shown = server.next_shown()
    assert notifier.wait_shown(nid, WAIT)
    return shown


def test_notification_reaches_server_with_title_body_and_buttons(
    server: NotificationServer, notifier: Notifier
) -> None:
    calls = Calls()
    nid = notifier.notify("Task finished", "3 pull requests wait", APPROVE, calls.on_action)
    shown = server.next_shown()
    assert nid
    assert (shown.app_name, shown.summary, shown.body) == (
        "Deskhand",
        "Task finished",
        "3 pull requests wait",
    )
    # Pairs of (key, label); "default" is the click on the body.
    pairs = list(zip(shown.actions[::2], shown.actions[1::2], strict=True))
    assert pairs == [("default", ""), (ALLOW_ONCE, "Allow once"), (DENY, "Deny")]


@pytest.mark.parametrize("key", [ALLOW_ONCE, DENY])
def test_pressing_a_button_calls_on_action_with_its_id(
    server: NotificationServer, notifier: Notifier, key: str
) -> None:
    calls = Calls()
    nid = notifier.notify("Approve?", "docker prune", APPROVE, calls.on_action, calls.on_click)
    server.press(shown_on(server, notifier, nid).id, key)
    assert calls.next() == ("action", key)


def test_clicking_the_body_calls_on_click(server: NotificationServer, notifier: Notifier) -> None:
    calls = Calls()
    nid = notifier.notify("Reminder", "Stand-up", [], calls.on_action, calls.on_click)
    server.press(shown_on(server, notifier, nid).id, "default")
    assert calls.next() == ("click", None)


def test_dismissing_or_withdrawing_calls_nothing(
    server: NotificationServer, notifier: Notifier
) -> None:
    calls = Calls()
    first_id = notifier.notify("One", "dismissed", APPROVE, calls.on_action, calls.on_click)
    first = shown_on(server, notifier, first_id).id
    server.dismiss(first)
    server.press(first, ALLOW_ONCE)  # a late press after close must not approve anything

    second_id = notifier.notify("Two", "withdrawn", APPROVE, calls.on_action, calls.on_click)
    second = shown_on(server, notifier, second_id).id
    notifier.withdraw(second_id)
    assert server.interface.closed.get(timeout=WAIT) == second
    server.press(second, ALLOW_ONCE)

    third_id = notifier.notify("Three", "answered", APPROVE, calls.on_action)
    server.press(shown_on(server, notifier, third_id).id, DENY)
    # Signals arrive in order: had anything earlier called back, it would come first.
    assert calls.next() == ("action", DENY)
    assert calls.events.empty()


def test_withdraw_of_an_already_closed_notification_is_harmless(
    server: NotificationServer, notifier: Notifier
) -> None:
    calls = Calls()
    nid = notifier.notify("Gone", "already", APPROVE, calls.on_action)
    server.press(shown_on(server, notifier, nid).id, DENY)
    assert calls.next() == ("action", DENY)
    notifier.withdraw(nid)
    notifier.withdraw("never-sent")
    notifier.notify("Still", "works", APPROVE, calls.on_action)
    assert server.next_shown().summary == "Still"


def test_hostile_text_arrives_as_plain_escaped_text(
    server: NotificationServer, notifier: Notifier
) -> None:
    calls = Calls()
    body = 'rm <b>-rf</b> <a href="https://evil.example">click</a> & \u202eexe.txt\x1b[31m'
    title = "Run\u202e <i>x</i>\nnext"
    label = "Ok\u200b<b>"
    notifier.notify(title, body, [Action("ok", label)], calls.on_action)
    shown = server.next_shown()
    assert shown.body == (
        'rm &lt;b&gt;-rf&lt;/b&gt; &lt;a href="https://evil.example"&gt;click&lt;/a&gt; '
        "&amp; ⟨U+202E⟩exe.txt⟨U+001B⟩[31m"
    )
    assert "<" not in shown.body and "\u202e" not in shown.body
    assert shown.summary == "Run⟨U+202E⟩ <i>x</i>⟨U+000A⟩next"  # summary: plain by spec
    assert shown.actions[2:] == ["ok", "Ok⟨U+200B⟩<b>"]


def test_available_with_a_server(server: NotificationServer, notifier: Notifier) -> None:
    assert notifier.available() is True


def test_not_available_without_a_server(session_bus: str, notifier: Notifier) -> None:
    assert notifier.available(timeout=WAIT) is False


def test_not_available_without_a_bus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, notifier: Notifier
) -> None:
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", f"unix:path={tmp_path / 'no-bus'}")
    assert notifier.available(timeout=WAIT) is False


def test_available_refuses_to_block_its_own_loop(notifier: Notifier) -> None:
    async def on_loop() -> None:
        notifier.available()

    future = asyncio.run_coroutine_threadsafe(on_loop(), notifier._loop)
    with pytest.raises(RuntimeError):
        future.result(WAIT)


def test_approval_actions_allow_once_only_when_everything_fits() -> None:
    allow = [Action(ALLOW_ONCE, "Allow once"), Action(DENY, "Deny")]
    review = [Action(REVIEW, "Review…"), Action(DENY, "Deny")]
    assert approval_actions("Delete file", '{"path": "a.txt"}', limit=100) == allow
    assert approval_actions("Delete file", "x" * 200, limit=100) == review
    # Exactly at the limit still fits: summary + newline + arguments.
    assert approval_actions("ab", "c" * 7, limit=10) == allow
    assert approval_actions("ab", "c" * 8, limit=10) == review
    # Counted as shown: an invisible control becomes ⟨U+202E⟩ and may push it over.
    assert approval_actions("ab", "\u202e" * 2, limit=10) == review
    assert approval_actions("ab", "cc", limit=10) == allow


def test_plain_text_keeps_newlines_and_escapes_markup() -> None:
    assert plain_text("a\nb <c> & d") == "a\nb &lt;c&gt; &amp; d"


def test_notifier_on_a_given_loop(server: NotificationServer) -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        calls = Calls()
        notifier = Notifier(loop=loop)
        nid = notifier.notify("Given loop", "ok", APPROVE, calls.on_action)
        server.press(shown_on(server, notifier, nid).id, ALLOW_ONCE)
        assert calls.next() == ("action", ALLOW_ONCE)
        notifier.close()  # not its loop: leaves it running
        assert loop.is_running()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()


# -- the same against dunst, the freedesktop daemon Debian ships ----------------------------


def test_dunst_shows_buttons_and_a_press_calls_on_action(dunst: Dunst, notifier: Notifier) -> None:
    calls = Calls()
    nid = notifier.notify("Approve?", "prune containers", APPROVE, calls.on_action)
    assert notifier.wait_shown(nid, WAIT)
    dunst.choose(",deny]")
    assert calls.next() == ("action", DENY)
    menu = dunst.last_menu()
    assert "#Allow once (Approve?)" in menu and "#Deny (Approve?)" in menu


def test_dunst_click_on_the_body_calls_on_click(dunst: Dunst, notifier: Notifier) -> None:
    calls = Calls()
    nid = notifier.notify("Task done", "summary", [], calls.on_action, calls.on_click)
    assert notifier.wait_shown(nid, WAIT)
    dunst.choose(",default]")
    assert calls.next() == ("click", None)


def test_dunst_renders_hostile_body_as_text_and_closing_calls_nothing(
    dunst: Dunst, notifier: Notifier
) -> None:
    calls = Calls()
    body = '<b>bold</b> <a href="https://evil.example">x</a> & \u202e'
    nid = notifier.notify("Hostile", body, APPROVE, calls.on_action, calls.on_click)
    assert notifier.wait_shown(nid, WAIT)
    dunst.ctl("close")  # the user closes it
    [item] = [i for i in dunst.history() if i["summary"] == "Hostile"]
    # "message" is the markup dunst renders: the body's tags arrive as text, not markup.
    assert item["body"] == (
        '&lt;b&gt;bold&lt;/b&gt; &lt;a href="https://evil.example"&gt;x&lt;/a&gt; &amp; ⟨U+202E⟩'
    )
    assert item["body"] in item["message"] and "<a" not in item["message"]

    nid = notifier.notify("Next", "answered", APPROVE, calls.on_action)
    assert notifier.wait_shown(nid, WAIT)
    dunst.choose(",allow_once]")
    assert calls.next() == ("action", ALLOW_ONCE)  # nothing came from the closed one
    assert calls.events.empty()
