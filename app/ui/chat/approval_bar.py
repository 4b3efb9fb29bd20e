"""The interactive part of a tool card waiting for approval: what will happen (the preview
or diff, scrollable and height-capped), the full arguments (collapsed), and one real,
focusable button per answer the request allows (`ApprovalRequest.choices()`).

Only pending cards have one, so a long conversation holds no widgets per message. Every
text shown here comes from the model or a tool: it is displayed as plain text with control
characters made visible (`visible`), never interpreted.
"""

from __future__ import annotations

import math
from pathlib import Path

from PySide6.QtCore import QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QKeySequence,
    QResizeEvent,
    QShortcut,
    QSyntaxHighlighter,
    QTextCharFormat,
    QTextDocument,
    QTextOption,
)
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLayout,
    QLayoutItem,
    QPlainTextEdit,
    QPushButton,
    QStyle,
    QStyleOptionButton,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from app.core.approval import ApprovalRequest, Decision
from app.core.tool_names import tool_title
from app.core.visible import one_line, visible
from app.ui.chat.style import ChatTheme, mix
from app.ui.chat.terminal import (
    TERMINAL_BG,
    TERMINAL_BORDER,
    TERMINAL_FG,
    ShellApproval,
    shell_approval,
)

PREVIEW_MAX_LINES = 14
ARGS_MAX_LINES = 12
#: A command box grows with its text up to this many lines; beyond, it scrolls (and says so).
COMMAND_MAX_LINES = 30
LABEL_MAX_PX = 440.0
BUTTON_H = 30
#: The text width a card's boxes are assumed to have when sizing them (cards are wider).
WRAP_WIDTH_PX = 620.0


def home_short(text: str) -> str:
    """ "/home/u/notes" → "~/notes" (labels get long; the tooltip keeps the full path)."""
    home = str(Path.home())
    return text.replace(home + "/", "~/").replace(home + "\\", "~\\") if home != "/" else text


def source_noun(source_id: str) -> str:
    kind = source_id.split(":", 1)[0]
    nouns = {"mcp": "server", "pack": "tool pack", "entrypoint": "tool package", "skill": "skill"}
    return nouns.get(kind, "source")


def choice_texts(request: ApprovalRequest) -> list[tuple[Decision, str, str]]:
    """(decision, button label, tooltip) for each answer the card offers, in order."""
    tool = f"“{one_line(tool_title(request.tool), 80)}” ({one_line(request.tool, 80)})"
    first = one_line(request.proposals[0].label, 300) if request.proposals else tool
    last = one_line(request.proposals[-1].label, 300) if request.proposals else tool
    out: list[tuple[Decision, str, str]] = []
    for decision in request.choices():
        match decision:
            case Decision.ALLOW_ONCE:
                label, tip = "Allow once", f"Run {tool} this time only"
            case Decision.ALLOW_CONVERSATION:
                label = "Allow in this conversation"
                tip = f"Allow {first} without asking until this conversation ends"
            case Decision.ALWAYS_ALLOW:
                label = f"Always allow: {home_short(first)}"
                tip = f"Add the rule “Allow {first}”. See and remove it in Settings → Rules."
            case Decision.ALWAYS_ALLOW_ANY:
                label = "Always, any arguments"
                tip = (
                    f"Add the broad rule “Allow {last}”: every call of {tool}, whatever it "
                    "touches. See and remove it in Settings → Rules."
                )
            case Decision.TRUST_SOURCE:
                label = f"Trust this {source_noun(request.source_id)}"
                tip = (
                    f"Trust {one_line(request.source, 120)} as it is now and run this call. "
                    "Its calls then follow your rules; a change to it makes it untrusted again."
                )
            case _:
                label, tip = "Deny", f"Do not run {tool}; the model is told you declined"
        out.append((decision, label, tip))
    return out


def always_adds(request: ApprovalRequest) -> str:
    """"Always allow" adds these rules: said in full when it adds more than one (a command
    line gets one per command), since the button's label may be elided."""
    if not request.proposals or not request.proposals[0].rules[1:]:
        return ""
    return "“Always allow” adds: " + one_line(request.proposals[0].label, 300)


