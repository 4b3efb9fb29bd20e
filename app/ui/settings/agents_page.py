"""The "Agents" page: the sub-agents the assistant may hand a task to (`delegate_agent`).
Deskhand's own (Researcher, Reviewer) are listed "Built in" and read-only — Duplicate…
makes an editable copy under a new name — and the user's own are added, edited and
removed here.

Changes take effect at once, as on the Rules page: the editor saves through
`runtime.agents` (app.core.agent_book.AgentBook), which checks every field first and
writes settings.json; each problem is shown next to its field and nothing is saved. The
checks build the tool registry on first use, so every call to the book that changes
something runs on a worker (`off_gui`) in a task of the page; the dialog's Save has
nothing to do here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from typing import Any, Literal

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QSize, Qt, Signal
from PySide6.QtGui import (
    QFont,
    QKeyEvent,
    QKeySequence,
    QResizeEvent,
    QShortcut,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QFormLayout,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from app.core.agent_book import AgentError, ListedAgent
from app.core.agents import CATEGORY, usable_categories
from app.core.runtime import Runtime
from app.core.settings import READ_ONLY_TOOLS, AgentDefinition, ProviderAccount, Settings
from app.core.visible import one_line, visible
from app.ui.off_gui import off_gui
from app.ui.removal import confirm_removal
from app.ui.settings.account_list import DETAIL_ROLE, TwoLineDelegate
from app.ui.settings.dialog import file_reason
from app.ui.settings.page import Patch, SettingsPage
from app.ui.settings.widgets import (
    form_label,
    form_layout,
    muted_label,
    role_label,
    set_invalid,
    set_role,
)

Starter = Callable[[Coroutine[Any, Any, Any]], "asyncio.Task[Any] | None"]
Mode = Literal["add", "edit", "duplicate"]

LIST_WIDTH, NARROW_LIST_WIDTH = 250, 170
BUILTIN_ROLE = Qt.ItemDataRole.UserRole + 2
BUILTIN_TAG = "Built in"
SAME_AS_CONVERSATION = "Same as the conversation"
BUILTIN_NOTE = (
    "Ships with Deskhand and cannot be changed or removed. Duplicate… makes a copy of your "
    "own to change."
)
DELEGATE_OFF = (
    "The assistant cannot hand tasks to agents now: the tool “delegate_agent” is turned "
    "off on the Tools page."
)
TOOLS_HINT = (
    "One per line: a tool (fs_read_file), a pattern (fs_read_*), category:<name> for "
    "Deskhand's tools of a category, or read-only for every built-in tool that only reads."
)
ALLOW_HINT = (
    "One per line, e.g. fs_write_file,folder=/home/me/notes. Reading runs; any other call "
    "asks you first, and the conversation's own rules must allow it too."
)
ALLOW_TIP = (
    "TOOL[@SOURCE][,KIND=VALUE]\nKIND is folder, path, site, account or command, e.g.\n"
    "fs_write_file,folder=/home/me/notes\nbrowser_navigate,site=https://example.org\n"
    "shell_run,command=git status,folder=/home/me/project"
)
#: The editor's rows and the AgentDefinition fields whose problems are shown under each.
FIELD_ROWS: dict[str, tuple[str, ...]] = {
    "name": ("name",),
    "description": ("description",),
    "instructions": ("instructions",),
    "model": ("provider", "model"),
    "tools": ("tools",),
    "allow": ("allow",),
    "limits": ("max_steps", "max_seconds", "max_tokens"),
}
LIMIT_WORDS = {"max_steps": "Steps", "max_seconds": "Seconds", "max_tokens": "Tokens"}
#: The CLI's pointers in the book's messages, as the window says them.
_POINTERS = {
    "(see: deskhand tools list)": "(see Settings → Tools)",
    " (see: deskhand agents list)": "",
}


# ---- plain words (pure functions) ---------------------------------------------------------


def problem_text(field: str, message: str) -> str:
    """One problem of the book as the window shows it under its field."""
    for cli, window in _POINTERS.items():
        message = message.replace(cli, window)
    if field in LIMIT_WORDS:  # the three limits share a row
        message = f"{LIMIT_WORDS[field]} {message}"
    return message[:1].upper() + message[1:]


def account_names(accounts: Sequence[ProviderAccount]) -> dict[str, str]:
    """Each account's id to its label, with its id added when two share a label."""
    labels = [one_line(a.label.strip() or a.id, 60) for a in accounts]
    return {
        a.id: label if labels.count(label) == 1 else f"{label} ({one_line(a.id, 20)})"
        for a, label in zip(accounts, labels, strict=True)
    }


