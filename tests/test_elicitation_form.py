"""The elicitation form in the chat window: an MCP server's questions shown as a
form built from its schema, answered Accept / Decline / Cancel, URL requests that answer
accept only on "Open in browser", requests withdrawn by the server, the bridge that lets a
worker thread wait for the user, and hostile text shown as plain, escaped, wrapped text.

Offscreen Qt widgets, and real MCP servers (tests/mcp_servers.py, mode `proto`) for the
end-to-end tests, one of them through the real main window."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence
from PySide6.QtWidgets import QApplication, QLineEdit, QVBoxLayout, QWidget

from app.core.mcp.elicitation import (
    ElicitationAnswer,
    ElicitationRequest,
    check_answer,
    form_request,
    url_request,
)
from app.ui.chat.elicitation_form import (
    MESSAGE_MAX_LINES,
    NEEDED,
    ElicitationForm,
    ElicitationPanel,
)
from tests.fixtures_qt import restore_look, saved_look

pytestmark = pytest.mark.gui

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "title": "Your name",
            "minLength": 1,
            "description": "As it should appear on the invoice.",
        },
        "email": {"type": "string", "title": "Email", "format": "email"},
        "age": {"type": "integer", "title": "Age", "minimum": 0, "maximum": 150},
        "color": {"type": "string", "title": "Colour", "enum": ["red", "green", "blue"]},
        "size": {
            "type": "string",
            "title": "Size",
            "default": "l",
            "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
        },
        "tags": {
            "type": "array",
            "title": "Topics",
            "default": ["news"],
            "items": {"enum": ["news", "offers", "updates"]},
        },
        "subscribe": {"type": "boolean", "title": "Subscribe", "default": False},
        "ratio": {"type": "number", "title": "Ratio"},
    },
    "required": ["name", "color"],
}
URL = "https://auth.example.com/connect?state=1&scope=repo"
BIDI = "\u202e"


def request(schema: dict[str, Any] = SCHEMA, message: str = "Your details, please") -> Any:
    return form_request("billing", message, schema)


class Answers(list[ElicitationAnswer]):
    def __call__(self, answer: ElicitationAnswer) -> None:
        self.append(answer)


@pytest.fixture
def host(qtbot: Any) -> QWidget:
    """A window like the real one: the form's place, and the window's Esc = Stop."""
    window = QWidget()
    qtbot.addWidget(window)
    QVBoxLayout(window)
    window.stops = []  # type: ignore[attr-defined]
    stop = QAction("Stop", window)
    stop.setShortcut(QKeySequence("Esc"))
    stop.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
    stop.triggered.connect(lambda: window.stops.append(1))  # type: ignore[attr-defined]
    window.addAction(stop)
    window.resize(700, 700)
    return window


def show(host: QWidget, qtbot: Any, req: ElicitationRequest) -> tuple[ElicitationForm, Answers]:
    form = ElicitationForm(req)
    answers = Answers()
    form.answered.connect(answers)
    host.layout().addWidget(form)
    host.show()
    qtbot.waitExposed(host)
    host.activateWindow()
    qtbot.waitUntil(host.isActiveWindow)
    return form, answers


def click(qtbot: Any, form: ElicitationForm, action: str) -> None:
    qtbot.mouseClick(form.buttons[action], Qt.MouseButton.LeftButton)


def focus(qtbot: Any, widget: QWidget) -> None:
    widget.window().activateWindow()
    widget.setFocus()
    qtbot.waitUntil(widget.hasFocus)


# ---- the fields -------------------------------------------------------------------------------


def test_fields_follow_the_schema_with_defaults_and_required_marks(
    host: QWidget, qtbot: Any
) -> None:
    form, _ = show(host, qtbot, request())
    f = form.fields
    assert list(f) == ["name", "email", "age", "color", "size", "tags", "subscribe", "ratio"]
    assert f["name"].line is not None and f["name"].line.text() == ""
    assert f["email"].line is not None and f["email"].line.placeholderText() == "an email address"
    assert (
        f["age"].line is not None and f["age"].line.placeholderText() == "a whole number, 0 to 150"
    )
    color = f["color"].combo
    assert color is not None and color.currentIndex() == -1  # required, no default: choose
    assert [color.itemText(i) for i in range(color.count())] == ["red", "green", "blue"]
    size = f["size"].combo
    assert size is not None and size.currentText() == "Large" and size.itemText(0) == "(none)"
    tags = f["tags"].list
    assert tags is not None
    states = {tags.item(i).text(): tags.item(i).checkState() for i in range(tags.count())}
    assert states == {
        "news": Qt.CheckState.Checked,
        "offers": Qt.CheckState.Unchecked,
        "updates": Qt.CheckState.Unchecked,
    }
    assert f["subscribe"].check is not None and not f["subscribe"].check.isChecked()
    required = [name for name, row in f.items() if row.required_tag is not None]
    assert required == ["name", "color"]
    assert f["name"].description is not None
    assert f["name"].description.text() == "As it should appear on the invoice."
    assert form.header.text() == "The MCP server “billing” asks you"
    assert form.message.toPlainText() == "Your details, please"


def test_accept_sends_typed_values(host: QWidget, qtbot: Any) -> None:
    req = request()
    form, answers = show(host, qtbot, req)
    f = form.fields
    qtbot.keyClicks(f["name"].line, "Ann")
    qtbot.keyClicks(f["age"].line, "30")
    qtbot.keyClicks(f["ratio"].line, "0.5")
    f["color"].combo.setCurrentIndex(1)  # type: ignore[union-attr]
    tags = f["tags"].list
    assert tags is not None
    offers = tags.visualItemRect(tags.item(1)).center()
    qtbot.mouseClick(tags.viewport(), Qt.MouseButton.LeftButton, pos=offers)  # the row, not the box
    qtbot.mouseClick(f["subscribe"].title, Qt.MouseButton.LeftButton)  # its label ticks it
    click(qtbot, form, "accept")
    expected = {
        "name": "Ann",
        "age": 30,
        "color": "green",
        "size": "l",
        "tags": ["news", "offers"],
        "subscribe": True,
        "ratio": 0.5,
    }
    assert answers == [ElicitationAnswer("accept", expected)]
    assert check_answer(req, answers[0]) == (answers[0], None)  # what the connection sends
    click(qtbot, form, "decline")  # answered once
    assert len(answers) == 1


def test_a_missing_or_wrong_value_keeps_the_form_open_saying_why(host: QWidget, qtbot: Any) -> None:
    form, answers = show(host, qtbot, request())
    f = form.fields
    click(qtbot, form, "accept")
    assert answers == [] and form.isVisible()
    errors = {name: row.error.text() for name, row in f.items() if row.error.isVisible()}
    assert errors == {"name": NEEDED, "color": NEEDED}
    assert f["name"].line is not None
    qtbot.waitUntil(f["name"].line.hasFocus)  # the first one to fix has the focus

    qtbot.keyClicks(f["name"].line, "Ann")
    assert not f["name"].error.isVisible()  # typing clears it
    f["color"].combo.setCurrentIndex(0)  # type: ignore[union-attr]
    for typed, why in [("200", "At most 150"), ("abc", "A number"), ("2.5", "A whole number")]:
        f["age"].line.setText(typed)  # type: ignore[union-attr]
        click(qtbot, form, "accept")
        assert answers == [] and f["age"].error.text() == why
        assert f["age"].line.property("invalid") is True  # type: ignore[union-attr]
    f["age"].line.clear()  # type: ignore[union-attr]
    click(qtbot, form, "accept")
    assert answers and answers[0].action == "accept"
    assert answers[0].content is not None and "age" not in answers[0].content  # optional, empty


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_decline_and_cancel_send_nothing(host: QWidget, qtbot: Any, action: str) -> None:
    form, answers = show(host, qtbot, request())
    qtbot.keyClicks(form.fields["name"].line, "Ann")
    click(qtbot, form, action)
    assert answers == [ElicitationAnswer(action)]  # type: ignore[arg-type]


def test_enter_accepts_and_escape_cancels_not_stopping_the_chat(host: QWidget, qtbot: Any) -> None:
    form, answers = show(
        host,
        qtbot,
        request({"type": "object", "properties": {"name": {"type": "string", "title": "Name"}}}),
    )
    line = form.fields["name"].line
    assert line is not None
    focus(qtbot, line)
    qtbot.keyClicks(line, "Bo")
    qtbot.keyClick(line, Qt.Key.Key_Return)
    assert answers == [ElicitationAnswer("accept", {"name": "Bo"})]

    form2, answers2 = show(host, qtbot, request())
    line2 = form2.fields["name"].line
    assert line2 is not None
    focus(qtbot, line2)
    qtbot.keyClick(line2, Qt.Key.Key_Escape)
    assert answers2 == [ElicitationAnswer("cancel")]
    assert host.stops == []  # type: ignore[attr-defined]  # Esc did not stop the chat


# ---- URL mode ---------------------------------------------------------------------------------


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Anything the form would open itself (it must never)."""
    opened: list[Any] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    return opened


