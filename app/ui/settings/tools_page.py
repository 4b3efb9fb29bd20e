"""The "Tools" page: which tools the assistant may use, their approval rules, and the
folders file tools may touch."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Literal

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.runtime import Runtime
from app.core.settings import Settings
from app.ui.settings.page import Patch, SettingsPage
from app.ui.settings.widgets import muted_label, plural, role_label
from tools.spec import Operation, ToolManifest

Rule = Literal["ask", "allow", "deny"]

CATEGORY_TITLES = {"core": "Core", "fs": "Files"}
OPERATION_ORDER = [o.value for o in Operation]
RULE_LABELS: dict[Rule, str] = {"ask": "Ask", "allow": "Always allow", "deny": "Deny"}
READ_RULE_LABELS: dict[Rule, str] = {"allow": "Allow", "deny": "Deny"}
NAME_ROLE = Qt.ItemDataRole.UserRole


def _category_title(category: str) -> str:
    if category.startswith("mcp:"):
        return f"MCP: {category.removeprefix('mcp:')}"
    return CATEGORY_TITLES.get(category, category.replace("_", " ").title())


class ToolsPage(SettingsPage):
    title = "Tools"
    subtitle = (
        "Choose which tools the assistant may use and when it must ask you first. "
        "Deny rules win over everything."
    )

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self._items: dict[str, QTreeWidgetItem] = {}
        self._combos: dict[str, QComboBox] = {}
        self._saved_enabled: dict[str, bool] = {}
        self._saved_rules: dict[str, Rule] = {}
        self._saved_roots: list[str] = []
        self._build()
        self.load(runtime.settings)

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        self.tree = QTreeWidget()
        self.tree.setColumnCount(4)
        self.tree.setHeaderLabels(["Tool", "What it does", "Operations", "Approval"])
        self.tree.setRootIsDecorated(True)
        self.tree.setUniformRowHeights(False)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.tree.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Fixed)
        header.resizeSection(3, 150)
        layout.addWidget(self.tree, 1)
        layout.addSpacing(10)

        layout.addWidget(role_label("Folders file tools may use", "section"))
        roots_layout = QHBoxLayout()
        roots_layout.setSpacing(10)
        self.roots_list = QListWidget()
        self.roots_list.setFixedHeight(84)
        self.roots_list.itemSelectionChanged.connect(self._update_root_buttons)
        roots_layout.addWidget(self.roots_list, 1)
        side = QVBoxLayout()
        side.setSpacing(6)
        self.add_root_button = QPushButton("Add folder…")
        self.add_root_button.clicked.connect(self._choose_root)
        self.remove_root_button = QPushButton("Remove")
        self.remove_root_button.clicked.connect(self.remove_selected_root)
        side.addWidget(self.add_root_button)
        side.addWidget(self.remove_root_button)
        side.addStretch(1)
        roots_layout.addLayout(side)
        layout.addLayout(roots_layout)
        self.roots_hint = muted_label("")
        layout.addWidget(self.roots_hint)

    # -- loading --

    def load(self, settings: Settings) -> None:
        self.tree.clear()
        self._items.clear()
        self._combos.clear()
        disabled = set(settings.tools.disabled)
        registry = self.runtime.registry
        for category in registry.categories():
            infos = registry.infos(category)
            cat_item = QTreeWidgetItem(self.tree, [_category_title(category)])
            cat_item.setFlags(
                Qt.ItemFlag.ItemIsEnabled
                | Qt.ItemFlag.ItemIsUserCheckable
                | Qt.ItemFlag.ItemIsAutoTristate
            )
            font = cat_item.font(0)
            font.setBold(True)
            cat_item.setFont(0, font)
            cat_item.setText(1, plural(len(infos), "tool"))
            cat_item.setFirstColumnSpanned(False)
            for info in infos:
                m = info.manifest
                enabled = m.name not in disabled and category not in disabled
                item = QTreeWidgetItem(cat_item)
                item.setData(0, NAME_ROLE, m.name)
                item.setText(0, m.name)
                ops = sorted((o.value for o in m.operations), key=OPERATION_ORDER.index)
                item.setText(2, ", ".join(ops))
                summary = m.summary if info.available else (info.unavailable_reason or "")
                item.setText(1, summary)
                item.setToolTip(1, m.description if info.available else summary)
                item.setToolTip(0, m.description)
                flags = Qt.ItemFlag.ItemIsUserCheckable
                if info.available:
                    flags |= Qt.ItemFlag.ItemIsEnabled
                item.setFlags(flags)
                item.setCheckState(0, Qt.CheckState.Checked if enabled else Qt.CheckState.Unchecked)
                self._items[m.name] = item
                self._saved_enabled[m.name] = enabled
                self._add_rule_combo(item, m, settings, enabled=info.available)
        self.tree.expandAll()
        longest = max((len(n) for n in self._items), default=10)
        width = self.tree.fontMetrics().horizontalAdvance("m" * 2 + "x" * longest)
        self.tree.header().resizeSection(0, width + 64)  # + indent and check box
        self._saved_roots = list(settings.files.allowed_roots)
        self.roots_list.clear()
        for root in self._saved_roots:
            self._add_root_item(root)
        self._update_root_buttons()

    def _add_rule_combo(
        self, item: QTreeWidgetItem, m: ToolManifest, settings: Settings, *, enabled: bool
    ) -> None:
        combo = QComboBox()
        combo.setProperty("compact", True)
        labels = READ_RULE_LABELS if m.read_only else RULE_LABELS
        for rule, text in labels.items():
            combo.addItem(text, rule)
        rule, pattern = _current_rule(m, settings)
        combo.setCurrentIndex(max(0, combo.findData(rule)))
        if pattern is not None:
            # A wildcard or category rule decides this tool; editing one name cannot undo it.
            combo.setEnabled(False)
            combo.setToolTip(f"Set by the rule “{pattern}” in settings.json")
        else:
            combo.setEnabled(enabled)
        self._saved_rules[m.name] = rule
        self._combos[m.name] = combo
        holder = QWidget()
        box = QHBoxLayout(holder)
        box.setContentsMargins(4, 0, 10, 0)
        box.addWidget(combo)
        item.setSizeHint(3, QSize(150, 36))
        self.tree.setItemWidget(item, 3, holder)

    # -- queries and edits (also used by tests) --

    def tool_item(self, name: str) -> QTreeWidgetItem:
        return self._items[name]

    def rule_combo(self, name: str) -> QComboBox:
        return self._combos[name]

    def is_enabled(self, name: str) -> bool:
        return self._items[name].checkState(0) == Qt.CheckState.Checked

    def set_enabled(self, name: str, enabled: bool) -> None:
        state = Qt.CheckState.Checked if enabled else Qt.CheckState.Unchecked
        self._items[name].setCheckState(0, state)

    def rule(self, name: str) -> Rule:
        rule: Rule = self._combos[name].currentData()
        return rule

    def set_rule(self, name: str, rule: Rule) -> None:
        combo = self._combos[name]
        combo.setCurrentIndex(combo.findData(rule))

    def roots(self) -> list[str]:
        return [self.roots_list.item(i).text() for i in range(self.roots_list.count())]

    def add_root(self, path: str) -> None:
        path = str(Path(path).expanduser())
        if path and path not in self.roots():
            self._add_root_item(path)
        self._update_root_buttons()

    def _add_root_item(self, path: str) -> None:
        item = QListWidgetItem(path)
        item.setSizeHint(QSize(0, 28))
        item.setToolTip(path)
        self.roots_list.addItem(item)

    def remove_selected_root(self) -> None:
        for item in self.roots_list.selectedItems():
            self.roots_list.takeItem(self.roots_list.row(item))
        self._update_root_buttons()

    def _choose_root(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Allow file tools in this folder")
        if folder:
            self.add_root(folder)

    def _update_root_buttons(self) -> None:
        self.remove_root_button.setEnabled(bool(self.roots_list.selectedItems()))
        self.roots_hint.setText(
            "No folder chosen: file tools may use your home folder."
            if not self.roots()
            else "File tools may only read and change files inside these folders."
        )

    # -- saving --

    def patch(self) -> Patch:
        registry = self.runtime.registry
        state = self._enabled_state()
        toggled = {
            name: enabled for name, enabled in state.items() if enabled != self._saved_enabled[name]
        }
        rules = {
            name: rule for name, rule in self._rules().items() if rule != self._saved_rules[name]
        }
        roots = self.roots()
        new_roots = roots if roots != self._saved_roots else None

        def apply(settings: Settings) -> None:
            disabled = settings.tools.disabled
            for name, enabled in toggled.items():
                manifest = registry.get(name)
                category = manifest.category if manifest else None
                if not enabled:
                    if name not in disabled:
                        disabled.append(name)
                    continue
                while name in disabled:
                    disabled.remove(name)
                if category in disabled:  # enabling one tool of a disabled category
                    disabled.remove(category)
                    for m in registry.manifests():
                        off = m.category == category and not state.get(m.name, True)
                        if off and m.name not in disabled:
                            disabled.append(m.name)
            approvals = settings.approvals
            for name, rule in rules.items():
                approvals.always_allow = [p for p in approvals.always_allow if p != name]
                approvals.deny = [p for p in approvals.deny if p != name]
                manifest = registry.get(name)
                if rule == "deny":
                    approvals.deny.append(name)
                elif rule == "allow" and manifest is not None and not manifest.read_only:
                    approvals.always_allow.append(name)
            settings.tools.disabled = list(disabled)
            if new_roots is not None:
                settings.files.allowed_roots = list(new_roots)

        return apply

    def mark_saved(self, settings: Settings) -> None:
        self._saved_enabled = self._enabled_state()
        self._saved_rules = self._rules()
        self._saved_roots = self.roots()

    def _enabled_state(self) -> dict[str, bool]:
        return {name: self.is_enabled(name) for name in self._items}

    def _rules(self) -> dict[str, Rule]:
        return {name: self.rule(name) for name in self._combos}


def _current_rule(m: ToolManifest, settings: Settings) -> tuple[Rule, str | None]:
    """The tool's rule and, when a pattern (not its own name) decides it, that pattern."""

    def matching(patterns: list[str]) -> str | None:
        for p in patterns:
            if p.startswith("category:"):
                if fnmatch.fnmatchcase(m.category, p.removeprefix("category:")):
                    return p
            elif fnmatch.fnmatchcase(m.name, p):
                return p
        return None

    rules = settings.approvals
    if m.name in rules.deny:
        return "deny", None
    if (p := matching(rules.deny)) is not None:
        return "deny", p
    if m.read_only:
        return "allow", None
    if m.name in rules.always_allow:
        return "allow", None
    if (p := matching(rules.always_allow)) is not None:
        return "allow", p
    return "ask", None
