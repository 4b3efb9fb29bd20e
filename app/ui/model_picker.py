"""The model picker in the chat header: "model · provider" that opens a searchable list of
every provider account's models, fetched from the servers.

Each account's list is asked for off the GUI thread (the key, if any, is read in a worker
thread; a server gets a short timeout) and kept for the session. A server that cannot be
reached shows why in its own group; the others are not held up. Model names and server
messages are plain text, drawn by the delegate, never rich text.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import shiboken6
from PySide6.QtCore import (
    QEvent,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QPoint,
    QRect,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QKeyEvent,
    QPainter,
    QPainterPath,
    QPaintEvent,
    QPalette,
    QPen,
)
from PySide6.QtWidgets import (
    QAbstractButton,
    QFrame,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QSizePolicy,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from app.core.providers.base import AuthError, ProviderConfig
from app.core.providers.kinds import provider_kind
from app.core.providers.urls import display_origin, normalize_base_url
from app.core.settings import ProviderAccount
from app.core.visible import one_line
from app.ui.plain_text import plain_tooltip
from app.ui.settings.connection import classify_failure, connected
from app.ui.settings.page import in_thread

log = logging.getLogger(__name__)

#: Seconds a server has to list its models before its group says it did not answer.
FETCH_TIMEOUT = 8.0
POPUP_WIDTH = 400
POPUP_MAX_LIST_HEIGHT = 380
#: Model rows shown per account; the rest are found by typing (a server may list 2,000).
SHOWN_PER_ACCOUNT = 100
NO_PROVIDER = "No model connected"
NEEDS_KEY = "This server needs an API key: add it in Settings → Model providers."

Kind = Literal["header", "note", "error", "model", "action"]
#: kind, text shown, account id, model (or action), tooltip (plain text; "" for none)
Row = tuple[Kind, str, str, str, str]
KIND_ROLE = Qt.ItemDataRole.UserRole + 1
ACCOUNT_ROLE = Qt.ItemDataRole.UserRole + 2
MODEL_ROLE = Qt.ItemDataRole.UserRole + 3
CURRENT_ROLE = Qt.ItemDataRole.UserRole + 4
REFRESH, CONNECT = "refresh", "connect"


@dataclass
class Listing:
    """One account's models as its server listed them (or why it could not)."""

    where: tuple[str, str]  # (kind, base URL) it was fetched from
    models: list[str] = field(default_factory=list)
    error: str | None = None
    loading: bool = False


def account_label(account: ProviderAccount) -> str:
    return one_line(account.label.strip() or "Unnamed", 60)


def account_where(account: ProviderAccount) -> str:
    """The account's server as `scheme://host:port`, a non-ASCII host in punycode (its
    kind's default server when it names none, as the runtime does)."""
    return display_origin(account.base_url.strip() or provider_kind(account.kind).default_base_url)


