"""The Tasks window: the scheduled tasks with their next run and last result, the selected
task's prompt, permission profile, limits and history, and a form to make or change one.

Reads and writes go straight to the TaskBook on the GUI thread (a small JSON file). After a
change it emits `changed`, so the scheduler re-plans; `runNowRequested` hands a task to the
runner. Titles, prompts and summaries (which come from the model) are always plain text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, available_timezones

from PySide6.QtCore import Qt, QTime, Signal
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence, QResizeEvent, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QCompleter,
    QDateTimeEdit,
    QDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QSplitter,
    QStackedLayout,
    QTimeEdit,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.rules import Rule, RuleDecision
from app.core.settings import ProviderAccount
from app.core.tasks import (
    Budget,
    ProfileEntry,
    RunRecord,
    Schedule,
    Task,
    TaskBook,
    TaskError,
    describe_profile,
    parse_allow,
)
from app.core.visible import one_line, visible
from app.ui.qt_values import to_qdatetime, top_level_items, wall_clock
from app.ui.reminders_view import when_text
from app.ui.removal import confirm_removal
from app.ui.settings.widgets import (
    form_label,
    muted_label,
    plural,
    role_label,
    set_invalid,
    window_heading,
)
from tools.clock import system_zone

Clock = Callable[[], datetime]
ID_ROLE = Qt.ItemDataRole.UserRole
TOOLTIP_ROLE = Qt.ItemDataRole.ToolTipRole
COLUMNS = ("Task", "Schedule", "Next run", "Last result")
EMPTY_TEXT = (
    "No scheduled tasks yet.\n\n"
    "A task is a prompt Deskhand runs by itself — once at a time you choose, or again and "
    "again on a schedule — with the tools you let it use. Its results appear here.\n\n"
    "Ask in the chat — “every weekday at 8:00 summarise my calendar” — use New task…, "
    "or run `deskhand tasks add` in a terminal."
)
NO_SELECTION = "Select a task to see its prompt, permissions and past runs."
OTHER_CALLS = "Any other call waits for your answer; your deny rules still win."
RULES_WHERE = "You can remove these rules in Settings → Rules."
PROFILE_FIXED = (
    "The permission profile is fixed when a task is created; remove its rules in Settings → Rules."
)
ALLOW_HELP = (
    "One per line: a tool or pattern, optionally @source and one condition — "
    "docker_*, *@mcp:github, fs_write_file,folder=~/notes"
)
ALLOW_TIP = (
    "TOOL[@SOURCE][,KIND=VALUE]\nKIND is folder, path, site, account or command, e.g.\n"
    "fs_read_file\nfs_write_file,folder=~/notes\nbrowser_navigate,site=https://example.org\n"
    "shell_run,command=ls -la\nshell_run,command=git status,folder=~/proj\n*@mcp:github\n"
    "A command may end in ,folder=PATH (needed for git, make, npm test…), ,exact or ,network"
)
MODEL_PLACEHOLDER = "the account's model"
MAX_MINUTES, MAX_STEPS = 6 * 60, 200  # Budget's limits
ACCOUNT_WIDTH = 340  # px: the widest the account choice grows
WIDE_DETAIL = 760  # px: from here the history stands beside the prompt
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
REPEATS = {
    "once": "Once",
    "daily": "Every day",
    "weekdays": "Every weekday (Mon–Fri)",
    "weekly": "Every week",
    "cron": "Custom (cron)…",
}
_STYLE = """
QTreeWidget#taskList::item { padding: 5px 4px; border-radius: 0; }
QFrame#taskDetail, QLabel#tasksEmpty {
    background: palette(base); border: 1px solid palette(mid); border-radius: 8px;
}
QLabel#tasksEmpty { padding: 24px; }
QScrollArea#taskDetailScroll, QWidget#taskDetailBody { background: transparent; border: none; }
QSplitter::handle { background: transparent; }
"""


#: The theme draws no arrows for a time field, and NoButtons leaves it no room for its
#: text (Qt's style sheet style): typed, or changed with the arrow keys and the wheel.
TIME_STYLE = (
    "QTimeEdit { padding-right: 8px; } "
    "QTimeEdit::up-button, QTimeEdit::down-button { width: 0px; border: none; } "
    "QTimeEdit::up-arrow, QTimeEdit::down-arrow { image: none; width: 0px; height: 0px; }"
)


# ---- how a task reads (pure functions) ------------------------------------------------------


def cron_text(cron: str) -> str:
    """A simple cron rule in words ("Weekdays at 08:00"); anything else as the rule itself."""
    fields = cron.split()
    if len(fields) != 5 or not fields[0].isdigit():
        return f"cron {cron}"
    minute, hour, day, month, weekday = fields
    if hour == "*" and (day, month, weekday) == ("*", "*", "*"):
        return f"Every hour at :{int(minute):02d}"
    if not hour.isdigit() or month != "*":
        return f"cron {cron}"
    at = f"{int(hour):02d}:{int(minute):02d}"
    if day.isdigit() and weekday == "*":
        return f"Monthly on day {int(day)} at {at}"
    if day != "*":
        return f"cron {cron}"
    if weekday == "*":
        return f"Every day at {at}"
    if weekday == "1-5":
        return f"Weekdays at {at}"
    if weekday.isdigit() and int(weekday) <= 7:
        return f"{_WEEKDAYS[(int(weekday) - 1) % 7]}s at {at}"
    return f"cron {cron}"


def schedule_text(schedule: Schedule, now: datetime, tz: ZoneInfo) -> str:
    """The schedule in the user's words: a one-shot in the user's zone; a repeating rule in
    its own zone, named when it is not the user's."""
    if schedule.cron is not None:
        text = cron_text(schedule.cron)
        return text if schedule.zone == tz.key else f"{text} ({schedule.zone})"
    assert schedule.at is not None
    return f"Once, {when_text(schedule.at, now, tz)}"


