"""An MCP server asks the user something (`elicitation/create`): a form in the chat window.

`ElicitationForm` shows one `ElicitationRequest`: who asks, the server's message, one input
per field (text, number, yes/no, one choice, several choices), and Accept / Decline /
Cancel. A URL-mode request shows the site and the address, and "Open in browser" only
answers accept; the MCP connection opens the page after that, never this widget.

`ElicitationPanel` sits above the composer and shows the forms one at a time;
`ElicitationBridge` is the handler `McpManager.set_elicitation_handler` takes: called on a
worker thread, it queues the request onto the GUI thread and blocks until the user answers,
the server withdraws the request ("cancel") or the window goes away ("decline").

Every text here comes from the server: it is shown as plain text with control characters
made visible (`visible`), never as rich text, and never in a tooltip (Qt guesses tooltips'
format). Long words wrap anywhere, so nothing a server sends can widen the window.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import (
    QAbstractItemModel,
    QEvent,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QGuiApplication,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QResizeEvent,
    QTextLayout,
    QTextOption,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from app.core.mcp.elicitation import (
    MAX_VALUE,
    Action,
    ElicitationAnswer,
    ElicitationRequest,
    ElicitField,
    Value,
    check_value,
)
from app.core.visible import one_line, visible
from app.ui.chat.style import ChatTheme, theme_from_palette

log = logging.getLogger(__name__)

MESSAGE_MAX_LINES = 8
FIELDS_MAX_PX = 320
FIELDS_MIN_PX = 110
CHOICES_MAX_ROWS = 6
FORM_MAX_WIDTH = 760
BUTTON_H = 30
#: How often a shown form looks whether the server withdrew its request.
WATCH_MS = 200
#: How often a waiting worker thread looks whether the request was withdrawn (seconds).
WAIT_POLL = 0.1
NEEDED = "An answer is needed."
_FORMATS = {
    "email": "an email address",
    "uri": "a web address",
    "date": "a date (YYYY-MM-DD)",
    "date-time": "a date and time (YYYY-MM-DDTHH:MM)",
}


# ---- plain text that wraps anywhere ---------------------------------------------------------


def wrap_lines(text: str, font: QFont, width: float) -> list[str]:
    """`text` broken into the lines it takes at `width` px: at spaces where possible,
    anywhere in a word too long for a line."""
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    lines: list[str] = []
    for paragraph in text.split("\n"):
        layout = QTextLayout(paragraph, font)
        layout.setTextOption(option)
        layout.beginLayout()
        while True:
            line = layout.createLine()
            if not line.isValid():
                break
            line.setLineWidth(max(1.0, width))
            start = line.textStart()
            lines.append(paragraph[start : start + line.textLength()])
        layout.endLayout()
    return lines


class PlainLabel(QWidget):
    """A label for untrusted text: painted as plain text (no rich text, no mnemonics),
    wrapped anywhere, at most `max_lines` lines (the last one elided), never wider than
    its parent lets it be."""

    clicked = Signal()

    def __init__(
        self,
        text: str = "",
        *,
        max_lines: int = 0,
        font: QFont | None = None,
        color: QColor | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._text = ""
        self._max_lines = max_lines
        self._color = color
        self._cache: tuple[int, list[str]] | None = None
        if font is not None:
            self.setFont(font)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self.setText(text)

    def text(self) -> str:
        return self._text

    def setText(self, text: str) -> None:
        self._text = text
        self._cache = None
        self.setAccessibleName(text)
        self.updateGeometry()
        self.update()

    def set_color(self, color: QColor | None) -> None:
        self._color = color
        self.update()

    def lines(self, width: int | None = None) -> list[str]:
        """The lines as painted at `width` (the current width by default), elided."""
        width = self.width() if width is None else width
        if self._cache is None or self._cache[0] != width:
            self._cache = (width, self._shown_lines(width))
        return self._cache[1]

    def _shown_lines(self, width: int) -> list[str]:
        lines = wrap_lines(self._text, self.font(), width) if self._text else []
        if self._max_lines and len(lines) > self._max_lines:
            rest = " ".join(lines[self._max_lines - 1 :])
            metrics = QFontMetricsF(self.font())
            last = metrics.elidedText(rest, Qt.TextElideMode.ElideRight, max(1, width))
            lines = [*lines[: self._max_lines - 1], last]
        return lines

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        spacing = QFontMetricsF(self.font()).lineSpacing()
        return math.ceil(max(1, len(self.lines(width))) * spacing)

    def sizeHint(self) -> QSize:
        natural = math.ceil(QFontMetricsF(self.font()).horizontalAdvance(self._text)) + 2
        width = max(1, min(natural, 480))
        return QSize(width, self.heightForWidth(width))

    def minimumSizeHint(self) -> QSize:
        metrics = QFontMetricsF(self.font())
        return QSize(min(self.sizeHint().width(), 48), math.ceil(metrics.lineSpacing()))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.height() < self.heightForWidth(self.width()):
            self.updateGeometry()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setFont(self.font())
        painter.setPen(self._color or self.palette().color(self.foregroundRole()))
        spacing = QFontMetricsF(self.font()).lineSpacing()
        flags = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop | Qt.TextFlag.TextSingleLine
        for row, line in enumerate(self.lines()):
            rect = self.rect().adjusted(0, math.floor(row * spacing), 0, 0)
            painter.drawText(rect, int(flags), line)
        painter.end()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit()
        super().mouseReleaseEvent(event)


class MessageBox(QPlainTextEdit):
    """The server's message: read-only, selectable, wrapped anywhere, as tall as its text
    up to `MESSAGE_MAX_LINES` lines, then it scrolls."""

    def __init__(self, text: str, theme: ChatTheme, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("elicitationMessage")
        self.setReadOnly(True)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setFont(theme.font)
        self.document().setDocumentMargin(6)
        self.setPlainText(text)
        flags = Qt.TextInteractionFlag
        self.setTextInteractionFlags(flags.TextSelectableByMouse | flags.TextSelectableByKeyboard)
        self.setTabChangesFocus(True)
        self.setAccessibleName("The server's message")
        self._fit(560)

    def _fit(self, width: int) -> None:
        margin = self.document().documentMargin()
        inner = width - 2 * margin - 2 * self.frameWidth() - 4
        rows = min(len(wrap_lines(self.toPlainText(), self.font(), inner)), MESSAGE_MAX_LINES)
        spacing = QFontMetricsF(self.font()).lineSpacing()
        height = max(1, rows) * spacing + 2 * margin + 2 * self.frameWidth() + 2
        self.setFixedHeight(math.ceil(height))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self._fit(event.size().width())


def _app_theme(widget: QWidget) -> ChatTheme:
    """The chat's colours from the application's palette (a widget's own palette follows
    its style sheet, which is built from these colours)."""
    return theme_from_palette(QGuiApplication.palette(), widget.font())


# ---- one input per field --------------------------------------------------------------------


class FieldInput(QWidget):
    """One field of the form: its title (and "required"), the input for its kind, the
    description, and the error shown when Accept found the value wrong."""

    def __init__(self, spec: ElicitField, theme: ChatTheme, parent: QWidget | None = None):
        super().__init__(parent)
        self.spec = spec
        self.theme = theme
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        self.title = PlainLabel(spec.title, max_lines=2, font=theme.bold_font)
        self.required_tag: PlainLabel | None = None
        self.check: QCheckBox | None = None
        self.line: QLineEdit | None = None
        self.combo: QComboBox | None = None
        self.list: QListWidget | None = None
        if spec.kind == "boolean":
            layout.addLayout(self._boolean_row())
        else:
            layout.addLayout(self._title_row())
            layout.addWidget(self._input())
        self.description: PlainLabel | None = None
        if spec.description:
            self.description = PlainLabel(
                spec.description, max_lines=3, font=theme.small_font, color=theme.muted
            )
            layout.addWidget(self.description)
        self.error = PlainLabel("", max_lines=2, font=theme.small_font, color=theme.error)
        self.error.setObjectName("elicitationError")
        self.error.hide()
        layout.addWidget(self.error)

    def _title_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.setSpacing(8)
        row.addWidget(self.title)
        if self.spec.required:
            self.required_tag = PlainLabel(
                "required", font=self.theme.small_font, color=self.theme.muted
            )
            self.required_tag.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
            row.addWidget(self.required_tag, 0, Qt.AlignmentFlag.AlignBottom)
        row.addStretch(1)
        return row

    def _boolean_row(self) -> QHBoxLayout:
        self.check = QCheckBox()  # no text: a server's "&" must not become a shortcut
        self.check.setChecked(self.spec.default is True)
        self.check.setAccessibleName(self.spec.title)
        self.title.setFont(self.theme.font)
        self.title.clicked.connect(self.check.toggle)
        self.title.setCursor(Qt.CursorShape.PointingHandCursor)
        row = QHBoxLayout()
        row.setSpacing(6)
        row.addWidget(self.check, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.title, 1)
        return row

    def _input(self) -> QWidget:
        spec = self.spec
        widget: QWidget
        if spec.kind == "choice":
            widget = self.combo = self._combo()
        elif spec.kind == "choices":
            widget = self.list = self._list()
        else:
            widget = self.line = self._line()
        widget.setAccessibleName(spec.title)
        return widget

    def _line(self) -> QLineEdit:
        spec = self.spec
        line = QLineEdit()
        line.setMaxLength(min(spec.max_length or MAX_VALUE, MAX_VALUE))
        line.setPlaceholderText(self._hint())
        line.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        line.setMinimumWidth(60)
        if spec.default is not None:
            shown = spec.default if isinstance(spec.default, str) else _number_text(spec.default)
            line.setText(visible(str(shown), keep_newlines=False))
        line.textEdited.connect(lambda _text: self.show_error(None))
        return line

    def _hint(self) -> str:
        spec = self.spec
        if spec.kind in {"number", "integer"}:
            noun = "a whole number" if spec.kind == "integer" else "a number"
            low, high = spec.minimum, spec.maximum
            if low is not None and high is not None:
                return f"{noun}, {low:g} to {high:g}"
            if low is not None:
                return f"{noun}, at least {low:g}"
            if high is not None:
                return f"{noun}, at most {high:g}"
            return noun
        return _FORMATS.get(spec.format or "", "")

    def _combo(self) -> QComboBox:
        spec = self.spec
        combo = QComboBox()
        combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        combo.setMinimumContentsLength(8)
        combo.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        if not spec.required:
            combo.addItem("(none)", None)
        for choice in spec.choices:
            combo.addItem(choice.label, choice.value)
        combo.setPlaceholderText("Choose one")
        values = [combo.itemData(i) for i in range(combo.count())]
        if spec.default in values:
            combo.setCurrentIndex(values.index(spec.default))
        else:
            combo.setCurrentIndex(0 if not spec.required else -1)
        combo.currentIndexChanged.connect(lambda _i: self.show_error(None))
        return combo

    def _list(self) -> QListWidget:
        spec = self.spec
        box = QListWidget()
        box.setObjectName("elicitationChoices")
        box.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        box.setTextElideMode(Qt.TextElideMode.ElideRight)
        box.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        box.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        box.setMinimumWidth(60)
        chosen = set(spec.default) if isinstance(spec.default, list) else set()
        for choice in spec.choices:
            item = QListWidgetItem(choice.label)
            item.setData(Qt.ItemDataRole.UserRole, choice.value)
            item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsUserCheckable)
            checked = choice.value in chosen
            item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
            box.addItem(item)
        box.setItemDelegate(_ToggleDelegate(box))
        box.itemChanged.connect(lambda _item: self.show_error(None))
        rows = min(len(spec.choices), CHOICES_MAX_ROWS)
        row_h = box.sizeHintForRow(0) if box.count() else 24
        box.setFixedHeight(rows * row_h + 2 * box.frameWidth() + 8)
        return box

    # ---- the value ----------------------------------------------------------------------

    def value(self) -> tuple[Value | None, str | None]:
        """(the value, None) when it fits; (None, None) for an optional field left empty;
        (None, why) when it does not fit."""
        spec = self.spec
        value: Any = self._raw()
        if value is None or value == "" or value == []:
            return None, (NEEDED if spec.required else None)
        problem = check_value(spec, value)
        if problem:
            return None, _without_title(problem, spec.title)
        return value, None

    def _raw(self) -> Any:
        if self.check is not None:
            return self.check.isChecked()
        if self.combo is not None:
            return self.combo.currentData() if self.combo.currentIndex() >= 0 else None
        if self.list is not None:
            items = [self.list.item(i) for i in range(self.list.count())]
            checked = [i for i in items if i.checkState() == Qt.CheckState.Checked]
            return [str(i.data(Qt.ItemDataRole.UserRole)) for i in checked]
        assert self.line is not None
        text = self.line.text()
        if self.spec.kind in {"number", "integer"}:
            return _parse_number(text.strip())
        return text

    def show_error(self, text: str | None) -> None:
        changed = self.error.isHidden() == bool(text)
        self.error.setText(text or "")
        self.error.setVisible(bool(text))
        if self.line is not None:
            self.line.setProperty("invalid", bool(text))
            self.line.style().unpolish(self.line)
            self.line.style().polish(self.line)
        if changed:
            self.updateGeometry()

    def focus_target(self) -> QWidget:
        return self.check or self.combo or self.list or self.line or self


class _ToggleDelegate(QStyledItemDelegate):
    """A click anywhere on a choice's row ticks or unticks it, not only on the little box
    (Space does the same from the keyboard)."""

    def editorEvent(
        self,
        event: QEvent,
        model: QAbstractItemModel,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> bool:
        kinds = {QEvent.Type.MouseButtonPress, QEvent.Type.MouseButtonDblClick}
        if isinstance(event, QMouseEvent) and event.button() == Qt.MouseButton.LeftButton:
            if event.type() in kinds:
                return True
            if event.type() == QEvent.Type.MouseButtonRelease:
                checked = index.data(Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Checked
                state = Qt.CheckState.Unchecked if checked else Qt.CheckState.Checked
                return model.setData(index, state, Qt.ItemDataRole.CheckStateRole)
        return super().editorEvent(event, model, option, index)


def _number_text(value: Value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _parse_number(text: str) -> int | float | str:
    """A number typed by the user, or the text as it was (check_value then says why)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    return int(number) if number.is_integer() else number


