"""An encrypted PDF attached in the window: its password is asked in a dialog (again after a
wrong one), the document goes in once it opens, and leaving it out says why. The password
is never stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QApplication, QDialogButtonBox, QInputDialog, QWidget

from app.core.attachments import PASSWORD_TRIES
from app.core.paths import db_path
from app.ui.controller import ChatController
from app.ui.password_prompt import ask_file_password
from tests.fakellm import text
from tests.fixtures_qt import wait_until
from tests.fixtures_runtime import HOME, RuntimeFactory
from tests.test_documents import write_pdf


def _prompt() -> QInputDialog | None:
    for widget in QApplication.topLevelWidgets():
        named = isinstance(widget, QInputDialog) and widget.objectName() == "filePassword"
        if named and widget.isVisible():
            return widget  # type: ignore[return-value]
    return None


def _answer(dialog: QInputDialog, password: str | None) -> None:
    if password is None:
        dialog.reject()
        return
    dialog.setTextValue(password)
    buttons = dialog.findChild(QDialogButtonBox)
    assert buttons is not None and buttons.button(QDialogButtonBox.StandardButton.Ok).text()
    dialog.accept()


def _setup(make_runtime: RuntimeFactory, qtbot: Any, home: Path) -> tuple[ChatController, Path]:
    parent = QWidget()
    qtbot.addWidget(parent)
    controller = ChatController(make_runtime(roots=[HOME]))
    controller.password_asker = lambda name, why: ask_file_password(parent, name, why)
    locked = write_pdf(
        home / "payslip.pdf", ["Net pay for March: 3,141 euros."], password="hunter2"
    )
    return controller, locked


def test_the_password_is_asked_again_after_a_wrong_one_and_the_pdf_goes_in(
    make_runtime: RuntimeFactory, llm: Any, home: Path, qtbot: Any, qloop: Any
) -> None:
    controller, locked = _setup(make_runtime, qtbot, home)
    llm.add(text("got it"))
    prompts: list[str] = []

    async def body() -> None:
        controller.send("what is my net pay?", [str(locked)])
        for password in ("wrong", "hunter2"):
            dialog = await wait_until(_prompt, what="the password dialog")
            prompts.append(dialog.labelText())
            _answer(dialog, password)
            await wait_until(lambda d=dialog: not d.isVisible(), what="the dialog to close")
        await wait_until(lambda: not controller.busy, what="the turn")

    qloop.run_until_complete(body())
    assert prompts[0].startswith("payslip.pdf is encrypted. Type its password")
    assert prompts[1] == "That password does not open payslip.pdf. Try again:"
    sent = str(llm.requests[-1].body["messages"][-1]["content"])
    assert "Net pay for March: 3,141 euros." in sent
    assert "hunter2" not in sent
    assert b"hunter2" not in db_path(home).read_bytes()


def test_leaving_it_out_sends_the_message_without_it_and_says_why(
    make_runtime: RuntimeFactory, llm: Any, home: Path, qtbot: Any, qloop: Any
) -> None:
    controller, locked = _setup(make_runtime, qtbot, home)
    notices: list[str] = []
    controller.notice.connect(notices.append)
    llm.add(text("ok"))

    async def body() -> None:
        controller.send("read this", [str(locked)])
        _answer(await wait_until(_prompt, what="the password dialog"), None)
        await wait_until(lambda: not controller.busy, what="the turn")

    qloop.run_until_complete(body())
    assert notices == [
        f"Not attached: {locked} — it is encrypted: open it, or save a copy without a password"
    ]
    assert str(llm.requests[-1].body["messages"][-1]["content"]) == "read this"


def test_after_three_wrong_passwords_it_is_left_out(
    make_runtime: RuntimeFactory, llm: Any, home: Path, qtbot: Any, qloop: Any
) -> None:
    controller, locked = _setup(make_runtime, qtbot, home)
    notices: list[str] = []
    controller.notice.connect(notices.append)
    llm.add(text("ok"))
    asked = 0

    async def body() -> None:
        nonlocal asked
        controller.send("read this", [str(locked)])
        while controller.busy and asked < PASSWORD_TRIES + 1:
            dialog = await wait_until(
                lambda: _prompt() or (not controller.busy and "done"), what="a dialog or the end"
            )
            if dialog == "done":
                break
            asked += 1
            _answer(dialog, f"guess {asked}")
            await wait_until(lambda d=dialog: not d.isVisible(), what="the dialog to close")
        await wait_until(lambda: not controller.busy, what="the turn")

    qloop.run_until_complete(body())
    assert asked == PASSWORD_TRIES
    assert notices == [
        f"Not attached: {locked} — that password does not open it: check it and try again"
    ]