class _DiffHighlighter(QSyntaxHighlighter):
    """Colours added and removed lines of a unified diff (any other text stays plain)."""

    def __init__(self, doc: QTextDocument, theme: ChatTheme) -> None:
        super().__init__(doc)
        self._add = QTextCharFormat()
        self._add.setForeground(theme.diff_add)
        self._add.setBackground(theme.diff_add_bg)
        self._del = QTextCharFormat()
        self._del.setForeground(theme.diff_del)
        self._del.setBackground(theme.diff_del_bg)

    def highlightBlock(self, text: str) -> None:
        if text.startswith("+") and not text.startswith("+++"):
            self.setFormat(0, len(text), self._add)
        elif text.startswith("-") and not text.startswith("---"):
            self.setFormat(0, len(text), self._del)


def text_box(text: str, theme: ChatTheme, max_lines: int, name: str) -> QPlainTextEdit:
    """A read-only, scrollable, height-capped box showing `text` exactly. Long lines wrap
    (anywhere), so nothing hides beyond the right edge: the end of a long argument is
    one scroll down, never off to the side."""
    box = QPlainTextEdit()
    box.setObjectName(name)
    box.setReadOnly(True)
    box.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
    box.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    box.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    box.setFont(theme.mono_font)
    box.setPlainText(visible(text))
    flags = Qt.TextInteractionFlag
    box.setTextInteractionFlags(flags.TextSelectableByMouse | flags.TextSelectableByKeyboard)
    box.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
    box.setTabChangesFocus(True)
    metrics = QFontMetricsF(theme.mono_font)
    # lines as they will wrap in a card of the usual width (a little more, never less)
    rows = 0
    for line in visible(text).split("\n")[: max_lines * 4]:
        rows += max(1, math.ceil(metrics.horizontalAdvance(line) / WRAP_WIDTH_PX))
        if rows >= max_lines:
            break
    shown = min(rows, max_lines)
    margin = box.document().documentMargin()
    height = shown * metrics.lineSpacing() + 2 * margin + 2 * box.frameWidth() + 6
    box.setFixedHeight(math.ceil(height))
    box.setStyleSheet(
        f"QPlainTextEdit#{name} {{ background: {theme.code_bg.name()};"
        f" color: {theme.text.name()}; border: 1px solid {theme.code_border.name()};"
        " border-radius: 6px; }"
    )
    return box


def _label(text: str, color: QColor, font: QFont, name: str = "") -> QLabel:
    """A plain-text label (never rich text: what it shows comes from the model)."""
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setFont(font)
    label.setWordWrap(True)
    if name:
        label.setObjectName(name)
    label.setStyleSheet(f"color: {color.name()};")
    return label


def shell_pills(shell: ShellApproval, theme: ChatTheme) -> list[tuple[str, QColor, QColor]]:
    """(text, text colour, fill) of the sandbox and network pills under a command."""
    pills = []
    if shell.sandboxed is True:
        pills.append(("Sandboxed", theme.ok, mix(theme.card, theme.ok, 0.14)))
    elif shell.sandboxed is False:
        pills.append(("NOT sandboxed", theme.warn, mix(theme.card, theme.warn, 0.18)))
    if shell.network:
        pills.append(("Network on", theme.warn, mix(theme.card, theme.warn, 0.18)))
    return pills