def missing_account(account_id: str) -> str:
    return f"Missing account ({one_line(account_id, 40)}) — choose another"


def model_text(agent: AgentDefinition, accounts: Sequence[ProviderAccount]) -> str:
    """ "Same as the conversation", "Work OpenAI · gpt-4.1-mini"."""
    if agent.provider is None:
        account = SAME_AS_CONVERSATION
    else:
        account = account_names(accounts).get(agent.provider, missing_account(agent.provider))
    return f"{account} · {one_line(agent.model, 80)}" if agent.model else account


def tool_text(entry: str) -> str:
    if entry == READ_ONLY_TOOLS:
        return "Every built-in tool that only reads"
    if entry.startswith(CATEGORY):
        return f"Deskhand's “{entry[len(CATEGORY) :].strip()}” tools"
    return entry


def duration_text(seconds: int) -> str:
    for size, unit in ((3600, "hour"), (60, "minute")):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"


def limits_text(agent: AgentDefinition) -> str:
    return (
        f"At most {agent.max_steps} steps, {duration_text(agent.max_seconds)} "
        f"and {agent.max_tokens:,} tokens"
    )


def copy_name(name: str, taken: Sequence[str]) -> str:
    """ "Researcher copy", then "Researcher copy 2"…: a name no agent has (within the
    40 characters a name may have)."""
    used = {n.strip().casefold() for n in taken}
    for number in range(1, 1000):
        suffix = " copy" if number == 1 else f" copy {number}"
        candidate = name.strip()[: 40 - len(suffix)].rstrip() + suffix
        if candidate.casefold() not in used:
            return candidate
    return name


def field_bounds(field: str) -> tuple[int, int]:
    """A number field's lowest and highest values, as the definition model allows them."""
    low, high = 0, 2**31 - 1
    for rule in AgentDefinition.model_fields[field].metadata:
        if getattr(rule, "ge", None) is not None:
            low = rule.ge
        if getattr(rule, "le", None) is not None:
            high = rule.le
    return int(low), int(high)


def text_lines(text: str, *, commas: bool = False) -> list[str]:
    """The non-empty lines of a text box (and comma-separated parts when `commas`)."""
    parts = text.replace(",", "\n").splitlines() if commas else text.splitlines()
    return [part.strip() for part in parts if part.strip()]


def confirm_remove(parent: QWidget, name: str) -> bool:
    """Asks before an agent goes (tests replace this). The name is shown as plain text."""
    return confirm_removal(parent, "agent", name, "The assistant can no longer hand tasks to it.")


# ---- the list ------------------------------------------------------------------------------


class AgentDelegate(TwoLineDelegate):
    """Two lines per agent (name, then its description in muted text) and a quiet
    "Built in" tag on Deskhand's own."""

    def tag(self, index: QModelIndex | QPersistentModelIndex) -> tuple[str, bool] | None:
        return (BUILTIN_TAG, False) if index.data(BUILTIN_ROLE) else None


class AgentList(QListWidget):
    """Enter opens the selected agent without also pressing the settings window's
    default button (a list leaves Enter to its window)."""

    def keyPressEvent(self, event: QKeyEvent) -> None:
        super().keyPressEvent(event)
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            event.accept()


# ---- the selected agent ------------------------------------------------------------------


