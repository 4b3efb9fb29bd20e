"""The Reminders window: Upcoming, Late and Done & past, actions on the selected reminder,
and a small form for a new one.

Reads and writes go straight to the ReminderBook on the GUI thread (single-row SQLite
calls, well under a millisecond). After a change it emits `changed`, so the scheduler
re-plans at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDateTimeEdit,
    QDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QMenu,
    QPushButton,
    QStackedLayout,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.reminders import LATE_AFTER, Reminder, ReminderBook, ReminderError
from app.ui.qt_values import to_qdatetime, top_level_items, wall_clock
from app.ui.settings.widgets import muted_label, role_label, window_heading
from tools.clock import system_zone

Section = Literal["upcoming", "late", "done"]
SECTIONS: tuple[Section, ...] = ("upcoming", "late", "done")
TITLES: dict[Section, str] = {"upcoming": "Upcoming", "late": "Late", "done": "Done && past"}
COLUMNS: dict[Section, tuple[str, ...]] = {
    "upcoming": ("When", "Reminder", "Repeats"),
    "late": ("Was due", "Reminder", "Shown"),
    "done": ("When", "Reminder", "Status"),
}
EMPTY: dict[Section, str] = {
    "upcoming": "Nothing scheduled.\nAsk in the chat — “remind me at 5 to call the bank” — "
    "or use New reminder.",
    "late": "No missed reminders.",
    "done": "Reminders you have finished, cancelled or seen appear here.",
}
REPEATS = {
    "none": "Does not repeat",
    "daily": "Every day",
    "weekdays": "Every weekday (Mon–Fri)",
    "weekly": "Every week",
    "cron": "Custom (cron)…",
}
SNOOZE_CHOICES = ((5, "5 minutes"), (15, "15 minutes"), (60, "1 hour"))
PAST_LIMIT = 200
ID_ROLE = Qt.ItemDataRole.UserRole
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


# ---- what goes where, and how it reads (pure functions) -------------------------------


def fired_late(reminder: Reminder) -> bool:
    return reminder.fired_at is not None and reminder.fired_at - reminder.due_at > LATE_AFTER


def section_of(reminder: Reminder) -> Section:
    if reminder.status == "scheduled":
        return "upcoming"
    if reminder.status == "fired" and fired_late(reminder):
        return "late"
    return "done"


def when_text(moment: datetime, now: datetime, tz: ZoneInfo) -> str:
    """ "Today 17:00", "Tomorrow 09:15", "Fri 17:00", "Fri 3 Apr 17:00", "3 Apr 2027 17:00"."""
    local, today = moment.astimezone(tz), now.astimezone(tz).date()
    clock = local.strftime("%H:%M")
    days = (local.date() - today).days
    named = {0: "Today", 1: "Tomorrow", -1: "Yesterday"}
    if days in named:
        return f"{named[days]} {clock}"
    if 1 < days < 7:
        return f"{_DAYS[local.weekday()]} {clock}"
    if local.year == today.year:
        return f"{_DAYS[local.weekday()]} {local.day} {local.strftime('%b')} {clock}"
    return f"{local.day} {local.strftime('%b %Y')} {clock}"


def repeat_text(reminder: Reminder) -> str:
    if reminder.cron is None:
        return "Snoozed" if reminder.source == "snooze" else "—"
    fields = reminder.cron.split()
    simple = len(fields) == 5 and fields[2:4] == ["*", "*"]
    if simple and fields[0].isdigit() and fields[1].isdigit():
        at = f"{int(fields[1]):02d}:{int(fields[0]):02d}"
        if fields[4] == "*":
            return f"Daily at {at}"
        if fields[4] == "1-5":
            return f"Weekdays at {at}"
        if fields[4].isdigit() and int(fields[4]) <= 7:
            return f"{_DAYS[(int(fields[4]) - 1) % 7]}s at {at}"
    return f"cron {reminder.cron}"


def cron_for(repeat: str, at: datetime) -> str:
    """The cron rule for a repeat choice of the form, at the form's time of day."""
    minute, hour = at.minute, at.hour
    if repeat == "daily":
        return f"{minute} {hour} * * *"
    if repeat == "weekdays":
        return f"{minute} {hour} * * 1-5"
    if repeat == "weekly":
        return f"{minute} {hour} * * {(at.weekday() + 1) % 7}"  # cron: 0 = Sunday
    raise ValueError(repeat)