class CommandBox(QTextEdit):
    """A command shown whole: monospace on a terminal's dark background, wrapped anywhere
    (nothing beyond the right edge), as tall as its text up to `COMMAND_MAX_LINES` lines;
    only beyond that does it scroll, and the bar then says so (`complete`)."""

    fitted = Signal()

    def __init__(self, text: str, theme: ChatTheme, label: str) -> None:
        super().__init__()
        self.setObjectName("approvalCommand")
        self.setReadOnly(True)
        self.setAcceptRichText(False)
        self.setLineWrapMode(QTextEdit.LineWrapMode.WidgetWidth)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFont(theme.mono_font)
        self.document().setDocumentMargin(8)
        self.setPlainText(visible(text))
        self.setAccessibleName(label)
        self.setToolTip(label)
        flags = Qt.TextInteractionFlag
        self.setTextInteractionFlags(flags.TextSelectableByMouse | flags.TextSelectableByKeyboard)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setTabChangesFocus(True)
        self.setStyleSheet(
            f"QTextEdit#approvalCommand {{ background: {TERMINAL_BG.name()};"
            f" color: {TERMINAL_FG.name()}; border: 1px solid {TERMINAL_BORDER.name()};"
            f" border-radius: 6px; selection-background-color: {theme.accent.name()}; }}"
        )
        self._max = COMMAND_MAX_LINES * QFontMetricsF(theme.mono_font).lineSpacing()
        self._max += 2 * self.document().documentMargin()
        self.document().setTextWidth(WRAP_WIDTH_PX)  # a first guess, until it is placed
        self.document().documentLayout().documentSizeChanged.connect(lambda _: self._fit())
        self._fit()

    def complete(self) -> bool:
        """Whether all of the text is on screen without scrolling."""
        return self.document().size().height() <= self._max + 0.5

    def _fit(self) -> None:
        shown = min(self.document().size().height(), self._max)
        height = math.ceil(shown + 2 * self.frameWidth() + 2)
        if height != self.height() or self.minimumHeight() != height:
            self.setFixedHeight(height)
            self.fitted.emit()