def test_url_request_shows_the_site_and_answers_accept_only_on_the_button(
    host: QWidget, qtbot: Any, browser: list[Any]
) -> None:
    form, answers = show(host, qtbot, url_request("gh", "Sign in there", URL))
    assert form.site is not None and form.site.text() == "auth.example.com"
    assert form.url_box is not None and form.url_box.text() == URL and form.url_box.isReadOnly()
    assert form.buttons["accept"].text() == "Open in browser"
    assert form.fields == {}
    focus(qtbot, form.url_box)
    qtbot.keyClick(form.url_box, Qt.Key.Key_Return)  # Enter alone opens nothing
    assert answers == []
    click(qtbot, form, "accept")
    assert answers == [ElicitationAnswer("accept")] and browser == []


def test_url_request_decline_and_escape(host: QWidget, qtbot: Any, browser: list[Any]) -> None:
    form, answers = show(host, qtbot, url_request("gh", "Sign in there", URL))
    click(qtbot, form, "decline")
    form2, answers2 = show(host, qtbot, url_request("gh", "Sign in there", URL))
    focus(qtbot, form2.buttons["accept"])
    qtbot.keyClick(form2.buttons["accept"], Qt.Key.Key_Escape)
    assert answers == [ElicitationAnswer("decline")]
    assert answers2 == [ElicitationAnswer("cancel")] and browser == []


