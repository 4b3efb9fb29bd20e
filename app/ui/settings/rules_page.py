"""The "Rules" page: every approval rule (rules.json) with what it covers, its decision,
scope, origin and date, and a Remove button each. Removing takes effect at once, as
`deskhand rules remove` does: rules grant power, so taking one back must not wait."""

from __future__ import annotations

import functools

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.rules import Rule, Scope
from app.core.runtime import Runtime
from app.core.settings import Settings
from app.core.visible import one_line
from app.ui.qt_values import top_level_items
from app.ui.settings.page import Patch, SettingsPage
from app.ui.settings.widgets import muted_label

ID_ROLE = Qt.ItemDataRole.UserRole
DECISION_WORDS = {"allow": "Allow", "ask": "Ask", "deny": "Never"}
EMPTY_TEXT = (
    "No rules yet: every call that changes something asks you first. “Always allow” on an "
    "approval card, or a choice on the Tools page, adds one here."
)


def scope_text(rule: Rule) -> str:
    if rule.scope is Scope.TASK:
        return f"Runs of task {rule.task_id}"
    return "This conversation" if rule.scope is Scope.CONVERSATION else "Always"


class RulesPage(SettingsPage):
    title = "Rules"
    subtitle = (
        "What runs without asking, what always asks, and what never runs. Never beats ask, "
        "ask beats allow. Removing a rule takes effect at once."
    )

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self.remove_buttons: dict[str, QPushButton] = {}
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        self.tree = QTreeWidget()
        self.tree.setObjectName("rulesTree")
        self.tree.setColumnCount(4)
        self.tree.setHeaderLabels(["What it covers", "Decision", "Scope", ""])
        self.tree.setUniformRowHeights(False)
        self.tree.setRootIsDecorated(False)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.tree.setWordWrap(False)  # long lines are elided; the tooltip has them whole
        self.tree.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in (1, 2, 3):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        layout.addWidget(self.tree, 1)
        self.empty = muted_label(EMPTY_TEXT)
        self.empty.setObjectName("rulesEmpty")
        layout.addWidget(self.empty)
        self.message = muted_label("")
        layout.addWidget(self.message)
        self.reload()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.reload()  # other pages (or an approval card) may have added rules

    def reload(self) -> None:
        book = self.runtime.rules
        rules = book.rules()
        self.tree.clear()
        self.remove_buttons.clear()
        for rule in rules:
            created = rule.created.replace("T", " ").removesuffix("+00:00")
            origin = one_line(rule.origin or "added by hand", 120)
            item = QTreeWidgetItem(
                self.tree,
                [
                    one_line(rule.describe(), 300),
                    DECISION_WORDS.get(rule.decision.value, rule.decision.value),
                    scope_text(rule),
                    "",
                ],
            )
            item.setData(0, ID_ROLE, rule.id)
            # where it came from and when, under what it covers
            item.setText(0, f"{item.text(0)}\n{origin} · {created[:10]}")
            covers = one_line(rule.describe(), 600)
            item.setToolTip(0, f"{covers}\n{origin}\nCreated {created} UTC\nid {rule.id}")
            item.setSizeHint(0, QSize(0, 46))
            button = QPushButton("Remove")
            button.setMinimumWidth(button.sizeHint().width() + 12)
            button.setAccessibleName(f"Remove the rule: {one_line(rule.describe(), 200)}")
            button.clicked.connect(functools.partial(self.remove, rule.id))
            holder = QWidget()
            box = QHBoxLayout(holder)
            box.setContentsMargins(4, 6, 8, 6)
            box.addWidget(button)
            self.tree.setItemWidget(item, 3, holder)
            self.remove_buttons[rule.id] = button
        self.tree.setVisible(bool(rules))
        self.empty.setVisible(not rules)
        if book.load_error:
            self.message.setText(book.load_error)

    def rule_ids(self) -> list[str]:
        return [item.data(0, ID_ROLE) for item in top_level_items(self.tree)]

    def remove(self, rule_id: str) -> None:
        removed = self.runtime.rules.remove(rule_id)
        self.reload()
        if removed is not None:
            self.message.setText(f"Removed: {one_line(removed.describe(), 300)}")

    def patch(self) -> Patch:
        def apply(settings: Settings) -> None:
            pass

        return apply