class FlowLayout(QLayout):
    """Widgets left to right, wrapping to a new row when the next does not fit; a widget
    wider than the whole row gets the row's width (a `ChoiceButton` then elides)."""

    def __init__(self, spacing: int = 8) -> None:
        super().__init__()
        self._items: list[QLayoutItem] = []
        self._gap = spacing
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._place(QRect(0, 0, width, 0), apply=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._place(rect, apply=True)

    def sizeHint(self) -> QSize:
        width = sum(i.sizeHint().width() for i in self._items if not i.isEmpty())
        width += self._gap * max(0, len(self._items) - 1)
        return QSize(width, self.heightForWidth(width))

    def minimumSize(self) -> QSize:
        size = QSize()
        for item in self._items:
            size = size.expandedTo(item.minimumSize())
        return size

    def _place(self, rect: QRect, apply: bool) -> int:
        x, y, row_h = rect.x(), rect.y(), 0
        for item in self._items:
            if item.isEmpty():
                continue
            hint = item.sizeHint().boundedTo(item.maximumSize()).expandedTo(item.minimumSize())
            width = min(hint.width(), max(1, rect.width()))
            if x > rect.x() and x + width > rect.x() + rect.width():
                x, y, row_h = rect.x(), y + row_h + self._gap, 0
            if apply:
                item.setGeometry(QRect(QPoint(x, y), QSize(width, hint.height())))
            x += width + self._gap
            row_h = max(row_h, hint.height())
        # a style may place a widget a pixel or two off its rect (layout item margins)
        return y + row_h - rect.y() + 2


class ChoiceButton(QPushButton):
    """An answer button: its label, then its shortcut ("Allow once   Alt+1"). When it is
    narrower than its text the label is elided in the middle; the shortcut always shows,
    and the full label is in the tooltip."""

    def __init__(self, label: str, keys: str, parent: QWidget | None = None) -> None:
        super().__init__(f"{label}   {keys}", parent)
        self.label, self.keys = label, keys

    def _size_for(self, text: str) -> QSize:
        """What the style makes of a button showing `text` (in the current font)."""
        self.ensurePolished()
        option = QStyleOptionButton()
        self.initStyleOption(option)
        option.text = text
        metrics = self.fontMetrics()
        content = QSize(metrics.horizontalAdvance(text), metrics.height())
        style = self.style()
        return style.sizeFromContents(QStyle.ContentsType.CT_PushButton, option, content, self)

    def _shown(self, room: float) -> str:
        label = self.fontMetrics().elidedText(
            self.label, Qt.TextElideMode.ElideMiddle, int(max(0.0, min(room, LABEL_MAX_PX)))
        )
        return f"{label}   {self.keys}"

    def sizeHint(self) -> QSize:
        size = self._size_for(self._shown(LABEL_MAX_PX))
        return QSize(size.width() + 2, max(size.height(), self.minimumHeight()))

    def minimumSizeHint(self) -> QSize:
        hint = self.sizeHint()
        return QSize(min(hint.width(), 120), hint.height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        full = f"{self.label}   {self.keys}"
        padding = self._size_for(full).width() - self.fontMetrics().horizontalAdvance(full)
        room = self.width() - padding - self.fontMetrics().horizontalAdvance(f"   {self.keys}")
        self.setText(self._shown(room))


class ApprovalBar(QWidget):
    decided = Signal(str)  # a Decision value
    #: The widget's height changed (the arguments were opened or closed).
    heightChanged = Signal(int)

    def __init__(
        self, request: ApprovalRequest, theme: ChatTheme, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("approvalBar")
        self.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground)
        self.request = request
        #: It has been given its place (its own width decides its height from then on).
        self._placed = False
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        self.command: CommandBox | None = None
        shell = shell_approval(request)
        if shell is not None:
            self._add_shell(layout, shell, theme)
        self.preview: QPlainTextEdit | None = None
        if request.preview:
            self.preview = text_box(request.preview, theme, PREVIEW_MAX_LINES, "approvalPreview")
            self.preview.setAccessibleName("What will happen")
            self._highlighter = _DiffHighlighter(self.preview.document(), theme)
            layout.addWidget(self.preview)
        self.args: QPlainTextEdit | None = None
        self.args_toggle: QPushButton | None = None
        if request.arguments and request.arguments_text:
            count = request.arguments_text.count("\n") + 1
            self._args_label = f"full arguments (JSON, {count} line{'s' if count != 1 else ''})"
            self.args_toggle = QPushButton(f"▸  Show the {self._args_label}")
            self.args_toggle.setObjectName("linkButton")
            self.args_toggle.setCursor(Qt.CursorShape.PointingHandCursor)
            self.args_toggle.setFlat(True)
            self.args_toggle.setStyleSheet(
                f"QPushButton {{ color: {theme.link.name()}; text-align: left;"
                " border: none; padding: 2px 0; background: transparent; }"
            )
            self.args_toggle.clicked.connect(self.toggle_arguments)
            layout.addWidget(self.args_toggle, 0, Qt.AlignmentFlag.AlignLeft)
            self.args = text_box(request.arguments_text, theme, ARGS_MAX_LINES, "approvalArgs")
            self.args.setAccessibleName("Full arguments")
            self.args.hide()
            layout.addWidget(self.args)

        self.buttons: dict[Decision, QPushButton] = {}
        self.shortcuts: dict[Decision, QShortcut] = {}
        # the "always" choices get a row of their own: they are the deliberate ones
        rows = [FlowLayout(8), FlowLayout(8)]
        choices = choice_texts(request)
        title = one_line(tool_title(request.tool), 80)
        for number, (decision, label, tip) in enumerate(choices, start=1):
            keys = QKeySequence(f"Alt+{number}")
            keys_text = keys.toString(QKeySequence.SequenceFormat.NativeText)
            button = ChoiceButton(label, keys_text, self)
            button.setProperty("choice_label", label)
            button.setObjectName(f"approval_{decision.value}")
            button.setToolTip(f"{label}\n{tip}  ({keys_text})")
            button.setAccessibleName(f"{label}: {title}")
            button.setAccessibleDescription(f"{tip} Shortcut {keys_text}.")
            button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            button.setAutoDefault(True)  # Enter activates the focused button
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.setFixedHeight(BUTTON_H)
            if decision == Decision.ALLOW_ONCE:
                button.setProperty("accent", True)
            button.clicked.connect(lambda _=False, d=decision: self.decided.emit(d.value))
            always = decision in (Decision.ALWAYS_ALLOW, Decision.ALWAYS_ALLOW_ANY)
            rows[1 if always else 0].addWidget(button)
            self.buttons[decision] = button
            shortcut = QShortcut(keys, self)
            shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
            shortcut.activated.connect(lambda d=decision: self._shortcut(d))
            self.shortcuts[decision] = shortcut
        layout.addLayout(rows[0])
        if rows[1].count():
            layout.addLayout(rows[1])
        self.rules_note: QLabel | None = None
        adds = always_adds(request)
        if adds and Decision.ALWAYS_ALLOW in self.buttons:
            # the button elides a long label: the rules it adds are named in full here
            self.rules_note = _label(adds, theme.muted, theme.small_font, "approvalRulesNote")
            layout.addWidget(self.rules_note)
        self.adjustSize()

    # ---- queries -------------------------------------------------------------------------

    def choices(self) -> list[Decision]:
        return list(self.buttons)

    def button(self, decision: Decision) -> QPushButton:
        return self.buttons[decision]

    def first(self) -> QPushButton:
        return self.buttons[Decision.ALLOW_ONCE]

    def last(self) -> QPushButton:
        return self.buttons[Decision.DENY]

    def focus_chain(self) -> list[QWidget]:
        """The focusable parts in reading order (for the view's Tab order)."""
        chain: list[QWidget] = []
        if self.command is not None:
            chain.append(self.command)
        if self.preview is not None:
            chain.append(self.preview)
        if self.args_toggle is not None and self.args is not None:
            chain += [self.args_toggle, self.args]
        return chain + list(self.buttons.values())

    def wanted_height(self, width: int | None = None) -> int:
        """The height the bar needs at `width` (by default its own width once placed)."""
        if width is None:
            width = self.width() if self._placed else int(WRAP_WIDTH_PX)
        layout = self.layout()
        if layout is None:
            return max(BUTTON_H, self.sizeHint().height())
        layout.activate()
        height = layout.heightForWidth(width) if layout.hasHeightForWidth() else -1
        return max(BUTTON_H, height if height > 0 else self.sizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.width() <= 1:
            return
        self._placed = True
        wanted = self.wanted_height()
        if wanted != self.height():
            self.heightChanged.emit(wanted)

    # ---- terminal calls -----------------------------------------------------------------

    def _add_shell(self, layout: QVBoxLayout, shell: ShellApproval, theme: ChatTheme) -> None:
        """The whole command (or code, or typed text) in a terminal-like box, then where it
        runs and whether the sandbox applies."""
        self.command = CommandBox(shell.text, theme, shell.label)
        self.command.fitted.connect(self._refit)
        layout.addWidget(self.command)
        self.long_note = _label("", theme.warn, theme.small_font, "approvalCommandNote")
        self.long_note.hide()
        layout.addWidget(self.long_note)
        row = QHBoxLayout()
        row.setSpacing(6)
        for text, fg, bg in shell_pills(shell, theme):
            pill = _label(text, fg, theme.small_font, "approvalPill")
            pill.setWordWrap(False)
            pill.setStyleSheet(
                f"QLabel#approvalPill {{ color: {fg.name()}; background: {bg.name()};"
                " border-radius: 9px; padding: 1px 8px; }"
            )
            row.addWidget(pill)
        if shell.folder is not None:
            where = _label(f"in {one_line(shell.folder, 300)}", theme.muted, theme.small_font)
            where.setToolTip(visible(shell.folder))
            row.addWidget(where, 1)
        else:
            row.addStretch(1)
        layout.addLayout(row)
        self._refit()

    def _refit(self) -> None:
        """The command box changed height (the card's width changed): say whether all of
        it is on screen, and let the card make room."""
        box = self.command
        if box is None:
            return
        lines = box.document().blockCount()
        if box.complete():
            self.long_note.hide()
        else:
            plural = "s" if lines != 1 else ""
            self.long_note.setText(
                f"This is long ({lines:,} line{plural}, {len(box.toPlainText()):,} characters): "
                "scroll the box to read all of it before you allow it."
            )
            self.long_note.show()
        layout = self.layout()
        if layout is not None:
            layout.activate()
            self.heightChanged.emit(self.wanted_height())

    # ---- actions ------------------------------------------------------------------------

    def toggle_arguments(self) -> None:
        if self.args is None or self.args_toggle is None:
            return
        opening = self.args.isHidden()
        self.args.setVisible(opening)
        arrow, verb = ("▾", "Hide") if opening else ("▸", "Show")
        self.args_toggle.setText(f"{arrow}  {verb} the {self._args_label}")
        layout = self.layout()
        if layout is not None:
            layout.activate()
        self.heightChanged.emit(self.wanted_height())

    def _shortcut(self, decision: Decision) -> None:
        if self.isVisible():
            self.buttons[decision].click()
