"""`ChatView`: the conversation, streamed in, scaled to long histories.

Why a `QTreeView` (used as a flat list) and not a `QListView`: with rows of varying
height, `QListView` re-asks every row for its size whenever one row changes height
(measured: 31 ms per change with 10,000 rows), while `QTreeView.dataChanged` re-measures
only the changed row (1.6 ms). A streaming message changes height many times a second.

Streaming: `handle_event(TextDelta)` only buffers; a single-shot timer flushes the buffer
into the model at most once per frame (16 ms). Tool progress is coalesced the same way;
structural changes (a new card, approval buttons, a result) apply at once.

Reasoning (`ReasoningDelta`) is buffered alike into a `ThinkingItem` of its own, placed
just before the answer it led to and shown collapsed; the answer starting ends it.

Messages are text: a drag selects across blocks and messages (painted through each
document's `PaintContext.selections`, hit-tested with `FuzzyHit`), double-click selects a
word, triple-click a paragraph, Ctrl+C copies. Under each message small actions (Copy,
Edit, Regenerate, "‹ 2/3 ›") show on hover and for the keyboard's current message; they
emit signals, the window does the work. The keyboard reaches them through the context
menu (Menu key, Shift+F10), F2 (edit the current message) and Ctrl+Shift+R (regenerate
the current answer). While a turn runs (`set_busy`) those that change the conversation
are shown disabled.

Links in model text only ever go out as `linkActivated(url)`: the window must never read
one as an action of its own. The app's own actions ("Connect a model", "Open Researcher's
conversation") are signals.

Sub-agents: a `delegate_agent` call is a `DelegationCard`; the agent's own calls (events
with `parent_call_id`) are cards placed in the rows right after it — inserted there when
another delegation's rows came since — indented under it and hidden with its "N steps".
A question of the agent's says who asks ("Researcher wants to: …"). When the delegation
ends, a call of its agent still open is shown stopped.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence

from PySide6.QtCore import (
    QEvent,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QPointF,
    QRect,
    Qt,
    QTimer,
    QUrl,
    Signal,
)
from PySide6.QtGui import (
    QContextMenuEvent,
    QFocusEvent,
    QGuiApplication,
    QHelpEvent,
    QKeyEvent,
    QKeySequence,
    QMouseEvent,
    QPainter,
    QResizeEvent,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QFrame,
    QMenu,
    QPushButton,
    QStyleOptionViewItem,
    QToolTip,
    QTreeView,
    QWidget,
)

from app.core.approval import ApprovalRequest, Decision
from app.core.events import (
    AgentEvent,
    ApprovalDecided,
    ApprovalRequested,
    Error,
    Notice,
    ReasoningDelta,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
    TurnFinished,
)
from app.core.history_marks import BranchInfo, Marker
from app.core.jobs import is_job_call
from app.core.providers.base import ChatMessage
from app.core.store import ToolCallRecord
from app.core.tool_names import tool_title
from app.core.visible import one_line
from app.ui.chat.approval_bar import ApprovalBar
from app.ui.chat.delegate import ChatDelegate
from app.ui.chat.history import (
    DENIED_BY_RULE,
    YOU_DENIED,
    assign_indices,
    history_items,
    place_branches,
    pretty_arguments,
)
from app.ui.chat.layouts import (
    BUSY_ACTIONS,
    CARD_PAD,
    PENDING_STEP_MS,
    WAIT_WORDS,
    WHOLE_MESSAGE,
    Hit,
    ItemLayout,
    Selection,
    TextPos,
    column,
)
from app.ui.chat.message_editor import MessageEditor
from app.ui.chat.model import (
    DELEGATE_TOOL,
    AssistantMessage,
    ChatItem,
    ChatModel,
    DelegationCard,
    ErrorItem,
    MarkerItem,
    MessageItem,
    NoticeItem,
    PendingItem,
    ThinkingItem,
    ToolCard,
    ToolStatus,
    UserMessage,
    delegation_card,
)
from app.ui.chat.render import doc_text, message_plain
from app.ui.chat.terminal import terminal_output

#: Keys for the current message: edit it (yours), write it again (answers).
EDIT_KEY = "F2"
REGENERATE_KEY = "Ctrl+Shift+R"
#: What the editor says when the window did not take the edit.
EDIT_NOT_SENT = "Could not send the edit now."
#: The end of the last block of the last row (select all without laying anything out).
_END = 1 << 30
#: Actions offered only while no turn runs (opening another conversation would stop it).
_BUSY_ACTIONS = BUSY_ACTIONS | {"open_conversation"}

FRAME_MS = 16
_DECISION_WORDS = {
    Decision.ALLOW_ONCE: "Allowed once",
    Decision.ALLOW_CONVERSATION: "Allowed in this conversation",
    Decision.ALWAYS_ALLOW: "Always allowed",
    Decision.ALWAYS_ALLOW_ANY: "Always allowed (any arguments)",
    Decision.TRUST_SOURCE: "Source trusted",
    Decision.DENY: YOU_DENIED,
}


class ChatView(QTreeView):
    approvalDecided = Signal(str, str)  # call_id, Decision value
    retryRequested = Signal()
    #: A link in the conversation was clicked (its URL came from the model, a page or a
    #: tool: never an instruction to the app). The window decides with `app.core.links`
    #: what the click does, reading the link's text from `clicked_link_text(url)`.
    linkActivated = Signal(str)
    #: The setup error's own "Connect a model" was clicked.
    connectRequested = Signal()
    #: The user edited message `index` (of the stored messages) to this text and sent it.
    editRequested = Signal(int, str)
    #: Write the answer at message `index` again.
    regenerateRequested = Signal(int)
    #: Show branch `wanted` (1-based) of the branches at message `index`.
    branchRequested = Signal(int, int)
    #: "Open Researcher's conversation" on a finished delegation: show that conversation
    #: (a sub-agent's child conversation, by id).
    conversationRequested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatView")
        self.chat_model = ChatModel(self)
        self.setModel(self.chat_model)
        self.chat_delegate = ChatDelegate(self, self.chat_model)
        self.chat_delegate.heights_stale = self._schedule_settle
        self.setItemDelegate(self.chat_delegate)
        self._configure()

        self._pending: list[str] = []
        self._pending_reasoning: list[str] = []
        #: When the first buffered reasoning arrived (the thinking started then).
        self._reasoning_since = 0.0
        self._dirty: dict[int, ChatItem] = {}
        self._current: AssistantMessage | None = None
        self._thinking: ThinkingItem | None = None
        self._cards: dict[str, ToolCard] = {}
        self._bars: dict[str, ApprovalBar] = {}
        self._stick = True
        self._programmatic = False
        self._settling = False
        self._press: Hit | None = None
        self._press_pos = QPoint()
        #: Where a selecting drag started (None: the press was on a button).
        self._anchor: TextPos | None = None
        self._dragging = False
        self._drag_pos = QPoint()
        #: When and where the last double-click was (a press soon after is a triple-click).
        self._double: tuple[float, QPoint] | None = None
        self._waiting: PendingItem | None = None
        #: A turn is under way (finish_streaming before it ended means it was stopped).
        self._turn_open = False
        self._editing: tuple[UserMessage, MessageEditor] | None = None
        #: What the editor of message `index` starts with (the window sets it to the
        #: controller's `editable_text`, which leaves out attached files' text).
        self.editable_text: Callable[[int], str] | None = None
        #: Sends an edit of message `index`; True when it was taken (the editor closes),
        #: False leaves the editor open with its text. None: `editRequested` is emitted.
        self.submit_edit: Callable[[int, str], bool] | None = None
        #: (address, text) of the link clicked last, for `clicked_link_text`.
        self._clicked_link: tuple[str, str] | None = None
        self._busy = False
        self._laid_width = -1
        #: dataChanged emissions caused by streaming flushes (for tests and benchmarks).
        self.flushes = 0

        self._flush_timer = self._timer(FRAME_MS, self._flush)
        self._settle_timer = self._timer(0, self._settle)
        self._relayout_timer = self._timer(0, self._relayout)
        self._copied_timer = self._timer(1500, self._clear_copied)
        self._tick = QTimer(self)
        self._tick.setInterval(1000)
        self._tick.timeout.connect(self._tick_running)
        self._dots = QTimer(self)
        self._dots.setInterval(PENDING_STEP_MS)
        self._dots.timeout.connect(self._animate_pending)
        self._autoscroll = QTimer(self)
        self._autoscroll.setInterval(30)
        self._autoscroll.timeout.connect(self._drag_scroll)

        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range)
        self._new_button = QPushButton("↓  New messages", self)
        self._new_button.setObjectName("newMessagesButton")
        self._new_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self._new_button.clicked.connect(self.scroll_to_bottom)
        self._new_button.hide()
        self._style_new_button()

    def _configure(self) -> None:
        self.setHeaderHidden(True)
        self.header().setStretchLastSection(True)
        self.setRootIsDecorated(False)
        self.setIndentation(0)
        self.setUniformRowHeights(False)
        self.setItemsExpandable(False)
        self.setExpandsOnDoubleClick(False)
        self.setAnimated(False)
        self.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setMouseTracking(True)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.DefaultContextMenu)
        self.verticalScrollBar().setSingleStep(24)
        self.setAccessibleName("Conversation")

    def _timer(self, ms: int, slot: object) -> QTimer:
        timer = QTimer(self)
        timer.setSingleShot(True)
        timer.setInterval(ms)
        timer.timeout.connect(slot)
        return timer

    # ---- public API ----------------------------------------------------------------------

    def clear(self) -> None:
        self._reset()
        self.chat_model.replace_all([])
        self.chat_delegate.forget_all()

    def load_history(
        self,
        messages: list[ChatMessage],
        tool_calls: list[ToolCallRecord] | None = None,
        markers: Iterable[Marker] = (),
        branches: Iterable[BranchInfo] = (),
    ) -> None:
        """Replaces the conversation. Only what ends up on screen is rendered. `markers`
        (errors, "Stopped") are placed after the messages they follow; `branches` put
        "‹ 2/3 ›" on the message where the versions differ."""
        self._reset()
        self.chat_delegate.forget_all()
        items = _with_delegations(
            history_items(messages, tool_calls, markers, branches), tool_calls
        )
        # the bottom of the conversation is shown first: render those rows exactly at once
        budget = 2 * max(self.viewport().height(), 400)
        for item in reversed(items):
            item.eager = True
            budget -= self.chat_delegate.height(item)
            if budget < 0:
                break
        self.chat_model.replace_all(items)
        self._stick = True
        self.doItemsLayout()
        self.scroll_to_bottom()
        self._schedule_settle()

    def sync_indices(
        self, messages: Sequence[ChatMessage], branches: Iterable[BranchInfo] = ()
    ) -> None:
        """Tells live messages where they are in the stored `messages` (call after each
        turn): their Edit, Regenerate and version switch need it. Only the items after the
        last one already known are walked. `branches` puts the version switch on a message
        streamed in this turn (the new answer of a regenerate)."""
        changed = assign_indices(self.chat_model.items, messages)
        wanted = list(branches)
        if wanted:
            switchable = [i for i in self.chat_model.items if isinstance(i, _SWITCHABLE)]
            before = {id(i): i.branch for i in switchable}
            place_branches(self.chat_model.items, wanted)
            changed += [i for i in switchable if before[id(i)] != i.branch]
        for item in dict.fromkeys(changed):
            self.chat_model.changed(item)

    def add_user_message(self, text: str, attachments: list[str] | tuple[str, ...] = ()) -> None:
        self._flush()
        self._close_assistant()
        self._append(UserMessage(text=text, attachments=list(attachments)))
        self._turn_open = True
        self.scroll_to_bottom()

    def set_waiting(self, waiting: bool) -> None:
        """Shows (or removes) "Thinking…" at the end until the first event or text."""
        if waiting and self._waiting is None:
            self._flush()
            self._turn_open = True
            self._waiting = PendingItem()
            self._append(self._waiting)
            self._dots.start()
        elif not waiting:
            self._drop_pending()

    def is_waiting(self) -> bool:
        return self._waiting is not None

    def set_busy(self, busy: bool) -> None:
        """A turn runs (True) or ended: meanwhile Edit, Regenerate and the version switch
        are shown disabled, and an open editor stays open but its Send waits."""
        self._busy = busy
        state = self.chat_delegate.state
        state.busy = busy
        if busy and state.hover is not None and state.hover.action in _BUSY_ACTIONS:
            state.hover = None
        editor = self.editor()
        if editor is not None:
            editor.set_busy(busy)
        self.viewport().update()

    def is_busy(self) -> bool:
        return self._busy

    def handle_event(self, event: AgentEvent) -> None:
        if not isinstance(event, TextDelta | ReasoningDelta):
            self._drop_pending()  # text drops it when it is shown (a frame later)
        if isinstance(event, TurnFinished | Error):
            self._turn_open = False
        elif not isinstance(event, Notice):
            self._turn_open = True
        if isinstance(event, TextDelta):
            if event.text:
                self._pending.append(event.text)
                self._schedule_flush()
        elif isinstance(event, ReasoningDelta):
            if event.text:
                if self._pending:  # thinking again after answer text: keep the order
                    self._flush()
                if not self._pending_reasoning and self._thinking is None:
                    self._reasoning_since = time.monotonic()
                self._pending_reasoning.append(event.text)
                self._schedule_flush()
        elif isinstance(event, ToolProgress):
            card = self._cards.get(event.call_id)
            if card is not None:
                card.progress, card.fraction = event.message, event.fraction
                self._mark(card)
        elif isinstance(event, ToolCallStarted):
            self._tool_started(event)
        elif isinstance(event, ApprovalRequested):
            self._approval_requested(event)
        elif isinstance(event, ApprovalDecided):
            self._approval_decided(event.call_id, event.decision, event.source)
        elif isinstance(event, ToolCallFinished):
            self._tool_finished(event)
        elif isinstance(event, TurnFinished):
            self._flush()
            self._close_assistant()
            if event.stop_reason == "max_tokens":
                self._append(NoticeItem(message="The answer was cut off at the token limit."))
            elif event.stop_reason == "max_steps":
                self._append(NoticeItem(message=f"Stopped after {event.steps} tool steps."))
        elif isinstance(event, Error):
            self.add_error(event.message, event.retryable, event.kind)
        elif isinstance(event, Notice):
            self._flush()
            self._note_on_user_message(event)
            self._append(NoticeItem(message=event.message))

    def _note_on_user_message(self, event: Notice) -> None:
        """Images a model without images was not sent: said beside them on the message."""
        from app.core.providers.vision import IMAGES_NOT_SENT, NO_IMAGES

        if event.kind != IMAGES_NOT_SENT:
            return
        users = (i for i in reversed(self.chat_model.items) if isinstance(i, UserMessage))
        item = next(users, None)
        if item is not None:
            item.attachments_note = f"images not sent: {NO_IMAGES}"
            self.chat_model.changed(item)

    def add_error(self, message: str, retryable: bool = False, kind: str = "error") -> None:
        """An error row; kind "setup" (no model to talk to) offers "Connect a model"."""
        self._flush()
        self._close_assistant()
        self._append(ErrorItem(message=message, retryable=retryable, kind=kind))

    def finish_streaming(self) -> None:
        """Flushes buffered text and closes the turn; if it had not ended (no
        `TurnFinished` or `Error`), it was stopped: what was open is marked, and a
        "Stopped" row follows."""
        self._flush()
        stopped = self._turn_open or self._waiting is not None or self._current is not None
        self._drop_pending()
        self._close_assistant(stopped=True)
        for card in self._cards.values():
            if not card.finished and not is_job_call(card.call_id):  # jobs outlive turns
                stopped = True
                self._detach_bar(card.call_id)
                card.approval = None
                card.status = ToolStatus.CANCELLED
                card.seconds = card.elapsed()
                self.chat_model.changed(card)
        self._turn_open = False
        if stopped:
            self._append(MarkerItem(text="Stopped"))

    def message_count(self) -> int:
        return len(self.chat_model.items)

    def scroll_to_bottom(self) -> None:
        self._stick = True
        self._new_button.hide()
        self._set_scroll(self.verticalScrollBar().maximum())

    # ---- streaming and coalescing --------------------------------------------------------

    def _schedule_flush(self) -> None:
        if not self._flush_timer.isActive():
            self._flush_timer.start()

    def _mark(self, item: ChatItem) -> None:
        self._dirty[id(item)] = item
        self._schedule_flush()

    def _flush(self) -> None:
        self._flush_timer.stop()
        if self._pending_reasoning:
            text = "".join(self._pending_reasoning)
            self._pending_reasoning.clear()
            since = self._reasoning_since or time.monotonic()
            if self._current is not None:  # the model thinks again after answering
                self._close_assistant()
            if self._thinking is None:
                self._thinking = ThinkingItem(text=text, streaming=True, started=since)
                self._append(self._thinking)
            else:
                self._thinking.text += text
                self._dirty[id(self._thinking)] = self._thinking
        if self._pending:
            self._end_thinking()  # the answer starts
            text = "".join(self._pending)
            self._pending.clear()
            if self._current is None:
                self._current = AssistantMessage(text=text, streaming=True)
                self._append(self._current)
            else:
                self._current.text += text
                self._dirty[id(self._current)] = self._current
        for item in self._dirty.values():
            self.flushes += 1
            self.chat_model.changed(item)
        if self._dirty and not self._stick:
            self._show_new_button()
        self._dirty.clear()

    def _append(self, item: ChatItem) -> None:
        if item is not self._waiting:
            self._drop_pending()
        item.eager = True
        self.chat_model.append(item)
        if not self._stick:
            self._show_new_button()

    def _close_assistant(self, stopped: bool = False) -> None:
        self._end_thinking()
        item, self._current = self._current, None
        if item is not None:
            item.streaming = False
            item.stopped = stopped
            self.chat_model.changed(item)

    def _end_thinking(self) -> None:
        """The answer started or the turn ended: "Thinking…" becomes "Thought for N s"."""
        item, self._thinking = self._thinking, None
        self._reasoning_since = 0.0
        if item is not None:
            self._dirty.pop(id(item), None)
            item.streaming = False
            item.seconds = time.monotonic() - item.started
            self.chat_model.changed(item)

    def _drop_pending(self) -> None:
        item, self._waiting = self._waiting, None
        self._dots.stop()
        items = self.chat_model.items
        if item is not None and items and items[-1] is item:
            self.chat_model.remove_last()

    def _animate_pending(self) -> None:
        item = self._waiting
        if item is None:
            self._dots.stop()
            return
        self.viewport().update(self.visualRect(self.chat_model.index(item.row, 0)))

    def _reset(self) -> None:
        self.cancel_edit()
        self.clear_selection()
        self._waiting = None
        self._turn_open = False
        for timer in (
            self._flush_timer,
            self._settle_timer,
            self._relayout_timer,
            self._tick,
            self._dots,
            self._autoscroll,
        ):
            timer.stop()
        self._pending.clear()
        self._pending_reasoning.clear()
        self._dirty.clear()
        for call_id in list(self._bars):
            self._detach_bar(call_id)
        self._cards.clear()
        self._current = None
        self._thinking = None
        self._reasoning_since = 0.0
        self._stick = True
        self._new_button.hide()

    # ---- tool cards ----------------------------------------------------------------------

    def _tool_started(self, event: ToolCallStarted) -> None:
        self._flush()
        parent = self._cards.get(event.parent_call_id) if event.parent_call_id else None
        under = parent if isinstance(parent, DelegationCard) and parent.row >= 0 else None
        if under is None:  # (a step goes above an answer streaming meanwhile: it stays open)
            self._close_assistant()
        kind = DelegationCard if event.name == DELEGATE_TOOL and not event.agent else ToolCard
        card = kind(
            call_id=event.call_id,
            name=event.name,
            category=event.category,
            operations=list(event.operations),
            arguments=pretty_arguments(event.arguments),
            agent=event.agent,
        )
        if isinstance(card, DelegationCard):
            card.set_arguments(event.arguments)
        self._cards[event.call_id] = card
        if under is not None:
            self._add_step(under, card)
        else:
            self._append(card)
        if not self._tick.isActive():
            self._tick.start()

    def _add_step(self, parent: DelegationCard, card: ToolCard) -> None:
        """A sub-agent's call: right after its delegation's rows (hidden if they are)."""
        card.parent_call_id = parent.call_id
        last = parent.steps[-1] if parent.steps else parent
        parent.steps.append(card)
        row = last.row + 1
        if row >= len(self.chat_model.items):
            self._append(card)
            self._update_row(last.row)  # its rail goes on down to the new step
        else:
            self._insert(row, card)
        if parent.collapsed:
            self.setRowHidden(card.row, QModelIndex(), True)
        self.chat_model.changed(parent)

    def _insert(self, row: int, item: ChatItem) -> None:
        """Puts `item` at `row`, keeping the selection on the text it covered."""
        item.eager = True
        self.chat_model.insert(row, item)
        state = self.chat_delegate.state
        selection = state.selection
        if selection is not None:
            start, end = (_shifted(pos, row) for pos in (selection.start, selection.end))
            state.selection = Selection(start, end)
        current = self.currentIndex()
        state.current_row = current.row() if current.isValid() else -1
        state.hover_row = -1
        self.viewport().update()
        if not self._stick:
            self._show_new_button()

    def toggle_steps(self, card: DelegationCard) -> None:
        """Hides or shows a delegation's own calls (the rows under it)."""
        card.collapsed = not card.collapsed
        for step in card.steps:
            if step.row >= 0:
                self.setRowHidden(step.row, QModelIndex(), card.collapsed)
        self.chat_model.changed(card)
        self._schedule_settle()

    def _end_steps(self, card: DelegationCard) -> None:
        """The delegation ended: a call of its agent still open never will; shown stopped."""
        for step in card.steps:
            if not step.finished:
                self._detach_bar(step.call_id)
                step.approval = None
                step.status = ToolStatus.CANCELLED
                step.seconds = step.elapsed()
                self.chat_model.changed(step)

    def _card(self, call_id: str, name: str) -> ToolCard:
        card = self._cards.get(call_id)
        if card is None:  # an approval or result without a start event: show it anyway
            self._tool_started(ToolCallStarted(call_id, name, {}))
            card = self._cards[call_id]
        return card

    def _approval_requested(self, event: ApprovalRequested) -> None:
        self._flush()
        request = event.request
        question = "~" in request.call_id and request.call_id not in self._cards
        card = self._card(request.call_id, request.tool)
        if question:  # a running tool asks something: a small card of its own
            card.question = True
            card.arguments = ""
        card.status = ToolStatus.AWAITING
        card.approval = _asked_by(request)
        card.category = card.category or request.category
        card.operations = list(request.operations)
        if not card.question:
            card.arguments = pretty_arguments(request.arguments) or card.arguments
        parent = self._cards.get(card.parent_call_id)
        if isinstance(parent, DelegationCard) and parent.collapsed:
            self.toggle_steps(parent)  # its question must be seen
        self._attach_bar(card)
        self.chat_model.changed(card)

    def _approval_decided(self, call_id: str, decision: Decision | str, source: str) -> None:
        card = self._cards.get(call_id)
        self._detach_bar(call_id)
        if card is None or card.finished:
            return
        decision = Decision(decision)
        card.approval = None
        card.status = ToolStatus.DENIED if decision == Decision.DENY else ToolStatus.RUNNING
        if source == "rule" and decision == Decision.DENY:
            card.decision = DENIED_BY_RULE
        elif source in ("user", "rule", "yes"):
            card.decision = _DECISION_WORDS[decision] + (" by rule" if source == "rule" else "")
        if card.question:  # answered: nothing more happens on this card
            if decision != Decision.DENY:
                card.status = ToolStatus.OK
            card.seconds = card.elapsed()
        self.chat_model.changed(card)

    def _tool_finished(self, event: ToolCallFinished) -> None:
        self._flush()
        card = self._card(event.call_id, event.name)
        self._detach_bar(event.call_id)
        result = event.result
        card.approval = None
        denied = card.status == ToolStatus.DENIED
        if not denied:
            card.status = ToolStatus.OK if result.ok else ToolStatus.ERROR
        # a refused call's result is what the model was told; the card says "You denied this"
        card.result = "" if denied else result.content
        card.terminal = None if denied else terminal_output(card.name, card.category, result.data)
        card.error = "" if result.ok or denied else (result.error or result.content)
        card.attachments = list(result.attachments)
        card.seconds = event.seconds or card.elapsed()
        card.progress, card.fraction = "", None
        if isinstance(card, DelegationCard):
            card.set_data(result.data)
            self._end_steps(card)
        self.chat_model.changed(card)

    def _attach_bar(self, card: ToolCard) -> None:
        if card.call_id in self._bars or card.approval is None:
            return
        bar = ApprovalBar(card.approval, self.chat_delegate.theme)
        bar.decided.connect(lambda value, cid=card.call_id: self._decide(cid, value))
        bar.heightChanged.connect(lambda h, c=card: self._bar_height(c, h))
        _, column_w = column(self.chat_delegate.item_width(card))
        card.panel_height = bar.wanted_height(int(column_w - 2 * CARD_PAD))
        self.setIndexWidget(self.chat_model.index(card.row, 0), bar)
        self._bars[card.call_id] = bar
        # Tab from the conversation reaches the card's parts (they are created late, so
        # they would otherwise sit at the end of the window's focus chain).
        previous: QWidget = self
        for widget in bar.focus_chain():
            QWidget.setTabOrder(previous, widget)
            previous = widget

    def _bar_height(self, card: ToolCard, height: int) -> None:
        if card.panel_height != height:
            card.panel_height = height
            self.chat_model.changed(card)

    def bar(self, call_id: str) -> ApprovalBar | None:
        """The approval widget of a pending call (tests, the window's shortcuts)."""
        return self._bars.get(call_id)

    def _detach_bar(self, call_id: str) -> None:
        bar = self._bars.pop(call_id, None)
        if bar is None:
            return
        focused = QGuiApplication.focusObject()
        had_focus = isinstance(focused, QWidget) and bar.isAncestorOf(focused)
        card = self._cards.get(call_id)
        if card is not None and 0 <= card.row < len(self.chat_model.items):
            self.setIndexWidget(self.chat_model.index(card.row, 0), None)  # type: ignore[arg-type]
        bar.hide()
        bar.deleteLater()
        if had_focus:
            self.setFocus(Qt.FocusReason.OtherFocusReason)

    def _decide(self, call_id: str, value: str) -> None:
        self._approval_decided(call_id, value, "user")
        self.approvalDecided.emit(call_id, value)

    def _tick_running(self) -> None:
        running = [c for c in self._cards.values() if not c.finished]
        if not running:
            self._tick.stop()
        for card in running:  # the elapsed time is painted live; no re-render needed
            self.viewport().update(self.visualRect(self.chat_model.index(card.row, 0)))

    # ---- scrolling and row heights -------------------------------------------------------

    def _set_scroll(self, value: int) -> None:
        self._programmatic = True
        try:
            self.verticalScrollBar().setValue(value)
        finally:
            self._programmatic = False

    def _on_range(self, _low: int, high: int) -> None:
        if self._stick:
            self._set_scroll(high)

    def _on_scrolled(self, value: int) -> None:
        if not self._programmatic:
            self._stick = value >= self.verticalScrollBar().maximum() - 4
            if self._stick:
                self._new_button.hide()
        self._schedule_settle()

    def _schedule_settle(self) -> None:
        if not self._settling and not self._settle_timer.isActive():
            self._settle_timer.start()

    def _settle(self) -> None:
        """Gives rows on screen their exact heights (they may still hold estimates)."""
        if self._settling:
            return
        self._settling = True
        try:
            self.executeDelayedItemsLayout()
            for _ in range(8):
                if not self._settle_pass():
                    break
                if self._stick:
                    self._set_scroll(self.verticalScrollBar().maximum())
        finally:
            self._settling = False

    def _settle_pass(self) -> bool:
        items = self.chat_model.items
        top = self.indexAt(QPoint(1, 0))
        if not top.isValid():
            return False
        bottom = self.viewport().height()
        changed = False
        for row in range(top.row(), len(items)):
            index = self.chat_model.index(row, 0)
            if self.isRowHidden(row, QModelIndex()):
                continue
            rect = self.visualRect(index)
            if rect.top() > bottom:
                break
            if self.chat_delegate.layout(items[row]).height != rect.height():
                self.chat_model.dataChanged.emit(index, index, [])
                changed = True
        return changed

    def _relayout(self) -> None:
        """The width changed: every height is stale. Keeps the top row in place."""
        top = self.indexAt(QPoint(1, 0))
        offset = self.visualRect(top).top() if top.isValid() else 0
        stick = self._stick
        self.doItemsLayout()
        self._settle()
        if stick:
            self.scroll_to_bottom()
        elif top.isValid():
            delta = self.visualRect(top).top() - offset
            self._set_scroll(self.verticalScrollBar().value() + delta)

    def resizeEvent(self, event: QResizeEvent) -> None:
        self.chat_delegate.width_changed()
        super().resizeEvent(event)
        if self.chat_delegate.width() != self._laid_width:
            self._laid_width = self.chat_delegate.width()
            self._relayout_timer.start()
        elif self._stick:
            self._set_scroll(self.verticalScrollBar().maximum())
        self._place_new_button()

    def set_text_size(self, points: float) -> None:
        """The chat's text size in points (Settings → General); 0 follows the UI font."""
        if points == self.chat_delegate.text_points:
            return
        self.chat_delegate.text_points = points
        self.chat_delegate.update_theme()
        self._relayout_timer.start()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (
            QEvent.Type.PaletteChange,
            QEvent.Type.FontChange,
            QEvent.Type.StyleChange,
        ):
            self.chat_delegate.update_theme()
            self._style_new_button()
            self._relayout_timer.start()

    # ---- painting ------------------------------------------------------------------------

    def drawRow(
        self,
        painter: QPainter,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> None:
        # No row panel, hover or focus decoration from the style: the delegate draws it all.
        self.chat_delegate.state.now = time.monotonic()
        self.chat_delegate.paint(painter, option, index)

    def drawBranches(
        self, painter: QPainter, rect: QRect, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        pass

    # ---- the "new messages" button -------------------------------------------------------

    def _style_new_button(self) -> None:
        theme = self.chat_delegate.theme
        self._new_button.setStyleSheet(
            "QPushButton#newMessagesButton { border-radius: 14px; padding: 5px 14px;"
            f" background: {theme.accent.name()}; color: white; border: none; }}"
        )

    def _show_new_button(self) -> None:
        if not self._new_button.isVisible():
            self._new_button.adjustSize()
            self._place_new_button()
            self._new_button.show()
            self._new_button.raise_()

    def _place_new_button(self) -> None:
        button, vp = self._new_button, self.viewport().geometry()
        button.move(vp.x() + (vp.width() - button.width()) // 2, vp.bottom() - button.height() - 16)

    # ---- hover, current row, focus --------------------------------------------------------

    def _update_row(self, row: int) -> None:
        if 0 <= row < len(self.chat_model.items):
            self.viewport().update(self.visualRect(self.chat_model.index(row, 0)))

    def _set_hover_row(self, row: int) -> None:
        state = self.chat_delegate.state
        if state.hover_row != row:
            old, state.hover_row = state.hover_row, row
            self._update_row(old)
            self._update_row(row)

    def currentChanged(
        self,
        current: QModelIndex | QPersistentModelIndex,
        previous: QModelIndex | QPersistentModelIndex,
    ) -> None:
        super().currentChanged(current, previous)
        if not hasattr(self, "chat_delegate"):  # setModel in __init__, before the delegate
            return
        state = self.chat_delegate.state
        state.current_row = current.row() if current.isValid() else -1
        self._update_row(previous.row() if previous.isValid() else -1)
        self._update_row(state.current_row)

    def focusInEvent(self, event: QFocusEvent) -> None:
        super().focusInEvent(event)
        self.chat_delegate.state.focused = True
        self._update_row(self.chat_delegate.state.current_row)

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        self.chat_delegate.state.focused = False
        self._update_row(self.chat_delegate.state.current_row)

    # ---- selection -----------------------------------------------------------------------

    def has_selection(self) -> bool:
        return self.chat_delegate.state.selection is not None

    def clear_selection(self) -> None:
        if self.chat_delegate.state.selection is not None:
            self.chat_delegate.state.selection = None
            self.viewport().update()

    def select_range(self, start: TextPos, end: TextPos) -> None:
        """Selects the text between two places (row, text block, character)."""
        selection = Selection.between(start, end)
        self.chat_delegate.state.selection = None if selection.empty else selection
        self.viewport().update()

    def selectAll(self) -> None:
        """Selects the whole conversation's text (without laying out any message)."""
        items = self.chat_model.items
        if items:
            self.select_range((0, 0, 0), (len(items) - 1, _END, 0))

    def selected_text(self) -> str:
        """The selected text, as plain text: blocks and messages separated by a blank line,
        code exactly as written."""
        selection = self.chat_delegate.state.selection
        if selection is None:
            return ""
        items = self.chat_model.items
        parts: list[str] = []
        for row in selection.rows():
            if row >= len(items):
                break
            item = items[row]
            if not isinstance(item, MessageItem | ErrorItem):
                continue
            inside = selection.start[0] < row < selection.end[0]
            if inside and self.chat_delegate.cached(item) is None:
                parts.append(_whole_text(item))  # not on screen: no layout needed
            else:
                parts += self.chat_delegate.layout(item).selected_text(selection, row)
        return "\n\n".join(p for p in parts if p)

    def copy(self) -> None:
        """Puts the selected text on the clipboard (nothing selected: nothing happens)."""
        text = self.selected_text()
        if text:
            QGuiApplication.clipboard().setText(text)

    def _text_pos(self, pos: QPoint) -> TextPos | None:
        """The place in the text nearest to `pos` (rows above or below the viewport count
        as its first or last row's start or end)."""
        items = self.chat_model.items
        if not items:
            return None
        vp = self.viewport().rect()
        inside = QPoint(min(max(pos.x(), 0), vp.width() - 1), min(max(pos.y(), 0), vp.height() - 1))
        index = self.indexAt(inside)
        if not index.isValid():
            last = len(items) - 1
            return (last, _END, 0) if inside.y() > 0 else (0, 0, 0)
        item = items[index.row()]
        layout = self.chat_delegate.layout(item)
        local = QPointF(pos) - self.chat_delegate.origin(self.visualRect(index), item)
        block, char = layout.position_at(local)
        return (index.row(), block, char)

    def _select_unit(self, pos: QPoint, paragraph: bool) -> bool:
        found = self._layout_at(pos)
        if found is None:
            return False
        row, layout, local = found
        unit = layout.unit_at(local, paragraph)
        if unit is None:
            return False
        block, first, end = unit
        self.select_range((row, block, first), (row, block, end))
        return True

    def _layout_at(self, pos: QPoint) -> tuple[int, ItemLayout, QPointF] | None:
        index = self.indexAt(pos)
        if not index.isValid():
            return None
        item = self.chat_model.items[index.row()]
        layout = self.chat_delegate.layout(item)
        local = QPointF(pos) - self.chat_delegate.origin(self.visualRect(index), item)
        return index.row(), layout, local

    def _drag_to(self, pos: QPoint) -> None:
        self._drag_pos = pos
        focus = self._text_pos(pos)
        if self._anchor is not None and focus is not None:
            self.select_range(self._anchor, focus)
        outside = pos.y() < 0 or pos.y() >= self.viewport().height()
        if outside and not self._autoscroll.isActive():
            self._autoscroll.start()
        elif not outside:
            self._autoscroll.stop()

    def _drag_scroll(self) -> None:
        """While a selecting drag is above or below the view, scroll towards it."""
        pos, height = self._drag_pos, self.viewport().height()
        if not self._dragging or 0 <= pos.y() < height:
            self._autoscroll.stop()
            return
        over = pos.y() if pos.y() < 0 else pos.y() - height
        bar = self.verticalScrollBar()
        self._set_scroll(bar.value() + max(-60, min(60, over)))
        self._stick = bar.value() >= bar.maximum() - 4
        self._drag_to(pos)

    # ---- mouse, keyboard, context menu ---------------------------------------------------

    def _hit_at(self, pos: QPoint) -> tuple[ChatItem, Hit | None] | None:
        index = self.indexAt(pos)
        if not index.isValid():
            return None
        item = self.chat_model.items[index.row()]
        rect = self.visualRect(index)
        layout = self.chat_delegate.layout(item)
        local = QPointF(pos) - self.chat_delegate.origin(rect, item)
        return item, self._offered(layout.hit(local))

    def _offered(self, hit: Hit | None) -> Hit | None:
        """`hit`, unless it changes the conversation while a turn runs."""
        if hit is not None and self._busy and hit.action in _BUSY_ACTIONS:
            return None
        return hit

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        pos = event.position().toPoint()
        if event.buttons() & Qt.MouseButton.LeftButton and self._anchor is not None:
            distance = (pos - self._press_pos).manhattanLength()
            if not self._dragging and distance >= QApplication.startDragDistance():
                self._dragging = True
                self._press = None  # a drag that starts on a link selects, it does not open
            if self._dragging:
                self.viewport().setCursor(Qt.CursorShape.IBeamCursor)
                self._drag_to(pos)
            return
        found = self._layout_at(pos)
        hit = self._offered(found[1].hit(found[2])) if found else None
        shape = Qt.CursorShape.ArrowCursor
        if hit is not None:
            shape = Qt.CursorShape.PointingHandCursor
        elif found is not None and found[1].over_text(found[2]):
            shape = Qt.CursorShape.IBeamCursor
        self.viewport().setCursor(shape)
        self._set_hover_row(found[0] if found else -1)
        if hit != self.chat_delegate.state.hover:
            self.chat_delegate.state.hover = hit
            self.viewport().update()

    def leaveEvent(self, event: QEvent) -> None:
        if self.chat_delegate.state.hover is not None:
            self.chat_delegate.state.hover = None
            self.viewport().update()
        self._set_hover_row(-1)
        super().leaveEvent(event)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        pos = event.position().toPoint()
        found = self._hit_at(pos)
        left = event.button() == Qt.MouseButton.LeftButton
        hit = found[1] if found else None
        self._press = hit if left else None
        self._press_pos = pos
        self._dragging = False
        self.setFocus(Qt.FocusReason.MouseFocusReason)
        if found is not None:
            self.setCurrentIndex(self.chat_model.index(found[0].row, 0))
        if not left:
            return  # a right click keeps the selection for the menu
        double, self._double = self._double, None
        interval = QApplication.doubleClickInterval() / 1000
        if (
            double is not None
            and time.monotonic() - double[0] < interval
            and (pos - double[1]).manhattanLength() < 8
            and self._select_unit(pos, paragraph=True)
        ):
            self._press = self._anchor = None  # a triple-click selects the paragraph
            return
        self.clear_selection()
        selectable = hit is None or hit.action == "link"
        self._anchor = self._text_pos(pos) if selectable else None

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        self._autoscroll.stop()
        dragged, self._dragging = self._dragging, False
        self._anchor = None
        press, self._press = self._press, None
        if dragged or event.button() != Qt.MouseButton.LeftButton:
            return
        found = self._hit_at(event.position().toPoint())
        if found is None or found[1] is None or press is None or found[1] != press:
            return
        self.activate(found[0], found[1])

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        pos = event.position().toPoint()
        found = self._hit_at(pos)
        hit = found[1] if found else None
        left = event.button() == Qt.MouseButton.LeftButton
        if left and (hit is None or hit.action == "link") and self._select_unit(pos, False):
            self._double = (time.monotonic(), pos)
            self._press = self._anchor = None
            return
        self.mousePressEvent(event)

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            assert isinstance(event, QHelpEvent)
            found = self._layout_at(event.pos())
            tip = found[1].tooltip_at(found[2]) if found else ""
            if found and tip and self._offered(found[1].hit(found[2])) is None:
                tip = WAIT_WORDS
            if tip:
                QToolTip.showText(event.globalPos(), tip, self.viewport())
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)

    def clicked_link_text(self, url: str) -> str | None:
        """The text of the link to `url` clicked last (None: no such click is known, so the
        caller must not assume the text showed the address)."""
        clicked, self._clicked_link = self._clicked_link, None
        return clicked[1] if clicked is not None and clicked[0] == url else None

    def activate(self, item: ChatItem, hit: Hit) -> None:
        """Performs what a click on `hit` (a link, a toggle, Copy, Retry…) does."""
        if self._offered(hit) is None:
            return
        if hit.action == "link":
            self._clicked_link = (str(hit.payload), hit.text)
            self.linkActivated.emit(str(hit.payload))
        elif hit.action == "open_file":
            address = QUrl.fromLocalFile(str(hit.payload)).toString()
            self._clicked_link = (address, str(hit.payload))
            self.linkActivated.emit(address)
        elif hit.action == "copy_code":
            block, code = hit.payload
            QGuiApplication.clipboard().setText(code)
            self._show_copied(item, block)
        elif hit.action == "copy_message":
            QGuiApplication.clipboard().setText(self.shown_text(item))
            self._show_copied(item, WHOLE_MESSAGE)
        elif hit.action == "edit" and isinstance(item, UserMessage):
            self.start_edit(item)
        elif hit.action == "regenerate" and isinstance(item, AssistantMessage):
            self.regenerate(item)
        elif hit.action in ("branch_prev", "branch_next"):
            index, wanted = hit.payload
            self.branchRequested.emit(index, wanted)
        elif hit.action == "connect":
            self.connectRequested.emit()
        elif hit.action == "retry" and isinstance(item, ErrorItem):
            item.retried = True
            self.chat_model.changed(item)
            self.retryRequested.emit()
        elif isinstance(item, ThinkingItem) and hit.action == "toggle_thinking":
            self.toggle_thinking(item)
        elif isinstance(item, DelegationCard) and hit.action == "toggle_steps":
            self.toggle_steps(item)
        elif hit.action == "open_conversation":
            self.conversationRequested.emit(str(hit.payload))
        elif isinstance(item, ToolCard) and hit.action in ("toggle_args", "toggle_result"):
            if hit.action == "toggle_args":
                item.args_open = not item.args_open
            else:
                item.result_open = not item.result_open
            self.chat_model.changed(item)

    def shown_text(self, item: ChatItem) -> str:
        """What "Copy" copies: the item's text as the view shows it (an answer's Markdown
        rendered, so nothing the view does not show reaches the clipboard)."""
        if isinstance(item, MessageItem):
            return _plain(self.chat_delegate.layout(item), item)
        return item.plain_text()

    def regenerate(self, item: AssistantMessage) -> None:
        """Asks for answer `item` again (not while a turn runs, nor before its index is known)."""
        if item.index is not None and not self._busy:
            self.regenerateRequested.emit(item.index)

    def _show_copied(self, item: ChatItem, block: int) -> None:
        self.chat_delegate.state.copied = (id(item), block)
        self._copied_timer.start()
        self._update_row(item.row)

    def toggle_thinking(self, item: ThinkingItem) -> None:
        """Opens or closes a thinking block (text still buffered is shown at once)."""
        if item is self._thinking and self._pending_reasoning:
            self._flush()
        item.open = not item.open
        self._dirty.pop(id(item), None)
        self.chat_model.changed(item)

    def toggle_card(self, card: ToolCard) -> None:
        """Opens or closes a tool card's details (and its result, if it has one)."""
        opening = not (card.args_open or card.result_open)
        card.args_open = opening
        card.result_open = opening and bool(card.result or card.terminal)
        self.chat_model.changed(card)

    def _clear_copied(self) -> None:
        self.chat_delegate.state.copied = None
        self.viewport().update()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        index = self.currentIndex()
        item = self.chat_model.items[index.row()] if index.isValid() else None
        if event.key() in (Qt.Key.Key_Space, Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if isinstance(item, ThinkingItem):
                self.toggle_thinking(item)
                return
            if isinstance(item, ToolCard):
                self.toggle_card(item)
                return
        if event.matches(QKeySequence.StandardKey.Copy):
            if self.has_selection():
                self.copy()
            elif item is not None:
                QGuiApplication.clipboard().setText(self.shown_text(item))
            return
        if self._own_key(event, item):
            if isinstance(item, UserMessage) and not self._busy:
                self.start_edit(item)
            elif isinstance(item, AssistantMessage):
                self.regenerate(item)
            return
        key = event.key(), event.modifiers()
        if key == (Qt.Key.Key_F10, Qt.KeyboardModifier.ShiftModifier):
            self._keyboard_menu()
            return
        if event.matches(QKeySequence.StandardKey.SelectAll):
            self.selectAll()
            return
        if event.key() == Qt.Key.Key_Escape and self.has_selection():
            self.clear_selection()
            return
        super().keyPressEvent(event)

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ShortcutOverride:
            assert isinstance(event, QKeyEvent)
            index = self.currentIndex()
            item = self.chat_model.items[index.row()] if index.isValid() else None
            if self._own_key(event, item):
                event.accept()  # F2 edits the current message here, not the chat's title
                return True
        return super().event(event)

    def _own_key(self, event: QKeyEvent, item: ChatItem | None) -> bool:
        """F2 on one of your messages, Ctrl+Shift+R on an answer (both with an index)."""
        if not isinstance(item, MessageItem) or item.index is None:
            return False
        combo = event.keyCombination().toCombined()
        if isinstance(item, UserMessage):
            return combo == _first_combined(EDIT_KEY)
        return combo == _first_combined(REGENERATE_KEY)

    def _branch_switch(self, branch: int, wanted: int) -> Callable[[], None]:
        return lambda: self.branchRequested.emit(branch, wanted)

    def _keyboard_menu(self) -> None:
        """Shift+F10: the context menu of the current message."""
        index = self.currentIndex()
        if not index.isValid():
            return
        point = self._menu_point(index)
        vp = self.viewport()
        event = QContextMenuEvent(QContextMenuEvent.Reason.Keyboard, point, vp.mapToGlobal(point))
        self.contextMenuEvent(event)

    def _menu_point(self, index: QModelIndex) -> QPoint:
        """Where a keyboard-opened menu appears: at the current row, inside the viewport."""
        rect = self.visualRect(index)
        height = self.viewport().height()
        return QPoint(rect.x() + 40, min(max(rect.y() + 12, 0), max(0, height - 1)))

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        pos = event.pos()
        keyboard = event.reason() == QContextMenuEvent.Reason.Keyboard
        index = QModelIndex() if keyboard else self.indexAt(pos)
        if not index.isValid():
            index = self.currentIndex()
            if not index.isValid():
                return
        if keyboard:  # the event's position is the widget's, not the row's
            pos = self._menu_point(index)
        item = self.chat_model.items[index.row()]
        layout = self.chat_delegate.layout(item)
        local = QPointF(pos) - self.chat_delegate.origin(self.visualRect(index), item)
        if keyboard:
            local = QPointF(-1, -1)  # no code block or link under a key
        menu = QMenu(self)
        clipboard = QGuiApplication.clipboard()
        if self.has_selection():
            menu.addAction("Copy", self.copy)
        code = layout.code_at(local)
        if code is not None:
            menu.addAction("Copy code", lambda: clipboard.setText(code))
        hit = layout.hit(local)
        if hit is not None and hit.action == "link":
            menu.addAction("Copy link", lambda: clipboard.setText(str(hit.payload)))
        if isinstance(item, ThinkingItem):
            menu.addAction(
                "Hide thinking" if item.open else "Show thinking",
                lambda: self.toggle_thinking(item),
            )
            menu.addAction("Copy thinking", lambda: clipboard.setText(item.text))
        elif isinstance(item, ToolCard):
            if isinstance(item, DelegationCard):
                self._add_delegation_actions(menu, item)
            if item.arguments:
                menu.addAction("Copy arguments", lambda: clipboard.setText(item.arguments))
            if (item.result or item.error) and item.status != ToolStatus.DENIED:
                menu.addAction("Copy result", lambda: clipboard.setText(item.result or item.error))
        elif isinstance(item, MessageItem):
            menu.addAction("Copy message", lambda: clipboard.setText(_plain(layout, item)))
            if isinstance(item, AssistantMessage):
                menu.addAction(
                    "Copy as Markdown (source)", lambda: clipboard.setText(item.markdown())
                )
        self._add_turn_actions(menu, item)
        menu.addSeparator()
        menu.addAction("Select all", self.selectAll)
        where = self.viewport().mapToGlobal(pos) if keyboard else event.globalPos()
        menu.exec(where)

    def _add_delegation_actions(self, menu: QMenu, item: DelegationCard) -> None:
        """The card's own actions, for the keyboard: its steps, its agent's conversation."""
        if item.steps:
            words = "Show the agent's steps" if item.collapsed else "Hide the agent's steps"
            menu.addAction(words, lambda: self.toggle_steps(item))
        conversation = item.conversation_id
        if conversation and item.finished:
            action = menu.addAction(
                f"Open {item.title}’s conversation",
                lambda: self.conversationRequested.emit(conversation),
            )
            action.setEnabled(not self._busy)
        menu.addSeparator()

    def _add_turn_actions(self, menu: QMenu, item: ChatItem) -> None:
        """Edit and resend, Regenerate and the versions: the keyboard's way to the buttons
        under a message (disabled while a turn runs)."""
        if not isinstance(item, _SWITCHABLE):
            return
        if isinstance(item, MessageItem) and item.index is None:
            return  # not stored yet: nothing to edit, regenerate or switch
        idle = not self._busy
        menu.addSeparator()
        if isinstance(item, UserMessage):
            action = menu.addAction("Edit and resend…", lambda: self.start_edit(item))
            action.setShortcut(QKeySequence(EDIT_KEY))
        elif isinstance(item, AssistantMessage):
            action = menu.addAction("Regenerate", lambda: self.regenerate(item))
            action.setShortcut(QKeySequence(REGENERATE_KEY))
        if isinstance(item, MessageItem):
            action.setShortcutVisibleInContextMenu(True)
            action.setEnabled(idle)
        branch = item.branch
        if branch is None:
            return
        for words, wanted in (
            ("Previous version", branch.current - 1),
            ("Next version", branch.current + 1),
        ):
            action = menu.addAction(words, self._branch_switch(branch.index, wanted))
            action.setEnabled(idle and 1 <= wanted <= branch.count)

    # ---- editing a message ---------------------------------------------------------------

    def start_edit(self, item: UserMessage) -> MessageEditor | None:
        """Opens the inline editor over a user message (its index must be known)."""
        if item.index is None or item.row < 0:
            return None
        self.cancel_edit()
        text = self.editable_text(item.index) if self.editable_text else item.text
        editor = MessageEditor(text or item.text, self.chat_delegate.theme)
        editor.set_busy(self._busy)
        editor.sent.connect(lambda text, it=item: self._edit_sent(it, text))
        editor.cancelled.connect(self.cancel_edit)
        editor.heightChanged.connect(lambda height, it=item: self._editor_height(it, height))
        item.editing, item.editor_height = True, editor.wanted_height()
        self._editing = (item, editor)
        self.chat_model.changed(item)
        self.setIndexWidget(self.chat_model.index(item.row, 0), editor)
        editor.show()
        editor.start()
        return editor

    def editor(self) -> MessageEditor | None:
        """The open message editor (tests, the window)."""
        return self._editing[1] if self._editing else None

    def cancel_edit(self) -> None:
        editing, self._editing = self._editing, None
        if editing is None:
            return
        item, editor = editing
        focused = QApplication.focusWidget()
        had_focus = focused is not None and editor.isAncestorOf(focused)
        if 0 <= item.row < len(self.chat_model.items) and self.chat_model.items[item.row] is item:
            self.setIndexWidget(self.chat_model.index(item.row, 0), None)  # type: ignore[arg-type]
            item.editing = False
            self.chat_model.changed(item)
        editor.hide()
        editor.deleteLater()
        if had_focus:
            self.setFocus(Qt.FocusReason.OtherFocusReason)

    def _edit_sent(self, item: UserMessage, text: str) -> None:
        """The editor's Send: the editor closes only once the edit was taken."""
        index, editor = item.index, self.editor()
        if index is None or editor is None or self._busy:
            return
        if self.submit_edit is None:
            self.cancel_edit()
            self.editRequested.emit(index, text)
            return
        if self.submit_edit(index, text):
            if self.editor() is editor:  # (reloading the history has closed it already)
                self.cancel_edit()
        elif self.editor() is editor:
            editor.show_problem(EDIT_NOT_SENT)

    def _editor_height(self, item: UserMessage, height: int) -> None:
        if item.editing and item.editor_height != height:
            item.editor_height = height
            self.chat_model.changed(item)


#: Rows that can carry the version switch.
_SWITCHABLE = (MessageItem, MarkerItem, ErrorItem)


def _asked_by(request: ApprovalRequest) -> ApprovalRequest:
    """A sub-agent's question as its card shows it: "Researcher wants to: …" (the
    request's answers stay what it allows: only Allow once and Deny)."""
    if not request.agent:
        return request
    summary = request.summary or tool_title(request.tool)
    return dataclasses.replace(
        request, summary=f"{one_line(request.agent, 40)} wants to: {summary}"
    )


def _with_delegations(
    items: list[ChatItem], tool_calls: Sequence[ToolCallRecord] | None
) -> list[ChatItem]:
    """Stored `delegate_agent` calls as delegation cards (their agent's conversation from
    the stored result)."""
    data = {r.call_id: r.data for r in tool_calls or ()}
    return [
        delegation_card(i, data.get(i.call_id))
        if type(i) is ToolCard and i.name == DELEGATE_TOOL
        else i
        for i in items
    ]


def _shifted(pos: TextPos, inserted: int) -> TextPos:
    """A place in the text after a row was inserted at `inserted`."""
    return (pos[0] + 1, pos[1], pos[2]) if pos[0] >= inserted else pos


def _whole_text(item: ChatItem) -> str:
    """A message's text as shown, without laying it out."""
    if isinstance(item, AssistantMessage):
        return message_plain(item.text)
    return item.plain_text()


def _plain(layout: object, item: ChatItem) -> str:
    """The message as it reads on screen (markdown rendered to text)."""
    blocks = getattr(layout, "blocks", None)
    if blocks:
        return "\n\n".join(doc_text(block.doc) for block, _, _ in blocks)
    return item.plain_text()


def _first_combined(shortcut: str) -> int:
    """The first key combination of a shortcut, as `QKeyEvent.keyCombination()` gives it."""
    return QKeySequence(shortcut)[0].toCombined()  # type: ignore[index]