def _without_title(problem: str, title: str) -> str:
    """ "Age: at most 150" → "At most 150" (it is shown under the field called Age)."""
    if problem.startswith(f"{title}: "):
        problem = problem[len(title) + 2 :]
    return problem[:1].upper() + problem[1:]


# ---- the form -------------------------------------------------------------------------------


class ElicitationForm(QFrame):
    """One request, answered once. `answered` carries the `ElicitationAnswer`;
    `withdrawn` fires when the server took its request back (the form then only shows a
    short note)."""

    answered = Signal(object)
    withdrawn = Signal()

    def __init__(
        self,
        request: ElicitationRequest,
        theme: ChatTheme | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("elicitationForm")
        self.request = request
        self.theme = theme or _app_theme(self)
        self.done = False
        self.fields: dict[str, FieldInput] = {}
        self.buttons: dict[str, QPushButton] = {}
        self.url_box: QLineEdit | None = None
        self.site: PlainLabel | None = None
        self.fields_area: QScrollArea | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 12, 16, 12)
        layout.setSpacing(10)
        server = one_line(request.server, 80)
        self.header = PlainLabel(
            f"The MCP server “{server}” asks you", max_lines=2, font=self.theme.bold_font
        )
        layout.addWidget(self.header)
        self.message = MessageBox(visible(request.message), self.theme)
        layout.addWidget(self.message)
        self.body = QWidget()
        body = QVBoxLayout(self.body)
        body.setContentsMargins(0, 0, 0, 0)
        body.setSpacing(10)
        if request.mode == "url":
            self._url_part(body)
        elif request.fields:
            self._fields_part(body)
        layout.addWidget(self.body)
        self.note = PlainLabel("", max_lines=2, color=self.theme.muted)
        self.note.hide()
        layout.addWidget(self.note)
        layout.addLayout(self._button_row())
        self._restyle()
        self._watch = QTimer(self)
        self._watch.setInterval(WATCH_MS)
        self._watch.timeout.connect(self._check_withdrawn)
        self._watch.start()

    # ---- building ------------------------------------------------------------------------

    def _url_part(self, body: QVBoxLayout) -> None:
        site = one_line(self.request.site or "", 200)
        intro = PlainLabel("It wants you to open a web page on", color=self.theme.muted)
        self.site = PlainLabel(site, max_lines=2, font=self.theme.bold_font)
        self.site.setObjectName("elicitationSite")
        self.url_box = QLineEdit(one_line(self.request.url or "", 2000))
        self.url_box.setObjectName("elicitationUrl")
        self.url_box.setReadOnly(True)
        self.url_box.setCursorPosition(0)
        self.url_box.setFont(self.theme.small_font)
        self.url_box.setAccessibleName("The full web address")
        self.url_box.setMinimumWidth(60)
        self.url_box.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        after = PlainLabel(
            "Deskhand opens it in your browser only if you choose Open in browser.",
            font=self.theme.small_font,
            color=self.theme.muted,
        )
        where = QVBoxLayout()
        where.setSpacing(2)
        where.addWidget(intro)
        where.addWidget(self.site)
        body.addLayout(where)
        body.addWidget(self.url_box)
        body.addWidget(after)

    def _fields_part(self, body: QVBoxLayout) -> None:
        inner = QWidget()
        inner.setObjectName("elicitationFields")
        column = QVBoxLayout(inner)
        column.setContentsMargins(0, 0, 4, 0)
        column.setSpacing(12)
        for spec in self.request.fields:
            row = FieldInput(spec, self.theme)
            self.fields[spec.name] = row
            column.addWidget(row)
        column.addStretch(1)
        area = QScrollArea()
        area.setObjectName("elicitationFieldsArea")
        area.setWidgetResizable(True)
        area.setFrameShape(QFrame.Shape.NoFrame)
        area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        area.setWidget(inner)
        area.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.fields_area = area
        body.addWidget(area)
        self.fit_fields()

    def _button_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.setSpacing(8)
        url = self.request.mode == "url"
        specs: list[tuple[Action, str, str]] = [
            (
                "accept",
                "Open in browser" if url else "Accept",
                "Open the page in your browser" if url else "Send these answers to the server",
            ),
            ("decline", "Decline", "Say no: the server is told you declined"),
            ("cancel", "Cancel", "Close this without answering (Esc)"),
        ]
        for action, label, tip in specs:
            button = QPushButton(label)
            button.setObjectName(f"elicitation_{action}")
            button.setToolTip(tip)
            button.setAccessibleName(label)
            button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            button.setAutoDefault(True)  # Enter on a focused button presses that button
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.setFixedHeight(BUTTON_H)
            if action == "accept":
                button.setProperty("accent", True)
            if action == "cancel":
                row.addStretch(1)
            button.clicked.connect(self._answering(action))
            row.addWidget(button)
            self.buttons[action] = button
        return row

    def _restyle(self) -> None:
        t = self.theme
        self.setStyleSheet(
            f"QFrame#elicitationForm {{ background: {t.card.name()};"
            f" border: 1px solid {t.card_border.name()}; border-radius: 10px; }}"
            f" QPlainTextEdit#elicitationMessage {{ background: {t.code_bg.name()};"
            f" color: {t.text.name()}; border: 1px solid {t.code_border.name()};"
            " border-radius: 6px; padding: 0px; }"
            " QScrollArea#elicitationFieldsArea, QWidget#elicitationFields"
            " { background: transparent; }"
            f" QLineEdit#elicitationUrl {{ color: {t.muted.name()}; }}"
        )

    def fit_fields(self) -> None:
        """The fields' area is as tall as its fields, up to FIELDS_MAX_PX and a third of
        the window's height (then it scrolls): the conversation stays in sight."""
        area = self.fields_area
        if area is None or area.widget() is None:
            return
        inner = area.widget()
        if inner is None:
            return
        width = max(120, area.viewport().width() if area.isVisible() else area.width())
        wanted = inner.heightForWidth(width)
        if wanted < 0:
            wanted = inner.sizeHint().height()
        limit = FIELDS_MAX_PX
        if self.window() is not self:
            limit = min(limit, max(FIELDS_MIN_PX, self.window().height() // 3))
        area.setFixedHeight(min(wanted, limit))

    # ---- answering -------------------------------------------------------------------

    def _answering(self, action: Action) -> Callable[[], None]:
        return lambda: self.answer(action)

    def answer(self, action: Action) -> None:
        """What a button does. Accept first checks every field; a wrong or missing value
        keeps the form open with the reason next to the field."""
        if self.done:
            return
        if action != "accept" or self.request.mode == "url":
            self._finish(ElicitationAnswer(action))
            return
        content: dict[str, Value] = {}
        first_bad: FieldInput | None = None
        for name, row in self.fields.items():
            value, problem = row.value()
            row.show_error(problem)
            if problem and first_bad is None:
                first_bad = row
            if value is not None:
                content[name] = value
        if first_bad is not None:
            self.fit_fields()
            if self.fields_area is not None:
                self.fields_area.ensureWidgetVisible(first_bad)
            first_bad.focus_target().setFocus(Qt.FocusReason.OtherFocusReason)
            return
        self._finish(ElicitationAnswer("accept", content))

    def _finish(self, answer: ElicitationAnswer) -> None:
        self.done = True
        self._watch.stop()
        self.setEnabled(False)
        self.answered.emit(answer)

    def _check_withdrawn(self) -> None:
        if self.request.cancelled.is_set():
            self.withdraw()

    def withdraw(self) -> None:
        """The server took its request back: no inputs, no buttons, a short note."""
        if self.done:
            return
        self.done = True
        self._watch.stop()
        self.message.hide()
        self.body.hide()
        for button in self.buttons.values():
            button.hide()
        self.note.setText("The server withdrew its question; nothing was sent.")
        self.note.show()
        self.withdrawn.emit()

    def focus_chain(self) -> list[QWidget]:
        """The focusable parts in reading order."""
        chain: list[QWidget] = [self.message]
        chain += [row.focus_target() for row in self.fields.values()]
        if self.url_box is not None:
            chain.append(self.url_box)
        return chain + list(self.buttons.values())

    # ---- keys and events -------------------------------------------------------------

    def event(self, event: QEvent) -> bool:
        # Enter and Esc belong to the form while the focus is in it (not to the window's
        # Esc = Stop, say): accept the override so the key press reaches keyPressEvent.
        if event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent):
            keys = {Qt.Key.Key_Escape, Qt.Key.Key_Return, Qt.Key.Key_Enter}
            if event.key() in keys and not self.done:
                event.accept()
                return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if self.done:
            super().keyPressEvent(event)
            return
        if event.key() == Qt.Key.Key_Escape:
            self.answer("cancel")
            return
        enter = event.key() in {Qt.Key.Key_Return, Qt.Key.Key_Enter}
        if enter and self.request.mode == "form":
            self.answer("accept")  # a URL is opened by its button only
            return
        super().keyPressEvent(event)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.fit_fields()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:  # the app's theme changed
            theme = _app_theme(self)
            if theme.key != self.theme.key:
                self.theme = theme
                self._restyle()


# ---- one form at a time, and the thread bridge ----------------------------------------------


@dataclass(eq=False)
class Pending:
    """A request waiting for the user; `done` is set once `answer` holds the answer."""

    request: ElicitationRequest
    answer: ElicitationAnswer | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def resolve(self, answer: ElicitationAnswer) -> None:
        if not self.done.is_set():
            self.answer = answer
            self.done.set()


class ElicitationPanel(QWidget):
    """Shows pending requests above the composer, one form at a time (the rest wait in
    order). `asked` fires when a form appears (the window may notify through the tray)."""

    asked = Signal()
    _submitted = Signal(object)  # a Pending, from any thread

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("elicitationPanel")
        self.form: ElicitationForm | None = None
        self._current: Pending | None = None
        self._queue: deque[Pending] = deque()
        self._watched: QWidget | None = None
        #: How long the "withdrew its question" note stays (when nothing else waits).
        self.note_ms = 4000
        layout = QHBoxLayout(self)
        layout.setContentsMargins(20, 8, 20, 8)
        self._layout = layout
        self.bridge = ElicitationBridge(self)
        self._submitted.connect(self._enqueue, Qt.ConnectionType.QueuedConnection)
        self.hide()

    # ---- queue ---------------------------------------------------------------------------

    def submit(self, pending: Pending) -> None:
        """Safe from any thread: the request joins the queue on the GUI thread."""
        self._submitted.emit(pending)

    def pending(self) -> int:
        """Requests shown or waiting."""
        return len(self._queue) + (1 if self._current is not None else 0)

    def _enqueue(self, pending: Pending) -> None:
        if self.bridge.closed:
            pending.resolve(ElicitationAnswer("decline"))
            return
        self._queue.append(pending)
        if self._current is None:
            self._show_next()

    def _show_next(self) -> None:
        self._drop_form()
        while self._queue:
            pending = self._queue.popleft()
            if pending.request.cancelled.is_set() or pending.done.is_set():
                pending.resolve(ElicitationAnswer("cancel"))
                continue
            self._current = pending
            form = ElicitationForm(pending.request)
            form.setMaximumWidth(FORM_MAX_WIDTH)
            form.answered.connect(lambda answer, p=pending: self._answered(p, answer))
            form.withdrawn.connect(lambda p=pending: self._withdrawn(p))
            self.form = form
            self._layout.addWidget(form, 1)
            self.show()
            self._watch_window()
            self.asked.emit()
            return
        self.hide()

    def _watch_window(self) -> None:
        window = self.window()
        if window is not self and window is not self._watched:
            if self._watched is not None:
                self._watched.removeEventFilter(self)
            window.installEventFilter(self)
            self._watched = window

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize and self.form is not None:
            self.form.fit_fields()  # a shorter window: fewer fields in sight
        return False

    def _drop_form(self) -> None:
        form, self.form, self._current = self.form, None, None
        if form is not None:
            had_focus = form.isAncestorOf(self.focusWidget() or self)
            form.hide()
            self._layout.removeWidget(form)
            form.deleteLater()
            if had_focus and self.window() is not None:
                self.window().setFocus(Qt.FocusReason.OtherFocusReason)

    def _answered(self, pending: Pending, answer: ElicitationAnswer) -> None:
        pending.resolve(answer)
        if pending is self._current:
            self._show_next()

    def _withdrawn(self, pending: Pending) -> None:
        pending.resolve(ElicitationAnswer("cancel"))
        if self._queue:
            self._show_next()
            return
        form = self.form
        QTimer.singleShot(self.note_ms, lambda: self._note_done(form))

    def _note_done(self, form: ElicitationForm | None) -> None:
        if form is not None and form is self.form:
            self._show_next()

    # ---- ending ------------------------------------------------------------------------

    def cancel_calls(self) -> None:
        """The turn ended: requests that came during one of its tool calls are answered
        "cancel" (the call they belonged to is over)."""
        for pending in [p for p in self._queue if p.request.call_id is not None]:
            self._queue.remove(pending)
            pending.resolve(ElicitationAnswer("cancel"))
        current, form = self._current, self.form
        if current is not None and current.request.call_id is not None and form is not None:
            form.answer("cancel")

    def close_all(self) -> None:
        """The window goes away: every waiting request is declined, and later ones too."""
        self.bridge.close()
        while self._queue:
            self._queue.popleft().resolve(ElicitationAnswer("decline"))
        if self._current is not None:
            self._current.resolve(ElicitationAnswer("decline"))
        self._drop_form()
        self.hide()


class ElicitationBridge:
    """The elicitation handler for `McpManager.set_elicitation_handler`: called on a worker
    thread, it shows the request in the panel and blocks until it is answered. A request
    the server withdraws answers "cancel"; once the window is gone every request answers
    "decline". Called on the GUI thread itself it declines (waiting there would freeze the
    window)."""

    def __init__(self, panel: ElicitationPanel) -> None:
        self._panel: ElicitationPanel | None = panel
        self._gui_thread = threading.get_ident()
        self._closed = threading.Event()
        panel.destroyed.connect(self._gone)

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        self._closed.set()

    def _gone(self, *_: object) -> None:
        self._closed.set()
        self._panel = None

    def __call__(self, request: ElicitationRequest) -> ElicitationAnswer:
        panel = self._panel
        if self._closed.is_set() or panel is None:
            return ElicitationAnswer("decline")
        if threading.get_ident() == self._gui_thread:
            log.warning("an elicitation request reached the GUI thread; declined")
            return ElicitationAnswer("decline")
        pending = Pending(request)
        try:
            panel.submit(pending)
        except RuntimeError:  # the panel was deleted meanwhile
            return ElicitationAnswer("decline")
        while not pending.done.wait(WAIT_POLL):
            if request.cancelled.is_set():
                pending.resolve(ElicitationAnswer("cancel"))
            elif self._closed.is_set():
                pending.resolve(ElicitationAnswer("decline"))
        return pending.answer or ElicitationAnswer("decline")
