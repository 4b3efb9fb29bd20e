"""The window's details: icons instead of missing glyphs, the collapsible chat list, the Edit
menu, starter prompts, focus, fitting at 800×600 and at the minimum size, the tray balloon
in the dark theme. Real widgets (pytest-qt, offscreen), the scripted model server."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QAction, QColor, QGuiApplication, QKeySequence, QPalette, QTextLayout
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.providers.base import ChatMessage
from app.ui.icons import LINE_ICONS, app_icon, icon_color, line_icon
from app.ui.main_window import MIN_HEIGHT, MIN_WIDTH, MainWindow
from app.ui.starter_prompts import STARTERS
from app.ui.theme import apply_theme, current_theme
from app.ui.tray import Tray
from app.ui.ui_state import UiState
from tests.fakellm import hang, text
from tests.fixtures_qt import wait_until
from tests.fixtures_runtime import HOME

pytestmark = [pytest.mark.gui, pytest.mark.runtime(roots=[HOME])]


@pytest.fixture
def window(runtime, qtbot, qloop):
    win = MainWindow(runtime)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    yield win
    win.stop_background_work()


@pytest.fixture
def themed(qapp):
    """Restores the theme a test changes."""
    before = current_theme(qapp) or "light"
    yield qapp
    apply_theme(qapp, before)


def action(win: MainWindow, label: str) -> QAction:
    found = [a for a in win.findChildren(QAction) if a.text() == label]
    assert found, label
    return found[0]


def missing_glyphs(widget: QWidget, label: str) -> str:
    """The characters of `label` no font (with fallbacks) can draw: a box on screen."""
    missing = ""
    for ch in label:
        if ch.isspace():
            continue
        layout = QTextLayout(ch, widget.font())
        layout.beginLayout()
        layout.createLine()
        layout.endLayout()
        if any(0 in run.glyphIndexes() for run in layout.glyphRuns()):
            missing += ch
    return missing


def test_the_glyph_check_finds_a_missing_glyph(qapp):
    label = QLabel()
    assert missing_glyphs(label, "\U000f0000") == "\U000f0000"  # private use: no font has it
    assert missing_glyphs(label, "New chat…") == ""


# ---- icons -----------------------------------------------------------------------------


def test_buttons_and_menus_have_no_missing_glyphs(window):
    widgets = window.findChildren(QAbstractButton) + window.findChildren(QLabel)
    for widget in widgets:
        label = widget.text()
        assert not missing_glyphs(widget, label), (widget.objectName(), label)
    for act in window.findChildren(QAction):
        assert not missing_glyphs(window, act.text()), act.text()
    new = window.sidebar.new_button
    assert new.text() == "New chat" and not new.icon().isNull()
    assert not window.composer.attach_button.icon().isNull()
    assert window.composer.attach_button.text() == ""


def test_line_icons_follow_the_light_and_dark_palette(themed):
    for name in LINE_ICONS:
        assert not line_icon(name).pixmap(24, 24).isNull(), name

    def darkest_alpha_pixel(theme: str) -> QColor:
        apply_theme(themed, theme)
        image = line_icon("plus").pixmap(16, 16).toImage()
        return image.pixelColor(8, 8)  # the middle of the cross

    light, dark = darkest_alpha_pixel("light"), darkest_alpha_pixel("dark")
    assert light.lightness() < 80 and dark.lightness() > 180
    expected = icon_color()  # the dark palette's button text (antialiasing may shift it)
    assert abs(dark.red() - expected.red()) < 8 and abs(dark.blue() - expected.blue()) < 8


# ---- the chat list: hide, show, remembered -----------------------------------------------


def test_ctrl_b_hides_the_chat_list_and_its_state_is_remembered(runtime, window, qtbot):
    window.resize(1000, 700)
    window.splitter.setSizes([300, 700])
    assert action(window, "Show chat list").shortcut().toString() == "Ctrl+B"
    window.sidebar.search.setFocus()
    qtbot.keyClick(window, Qt.Key.Key_B, Qt.KeyboardModifier.ControlModifier)
    assert not window.sidebar.isVisible() and not window.sidebar_visible
    assert window.header_new_button.isVisible()  # New chat stays one click away
    assert not action(window, "Show chat list").isChecked()
    assert window.focusWidget() is window.composer.edit  # focus left the hidden list
    window.save_state()
    state = UiState.load(window.state_path)
    assert state.sidebar_visible is False and state.sidebar_width == 300

    second = MainWindow(runtime)
    qtbot.addWidget(second)
    second.show()
    assert second.sidebar.isHidden()
    qtbot.mouseClick(second.sidebar_button, Qt.MouseButton.LeftButton)
    assert second.sidebar.isVisible() and second.sidebar.width() == 300
    assert not second.header_new_button.isVisible()
    second.stop_background_work()


def test_ctrl_k_shows_the_hidden_list_to_search(window, qtbot):
    window.set_sidebar_visible(False)
    qtbot.keyClick(window, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier)
    assert window.sidebar.isVisible() and window.focusWidget() is window.sidebar.search


# ---- the Edit menu ---------------------------------------------------------------------


class Copyable(QWidget):
    """Stands for the chat view: copy(), selectAll(), has_selection()."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.calls: list[str] = []
        self.selected = False

    def copy(self) -> None:
        self.calls.append("copy")

    def selectAll(self) -> None:
        self.calls.append("selectAll")
        self.selected = True

    def has_selection(self) -> bool:
        return self.selected