class ModelPicker(QWidget):
    """A compact header control: shows the conversation's model and provider; opens a
    searchable list of the models of every configured provider account.

    `set_choice` / `choice` hold (account id or None for the active account, model or ""
    for the account's own); `chosen(account_id, model)` is emitted when the user picks
    one. `refresh()` forgets the fetched lists (after a settings change, or on request).
    """

    chosen = Signal(str, str)
    connectRequested = Signal()

    def __init__(self, runtime: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self.fetch_timeout = FETCH_TIMEOUT
        self._choice: tuple[str | None, str] = (None, "")
        self._listings: dict[str, Listing] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        #: account id → the number of the fetch whose answer is wanted (older ones are not)
        self._fetching: dict[str, int] = {}
        self._fetch_ids = itertools.count(1)
        self.button = _PickerButton(self)
        self.button.clicked.connect(self.open_popup)
        self.button.typed.connect(self._open_with_text)
        self.setFocusProxy(self.button)
        self.popup = _Popup(self)
        self.popup.activated.connect(self._activate)
        self.popup.filter.textChanged.connect(lambda _: self._rebuild(keep=False))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.button)
        self.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)
        self._update_button()

    # -- public API --

    def set_choice(self, account_id: str | None, model: str) -> None:
        """Show this choice (a conversation's); does not emit `chosen`."""
        self._choice = (account_id or None, model or "")
        self._update_button()
        if self.popup.isVisible():
            self._rebuild()

    def choice(self) -> tuple[str | None, str]:
        return self._choice

    def refresh(self) -> None:
        """Forget the fetched lists and re-read the accounts; an open list fetches again."""
        self.cancel()
        self._listings.clear()
        self._update_button()
        if self.popup.isVisible():
            self._fetch_missing()
            self._rebuild()

    def listing(self, account_id: str) -> Listing | None:
        """What is known of an account's models (None: not asked yet)."""
        return self._listings.get(account_id)

    def open_popup(self) -> None:
        """Show the list under the button, fetching the lists not known yet."""
        self._fetch_missing()
        self.popup.filter.clear()
        self._rebuild()
        self.popup.open_below(self.button)

    # -- the button --

    def _accounts(self) -> list[ProviderAccount]:
        return list(self.runtime.settings.providers)

    def resolved(self) -> tuple[ProviderAccount | None, str]:
        """The account and model the choice stands for now ("" for the server's first)."""
        account_id, model = self._choice
        accounts = self._accounts()
        account = next((a for a in accounts if a.id == account_id), None)
        if account is None:
            account = self.runtime.settings.active_provider_account()
            model = model if account_id is None else ""
        if account is None:
            return None, ""
        return account, model or account.model

    def _update_button(self) -> None:
        account, model = self.resolved()
        if account is None:
            self.button.set_parts(NO_PROVIDER, "")
            self.button.setToolTip("No model provider is set up. Click to connect one.")
            description = "No model provider is set up. Press Enter to connect one."
        else:
            shown = one_line(model, 80) or "default model"
            self.button.set_parts(shown, account_label(account))
            self.button.setToolTip(
                plain_tooltip(
                    f"Model: {shown}\nProvider: {account_label(account)} "
                    f"({account_where(account)})\nClick to choose another"
                )
            )
            description = (
                f"{shown} from {account_label(account)}. Press Enter to choose another model."
            )
        self.button.setAccessibleName("Model")
        self.button.setAccessibleDescription(description)
        self.updateGeometry()

    def _open_with_text(self, text: str) -> None:
        self.open_popup()
        self.popup.filter.setText(text)

    # -- fetching --

    def _where(self, account: ProviderAccount) -> tuple[str, str]:
        return account.kind, normalize_base_url(account.kind, account.base_url)

    def _fetch_missing(self) -> None:
        for account in self._accounts():
            known = self._listings.get(account.id)
            if known is not None and known.where == self._where(account):
                continue
            self._listings[account.id] = Listing(self._where(account), loading=True)
            if (running := self._tasks.pop(account.id, None)) is not None:
                running.cancel()  # it asked the server the account no longer names
            try:
                fetch = next(self._fetch_ids)
                task = asyncio.ensure_future(self._fetch(account, fetch))
            except RuntimeError:  # no event loop (the app is closing)
                return
            self._tasks[account.id] = task
            self._fetching[account.id] = fetch

    async def _fetch(self, account: ProviderAccount, fetch: int) -> None:
        """Ask the account's server for its models. The config (and the key, if the
        account has one: local servers never touch the keyring) is read in a worker
        thread; the server gets `fetch_timeout` seconds and no retries. A 401 to a request
        without a key asks the keyring once more (the index of names may have lost it)."""
        where = self._where(account)
        key: str | None = None
        try:
            config = await self._config(account, recheck=False)
            key = config.api_key
            try:
                models = await self._ask(config)
            except AuthError:
                if key:
                    raise
                config = await self._config(account, recheck=True)
                if not config.api_key:
                    raise
                key = config.api_key
                models = await self._ask(config)
            listing = Listing(where, models=models)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            listing = Listing(where, error=_why(exc, key))
        finally:
            mine = shiboken6.isValid(self) and self._fetching.get(account.id) == fetch
            if mine:
                del self._fetching[account.id]
                self._tasks.pop(account.id, None)
        if not mine:  # refreshed or cancelled meanwhile: a newer fetch owns the entry
            return
        self._listings[account.id] = listing
        if self.popup.isVisible():
            self._rebuild(keep=True)

    async def _config(self, account: ProviderAccount, *, recheck: bool) -> ProviderConfig:
        config: ProviderConfig = await in_thread(
            partial(self.runtime.account_provider_config, account.id, recheck_key=recheck)
        )
        config.connect_timeout = min(config.connect_timeout, self.fetch_timeout)
        config.read_timeout = self.fetch_timeout
        config.max_retries = 0
        return config

    async def _ask(self, config: ProviderConfig) -> list[str]:
        async with connected(config) as provider:
            return await asyncio.wait_for(provider.list_models(), self.fetch_timeout)

    # -- the list --

    def _rebuild(self, *, keep: bool = False) -> None:
        """Fill the list for the search terms. `keep`: a list arrived, the terms did not
        change: the highlighted model stays highlighted (Enter must pick what was seen)."""
        terms = self.popup.filter.text().lower().split()
        current_account, current_model = self.resolved()
        current = (current_account.id if current_account else None, current_model)
        rows: list[Row] = []
        for account in self._accounts():
            rows += self._group(account, terms, current)
        if terms and not any(kind == "model" for kind, *_ in rows):
            missing = f"No model matches “{one_line(' '.join(terms), 40)}”."
            rows.append(("note", missing, "", "", ""))
        if not self._accounts():
            rows.append(("note", "No provider is set up yet.", "", "", ""))
        if self._accounts():
            rows.append(("action", "Refresh the lists", "", REFRESH, ""))
        rows.append(("action", "Connect a provider…", "", CONNECT, ""))
        self.popup.show_rows(rows, current, keep=keep)

    def _group(
        self, account: ProviderAccount, terms: list[str], current: tuple[str | None, str]
    ) -> list[Row]:
        """One account's rows: its heading, a note, and the models that match `terms`
        (at most SHOWN_PER_ACCOUNT, the one in use among them; a note says how many more)."""
        listing = self._listings.get(account.id)
        models = listing.models if listing else []
        label_hit = all(t in account.label.lower() for t in terms)
        matches = models if label_hit else [m for m in models if all(t in m.lower() for t in terms)]
        if terms and not matches and not label_hit:
            return []
        shown = matches[:SHOWN_PER_ACCOUNT]
        in_use = current[1] if current[0] == account.id else None
        if in_use and in_use not in shown and in_use in matches:
            shown.append(in_use)
        label = account_label(account)
        group: list[Row] = [("header", label, account.id, "", f"{label}\n{account_where(account)}")]
        if listing is None or listing.loading:
            group.append(("note", "Loading models…", account.id, "", ""))
        elif listing.error:
            group.append(("error", listing.error, account.id, "", listing.error))
        elif not models:
            group.append(("note", "This server lists no models.", account.id, "", ""))
        group += [("model", one_line(m, 120), account.id, m, "") for m in shown]
        if len(matches) > len(shown):
            more = len(matches) - len(shown)
            group.append(("note", f"{more:,} more: type to filter.", account.id, "", ""))
        return group

    def _activate(self, kind: str, account_id: str, value: str) -> None:
        if kind == "action" and value == REFRESH:
            self.refresh()
            return
        if kind == "action" and value == CONNECT:
            self.popup.hide()
            self.connectRequested.emit()
            return
        if kind == "model":
            self.popup.hide()
            self._choice = (account_id, value)
            self._update_button()
            self.chosen.emit(account_id, value)

    def cancel(self) -> None:
        """Stop asking servers (the window is closing)."""
        for task in self._tasks.values():
            task.cancel()
        self._tasks.clear()
        self._fetching.clear()