class AgentDetail(QWidget):
    """The selected agent, read-only: what it does, its model, tools, profile, limits and
    instructions."""

    def __init__(self) -> None:
        super().__init__()
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 12, 0)
        column.setSpacing(6)
        head = QHBoxLayout()
        head.setSpacing(10)
        self.name = role_label("", "section")
        self.name.setTextFormat(Qt.TextFormat.PlainText)
        self.name.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        big = QFont(self.name.font())
        big.setPointSizeF(big.pointSizeF() + 2)
        self.name.setFont(big)
        self.tag = muted_label(BUILTIN_TAG, wrap=False)
        head.addWidget(self.name)
        head.addWidget(self.tag, 0, Qt.AlignmentFlag.AlignBaseline)
        head.addStretch(1)
        column.addLayout(head)
        self.description = self._value("")
        column.addWidget(self.description)
        column.addSpacing(8)
        rows = QWidget()
        self.form = form_layout(rows, margins=(0, 0, 0, 0), spacing=(14, 8))
        self.form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.model = self._row("Model")
        self.tools = self._row("Tools")
        self.allow = self._row("Runs without asking")
        self.limits = self._row("Limits")
        self.instructions = self._row("Instructions")
        column.addWidget(rows)
        self.note = muted_label(BUILTIN_NOTE)
        self.note.setContentsMargins(0, 8, 0, 0)
        column.addWidget(self.note)
        column.addStretch(1)

    def _value(self, role: str) -> QLabel:
        label = role_label("", role, wrap=True)
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        label.setMinimumWidth(120)  # wraps rather than widening the page
        return label

    def _row(self, text: str) -> QLabel:
        label = muted_label(text, wrap=False)
        label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        value = self._value("")
        label.setBuddy(value)
        self.form.addRow(label, value)
        return value

    def show_agent(self, listed: ListedAgent, accounts: Sequence[ProviderAccount]) -> None:
        agent = listed.definition
        self.name.setText(one_line(agent.name, 60))
        self.tag.setVisible(listed.builtin)
        self.note.setVisible(listed.builtin)
        self.description.setText(visible(agent.description))
        self.model.setText(model_text(agent, accounts))
        self.tools.setText("\n".join(visible(tool_text(t)) for t in agent.tools) or "None")
        allow = "\n".join(visible(line) for line in agent.allow)
        self.allow.setText(allow or "Only reading: any other call asks you first")
        set_role(self.allow, "" if allow else "muted")
        self.limits.setText(limits_text(agent))
        instructions = visible(agent.instructions.strip())
        self.instructions.setText(instructions or "None: only the task it is given")
        set_role(self.instructions, "" if instructions else "muted")


# ---- the editor ----------------------------------------------------------------------------