# ---- a request the server withdraws -----------------------------------------------------------


def test_a_withdrawn_request_closes_the_form_with_a_note(host: QWidget, qtbot: Any) -> None:
    form, answers = show(host, qtbot, request())
    with qtbot.waitSignal(form.withdrawn, timeout=30_000):
        form.request.cancelled.set()
    assert form.note.isVisible() and "withdrew" in form.note.text()
    assert not form.body.isVisible() and not any(b.isVisible() for b in form.buttons.values())
    click_target = form.buttons["accept"]
    form.answer("accept")
    assert answers == [] and not click_target.isVisible()


# ---- the panel and the thread bridge ----------------------------------------------------------


class Asker(threading.Thread):
    """A worker thread asking through the bridge, as the MCP connection does."""

    def __init__(self, handler: Callable[[ElicitationRequest], ElicitationAnswer], req: Any):
        super().__init__(daemon=True)
        self.handler, self.request = handler, req
        self.answer: ElicitationAnswer | None = None
        self.start()

    def run(self) -> None:
        self.answer = self.handler(self.request)

    def result(self, qtbot: Any) -> ElicitationAnswer | None:
        qtbot.waitUntil(lambda: not self.is_alive(), timeout=30_000)
        return self.answer


@pytest.fixture
def panel(qtbot: Any) -> Iterator[ElicitationPanel]:
    window = QWidget()
    qtbot.addWidget(window)
    layout = QVBoxLayout(window)
    panel = ElicitationPanel()
    panel.note_ms = 50
    layout.addWidget(panel)
    window.resize(700, 600)
    window.show()
    yield panel
    panel.close_all()


