"""The "Tools" page: which tools the assistant may use, the per-tool approval rule (Ask /
Always allow with any arguments / Never — rules in rules.json, written on Save), and the
folders file tools may touch.

Tools are grouped by category under readable names (`app.core.tool_names`); the machine name
is the second column. A search box filters by readable name, machine name, category and
description. Keyboard: Down from the search box enters the list, Space turns the current tool
(or category) on or off, Enter opens its approval choice, Esc in the search box clears it."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any, Literal

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPersistentModelIndex, QSize, Qt
from PySide6.QtGui import QKeyEvent, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.rules import BUILTIN, Rule, RuleBook, RuleDecision, Scope
from app.core.runtime import Runtime
from app.core.settings import Settings
from app.core.tool_names import category_title, tool_title
from app.core.visible import one_line
from app.ui.settings.page import Patch, SettingsPage
from app.ui.settings.widgets import muted_label, plural, role_label
from tools.spec import Operation, ToolManifest

Choice = Literal["ask", "allow", "deny"]

OPERATION_ORDER = [o.value for o in Operation]
RULE_LABELS: dict[Choice, str] = {
    "ask": "Ask",
    "allow": "Always allow (any arguments)",
    "deny": "Never",
}
READ_RULE_LABELS: dict[Choice, str] = {"allow": "Allow", "deny": "Never"}
ORIGIN = "Settings → Tools"
NAME_ROLE = Qt.ItemDataRole.UserRole
#: What the search matches a tool or category against (folded to lower case).
SEARCH_ROLE = Qt.ItemDataRole.UserRole + 1
TITLE, NAME, APPROVAL = 0, 1, 2
APPROVAL_WIDTH = 168
#: The widest the title column starts (indent and check box not counted).
TITLE_MAX = 170


class _MutedDelegate(QStyledItemDelegate):
    """Secondary text (the machine names) in the theme's muted colour, following the theme."""

    def initStyleOption(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        super().initStyleOption(option, index)
        palette = option.palette  # type: ignore[attr-defined]
        muted = palette.color(QPalette.ColorRole.PlaceholderText)
        palette.setColor(QPalette.ColorRole.Text, muted)


def matches(words: list[str], haystack: str) -> bool:
    """Every search word occurs in `haystack` (already folded)."""
    return all(word in haystack for word in words)


class ToolsPage(SettingsPage):
    title = "Tools"
    subtitle = (
        "Choose which tools the assistant may use and when it must ask you first. "
        "“Never” wins over everything; narrower rules are in Settings → Rules."
    )
    reports_edits = True

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
        self.search_edit = QLineEdit()
        self.search_edit.setObjectName("toolsSearch")
        self.search_edit.setPlaceholderText("Search tools by name, category or what they do")
        self.search_edit.setClearButtonEnabled(True)
        self.search_edit.setAccessibleName("Search tools")
        self.search_edit.textChanged.connect(self.apply_filter)
        self.search_edit.installEventFilter(self)
        layout.addWidget(self.search_edit)
        self.tree = QTreeWidget()
        self.tree.setObjectName("toolsTree")
        self.tree.setColumnCount(3)
        self.tree.setHeaderLabels(["Tool", "Name", "Approval"])
        self.tree.setRootIsDecorated(True)
        self.tree.setUniformRowHeights(False)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.tree.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.tree.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.tree.setItemDelegateForColumn(NAME, _MutedDelegate(self.tree))
        self.tree.installEventFilter(self)
        self.tree.itemChanged.connect(self._item_changed)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(TITLE, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(NAME, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(APPROVAL, QHeaderView.ResizeMode.Fixed)
        header.resizeSection(APPROVAL, APPROVAL_WIDTH)
        layout.addWidget(self.tree, 1)
        self.no_match = muted_label("")
        self.no_match.setObjectName("toolsNoMatch")
        self.no_match.setTextFormat(Qt.TextFormat.PlainText)
        self.no_match.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        self.no_match.hide()
        layout.addWidget(self.no_match, 1)
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
            self._add_category(category, registry.infos(category), settings, disabled)
        self.tree.expandAll()
        metrics = self.tree.fontMetrics()
        widths = sorted(metrics.horizontalAdvance(i.text(TITLE)) for i in self._items.values())
        # most titles whole (the rest elided, whole in the tooltip); the names keep room
        typical = widths[len(widths) * 9 // 10] if widths else 120
        self.tree.header().resizeSection(TITLE, min(typical, TITLE_MAX) + 72)
        self._saved_roots = list(settings.files.allowed_roots)
        self.roots_list.clear()
        for root in self._saved_roots:
            self._add_root_item(root)
        self._update_root_buttons()
        self.apply_filter(self.search_edit.text())

    def _add_category(
        self, category: str, infos: list[Any], settings: Settings, disabled: set[str]
    ) -> None:
        title = category_title(category)
        cat_item = QTreeWidgetItem(self.tree, [title])
        cat_item.setFlags(
            Qt.ItemFlag.ItemIsEnabled
            | Qt.ItemFlag.ItemIsSelectable
            | Qt.ItemFlag.ItemIsUserCheckable
            | Qt.ItemFlag.ItemIsAutoTristate
        )
        font = cat_item.font(TITLE)
        font.setBold(True)
        cat_item.setFont(TITLE, font)
        cat_item.setData(TITLE, SEARCH_ROLE, f"{title} {category}".casefold())
        cat_item.setData(TITLE, NAME_ROLE, None)
        cat_item.setToolTip(TITLE, f"Turn every {title} tool on or off")
        for info in infos:
            self._add_tool(cat_item, info, settings, disabled)
        self._count_text(cat_item, len(infos), len(infos))

    def _add_tool(
        self, cat_item: QTreeWidgetItem, info: Any, settings: Settings, disabled: set[str]
    ) -> None:
        m: ToolManifest = info.manifest
        enabled = m.name not in disabled and m.category not in disabled
        item = QTreeWidgetItem(cat_item)
        item.setData(TITLE, NAME_ROLE, m.name)
        title = one_line(tool_title(m.name), 80)
        item.setText(TITLE, title)
        item.setText(NAME, m.name)
        ops = sorted((o.value for o in m.operations), key=OPERATION_ORDER.index)
        description = one_line(m.description, 600)
        tip = f"{m.name}\n{description}\nOperations: {', '.join(ops)}"
        if not info.available:
            tip += f"\nNot available: {info.unavailable_reason or 'a package is missing'}"
            item.setText(TITLE, f"{title} (not available)")
        for column in (TITLE, NAME):
            item.setToolTip(column, tip)
        haystack = f"{title} {m.name} {cat_item.text(TITLE)} {m.category} {m.description}"
        item.setData(TITLE, SEARCH_ROLE, haystack.casefold())
        flags = Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsSelectable
        if info.available:
            flags |= Qt.ItemFlag.ItemIsEnabled
        item.setFlags(flags)
        item.setCheckState(TITLE, Qt.CheckState.Checked if enabled else Qt.CheckState.Unchecked)
        self._items[m.name] = item
        self._saved_enabled[m.name] = enabled
        self._add_rule_combo(item, m, settings, enabled=info.available)

    @staticmethod
    def _count_text(cat_item: QTreeWidgetItem, shown: int, total: int) -> None:
        text = plural(total, "tool") if shown == total else f"{shown} of {plural(total, 'tool')}"
        cat_item.setText(NAME, text)

    # -- search --

    def apply_filter(self, text: str) -> None:
        """Show the tools whose readable name, machine name, category or description hold
        every word of `text`; a category shows all its tools when its own name matches."""
        words = text.casefold().split()
        any_shown = False
        for i in range(self.tree.topLevelItemCount()):
            cat_item = self.tree.topLevelItem(i)
            whole = bool(words) and matches(words, cat_item.data(TITLE, SEARCH_ROLE))
            shown = 0
            for j in range(cat_item.childCount()):
                child = cat_item.child(j)
                visible = whole or matches(words, child.data(TITLE, SEARCH_ROLE))
                child.setHidden(not visible)
                shown += visible
            cat_item.setHidden(shown == 0)
            self._count_text(cat_item, shown, cat_item.childCount())
            if shown and words:
                cat_item.setExpanded(True)
            any_shown = any_shown or shown > 0
        self.tree.setVisible(any_shown)
        self.no_match.setText("" if any_shown else f"No tools match “{one_line(text, 60)}”.")
        self.no_match.setVisible(not any_shown)

    def set_filter(self, text: str) -> None:
        self.search_edit.setText(text)

    def visible_tools(self) -> list[str]:
        """The machine names of the tools the list shows now, in order."""
        out = []
        for i in range(self.tree.topLevelItemCount()):
            cat_item = self.tree.topLevelItem(i)
            for j in range(cat_item.childCount()):
                child = cat_item.child(j)
                if not cat_item.isHidden() and not child.isHidden():
                    out.append(str(child.data(TITLE, NAME_ROLE)))
        return out

    # -- keyboard --

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent):
            if watched is self.search_edit:
                return self._search_key(event)
            if watched is self.tree:
                return self._tree_key(event)
        return super().eventFilter(watched, event)

    def _search_key(self, event: QKeyEvent) -> bool:
        key = event.key()
        if key == Qt.Key.Key_Escape and self.search_edit.text():
            self.search_edit.clear()  # Esc clears; with nothing to clear it closes the dialog
            return True
        if key in (Qt.Key.Key_Down, Qt.Key.Key_Return, Qt.Key.Key_Enter):
            first = self._first_visible()
            if first is not None:
                self.tree.setFocus(Qt.FocusReason.TabFocusReason)
                self.tree.setCurrentItem(first, TITLE)
            return True
        return False

    def _tree_key(self, event: QKeyEvent) -> bool:
        """Enter or F2 on a tool opens its approval choice."""
        if event.key() not in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_F2):
            return False
        item = self.tree.currentItem()
        name = item.data(TITLE, NAME_ROLE) if item is not None else None
        combo = self._combos.get(name) if name else None
        if combo is None or not combo.isEnabled():
            return False
        combo.showPopup()
        return True

    def _first_visible(self) -> QTreeWidgetItem | None:
        names = self.visible_tools()
        return self._items[names[0]] if names else None

    def _add_rule_combo(
        self, item: QTreeWidgetItem, m: ToolManifest, settings: Settings, *, enabled: bool
    ) -> None:
        combo = QComboBox()
        combo.setProperty("compact", True)
        # reached from the list (Enter), not by tabbing through a hundred combos
        combo.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        combo.setAccessibleName(f"Approval for {tool_title(m.name)}")
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
        combo.currentIndexChanged.connect(lambda _: self.edited.emit())
        holder = QWidget()
        box = QHBoxLayout(holder)
        box.setContentsMargins(4, 0, 10, 0)
        box.addWidget(combo)
        item.setSizeHint(APPROVAL, QSize(APPROVAL_WIDTH, 36))
        self.tree.setItemWidget(item, APPROVAL, holder)

    # -- queries and edits (also used by tests) --

    def tool_item(self, name: str) -> QTreeWidgetItem:
        return self._items[name]

    def rule_combo(self, name: str) -> QComboBox:
        return self._combos[name]

    def is_enabled(self, name: str) -> bool:
        return self._items[name].checkState(TITLE) == Qt.CheckState.Checked

    def set_enabled(self, name: str, enabled: bool) -> None:
        state = Qt.CheckState.Checked if enabled else Qt.CheckState.Unchecked
        self._items[name].setCheckState(TITLE, state)

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

    def _item_changed(self, item: QTreeWidgetItem, column: int) -> None:
        if column == TITLE and item.data(TITLE, NAME_ROLE):  # a tool turned on or off
            self.edited.emit()

    def has_changes(self) -> bool:
        return (
            self._enabled_state() != self._saved_enabled
            or self._rules() != self._saved_rules
            or self.roots() != self._saved_roots
        )

    def _update_root_buttons(self) -> None:
        self.edited.emit()  # a folder was added or removed (or the list was loaded)
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
    return (
        "deny"
        if decision is RuleDecision.DENY
        else ("allow" if decision is RuleDecision.ALLOW else "ask")
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
