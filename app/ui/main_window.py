"""The main window: conversations on the left, the chat on the right, the composer below."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import logging
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from PySide6.QtCore import QByteArray, QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QDesktopServices,
    QFont,
    QImage,
    QKeySequence,
    QPainter,
    QPaintEvent,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMenu,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QStackedLayout,
    QTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from app.core.threads import mark_gui_thread
from app.core.visible import visible
from app.ui.off_gui import run_off_gui
from app.ui.start_frame import StartPlaceholder
from app.ui.ui_state import UiState

if TYPE_CHECKING:
    from app.core.runtime import Runtime
    from app.core.store import Store
    from app.ui.reminders_view import RemindersView
    from app.ui.tasks_view import TasksView

log = logging.getLogger(__name__)
#: Link schemes a click in the conversation hands to the system (the text is untrusted).
SAFE_LINK_SCHEMES = frozenset({"http", "https", "mailto"})
UNDO_SECONDS = 10
#: The longest closing waits for a worker still reading the runtime (a slow kubeconfig).
WORKERS_WAIT = 5.0
T = TypeVar("T")
#: The smallest window in which nothing is clipped (sidebar shown).
MIN_WIDTH, MIN_HEIGHT = 720, 500
SIDEBAR_DEFAULT, SIDEBAR_MAX = 260, 480
SIDEBAR_SHORTCUT = "Ctrl+B"
#: Edit menu: (operation, label, standard keys, method called on the focused widget).
EDIT_OPERATIONS = (
    ("undo", "Undo", QKeySequence.StandardKey.Undo, "undo"),
    ("redo", "Redo", QKeySequence.StandardKey.Redo, "redo"),
    ("cut", "Cut", QKeySequence.StandardKey.Cut, "cut"),
    ("copy", "Copy", QKeySequence.StandardKey.Copy, "copy"),
    ("paste", "Paste", QKeySequence.StandardKey.Paste, "paste"),
    ("select_all", "Select All", QKeySequence.StandardKey.SelectAll, "selectAll"),
)
TEXT_WIDGETS = (QLineEdit, QPlainTextEdit, QTextEdit)

#: Indexing starts this long after the chat opens, so it never competes with start-up.
KNOWLEDGE_START_MS = 3000


def _warm_up(runtime: Runtime) -> None:
    """On a worker: what the first turn needs, and the code highlighter's commonest
    lexers (pygments compiles a lexer's patterns on its first use: 30–50 ms)."""
    from app.ui.chat.render import warm_lexers

    runtime.warm_up()
    runtime.warm_http()
    runtime.warm_file_places()
    warm_lexers()


class ElidedLabel(QLabel):
    """A one-line label that ends in "…" when it does not fit; `text()` stays whole."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)

    def sizeHint(self) -> QSize:
        margins = self.contentsMargins()
        width = self.fontMetrics().horizontalAdvance(self.text()) + margins.left()
        return QSize(width + margins.right() + 2, super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:
        return QSize(min(self.sizeHint().width(), 40), super().minimumSizeHint().height())

    def elided(self) -> str:
        """The text as painted at the current width."""
        return self.fontMetrics().elidedText(
            self.text(), Qt.TextElideMode.ElideRight, self.contentsRect().width()
        )

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.setFont(self.font())
        align = self.alignment() | Qt.AlignmentFlag.AlignVCenter
        painter.drawText(self.contentsRect(), int(align), self.elided())
        painter.end()


class UndoBar(QFrame):
    """ "Chat deleted · Undo" for a few seconds after a delete."""

    undoRequested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("undoBar")
        self.label = QLabel()
        self.button = QPushButton("Undo")
        self.button.setObjectName("linkButton")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 6, 8, 6)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.button)
        self._conversation = ""
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.hide)
        self.button.clicked.connect(self._undo)
        self.hide()

    def offer(self, conversation_id: str, title: str) -> None:
        self._conversation = conversation_id
        self.label.setText(f"Deleted “{title}”")
        self.show()
        self._timer.start(UNDO_SECONDS * 1000)

    def _undo(self) -> None:
        self.hide()
        self.undoRequested.emit(self._conversation)


class MainWindow(QMainWindow):
    settingsRequested = Signal(str)  # page
    quitRequested = Signal()
    #: Reminders may have changed (a tool ran, or the user edited them): plan again.
    remindersChanged = Signal()
    #: The Tasks window asks: run this task now / open its conversation / plan again.
    taskRunRequested = Signal(str)
    taskConversationRequested = Signal(str)
    tasksChanged = Signal()
    #: Review… on the bar of a task's conversation whose run waits (the question's key).
    taskQuestionReview = Signal(str)

    def __init__(
        self, runtime: Runtime | None = None, tray: Any = None, *, home: Path | None = None
    ) -> None:
        """With a runtime, the whole window. Without one, only its frame (`home` names
        the folder of its saved geometry): the start-up paints that first, then calls
        `build_early` and, once the runtime is up, `attach`."""
        super().__init__()
        folder = runtime.home if runtime is not None else home
        if folder is None:
            raise ValueError("MainWindow needs a runtime or a home folder")
        self._home = folder
        self.state_path = folder / "ui_state.json"
        self.ui_state = UiState.load(self.state_path)
        mark_gui_thread()  # blocking core work called from here is caught (app.core.threads)
        self.setWindowTitle("Deskhand")
        self.resize(1100, 760)
        self.setMinimumSize(MIN_WIDTH, MIN_HEIGHT)
        #: True once `attach` built the chat, sidebar and menus.
        self.attached = False
        self.closed_while_starting = False
        #: What closing the window (not quitting) does, when set (the App: hide to the
        #: tray, or ask whether to keep running). None: hide to a tray, else quit. Set
        #: before the window is put together, so a close while it is cannot be lost.
        self.close_handler: Callable[[], None] | None = None
        if self.ui_state.geometry:
            self.restoreGeometry(QByteArray(base64.b64decode(self.ui_state.geometry)))
        sidebar = self.ui_state.sidebar_width if self.ui_state.sidebar_visible else 0
        self.setCentralWidget(StartPlaceholder(sidebar))
        # the menu bar has its height from the first paint on (no relayout of the whole
        # window later); its menus fill in and are enabled once the window is whole
        self._menus = self._menu_titles()
        #: The chat pane's placeholder `build_early` made, until `attach` replaces it.
        self._early_pane: QWidget | None = None
        #: Where the message box goes in the chat pane `attach` builds, until it does.
        self._composer_slot: QWidget | None = None
        if runtime is not None:
            self.build_early(runtime.store)
            self.attach(runtime, tray)

    def build_early(
        self, store: Store | None = None, *, between: Callable[[], None] | None = None
    ) -> Store:
        """The chat list and the message box over the store alone (opened here when not
        given), before the runtime: the user can read the list and type while the rest
        starts (Send waits for it). `attach` keeps both widgets. Returns the store, for
        the runtime to adopt. `between` runs once the chat list is in and before the
        message box is made (start-up lets the window paint the list there)."""
        from app.core.paths import db_path
        from app.core.settings_file import read_general
        from app.core.store import Store
        from app.ui.composer import Composer
        from app.ui.sidebar import Sidebar

        if store is None:
            store = Store(db_path(self._home))
        self.sidebar = Sidebar(store)
        right = QWidget()
        right.setObjectName("chatPane")
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.setSpacing(0)
        right_layout.addWidget(StartPlaceholder(0, composer=False), 1)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.sidebar)
        splitter.addWidget(right)
        splitter.setStretchFactor(1, 1)
        splitter.setChildrenCollapsible(False)
        self.sidebar.setMaximumWidth(SIDEBAR_MAX)
        self.sidebar.setVisible(self.ui_state.sidebar_visible)
        width = self.ui_state.sidebar_width
        splitter.setSizes([width, max(0, self.width() - width)])
        self.setCentralWidget(splitter)
        self.splitter = splitter
        self._early_pane = right  # `attach` puts the chat pane in its place
        self.sidebar.refresh()
        # a chat picked while starting is the one `attach` opens (and a waiting Send goes to)
        self.sidebar.conversationSelected.connect(self._picked_while_starting)
        if between is not None:
            between()
        # the real message box under the placeholder: typing works at once, Send waits
        # for the rest of the window
        self.composer = Composer(home=self._home)
        self.composer.set_send_key(read_general(self._home).send_key)
        self.composer.hold(True)
        right_layout.addWidget(self.composer)
        self.composer.edit.setFocus()
        return store

    def _picked_while_starting(self, conversation_id: str) -> None:
        if not self.attached:
            self.ui_state.last_conversation = conversation_id

    def attach(self, runtime: Runtime, tray: Any = None) -> None:
        """Builds everything that needs the runtime into the frame (keeping the chat list
        and the message box `build_early` made, and what was typed in it)."""
        for _ in self.attach_steps(runtime, tray):
            pass

    def attach_steps(self, runtime: Runtime, tray: Any = None) -> Iterator[None]:
        """`attach` in parts of a few milliseconds each; the caller lets the event loop run
        between them (start-up), so the window keeps answering while it is put together.
        The window looks whole after each part: new parts join it in the last one."""
        from app.ui.controller import ChatController

        self.runtime = runtime
        self.tray = tray
        self.controller = ChatController(runtime, self)
        self.controller.password_asker = self._ask_file_password
        self._quitting = False
        self._warmed = False  # `_warm_up_once` ran
        self._sized = False  # the first show placed the splitter (no saved state)
        self._detect_task: asyncio.Future[None] | None = None
        self._knowledge_task: asyncio.Future[None] | None = None
        #: Work this window started on workers that reads the runtime: waited for at close,
        #: so nothing reads a closed store after the window is gone.
        self._workers: set[Future[Any]] = set()
        #: Set once the window stopped its background work (quitting): nothing new starts.
        self._stopped = False
        self.reminders_view: RemindersView | None = None  # built on first use
        self.tasks_view: TasksView | None = None  # built on first use
        #: The notice for a link the conversation did not open (for tests).
        self.refused_link: QMessageBox | None = None
        #: The question shown before a link opens (`app.core.links` decides when).
        self.link_prompt: Any = None
        #: How to tell the user something while hidden: (title, message, key); set by App.
        self.notify_user: Callable[[str, str, str], None] | None = None
        #: Where first-run looks for local servers (None: Ollama's and LM Studio's ports).
        self.local_candidates: list[tuple[str, str]] | None = None
        #: The MCP manager whose elicitation requests this window answers.
        self._elicitation_manager: Any = None
        pane = yield from self._build_steps()
        self._stage_chat_pane(pane)
        yield
        # the last chat opens in the pane while it is still hidden (its rows are laid out
        # now, not in the part that shows it); the chat list is not connected yet, so a
        # chat picked meanwhile is only noted (`_picked_while_starting`)
        self._connect()
        self.apply_text_size()
        restoring = self._last_conversation()
        self._open_keeping_typed(lambda: self._restore_chat(restoring))
        self._first_run_prompts()
        yield
        self._prerender_chat_pane(pane)
        yield
        # one part from here on: the pane shows with the menus and the chat list connected,
        # and a chat picked meanwhile is opened with what was typed kept
        had_focus = self.composer.edit.hasFocus()
        self._build_menus()
        self._connect_sidebar()
        self._show_chat_pane(pane)
        self._restore_layout()
        picked = self._last_conversation()
        if picked != restoring:
            self._open_keeping_typed(lambda: self._restore_chat(picked))
        self.attached = True
        self.attach_mcp()
        if had_focus:
            self.focus_composer()
        if self.isVisible():  # the frame was shown first
            self._shown(focus=True)
        if not self.closed_while_starting:  # quitting: the text is kept as a draft instead
            self.composer.hold(False)  # a Send pressed while starting goes now

    # ---- layout --------------------------------------------------------------------------

    def _build_steps(self) -> Generator[None, None, QWidget]:
        """The widgets in parts; returns the chat pane, which replaces the early
        placeholder in `_show_chat_pane`."""
        from app.ui.chat.elicitation_form import ElicitationPanel
        from app.ui.chat.view import ChatView
        from app.ui.folders_dialog import FoldersPrompt
        from app.ui.setup_card import SetupCard
        from app.ui.starter_prompts import StarterPrompts

        self.chat_view = ChatView()
        self.composer.set_send_key(self.runtime.settings.general.send_key)
        # MCP resources and prompts, once servers were started (never starts or imports them)
        self.composer.set_mcp(lambda: self.runtime.started_mcp)
        self.setup_card = SetupCard()
        self.folders_prompt = FoldersPrompt(self.runtime)
        self.folders_prompt.hide()
        self.undo_bar = UndoBar()
        from app.ui.task_question import TaskQuestionBar

        self.task_question_bar = TaskQuestionBar()
        #: conversation id → (question key, text) of runs waiting for an answer
        self._task_questions: dict[str, tuple[str, str]] = {}
        #: MCP servers' questions (elicitation), one form at a time, above the composer.
        self.elicitation = ElicitationPanel()
        self.starters = StarterPrompts()
        yield
        header = self._build_header()
        yield

        # the pane first: the pages added to the stack below get it as their parent at once
        # (a page without one would show as a window of its own for a moment)
        right = QWidget()
        right.setObjectName("chatPane")
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.setSpacing(0)
        right_layout.addWidget(header)
        prompt_row = QHBoxLayout()
        prompt_row.setContentsMargins(20, 12, 20, 0)
        prompt_row.addWidget(self.folders_prompt, 1)
        self.folders_prompt.setMaximumWidth(860)
        right_layout.addLayout(prompt_row)
        self.chat_stack = QStackedLayout()
        right_layout.addLayout(self.chat_stack, 1)
        setup_inner = QWidget()
        setup_layout = QVBoxLayout(setup_inner)
        setup_layout.addStretch(1)
        setup_layout.addWidget(self.setup_card, 0, Qt.AlignmentFlag.AlignHCenter)
        setup_layout.addStretch(2)
        # scrolls when the pane is narrower than the card, rather than widening the window
        setup_page = QScrollArea()
        setup_page.setObjectName("setupPage")
        setup_page.setWidgetResizable(True)
        setup_page.setFrameShape(QFrame.Shape.NoFrame)
        setup_page.setWidget(setup_inner)
        setup_page.viewport().setAutoFillBackground(False)
        setup_inner.setAutoFillBackground(False)
        # the starter prompts lie over the chat view while the conversation is empty
        chat_page = QWidget()
        chat_grid = QGridLayout(chat_page)
        chat_grid.setContentsMargins(0, 0, 0, 0)
        chat_grid.addWidget(self.chat_view, 0, 0)
        chat_grid.addWidget(self.starters, 0, 0)
        self.chat_stack.addWidget(chat_page)
        self.chat_stack.addWidget(setup_page)
        yield

        right_layout.addWidget(self.elicitation)
        right_layout.addWidget(self.undo_bar)
        right_layout.addWidget(self.task_question_bar)
        # the pane takes the placeholder's place later (`_show_chat_pane`); where the
        # early message box will go is kept at its height meanwhile, so the pane is laid
        # out as it will show
        self._composer_slot = QWidget()
        right_layout.addWidget(self._composer_slot)
        return right

    def _stage_chat_pane(self, pane: QWidget) -> None:
        """The new chat pane goes into the window hidden, laid out at the size it will show
        at (the last chat's rows then open at their width), a turn of the loop before it
        takes the placeholder's place."""
        pane.hide()
        self.splitter.addWidget(pane)  # (the splitter owns it)
        self._lay_out_like_placeholder(pane)

    def _lay_out_like_placeholder(self, pane: QWidget) -> QSize | None:
        """The hidden pane's widgets placed at the size the pane will show at (the
        placeholder's); None when there is nothing to match."""
        placeholder, slot = self._early_pane, self._composer_slot
        if placeholder is None or slot is None or placeholder.size().isEmpty():
            return None
        size = placeholder.size()
        slot.setFixedHeight(self.composer.height())
        pane.resize(size)
        layout = pane.layout()
        if layout is not None:
            layout.activate()
        return size

    def _prerender_chat_pane(self, pane: QWidget) -> None:
        """The hidden pane painted once into an image at the size it will show at: its
        first paint's one-time work (style sheet rules, text layouts, glyphs, icons: about
        5 ms) is done here, not in the part that shows it with the whole window's repaint.
        Not for a window that is not on screen (started hidden, or closed meanwhile)."""
        if not self.isVisible() or self.closed_while_starting:
            return
        # again: the splitter gave the hidden pane no size meanwhile (its widgets kept theirs)
        size = self._lay_out_like_placeholder(pane)
        if size is None:
            return
        ratio = self.devicePixelRatioF()  # the caches warmed are the screen's own
        image = QImage(
            round(size.width() * ratio),
            round(size.height() * ratio),
            QImage.Format.Format_ARGB32_Premultiplied,
        )
        image.setDevicePixelRatio(ratio)
        pane.render(image)

    def _show_chat_pane(self, pane: QWidget) -> None:
        """The chat pane built around the early composer takes the placeholder's place;
        the chat list stays put."""
        placeholder, self._early_pane = self._early_pane, None
        slot, self._composer_slot = self._composer_slot, None
        layout = pane.layout()
        assert placeholder is not None and slot is not None and layout is not None
        # the message box goes in the place kept for it: nothing else in the pane moves
        layout.replaceWidget(slot, self.composer)
        slot.hide()
        slot.deleteLater()
        sizes = self.splitter.sizes()  # chat list, placeholder, hidden pane
        # the pane shows and takes the placeholder's width before the placeholder leaves
        # the splitter: taken out first, it left the splitter a moment with nothing on the
        # right, which squeezed it to 480 px for the first paint and laid every row out twice
        placeholder.hide()
        pane.show()
        self.splitter.setStretchFactor(self.splitter.indexOf(pane), 1)
        self.splitter.setSizes([sizes[0], 0, sizes[1]])
        placeholder.setParent(None)
        placeholder.deleteLater()

    def _build_header(self) -> QFrame:
        """The chat's title, the accounts and model in use, and the sidebar's toggle."""
        self.title_label = ElidedLabel("New chat")
        self.title_label.setObjectName("chatTitle")
        from app.ui.model_picker import ModelPicker

        self.model_picker = ModelPicker(self.runtime)
        self.model_picker.setObjectName("modelPicker")
        self.accounts_label = ElidedLabel()
        self.accounts_label.setObjectName("modelLabel")
        self.accounts_label.setAlignment(Qt.AlignmentFlag.AlignRight)
        self.accounts_label.setToolTip(
            "Active accounts: tools act on these. Switch in Settings → Integrations, "
            "or ask Deskhand to switch."
        )
        self.accounts_label.hide()  # until there are accounts to name
        self.sidebar_button = self._header_button("sidebar", "Hide the chat list", "sidebarToggle")
        self.sidebar_button.setCheckable(True)
        self.sidebar_button.setChecked(True)
        self.header_new_button = self._header_button("compose", "New chat (Ctrl+N)", "headerNew")
        self.header_new_button.hide()  # shown while the sidebar (and its New chat) is hidden
        header = QFrame()
        header.setObjectName("chatHeader")
        layout = QHBoxLayout(header)
        layout.setContentsMargins(8, 6, 20, 6)
        layout.setSpacing(6)
        layout.addWidget(self.sidebar_button)
        layout.addWidget(self.header_new_button)
        layout.addSpacing(6)
        layout.addWidget(self.title_label, 1)
        layout.addSpacing(12)
        layout.addWidget(self.accounts_label)
        layout.addSpacing(12)
        layout.addWidget(self.model_picker)
        return header

    def _header_button(self, icon: str, tip: str, name: str) -> QToolButton:
        button = QToolButton()
        button.setObjectName(name)
        from app.ui.icons import line_icon

        button.setIcon(line_icon(icon))
        button.setIconSize(QSize(18, 18))
        button.setAutoRaise(True)
        button.setToolTip(tip)
        button.setAccessibleName(tip.split(" (")[0])
        return button

    def _action(self, menu: Any, text: str, shortcut: str | None, slot: Any) -> QAction:
        action = QAction(text, self)
        if shortcut:
            action.setShortcut(QKeySequence(shortcut))
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def _build_edit_actions(self, menu: QMenu) -> None:
        """Undo … Select All, acting on the focused widget. A focused text field takes its
        standard keys itself (Qt asks it first), so these never steal Ctrl+C from it."""
        self.edit_actions: dict[str, QAction] = {}
        for op, text, key, _method in EDIT_OPERATIONS:
            action = QAction(text, self)
            action.setShortcuts(QKeySequence.keyBindings(key))
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            action.triggered.connect(functools.partial(self.edit_focused, op))
            menu.addAction(action)
            self.edit_actions[op] = action
            if op == "redo":
                menu.addSeparator()
        menu.aboutToShow.connect(self.update_edit_actions)
        self._edit_watched: QWidget | None = None
        app = QApplication.instance()
        if isinstance(app, QApplication):
            app.focusChanged.connect(self._focus_changed)

    def _menu_titles(self) -> tuple[QMenu, QMenu, QMenu, QMenu]:
        """The menu bar's four menus, empty (and disabled) until `_build_menus`."""
        bar = self.menuBar()
        menus = (
            bar.addMenu("&File"),
            bar.addMenu("&Edit"),
            bar.addMenu("&View"),
            bar.addMenu("&Chat"),
        )
        for menu in menus:
            menu.setEnabled(False)  # no empty menu opens while the window starts
        return menus

    def _build_menus(self) -> None:
        file_menu, edit_menu, view_menu, chat_menu = menus = self._menus
        for menu in menus:
            menu.setEnabled(True)
        self.new_action = self._action(file_menu, "New chat", "Ctrl+N", self.new_chat)
        self.settings_action = self._action(
            file_menu, "Settings…", "Ctrl+,", lambda: self.settingsRequested.emit("providers")
        )
        file_menu.addSeparator()
        self._action(file_menu, "Close window", "Ctrl+W", self.close)
        self._action(file_menu, "Quit", "Ctrl+Q", self.quitRequested.emit)
        self._build_edit_actions(edit_menu)
        edit_menu.addSeparator()
        self._action(edit_menu, "Search chats", "Ctrl+K", self.search_chats)
        self._action(edit_menu, "Focus message box", "Ctrl+L", self.focus_composer)
        self.sidebar_action = self._action(
            view_menu, "Show chat list", SIDEBAR_SHORTCUT, self.toggle_sidebar
        )
        self.sidebar_action.setCheckable(True)
        self.sidebar_action.setChecked(True)
        self.stop_action = self._action(chat_menu, "Stop", "Esc", self.controller.stop_all)
        self.stop_action.setEnabled(False)
        self.controller.jobsChanged.connect(lambda _n: self._update_stop_action())
        self.rename_action = self._action(chat_menu, "Rename", "F2", self.rename_current)
        self.delete_action = self._action(chat_menu, "Delete", None, self.delete_current)
        self.chat_knowledge_action = self._action(
            chat_menu, "Knowledge folder for this chat…", None, self.pick_chat_knowledge
        )
        chat_menu.addSeparator()
        self.reminders_action = self._action(
            chat_menu, "Reminders…", "Ctrl+R", lambda: self.show_reminders()
        )
        self.tasks_action = self._action(chat_menu, "Tasks…", "Ctrl+T", lambda: self.show_tasks())

    def _connect(self) -> None:
        # the first keystroke loads what the first turn needs, off the GUI thread
        self.composer.edit.typed.connect(self._warm_up_once)
        self.starters.chosen.connect(self._warm_up_once)
        c = self.controller
        c.agentEvent.connect(self._on_event)
        c.busyChanged.connect(self._on_busy)
        c.conversationsChanged.connect(self.sidebar.refresh)
        c.conversationOpened.connect(self._on_opened)
        c.approvalPending.connect(self._on_approval_pending)
        c.setupNeeded.connect(lambda _: self.show_setup(True))
        c.notice.connect(lambda text: self.chat_view.add_error(text))
        self.elicitation.asked.connect(self._on_elicitation)
        self.chat_view.approvalDecided.connect(c.decide)
        self.chat_view.retryRequested.connect(c.retry)
        self.chat_view.linkActivated.connect(self._open_link)
        self.chat_view.conversationRequested.connect(self._open_requested_conversation)
        self.chat_view.submit_edit = c.edit_and_resend
        self.chat_view.connectRequested.connect(lambda: self.settingsRequested.emit("providers"))
        self.chat_view.regenerateRequested.connect(c.regenerate)
        self.chat_view.branchRequested.connect(c.switch_branch)
        self.chat_view.editable_text = c.editable_text
        c.historyReset.connect(self._reload_history)
        c.waiting.connect(self.chat_view.set_waiting)
        c.modelChanged.connect(self._show_model_choice)
        self.model_picker.chosen.connect(lambda account, model: c.set_model(account or None, model))
        self.model_picker.connectRequested.connect(lambda: self.settingsRequested.emit("providers"))
        self.composer.sendRequested.connect(self.send)
        self.composer.stopRequested.connect(c.stop)
        self.sidebar_button.clicked.connect(self.toggle_sidebar)
        self.header_new_button.clicked.connect(self.new_chat)
        self.starters.chosen.connect(self.use_starter)
        model = self.chat_view.model()
        for signal in (model.rowsInserted, model.rowsRemoved, model.modelReset):
            signal.connect(self._update_starters)
        self.undo_bar.undoRequested.connect(self.undo_delete)
        self.task_question_bar.reviewRequested.connect(self.taskQuestionReview)
        self.setup_card.settingsRequested.connect(lambda: self.settingsRequested.emit("providers"))
        self.setup_card.modelsRequested.connect(lambda: self.settingsRequested.emit("providers"))
        self.setup_card.useServerRequested.connect(self.use_local_server)
        self.setup_card.modelReady.connect(self.use_local_model)
        runtime = self.runtime
        self.setup_card.set_models_source(lambda: runtime.local_models)

    def _connect_sidebar(self) -> None:
        """The chat list's requests: connected in the part that finishes the window, so a
        chat picked while it is put together is noted, then opened once."""
        self.sidebar.conversationSelected.connect(self.open_conversation)
        self.sidebar.newChatRequested.connect(self.new_chat)
        self.sidebar.renameRequested.connect(self.rename)
        self.sidebar.deleteRequested.connect(self.delete)
        self.sidebar.titleChanged.connect(self._on_title_changed)
        self.sidebar.searchDismissed.connect(self.focus_composer)

    def _warm_up_once(self, *_args: object) -> Future[None] | None:
        """Starts `Runtime.warm_up` on a worker thread the first time; later calls do
        nothing (None)."""
        if self._warmed:
            return None
        self._warmed = True
        runtime = self.runtime
        return self._tracked(run_off_gui(lambda: _warm_up(runtime)))

    def _tracked(self, future: Future[T]) -> Future[T]:
        self._workers.add(future)
        future.add_done_callback(self._workers.discard)
        return future

    # ---- state ---------------------------------------------------------------------------

    def _open_keeping_typed(self, open_chat: Callable[[], None]) -> None:
        """Opens a chat while the window starts: what was typed meanwhile stays in the
        message box (a held Send sends it there), and the chats' own saved drafts stay
        saved, neither sent with it nor overwritten."""
        typed = self.composer.text()
        if typed.strip():  # the chat left keeps its own draft, not what was typed
            current = self.controller.conversation_id or ""
            self.composer.set_text(self.ui_state.drafts.get(current, ""))
        open_chat()
        if typed.strip():
            draft = self.composer.text()
            if draft.strip():
                self.ui_state.drafts[self.controller.conversation_id or ""] = draft
            self.composer.set_text(typed)

    def _last_conversation(self) -> str | None:
        last = self.ui_state.last_conversation
        if last and self.runtime.store.get_conversation(last) is not None:
            return last
        return None

    def _restore_layout(self) -> None:
        state = self.ui_state  # the geometry was restored with the frame
        if state.splitter:
            self.splitter.restoreState(QByteArray(base64.b64decode(state.splitter)))
        self.set_sidebar_visible(state.sidebar_visible)

    def _restore_chat(self, conversation_id: str | None) -> None:
        self.sidebar.refresh()
        if conversation_id is not None:
            self.open_conversation(conversation_id)
        else:
            self.new_chat()
        self.refresh_provider()

    def _first_run_prompts(self) -> None:
        """Once the chat is open: the accounts line, the folders question on a first run,
        and the notices waiting to be shown."""
        QTimer.singleShot(300, self.refresh_accounts)  # after the first paint
        # the knowledge folders are watched while the window is open, once it has settled
        QTimer.singleShot(KNOWLEDGE_START_MS, self._start_knowledge)
        # first run (or an upgrade from an empty folder list): ask, without blocking
        from app.ui.folders_dialog import needs_asking

        if needs_asking(self.runtime.settings):
            self.folders_prompt.show()
            QTimer.singleShot(300, self.folders_prompt.suggest)  # after the first paint
        self.show_notices()

    def pick_chat_knowledge(self) -> None:
        """A folder searchable in this conversation only (Settings → Knowledge holds the
        ones every conversation searches)."""
        from PySide6.QtWidgets import QFileDialog

        path = QFileDialog.getExistingDirectory(self, "A folder this chat searches")
        if path:
            self._knowledge_task = asyncio.ensure_future(self.add_chat_knowledge(path))

    async def add_chat_knowledge(self, path: str) -> None:
        from app.core.events import Notice

        title = f"Knowledge: {Path(path).name}"
        conversation_id = await self.controller.stored_conversation(title)
        knowledge = self.runtime.knowledge
        try:
            folder = await asyncio.wrap_future(
                run_off_gui(lambda: knowledge.add_folder(path, conversation_id))
            )
        except ValueError as exc:
            self.chat_view.add_error(f"Not added as knowledge: {exc}")
            return
        self._tracked(run_off_gui(knowledge.start))  # indexing runs (it may not have yet)
        self.chat_view.handle_event(
            Notice(
                f"{folder.path} is now knowledge for this chat: it is being indexed, and "
                "the assistant can search it in this conversation."
            )
        )

    async def _ask_file_password(self, name: str, reason: str) -> str | None:
        from app.ui.password_prompt import ask_file_password

        return await ask_file_password(self, name, reason)

    def _start_knowledge(self) -> None:
        runtime = self.runtime
        self._tracked(run_off_gui(runtime.start_knowledge))

    def show_notices(self) -> None:
        """What changed and why (e.g. after an upgrade), shown once in the conversation."""
        from app.core.events import Notice

        try:
            notices = self.runtime.take_notices()
        except Exception as exc:  # the window must open even if settings cannot be written
            log.warning("could not read the pending notices: %s", exc)
            return
        for text in notices:
            self.chat_view.handle_event(Notice(text))

    def save_state(self) -> None:
        self.ui_state.geometry = base64.b64encode(bytes(self.saveGeometry().data())).decode()
        self.ui_state.splitter = base64.b64encode(bytes(self.splitter.saveState().data())).decode()
        self.ui_state.sidebar_visible = self.sidebar_visible
        if self.sidebar.isVisible():
            self.ui_state.sidebar_width = self.sidebar.width()
        self.ui_state.last_conversation = self.controller.conversation_id
        self.ui_state.drafts[self.controller.conversation_id or ""] = self.composer.text()
        self.ui_state.drafts = {k: v for k, v in self.ui_state.drafts.items() if v.strip()}
        self.ui_state.save(self.state_path)

    def refresh_provider(self) -> None:
        """After start-up or a settings change: the header's model, the setup card."""
        settings = self.runtime.settings
        self.composer.set_send_key(settings.general.send_key)
        self._show_model_choice()  # the lists it fetched stay (a new account is fetched)
        if settings.active_provider_account() is None:
            self.show_setup(self.chat_view.message_count() == 0)
            return
        self.show_setup(False)

    def _show_model_choice(self) -> None:
        """The header shows the open conversation's model (its own, else the default)."""
        self.model_picker.set_choice(*self.controller.model_choice())

    def refresh_accounts(self) -> Future[None]:
        """Shows which accounts tools act on (e.g. "Kubernetes: prod"), where it matters.
        Reading them parses kubeconfig YAML and Docker contexts, so it runs on a worker and
        the header follows when it is done; the future is done once the header shows them."""
        shown: Future[None] = Future()
        if self._stopped:  # a timer that fired after quitting: the runtime may be closed
            shown.set_result(None)
            return shown

        def show(summary: list[tuple[str, str]]) -> None:
            if isValid(self.accounts_label):
                text = "  ·  ".join(f"{title}: {label}" for title, label in summary)
                self.accounts_label.setText(text)
                self.accounts_label.setVisible(bool(text))
            shown.set_result(None)

        self._tracked(run_off_gui(self._read_active_accounts, show))
        return shown

    def _read_active_accounts(self) -> list[tuple[str, str]]:
        try:
            return self.runtime.accounts.active_summary()
        except Exception as exc:  # the header must never break the window
            log.warning("could not read the active accounts: %s", exc)
            return []

    def show_setup(self, visible: bool) -> None:
        self.chat_stack.setCurrentIndex(1 if visible else 0)
        self._update_starters()
        if visible and self.isVisible():
            self._start_detection()

    def _start_detection(self) -> None:
        """Looks for local servers once the window is on screen and the loop runs."""
        try:
            loop = asyncio.get_event_loop()
        except RuntimeError:  # no loop on this thread (the window closing, or a bare test)
            return
        if not loop.is_running():
            QTimer.singleShot(200, self._start_detection)  # start-up is not finished yet
            return
        if self._detect_task is None or self._detect_task.done():
            self._detect_task = asyncio.ensure_future(self._detect_servers())

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self.attached:  # else `attach` does this once the chat is built
            self._shown(focus=not event.spontaneous())

    def _shown(self, *, focus: bool) -> None:
        if self.chat_stack.currentIndex() == 1:
            QTimer.singleShot(0, self._start_detection)
        if focus and self.focusWidget() in (None, self.sidebar.new_button):
            self.focus_composer()  # typing can start at once
        if not self.ui_state.splitter and self.sidebar_visible and not self._sized:
            self._sized = True  # first run: a narrower list in a small window
            width = min(SIDEBAR_DEFAULT, max(self.sidebar.minimumWidth(), self.width() // 4))
            self.splitter.setSizes([width, max(0, self.splitter.width() - width)])

    async def _detect_servers(self) -> None:
        from app.core.local_servers import DEFAULTS, detect_local_servers

        self.setup_card.look_for_model()  # the model to offer for this computer
        servers = await detect_local_servers(candidates=self.local_candidates or DEFAULTS)
        self.setup_card.show_servers(servers)

    def use_local_server(self, server: Any) -> None:
        from app.core.settings import ProviderAccount

        account = ProviderAccount(
            kind=server.kind,
            label=server.name,
            base_url=server.base_url,
            model=server.models[0] if server.models else "",
        )

        def add(settings: Any) -> None:
            settings.providers.append(account)
            settings.active_provider = account.id

        self.runtime.settings = self.runtime.settings_store.update(add)
        self.refresh_provider()

    def use_local_model(self, model: Any) -> None:
        """A model downloaded or a model file added on the setup card: the built-in engine
        runs it from now on, and typing can start."""
        self.runtime.local_models.use(model)
        self.refresh_provider()
        self.focus_composer()

    # ---- actions -------------------------------------------------------------------------

    def focus_composer(self) -> None:
        self.composer.edit.setFocus(Qt.FocusReason.OtherFocusReason)

    def search_chats(self) -> None:
        """Ctrl+K: the search field (the chat list is shown first if it was hidden)."""
        self.set_sidebar_visible(True)
        self.sidebar.focus_search()

    def use_starter(self, prompt: str) -> None:
        """A starter prompt was chosen: into the message box, not sent, ready to edit."""
        self.composer.set_text(prompt)
        self.focus_composer()

    def _update_starters(self, *_: object) -> None:
        empty = self.chat_view.model().rowCount() == 0
        self.starters.setVisible(empty and self.chat_stack.currentIndex() == 0)

    def send(self, text: str, attachments: list[str]) -> None:
        if self.chat_stack.currentIndex() == 1 and self.runtime.settings.active_provider_account():
            self.show_setup(False)
        self.chat_stack.setCurrentIndex(0)
        self.chat_view.add_user_message(text, attachments)
        self.controller.send(text, attachments)

    def new_chat(self) -> None:
        self._stash_draft()
        self.controller.new_chat()
        self.focus_composer()

    def _update_stop_action(self) -> None:
        """Esc stops a turn, and the conversation's jobs that outlived theirs."""
        self.stop_action.setEnabled(self.controller.busy or self.controller.running_jobs() > 0)

    def _open_requested_conversation(self, conversation_id: str) -> None:
        """A card's link to another conversation (a sub-agent's run); not while a turn runs
        here (opening would stop it)."""
        if not self.controller.busy:
            self.open_conversation(conversation_id)

    def open_conversation(self, conversation_id: str) -> None:
        self._stash_draft()
        messages = self.controller.open(conversation_id)
        self._reload_history(messages)
        self.focus_composer()

    def _reload_history(self, messages: list[Any] | None = None) -> None:
        """Shows the controller's conversation as stored: messages, tool calls, markers and
        branch points (after opening it, and after an edit, regenerate or branch switch).
        `messages`: the stored ones `controller.open` gave, so showing a chat never waits
        for its tools and agent, which build on a worker."""
        conversation_id = self.controller.conversation_id
        if conversation_id is None:
            return
        if messages is None:
            conversation = self.controller.conversation
            if conversation is None:
                return
            messages = conversation.messages
        markers, branches = self.controller.conversation_marks()
        self.chat_view.load_history(
            messages,
            self.runtime.store.list_tool_calls(conversation_id),
            markers,
            branches,
        )

    def _open_link(self, url: str) -> None:
        """A link clicked in the conversation. Its address and text came from the model, a
        page or a tool: `app.core.links` decides, like a browser navigation, whether it
        opens, asks first (showing its real target) or is refused (anything but web and
        mail addresses: a file or custom scheme could run a program)."""
        from app.core import links

        text = self.chat_view.clicked_link_text(url)
        conversation = self.controller.conversation
        session = conversation.session if conversation is not None else None
        runtime = self.runtime
        state = links.state_of(
            session,
            runtime.settings,
            runtime.rules,
            runtime.trust,
            self.controller.conversation_id,
            home=runtime.home,
        )
        decision = links.decide(url, text, state)
        if decision.action == "open":
            self._open_decided_link(decision, session)
        elif decision.action == "confirm":
            from app.ui.chat.link_prompt import LinkPrompt

            prompt = LinkPrompt(decision, self)
            prompt.openRequested.connect(lambda _url: self._open_decided_link(decision, session))
            prompt.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            prompt.open()
            self.link_prompt = prompt
        else:
            self._refuse_link(url, decision.reasons[0] if decision.reasons else "")

    def _open_decided_link(self, decision: Any, session: Any) -> None:
        """Opens exactly the address `app.core.links` rewrote and showed."""
        from app.core import links

        address = QUrl(decision.url, QUrl.ParsingMode.StrictMode)
        if address.scheme().lower() == "file" and address.isValid():
            from app.ui.chat.link_prompt import open_file_link

            refused = open_file_link(decision)  # checked again: still a document, still there
            if refused is not None:
                self._refuse_link(decision.url, refused)
            return
        if address.scheme().lower() not in SAFE_LINK_SCHEMES or not address.isValid():
            self._refuse_link(decision.url, "Deskhand could not read this address.")
            return
        links.remember_opened(session, decision)
        QDesktopServices.openUrl(address)

    def _refuse_link(self, url: str, reason: str) -> None:
        box = QMessageBox(self)
        box.setIcon(QMessageBox.Icon.Information)
        box.setWindowTitle("Link not opened")
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.setText(reason or "Deskhand opens only web and mail links from a conversation.")
        box.setInformativeText(visible(url[:500], keep_newlines=False))
        copy = box.addButton("Copy address", QMessageBox.ButtonRole.ActionRole)
        box.addButton(QMessageBox.StandardButton.Close)
        copy.clicked.connect(lambda: QApplication.clipboard().setText(url))
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()
        self.refused_link = box

    def _stash_draft(self) -> None:
        self.ui_state.drafts[self.controller.conversation_id or ""] = self.composer.text()

    def _on_opened(self, conversation_id: str) -> None:
        if not conversation_id:
            self.chat_view.clear()
            self._set_title("New chat")
        else:
            conv = self.runtime.store.get_conversation(conversation_id)
            self._set_title(conv.title if conv else "Chat")
        self.sidebar.select(conversation_id or None)
        self._show_task_question()
        draft = self.ui_state.drafts.pop(conversation_id, "")
        if not self.controller.busy:
            self.composer.set_text(draft)
        self.refresh_provider()

    def _set_title(self, title: str) -> None:
        from app.ui.plain_text import plain_tooltip
        from app.ui.sidebar import flat

        self.title_label.setText(flat(title))
        self.title_label.setToolTip(plain_tooltip(title))

    def _on_title_changed(self, conversation_id: str, title: str) -> None:
        if conversation_id == self.controller.conversation_id:
            self._set_title(title)

    def rename_current(self) -> None:
        """F2 / Chat → Rename: the title is edited in place in the chat list (the one
        selected there when the list has focus), else in a dialog."""
        target = self.controller.conversation_id
        focused = self.sidebar.list.currentItem() if self.sidebar.list.hasFocus() else None
        if focused is not None:
            target = focused.data(Qt.ItemDataRole.UserRole)
        if not target:
            return
        if not self.sidebar.start_rename(target):
            self.rename(target)

    def delete_current(self) -> None:
        if self.controller.conversation_id:
            self.delete(self.controller.conversation_id)

    def rename(self, conversation_id: str) -> None:
        conv = self.runtime.store.get_conversation(conversation_id)
        if conv is None:
            return
        title, ok = QInputDialog.getText(self, "Rename chat", "Title:", text=conv.title)
        if ok and title.strip():
            self.runtime.store.rename_conversation(conversation_id, title.strip())
            self.sidebar.refresh()
            if conversation_id == self.controller.conversation_id:
                self._set_title(title.strip())

    def delete(self, conversation_id: str) -> None:
        conv = self.runtime.store.get_conversation(conversation_id)
        if conv is None:
            return
        self.runtime.store.delete_conversation(conversation_id)
        if conversation_id == self.controller.conversation_id:
            self.new_chat()
        self.sidebar.refresh()
        self.undo_bar.offer(conversation_id, conv.title)

    def undo_delete(self, conversation_id: str) -> None:
        self.runtime.store.restore_conversation(conversation_id)
        self.sidebar.refresh()
        self.open_conversation(conversation_id)

    # ---- agent events --------------------------------------------------------------------

    def _on_event(self, event: Any) -> None:
        from app.core.events import Error, Notice, ToolCallFinished, TurnFinished

        self.chat_view.handle_event(event)
        if isinstance(event, TurnFinished | Error):
            self.refresh_accounts()  # the model may have switched one
            conv = self.controller.conversation_id
            if conv:
                record = self.runtime.store.get_conversation(conv)
                if record:
                    self._set_title(record.title)
        if isinstance(event, Notice):
            log.warning(event.message)
        if isinstance(event, ToolCallFinished | TurnFinished):
            self.remindersChanged.emit()  # the model may have created or changed one

    def _on_busy(self, busy: bool) -> None:
        self.composer.set_busy(busy)
        self.chat_view.set_busy(busy)
        self._update_stop_action()
        self._update_starters()
        if busy:
            self.attach_mcp()  # the servers may have started since (their tools run now)
        else:
            self.chat_view.finish_streaming()
            if self.controller.conversation is not None:
                self.chat_view.sync_indices(
                    self.controller.conversation.messages, self.controller.branches()
                )
            self.elicitation.cancel_calls()  # the calls they came during are over

    def _on_approval_pending(self, call_id: str, tool: str) -> None:
        if not self.isVisible() or self.isMinimized():
            self._tell("Deskhand needs your approval", f"{tool} is waiting for you.", "chat:")

    def _on_elicitation(self) -> None:
        if not self.isVisible() or self.isMinimized():
            # no server text here: notifications may interpret markup
            self._tell(
                "An MCP server is asking you something",
                "Open Deskhand to answer or decline.",
                "chat:",
            )

    def _tell(self, title: str, message: str, key: str) -> None:
        """A notification while the window is hidden: native when the app gave a way
        (`notify_user`, also without a tray), else the tray's balloon."""
        if self.notify_user is not None:
            self.notify_user(title, message, key)
        elif self.tray is not None:
            self.tray.notify(title, message, key=key)

    def attach_mcp(self) -> bool:
        """Once the runtime has its MCP manager, the servers' questions (elicitation)
        come to this window's form. The manager is never created here: it and the SDK stay
        off the start-up path. True when the form answers them."""
        manager = self.runtime.started_mcp
        if manager is None:
            return False
        if manager is not self._elicitation_manager:
            manager.set_elicitation_handler(self.elicitation.bridge)
            self._elicitation_manager = manager
        return True

    def apply_settings(self) -> None:
        self.runtime.settings = self.runtime.settings_store.load()
        self.model_picker.refresh()  # keys or addresses may have changed: ask again
        self.refresh_provider()
        self.refresh_accounts()
        self.apply_text_size()

    def apply_text_size(self) -> None:
        """Settings → General's chat text size, for the conversation and the composer."""
        points = self.runtime.settings.general.font_size
        self.chat_view.set_text_size(points)
        font = QFont(QApplication.font())
        if points > 0:
            font.setPointSize(points)
        self.composer.edit.setFont(font)

    # ---- reminders -----------------------------------------------------------------------

    def show_reminders(self, select: str | None = None) -> RemindersView:
        """Opens the window with the Reminders view in front, `select` selected if given."""
        from app.ui.reminders_view import RemindersView

        self.bring_to_front()
        if self.reminders_view is None:
            self.reminders_view = RemindersView(self.runtime.reminders, self)
            self.reminders_view.changed.connect(self.remindersChanged)
        view = self.reminders_view
        view.refresh()
        if select is not None:
            view.select(select)
        view.show()
        view.raise_()
        view.activateWindow()
        return view

    # ---- tasks ---------------------------------------------------------------------------

    def show_tasks(self, select: str | None = None) -> TasksView:
        """Opens the Tasks window, `select` selected if given."""
        from app.ui.tasks_view import TasksView

        self.bring_to_front()
        if self.tasks_view is None:
            self.tasks_view = TasksView(self.runtime.tasks, self)
            self.tasks_view.runNowRequested.connect(self.taskRunRequested)
            self.tasks_view.openConversationRequested.connect(self.taskConversationRequested)
            self.tasks_view.changed.connect(self.tasksChanged)
        view = self.tasks_view
        settings = self.runtime.settings  # accounts may have changed since it was built
        view.set_accounts(settings.providers, settings.active_provider)
        view.refresh()
        if select is not None:
            view.select(select)
        view.show()
        view.raise_()
        view.activateWindow()
        return view

    def set_task_questions(self, questions: dict[str, tuple[str, str]]) -> None:
        """What scheduled runs wait for, by the task's conversation: its bar shows it."""
        self._task_questions = dict(questions)
        self._show_task_question()

    def _show_task_question(self) -> None:
        found = self._task_questions.get(self.controller.conversation_id or "")
        if found is None:
            self.task_question_bar.clear()
        else:
            self.task_question_bar.show_question(*found)

    def refresh_tasks(self) -> None:
        if self.tasks_view is not None and self.tasks_view.isVisible():
            self.tasks_view.refresh()

    def refresh_reminders(self) -> None:
        if self.reminders_view is not None and self.reminders_view.isVisible():
            self.reminders_view.refresh()

    # ---- sidebar -------------------------------------------------------------------------

    @property
    def sidebar_visible(self) -> bool:
        return not self.sidebar.isHidden()

    def toggle_sidebar(self) -> None:
        """Ctrl+B, View → Show chat list, the header's button."""
        self.set_sidebar_visible(not self.sidebar_visible)

    def set_sidebar_visible(self, visible: bool) -> None:
        """Shows or hides the chat list; its width is kept for when it comes back."""
        if visible != self.sidebar_visible:
            if visible:
                self.sidebar.show()
                self.splitter.refresh()
                total = sum(self.splitter.sizes()) or self.splitter.width()
                width = min(
                    max(self.ui_state.sidebar_width, self.sidebar.minimumWidth()), SIDEBAR_MAX
                )
                self.splitter.setSizes([width, max(0, total - width)])
            else:
                if self.sidebar.isVisible():
                    self.ui_state.sidebar_width = self.sidebar.width()
                had_focus = self.sidebar.isAncestorOf(self.focusWidget())
                self.sidebar.hide()
                if had_focus:
                    self.focus_composer()
        self.ui_state.sidebar_visible = visible
        self.sidebar_action.setChecked(visible)
        self.sidebar_button.setChecked(visible)
        tip = "Hide the chat list" if visible else "Show the chat list"
        self.sidebar_button.setToolTip(f"{tip} ({SIDEBAR_SHORTCUT})")
        self.sidebar_button.setAccessibleName(tip)
        self.header_new_button.setVisible(not visible)

    # ---- the Edit menu -------------------------------------------------------------------

    def edit_target(self) -> QWidget | None:
        """The widget Undo … Select All act on: the focused text field, or the nearest
        focused widget (or its parent) offering `copy()` or `selectAll()`."""
        widget: QWidget | None = self.focusWidget()
        while widget is not None and widget is not self:
            if isinstance(widget, TEXT_WIDGETS) or hasattr(widget, "copy"):
                return widget
            if hasattr(widget, "selectAll"):
                return widget
            widget = widget.parentWidget()
        return None

    def edit_state(self, widget: QWidget | None = None) -> dict[str, bool]:
        """Which Edit operations make sense for `widget` (default: `edit_target()`) now."""
        target = self.edit_target() if widget is None else widget
        if isinstance(target, QLineEdit):
            return _line_edit_state(target)
        if isinstance(target, QPlainTextEdit | QTextEdit):
            return _text_edit_state(target)
        state = {op: target is not None and hasattr(target, m) for op, *_, m in EDIT_OPERATIONS}
        has_selection = getattr(target, "has_selection", None)
        if state["copy"] and callable(has_selection):
            state["copy"] = bool(has_selection())
        return state

    def update_edit_actions(self) -> None:
        for op, enabled in self.edit_state().items():
            self.edit_actions[op].setEnabled(enabled)

    def edit_focused(self, op: str) -> None:
        """Runs an Edit operation ("undo", "copy", "select_all"…) on `edit_target()`."""
        method = {o: m for o, *_, m in EDIT_OPERATIONS}[op]
        target = self.edit_target()
        call = getattr(target, method, None) if target is not None else None
        if callable(call):
            call()

    def _focus_changed(self, _old: QWidget | None, new: QWidget | None) -> None:
        if new is None or new.window() is not self:
            return
        self._watch_edits(self.edit_target())
        self.update_edit_actions()

    def _watch_edits(self, widget: QWidget | None) -> None:
        """Follows the focused text field's selection and undo state (Edit's enabled)."""
        if widget is self._edit_watched:
            return
        with contextlib.suppress(RuntimeError, TypeError):  # the old one may be gone
            for signal in _edit_signals(self._edit_watched):
                signal.disconnect(self.update_edit_actions)
        self._edit_watched = widget
        for signal in _edit_signals(widget):
            signal.connect(self.update_edit_actions)

    # ---- window --------------------------------------------------------------------------

    def bring_to_front(self) -> None:
        self.show()
        self.setWindowState(
            (self.windowState() & ~Qt.WindowState.WindowMinimized) | Qt.WindowState.WindowActive
        )
        self.raise_()
        self.activateWindow()

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self.attached:  # closed while starting: the App quits once it is built
            self.closed_while_starting = True
            event.accept()
            return
        self.save_state()
        if not self._quitting and self.close_handler is not None:
            event.ignore()  # the handler hides the window or quits (it may ask first)
            self.close_handler()
            return
        tray_ok = self.tray is not None and self.tray.available
        if self._quitting or not tray_ok:
            event.accept()
            if not self._quitting:
                self.quitRequested.emit()
            return
        event.ignore()
        self.hide()
        if not self.ui_state.tray_notice_shown:
            self.tray.notify(
                "Deskhand is still running",
                "It keeps running in the tray for reminders and approvals. "
                "Quit from the tray menu.",
            )
            self.ui_state.tray_notice_shown = True
            self.ui_state.save(self.state_path)

    def stop_background_work(self) -> None:
        self._stopped = True
        self.model_picker.cancel()
        self.setup_card.download.cancel()  # a model download stops; its partial file stays
        self.elicitation.close_all()  # waiting MCP servers are told "declined"
        self.controller.stop()
        if self._detect_task is not None and not self._detect_task.done():
            self._detect_task.cancel()
        if self.reminders_view is not None:
            self.reminders_view.close()
        if self.tasks_view is not None:
            self.tasks_view.close()
        for future in list(self._workers):
            future.cancel()  # not started yet: never will
        wait(list(self._workers), timeout=WORKERS_WAIT)

    def quit_now(self) -> None:
        self._quitting = True
        self.stop_background_work()
        self.save_state()
        self.close()


def _line_edit_state(edit: QLineEdit) -> dict[str, bool]:
    writable = not edit.isReadOnly()
    shown = edit.echoMode() == QLineEdit.EchoMode.Normal  # never copy a password
    selected = edit.hasSelectedText()
    return {
        "undo": writable and edit.isUndoAvailable(),
        "redo": writable and edit.isRedoAvailable(),
        "cut": writable and shown and selected,
        "copy": shown and selected,
        "paste": writable,
        "select_all": bool(edit.text()),
    }


def _text_edit_state(edit: QPlainTextEdit | QTextEdit) -> dict[str, bool]:
    writable = not edit.isReadOnly()
    document = edit.document()
    selected = edit.textCursor().hasSelection()
    return {
        "undo": writable and document.isUndoAvailable(),
        "redo": writable and document.isRedoAvailable(),
        "cut": writable and selected,
        "copy": selected,
        "paste": writable and edit.canPaste(),
        "select_all": not document.isEmpty(),
    }


def _edit_signals(widget: QWidget | None) -> list[Any]:
    """The signals after which a text field's Edit state may differ."""
    if isinstance(widget, QLineEdit):
        return [widget.selectionChanged, widget.textChanged]
    if isinstance(widget, QPlainTextEdit | QTextEdit):
        return [
            widget.selectionChanged,
            widget.undoAvailable,
            widget.redoAvailable,
            widget.textChanged,
        ]
    # e.g. the chat view's `copyAvailable(bool)`; item views' selectionChanged is a method
    found = [getattr(widget, name, None) for name in ("copyAvailable", "selectionChanged")]
    return [signal for signal in found if hasattr(signal, "connect")]