def shown(qtbot: Any, panel: ElicitationPanel, req: ElicitationRequest) -> ElicitationForm:
    qtbot.waitUntil(lambda: panel.form is not None and panel.form.request is req, timeout=30_000)
    assert panel.form is not None
    return panel.form


def test_the_bridge_waits_for_the_user_on_a_worker_thread(
    panel: ElicitationPanel, qtbot: Any
) -> None:
    req = request()
    asker = Asker(panel.bridge, req)
    form = shown(qtbot, panel, req)
    assert asker.is_alive() and panel.isVisible()
    qtbot.keyClicks(form.fields["name"].line, "Ann")
    form.fields["color"].combo.setCurrentIndex(2)  # type: ignore[union-attr]
    click(qtbot, form, "accept")
    answer = asker.result(qtbot)
    assert answer is not None and answer.action == "accept"
    assert answer.content == {
        "name": "Ann",
        "color": "blue",
        "size": "l",
        "tags": ["news"],
        "subscribe": False,
    }
    qtbot.waitUntil(lambda: panel.form is None and not panel.isVisible())


def test_requests_queue_up_one_form_at_a_time(panel: ElicitationPanel, qtbot: Any) -> None:
    first, second = request(message="first"), url_request("gh", "second", URL)
    one = Asker(panel.bridge, first)
    form = shown(qtbot, panel, first)
    two = Asker(panel.bridge, second)
    qtbot.waitUntil(lambda: panel.pending() == 2)
    assert panel.form is form  # the second waits its turn
    click(qtbot, form, "decline")
    assert one.result(qtbot) == ElicitationAnswer("decline")
    form2 = shown(qtbot, panel, second)
    click(qtbot, form2, "cancel")
    assert two.result(qtbot) == ElicitationAnswer("cancel")


def test_a_withdrawn_request_answers_cancel_and_its_form_goes(
    panel: ElicitationPanel, qtbot: Any
) -> None:
    waiting, shown_req = request(message="queued"), request(message="shown")
    first = Asker(panel.bridge, shown_req)
    shown(qtbot, panel, shown_req)
    second = Asker(panel.bridge, waiting)
    qtbot.waitUntil(lambda: panel.pending() == 2)
    waiting.cancelled.set()  # withdrawn before it was even shown
    assert second.result(qtbot) == ElicitationAnswer("cancel")
    shown_req.cancelled.set()
    assert first.result(qtbot) == ElicitationAnswer("cancel")
    qtbot.waitUntil(lambda: panel.form is None and not panel.isVisible(), timeout=30_000)
    assert panel.pending() == 0


def test_when_the_window_goes_every_request_is_declined(
    panel: ElicitationPanel, qtbot: Any
) -> None:
    a, b = request(message="a"), request(message="b")
    first = Asker(panel.bridge, a)
    shown(qtbot, panel, a)
    second = Asker(panel.bridge, b)
    qtbot.waitUntil(lambda: panel.pending() == 2)
    panel.close_all()
    assert first.result(qtbot) == ElicitationAnswer("decline")
    assert second.result(qtbot) == ElicitationAnswer("decline")
    assert Asker(panel.bridge, request()).result(qtbot) == ElicitationAnswer("decline")
    assert panel.form is None and not panel.isVisible()


def test_the_end_of_a_turn_cancels_the_questions_of_its_calls(
    panel: ElicitationPanel, qtbot: Any
) -> None:
    during_call = form_request("s", "for the call", SCHEMA, call_id="call-3")
    asker = Asker(panel.bridge, during_call)
    shown(qtbot, panel, during_call)
    panel.cancel_calls()
    assert asker.result(qtbot) == ElicitationAnswer("cancel")


def test_the_bridge_never_blocks_the_gui_thread(panel: ElicitationPanel) -> None:
    assert panel.bridge(request()) == ElicitationAnswer("decline")
    assert panel.form is None


# ---- hostile text -----------------------------------------------------------------------------

