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
"""

from __future__ import annotations

import time

from PySide6.QtCore import QEvent, QModelIndex, QPoint, QPointF, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QContextMenuEvent,
    QGuiApplication,
    QKeyEvent,
    QKeySequence,
    QMouseEvent,
    QPainter,
    QResizeEvent,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QMenu,
    QPushButton,
    QStyleOptionViewItem,
    QTreeView,
    QWidget,
)

from app.core.approval import Decision
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
from app.core.providers.base import ChatMessage
from app.core.store import ToolCallRecord
from app.ui.chat.approval_bar import ApprovalBar
from app.ui.chat.delegate import ChatDelegate
from app.ui.chat.history import history_items, pretty_arguments
from app.ui.chat.layouts import Hit
from app.ui.chat.model import (
    AssistantMessage,
    ChatItem,
    ChatModel,
    ErrorItem,
    NoticeItem,
    ThinkingItem,
    ToolCard,
    ToolStatus,
    UserMessage,
)
from app.ui.chat.terminal import terminal_output

FRAME_MS = 16
_DECISION_WORDS = {
    Decision.ALLOW_ONCE: "Allowed once",
    Decision.ALLOW_CONVERSATION: "Allowed in this conversation",
    Decision.ALWAYS_ALLOW: "Always allowed",
    Decision.ALWAYS_ALLOW_ANY: "Always allowed (any arguments)",
    Decision.TRUST_SOURCE: "Source trusted",
    Decision.DENY: "Denied",
}


class ChatView(QTreeView):
    approvalDecided = Signal(str, str)  # call_id, Decision value
    retryRequested = Signal()
    linkActivated = Signal(str)

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
        self, messages: list[ChatMessage], tool_calls: list[ToolCallRecord] | None = None
    ) -> None:
        """Replaces the conversation. Only what ends up on screen is rendered."""
        self._reset()
        self.chat_delegate.forget_all()
        items = history_items(messages, tool_calls)
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

    def add_user_message(self, text: str, attachments: list[str] | tuple[str, ...] = ()) -> None:
        self._flush()
        self._close_assistant()
        self._append(UserMessage(text=text, attachments=list(attachments)))
        self.scroll_to_bottom()

    def handle_event(self, event: AgentEvent) -> None:
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
            self.add_error(event.message, event.retryable)
        elif isinstance(event, Notice):
            self._flush()
            self._append(NoticeItem(message=event.message))

    def add_error(self, message: str, retryable: bool = False) -> None:
        self._flush()
        self._close_assistant()
        self._append(ErrorItem(message=message, retryable=retryable))

    def finish_streaming(self) -> None:
        """Flushes buffered text and closes the turn; what was still open was stopped."""
        self._flush()
        self._close_assistant(stopped=True)
        for card in self._cards.values():
            if not card.finished:
                self._detach_bar(card.call_id)
                card.approval = None
                card.status = ToolStatus.CANCELLED
                card.seconds = card.elapsed()
                self.chat_model.changed(card)

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

    def _reset(self) -> None:
        for timer in (self._flush_timer, self._settle_timer, self._relayout_timer, self._tick):
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
        self._close_assistant()
        card = ToolCard(
            call_id=event.call_id,
            name=event.name,
            category=event.category,
            operations=list(event.operations),
            arguments=pretty_arguments(event.arguments),
        )
        self._cards[event.call_id] = card
        self._append(card)
        if not self._tick.isActive():
            self._tick.start()

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
        card.approval = request
        card.category = card.category or request.category
        card.operations = list(request.operations)
        if not card.question:
            card.arguments = pretty_arguments(request.arguments) or card.arguments
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
        if source in ("user", "rule", "yes"):
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
        if card.status != ToolStatus.DENIED:
            card.status = ToolStatus.OK if result.ok else ToolStatus.ERROR
        card.result = result.content
        card.terminal = terminal_output(card.name, card.category, result.data)
        card.error = "" if result.ok else (result.error or result.content)
        card.attachments = list(result.attachments)
        card.seconds = event.seconds or card.elapsed()
        card.progress, card.fraction = "", None
        self.chat_model.changed(card)

    def _attach_bar(self, card: ToolCard) -> None:
        if card.call_id in self._bars or card.approval is None:
            return
        bar = ApprovalBar(card.approval, self.chat_delegate.theme)
        bar.decided.connect(lambda value, cid=card.call_id: self._decide(cid, value))
        bar.heightChanged.connect(lambda h, c=card: self._bar_height(c, h))
        card.panel_height = bar.wanted_height()
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
        had_focus = (
            bar.isAncestorOf(QGuiApplication.focusObject())
            if isinstance(QGuiApplication.focusObject(), QWidget)
            else False
        )
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

    def drawRow(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        # No row panel, hover or focus decoration from the style: the delegate draws it all.
        self.chat_delegate.state.now = time.monotonic()
        self.chat_delegate.paint(painter, option, index)

    def drawBranches(self, painter: QPainter, rect: object, index: QModelIndex) -> None:
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

    # ---- mouse, keyboard, context menu ---------------------------------------------------

    def _hit_at(self, pos: QPoint) -> tuple[ChatItem, Hit | None] | None:
        index = self.indexAt(pos)
        if not index.isValid():
            return None
        item = self.chat_model.items[index.row()]
        rect = self.visualRect(index)
        layout = self.chat_delegate.layout(item)
        return item, layout.hit(QPointF(pos) - self.chat_delegate.origin(rect))

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        found = self._hit_at(event.position().toPoint())
        hit = found[1] if found else None
        self.viewport().setCursor(
            Qt.CursorShape.PointingHandCursor if hit else Qt.CursorShape.ArrowCursor
        )
        if hit != self.chat_delegate.state.hover:
            self.chat_delegate.state.hover = hit
            self.viewport().update()
        if event.buttons() == Qt.MouseButton.NoButton:
            return
        super().mouseMoveEvent(event)

    def leaveEvent(self, event: QEvent) -> None:
        if self.chat_delegate.state.hover is not None:
            self.chat_delegate.state.hover = None
            self.viewport().update()
        super().leaveEvent(event)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        found = self._hit_at(event.position().toPoint())
        self._press = found[1] if found and event.button() == Qt.MouseButton.LeftButton else None
        self.setFocus(Qt.FocusReason.MouseFocusReason)
        if found is not None:
            self.setCurrentIndex(self.chat_model.index(found[0].row, 0))

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        found = self._hit_at(event.position().toPoint())
        press, self._press = self._press, None
        if found is None or found[1] is None or press is None or found[1] != press:
            return
        self.activate(found[0], found[1])

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        self.mousePressEvent(event)

    def activate(self, item: ChatItem, hit: Hit) -> None:
        """Performs what a click on `hit` (a link, a toggle, Copy, Retry…) does."""
        if hit.action == "link":
            self.linkActivated.emit(str(hit.payload))
        elif hit.action == "open_file":
            self.linkActivated.emit(QUrl.fromLocalFile(str(hit.payload)).toString())
        elif hit.action == "copy_code":
            block, code = hit.payload
            QGuiApplication.clipboard().setText(code)
            self.chat_delegate.state.copied = (id(item), block)
            self._copied_timer.start()
            self.viewport().update(self.visualRect(self.chat_model.index(item.row, 0)))
        elif hit.action == "retry" and isinstance(item, ErrorItem):
            item.retried = True
            self.chat_model.changed(item)
            self.retryRequested.emit()
        elif isinstance(item, ThinkingItem) and hit.action == "toggle_thinking":
            self.toggle_thinking(item)
        elif isinstance(item, ToolCard) and hit.action in ("toggle_args", "toggle_result"):
            if hit.action == "toggle_args":
                item.args_open = not item.args_open
            else:
                item.result_open = not item.result_open
            self.chat_model.changed(item)

    def toggle_thinking(self, item: ThinkingItem) -> None:
        """Opens or closes a thinking block (text still buffered is shown at once)."""
        if item is self._thinking and self._pending_reasoning:
            self._flush()
        item.open = not item.open
        self._dirty.pop(id(item), None)
        self.chat_model.changed(item)

    def _clear_copied(self) -> None:
        self.chat_delegate.state.copied = None
        self.viewport().update()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        index = self.currentIndex()
        if event.key() in (Qt.Key.Key_Space, Qt.Key.Key_Return, Qt.Key.Key_Enter):
            item = self.chat_model.items[index.row()] if index.isValid() else None
            if isinstance(item, ThinkingItem):
                self.toggle_thinking(item)
                return
        if event.matches(QKeySequence.StandardKey.Copy) and index.isValid():
            QGuiApplication.clipboard().setText(self.chat_model.items[index.row()].markdown())
            return
        super().keyPressEvent(event)

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        pos = event.pos()
        index = self.indexAt(pos)
        if not index.isValid():
            index = self.currentIndex()
            if not index.isValid():
                return
        item = self.chat_model.items[index.row()]
        layout = self.chat_delegate.layout(item)
        local = QPointF(pos) - self.chat_delegate.origin(self.visualRect(index))
        menu = QMenu(self)
        clipboard = QGuiApplication.clipboard()
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
            if item.arguments:
                menu.addAction("Copy arguments", lambda: clipboard.setText(item.arguments))
            if item.result or item.error:
                menu.addAction("Copy result", lambda: clipboard.setText(item.result or item.error))
        else:
            menu.addAction("Copy message", lambda: clipboard.setText(_plain(layout, item)))
            if isinstance(item, AssistantMessage):
                menu.addAction("Copy as Markdown", lambda: clipboard.setText(item.markdown()))
        menu.exec(event.globalPos())


def _plain(layout: object, item: ChatItem) -> str:
    """The message as it reads on screen (markdown rendered to text)."""
    blocks = getattr(layout, "blocks", None)
    if blocks:
        return "\n\n".join(block.doc.toPlainText() for block, _, _ in blocks)
    return item.plain_text()
