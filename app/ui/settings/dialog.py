"""The settings window: a page list on the left, the pages (each scrolls), and Save/Cancel.

One rule for every page: Save is enabled only when a page has changes; saving asks every
page for its problem first — a page with one keeps the window open, shows the problem on
that page and marks it in the list — then for a patch of what changed, stores API keys in
the keyring and applies the patches through `SettingsStore.update` (both in a worker
thread), then replaces `runtime.settings`. Closing with unsaved changes asks Save / Discard
/ Cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast, overload

from PySide6.QtCore import QObject, QSize, Qt, Signal
from PySide6.QtGui import QCloseEvent, QIcon, QKeyEvent, QPaintEvent, QShowEvent
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSpinBox,
    QComboBox,
    QDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QStackedWidget,
    QStyle,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)
from qasync import asyncSlot
from shiboken6 import isValid

from app.core.runtime import Runtime
from app.core.secrets import SecretStoreError
from app.core.settings import SecretInSettingsError, Settings
from app.ui.settings.page import SettingsPage, in_thread
from app.ui.settings.widgets import muted_label, role_label

if TYPE_CHECKING:
    from app.ui.settings.about_page import AboutPage
    from app.ui.settings.agents_page import AgentsPage
    from app.ui.settings.general_page import (
        BrowserPage,
        GeneralPage,
        InstructionsPage,
        SecurityPage,
    )
    from app.ui.settings.integrations_page import IntegrationsPage
    from app.ui.settings.knowledge_page import KnowledgePage
    from app.ui.settings.mcp_page import McpPage
    from app.ui.settings.memory_page import MemoryPage
    from app.ui.settings.providers_page import ProvidersPage
    from app.ui.settings.rules_page import RulesPage
    from app.ui.settings.skills_page import SkillsPage
    from app.ui.settings.sources_page import SourcesPage
    from app.ui.settings.terminal_page import TerminalPage
    from app.ui.settings.tools_page import ToolsPage

PageKey = Literal[
    "providers",
    "integrations",
    "tools",
    "terminal",
    "browser",
    "rules",
    "mcp",
    "sources",
    "skills",
    "agents",
    "memory",
    "knowledge",
    "general",
    "instructions",
    "security",
    "about",
]
PAGE_KEYS: tuple[PageKey, ...] = (
    "providers",
    "integrations",
    "tools",
    "terminal",
    "browser",
    "rules",
    "mcp",
    "sources",
    "skills",
    "agents",
    "memory",
    "knowledge",
    "general",
    "instructions",
    "security",
    "about",
)
NAV_TITLES = {
    "providers": "Providers",
    "integrations": "Integrations",
    "tools": "Tools",
    "terminal": "Terminal",
    "browser": "Browser",
    "rules": "Rules",
    "mcp": "MCP servers",
    "sources": "Sources",
    "skills": "Skills",
    "agents": "Agents",
    "memory": "Memory",
    "knowledge": "Knowledge",
    "general": "General",
    "instructions": "Instructions",
    "security": "Security",
    "about": "About",
}
log = logging.getLogger(__name__)

#: Where each page's class lives: a page is imported and built when it is first shown.
PAGE_CLASSES: dict[PageKey, tuple[str, str]] = {
    "providers": ("app.ui.settings.providers_page", "ProvidersPage"),
    "integrations": ("app.ui.settings.integrations_page", "IntegrationsPage"),
    "tools": ("app.ui.settings.tools_page", "ToolsPage"),
    "terminal": ("app.ui.settings.terminal_page", "TerminalPage"),
    "browser": ("app.ui.settings.general_page", "BrowserPage"),
    "rules": ("app.ui.settings.rules_page", "RulesPage"),
    "mcp": ("app.ui.settings.mcp_page", "McpPage"),
    "sources": ("app.ui.settings.sources_page", "SourcesPage"),
    "skills": ("app.ui.settings.skills_page", "SkillsPage"),
    "agents": ("app.ui.settings.agents_page", "AgentsPage"),
    "memory": ("app.ui.settings.memory_page", "MemoryPage"),
    "knowledge": ("app.ui.settings.knowledge_page", "KnowledgePage"),
    "general": ("app.ui.settings.general_page", "GeneralPage"),
    "instructions": ("app.ui.settings.general_page", "InstructionsPage"),
    "security": ("app.ui.settings.general_page", "SecurityPage"),
    "about": ("app.ui.settings.about_page", "AboutPage"),
}
#: The nav item's data for a page's problem (None when it has none).
PROBLEM_ROLE = Qt.ItemDataRole.UserRole + 1
Answer = Literal["save", "discard", "cancel"]


def ask_unsaved(parent: QWidget) -> Answer:
    """Save / Discard / Cancel for closing with unsaved changes (tests replace this)."""
    buttons = QMessageBox.StandardButton
    box = QMessageBox(
        QMessageBox.Icon.Question,
        "Unsaved changes",
        "Save your changes before closing the settings?",
        buttons.Save | buttons.Discard | buttons.Cancel,
        parent,
    )
    box.setDefaultButton(buttons.Save)
    answer = box.exec()
    if answer == buttons.Save:
        return "save"
    return "discard" if answer == buttons.Discard else "cancel"


P = TypeVar("P", bound=SettingsPage)


class _Page(Generic[P]):
    """A page as an attribute (`dialog.tools`): built when first asked for."""

    def __init__(self, key: PageKey) -> None:
        self.key = key

    @overload
    def __get__(self, dialog: None, owner: type) -> _Page[P]: ...

    @overload
    def __get__(self, dialog: SettingsDialog, owner: type) -> P: ...

    def __get__(self, dialog: SettingsDialog | None, owner: type) -> _Page[P] | P:
        if dialog is None:
            return self
        return cast(P, dialog.page(self.key))


class SettingsDialog(QDialog):
    """Settings in pages. Emits `settingsChanged` after a successful save; the caller
    re-reads `runtime.settings` (already replaced with what was saved).

    Made once and reused: each page is built from `runtime.settings` when it is first
    shown, and closing cancels every page's tasks and drops the pages, so the next open
    shows the settings as they are then (changed from elsewhere meanwhile or not)."""

    settingsChanged = Signal()

    providers: _Page[ProvidersPage] = _Page("providers")
    integrations: _Page[IntegrationsPage] = _Page("integrations")
    tools: _Page[ToolsPage] = _Page("tools")
    terminal: _Page[TerminalPage] = _Page("terminal")
    browser: _Page[BrowserPage] = _Page("browser")
    rules: _Page[RulesPage] = _Page("rules")
    mcp: _Page[McpPage] = _Page("mcp")
    sources: _Page[SourcesPage] = _Page("sources")
    skills: _Page[SkillsPage] = _Page("skills")
    agents: _Page[AgentsPage] = _Page("agents")
    memory: _Page[MemoryPage] = _Page("memory")
    knowledge: _Page[KnowledgePage] = _Page("knowledge")
    general: _Page[GeneralPage] = _Page("general")
    instructions: _Page[InstructionsPage] = _Page("instructions")
    security: _Page[SecurityPage] = _Page("security")
    about: _Page[AboutPage] = _Page("about")

    def __init__(
        self, runtime: Runtime, parent: QWidget | None = None, page: str = "providers"
    ) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self.setWindowTitle("Deskhand settings")
        self.setObjectName("settingsDialog")
        self.resize(940, 620)
        self.setMinimumSize(760, 520)
        #: The pages built since the dialog last opened.
        self.pages: dict[PageKey, SettingsPage] = {}
        self._save_task: asyncio.Task[Any] | None = None
        self._key_states: asyncio.Task[None] | None = None
        self._dirty: set[PageKey] = set()
        self._touched: set[PageKey] = set()
        self.problem_labels: dict[PageKey, QLabel] = {}
        #: The tool registry (~0.5 s to build) was asked for on a worker, for Tools.
        self._registry_asked = False
        self._build()
        self._refresh_save()
        self.show_page(page)

    @property
    def key_states(self) -> asyncio.Future[None]:
        """Reading which accounts have a key stored (the Providers page's task; tests
        await it): done at once when that page is not built."""
        if self._key_states is not None:
            return self._key_states
        done: asyncio.Future[None] = asyncio.get_event_loop().create_future()
        done.set_result(None)
        return done

    def page(self, key: PageKey) -> SettingsPage:
        """Page `key`, imported and built from the current settings if it is not yet."""
        page = self.pages.get(key)
        if page is None:
            module, name = PAGE_CLASSES[key]
            make: Callable[[Runtime], SettingsPage] = getattr(import_module(module), name)
            page = make(self.runtime)
            self.pages[key] = page
            box = self.stack.widget(PAGE_KEYS.index(key))
            assert box is not None
            self.problem_labels[key] = _fill_box(box, page)
            self._watch(key, page)
            if key == "providers":
                self._key_states = cast("ProvidersPage", page).load_key_states()
        return page

    def _build(self) -> None:
        root = QHBoxLayout(self)
        root.setContentsMargins(0, 0, 0, 0)
        root.setSpacing(0)

        side = QFrame()
        side.setObjectName("settingsSide")
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(12, 18, 12, 12)
        side_layout.setSpacing(8)
        caption = role_label("Settings", "heading")
        caption.setContentsMargins(10, 0, 0, 6)
        side_layout.addWidget(caption)
        self.nav = QListWidget()
        self.nav.setObjectName("settingsNav")
        self.nav.setFixedWidth(148)
        self.nav.setSpacing(1)
        self.nav.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        for key in PAGE_KEYS:
            item = QListWidgetItem(NAV_TITLES[key])
            item.setData(Qt.ItemDataRole.UserRole, key)
            item.setSizeHint(QSize(0, 32))
            self.nav.addItem(item)
        side_layout.addWidget(self.nav, 1)
        root.addWidget(side)

        main = QVBoxLayout()
        main.setContentsMargins(20, 18, 20, 16)
        main.setSpacing(14)
        self.stack = QStackedWidget()
        for _key in PAGE_KEYS:
            self.stack.addWidget(QWidget())  # a page's box, filled when it is first shown
        self.nav.currentRowChanged.connect(self._row_chosen)
        main.addWidget(self.stack, 1)

        bottom = QHBoxLayout()
        bottom.setSpacing(8)
        self.message = role_label("", "error", wrap=True)
        bottom.addWidget(self.message, 1)
        self.message.setTextFormat(Qt.TextFormat.PlainText)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setAutoDefault(False)
        self.cancel_button.clicked.connect(self.request_close)
        self.save_button = QPushButton("Save")
        self.save_button.setProperty("accent", True)
        self.save_button.setDefault(True)
        self.save_button.clicked.connect(self._on_save_clicked)
        bottom.addWidget(self.cancel_button)
        bottom.addWidget(self.save_button)
        main.addLayout(bottom)
        root.addLayout(main, 1)

    def show_page(self, page: str) -> None:
        key: PageKey = page if page in PAGE_KEYS else "providers"
        self.page(key)
        row = PAGE_KEYS.index(key)
        self.nav.setCurrentRow(row)
        self.stack.setCurrentIndex(row)

    def _row_chosen(self, row: int) -> None:
        if row >= 0:
            self.show_page(PAGE_KEYS[row])

    def showEvent(self, event: QShowEvent) -> None:
        """Opened again: the page shown is built afresh (closing dropped the pages)."""
        self.show_page(self.current_page())
        super().showEvent(event)

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        if not self._registry_asked:  # after the first paint: the open does not wait
            self._registry_asked = True
            with contextlib.suppress(RuntimeError):  # no loop: Tools builds it when shown
                asyncio.get_event_loop().run_in_executor(None, _load_registry, self.runtime)

    def current_page(self) -> PageKey:
        return PAGE_KEYS[self.nav.currentRow()]

    # -- what changed --

    def _watch(self, key: PageKey, page: SettingsPage) -> None:
        page.edited.connect(lambda: self._page_edited(key))
        if not page.reports_edits:
            _InputWatcher(page, lambda: self._page_edited(key))

    def _page_edited(self, key: PageKey) -> None:
        page = self.pages.get(key)
        if page is None or not (isValid(self) and isValid(self.save_button) and isValid(page)):
            return  # the window is being destroyed, or the page was dropped
        self._touched.add(key)
        if self.has_changes(key):
            self._dirty.add(key)
        else:
            self._dirty.discard(key)
        if self.problem_labels[key].text() and page.reports_edits:
            self._mark(key, page.problem())  # form pages re-check at once
        self._refresh_save()

    def has_changes(self, key: PageKey | None = None) -> bool:
        """Whether page `key` (any page when None) has something to save."""
        if key is None:
            return bool(self._dirty)
        page = self.pages[key]
        known = page.has_changes()
        if known is not None:
            return known
        before = self.runtime.settings
        after = before.model_copy(deep=True)
        try:
            page.patch()(after)
        except Exception:  # a half-edited page: let the user try to save and see why
            return True
        if after != before:
            return True
        # writes elsewhere too (rules.json, the keyring): once edited, assume it changed
        writes_elsewhere = callable(getattr(page, "commit", None)) or hasattr(page, "store_keys")
        return writes_elsewhere and key in self._touched

    def _refresh_save(self) -> None:
        self.save_button.setEnabled(bool(self._dirty) and self._save_task is None)

    # -- problems --

    def _problems(self) -> dict[PageKey, str]:
        found: dict[PageKey, str] = {}
        for key, page in self.pages.items():
            problem = page.problem()
            self._mark(key, problem)
            if problem:
                found[key] = problem
        return found

    def _mark(self, key: PageKey, problem: str | None) -> None:
        """Show `problem` at the top of its page and mark the page in the list."""
        item = self.nav.item(PAGE_KEYS.index(key))
        label = self.problem_labels.get(key)
        if label is not None:  # (a page a test put in `pages` has no box)
            label.setText(problem or "")
            label.setVisible(bool(problem))
        item.setData(PROBLEM_ROLE, problem or None)
        item.setToolTip(problem or "")
        icon = QStyle.StandardPixmap.SP_MessageBoxWarning
        item.setIcon(self.style().standardIcon(icon) if problem else QIcon())

    def problem_of(self, key: PageKey) -> str | None:
        """The problem marked on page `key` by the last save (None: none)."""
        value = self.nav.item(PAGE_KEYS.index(key)).data(PROBLEM_ROLE)
        return str(value) if value else None

    # -- saving --

    async def save(self) -> bool:
        """Validate, store keys, write settings.json; True when everything was saved."""
        problems = self._problems()
        if problems:
            key = self.current_page() if self.current_page() in problems else next(iter(problems))
            self.show_page(key)
            where = "" if len(problems) == 1 else f" ({len(problems)} pages have a problem)"
            self._show_message(f"Nothing was saved{where}. {problems[key]}")
            return False
        patches = [page.patch() for page in self.pages.values()]

        def apply(settings: Settings) -> None:
            for patch in patches:
                patch(settings)

        self._show_message("")
        self.save_button.setEnabled(False)
        providers = cast("ProvidersPage | None", self.pages.get("providers"))
        key_changes = providers.pending_key_changes() if providers is not None else 0
        try:
            try:
                if providers is not None:
                    await providers.store_keys()
            except SecretStoreError as exc:
                self._show_message(keys_refused_message(str(exc), key_changes))
                return False
            try:
                saved = await in_thread(self.runtime.settings_store.update, apply)
            except (SecretInSettingsError, OSError) as exc:
                self._show_message(settings_not_written_message(exc, key_changes))
                return False
            try:
                await in_thread(self._commit_rules)
            except OSError as exc:
                # settings.json (and the keys) are saved: use them; the rules stay pending
                self.runtime.settings = saved
                self.settingsChanged.emit()
                self._show_message(
                    f"{'The settings and API keys were' if key_changes else 'The settings were'}"
                    f" saved, but the approval rules were not: {file_reason(exc)} "
                    "Press Save to try the rules again."
                )
                return False
        finally:
            self.save_button.setEnabled(True)
        self.runtime.settings = saved
        for page in self.pages.values():
            page.mark_saved(saved)
        self._dirty.clear()
        self._touched.clear()
        self._refresh_save()
        self.settingsChanged.emit()
        return True

    def _commit_rules(self) -> None:
        """(worker thread) Pages whose choices are approval rules write them to rules.json,
        after settings.json was saved."""
        for page in self.pages.values():
            commit = getattr(page, "commit", None)
            if callable(commit):
                commit()

    @asyncSlot()
    async def _on_save_clicked(self) -> None:
        self._save_task = asyncio.current_task()
        try:
            saved = await self.save()
        finally:
            self._save_task = None
            self._refresh_save()
        if saved:
            self.accept()

    def _show_message(self, text: str) -> None:
        self.message.setText(text)

    def request_close(self) -> bool:
        """Close as the user asked (Cancel, Escape, the window's close button): with unsaved
        changes, ask Save / Discard / Cancel first. True when the window closed."""
        if self._save_task is not None:
            return False  # a save is under way: it closes the window when it is done
        if self.has_changes():
            answer = ask_unsaved(self)
            if answer == "cancel":
                return False
            if answer == "save":
                self._on_save_clicked()
                return False
        self.reject()
        return True

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape and not event.modifiers():
            self.request_close()
            return
        super().keyPressEvent(event)

    def closeEvent(self, event: QCloseEvent) -> None:
        if event.spontaneous():  # the window's close button: ask like Cancel does
            event.ignore()
            self.request_close()
            return
        super().closeEvent(event)

    def reject(self) -> None:
        """Close without saving (no question: `request_close` asks), undoing a theme
        previewed on the General page."""
        general = cast("GeneralPage | None", self.pages.get("general"))
        if general is not None:
            general.revert_theme_preview()
        super().reject()

    def done(self, result: int) -> None:
        if self._save_task is None:  # never cut a save short half-way
            self._drop_pages()
        super().done(result)

    def _drop_pages(self) -> None:
        """Closing: cancel every task a page started and drop the pages (the next open
        builds them from the settings as they are then). The boxes go once the cancelled
        tasks have run their clean-up, which may still touch the page's widgets."""
        for page in self.pages.values():
            page.cancel_tasks()
        old: list[QWidget] = []
        for key in self.pages:
            row = PAGE_KEYS.index(key)
            box = self.stack.widget(row)
            assert box is not None
            old.append(box)
            self.stack.removeWidget(box)
            self.stack.insertWidget(row, QWidget())
            self._clear_mark(row)
        self.pages.clear()
        self.problem_labels.clear()
        self._dirty.clear()
        self._touched.clear()
        self._key_states = None
        self._show_message("")
        self._refresh_save()
        for box in old:  # out of the window at once: left in the stack, they crashed Qt
            box.setParent(None)
        with contextlib.suppress(RuntimeError):  # no loop any more: freed with `old`
            asyncio.get_event_loop().call_soon(_delete_all, old)

    def _clear_mark(self, row: int) -> None:
        item = self.nav.item(row)
        item.setData(PROBLEM_ROLE, None)
        item.setToolTip("")
        item.setIcon(QIcon())


def keys_refused_message(reason: str, key_changes: int) -> str:
    """The keyring refused a key change: settings.json was not written. Changes made
    before the refused one (there is an order) are kept in the keyring."""
    if key_changes <= 1:
        return f"Nothing was saved. {reason}"
    return (
        f"The settings were not saved: the keyring refused an API key change. {reason} "
        "Key changes made before it are kept in the keyring."
    )


def settings_not_written_message(exc: Exception, key_changes: int) -> str:
    """settings.json could not be written, after the key changes (if any) were made."""
    reason = file_reason(exc) if isinstance(exc, OSError) else str(exc)
    if key_changes:
        return (
            "The API keys were updated in the keyring, but the other settings were not "
            f"saved. {reason}"
        )
    if isinstance(exc, OSError):
        return f"Nothing was saved: the settings file could not be written. {reason}"
    return f"Nothing was saved. {reason}"


def file_reason(exc: OSError) -> str:
    """A file error in plain words: what the system said, and the file."""
    what = exc.strerror or str(exc) or "the file could not be written"
    where = f" ({exc.filename})" if exc.filename else ""
    return f"{what[:1].upper()}{what[1:]}{where}."


def _load_registry(runtime: Runtime) -> None:
    """(worker thread) Builds the tool registry the Tools page lists, unless it is built."""
    try:
        runtime.registry  # noqa: B018
    except Exception:  # the Tools page meets the same error and says so
        log.debug("could not load the tool registry", exc_info=True)


def _delete_all(widgets: list[QWidget]) -> None:
    for widget in widgets:
        if isValid(widget):
            widget.deleteLater()


def _fill_box(box: QWidget, page: SettingsPage) -> QLabel:
    """Puts the page in its box under its title, subtitle and problem line, scrolling
    when it is taller than the window; returns the problem label."""
    layout = QVBoxLayout(box)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(4)
    layout.addWidget(role_label(page.title, "heading"))
    layout.addWidget(muted_label(page.subtitle))
    problem = role_label("", "error", wrap=True)
    problem.setTextFormat(Qt.TextFormat.PlainText)
    problem.setObjectName("pageProblem")
    problem.hide()
    layout.addWidget(problem)
    layout.addSpacing(8)
    scroll = QScrollArea()
    scroll.setObjectName("settingsPageScroll")
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
    scroll.setStyleSheet("QScrollArea#settingsPageScroll { background: transparent; }")
    scroll.viewport().setAutoFillBackground(False)
    page.setAutoFillBackground(False)
    inner = QWidget()  # room between the page and the scroll bar
    column = QVBoxLayout(inner)
    column.setContentsMargins(0, 0, 12, 0)
    column.addWidget(page)
    scroll.setWidget(inner)
    layout.addWidget(scroll, 1)
    return problem


WATCHED = "settingsWatched"


class _InputWatcher(QObject):
    """Calls back whenever an input inside `page` changes — for pages that do not emit
    `edited` themselves. Inputs added later are picked up after the next click or new row."""

    def __init__(self, page: QWidget, callback: Any) -> None:
        super().__init__(page)
        self._page = page
        self._callback = callback
        self.scan()

    def scan(self) -> None:
        for widget in [self._page, *self._page.findChildren(QWidget)]:
            if not widget.property(WATCHED):
                widget.setProperty(WATCHED, True)
                self._hook(widget)

    def _changed(self, *_: Any) -> None:
        if isValid(self._page):  # not while the page is being destroyed
            self._callback()

    def _grown(self, *_: Any) -> None:
        if isValid(self._page):
            self.scan()
            self._callback()

    def _hook(self, w: QWidget) -> None:
        if isinstance(w, QAbstractButton):
            w.toggled.connect(self._changed)
            w.clicked.connect(self._grown)
        elif isinstance(w, QComboBox):
            w.currentIndexChanged.connect(self._changed)
            w.editTextChanged.connect(self._changed)
        elif isinstance(w, QLineEdit | QPlainTextEdit | QTextEdit):
            w.textChanged.connect(self._changed)
        elif isinstance(w, QAbstractSpinBox):
            signal = getattr(w, "valueChanged", None) or w.editingFinished
            signal.connect(self._changed)
        elif isinstance(w, QAbstractItemView) and w.model() is not None:
            model = w.model()
            model.dataChanged.connect(self._changed)
            for grows in (model.rowsInserted, model.rowsRemoved, model.modelReset):
                grows.connect(self._grown)