HOSTILE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "x": {
            "type": "string",
            "title": "<b>Bold</b>" + "W" * 115,
            "description": f"<a href='https://evil.example'>click</a>{BIDI}" + "D" * 390,
        },
        "y": {"type": "string", "title": "Pick", "enum": ["<i>" + "L" * 100, "ok"]},
        "z": {"type": "boolean", "title": "&Accept " + "Z" * 100},
    },
}


def descendants(widget: QWidget) -> list[QWidget]:
    return [w for w in widget.findChildren(QWidget) if w.isVisible()]


@pytest.mark.parametrize("width", [420, 1000])
def test_hostile_text_is_plain_escaped_and_never_widens_the_window(qtbot: Any, width: int) -> None:
    message = f"<b>Bold</b> <a href='x'>link</a>{BIDI}RTL\x1b[2J\n" + "M" * 3000 + "\nend"
    req = form_request(f"evil{BIDI}server" + "S" * 200, message, HOSTILE)
    window = QWidget()
    qtbot.addWidget(window)
    QVBoxLayout(window).setContentsMargins(0, 0, 0, 0)
    form = ElicitationForm(req)
    window.layout().addWidget(form)
    window.resize(width, 700)
    window.show()
    qtbot.waitExposed(window)
    assert form.minimumSizeHint().width() <= 420
    assert window.width() == width  # nothing forced the window wider
    right = form.mapTo(window, form.rect().topRight()).x()
    for child in descendants(form):
        edge = child.mapTo(window, child.rect().topRight()).x()
        assert edge <= right, f"{child.objectName() or type(child).__name__} sticks out"

    # who asks: made visible, at most two lines, the rest elided
    assert BIDI not in form.header.text() and "⟨U+202E⟩" in form.header.text()
    lines = form.header.lines()
    assert len(lines) <= 2 and "…" in lines[-1]
    # the message: every character shown as text, nothing interpreted, scrolls when long
    shown_text = form.message.toPlainText()
    assert shown_text.startswith("<b>Bold</b> <a href='x'>link</a>⟨U+202E⟩RTL⟨U+001B⟩[2J")
    assert "\x1b" not in shown_text and BIDI not in shown_text
    html = form.message.document().toHtml()
    assert "&lt;b&gt;Bold&lt;/b&gt;" in html and "<a href" not in html
    spacing = form.message.fontMetrics().lineSpacing()
    assert form.message.height() <= (MESSAGE_MAX_LINES + 2) * spacing
    assert form.message.verticalScrollBar().maximum() > 0
    # field texts: literal, escaped, elided; a server's "&" makes no keyboard shortcut
    x, y, z = (form.fields[k] for k in "xyz")
    assert x.title.text().startswith("<b>Bold</b>") and len(x.title.lines()) <= 2
    assert x.description is not None and "⟨U+202E⟩" in x.description.text()
    assert len(x.description.lines()) <= 3
    assert y.combo is not None and y.combo.itemText(1).startswith("<i>LLL")
    assert (
        z.check is not None
        and z.check.text() == ""
        and z.check.accessibleName().startswith("&Accept")
    )
    assert z.title.text().startswith("&Accept")
    for row in (x, y, z):  # no server text in a tooltip (Qt would guess it is rich text)
        assert all(not w.toolTip() for w in [row, *row.findChildren(QWidget)])


def test_a_hostile_default_is_shown_escaped(host: QWidget, qtbot: Any) -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "string", "title": "N", "default": f"a{BIDI}b\x1b"}},
    }
    form, answers = show(host, qtbot, request(schema))
    line = form.fields["n"].line
    assert isinstance(line, QLineEdit) and line.text() == "a⟨U+202E⟩b⟨U+001B⟩"
    click(qtbot, form, "accept")
    assert answers == [ElicitationAnswer("accept", {"n": "a⟨U+202E⟩b⟨U+001B⟩"})]


# ---- end to end: a real MCP server asks, the user answers with clicks --------------------------


def _run_tool(manager: Any, tool: str, **args: Any) -> threading.Thread:
    from tests.test_mcp_protocol import run

    thread = threading.Thread(
        target=lambda: setattr(thread, "result", run(manager, tool, **args)), daemon=True
    )
    thread.start()
    return thread