def next_text(task: Task, book: TaskBook, now: datetime, tz: ZoneInfo) -> str:
    if task.is_running(now):
        return "Running now"
    if task.paused:
        return "Paused"
    upcoming = book.next_run(task, now)
    if upcoming is None:
        return "No further runs"
    return "Due now" if upcoming <= now else when_text(upcoming, now, tz)


def outcome_text(record: RunRecord, now: datetime, tz: ZoneInfo) -> str:
    """E.g. "✓ Today 08:00", "✗ Yesterday 08:00 · late"."""
    mark = "✓" if record.ok else "✗"
    late = " · late" if record.late else ""
    return f"{mark} {when_text(record.started, now, tz)}{late}"


def summary_line(record: RunRecord) -> str:
    first = next((line for line in record.summary.splitlines() if line.strip()), "")
    return one_line(first.strip(), 160)


def last_text(task: Task, now: datetime, tz: ZoneInfo) -> str:
    last = task.last_run
    if last is None:
        return "Not run yet"
    first = summary_line(last)
    head = outcome_text(last, now, tz)
    return f"{head} — {first}" if first else head


def inline(when: str) -> str:
    """ "Tomorrow 08:00" inside a sentence: "tomorrow 08:00"."""
    first, _, rest = when.partition(" ")
    if first in ("Today", "Tomorrow", "Yesterday"):
        return f"{first.lower()} {rest}"
    return when