def test_edit_menu_acts_on_the_focused_field(window, qtbot):
    labels = [a.text() for a in window.menuBar().actions()[1].menu().actions() if a.text()]
    assert labels[:6] == ["Undo", "Redo", "Cut", "Copy", "Paste", "Select All"]
    standard = {
        "undo": QKeySequence.StandardKey.Undo,
        "redo": QKeySequence.StandardKey.Redo,
        "cut": QKeySequence.StandardKey.Cut,
        "copy": QKeySequence.StandardKey.Copy,
        "paste": QKeySequence.StandardKey.Paste,
        "select_all": QKeySequence.StandardKey.SelectAll,
    }
    for op, key in standard.items():  # the platform's own keys (Redo: Ctrl+Y or Ctrl+Shift+Z)
        assert window.edit_actions[op].shortcuts() == QKeySequence.keyBindings(key), op
    assert window.edit_actions["copy"].shortcut().toString() == "Ctrl+C"
    edit = window.composer.edit
    edit.setFocus()
    window.update_edit_actions()
    assert not window.edit_actions["copy"].isEnabled()  # nothing selected
    assert not window.edit_actions["undo"].isEnabled()
    qtbot.keyClicks(edit, "list my containers")
    assert window.edit_actions["undo"].isEnabled()  # follows the field as it changes
    window.edit_actions["select_all"].trigger()
    assert edit.textCursor().selectedText() == "list my containers"
    assert window.edit_actions["copy"].isEnabled() and window.edit_actions["cut"].isEnabled()
    window.edit_actions["cut"].trigger()
    assert edit.toPlainText() == ""
    assert QGuiApplication.clipboard().text() == "list my containers"
    window.edit_actions["undo"].trigger()
    assert edit.toPlainText() == "list my containers"

    # the focused field keeps its own Ctrl+C: the window's action does not take it
    triggered: list[bool] = []
    window.edit_actions["copy"].triggered.connect(lambda *_: triggered.append(True))
    search = window.sidebar.search
    search.setFocus()
    qtbot.keyClicks(search, "drain")
    search.selectAll()
    QGuiApplication.clipboard().clear()
    qtbot.keyClick(search, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text() == "drain" and triggered == []

    # any focused widget with copy()/selectAll() (the chat view will have them)
    other = Copyable(window.centralWidget())
    other.show()
    other.setFocus()
    assert window.edit_target() is other
    window.update_edit_actions()
    assert not window.edit_actions["copy"].isEnabled()  # has_selection() is False
    assert not window.edit_actions["paste"].isEnabled()
    window.edit_actions["select_all"].trigger()
    window.update_edit_actions()
    assert window.edit_actions["copy"].isEnabled()
    qtbot.keyClick(other, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert other.calls == ["selectAll", "copy"]


def test_a_password_field_is_never_copied(window):
    secret = QLineEdit(window.centralWidget())
    secret.setEchoMode(QLineEdit.EchoMode.Password)
    secret.setText("hunter2")
    secret.selectAll()
    secret.show()
    secret.setFocus()
    window.update_edit_actions()
    assert not window.edit_actions["copy"].isEnabled()
    assert not window.edit_actions["cut"].isEnabled()


# ---- starter prompts, focus ------------------------------------------------------------


def test_starter_prompts_fill_the_message_box_and_go_when_the_chat_starts(
    window, llm, qtbot, qloop
):
    assert window.focusWidget() is window.composer.edit  # typing can start at once
    starters = window.starters
    assert starters.isVisible() and len(starters.cards) == 4
    card = starters.cards[2]
    qtbot.mouseClick(card, Qt.MouseButton.LeftButton)
    assert window.composer.text() == STARTERS[2].prompt
    assert window.focusWidget() is window.composer.edit
    assert not window.controller.busy and llm.requests == []  # filled in, not sent

    # by keyboard: Tab reaches the cards, Space picks one
    window.composer.set_text("")
    starters.cards[0].setFocus()
    qtbot.keyClick(starters.cards[0], Qt.Key.Key_Space)
    assert window.composer.text() == STARTERS[0].prompt

    llm.add(text("Here they are."))

    async def body():
        window.composer.submit()
        await wait_until(lambda: not window.controller.busy, what="the turn")

    qloop.run_until_complete(body())
    assert not starters.isVisible()
    qtbot.mouseClick(window.sidebar.new_button, Qt.MouseButton.LeftButton)
    assert starters.isVisible() and window.focusWidget() is window.composer.edit


def test_opening_a_chat_puts_the_focus_in_the_message_box(window, qtbot):
    store = window.runtime.store
    conv = store.create_conversation("Old one")
    store.append_message(conv, ChatMessage("user", "hello"))
    window.sidebar.refresh()
    window.sidebar.list.setFocus()
    item = window.sidebar.list.item(0)
    rect = window.sidebar.list.visualItemRect(item)
    qtbot.mouseClick(window.sidebar.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert window.controller.conversation_id == conv
    assert window.focusWidget() is window.composer.edit
    assert not window.starters.isVisible()


def test_esc_in_the_search_clears_it_then_returns_to_the_message_box(window, llm, qtbot, qloop):
    llm.add(hang("thinking"))

    async def body():
        window.composer.set_text("go")
        window.composer.submit()
        await wait_until(lambda: window.controller.busy, what="the turn to start")
        search = window.sidebar.search
        search.setFocus()
        qtbot.keyClicks(search, "drain")
        qtbot.keyClick(search, Qt.Key.Key_Escape)
        assert search.text() == "" and search.hasFocus()
        assert window.controller.busy  # Esc cleared the search; it did not stop the answer
        qtbot.keyClick(search, Qt.Key.Key_Escape)
        assert window.focusWidget() is window.composer.edit and window.controller.busy
        qtbot.keyClick(window.composer.edit, Qt.Key.Key_Escape)  # Stop, from the message box
        await wait_until(lambda: not window.controller.busy, what="stop")

    qloop.run_until_complete(body())


# ---- fitting -----------------------------------------------------------------------------


def _overlap(a: QWidget, b: QWidget) -> bool:
    ra = a.geometry().translated(a.parentWidget().mapTo(a.window(), QPoint(0, 0)))
    rb = b.geometry().translated(b.parentWidget().mapTo(b.window(), QPoint(0, 0)))
    return ra.intersects(rb)


@pytest.mark.parametrize("size", [(800, 600), (MIN_WIDTH, MIN_HEIGHT)])
def test_nothing_is_clipped_at_800_by_600_and_at_the_minimum_size(window, qtbot, size):
    assert (window.minimumWidth(), window.minimumHeight()) == (MIN_WIDTH, MIN_HEIGHT)
    store = window.runtime.store
    long_title = "How much space do my folders use? Write me a script for it, please " * 2
    conv = store.create_conversation(long_title)
    store.append_message(conv, ChatMessage("user", "hello"))
    window.resize(*size)
    window.sidebar.refresh()
    window.open_conversation(conv)
    qtbot.waitUntil(lambda: window.size().width() == size[0])

    # the header: the long title ends in "…", whole in text() and the tooltip; no overlap
    title = window.title_label
    assert title.text() == " ".join(long_title.split())
    assert title.elided().endswith("…") and len(title.elided()) < len(title.text())
    assert not _overlap(title, window.model_picker)
    assert window.model_picker.width() >= window.model_picker.minimumSizeHint().width()

    # the composer's placeholder sits on one line
    edit = window.composer.edit
    metrics = edit.fontMetrics()
    assert metrics.horizontalAdvance(edit.placeholderText()) < edit.viewport().width()
    assert edit.height() < 2 * metrics.lineSpacing() + 24
    search = window.sidebar.search
    assert search.fontMetrics().horizontalAdvance(search.placeholderText()) < search.width() - 16

    # the starter cards fit inside the empty chat, side by side or stacked
    window.new_chat()
    qtbot.waitUntil(window.starters.isVisible)
    area = window.starters.rect()
    for card in window.starters.cards:
        top_left = card.mapTo(window.starters, QPoint(0, 0))
        assert area.contains(top_left) and area.contains(
            top_left + QPoint(card.width() - 1, card.height() - 1)
        ), card.starter.title
        assert card.height() >= card.heightForWidth(card.width())


def test_the_placeholder_keeps_its_key_hint_where_there_is_room(window, qtbot):
    window.resize(1440, 900)
    qtbot.waitUntil(lambda: window.width() == 1440)
    assert "Enter to send" in window.composer.edit.placeholderText()
    window.composer.set_send_key("ctrl_enter")
    assert "Ctrl+Enter to send" in window.composer.edit.placeholderText()
    assert window.composer.send_button.toolTip() == "Send (Ctrl+Enter)"
    window.resize(MIN_WIDTH, MIN_HEIGHT)
    qtbot.waitUntil(lambda: window.width() == MIN_WIDTH)
    assert window.composer.edit.placeholderText() == "Ask Deskhand to do something…"


# ---- the tray balloon in the dark theme ---------------------------------------------------


class QBalloonTip(QWidget):
    """Stands for Qt's own balloon (class name QBalloonTip): a light-yellow box, whatever
    the theme, with a title, the message and a close button."""

    def __init__(self) -> None:
        super().__init__(None, Qt.WindowType.ToolTip)
        self.title = QLabel("Reminder")
        self.message = QLabel("Call the bank")
        self.close_button = QPushButton()
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.message)
        layout.addWidget(self.close_button)
        palette = self.palette()
        palette.setColor(QPalette.ColorRole.Window, QColor(0xFF, 0xFF, 0xE1))
        palette.setColor(QPalette.ColorRole.WindowText, Qt.GlobalColor.black)
        self.setPalette(palette)
        self.setAutoFillBackground(True)


def test_the_tray_balloon_stays_readable_in_the_dark_theme(themed, qtbot):
    apply_theme(themed, "dark")
    tip = QBalloonTip()
    qtbot.addWidget(tip)
    tip.show()
    image = tip.grab().toImage()
    for label in (tip.title, tip.message):
        colour = label.palette().color(QPalette.ColorRole.WindowText)
        assert colour.lightness() < 60, colour.name()  # dark text on the yellow box
    corner = tip.close_button.geometry().topLeft() + QPoint(2, 2)
    assert image.pixelColor(corner).lightness() > 200  # no dark button on it
    tray = Tray(app_icon())
    assert tray.menu.palette().color(QPalette.ColorRole.Window) == QApplication.palette().color(
        QPalette.ColorRole.Window
    )
    tray.hide()


def test_f2_renames_the_open_chat_in_place(window, qtbot):
    store = window.runtime.store
    conv = store.create_conversation("Draft name")
    store.append_message(conv, ChatMessage("user", "hello"))
    window.sidebar.refresh()
    window.open_conversation(conv)
    assert window.rename_action.shortcut().toString() == "F2"
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_F2)
    editor = window.sidebar.rename_editor()
    assert editor is not None and editor.hasFocus()
    editor.setText("Final name")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: store.get_conversation(conv).title == "Final name")
    assert window.title_label.text() == "Final name"
