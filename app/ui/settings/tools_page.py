"""The "Tools" page: which tools the assistant may use, the per-tool approval rule (Ask /
Always allow with any arguments / Never — rules in rules.json, written on Save), and the
folders file tools may touch."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any, Literal

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

from app.core.rules import BUILTIN, Rule, RuleBook, RuleDecision, Scope
from app.core.runtime import Runtime
from app.core.settings import Settings
from app.ui.settings.page import Patch, SettingsPage
from app.ui.settings.widgets import muted_label, plural, role_label
from tools.spec import Operation, ToolManifest

Choice = Literal["ask", "allow", "deny"]

CATEGORY_TITLES = {"core": "Core", "fs": "Files"}
OPERATION_ORDER = [o.value for o in Operation]
RULE_LABELS: dict[Choice, str] = {
    "ask": "Ask",
    "allow": "Always allow (any arguments)",
    "deny": "Never",
}
READ_RULE_LABELS: dict[Choice, str] = {"allow": "Allow", "deny": "Never"}
ORIGIN = "Settings → Tools"
NAME_ROLE = Qt.ItemDataRole.UserRole


def _category_title(category: str) -> str:
    if category.startswith("mcp:"):
        return f"MCP: {category.removeprefix('mcp:')}"
    return CATEGORY_TITLES.get(category, category.replace("_", " ").title())


class ToolsPage(SettingsPage):
    title = "Tools"
    subtitle = (
        "Choose which tools the assistant may use and when it must ask you first. "
        "“Never” wins over everything; narrower rules are in Settings → Rules."
    )

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self._items: dict[str, QTreeWidgetItem] = {}
        self._combos: dict[str, QComboBox] = {}
        self._saved_enabled: dict[str, bool] = {}
        self._saved_rules: dict[str, Choice] = {}
        self._sources: dict[str, str] = {}
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
        header.resizeSection(3, 176)
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
        combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        combo.setMinimumContentsLength(10)
        combo.view().setMinimumWidth(230)  # the list shows the choices in full
        labels = READ_RULE_LABELS if m.read_only else RULE_LABELS
        for rule, text in labels.items():
            combo.addItem(text, rule)
        source = _source_id(self.runtime, m.name)
        self._sources[m.name] = source
        choice, deciding = tool_choice(self.runtime.rules, m, source)
        combo.setCurrentIndex(max(0, combo.findData(choice)))
        if deciding is not None:
            # A wildcard rule decides this tool; editing one name cannot undo it.
            combo.setEnabled(False)
            combo.setToolTip(f"Set by the rule “{deciding.describe()}” (Settings → Rules)")
        else:
            combo.setEnabled(enabled)
        self._saved_rules[m.name] = choice
        self._combos[m.name] = combo
        holder = QWidget()
        box = QHBoxLayout(holder)
        box.setContentsMargins(4, 0, 10, 0)
        box.addWidget(combo)
        item.setSizeHint(3, QSize(176, 36))
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

    def rule(self, name: str) -> Choice:
        rule: Choice = self._combos[name].currentData()
        return rule

    def set_rule(self, name: str, rule: Choice) -> None:
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
            "No folder chosen yet: Deskhand asks at the next start which folders it may use."
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
            settings.tools.disabled = list(disabled)
            if new_roots is not None:
                settings.files.allowed_roots = list(new_roots)
                settings.files.folders_chosen = True

        return apply

    def commit(self) -> None:
        """(worker thread, after the settings were saved) The changed per-tool choices
        become rules in rules.json."""
        book = self.runtime.rules
        registry = self.runtime.registry
        for name, choice in self._rules().items():
            if choice == self._saved_rules.get(name):
                continue
            manifest = registry.get(name)
            read_only = manifest is not None and manifest.read_only
            set_tool_choice(book, name, self._sources.get(name, BUILTIN), choice, read_only)

    def mark_saved(self, settings: Settings) -> None:
        self._saved_enabled = self._enabled_state()
        self._saved_rules = self._rules()
        self._saved_roots = self.roots()

    def _enabled_state(self) -> dict[str, bool]:
        return {name: self.is_enabled(name) for name in self._items}

    def _rules(self) -> dict[str, Choice]:
        return {name: self.rule(name) for name in self._combos}


def _source_id(runtime: Runtime, name: str) -> str:
    try:
        return str(runtime.registry.source_of(name).id)
    except Exception:  # a registry without sources (embedders): Deskhand's own
        return BUILTIN


def _is_any_rule_for(rule: Rule, tool: str, source: str) -> bool:
    return (
        rule.tool == tool
        and rule.source == source
        and not rule.matcher.narrow
        and rule.scope is Scope.ALWAYS
    )


def tool_choice(book: RuleBook, m: ToolManifest, source: str) -> tuple[Choice, Rule | None]:
    """What the Tools page shows for one tool: its own any-argument rule; or, when a wildcard
    rule (another tool pattern or source pattern) decides it, that rule."""
    own: Choice | None = None
    wildcard: tuple[Choice, Rule] | None = None
    for rule in book.rules():
        if rule.scope is not Scope.ALWAYS or rule.matcher.narrow:
            continue
        if _is_any_rule_for(rule, m.name, source):
            if rule.decision is RuleDecision.DENY or own is None:
                own = _choice(rule.decision)
        elif (
            fnmatch.fnmatchcase(m.name, rule.tool)
            and fnmatch.fnmatchcase(source, rule.source)
            and (wildcard is None or rule.decision is RuleDecision.DENY)
        ):
            wildcard = (_choice(rule.decision), rule)
    if wildcard is not None and wildcard[0] == "deny" and own != "deny":
        return wildcard
    if own is not None:
        return own, None
    if wildcard is not None and wildcard[0] != "ask":
        return wildcard
    return ("allow" if m.read_only else "ask"), None


def _choice(decision: RuleDecision) -> Choice:
    return "deny" if decision is RuleDecision.DENY else (
        "allow" if decision is RuleDecision.ALLOW else "ask"
    )


def set_tool_choice(book: Any, tool: str, source: str, choice: Choice, read_only: bool) -> None:
    """Replaces the tool's any-argument rules with the one `choice` means."""
    book.remove_where(tool, source)
    if choice == "deny":
        decision = RuleDecision.DENY
    elif choice == "allow" and not read_only:
        decision = RuleDecision.ALLOW
    else:
        return  # "ask" (and "allow" of a read-only tool) is what happens without a rule
    book.add(Rule(tool=tool, source=source, decision=decision, origin=ORIGIN))