def _why(exc: Exception, key: str | None) -> str:
    from app.core.runtime import ConfigError

    if isinstance(exc, ConfigError):
        return one_line(str(exc), 300)
    if isinstance(exc, AuthError) and not key:
        return NEEDS_KEY
    return classify_failure(exc, stage="list", key=key).text


class _PickerButton(QAbstractButton):
    """ "model · provider" with a chevron; Enter, Space or Alt+Down opens the list, and a
    typed character opens it with that character in the search field."""

    typed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelPickerButton")
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setAttribute(Qt.WidgetAttribute.WA_Hover)
        self._model = ""
        self._provider = ""

    def set_parts(self, model: str, provider: str) -> None:
        self._model, self._provider = model, provider
        self.setText(f"{model} · {provider}" if provider else model)
        self.updateGeometry()
        self.update()

    def parts(self) -> tuple[str, str]:
        return self._model, self._provider

    def _provider_text(self) -> str:
        return f"  ·  {self._provider}" if self._provider else ""

    def sizeHint(self) -> QSize:
        fm = self.fontMetrics()
        width = fm.horizontalAdvance(self._model + self._provider_text()) + 12 + 10 + 16
        return QSize(min(width, 420), max(fm.height() + 12, 30))

    def minimumSizeHint(self) -> QSize:
        return QSize(120, self.sizeHint().height())

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        alt_down = key == Qt.Key.Key_Down and event.modifiers() & Qt.KeyboardModifier.AltModifier
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space) or alt_down:
            self.click()
            return
        text = event.text()
        if text and text.isprintable() and not text.isspace() and not _has_command(event):
            self.typed.emit(text)
            return
        super().keyPressEvent(event)

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        rect = self.rect().adjusted(1, 1, -1, -1)
        if self.isDown() or self.underMouse() or self.hasFocus():
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(pal.color(QPalette.ColorRole.AlternateBase))
            p.drawRoundedRect(rect, 6, 6)
        if self.hasFocus():
            p.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 1.5))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRoundedRect(rect, 6, 6)
        inner = rect.adjusted(10, 0, -24, 0)
        fm = self.fontMetrics()
        model = fm.elidedText(self._model, Qt.TextElideMode.ElideRight, int(inner.width() * 0.6))
        rest = fm.elidedText(
            self._provider_text(),
            Qt.TextElideMode.ElideRight,
            inner.width() - fm.horizontalAdvance(model),
        )
        align = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
        p.setPen(pal.color(QPalette.ColorRole.WindowText))
        p.drawText(inner, align, model)
        p.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
        p.drawText(inner.adjusted(fm.horizontalAdvance(model), 0, 0, 0), align, rest)
        _chevron(p, QRect(rect.right() - 20, rect.center().y() - 5, 10, 10), pal)