@dataclass(frozen=True)
class Sorted:
    upcoming: list[Reminder]
    late: list[Reminder]
    done: list[Reminder]


def sort_reminders(book: ReminderBook) -> Sorted:
    upcoming = book.list(("scheduled",))
    past = book.list(("fired", "done", "cancelled"))
    late = [r for r in past if section_of(r) == "late"]
    done = [r for r in past if section_of(r) == "done"]
    done.sort(key=lambda r: r.fired_at or r.due_at, reverse=True)
    return Sorted(upcoming, late, done[:PAST_LIMIT])


# ---- widgets ----------------------------------------------------------------------------


class _SectionList(QWidget):
    """One tab: the list, or a short note when it is empty."""

    def __init__(self, section: Section) -> None:
        super().__init__()
        self.section = section
        self.tree = QTreeWidget()
        self.tree.setObjectName("reminderList")
        self.tree.setHeaderLabels(list(COLUMNS[section]))
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(False)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        header.setMinimumSectionSize(96)
        self.empty = muted_label(EMPTY[section])
        self.empty.setObjectName("reminderEmpty")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.stack = QStackedLayout(self)
        self.stack.addWidget(self.tree)
        self.stack.addWidget(self.empty)

    def fill(self, rows: list[tuple[Reminder, tuple[str, str, str], str]]) -> None:
        self.tree.clear()
        for reminder, texts, tip in rows:
            item = QTreeWidgetItem(list(texts))
            item.setData(0, ID_ROLE, reminder.id)
            for col in range(3):
                item.setToolTip(col, tip)
            self.tree.addTopLevelItem(item)
        self.stack.setCurrentIndex(0 if rows else 1)

    def ids(self) -> list[str]:
        return [item.data(0, ID_ROLE) for item in top_level_items(self.tree)]

    def texts(self, reminder_id: str) -> list[str]:
        for item in top_level_items(self.tree):
            if item.data(0, ID_ROLE) == reminder_id:
                return [item.text(c) for c in range(3)]
        return []

    def selected_id(self) -> str | None:
        item = self.tree.currentItem()
        return item.data(0, ID_ROLE) if item is not None and item.isSelected() else None

    def select(self, reminder_id: str) -> bool:
        for item in top_level_items(self.tree):
            if item.data(0, ID_ROLE) == reminder_id:
                self.tree.setCurrentItem(item)
                item.setSelected(True)
                self.tree.scrollToItem(item)
                return True
        return False


class NewReminderForm(QFrame):
    """Message, date and time, repeat rule; `submitted` carries nothing — the view reads it."""

    submitted = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("newReminderForm")
        grid = QGridLayout(self)
        grid.setContentsMargins(14, 12, 14, 12)
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(8)
        grid.addWidget(role_label("New reminder", "section"), 0, 0, 1, 4)
        self.message = QLineEdit()
        self.message.setPlaceholderText("What should Deskhand remind you of?")
        self.message.returnPressed.connect(self.submitted)
        grid.addWidget(self.message, 1, 0, 1, 4)
        self.when = QDateTimeEdit()
        self.when.setCalendarPopup(True)
        self.when.setDisplayFormat("ddd d MMM yyyy  HH:mm")
        self.when.setMinimumWidth(230)
        self.repeat = QComboBox()
        for key, text in REPEATS.items():
            self.repeat.addItem(text, key)
        self.repeat.currentIndexChanged.connect(self._on_repeat)
        self.cron = QLineEdit()
        self.cron.setPlaceholderText("e.g. 15 9 * * 1-5 — 9:15 on weekdays")
        self.cron.setToolTip("Five fields: minute hour day-of-month month weekday (0 = Sunday)")
        self.cron.returnPressed.connect(self.submitted)
        self.add_button = QPushButton("Add reminder")
        self.add_button.setProperty("accent", True)
        self.add_button.clicked.connect(self.submitted)
        # In cron mode the rule sets the time too: the cron field takes the date's place.
        self._row = QHBoxLayout()
        self._row.setSpacing(10)
        for widget in (self.when, self.cron, self.repeat):
            self._row.addWidget(widget)
        self._row.addStretch(1)
        self._row.addWidget(self.add_button)
        grid.addLayout(self._row, 2, 0, 1, 4)
        self.error = role_label("", "error", wrap=True)
        self.error.hide()
        grid.addWidget(self.error, 3, 0, 1, 4)
        self._on_repeat()

    def reset(self, now: datetime) -> None:
        """Empty message, the next round quarter hour at least 10 minutes away."""
        local = now.astimezone() + timedelta(minutes=10)
        local = local.replace(second=0, microsecond=0) + timedelta(minutes=-local.minute % 15)
        self.when.setDateTime(to_qdatetime(local))
        self.message.clear()
        self.cron.clear()
        self.repeat.setCurrentIndex(0)
        self.show_error("")

    def repeat_choice(self) -> str:
        return str(self.repeat.currentData())

    def local_time(self) -> datetime:
        """The chosen wall-clock time (naive: read in the user's zone)."""
        return wall_clock(self.when.dateTime())

    def show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.setVisible(bool(text))

    def _on_repeat(self, *_: object) -> None:
        custom = self.repeat_choice() == "cron"
        self.cron.setVisible(custom)
        self.when.setVisible(not custom)
        self._row.setStretch(1, 1 if custom else 0)  # the cron field, or the spacer, grows
        self._row.setStretch(3, 0 if custom else 1)
        if custom:
            self.cron.setFocus()