class AgentEditor(QDialog):
    """Add, edit or duplicate an agent. Save hands the fields to `runtime.agents` on a
    worker; each problem it finds is shown under its field and the editor stays open with
    everything typed. `saved` carries the saved agent's name."""

    saved = Signal(str)

    def __init__(
        self,
        runtime: Runtime,
        start: Starter,
        *,
        mode: Mode,
        agent: AgentDefinition | None = None,
        categories: Sequence[str] = (),
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self._start = start
        self.mode = mode
        #: The name the agent is saved under now (edit only).
        self.original = agent.name if mode == "edit" and agent is not None else None
        self.accounts = tuple(runtime.settings.providers)
        self.errors: dict[str, QLabel] = {}
        self.fields: dict[str, QWidget] = {}
        #: Saving now (tests await it).
        self.saving: asyncio.Task[Any] | None = None
        self.setObjectName("agentEditor")
        heading = {"add": "New agent", "edit": "Edit agent", "duplicate": "New agent"}[mode]
        self.setWindowTitle(f"{heading} — Deskhand")
        self.setMinimumWidth(700)
        # multi-line fields have no "invalid" look in the theme; bright-text is its error red
        self.setStyleSheet(
            'QPlainTextEdit[invalid="true"] { border: 1px solid palette(bright-text); }'
        )
        self._build(heading)
        self._load(agent)
        self.set_categories(categories)

    # ---- building ----------------------------------------------------------------------

    def _build(self, heading: str) -> None:
        root = QVBoxLayout(self)
        root.setContentsMargins(20, 16, 20, 16)
        root.setSpacing(10)
        root.addWidget(role_label(heading, "heading"))
        self.grid = QGridLayout()
        self.grid.setHorizontalSpacing(12)
        self.grid.setVerticalSpacing(4)
        self.grid.setColumnStretch(1, 1)
        root.addLayout(self.grid)

        self.name = QLineEdit()
        self.name.setMaxLength(40)
        self.name.setPlaceholderText("e.g. Note taker — letters, digits, spaces, _ . -")
        self._row("Name", self.name, "name")
        self.description = _text_box(2, fixed=True)
        self.description.setPlaceholderText(
            "What it does; the assistant reads this when it picks an agent"
        )
        self._row("Description", self.description, "description", top=True)
        self.instructions = _text_box(5)
        self.instructions.setPlaceholderText(
            "Optional: how it should work and what to report back (its system prompt)"
        )
        self._row("Instructions", self.instructions, "instructions", top=True)
        self.grid.setRowStretch(self.grid.rowCount() - 2, 1)  # it takes what the window adds
        self._row("Model", self._model_row(), "model")
        self.tools = _text_box(3, fixed=True)
        self.tools.setPlaceholderText("read-only\nfs_write_file")
        self._row("Tools", self.tools, "tools", top=True)
        self.tools_hint = self._hint(TOOLS_HINT)
        self.allow = _text_box(3, fixed=True)
        self.allow.setPlaceholderText("fs_write_file,folder=/home/me/notes")
        self.allow.setToolTip(ALLOW_TIP)
        self._row("Runs without asking", self.allow, "allow", top=True)
        self._hint(ALLOW_HINT)
        self._row("Limits", self._limits_row(), "limits")
        self.general_error = role_label("", "error", wrap=True)
        self.general_error.setTextFormat(Qt.TextFormat.PlainText)
        self.general_error.hide()
        root.addWidget(self.general_error)

        buttons = QHBoxLayout()
        buttons.setSpacing(8)
        self.status = muted_label("", wrap=False)
        buttons.addWidget(self.status, 1)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setAutoDefault(False)
        self.cancel_button.clicked.connect(self.reject)
        self.save_button = QPushButton("Save" if self.mode == "edit" else "Add agent")
        self.save_button.setProperty("accent", True)
        self.save_button.setDefault(True)
        self.save_button.clicked.connect(self.save)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.save_button)
        root.addLayout(buttons)
        self.fields = {
            "name": self.name,
            "description": self.description,
            "instructions": self.instructions,
            "model": self.model,
            "tools": self.tools,
            "allow": self.allow,
            "limits": self.steps,
        }
        for row, field in self.fields.items():
            self._clear_on_edit(row, field)

    def _fit_height(self) -> None:
        """At least as tall as the wrapped hints and problems need: a window's layout
        sizes it without word wrap, which overlapped them."""
        layout = self.layout()
        if layout is None:
            return
        layout.activate()
        need = layout.totalHeightForWidth(self.width())
        if need > 0 and need != self.minimumHeight():
            self.setMinimumHeight(need)
            if self.height() < need:
                self.resize(self.width(), need)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._fit_height()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self._fit_height()

    def _row(self, text: str, field: QWidget, error: str, *, top: bool = False) -> None:
        row = self.grid.rowCount()
        label = form_label(text)
        if top:
            label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
            label.setContentsMargins(0, 6, 0, 0)
        label.setBuddy(field)
        field.setAccessibleName(text)
        self.grid.addWidget(label, row, 0, Qt.AlignmentFlag.AlignTop)
        self.grid.addWidget(field, row, 1)
        message = role_label("", "error", wrap=True)
        message.setTextFormat(Qt.TextFormat.PlainText)
        message.hide()
        self.grid.addWidget(message, row + 1, 1)
        self.errors[error] = message

    def _hint(self, text: str) -> QLabel:
        hint = muted_label(text)
        hint.setTextFormat(Qt.TextFormat.PlainText)
        hint.setContentsMargins(0, 0, 0, 6)
        self.grid.addWidget(hint, self.grid.rowCount(), 1)
        return hint

    def _model_row(self) -> QWidget:
        """The provider account (the conversation's first) and an optional model name."""
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(8)
        self.account = QComboBox()
        self.account.setAccessibleName("Provider account")
        self.account.addItem(SAME_AS_CONVERSATION, None)
        for account_id, name in account_names(self.accounts).items():
            self.account.addItem(name, account_id)
        self.account.currentIndexChanged.connect(self._fit_placeholder)
        self.model = QLineEdit()
        self.model.setAccessibleName("Model")
        self.model.setMinimumWidth(140)
        row.addWidget(self.account)
        row.addWidget(self.model, 1)
        self._fit_account()
        return box

    def _fit_account(self) -> None:
        """Wide enough for its longest choice (up to a limit): the theme's padding and
        arrow are not in the combo's own size hint."""
        metrics = self.account.fontMetrics()
        texts = [self.account.itemText(i) for i in range(self.account.count())]
        longest = max(metrics.horizontalAdvance(text) for text in texts)
        self.account.setMinimumWidth(max(200, min(longest + 56, 320)))

    def _fit_placeholder(self, *_: object) -> None:
        """Says what an empty model means for the account chosen."""
        account_id = self.account.currentData()
        account = next((a for a in self.accounts if a.id == account_id), None)
        if account_id is None:
            text = "Empty: the conversation's model"
        elif account is not None and account.model:
            text = f"Empty: the account's model ({one_line(account.model, 40)})"
        else:
            text = "Empty: the account's model"
        self.model.setPlaceholderText(text)

    def _limits_row(self) -> QWidget:
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(8)
        self.steps = self._spin("max_steps", "Most steps", " steps", step=1)
        self.seconds = self._spin("max_seconds", "Most seconds", " s", step=30)
        self.tokens = self._spin("max_tokens", "Most tokens", " tokens", step=10_000)
        self.tokens.setGroupSeparatorShown(True)
        row.addWidget(muted_label("Stop after", wrap=False))
        for spin, joiner in ((self.steps, "or"), (self.seconds, "or"), (self.tokens, "")):
            row.addWidget(spin)
            if joiner:
                row.addWidget(muted_label(joiner, wrap=False))
        row.addStretch(1)
        return box

    @staticmethod
    def _spin(field: str, name: str, suffix: str, *, step: int) -> QSpinBox:
        """A limit's spin box, as wide as its largest value needs."""
        spin = QSpinBox()
        low, high = field_bounds(field)
        spin.setRange(low, high)
        spin.setSingleStep(step)
        spin.setSuffix(suffix)
        spin.setAccessibleName(name)
        spin.setToolTip(f"{name}: from {low:,} to {high:,}{suffix}")
        widest = spin.fontMetrics().horizontalAdvance(f"{high:,}{suffix}")
        spin.setMinimumWidth(widest + 42)  # the theme's padding and arrows
        return spin

    def _clear_on_edit(self, row: str, field: QWidget) -> None:
        """A field's problem goes as soon as the user changes that field."""

        def clear(*_: object) -> None:
            if self.error(row):
                self.show_error(row, "")

        if isinstance(field, QLineEdit):
            field.textEdited.connect(clear)
        elif isinstance(field, QPlainTextEdit):
            field.textChanged.connect(clear)
        if row == "model":
            self.account.currentIndexChanged.connect(clear)
        if row == "limits":
            for spin in (self.steps, self.seconds, self.tokens):
                spin.valueChanged.connect(clear)

    # ---- filling -------------------------------------------------------------------------

    def _load(self, agent: AgentDefinition | None) -> None:
        defaults = AgentDefinition(name="x", description="x")
        source = agent or defaults
        if agent is not None:
            taken = [listed.definition.name for listed in self.runtime.agents.list()]
            name = copy_name(agent.name, taken) if self.mode == "duplicate" else agent.name
            self.name.setText(name)
            self.description.setPlainText(agent.description)
            self.instructions.setPlainText(agent.instructions)
            self._load_account(agent.provider)
            self.model.setText(agent.model or "")
        self.tools.setPlainText("\n".join(source.tools))
        self.allow.setPlainText("\n".join(source.allow))
        self.steps.setValue(source.max_steps)
        self.seconds.setValue(source.max_seconds)
        self.tokens.setValue(source.max_tokens)
        self._fit_placeholder()
        self.clear_errors()

    def _load_account(self, account_id: str | None) -> None:
        """Selects the agent's account; one that no longer exists stays a choice of its
        own (saving then says so, under Model)."""
        if account_id is None:
            return
        index = self.account.findData(account_id)
        if index < 0:
            self.account.addItem(missing_account(account_id), account_id)
            index = self.account.count() - 1
            self._fit_account()
        self.account.setCurrentIndex(index)

    def set_categories(self, categories: Sequence[str]) -> None:
        """Names the tool categories there are under the Tools field, once known."""
        text = TOOLS_HINT
        if categories:
            text += f" Categories: {', '.join(categories)}."
        self.tools_hint.setText(text)
        if self.isVisible():
            self._fit_height()

    def values(self) -> dict[str, Any]:
        """The fields as the book takes them (for an edit: every field, the id kept)."""
        return {
            "name": self.name.text(),
            "description": " ".join(self.description.toPlainText().split()),
            "instructions": self.instructions.toPlainText().strip(),
            "provider": self.account.currentData(),
            "model": self.model.text().strip() or None,
            "tools": text_lines(self.tools.toPlainText(), commas=True),
            "allow": text_lines(self.allow.toPlainText()),
            "max_steps": self.steps.value(),
            "max_seconds": self.seconds.value(),
            "max_tokens": self.tokens.value(),
        }

    # ---- saving -----------------------------------------------------------------------------

    def row_of(self, field: str) -> str:
        """The editor row a definition field's problems are shown under ("" for none)."""
        return next((row for row, fields in FIELD_ROWS.items() if field in fields), "")

    def show_error(self, row: str, text: str) -> None:
        label = self.errors.get(row, self.general_error)
        shown = not label.isHidden()
        label.setText(text)
        label.setVisible(bool(text))
        if shown != bool(text) or text:
            self._fit_height()
        field = self.fields.get(row)
        if field is not None:
            set_invalid(field, bool(text))
            field.setAccessibleDescription(text)

    def error(self, row: str) -> str:
        """What is shown under `row` ("" for the line above the buttons), "" if nothing."""
        label = self.errors.get(row, self.general_error)
        return label.text() if not label.isHidden() else ""

    def clear_errors(self) -> None:
        for row in (*self.errors, ""):
            self.show_error(row, "")

    def show_problems(self, problems: Sequence[tuple[str, str]]) -> None:
        by_row: dict[str, list[str]] = {}
        for field, message in problems:
            by_row.setdefault(self.row_of(field), []).append(problem_text(field, message))
        for row, texts in by_row.items():
            self.show_error(row, "\n".join(visible(t) for t in texts))
        first = next((self.fields[r] for r in FIELD_ROWS if r in by_row), None)
        if first is not None:
            first.setFocus()

    def save(self) -> asyncio.Task[Any] | None:
        """Saves on a worker (the task, which tests await; None while one runs)."""
        if self.saving is not None:
            return None
        self.clear_errors()
        self._set_busy(True)
        self.saving = self._start(self._save(self.values()))
        if self.saving is None:  # no loop: the app is closing
            self._set_busy(False)
        return self.saving

    async def _save(self, values: dict[str, Any]) -> None:
        book = self.runtime.agents
        try:
            if self.original is None:
                agent = await off_gui(book.add, values)
            else:
                agent = await off_gui(partial(book.edit, self.original, **values))
        except AgentError as exc:
            self.show_problems(exc.problems)
            return
        except OSError as exc:
            self.show_error(
                "", f"Nothing was saved: the settings file could not be written. {file_reason(exc)}"
            )
            return
        finally:
            self.saving = None
            if isValid(self):
                self._set_busy(False)
        self.saved.emit(agent.name)
        self.accept()

    def _set_busy(self, busy: bool) -> None:
        self.save_button.setEnabled(not busy)
        self.cancel_button.setEnabled(not busy)
        self.status.setText("Saving…" if busy else "")

    def reject(self) -> None:
        if self.saving is None:  # never leave a save half-way: it closes the editor
            super().reject()