def _chevron(p: QPainter, box: QRect, pal: QPalette) -> None:
    path = QPainterPath()
    path.moveTo(box.left() + 1, box.top() + 3)
    path.lineTo(box.center().x() + 0.5, box.bottom() - 2)
    path.lineTo(box.right(), box.top() + 3)
    pen = QPen(pal.color(QPalette.ColorRole.PlaceholderText), 1.6)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
    p.setPen(pen)
    p.setBrush(Qt.BrushStyle.NoBrush)
    p.drawPath(path)


def _has_command(event: QKeyEvent) -> bool:
    mods = event.modifiers()
    return bool(mods & (Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier))


class _Popup(QFrame):
    """The drop-down: a search field over the grouped list. Up/Down move through the
    models (and the two actions at the end), Enter picks, Esc closes."""

    activated = Signal(str, str, str)  # kind, account id, model or action

    def __init__(self, owner: QWidget) -> None:
        super().__init__(owner, Qt.WindowType.Popup)
        self.setObjectName("modelPickerPopup")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setAutoFillBackground(True)
        self.setBackgroundRole(QPalette.ColorRole.Base)
        self.filter = QLineEdit()
        self.filter.setObjectName("modelPickerFilter")
        self.filter.setPlaceholderText("Search models")
        self.filter.setAccessibleName("Search models")
        self.filter.setClearButtonEnabled(True)
        self.filter.installEventFilter(self)
        self.list = QListWidget()
        self.list.setObjectName("modelPickerList")
        self.list.setAccessibleName("Models")
        self.list.setStyleSheet(
            "QListWidget#modelPickerList { border: none; background: transparent; }"
        )
        self.list.setItemDelegate(_RowDelegate(self.list))
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setVerticalScrollMode(QListWidget.ScrollMode.ScrollPerPixel)
        self.list.setMouseTracking(True)
        self.list.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # keys go through the search field
        self.list.itemClicked.connect(self._on_item)
        self._moved = False  # the user moved the selection since the list was opened
        self.filter.textEdited.connect(self._forget_move)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.setSpacing(6)
        layout.addWidget(self.filter)
        layout.addWidget(self.list)

    # -- content --

    def show_rows(self, rows: list[Row], current: tuple[Any, str], *, keep: bool = False) -> None:
        """Fill the list. The selection stays where the user moved it. Otherwise it is on
        the model in use, else — `keep`: only a list arrived — on the model highlighted
        before (a late list must not make Enter pick a model that was never highlighted),
        else on the first model shown."""
        before = self._selected_key()
        if not (self._moved or (keep and before is not None and before[0] == "model")):
            before = None
        self.list.setUpdatesEnabled(False)
        self.list.clear()
        in_use: QListWidgetItem | None = None
        kept: QListWidgetItem | None = None
        for kind, text, account_id, value, tip in rows:
            item = QListWidgetItem(text)
            item.setData(KIND_ROLE, kind)
            item.setData(ACCOUNT_ROLE, account_id)
            item.setData(MODEL_ROLE, value)
            choosable = kind in ("model", "action")
            is_current = kind == "model" and (account_id, value) == current
            item.setData(CURRENT_ROLE, is_current)
            item.setFlags(
                Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
                if choosable
                else Qt.ItemFlag.NoItemFlags
            )
            if tip:
                item.setToolTip(plain_tooltip(tip))
            self.list.addItem(item)
            if is_current:
                in_use = item
            if (kind, account_id, value) == before:
                kept = item
        select = (kept or in_use) if self._moved else (in_use or kept)
        if select is None:
            choosable_items = self._choosable()
            models = [i for i in choosable_items if i.data(KIND_ROLE) == "model"]
            select = next(iter(models or choosable_items), None)
        if select is not None:
            self.list.setCurrentItem(select)
            self.list.scrollToItem(select)
        self.list.setUpdatesEnabled(True)
        self._fit()

    def _forget_move(self) -> None:
        self._moved = False

    def _selected_key(self) -> tuple[str, str, str] | None:
        item = self.list.currentItem()
        if item is None or not self.isVisible():
            return None
        return (item.data(KIND_ROLE), item.data(ACCOUNT_ROLE), item.data(MODEL_ROLE))

    def _choosable(self) -> list[QListWidgetItem]:
        items = (self.list.item(i) for i in range(self.list.count()))
        return [i for i in items if i.flags() & Qt.ItemFlag.ItemIsSelectable]

    def _fit(self) -> None:
        """As tall as the rows, up to POPUP_MAX_LIST_HEIGHT (rows past it are not measured)."""
        self.list.doItemsLayout()
        height = 4
        for row in range(self.list.count()):
            height += self.list.sizeHintForRow(row)
            if height >= POPUP_MAX_LIST_HEIGHT:
                break
        self.list.setFixedHeight(min(height, POPUP_MAX_LIST_HEIGHT))
        self.adjustSize()

    def open_below(self, anchor: QWidget) -> None:
        width = max(POPUP_WIDTH, anchor.width())
        self.setFixedWidth(width)
        self._fit()
        below = anchor.mapToGlobal(QPoint(anchor.width() - width, anchor.height() + 4))
        screen = anchor.screen().availableGeometry() if anchor.screen() else None
        if screen is not None:
            below.setX(max(screen.left(), min(below.x(), screen.right() - width)))
        self.move(below)
        self._moved = False
        self.show()
        self._fit()  # again: wrapped notes measure by the list's width, known once shown
        self.filter.setFocus()

    # -- keys and clicks --

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (
            watched is self.filter
            and event.type() == QEvent.Type.KeyPress
            and isinstance(event, QKeyEvent)
        ):
            return self._key(event)
        return super().eventFilter(watched, event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if not self._key(event):
            super().keyPressEvent(event)

    def _key(self, event: QKeyEvent) -> bool:
        key = event.key()
        if key == Qt.Key.Key_Escape:
            self.hide()
            return True
        if key in (Qt.Key.Key_Down, Qt.Key.Key_Up, Qt.Key.Key_PageDown, Qt.Key.Key_PageUp):
            step = {Qt.Key.Key_Down: 1, Qt.Key.Key_Up: -1}.get(Qt.Key(key), 0)
            self._move(step or (5 if key == Qt.Key.Key_PageDown else -5))
            return True
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            item = self.list.currentItem()
            if item is not None and item.flags() & Qt.ItemFlag.ItemIsSelectable:
                self._on_item(item)
            return True
        return False

    def _move(self, step: int) -> None:
        items = self._choosable()
        if not items:
            return
        current = self.list.currentItem()
        at = items.index(current) if current in items else -1
        target = items[max(0, min(len(items) - 1, at + step))] if at >= 0 else items[0]
        self.list.setCurrentItem(target)
        self.list.scrollToItem(target)
        self._moved = True

    def _on_item(self, item: QListWidgetItem) -> None:
        if item.flags() & Qt.ItemFlag.ItemIsSelectable:
            self.activated.emit(
                item.data(KIND_ROLE), item.data(ACCOUNT_ROLE), item.data(MODEL_ROLE)
            )

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        p = QPainter(self)
        p.setPen(QPen(self.palette().color(QPalette.ColorRole.Mid), 1))
        p.drawRect(self.rect().adjusted(0, 0, -1, -1))


class _RowDelegate(QStyledItemDelegate):
    """Group headings, notes (wrapped; errors in the error colour), models (a tick on the
    one in use) and the two actions, all drawn as plain text."""

    PAD_X = 10

    def _font(self, option: QStyleOptionViewItem, kind: str) -> QFont:
        font = QFont(option.font)
        if kind == "header":
            font.setWeight(QFont.Weight.DemiBold)
            font.setPointSizeF(max(7.0, font.pointSizeF() - 1))
        return font

    def _text_rect(self, rect: QRect, kind: str) -> QRect:
        indent = 0 if kind in ("header", "action") else 10
        return rect.adjusted(self.PAD_X + indent, 0, -self.PAD_X - 18, 0)

    def sizeHint(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> QSize:
        kind = str(index.data(KIND_ROLE))
        fm = QFontMetrics(self._font(option, kind))
        if kind in ("note", "error"):
            view = self.parent()
            width = view.viewport().width() if isinstance(view, QListWidget) else POPUP_WIDTH
            box = self._text_rect(QRect(0, 0, max(width, 120), 10_000), kind)
            text = str(index.data(Qt.ItemDataRole.DisplayRole) or "")
            flags = int(Qt.TextFlag.TextWordWrap)
            return QSize(width, fm.boundingRect(box, flags, text).height() + 10)
        if kind == "header":
            return QSize(0, fm.height() + 14)
        return QSize(0, max(fm.height() + 10, 28))

    def paint(
        self,
        painter: QPainter,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> None:
        kind = str(index.data(KIND_ROLE))
        pal: QPalette = option.palette
        rect: QRect = option.rect
        state = option.state
        text = str(index.data(Qt.ItemDataRole.DisplayRole) or "")
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if kind in ("model", "action") and state & QStyle.StateFlag.State_Selected:
            fill = QColor(pal.color(QPalette.ColorRole.Highlight))
            fill.setAlphaF(0.18)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(fill)
            painter.drawRoundedRect(rect.adjusted(2, 1, -2, -1), 5, 5)
        elif kind in ("model", "action") and state & QStyle.StateFlag.State_MouseOver:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(pal.color(QPalette.ColorRole.AlternateBase))
            painter.drawRoundedRect(rect.adjusted(2, 1, -2, -1), 5, 5)
        font = self._font(option, kind)
        painter.setFont(font)
        color = {
            "header": QPalette.ColorRole.PlaceholderText,
            "note": QPalette.ColorRole.PlaceholderText,
            "error": QPalette.ColorRole.BrightText,
            "action": QPalette.ColorRole.Link,
        }.get(kind, QPalette.ColorRole.Text)
        painter.setPen(pal.color(color))
        box = self._text_rect(rect, kind)
        if kind in ("note", "error"):
            flags = Qt.TextFlag.TextWordWrap | Qt.AlignmentFlag.AlignVCenter
            painter.drawText(box, int(flags), text)
        else:
            align = Qt.AlignmentFlag.AlignVCenter | (
                Qt.AlignmentFlag.AlignBottom if kind == "header" else Qt.AlignmentFlag.AlignLeft
            )
            shown = QFontMetrics(font).elidedText(text, Qt.TextElideMode.ElideMiddle, box.width())
            painter.drawText(box.adjusted(0, 0, 0, -3 if kind == "header" else 0), align, shown)
        if index.data(CURRENT_ROLE):
            _tick(painter, QRect(rect.right() - 22, rect.center().y() - 5, 11, 10), pal)
        painter.restore()


def _tick(p: QPainter, box: QRect, pal: QPalette) -> None:
    path = QPainterPath()
    path.moveTo(box.left(), box.center().y())
    path.lineTo(box.left() + box.width() * 0.38, box.bottom())
    path.lineTo(box.right(), box.top())
    pen = QPen(pal.color(QPalette.ColorRole.Highlight), 1.8)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
    p.setPen(pen)
    p.setBrush(Qt.BrushStyle.NoBrush)
    p.drawPath(path)
