"""The conversation's actions end to end in the real window, against the scripted model
server: edit and resend branches (the earlier branch kept and reachable), regenerate, the
pending indicator, a Stopped marker that is still there after reopening, and the setup
error's "Connect a model"."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.core.history_marks import BranchInfo
from app.ui.chat.model import AssistantMessage, ErrorItem, MarkerItem, PendingItem, UserMessage
from app.ui.main_window import MainWindow
from tests.fakellm import error, hang, text
from tests.fixtures_qt import wait_until

pytestmark = pytest.mark.gui


@pytest.fixture
def window(runtime, qtbot, qloop):
    win = MainWindow(runtime)
    qtbot.addWidget(win)
    win.resize(1000, 760)
    win.show()
    yield win
    win.stop_background_work()


def shown(win: MainWindow) -> list[tuple[str, str]]:
    """The messages the view shows, as (kind, text)."""
    kinds = {UserMessage: "user", AssistantMessage: "answer", MarkerItem: "marker"}
    return [
        (kinds[type(i)], i.plain_text()) for i in win.chat_view.chat_model.items if type(i) in kinds
    ]


def stored(win: MainWindow) -> list[str]:
    return [m.content for m in win.runtime.store.load_messages(win.controller.conversation_id)]


def send(qtbot, win: MainWindow, message: str) -> None:
    win.composer.edit.setFocus()
    qtbot.keyClicks(win.composer.edit, message)
    qtbot.keyClick(win.composer.edit, Qt.Key.Key_Return)


def test_edit_and_resend_branches_and_the_earlier_branch_comes_back(window, llm, qtbot, qloop):
    llm.add(text("Lisbon is lovely in May."))
    llm.add(text("Porto is lovely in May."))

    async def body():
        send(qtbot, window, "Trip ideas for Lisbon?")
        await wait_until(lambda: not window.controller.busy, what="the first turn")
        question = next(i for i in window.chat_view.chat_model.items if isinstance(i, UserMessage))
        assert question.index == 0  # indexed once the turn ended: Edit is offered
        editor = window.chat_view.start_edit(question)
        assert editor is not None and editor.text() == "Trip ideas for Lisbon?"
        editor.edit.setPlainText("Trip ideas for Porto?")
        qtbot.mouseClick(editor.send_button, Qt.MouseButton.LeftButton)
        await wait_until(lambda: len(llm.requests) == 2 and not window.controller.busy)

    qloop.run_until_complete(body())
    assert stored(window) == ["Trip ideas for Porto?", "Porto is lovely in May."]
    assert shown(window) == [
        ("user", "Trip ideas for Porto?"),
        ("answer", "Porto is lovely in May."),
    ]
    # the model saw the edited question only, not the earlier branch
    assert [m["content"] for m in llm.requests[1].body["messages"] if m["role"] == "user"] == [
        "Trip ideas for Porto?"
    ]
    edited = window.chat_view.chat_model.items[0]
    assert edited.branch == BranchInfo(0, 2, 2)

    window.chat_view.branchRequested.emit(0, 1)  # "‹" on the edited message
    assert stored(window) == ["Trip ideas for Lisbon?", "Lisbon is lovely in May."]
    assert shown(window)[1] == ("answer", "Lisbon is lovely in May.")
    assert window.chat_view.chat_model.items[0].branch == BranchInfo(0, 1, 2)


def test_regenerate_keeps_the_earlier_answer_as_a_version(window, llm, qtbot, qloop):
    llm.add(text("First try."))
    llm.add(text("Second try."))

    async def body():
        send(qtbot, window, "Say something")
        await wait_until(lambda: not window.controller.busy, what="the first turn")
        answer = window.chat_view.chat_model.items[-1]
        assert isinstance(answer, AssistantMessage) and answer.index == 1
        window.chat_view.regenerateRequested.emit(answer.index)
        await wait_until(lambda: len(llm.requests) == 2 and not window.controller.busy)

    qloop.run_until_complete(body())
    assert stored(window) == ["Say something", "Second try."]
    assert window.chat_view.chat_model.items[-1].branch == BranchInfo(1, 2, 2)
    window.controller.switch_branch(1, 1)
    assert stored(window) == ["Say something", "First try."]


def test_pending_shows_from_send_until_the_turn_ends(window, llm, qtbot, qloop):
    llm.add(hang(""))

    async def body():
        send(qtbot, window, "Are you there?")
        await wait_until(window.chat_view.is_waiting, what="the pending indicator")
        assert isinstance(window.chat_view.chat_model.items[-1], PendingItem)
        qtbot.keyClick(window, Qt.Key.Key_Escape)
        await wait_until(lambda: not window.controller.busy, what="the turn to stop")

    qloop.run_until_complete(body())
    assert not window.chat_view.is_waiting()
    assert not any(isinstance(i, PendingItem) for i in window.chat_view.chat_model.items)
    assert shown(window)[-1] == ("marker", "Stopped")


def test_a_stopped_marker_is_still_there_after_reopening(window, llm, qtbot, qloop):
    llm.add(hang("half an ans"))
    llm.add(text("Another chat."))

    async def body():
        send(qtbot, window, "Write an essay")
        await wait_until(
            lambda: any("half an ans" in t for _, t in shown(window)), what="the partial answer"
        )
        qtbot.keyClick(window, Qt.Key.Key_Escape)
        await wait_until(lambda: not window.controller.busy, what="stop")
        first = window.controller.conversation_id
        assert shown(window)[-1] == ("marker", "Stopped")
        window.new_chat()
        send(qtbot, window, "Something else")
        await wait_until(lambda: len(llm.requests) == 2 and not window.controller.busy)
        window.open_conversation(first)

    qloop.run_until_complete(body())
    assert shown(window) == [
        ("user", "Write an essay"),
        ("answer", "half an ans"),
        ("marker", "Stopped"),
    ]


def test_an_error_marker_is_still_there_after_reopening(window, llm, qtbot, qloop):
    llm.add(error(401, message="The key was refused"))

    async def body():
        send(qtbot, window, "Hello")
        await wait_until(lambda: not window.controller.busy, what="the failed turn")

    qloop.run_until_complete(body())
    conversation = window.controller.conversation_id
    window.new_chat()
    window.open_conversation(conversation)
    errors = [i for i in window.chat_view.chat_model.items if isinstance(i, ErrorItem)]
    assert len(errors) == 1 and "API key was rejected" in errors[0].message


def test_connect_a_model_opens_the_providers_page(make_runtime, qtbot, qloop):
    rt = make_runtime(llm=None)
    win = MainWindow(rt)
    qtbot.addWidget(win)
    win.show()
    pages: list[str] = []
    win.settingsRequested.connect(pages.append)

    async def body():
        win.send("Are you there?", [])
        await wait_until(lambda: not win.controller.busy, what="the setup error")

    try:
        qloop.run_until_complete(body())
        assert ("user", "Are you there?") in shown(win)  # the message stays visible
        setup = [i for i in win.chat_view.chat_model.items if isinstance(i, ErrorItem)]
        assert setup and setup[-1].kind == "setup"
        win.chat_view.connectRequested.emit()
        assert pages == ["providers"]
    finally:
        win.stop_background_work()
        rt.close()


def test_the_header_model_choice_is_the_conversations(window, llm, qtbot, qloop):
    account = window.runtime.settings.active_provider_account()
    llm.add(text("From the other model."))
    llm.add(text("From the default model."))
    picker = window.model_picker
    assert picker.button.parts()[0] == "scripted-model"

    async def body():
        picker.chosen.emit(account.id, "other-model")  # chosen in the list, before sending
        send(qtbot, window, "Which model are you?")
        await wait_until(lambda: not window.controller.busy, what="the first chat")
        window.new_chat()
        assert picker.button.parts()[0] == "scripted-model"  # a new chat: the default
        send(qtbot, window, "And you?")
        await wait_until(lambda: len(llm.requests) == 2 and not window.controller.busy)

    qloop.run_until_complete(body())
    assert [r.body["model"] for r in llm.requests] == ["other-model", "scripted-model"]
    first = window.runtime.store.list_conversations()[-1].id
    window.open_conversation(first)
    assert picker.button.parts()[0] == "other-model"


def test_only_web_and_mail_links_reach_the_system(window, qtbot, monkeypatch):
    opened: list[str] = []
    monkeypatch.setattr(
        "app.ui.main_window.QDesktopServices.openUrl", lambda url: opened.append(url.toString())
    )
    for url in ("https://example.org/docs", "mailto:someone@example.org"):
        window._open_link(url)  # no click said what the link read: it asks, showing it
        prompt = window.link_prompt
        assert prompt is not None and prompt.isVisible()
        assert prompt.target.toPlainText() == url
        qtbot.mouseClick(prompt.open_button, Qt.MouseButton.LeftButton)
    assert opened == ["https://example.org/docs", "mailto:someone@example.org"]
    for url in ("file:///tmp/run-me.sh", "smb://host/share/x.exe", "ms-settings:privacy"):
        window._open_link(url)
        box = window.refused_link
        assert box is not None and box.isVisible() and url in box.informativeText()
        copy = next(b for b in box.buttons() if b.text() == "Copy address")
        qtbot.mouseClick(copy, Qt.MouseButton.LeftButton)
        assert QGuiApplication.clipboard().text() == url
        box.close()
    assert len(opened) == 2


def test_the_chat_text_size_setting_reaches_the_conversation_and_composer(window, qtbot):
    default = window.chat_view.chat_delegate.theme.font.pointSizeF()

    def choose(points: int) -> None:
        def change(settings):
            settings.general.font_size = points

        window.runtime.settings_store.update(change)
        window.apply_settings()

    choose(20)
    assert window.chat_view.chat_delegate.theme.font.pointSizeF() == 20
    assert window.composer.edit.font().pointSize() == 20
    choose(9)  # smaller than the reading size the chat picks by itself
    assert window.chat_view.chat_delegate.theme.font.pointSizeF() == 9
    choose(0)
    assert window.chat_view.chat_delegate.theme.font.pointSizeF() == default


def test_switching_chats_keeps_the_fetched_model_lists(window, qtbot, qloop):
    picker = window.model_picker
    account = window.runtime.settings.active_provider_account()

    async def body():
        picker.open_popup()
        await wait_until(
            lambda: (x := picker.listing(account.id)) is not None and not x.loading,
            what="the model list",
        )
        picker.popup.hide()

    qloop.run_until_complete(body())
    fetched = picker.listing(account.id)
    window.new_chat()  # a chat switch asks no server again
    assert picker.listing(account.id) is fetched
    window.apply_settings()  # a settings change does (keys or addresses may differ)
    assert picker.listing(account.id) is None