def duration_text(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    return f"{minutes} min {rest} s" if rest and minutes < 10 else f"{minutes} min"


def history_head(record: RunRecord, now: datetime, tz: ZoneInfo) -> str:
    """One run in words: when, how it went, late and missed runs, how long it took."""
    mark = "✓" if record.ok else "✗"
    parts = [f"{mark} {when_text(record.started, now, tz)}", "done" if record.ok else "failed"]
    if record.planned is None:
        parts.append("started by hand")
    elif record.late:
        parts.append(f"late (planned for {when_text(record.planned, now, tz)})")
    if record.missed:
        parts.append(f"{plural(record.missed, 'missed run')} folded in")
    parts.append(f"took {duration_text((record.finished - record.started).total_seconds())}")
    return " · ".join(parts)


def rule_text(rule: Rule) -> str:
    """A task's allow rule in the words the New task form previewed it with."""
    if rule.decision is not RuleDecision.ALLOW:
        return rule.describe()
    return ProfileEntry.from_rule(rule).describe()


def budget_text(budget: Budget) -> str:
    minutes = budget.max_seconds / 60
    amount = f"{minutes:g} minutes" if minutes != 1 else "1 minute"
    return f"Each run stops after {amount} or {plural(budget.max_steps, 'step')}."


def account_names(accounts: Sequence[ProviderAccount]) -> dict[str, str]:
    """Each account's id to the one line it is shown as: its label, with its id added
    when two accounts share a label."""
    labels = [one_line(a.label.strip() or a.id, 60) for a in accounts]
    return {
        a.id: label if labels.count(label) == 1 else f"{label} ({one_line(a.id, 20)})"
        for a, label in zip(accounts, labels, strict=True)
    }


def active_text(accounts: Sequence[ProviderAccount], active: str | None) -> str:
    """The form's first choice: "Active provider (Work OpenAI)"."""
    name = account_names(accounts).get(active or "")
    return f"Active provider ({name})" if name else "Active provider (none set)"


def missing_text(account_id: str) -> str:
    return f"Missing account ({one_line(account_id, 40)}) — choose another"


def model_text(task: Task, accounts: Sequence[ProviderAccount]) -> str:
    """ "Model: Work OpenAI · gpt-4o", "Model: the active provider"."""
    if task.provider is None:
        account = "the active provider"
    else:
        missing = f"missing account ({one_line(task.provider, 40)})"
        account = account_names(accounts).get(task.provider, missing)
    model = f" · {one_line(task.model, 80)}" if task.model else ""
    return f"Model: {account}{model}"


def plain(label: QLabel, text: str) -> QLabel:
    """Shows `text` as it is: never rich text, control characters made visible."""
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setText(visible(text))
    return label


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


# ---- the detail pane --------------------------------------------------------------------------


class TaskDetail(QFrame):
    """The selected task: what it does, what it may do, its limits and its runs."""

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("taskDetail")
        #: The saved provider accounts, to name a task's account by its label.
        self.accounts: Sequence[ProviderAccount] = ()
        outer = QVBoxLayout(self)
        outer.setContentsMargins(1, 1, 1, 1)
        self.scroll_area = QScrollArea()
        self.scroll_area.setObjectName("taskDetailScroll")
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll_area.viewport().setAutoFillBackground(False)
        outer.addWidget(self.scroll_area)
        self.body = QWidget()
        self.body.setObjectName("taskDetailBody")
        self.scroll_area.setWidget(self.body)
        grid = QGridLayout(self.body)
        grid.setContentsMargins(16, 12, 16, 14)
        grid.setHorizontalSpacing(24)
        grid.setVerticalSpacing(4)
        self.title = self._label("section")
        self.subtitle = self._label("muted")
        grid.addWidget(self.title, 0, 0, 1, 2)
        grid.addWidget(self.subtitle, 1, 0, 1, 2)
        left, right = QVBoxLayout(), QVBoxLayout()
        for column in (left, right):
            column.setSpacing(4)
        self.prompt = self._label("")
        self.profile = self._label("")
        self.profile_note = self._label("muted")
        self.budget = self._label("")
        left.addWidget(self._heading("Prompt"))
        left.addWidget(self.prompt)
        left.addWidget(self._heading("Runs without asking"))
        left.addWidget(self.profile)
        left.addWidget(self.profile_note)
        left.addWidget(self._heading("Limits"))
        left.addWidget(self.budget)
        left.addStretch(1)
        right.addWidget(self._heading("History"))
        self.history = QVBoxLayout()
        self.history.setSpacing(8)
        right.addLayout(self.history)
        right.addStretch(1)
        self.grid = grid
        grid.addLayout(left, 2, 0)
        grid.addLayout(right, 2, 1)
        grid.setColumnStretch(0, 1)
        grid.setColumnStretch(1, 1)
        self._columns = (left, right)
        self._wide = True
        self._history_rows: list[tuple[QLabel, QLabel]] = []
        self.show_nothing()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._arrange(event.size().width() >= WIDE_DETAIL)

    def _arrange(self, wide: bool) -> None:
        """History beside the prompt when there is room, below it when there is not."""
        if wide == self._wide:
            return
        self._wide = wide
        right = self._columns[1]
        self.grid.removeItem(right)
        self.grid.addLayout(right, *((2, 1) if wide else (3, 0)))
        self.grid.setColumnStretch(1, 1 if wide else 0)

    def _label(self, role: str) -> QLabel:
        label = role_label("", role, wrap=True)
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        return label

    def _heading(self, text: str) -> QLabel:
        label = role_label(text, "section")
        label.setContentsMargins(0, 10, 0, 2)
        return label

    def show_nothing(self) -> None:
        plain(self.title, "")
        plain(self.subtitle, NO_SELECTION)
        for column in self._columns:
            self._set_column_visible(column, False)

    def _set_column_visible(self, column: QVBoxLayout, shown: bool) -> None:
        for i in range(column.count()):
            item = column.itemAt(i)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.setVisible(shown)
        for label, summary in self._history_rows:
            label.setVisible(shown)
            summary.setVisible(shown and bool(summary.text()))

    def show_task(
        self, task: Task, rules: list[Rule] | None, line: str, now: datetime, tz: ZoneInfo
    ) -> None:
        """`rules` None: the book keeps no rules, so the profile as written is shown."""
        for column in self._columns:
            self._set_column_visible(column, True)
        plain(self.title, one_line(task.title))
        plain(self.subtitle, line)
        plain(self.prompt, task.prompt)
        if rules is None:
            lines = describe_profile(task.profile)
        else:
            lines = [rule_text(r) for r in rules] or [describe_profile([])[0]]
            lines.append(OTHER_CALLS.rstrip("."))
        plain(self.profile, "\n".join(f"• {line}" for line in lines))
        note = RULES_WHERE if rules else ""
        if rules is not None and len(rules) < len(task.profile):
            gone = len(task.profile) - len(rules)
            note = f"{plural(gone, 'rule')} of this task were removed in Settings → Rules. {note}"
        plain(self.profile_note, note.strip())
        self.profile_note.setVisible(bool(note))
        plain(self.budget, f"{budget_text(task.budget)}\n{model_text(task, self.accounts)}")
        self._fill_history(task, now, tz)

    def _fill_history(self, task: Task, now: datetime, tz: ZoneInfo) -> None:
        for pair in self._history_rows:
            for label in pair:
                label.hide()
                self.history.removeWidget(label)
                label.deleteLater()
        self._history_rows = []
        entries: list[tuple[str, str, str]] = []
        if task.running is not None and task.is_running(now):
            since = when_text(task.running.started, now, tz)
            entries.append(("muted", f"Running since {since}", ""))
        for record in reversed(task.history):
            role = "ok" if record.ok else "error"
            entries.append((role, history_head(record, now, tz), record.summary))
        if not entries:
            entries.append(("muted", "No runs yet.", ""))
        for role, head, summary in entries:
            top = self._label(role)
            plain(top, head)
            text = self._label("")
            plain(text, summary)
            text.setVisible(bool(summary))
            self.history.addWidget(top)
            self.history.addWidget(text)
            self._history_rows.append((top, text))

    def history_texts(self) -> list[tuple[str, str]]:
        """(head, summary) of each shown run, most recent first (for tests)."""
        return [(head.text(), summary.text()) for head, summary in self._history_rows]


# ---- the New / Edit form ---------------------------------------------------------------------


class TaskEditor(QDialog):
    """Title, prompt, schedule, zone, provider account and model, and limits; for a new task
    also its permission profile. `accounts` are the saved provider accounts, `active` the
    active one's id (only named in the first choice, which stores None).

    Saving writes to the book; a TaskError is shown next to the field it names and the
    dialog stays open with everything typed."""

    saved = Signal(str)

    def __init__(
        self,
        book: TaskBook,
        clock: Clock,
        task: Task | None,
        parent: QWidget | None = None,
        *,
        accounts: Sequence[ProviderAccount] = (),
        active: str | None = None,
    ) -> None:
        super().__init__(parent)
        self.book, self.clock, self.task = book, clock, task
        self.accounts, self.active = tuple(accounts), active
        self.setObjectName("taskEditor")
        self.setWindowTitle(("Edit task" if task else "New task") + " — Deskhand")
        self.setMinimumWidth(600)  # the Model row: an account and a model side by side
        self.errors: dict[str, QLabel] = {}
        self._build()
        self._load(task)

    # ---- building ----------------------------------------------------------------------

    def _build(self) -> None:
        root = QVBoxLayout(self)
        root.setContentsMargins(20, 16, 20, 16)
        root.setSpacing(10)
        root.addWidget(role_label("Edit task" if self.task else "New task", "heading"))
        self.grid = QGridLayout()
        self.grid.setHorizontalSpacing(10)
        self.grid.setVerticalSpacing(4)
        self.grid.setColumnStretch(1, 1)
        root.addLayout(self.grid)
        self.title = QLineEdit()
        self.title.setPlaceholderText("A short name, e.g. Morning calendar summary")
        self._row("Title", self.title, "title")
        self.prompt = _text_box(4)
        self.prompt.setPlaceholderText("What should the assistant do each time it runs?")
        self._row("Prompt", self.prompt, "prompt", top=True)
        self._row("When", self._when_row(), "at")
        self.reading = muted_label("")
        self.grid.addWidget(self.reading, self.grid.rowCount(), 1)
        self.errors["cron"] = self.errors["at"]
        self.zone = QComboBox()
        self.zone.setEditable(True)
        self.zone.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.zone.addItems(sorted(available_timezones()))
        completer = QCompleter(self.zone.model(), self.zone)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        completer.setFilterMode(Qt.MatchFlag.MatchContains)
        self.zone.setCompleter(completer)
        self.zone.currentTextChanged.connect(self._update_reading)
        self._row("Time zone", self._natural(self.zone, 260), "zone")
        self._row("Model", self._model_row(), "model")
        self.errors["provider"] = self.errors["model"]
        self._row("Limits", self._limits_row(), "budget")
        if self.task is None:
            self.allow = _text_box(3, fixed=True)
            self.allow.setPlaceholderText("fs_read_file\nfs_write_file,folder=~/notes")
            self.allow.setToolTip(ALLOW_TIP)
            self.allow.textChanged.connect(self._update_preview)
            self._row("Runs without asking", self.allow, "allow", top=True)
            self.allow_help = muted_label(ALLOW_HELP)
            self.preview = muted_label("")
            self.preview.setTextFormat(Qt.TextFormat.PlainText)
            for widget in (self.allow_help, self.preview):
                self.grid.addWidget(widget, self.grid.rowCount(), 1)
        else:
            self.fixed = muted_label(PROFILE_FIXED)
            self.fixed.setContentsMargins(0, 6, 0, 0)
            self._row("Runs without asking", self.fixed, "", top=True)
        self.errors[""] = role_label("", "error", wrap=True)
        root.addWidget(self.errors[""])
        root.addStretch(1)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        cancel = QPushButton("Cancel")
        cancel.setAutoDefault(False)
        cancel.clicked.connect(self.reject)
        self.save_button = QPushButton("Save" if self.task else "Create task")
        self.save_button.setProperty("accent", True)
        self.save_button.setDefault(True)
        self.save_button.clicked.connect(self.save)
        buttons.addWidget(cancel)
        buttons.addWidget(self.save_button)
        root.addLayout(buttons)
        for label in self.errors.values():
            label.hide()

    def _row(self, text: str, field: QWidget, error: str, *, top: bool = False) -> None:
        row = self.grid.rowCount()
        label = form_label(text)
        if top:
            label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
            label.setContentsMargins(0, 6, 0, 0)
        self.grid.addWidget(label, row, 0, Qt.AlignmentFlag.AlignTop)
        self.grid.addWidget(field, row, 1)
        if error:
            message = role_label("", "error", wrap=True)
            message.setTextFormat(Qt.TextFormat.PlainText)
            self.grid.addWidget(message, row + 1, 1)
            self.errors[error] = message
        self.grid.setRowMinimumHeight(row, 0)

    @staticmethod
    def _natural(widget: QWidget, width: int) -> QWidget:
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        widget.setMinimumWidth(width)
        row.addWidget(widget)
        row.addStretch(1)
        return box

    def _when_row(self) -> QWidget:
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(8)
        self.repeat = QComboBox()
        for key, text in REPEATS.items():
            self.repeat.addItem(text, key)
        self.at = QDateTimeEdit()
        self.at.setCalendarPopup(True)
        self.at.setDisplayFormat("ddd d MMM yyyy  HH:mm")
        self.at.setMinimumWidth(200)
        self.weekday = QComboBox()
        self.weekday.addItems([f"on {day}" for day in _WEEKDAYS])
        self.time = QTimeEdit()
        self.time.setDisplayFormat("HH:mm")
        self.time.setStyleSheet(TIME_STYLE)
        self.time.setMinimumWidth(80)
        self.cron = QLineEdit()
        self.cron.setPlaceholderText("e.g. 0 8 * * 1-5 — 8:00 on weekdays")
        self.cron.setToolTip("Five fields: minute hour day-of-month month weekday (0 = Sunday)")
        for widget in (self.repeat, self.at, self.weekday, self.time, self.cron):
            row.addWidget(widget)
        row.addStretch(1)
        self._when_layout = row
        self.repeat.currentIndexChanged.connect(self._on_repeat)
        for signal in (
            self.at.dateTimeChanged,
            self.time.timeChanged,
            self.weekday.currentIndexChanged,
            self.cron.textChanged,
        ):
            signal.connect(self._update_reading)
        return box

    def _model_row(self) -> QWidget:
        """The provider account (None first: the active one) and an optional model name."""
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(8)
        self.account = QComboBox()
        self.account.addItem(active_text(self.accounts, self.active), None)
        names = account_names(self.accounts)
        for account in self.accounts:
            self.account.addItem(names[account.id], account.id)
            tip = f"{account.kind} · {account.model or 'no model set'}"
            self.account.setItemData(self.account.count() - 1, visible(tip), TOOLTIP_ROLE)
        self._fit_account()
        self.model_name = QLineEdit()
        self.model_name.setPlaceholderText(MODEL_PLACEHOLDER)
        self.model_name.setToolTip("Empty: the model set on the chosen account")
        self.model_name.setMinimumWidth(120)
        row.addWidget(self.account)
        row.addWidget(self.model_name, 1)
        return box

    def _fit_account(self) -> None:
        """Wide enough for its longest choice (up to a limit): the theme's padding and
        arrow are not in the combo's own size hint."""
        metrics = self.account.fontMetrics()
        texts = [self.account.itemText(i) for i in range(self.account.count())]
        longest = max(metrics.horizontalAdvance(text) for text in texts)
        self.account.setMinimumWidth(max(200, min(longest + 56, ACCOUNT_WIDTH)))

    def _limits_row(self) -> QWidget:
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(8)
        self.minutes = QSpinBox()
        self.minutes.setRange(1, MAX_MINUTES)
        self.minutes.setSuffix(" min")
        self.steps = QSpinBox()
        self.steps.setRange(1, MAX_STEPS)
        self.steps.setSuffix(" steps")
        for widget in (self.minutes, self.steps):
            widget.setMinimumWidth(110)
        row.addWidget(muted_label("Stop after", wrap=False))
        row.addWidget(self.minutes)
        row.addWidget(muted_label("or", wrap=False))
        row.addWidget(self.steps)
        row.addStretch(1)
        return box

    # ---- filling --------------------------------------------------------------------------

    def _load(self, task: Task | None) -> None:
        now = self.clock()
        zone_name = task.schedule.zone if task else system_zone().key
        self.zone.setCurrentText(zone_name)
        tz = ZoneInfo(zone_name)
        start = (now + timedelta(hours=1)).astimezone(tz).replace(minute=0, second=0)
        self.at.setDateTime(to_qdatetime(start))
        self.time.setTime(QTime(8, 0))
        budget = task.budget if task else Budget()
        self.minutes.setValue(max(1, budget.max_seconds // 60))
        self.steps.setValue(budget.max_steps)
        self._limits = (self.minutes.value(), self.steps.value())  # as loaded
        mode = "once"
        if task is not None:
            self.title.setText(task.title)
            self.prompt.setPlainText(task.prompt)
            self._load_account(task.provider)
            self.model_name.setText(task.model or "")
            if task.schedule.at is not None:
                self.at.setDateTime(to_qdatetime(task.schedule.at.astimezone(tz)))
            else:
                mode = self._load_cron(task.schedule.cron or "")
        self.repeat.setCurrentIndex(list(REPEATS).index(mode))
        self._on_repeat()
        if task is None:
            self._update_preview()

    def _load_account(self, account_id: str | None) -> None:
        """Selects the task's account; one that no longer exists is added as a choice of
        its own, so saving keeps it until the user picks another."""
        if account_id is None:
            return
        index = self.account.findData(account_id)
        if index < 0:
            self.account.addItem(missing_text(account_id), account_id)
            index = self.account.count() - 1
            self._fit_account()
        self.account.setCurrentIndex(index)

    def chosen_provider(self) -> str | None:
        """The chosen account's id; None for the active provider."""
        data = self.account.currentData()
        return str(data) if data else None

    def chosen_model(self) -> str | None:
        """The typed model; None (empty) for the account's own."""
        return self.model_name.text().strip() or None

    def _load_cron(self, cron: str) -> str:
        fields = cron.split()
        self.cron.setText(cron)
        simple = len(fields) == 5 and fields[2:4] == ["*", "*"]
        if not (simple and fields[0].isdigit() and fields[1].isdigit()):
            return "cron"
        self.time.setTime(QTime(int(fields[1]) % 24, int(fields[0]) % 60))
        if fields[4] == "*":
            return "daily"
        if fields[4] == "1-5":
            return "weekdays"
        if fields[4].isdigit() and int(fields[4]) <= 7:
            self.weekday.setCurrentIndex((int(fields[4]) - 1) % 7)
            return "weekly"
        return "cron"

    def mode(self) -> str:
        return str(self.repeat.currentData())

    def _on_repeat(self, *_: object) -> None:
        mode = self.mode()
        self.at.setVisible(mode == "once")
        self.time.setVisible(mode in ("daily", "weekdays", "weekly"))
        self.weekday.setVisible(mode == "weekly")
        self.cron.setVisible(mode == "cron")
        self._when_layout.setStretch(4, 1 if mode == "cron" else 0)
        self._when_layout.setStretch(5, 0 if mode == "cron" else 1)
        self._update_reading()

    def cron_rule(self) -> str:
        """The cron rule the When row stands for (the typed one for Custom)."""
        mode = self.mode()
        if mode == "cron":
            return self.cron.text().strip()
        at = self.time.time()
        base = f"{at.minute()} {at.hour()} * *"
        if mode == "weekly":
            return f"{base} {(self.weekday.currentIndex() + 1) % 7}"
        return f"{base} {'1-5' if mode == 'weekdays' else '*'}"

    def schedule(self) -> Schedule:
        zone_name = self.zone.currentText().strip()
        if self.mode() == "once":
            value = self.at.dateTime()
            local = wall_clock(value)
            return Schedule.once(local.replace(second=0, microsecond=0), zone_name)
        return Schedule.recurring(self.cron_rule(), zone_name)

    def _update_reading(self, *_: object) -> None:
        """Under a repeating schedule, what it means and when it first runs."""
        text = ""
        try:
            schedule = self.schedule()
        except TaskError:
            schedule = None
        if schedule is not None and schedule.cron is not None:
            text = cron_text(schedule.cron)
            if text.startswith("cron "):
                text = "Custom rule"
            now = self.clock()
            upcoming = schedule.first_after(now)
            if upcoming is not None:
                first = when_text(upcoming, now, ZoneInfo(schedule.zone))
                text += f"; first run {inline(first)}"
            text += f" ({schedule.zone})"
        self.reading.setText(text)
        self.reading.setVisible(bool(text))

    def profile(self) -> tuple[list[ProfileEntry], list[str]]:
        """The typed profile lines: what parsed, and one error per line that did not."""
        entries: list[ProfileEntry] = []
        errors: list[str] = []
        if self.task is not None:
            return entries, errors
        for number, line in enumerate(self.allow.toPlainText().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entries.append(parse_allow(line))
            except TaskError as exc:
                errors.append(f"Line {number}: {visible(str(exc), keep_newlines=False)}")
        return entries, errors

    def _update_preview(self) -> None:
        entries, errors = self.profile()
        self.preview.setText(visible("\n".join(f"• {line}" for line in describe_profile(entries))))
        self.show_error("allow", "\n".join(errors))

    # ---- saving ------------------------------------------------------------------------------

    def show_error(self, field: str, text: str) -> None:
        key = field if field in self.errors else ""
        if field in ("schedule",):
            key = "at"
        label = self.errors[key]
        label.setText(_capital(text))
        label.setVisible(bool(text))
        targets: dict[str, QWidget] = {"title": self.title, "cron": self.cron, "zone": self.zone}
        if field in targets:
            set_invalid(targets[field], bool(text))

    def clear_errors(self) -> None:
        for field in ("title", "prompt", "at", "cron", "zone", "model", "budget", ""):
            self.show_error(field, "")

    def save(self) -> Task | None:
        """Writes the task; on a bad field shows why next to it and keeps the dialog open."""
        self.clear_errors()
        found: dict[str, str] = {}
        if not self.title.text().strip():
            found["title"] = "A task needs a title."
        if not self.prompt.toPlainText().strip():
            found["prompt"] = "A task needs a prompt: what the assistant should do."
        schedule: Schedule | None = None
        try:
            schedule = self.schedule()
        except TaskError as exc:
            found[exc.field or "at"] = str(exc)
        entries, bad_lines = self.profile()
        if bad_lines:
            found["allow"] = "\n".join(bad_lines)
        if found or schedule is None:
            for field, text in found.items():
                self.show_error(field, text)
            return None
        budget = Budget(max_seconds=self.minutes.value() * 60, max_steps=self.steps.value())
        try:
            task = self._write(schedule, budget, entries)
        except TaskError as exc:
            self.show_error(exc.field, str(exc))
            return None
        self.saved.emit(task.id)
        self.accept()
        return task

    def _write(self, schedule: Schedule, budget: Budget, entries: list[ProfileEntry]) -> Task:
        title, prompt, now = self.title.text(), self.prompt.toPlainText(), self.clock()
        provider, model = self.chosen_provider(), self.chosen_model()
        if self.task is None:
            return self.book.add(
                title,
                prompt,
                schedule,
                now=now,
                profile=entries,
                provider=provider,
                model=model,
                budget=budget,
            )
        current = self.book.get(self.task.id)
        changes: dict[str, object] = {}
        if provider != current.provider:
            changes["provider"] = provider
        if model != current.model:
            changes["model"] = model
        if title.strip() != current.title:
            changes["title"] = title
        if prompt.strip() != current.prompt:
            changes["prompt"] = prompt.strip()
        if not _same_schedule(schedule, current.schedule):  # else it is not re-planned
            changes["schedule"] = schedule
        untouched = (self.minutes.value(), self.steps.value()) == self._limits
        if budget != current.budget and not untouched:  # 90 s shows as 1 min: keep it
            changes["budget"] = budget
        if not changes:
            return current
        return self.book.update(current.id, now=now, **changes)


def _same_schedule(a: Schedule, b: Schedule) -> bool:
    """Equal to the minute the form shows (a one-shot's seconds are not in the form)."""
    if a.at is None or b.at is None:
        return a == b
    return a.zone == b.zone and a.at.replace(second=0, microsecond=0) == b.at.replace(
        second=0, microsecond=0
    )


def _text_box(lines: int, *, fixed: bool = False) -> QPlainTextEdit:
    """A plain-text field `lines` lines tall. Said in its own style sheet: the theme's
    min-height would win over setMinimumHeight when the field is polished."""
    box = QPlainTextEdit()
    box.setTabChangesFocus(True)
    height = box.fontMetrics().lineSpacing() * lines + 8
    limit = f" max-height: {height}px;" if fixed else ""
    box.setStyleSheet(f"QPlainTextEdit {{ min-height: {height}px;{limit} }}")
    return box


# ---- the window --------------------------------------------------------------------------------


class TasksView(QDialog):
    """The task list, the selected task's detail, and Run now / Pause / Edit / Remove."""

    #: The user asked to run this task now: the app hands it to the task runner.
    runNowRequested = Signal(str)
    #: Open the conversation that keeps this task's runs.
    openConversationRequested = Signal(str)
    #: The user changed tasks here: the scheduler should plan again.
    changed = Signal()

    def __init__(
        self,
        book: TaskBook,
        parent: QWidget | None = None,
        *,
        clock: Clock | None = None,
        accounts: Sequence[ProviderAccount] = (),
        active: str | None = None,
    ) -> None:
        super().__init__(parent)
        self.book = book
        self.clock: Clock = clock or (lambda: datetime.now(UTC))
        self.accounts, self.active = tuple(accounts), active
        self.editor: TaskEditor | None = None
        self.setObjectName("tasksView")
        self.setWindowTitle("Tasks — Deskhand")
        self.setStyleSheet(_STYLE)
        self.resize(860, 600)
        self.setMinimumSize(640, 420)
        self._tasks: dict[str, Task] = {}
        self._build()
        self.refresh()

    def _build(self) -> None:
        root = QVBoxLayout(self)
        root.setContentsMargins(20, 16, 20, 16)
        root.setSpacing(12)
        self.new_button = QPushButton("New task…")
        self.new_button.setAutoDefault(False)
        self.new_button.clicked.connect(lambda: self.open_editor(None))
        head, self.zone_label = window_heading("Tasks", self.new_button)
        root.addLayout(head)

        self.tree = QTreeWidget()
        self.tree.setObjectName("taskList")
        self.tree.setHeaderLabels(list(COLUMNS))
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.setTextElideMode(Qt.TextElideMode.ElideRight)
        header = self.tree.header()
        header.setStretchLastSection(True)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        header.setMinimumSectionSize(90)
        self.tree.itemSelectionChanged.connect(self._on_selection)
        self.tree.itemActivated.connect(lambda *_: self.edit_selected())
        self.detail = TaskDetail()
        self.detail.accounts = self.accounts
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(self.tree)
        self.splitter.addWidget(self.detail)
        self.splitter.setStretchFactor(0, 2)
        self.splitter.setStretchFactor(1, 3)
        self.splitter.setHandleWidth(10)
        self._split_moved = False
        self.splitter.splitterMoved.connect(self._on_split_moved)
        self.empty = muted_label(EMPTY_TEXT)
        self.empty.setObjectName("tasksEmpty")
        self.empty.setTextFormat(Qt.TextFormat.PlainText)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        body = QWidget()
        self.stack = QStackedLayout(body)
        self.stack.addWidget(self.splitter)
        self.stack.addWidget(self.empty)
        root.addWidget(body, 1)
        root.addLayout(self._actions())

        new_shortcut = QAction(self)
        new_shortcut.setShortcut(QKeySequence.StandardKey.New)
        new_shortcut.triggered.connect(lambda: self.open_editor(None))
        self.addAction(new_shortcut)
        delete = QShortcut(QKeySequence.StandardKey.Delete, self.tree)
        delete.setContext(Qt.ShortcutContext.WidgetShortcut)
        delete.activated.connect(self.remove_selected)

    def _actions(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.setSpacing(8)
        self.run_button = QPushButton("Run now")
        self.run_button.clicked.connect(self.run_selected)
        self.pause_button = QPushButton("Pause")
        self.pause_button.clicked.connect(self.toggle_pause)
        self.edit_button = QPushButton("Edit…")
        self.edit_button.clicked.connect(self.edit_selected)
        self.open_button = QPushButton("Open conversation")
        self.open_button.clicked.connect(self.open_selected)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self.remove_selected)
        self.status = muted_label("", wrap=False)
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        buttons = (self.run_button, self.pause_button, self.edit_button, self.open_button)
        for button in (*buttons, self.remove_button, close):
            button.setAutoDefault(False)
        for button in buttons:
            row.addWidget(button)
        row.addWidget(self.remove_button)
        row.addWidget(self.status, 1)
        row.addWidget(close)
        return row

    # ---- reading ---------------------------------------------------------------------------

    def set_accounts(self, accounts: Sequence[ProviderAccount], active: str | None) -> None:
        """The provider accounts changed in Settings: the next form offers these, and the
        detail names them."""
        self.accounts, self.active = tuple(accounts), active
        self.detail.accounts = self.accounts
        self._on_selection()

    def refresh(self) -> None:
        """Re-reads the book; keeps the selection (the first task when there was none)."""
        keep = self.selected_id()
        now, tz = self.clock(), system_zone()
        self.zone_label.setText(f"Prompts Deskhand runs by itself · times in {tz.key}")
        try:
            tasks = self.book.list()
        except TaskError as exc:
            tasks = []
            self.status.setText(_capital(str(exc)))
        if self.book.load_error:
            self.status.setText(_capital(self.book.load_error))
        self._tasks = {task.id: task for task in tasks}
        self.tree.blockSignals(True)
        self.tree.clear()
        for task in tasks:
            self.tree.addTopLevelItem(self._item(task, now, tz))
        self.tree.blockSignals(False)
        self.stack.setCurrentIndex(0 if tasks else 1)
        self._fit_columns()
        self._fit_split()
        if not (keep and self.select(keep, focus=False)) and tasks:
            self.select(tasks[0].id, focus=False)
        self._on_selection()

    def _item(self, task: Task, now: datetime, tz: ZoneInfo) -> QTreeWidgetItem:
        texts = (
            one_line(task.title, 120),
            schedule_text(task.schedule, now, tz),
            next_text(task, self.book, now, tz),
            last_text(task, now, tz),
        )
        item = QTreeWidgetItem(list(texts))
        item.setData(0, ID_ROLE, task.id)
        tip = f"{one_line(task.title)}\n{task.schedule.describe()}"
        last = task.last_run
        if last is not None and last.summary:
            tip += "\n\n" + visible(last.summary)
        for column in range(len(COLUMNS)):
            item.setToolTip(column, tip)
        return item

    def _fit_columns(self) -> None:
        width = self.tree.viewport().width()
        wanted = self.tree.sizeHintForColumn(0) + 24
        self.tree.setColumnWidth(0, max(140, min(wanted, int(width * 0.34))))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_columns()
        self._fit_split()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Enter on the list opens the form (itemActivated); QDialog would then also press
        the form's default button, the form being a child of this window."""
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            event.accept()
            return
        super().keyPressEvent(event)

    def _on_split_moved(self, *_: object) -> None:
        self._split_moved = True

    def _fit_split(self) -> None:
        """The list as tall as its rows (3 to 8), the rest for the detail, until the user
        drags the divider."""
        if self._split_moved:
            return
        total = sum(self.splitter.sizes()) or self.splitter.height()
        rows = max(3, min(self.tree.topLevelItemCount(), 8))
        row = self.tree.sizeHintForRow(0) if self.tree.topLevelItemCount() else -1
        wanted = self.tree.header().sizeHint().height() + rows * max(row, 28) + 8
        listed = min(wanted, int(total * 0.45))
        self.splitter.setSizes([listed, max(0, total - listed)])

    def ids(self) -> list[str]:
        return [item.data(0, ID_ROLE) for item in top_level_items(self.tree)]

    def texts(self, task_id: str) -> list[str]:
        """The list row of `task_id` as shown (for tests)."""
        for item in top_level_items(self.tree):
            if item.data(0, ID_ROLE) == task_id:
                return [item.text(c) for c in range(len(COLUMNS))]
        return []

    def selected_id(self) -> str | None:
        item = self.tree.currentItem()
        return item.data(0, ID_ROLE) if item is not None and item.isSelected() else None

    def select(self, task_id: str, *, focus: bool = True) -> bool:
        for item in top_level_items(self.tree):
            if item.data(0, ID_ROLE) == task_id:
                self.tree.setCurrentItem(item)
                item.setSelected(True)
                self.tree.scrollToItem(item)
                if focus:
                    self.tree.setFocus()
                return True
        return False

    def _selected(self) -> Task | None:
        task_id = self.selected_id()
        return self._tasks.get(task_id) if task_id else None

    def _on_selection(self) -> None:
        task = self._selected()
        now, tz = self.clock(), system_zone()
        if task is None:
            self.detail.show_nothing()
        else:
            rules = self.book.profile_rules(task.id) if self.book.rules is not None else None
            line = f"{schedule_text(task.schedule, now, tz)} · next run: "
            line += inline(next_text(task, self.book, now, tz)).lower()
            self.detail.show_task(task, rules, line, now, tz)
        self._update_buttons(task, now)

    def _update_buttons(self, task: Task | None, now: datetime) -> None:
        running = task is not None and task.is_running(now)
        self.run_button.setEnabled(task is not None and not running)
        self.run_button.setToolTip("The task is running now" if running else "")
        self.pause_button.setEnabled(task is not None)
        self.pause_button.setText("Resume" if task is not None and task.paused else "Pause")
        self.edit_button.setEnabled(task is not None)
        has_runs = task is not None and (bool(task.history) or running)
        self.open_button.setEnabled(has_runs)
        self.open_button.setToolTip("" if has_runs else "The task has not run yet")
        self.remove_button.setEnabled(task is not None and not running)
        self.remove_button.setToolTip("Wait for the run to finish" if running else "")

    # ---- actions -----------------------------------------------------------------------------

    def run_selected(self) -> None:
        task = self._selected()
        if task is None or task.is_running(self.clock()):
            return
        self.status.setText(f"Starting “{one_line(task.title, 60)}”…")
        self.runNowRequested.emit(task.id)

    def open_selected(self) -> None:
        task_id = self.selected_id()
        if task_id is not None and self.open_button.isEnabled():
            self.openConversationRequested.emit(task_id)

    def toggle_pause(self) -> None:
        task = self._selected()
        if task is None:
            return
        if task.paused:
            self._act(lambda: self.book.resume(task.id, now=self.clock()), "Resumed")
        else:
            self._act(lambda: self.book.pause(task.id), "Paused")

    def remove_selected(self) -> None:
        task = self._selected()
        if task is None or not self.remove_button.isEnabled():
            return
        if confirm_remove(self, task):
            self._act(lambda: self.book.remove(task.id), "Removed")

    def _act(self, change: Callable[[], Task], done: str) -> None:
        try:
            task = change()
        except TaskError as exc:
            self.status.setText(_capital(str(exc)))
            self.refresh()
            return
        self.refresh()
        self.status.setText(f"{done}: {one_line(task.title, 60)}")
        self.changed.emit()

    def edit_selected(self) -> None:
        task = self._selected()
        if task is not None:
            self.open_editor(task.id)

    def open_editor(self, task_id: str | None) -> TaskEditor:
        """The New (None) or Edit form, window-modal; the list follows when it saves."""
        if self.editor is not None:
            self.editor.close()
        task = self._tasks.get(task_id) if task_id else None
        self.editor = TaskEditor(
            self.book, self.clock, task, self, accounts=self.accounts, active=self.active
        )
        self.editor.saved.connect(self._on_saved)
        self.editor.open()
        self.editor.title.setFocus()
        return self.editor

    def _on_saved(self, task_id: str) -> None:
        self.refresh()
        self.select(task_id)
        task = self._tasks.get(task_id)
        if task is not None:
            self.status.setText(f"Saved: {one_line(task.title, 60)}")
        self.changed.emit()


def confirm_remove(parent: QWidget, task: Task) -> bool:
    """Asks before a task goes (its rules go with it). The title is shown as plain text."""
    return confirm_removal(
        parent, "task", task.title, "Its schedule, history and permission rules are deleted."
    )
