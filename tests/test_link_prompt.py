"""Links in answers, clicked in the real window (offscreen) against the scripted model: a
link whose text hides its target, a new site, private data read or a mail link with an
attachment shows the real target first (Open / Copy address / Cancel) and nothing reaches
the system's opener until Open; a link that shows a visited target opens at once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QGuiApplication

from app.ui.chat.model import AssistantMessage
from app.ui.main_window import MainWindow
from tests.chat_helpers import row_point, settled
from tests.fakellm import text
from tests.fixtures_qt import restore_look, saved_look, wait_until

pytestmark = pytest.mark.gui


@pytest.fixture
def window(runtime, qtbot, qloop):
    win = MainWindow(runtime)
    qtbot.addWidget(win)
    win.resize(1000, 760)
    win.show()
    yield win
    win.stop_background_work()


@pytest.fixture
def opened(monkeypatch) -> list[str]:
    """What reached the system's opener."""
    urls: list[str] = []
    monkeypatch.setattr(
        "app.ui.main_window.QDesktopServices.openUrl",
        lambda url: urls.append(url.toString()) or True,
    )
    return urls


def _answer(window: MainWindow, llm, qtbot, qloop, answer: str) -> None:
    llm.add(text(answer))

    async def body():
        window.composer.edit.setFocus()
        qtbot.keyClicks(window.composer.edit, "Where?")
        qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
        await wait_until(lambda: not window.controller.busy, what="the answer")
        await settled(window.chat_view)

    qloop.run_until_complete(body())


def _click_link(window: MainWindow, qtbot) -> None:
    view = window.chat_view
    answer = next(i for i in view.chat_model.items if isinstance(i, AssistantMessage))
    rect, doc = view.chat_delegate.layout(answer).docs[0]
    spot = next(
        QPointF(x, y)
        for y in range(0, int(rect.height()), 3)
        for x in range(0, int(rect.width()), 3)
        if doc.documentLayout().anchorAt(QPointF(x, y))
    )
    window.link_prompt = None
    qtbot.mouseClick(
        view.viewport(),
        Qt.MouseButton.LeftButton,
        pos=row_point(view, answer, rect.topLeft() + spot),
    )


def _tooltip(window: MainWindow) -> str:
    view = window.chat_view
    answer = next(i for i in view.chat_model.items if isinstance(i, AssistantMessage))
    layout = view.chat_delegate.layout(answer)
    rect, doc = layout.docs[0]
    spot = next(
        QPointF(x, y)
        for y in range(0, int(rect.height()), 3)
        for x in range(0, int(rect.width()), 3)
        if doc.documentLayout().anchorAt(QPointF(x, y))
    )
    return layout.tooltip_at(rect.topLeft() + spot)


def _reasons(window: MainWindow) -> str:
    return "\n".join(label.text() for label in window.link_prompt.reasons)


def test_a_deceptive_link_shows_its_real_target_and_opens_only_on_open(
    window, llm, qtbot, qloop, opened
):
    target = "https://evil.example/collect?d=secret"
    _answer(window, llm, qtbot, qloop, f"Read [bank.example/login]({target}) now.")
    _click_link(window, qtbot)

    prompt = window.link_prompt
    assert prompt is not None and prompt.isVisible()
    assert prompt.target.toPlainText() == target
    assert target in _tooltip(window)  # hovering shows the real target too
    assert "bank.example/login" in _reasons(window) and "evil.example" in _reasons(window)
    assert opened == [], "the link opened before the user saw its target"

    qtbot.mouseClick(prompt.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == target
    qtbot.mouseClick(prompt.cancel_button, Qt.MouseButton.LeftButton)
    assert not prompt.isVisible() and opened == []

    _click_link(window, qtbot)
    prompt = window.link_prompt
    qtbot.keyClick(prompt, Qt.Key.Key_Return)  # Enter is Cancel, never Open
    assert opened == []
    _click_link(window, qtbot)
    qtbot.mouseClick(window.link_prompt.open_button, Qt.MouseButton.LeftButton)
    assert opened == [target]


def test_a_link_showing_a_visited_target_opens_until_private_data_is_read(
    window, llm, qtbot, qloop, opened
):
    _answer(window, llm, qtbot, qloop, "See <https://example.org/docs> for that.")
    session = window.controller.conversation.session
    _click_link(window, qtbot)  # a site this conversation never opened: asks
    assert window.link_prompt is not None and "not opened before" in _reasons(window)
    window.link_prompt.reject()

    session.notes["browser_sites"] = {"https://example.org:443"}
    _click_link(window, qtbot)
    assert window.link_prompt is None
    assert opened == ["https://example.org/docs"]

    session.private_data_read = "file ~/notes/passwords.txt"
    _click_link(window, qtbot)
    assert window.link_prompt is not None and "private data" in _reasons(window)
    assert opened == ["https://example.org/docs"]


def test_a_mail_link_opens_without_its_attachment(window, llm, qtbot, qloop, opened):
    link = "mailto:help@example.org?subject=Logs&attach=%2Fetc%2Fpasswd&attachment=~/.ssh/id_rsa"
    _answer(window, llm, qtbot, qloop, f"[help@example.org]({link})")
    _click_link(window, qtbot)
    prompt = window.link_prompt
    assert prompt is not None
    assert prompt.target.toPlainText() == "mailto:help@example.org?subject=Logs"
    assert "attach" in _reasons(window)
    qtbot.mouseClick(prompt.open_button, Qt.MouseButton.LeftButton)
    assert opened == ["mailto:help@example.org?subject=Logs"]


def test_a_file_link_is_refused_with_copy(window, llm, qtbot, qloop, opened):
    _answer(window, llm, qtbot, qloop, "[the report](file:///tmp/run-me.sh)")
    _click_link(window, qtbot)
    assert window.link_prompt is None
    box = window.refused_link
    assert box is not None and box.isVisible()
    assert "file:///tmp/run-me.sh" in box.informativeText()
    assert opened == []


def test_screenshots_of_the_prompt(window, llm, qtbot, qloop, opened, tmp_path: Path):
    """Light and dark (saved to $DESKHAND_SHOTS when set, to look at)."""
    from PySide6.QtWidgets import QApplication

    from app.ui.theme import apply_theme

    target = "https://xn--pple-43d.com/signin?next=%2Faccount&session=abc123#top"
    _answer(
        window,
        llm,
        qtbot,
        qloop,
        "[apple.com/signin](https://аpple.com/signin?next=%2Faccount&session=abc123#top)",
    )
    app = QApplication.instance()
    before = saved_look(app)
    out = Path(os.environ.get("DESKHAND_SHOTS") or tmp_path)
    try:
        for mode in ("light", "dark"):
            apply_theme(app, mode)
            _click_link(window, qtbot)
            prompt = window.link_prompt
            assert prompt.target.toPlainText() == target
            qtbot.waitExposed(prompt)
            image = prompt.grab().toImage()
            assert image.save(str(out / f"link-prompt-{mode}.png"))
            prompt.reject()
    finally:
        restore_look(app, before)
    assert opened == []


def test_an_address_the_window_cannot_read_is_refused_and_never_opened(window, opened):
    """Whatever the decision says, the window opens only a valid web or mail address."""
    from app.core.links import LinkDecision

    for url in ("file:///tmp/run-me.sh", "https://exa mple.com/"):
        window._open_decided_link(LinkDecision("open", url, url), None)
        assert window.refused_link is not None and window.refused_link.isVisible()
    assert opened == []