class _TextBox(QPlainTextEdit):
    """A plain-text field `lines` lines tall (and no taller unless the window grows); Tab
    moves on. The height is said in its own style sheet: the theme's min-height would win
    over setMinimumHeight when the field is polished."""

    def __init__(self, lines: int, *, fixed: bool) -> None:
        super().__init__()
        self.setTabChangesFocus(True)
        self._height = self.fontMetrics().lineSpacing() * lines + 12
        limit = f" max-height: {self._height}px;" if fixed else ""
        self.setStyleSheet(f"QPlainTextEdit {{ min-height: {self._height}px;{limit} }}")

    def sizeHint(self) -> QSize:
        return QSize(super().sizeHint().width(), self._height)


def _text_box(lines: int, *, fixed: bool = False) -> QPlainTextEdit:
    return _TextBox(lines, fixed=fixed)


# ---- the page ------------------------------------------------------------------------------


class AgentsPage(SettingsPage):
    title = "Agents"
    subtitle = (
        "Helpers the assistant can hand a task to. Each works in a conversation of its own "
        "with its own instructions, tools and limits, and never with more rights than the "
        "conversation has. Changes are saved at once."
    )
    #: Nothing waits for the dialog's Save: the editor saves each agent itself.
    reports_edits = True

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self.editor: AgentEditor | None = None
        #: Deskhand's tool categories (loaded on a worker; empty until then).
        self.categories: tuple[str, ...] = ()
        self._agents: list[ListedAgent] = []
        self._busy = False
        self._build()
        self.reload()
        self.start_task(self._load_categories())

    # ---- layout --------------------------------------------------------------------------

    def _build(self) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(10)
        root = QHBoxLayout()
        root.setSpacing(18)
        outer.addLayout(root, 1)

        self.left_box = QWidget()
        self.left_box.setFixedWidth(LIST_WIDTH)
        left = QVBoxLayout(self.left_box)
        left.setContentsMargins(0, 0, 0, 0)
        left.setSpacing(8)
        self.list = AgentList()
        self.list.setObjectName("agentList")
        self.list.setAccessibleName("Agents")
        self.list.setItemDelegate(AgentDelegate(self.list))
        self.list.setMouseTracking(True)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setMinimumHeight(3 * AgentDelegate.HEIGHT + 8)
        self.list.currentRowChanged.connect(self._on_selection)
        self.list.itemActivated.connect(lambda *_: self.edit_selected())
        left.addWidget(self.list, 1)
        buttons = QGridLayout()
        buttons.setHorizontalSpacing(6)
        buttons.setVerticalSpacing(6)
        self.add_button = QPushButton("Add…")
        self.add_button.setToolTip("Make a new agent")
        self.add_button.clicked.connect(lambda: self.open_editor("add"))
        self.edit_button = QPushButton("Edit…")
        self.edit_button.clicked.connect(self.edit_selected)
        self.duplicate_button = QPushButton("Duplicate…")
        self.duplicate_button.setToolTip("Make a new agent from a copy of this one")
        self.duplicate_button.clicked.connect(lambda: self.open_editor("duplicate"))
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self.remove_selected)
        for i, button in enumerate(
            (self.add_button, self.edit_button, self.duplicate_button, self.remove_button)
        ):
            button.setAutoDefault(False)
            buttons.addWidget(button, i // 2, i % 2)
        left.addLayout(buttons)
        root.addWidget(self.left_box)

        self.detail = AgentDetail()
        self.detail.setObjectName("agentDetail")
        area = QScrollArea()  # scrolls alone: the list and its buttons stay in view
        area.setObjectName("agentDetailArea")
        area.setWidgetResizable(True)
        area.setFrameShape(QFrame.Shape.NoFrame)
        area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        area.setStyleSheet(
            "QScrollArea#agentDetailArea, QWidget#agentDetail { background: transparent; }"
        )
        area.viewport().setAutoFillBackground(False)
        area.setWidget(self.detail)
        self.detail_area = area
        root.addWidget(area, 1)

        self.delegate_note = muted_label(DELEGATE_OFF)
        outer.addWidget(self.delegate_note)
        self.status = role_label("", "muted", wrap=True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        outer.addWidget(self.status)

        delete = QShortcut(QKeySequence.StandardKey.Delete, self.list)
        delete.setContext(Qt.ShortcutContext.WidgetShortcut)
        delete.activated.connect(self.remove_selected)
        new = QShortcut(QKeySequence.StandardKey.New, self)
        new.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        new.activated.connect(lambda: self.open_editor("add"))

    def resizeEvent(self, event: QResizeEvent) -> None:
        """In a small dialog the list gives up width first, so the detail keeps room."""
        super().resizeEvent(event)
        width = event.size().width()
        self.left_box.setFixedWidth(max(NARROW_LIST_WIDTH, min(LIST_WIDTH, int(width * 0.36))))

    # ---- the list ------------------------------------------------------------------------

    def reload(self, select: str | None = None) -> None:
        """Lists the agents again, keeping the selection (or selecting `select`)."""
        keep = (select or self.selected_name() or "").casefold()
        self._agents = self.runtime.agents.list()
        self.list.blockSignals(True)
        self.list.clear()
        row = 0
        for i, listed in enumerate(self._agents):
            agent = listed.definition
            item = QListWidgetItem(one_line(agent.name, 60))
            item.setData(DETAIL_ROLE, one_line(agent.description, 200))
            item.setData(BUILTIN_ROLE, listed.builtin)
            spoken = f"{agent.name}, built in" if listed.builtin else agent.name
            item.setData(Qt.ItemDataRole.AccessibleTextRole, spoken)
            item.setData(Qt.ItemDataRole.AccessibleDescriptionRole, agent.description)
            item.setToolTip(visible(agent.description))
            self.list.addItem(item)
            if agent.name.casefold() == keep:
                row = i
        self.list.blockSignals(False)
        self.list.setCurrentRow(row)
        self._on_selection()
        self.delegate_note.setVisible("delegate_agent" in self.runtime.settings.tools.disabled)

    def names(self) -> list[str]:
        return [listed.definition.name for listed in self._agents]

    def selected(self) -> ListedAgent | None:
        row = self.list.currentRow()
        return self._agents[row] if 0 <= row < len(self._agents) else None

    def selected_name(self) -> str | None:
        listed = self.selected()
        return listed.definition.name if listed is not None else None

    def select(self, name: str) -> bool:
        for row, listed in enumerate(self._agents):
            if listed.definition.name.casefold() == name.casefold():
                self.list.setCurrentRow(row)
                return True
        return False

    def _on_selection(self, *_: object) -> None:
        listed = self.selected()
        self.detail_area.setVisible(listed is not None)
        if listed is not None:
            self.detail.show_agent(listed, self.runtime.settings.providers)
        self._update_buttons()

    def _update_buttons(self) -> None:
        listed = self.selected()
        own = listed is not None and not listed.builtin and not self._busy
        self.add_button.setEnabled(not self._busy)
        self.edit_button.setEnabled(own)
        self.remove_button.setEnabled(own)
        self.duplicate_button.setEnabled(listed is not None and not self._busy)
        why = BUILTIN_NOTE if listed is not None and listed.builtin else ""
        self.edit_button.setToolTip(why or "Change this agent")
        self.remove_button.setToolTip(why or "Remove this agent")

    # ---- actions -----------------------------------------------------------------------------

    def edit_selected(self) -> AgentEditor | None:
        return self.open_editor("edit") if self.edit_button.isEnabled() else None

    def open_editor(self, mode: Mode) -> AgentEditor | None:
        """The Add, Edit or Duplicate form, window-modal; the list follows when it saves."""
        listed = self.selected()
        if mode != "add" and listed is None:
            return None
        if mode == "edit" and (listed is None or listed.builtin):
            return None
        if self.editor is not None and isValid(self.editor):
            self.editor.close()
        self.editor = AgentEditor(
            self.runtime,
            self.start_task,
            mode=mode,
            agent=listed.definition if mode != "add" and listed is not None else None,
            categories=self.categories,
            parent=self,
        )
        self.editor.saved.connect(self._on_saved)
        self.editor.finished.connect(partial(self._on_editor_closed, self.editor))
        self.editor.open()
        self.editor.name.setFocus()
        if mode == "duplicate":
            self.editor.name.selectAll()
        return self.editor

    def _on_saved(self, name: str) -> None:
        self.reload(select=name)
        self._say(f"Saved the agent “{one_line(name, 60)}”.", "ok")
        self.list.setFocus()

    def _on_editor_closed(self, editor: AgentEditor, *_: object) -> None:
        if self.editor is editor:
            self.editor = None
        if isValid(editor):
            editor.deleteLater()

    def remove_selected(self) -> asyncio.Task[Any] | None:
        """Asks, then removes the selected agent of the user's on a worker."""
        listed = self.selected()
        if listed is None or listed.builtin or self._busy:
            return None
        name = listed.definition.name
        if not confirm_remove(self, name):
            return None
        return self.start_task(self._remove(name))

    async def _remove(self, name: str) -> None:
        self._set_busy(True)
        try:
            await off_gui(self.runtime.agents.remove, name)
        except AgentError as exc:
            self._say(" ".join(problem_text(f, m) for f, m in exc.problems), "error")
            return
        except OSError as exc:
            self._say(
                f"Not removed: the settings file could not be written. {file_reason(exc)}", "error"
            )
            return
        finally:
            self._set_busy(False)
        self.reload()
        self._say(f"Removed the agent “{one_line(name, 60)}”.", "ok")

    def _set_busy(self, busy: bool) -> None:
        self._busy = busy
        self._update_buttons()

    def _say(self, text: str, role: str) -> None:
        self.status.setText(text)
        set_role(self.status, role)

    async def _load_categories(self) -> None:
        try:
            self.categories = await off_gui(lambda: usable_categories(self.runtime.registry))
        except Exception:  # the editor then names none; saving says what is wrong
            return
        if self.editor is not None and isValid(self.editor):
            self.editor.set_categories(self.categories)

    # ---- the dialog's Save ----------------------------------------------------------------

    def has_changes(self) -> bool:
        return False

    def patch(self) -> Patch:
        def apply(settings: Settings) -> None:
            pass

        return apply