class RemindersView(QDialog):
    """Upcoming / Late / Done & past; Snooze, Done and Cancel on the selected reminder."""

    #: The user changed reminders here: the scheduler should plan again.
    changed = Signal()

    def __init__(self, book: ReminderBook, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.book = book
        self.setObjectName("remindersView")
        self.setWindowTitle("Reminders — Deskhand")
        self.resize(720, 520)
        self.setMinimumSize(560, 380)
        self._build()
        self.refresh()

    def _build(self) -> None:
        root = QVBoxLayout(self)
        root.setContentsMargins(20, 16, 20, 16)
        root.setSpacing(12)

        self.new_button = QPushButton("New reminder…")
        self.new_button.setCheckable(True)
        self.new_button.toggled.connect(self.show_form)
        head, self.zone_label = window_heading("Reminders", self.new_button)
        root.addLayout(head)

        self.form = NewReminderForm()
        self.form.submitted.connect(self.create_from_form)
        self.form.hide()
        root.addWidget(self.form)

        self.tabs = QTabWidget()
        self.tabs.setObjectName("reminderTabs")
        self.tabs.setDocumentMode(True)
        self.sections: dict[Section, _SectionList] = {}
        for section in SECTIONS:
            page = _SectionList(section)
            page.tree.itemSelectionChanged.connect(self._update_buttons)
            self.tabs.addTab(page, TITLES[section])
            self.sections[section] = page
        self.tabs.currentChanged.connect(self._update_buttons)
        root.addWidget(self.tabs, 1)

        actions = QHBoxLayout()
        actions.setSpacing(8)
        self.snooze_button = QPushButton("Snooze")
        self.snooze_button.setProperty("hasMenu", True)
        snooze_menu = QMenu(self.snooze_button)
        self.snooze_actions: dict[int, QAction] = {}
        for minutes, text in SNOOZE_CHOICES:
            action = snooze_menu.addAction(text)
            action.triggered.connect(lambda _=False, m=minutes: self.snooze(m))
            self.snooze_actions[minutes] = action
        self.snooze_button.setMenu(snooze_menu)
        self.done_button = QPushButton("Done")
        self.done_button.clicked.connect(self.mark_done)
        self.cancel_button = QPushButton("Cancel reminder")
        self.cancel_button.clicked.connect(self.cancel_selected)
        self.status = muted_label("", wrap=False)
        close = QPushButton("Close")
        close.setAutoDefault(False)
        close.clicked.connect(self.close)
        for button in (self.snooze_button, self.done_button, self.cancel_button):
            button.setAutoDefault(False)
            actions.addWidget(button)
        actions.addWidget(self.status, 1)
        actions.addWidget(close)
        root.addLayout(actions)

        new_shortcut = QAction(self)
        new_shortcut.setShortcut(QKeySequence.StandardKey.New)
        new_shortcut.triggered.connect(lambda: self.new_button.setChecked(True))
        self.addAction(new_shortcut)

    # ---- reading ------------------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read the book; keeps the selection when the reminder is still in its tab."""
        section = self.current_section()
        keep = self.sections[section].selected_id()
        tz = system_zone()
        now = self.book.clock()
        self.zone_label.setText(f"Times in {tz.key}")
        found = sort_reminders(self.book)
        for name in SECTIONS:
            reminders: list[Reminder] = getattr(found, name)
            self.sections[name].fill([_row(name, r, now, tz) for r in reminders])
            count = len(reminders)
            label = TITLES[name] if name == "done" or not count else f"{TITLES[name]} ({count})"
            self.tabs.setTabText(SECTIONS.index(name), label)
        if keep is not None:
            self.sections[section].select(keep)
        self._update_buttons()

    def current_section(self) -> Section:
        return SECTIONS[max(0, self.tabs.currentIndex())]

    def ids(self, section: Section) -> list[str]:
        return self.sections[section].ids()

    def texts(self, section: Section, reminder_id: str) -> list[str]:
        return self.sections[section].texts(reminder_id)

    def selected_id(self) -> str | None:
        return self.sections[self.current_section()].selected_id()

    def select(self, reminder_id: str) -> Section | None:
        """Shows the tab holding `reminder_id` and selects it; None if it is not listed."""
        for section in SECTIONS:
            if reminder_id in self.ids(section):
                self.tabs.setCurrentIndex(SECTIONS.index(section))
                self.sections[section].select(reminder_id)
                self.sections[section].tree.setFocus()
                return section
        return None

    # ---- actions ------------------------------------------------------------------------

    def snooze(self, minutes: int) -> None:
        self._act(lambda rid: self.book.snooze(rid, minutes), f"Snoozed for {minutes} min")

    def mark_done(self) -> None:
        self._act(self.book.done, "Marked done")

    def cancel_selected(self) -> None:
        self._act(self.book.cancel, "Cancelled")

    def _act(self, change: Callable[[str], Reminder], done_text: str) -> None:
        reminder_id = self.selected_id()
        if reminder_id is None:
            return
        try:
            result = change(reminder_id)
        except ReminderError as exc:
            self.status.setText(str(exc))
            return
        self.refresh()
        self.select(result.id)
        self.status.setText(done_text)
        self.changed.emit()

    def _update_buttons(self, *_: object) -> None:
        reminder_id = self.selected_id()
        reminder = self._get(reminder_id)
        active = reminder is not None and reminder.status in ("scheduled", "fired")
        self.snooze_button.setEnabled(active)
        self.done_button.setEnabled(active and reminder is not None and not reminder.recurring)
        self.cancel_button.setEnabled(active)

    def _get(self, reminder_id: str | None) -> Reminder | None:
        if reminder_id is None:
            return None
        try:
            return self.book.get(reminder_id)
        except ReminderError:
            return None

    # ---- the form ---------------------------------------------------------------------------

    def show_form(self, visible: bool = True) -> None:
        if visible and not self.form.isVisible():
            self.form.reset(self.book.clock())
        self.form.setVisible(visible)
        if self.new_button.isChecked() != visible:
            self.new_button.setChecked(visible)
        if visible:
            self.form.message.setFocus()

    def create_from_form(self) -> Reminder | None:
        form = self.form
        message, repeat = form.message.text(), form.repeat_choice()
        tz = system_zone().key
        try:
            if repeat == "none":
                reminder = self.book.create_once(message, form.local_time(), tz)
            else:
                cron = form.cron.text().strip() if repeat == "cron" else None
                rule = cron if cron is not None else cron_for(repeat, form.local_time())
                reminder = self.book.create_recurring(message, rule, tz)
        except ReminderError as exc:
            text = str(exc)
            form.show_error(text[:1].upper() + text[1:])
            return None
        self.show_form(False)
        self.refresh()
        self.select(reminder.id)
        self.status.setText("Reminder added")
        self.changed.emit()
        return reminder


def _row(
    section: Section, r: Reminder, now: datetime, tz: ZoneInfo
) -> tuple[Reminder, tuple[str, str, str], str]:
    due = when_text(r.due_at, now, tz)
    shown = when_text(r.fired_at, now, tz) if r.fired_at else ""
    texts: tuple[str, str, str]
    if section == "upcoming":
        texts = (due, r.message, repeat_text(r))
    elif section == "late":
        texts = (due, r.message, shown)
    else:
        status = {"done": "Done", "cancelled": "Cancelled"}.get(r.status, "Shown")
        texts = (shown if r.status == "fired" else due, r.message, status)
    tip = f"{r.message}\nDue {r.local_due():%Y-%m-%d %H:%M} ({r.tz})"
    if r.cron:
        tip += f"\nRepeats: {r.cron}"
    return r, texts, tip