def _tool_answer(qtbot: Any, thread: threading.Thread) -> dict[str, Any]:
    qtbot.waitUntil(lambda: not thread.is_alive(), timeout=15000)
    result = thread.result  # type: ignore[attr-defined]
    assert result.ok, result.error
    return json.loads(result.content)


def test_a_real_server_asks_through_the_main_window(
    home: Path, markers: Path, qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mcp")
    from app.core.runtime import Runtime
    from app.ui.main_window import MainWindow
    from tests.test_mcp import write_config
    from tests.test_mcp_protocol import proto_entry

    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    write_config(home, {"p": proto_entry(markers)})
    rt = Runtime(home, entry_points=False)
    try:
        win = MainWindow(rt)
        qtbot.addWidget(win)
        assert not win.attach_mcp()  # no manager yet: the window does not create one
        assert "mcp" not in rt.__dict__
        rt.mcp.tool_manifests(wait=30)
        assert win.attach_mcp()
        win.show()
        qtbot.waitExposed(win)

        call = _run_tool(rt.mcp, "ask", message=f"Who are you?{BIDI}")
        qtbot.waitUntil(lambda: win.elicitation.form is not None, timeout=15000)
        form = win.elicitation.form
        assert form is not None and form.message.toPlainText() == "Who are you?⟨U+202E⟩"
        qtbot.keyClicks(form.fields["name"].line, "Ann")
        qtbot.keyClicks(form.fields["age"].line, "30")
        form.fields["color"].combo.setCurrentIndex(1)  # type: ignore[union-attr]
        click(qtbot, form, "accept")
        assert _tool_answer(qtbot, call) == {
            "action": "accept",
            "content": {"name": "Ann", "age": 30, "color": "green", "subscribe": False},
        }
        qtbot.waitUntil(lambda: win.elicitation.form is None)

        # quitting while a server waits for an answer tells it "declined"
        call = _run_tool(rt.mcp, "ask")
        qtbot.waitUntil(lambda: win.elicitation.form is not None, timeout=15000)
        win.stop_background_work()
        assert _tool_answer(qtbot, call) == {"action": "decline", "content": None}
    finally:
        rt.close()


def test_a_real_server_opens_its_page_only_after_the_click(
    home: Path, markers: Path, panel: ElicitationPanel, qtbot: Any
) -> None:
    pytest.importorskip("mcp")
    from app.core.mcp.manager import McpManager
    from tests.test_mcp import write_config
    from tests.test_mcp_protocol import proto_entry

    opened: list[str] = []
    config = write_config(home, {"p": proto_entry(markers)})
    manager = McpManager(config, home=home, open_url=opened.append)  # stands in for a browser
    try:
        manager.tool_manifests(wait=30)
        manager.set_elicitation_handler(panel.bridge)
        call = _run_tool(manager, "ask_url", url=URL)
        qtbot.waitUntil(lambda: panel.form is not None, timeout=15000)
        form = panel.form
        assert form is not None and form.site is not None
        assert form.site.text() == "auth.example.com" and opened == []
        click(qtbot, form, "decline")
        assert _tool_answer(qtbot, call) == {"action": "decline"} and opened == []

        call = _run_tool(manager, "ask_url", url=URL)
        qtbot.waitUntil(lambda: panel.form is not None, timeout=15000)
        assert panel.form is not None
        click(qtbot, panel.form, "accept")
        assert _tool_answer(qtbot, call) == {"action": "accept"} and opened == [URL]
    finally:
        manager.shutdown()


def test_the_application_palette_drives_the_colours(host: QWidget, qtbot: Any) -> None:
    from app.ui.theme import apply_theme

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    before = saved_look(app)
    try:
        apply_theme(app, "light")
        form, _ = show(host, qtbot, request())
        light = form.theme.card.name()
        apply_theme(app, "dark")
        qtbot.waitUntil(lambda: form.theme.dark)
        assert form.theme.card.name() != light and form.theme.card.name() in form.styleSheet()
    finally:  # other tests expect the application as it was
        restore_look(app, before)
