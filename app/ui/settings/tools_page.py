"""The "Tools" page: which tools the assistant may use, the per-tool approval rule (Ask /
Always allow with any arguments / Never — rules in rules.json, written on Save), and the
folders file tools may touch.

Tools are grouped by category under readable names (`app.core.tool_names`); the machine name
is the second column. A search box filters by readable name, machine name, category and
description. Keyboard: Down from the search box enters the list, Space turns the current tool
(or category) on or off, Enter (or F2, F4, Alt+Down) opens its approval choice, Esc in the
search box clears it.

The Approval column is painted (`choice_column`): one combo box is made when a choice is
opened, by a click on it or from the keyboard, not one per tool."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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

from app.core.rules import BUILTIN, RuleBook, RuleDecision, choice_for, set_choice
from app.core.runtime import Runtime
from app.core.settings import Settings
from app.core.tool_names import category_title, tool_title
from app.core.visible import one_line
from app.ui.settings.choice_column import CHOICE_ROLE, ChoiceDelegate, ModelIndex
from app.ui.settings.page import Patch, SettingsPage
from app.ui.settings.widgets import muted_label, plural, role_label
from tools.registry import ToolInfo
from tools.spec import Operation, ToolManifest

OPERATION_ORDER = [o.value for o in Operation]
RULE_LABELS: dict[RuleDecision, str] = {
    RuleDecision.ASK: "Ask",
    RuleDecision.ALLOW: "Always allow (any arguments)",
    RuleDecision.DENY: "Never",
}
#: A read-only tool runs without a rule; "Ask" is listed only when a rule says so.
READ_RULE_LABELS: dict[RuleDecision, str] = {
    RuleDecision.ALLOW: "Allow",
    RuleDecision.DENY: "Never",
}
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
        palette = option.palette
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
        #: The approval choices each tool offers, in order, with their labels.
        self._offered: dict[str, dict[RuleDecision, str]] = {}
        self._saved_enabled: dict[str, bool] = {}
        self._saved_rules: dict[str, RuleDecision] = {}
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
        self.choices = ChoiceDelegate(self.tree, self._offered_at, self._describe_at)
        self.tree.setItemDelegateForColumn(APPROVAL, self.choices)
        # only the Approval cells edit, and only when opened (a click, Enter): no line edits
        self.tree.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.tree.installEventFilter(self)
        self.tree.itemChanged.connect(self._item_changed)
        self.tree.itemClicked.connect(self._item_clicked)
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
        self._offered.clear()
        disabled = set(settings.tools.disabled)
        registry = self.runtime.registry
        # one read of the rules for every row (the book looks at its file on each query)
        rules = RuleBook(None, self.runtime.rules.rules())
        # built apart and added at once: one insertion, no change signal per row
        categories = [
            self._category_item(category, registry.infos(category), disabled, rules)
            for category in registry.categories()
        ]
        self.tree.addTopLevelItems(categories)
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

    def _category_item(
        self, category: str, infos: list[ToolInfo], disabled: set[str], rules: RuleBook
    ) -> QTreeWidgetItem:
        title = category_title(category)
        cat_item = QTreeWidgetItem([title])
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
        tools = [self._tool_item(cat_item, info, disabled, rules) for info in infos]
        cat_item.addChildren(tools)
        self._count_text(cat_item, len(infos), len(infos))
        return cat_item

    def _tool_item(
        self, cat_item: QTreeWidgetItem, info: ToolInfo, disabled: set[str], rules: RuleBook
    ) -> QTreeWidgetItem:
        m: ToolManifest = info.manifest
        enabled = m.name not in disabled and m.category not in disabled
        item = QTreeWidgetItem()
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
        if self._add_rule_choice(item, m, rules) and info.available:
            flags |= Qt.ItemFlag.ItemIsEditable  # its Approval cell (the only one that edits)
        item.setFlags(flags)
        item.setCheckState(TITLE, Qt.CheckState.Checked if enabled else Qt.CheckState.Unchecked)
        self._items[m.name] = item
        self._saved_enabled[m.name] = enabled
        return item

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
        for cat_item in self._categories():
            whole = bool(words) and matches(words, cat_item.data(TITLE, SEARCH_ROLE))
            shown = 0
            for child in _children(cat_item):
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
        for cat_item in self._categories():
            for child in _children(cat_item):
                if not cat_item.isHidden() and not child.isHidden():
                    out.append(str(child.data(TITLE, NAME_ROLE)))
        return out

    def _categories(self) -> Iterator[QTreeWidgetItem]:
        for i in range(self.tree.topLevelItemCount()):
            cat_item = self.tree.topLevelItem(i)
            if cat_item is not None:
                yield cat_item

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
        """Enter, F2, F4 or Alt+Down on a tool opens its approval choice."""
        key = event.key()
        opens = key in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_F2, Qt.Key.Key_F4) or (
            key == Qt.Key.Key_Down and event.modifiers() & Qt.KeyboardModifier.AltModifier
        )
        item = self.tree.currentItem()
        name = item.data(TITLE, NAME_ROLE) if item is not None and opens else None
        return bool(name) and self.open_rule_editor(str(name)) is not None

    def _item_clicked(self, item: QTreeWidgetItem, column: int) -> None:
        name = item.data(TITLE, NAME_ROLE)
        if column == APPROVAL and name:
            self.open_rule_editor(str(name))

    def _first_visible(self) -> QTreeWidgetItem | None:
        names = self.visible_tools()
        return self._items[names[0]] if names else None

    def _add_rule_choice(self, item: QTreeWidgetItem, m: ToolManifest, rules: RuleBook) -> bool:
        """Fills the tool's Approval cell; False when a wildcard rule decides it (locked)."""
        source = _source_id(self.runtime, m.name)
        self._sources[m.name] = source
        choice = choice_for(rules, m.name, source, read_only=m.read_only)
        labels = dict(READ_RULE_LABELS if m.read_only else RULE_LABELS)
        labels.setdefault(choice.decision, RULE_LABELS[choice.decision])
        # in the same order for every tool
        self._offered[m.name] = {d: labels[d] for d in RULE_LABELS if d in labels}
        self._saved_rules[m.name] = choice.decision
        item.setText(APPROVAL, labels[choice.decision])
        item.setData(APPROVAL, CHOICE_ROLE, choice.decision.value)
        item.setSizeHint(APPROVAL, QSize(APPROVAL_WIDTH, 36))
        if choice.set_by is None:
            return True
        # A wildcard rule decides this tool; editing one name cannot undo it.
        item.setToolTip(
            APPROVAL, f"Set by the rule “{choice.set_by.describe()}” (Settings → Rules)"
        )
        return False

    def _offered_at(self, index: ModelIndex) -> list[tuple[str, str]]:
        offered = self._offered.get(_name_at(index), {})
        return [(label, decision.value) for decision, label in offered.items()]

    def _describe_at(self, index: ModelIndex) -> str:
        return f"Approval for {tool_title(_name_at(index))}"

    # -- queries and edits (also used by tests) --

    def tool_item(self, name: str) -> QTreeWidgetItem:
        return self._items[name]

    def rule_choices(self, name: str) -> list[str]:
        """The labels of the approval choices the tool offers, in order."""
        return list(self._offered[name].values())

    def rule_label(self, name: str) -> str:
        """The approval choice the tool's row shows."""
        return self._items[name].text(APPROVAL)

    def rule_editable(self, name: str) -> bool:
        """Whether the tool's approval can be chosen here (not when it is not available,
        nor when a wildcard rule decides it)."""
        flags = self._items[name].flags()
        return bool(flags & Qt.ItemFlag.ItemIsEditable and flags & Qt.ItemFlag.ItemIsEnabled)

    def open_rule_editor(self, name: str) -> QComboBox | None:
        """Opens the tool's approval choice (a combo box with its list shown); None when
        it cannot be chosen here."""
        if not self.rule_editable(name):
            return None
        item = self._items[name]
        self.tree.setCurrentItem(item, TITLE)
        self.tree.editItem(item, APPROVAL)
        editor = self.choices.editor
        if editor is not None:
            editor.showPopup()
        return editor

    def rule_editor(self) -> QComboBox | None:
        """The approval choice open now, if any."""
        return self.choices.editor

    def is_enabled(self, name: str) -> bool:
        return self._items[name].checkState(TITLE) == Qt.CheckState.Checked

    def set_enabled(self, name: str, enabled: bool) -> None:
        state = Qt.CheckState.Checked if enabled else Qt.CheckState.Unchecked
        self._items[name].setCheckState(TITLE, state)

    def rule(self, name: str) -> RuleDecision:
        return RuleDecision(self._items[name].data(APPROVAL, CHOICE_ROLE))

    def set_rule(self, name: str, decision: RuleDecision | str) -> None:
        """Chooses one of the choices the tool offers (`rule_choices`)."""
        decision = RuleDecision(decision)
        label = self._offered[name].get(decision)
        if label is None:
            raise ValueError(f"{name} does not offer {decision.value!r}")
        item = self._items[name]
        if item.data(APPROVAL, CHOICE_ROLE) != decision.value:
            item.setData(APPROVAL, CHOICE_ROLE, decision.value)
            item.setText(APPROVAL, label)

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
        # a tool turned on or off, or its approval chosen
        if column in (TITLE, APPROVAL) and item.data(TITLE, NAME_ROLE):
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
            source = self._sources.get(name, BUILTIN)
            set_choice(book, name, source, choice, read_only=read_only)

    def mark_saved(self, settings: Settings) -> None:
        self._saved_enabled = self._enabled_state()
        self._saved_rules = self._rules()
        self._saved_roots = self.roots()

    def _enabled_state(self) -> dict[str, bool]:
        return {name: self.is_enabled(name) for name in self._items}

    def _rules(self) -> dict[str, RuleDecision]:
        return {name: self.rule(name) for name in self._offered}


def _name_at(index: ModelIndex) -> str:
    """The machine name of the tool on `index`'s row."""
    return str(index.sibling(index.row(), TITLE).data(NAME_ROLE))


def _children(cat_item: QTreeWidgetItem) -> Iterator[QTreeWidgetItem]:
    for j in range(cat_item.childCount()):
        child = cat_item.child(j)
        if child is not None:
            yield child


def _source_id(runtime: Runtime, name: str) -> str:
    try:
        return str(runtime.registry.source_of(name).id)
    except Exception:  # a registry without sources (embedders): Deskhand's own
        return BUILTIN
