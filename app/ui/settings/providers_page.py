"""The "Model providers" page: accounts, their keys, and checking that a server answers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QSizePolicy,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)
from qasync import asyncSlot

from app.core.local_servers import DEFAULTS as LOCAL_CANDIDATES
from app.core.local_servers import Candidate, detect_local_servers
from app.core.provider_keys import save_key_changes, stored_key
from app.core.providers.base import ProviderConfig
from app.core.providers.kinds import (
    ENGINE_URL,
    addressed_kinds,
    default_preset,
    provider_kind,
)
from app.core.providers.urls import (
    display_origin,
    display_url,
    is_local_host,
    normalize_base_url,
    origin,
)
from app.core.runtime import Runtime
from app.core.secrets import SecretStoreError, env_api_key
from app.core.settings import ProviderAccount, Settings
from app.core.visible import one_line
from app.ui.engine_models import EngineModelsPanel
from app.ui.plain_text import plain_tooltip
from app.ui.settings.account_list import ACTIVE_ROLE, DETAIL_ROLE, AccountDelegate
from app.ui.settings.connection import (
    TEST_DEADLINE,
    Failure,
    Field,
    Stage,
    classify_failure,
    connected,
    ping,
    probe_config,
)
from app.ui.settings.page import Patch, SettingsPage, in_thread
from app.ui.settings.presets import (
    PRESETS,
    Preset,
    host,
    preset_for,
    same_url,
    url_problem,
)
from app.ui.settings.widgets import (
    ROW_HEIGHT,
    field_row,
    form_label,
    form_layout,
    muted_label,
    natural_width,
    plural,
    role_label,
    set_invalid,
    set_role,
)

log = logging.getLogger(__name__)

LIST_WIDTH = 250
SIDE_BUTTON_WIDTH = 132  # buttons right of a field share one width so the fields line up
#: Their widths in a small dialog (800×600 and below).
NARROW_LIST_WIDTH, NARROW_SIDE_BUTTON_WIDTH = 150, 96


#: The "Tool calls" choices (OpenAI-compatible accounts): ProviderAccount.tool_format.
TOOL_FORMATS = {
    "auto": "Automatic (recommended)",
    "native": "Native tool_calls only",
    "none": "Off (chat only)",
}
TOOL_FORMAT_HINTS = {
    "auto": "Uses the server's tool_calls, and also reads tool calls a model writes "
    "into its reply, as many local models do.",
    "native": "Only tool calls the server returns in its tool_calls field; anything in "
    "the reply text stays text.",
    "none": "Tools are not offered: the model only chats. For models that cannot use tools.",
}


#: The "Images" choices: ProviderAccount.images.
IMAGE_CHOICES = {
    "auto": "Automatic (by the model's name)",
    "on": "On: the model takes images",
    "off": "Off: send a note instead",
}


#: The built-in engine's kind (app.core.providers.kinds).
ENGINE_KIND = "engine"

NO_MODELS = (
    "The server lists no models. Load or download one there (for Ollama: "
    "ollama pull <name>), then Test again."
)


def local_names(candidates: tuple[Candidate, ...], joiner: str) -> str:
    """ "Ollama and LM Studio": the local servers Deskhand looks for."""
    names = [c.name for c in candidates]
    return f" {joiner} ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


class _Failed(Exception):
    """A Test step failed for a reason already put in words (e.g. no models)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.text)
        self.failure = failure


class ProvidersPage(SettingsPage):
    title = "Model providers"
    subtitle = (
        "Where Deskhand sends your messages: a model it runs on this computer, a local "
        f"server ({', '.join(c.name for c in LOCAL_CANDIDATES)}) or a cloud API. "
        "API keys are kept in the system keyring."
    )

    #: A Test or Refresh of an account ended (account id, whether it succeeded).
    tested = Signal(str, bool)

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        #: Where "Detect local servers" looks (tests point it at a scripted server).
        self.local_candidates: tuple[Candidate, ...] = LOCAL_CANDIDATES
        self.accounts: list[ProviderAccount] = []
        self.active: str | None = None
        self._saved: tuple[list[dict[str, Any]], str | None] = ([], None)
        self._new_keys: dict[str, str] = {}
        self._forget_keys: set[str] = set()
        self._removed: set[str] = set()
        self._key_stored: dict[str, bool | None] = {}
        self._key_errors: dict[str, str] = {}
        self._models: dict[str, list[str]] = {}
        self._results: dict[str, tuple[bool, str]] = {}
        #: account id → field → what went wrong there (shown next to that field)
        self._field_errors: dict[str, dict[Field, str]] = {}
        self._stage: dict[str, Stage] = {}
        self._cancelled: set[str] = set()
        self._running: dict[str, asyncio.Task[Any]] = {}
        #: The longest a Test or a Refresh may take, in seconds.
        self.test_timeout = TEST_DEADLINE
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loading = False
        self._build()
        self.load(runtime.settings)

    # -- layout --

    def _build(self) -> None:
        root = QHBoxLayout(self)
        root.setContentsMargins(0, 0, 0, 0)
        root.setSpacing(18)

        left_box = self.left_box = QWidget()
        left_box.setFixedWidth(LIST_WIDTH)
        left = QVBoxLayout(left_box)
        left.setContentsMargins(0, 0, 0, 0)
        left.setSpacing(8)
        self.account_list = QListWidget()
        self.account_list.setObjectName("accountList")
        self.account_list.setItemDelegate(AccountDelegate(self.account_list))
        self.account_list.setMouseTracking(True)
        self.account_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.account_list.currentRowChanged.connect(self._on_row_changed)
        left.addWidget(self.account_list, 1)

        buttons = QHBoxLayout()
        buttons.setSpacing(6)
        self.add_button = QPushButton("Add")
        _attach_preset_menu(self.add_button, self.add_account)
        self._add_engine_choice(self.add_button)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self.remove_selected)
        for b in (self.add_button, self.remove_button):
            buttons.addWidget(b)
        left.addLayout(buttons)
        self.detect_button = QPushButton("Detect local servers")
        self.detect_button.setToolTip(
            f"Look for {local_names(self.local_candidates, 'and')} running on this computer"
        )
        self.detect_button.clicked.connect(self.detect_servers)
        left.addWidget(self.detect_button)
        self.detect_result = muted_label("")
        self.detect_result.setTextFormat(Qt.TextFormat.PlainText)
        self.detect_result.hide()
        left.addWidget(self.detect_result)
        root.addWidget(left_box)

        self.details = QStackedWidget()
        self.empty_hint = muted_label(
            "No provider yet.\n\nClick “Add” and pick a preset, or “Detect local servers” "
            f"if {local_names(self.local_candidates, 'or')} is running on this computer."
        )
        self.empty_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.details.addWidget(self.empty_hint)
        self.details.addWidget(self._build_form())
        self.details.addWidget(self._build_engine_panel())
        root.addWidget(self.details, 1)

    # -- the built-in engine --

    def _build_engine_panel(self) -> QWidget:
        """The built-in engine's details: its models instead of an address and a key."""
        runtime = self.runtime
        self.engine_panel = EngineModelsPanel(lambda: runtime.local_models)
        self.engine_panel.useRequested.connect(self.use_engine_model)
        self.engine_panel.activeRequested.connect(self.make_selected_active)
        self.engine_panel.removed.connect(self._engine_model_removed)
        return self.engine_panel

    def _add_engine_choice(self, button: QPushButton) -> None:
        menu = button.menu()
        assert menu is not None
        menu.addSeparator()
        menu.addAction("Built-in engine (run a model on this computer)", self.add_engine)

    def engine_account(self) -> ProviderAccount | None:
        return next((a for a in self.accounts if a.kind == ENGINE_KIND), None)

    def add_engine(self) -> ProviderAccount:
        """Select the built-in engine's account, adding it first if there is none."""
        account = self.engine_account()
        if account is None:
            from app.core.engine.models import ENGINE_LABEL

            account = ProviderAccount(kind=ENGINE_KIND, label=ENGINE_LABEL, base_url=ENGINE_URL)
            self.accounts.append(account)
            if self.active is None or self._index_of(self.active) < 0:
                self.active = account.id
        self._refill_list(select=self._index_of(account.id))
        return account

    def use_engine_model(self, model_id: str) -> None:
        """Use: the built-in engine runs this model, and is the active account (on Save)."""
        account = self.engine_account() or self.add_engine()
        account.model = model_id
        self.active = account.id
        self._refill_list(select=self._index_of(account.id))

    def _engine_model_removed(self, model_id: str) -> None:
        """The account's model was removed: another one of the engine's, or none."""
        account = self.engine_account()
        if account is None or account.model != model_id:
            return
        others = [m for m in self.engine_panel.model_ids() if m != model_id]
        account.model = others[0] if others else ""
        self._update_item(account)
        if self.current() is account:
            self._load_form()

    def resizeEvent(self, event: QResizeEvent) -> None:
        """At the dialog's smallest sizes the list and the side buttons narrow first, so
        the form's fields keep a usable width and nothing scrolls sideways."""
        super().resizeEvent(event)
        width = event.size().width()
        self.left_box.setFixedWidth(max(NARROW_LIST_WIDTH, min(LIST_WIDTH, int(width * 0.26))))
        side = SIDE_BUTTON_WIDTH if width >= 700 else NARROW_SIDE_BUTTON_WIDTH
        for button in (self.preset_button, self.forget_button, self.refresh_button):
            button.setFixedWidth(side)

    def _build_form(self) -> QWidget:
        box = QWidget()
        form = form_layout(box, margins=(0, 0, 0, 0), spacing=(14, 10))
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)

        self.active_button = QPushButton("Make active")
        self.active_button.setToolTip("Send new messages to this provider")
        self.active_button.clicked.connect(self.make_selected_active)
        self.active_note = muted_label("✓ Active: your messages go to this provider.", wrap=False)
        self.active_note.setMinimumHeight(ROW_HEIGHT)
        active_row = QHBoxLayout()
        active_row.setSpacing(0)
        active_row.addWidget(self.active_button)
        active_row.addWidget(self.active_note)
        active_row.addStretch(1)
        form.addRow("", active_row)

        self.kind_combo = QComboBox()
        for kind in addressed_kinds():
            self.kind_combo.addItem(kind.label, kind.name)
        self.kind_combo.currentIndexChanged.connect(self._on_kind_changed)
        form.addRow(form_label("API type"), self.kind_combo)

        self.label_edit = QLineEdit()
        self.label_edit.setPlaceholderText("A name you recognise, e.g. “Work OpenAI”")
        self.label_edit.textEdited.connect(self._on_label_edited)
        form.addRow(form_label("Name"), self.label_edit)

        self.url_edit = QLineEdit()
        self.url_edit.setPlaceholderText("127.0.0.1:11434 or https://api.example.com/v1")
        self.url_edit.textEdited.connect(self._on_url_edited)
        self.preset_button = QPushButton("Presets")
        _attach_preset_menu(self.preset_button, self.apply_preset)
        self.preset_button.setFixedWidth(SIDE_BUTTON_WIDTH)
        form.addRow(form_label("Base URL"), field_row(self.url_edit, self.preset_button))
        self.url_error = self._error_row(form, self.url_edit)
        self.url_note = muted_label("")  # a key about to cross the internet unencrypted
        self.url_note.setTextFormat(Qt.TextFormat.PlainText)
        form.addRow("", self.url_note)
        form.setRowVisible(self.url_note, False)

        self.key_edit = QLineEdit()
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.textEdited.connect(self._on_key_edited)
        self.forget_button = QPushButton("Forget")
        self.forget_button.setToolTip("Remove the stored key from the keyring when you save")
        self.forget_button.clicked.connect(self.forget_key)
        self.forget_button.setFixedWidth(SIDE_BUTTON_WIDTH)
        form.addRow(form_label("API key"), field_row(self.key_edit, self.forget_button))
        self.key_error = self._error_row(form, self.key_edit)
        self.key_status = muted_label("")
        self.key_status.setTextFormat(Qt.TextFormat.PlainText)
        form.addRow("", self.key_status)

        self.model_combo = QComboBox()
        self.model_combo.setEditable(True)
        self.model_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.model_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.model_combo.setMinimumContentsLength(16)
        line = self.model_combo.lineEdit()
        assert line is not None
        line.setPlaceholderText("Type a name, or refresh")
        self.model_combo.currentTextChanged.connect(self._on_model_changed)
        self.refresh_button = QPushButton("Refresh list")
        self.refresh_button.clicked.connect(self.refresh_models)
        self.refresh_button.setFixedWidth(SIDE_BUTTON_WIDTH)
        form.addRow(form_label("Model"), field_row(self.model_combo, self.refresh_button))
        self.model_error = self._error_row(form, self.model_combo)

        self.tool_combo = QComboBox()
        self.tool_combo.setObjectName("toolFormatCombo")
        for value, text in TOOL_FORMATS.items():
            self.tool_combo.addItem(text, value)
        self.tool_combo.setToolTip("How Deskhand offers tools to this model and reads its calls")
        self.tool_combo.currentIndexChanged.connect(self._on_tool_format_changed)
        self.tool_field = natural_width(self.tool_combo)
        form.addRow(form_label("Tool calls"), self.tool_field)
        self.tool_hint = muted_label("")
        form.addRow("", self.tool_hint)
        self.images_combo = QComboBox()
        self.images_combo.setObjectName("imagesCombo")
        for value, text in IMAGE_CHOICES.items():
            self.images_combo.addItem(text, value)
        self.images_combo.setToolTip("Whether images (attached, screenshots) reach the model")
        self.images_combo.currentIndexChanged.connect(self._on_images_changed)
        form.addRow(form_label("Images"), natural_width(self.images_combo))
        self._form = form

        self.test_button = QPushButton("Test connection")
        self.test_button.setToolTip("Lists the server's models, picks one and asks it for a word")
        self.test_button.clicked.connect(self.test_connection)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop waiting for the server")
        self.cancel_button.clicked.connect(self.cancel_test)
        self.cancel_button.hide()
        self.test_result = QLabel("")
        self.test_result.setTextFormat(Qt.TextFormat.PlainText)  # holds a server's model name
        self.test_result.setWordWrap(True)
        self.test_result.setMinimumHeight(ROW_HEIGHT)
        self.test_result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.test_result.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.test_result.setMinimumWidth(120)  # wraps rather than widening the page
        test_row = QHBoxLayout()
        test_row.setSpacing(12)
        test_row.addWidget(self.test_button, 0, Qt.AlignmentFlag.AlignTop)
        test_row.addWidget(self.cancel_button, 0, Qt.AlignmentFlag.AlignTop)
        test_row.addWidget(self.test_result, 1)
        form.addRow("", test_row)

        self.error_label = role_label("", "error", wrap=True)
        self.error_label.setTextFormat(Qt.TextFormat.PlainText)
        self.error_label.hide()
        form.addRow("", self.error_label)
        self._errors: dict[Field, QLabel] = {
            "url": self.url_error,
            "key": self.key_error,
            "model": self.model_error,
        }
        return box

    def _error_row(self, form: QFormLayout, field: QWidget) -> QLabel:
        """A hidden row under `field` for what went wrong with it."""
        label = role_label("", "error", wrap=True)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.setTextFormat(Qt.TextFormat.PlainText)  # server text, never markup
        label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        form.addRow("", label)
        form.setRowVisible(label, False)
        return label

    # -- state --

    def load(self, settings: Settings) -> None:
        self.accounts = [p.model_copy(deep=True) for p in settings.providers]
        self.active = settings.active_provider
        self._saved = self._snapshot()
        self._refill_list(select=self._index_of(self.active) if self.active else 0)

    def _snapshot(self) -> tuple[list[dict[str, Any]], str | None]:
        return [a.model_dump() for a in self.accounts], self.active

    def pending_key_changes(self) -> int:
        """How many keyring changes `store_keys` is about to make: keys typed, keys to
        forget, stored keys of removed accounts (for the dialog's save message)."""
        removed = [a for a in self._removed if self._key_stored.get(a)]
        return len(self._new_keys) + len(self._forget_keys) + len(removed)

    def has_changes(self) -> bool:
        """Accounts edited, added or removed, or a key typed or to be forgotten."""
        return self._snapshot() != self._saved or bool(self._new_keys or self._forget_keys)

    def mark_saved(self, settings: Settings) -> None:
        self._saved = self._snapshot()
        self._new_keys.clear()
        self._forget_keys.clear()
        self._removed.clear()
        self._load_form()

    def current(self) -> ProviderAccount | None:
        row = self.account_list.currentRow()
        return self.accounts[row] if 0 <= row < len(self.accounts) else None

    def _index_of(self, account_id: str | None) -> int:
        return next((i for i, a in enumerate(self.accounts) if a.id == account_id), -1)

    def _fill_item(self, item: QListWidgetItem, account: ProviderAccount) -> None:
        item.setText(account.label.strip() or "Unnamed")
        detail = f"{provider_kind(account.kind).label} · {host(account.base_url)}"
        if account.kind == ENGINE_KIND:
            detail = f"On this computer · {account.model or 'no model chosen'}"
        item.setData(DETAIL_ROLE, detail)
        item.setData(ACTIVE_ROLE, account.id == self.active)
        item.setToolTip(plain_tooltip(f"{item.text()}\n{display_url(account.base_url)}"))

    def _refill_list(self, select: int = 0) -> None:
        self._loading = True
        self.account_list.clear()
        for account in self.accounts:
            item = QListWidgetItem()
            self._fill_item(item, account)
            self.account_list.addItem(item)
        self._loading = False
        if self.accounts:
            self.account_list.setCurrentRow(max(0, min(select, len(self.accounts) - 1)))
        self._on_row_changed(self.account_list.currentRow())

    def _update_item(self, account: ProviderAccount) -> None:
        row = self._index_of(account.id)
        item = self.account_list.item(row)
        if item is not None:
            self._fill_item(item, account)

    def _on_row_changed(self, row: int) -> None:
        if self._loading:
            return
        has = 0 <= row < len(self.accounts)
        engine = has and self.accounts[row].kind == ENGINE_KIND
        self.details.setCurrentIndex(2 if engine else 1 if has else 0)
        self.remove_button.setEnabled(has)
        self._load_form()

    def _load_form(self) -> None:
        account = self.current()
        is_active = account is not None and account.id == self.active
        self.active_button.setVisible(account is not None and not is_active)
        self.active_note.setVisible(is_active)
        if account is None:
            return
        if account.kind == ENGINE_KIND:
            self.engine_panel.set_account(account.model, is_active)
            self.engine_panel.refresh()
            return
        self._loading = True
        try:
            self.kind_combo.setCurrentIndex(self.kind_combo.findData(account.kind))
            self.label_edit.setText(account.label)
            self.url_edit.setText(account.base_url)
            set_invalid(self.url_edit, False)
            self.key_edit.setText(self._new_keys.get(account.id, ""))
            self.model_combo.clear()
            self.model_combo.addItems(self._models.get(account.id, []))
            self.model_combo.setEditText(account.model)
            self.tool_combo.setCurrentIndex(self.tool_combo.findData(account.tool_format))
            self._show_tool_format(account)
            self.images_combo.setCurrentIndex(self.images_combo.findData(account.images))
            ok, text = self._results.get(account.id, (True, ""))
            self._show_result(ok, text)
        finally:
            self._loading = False
        self._show_key_state(account)
        self._show_field_errors(account)
        self.error_label.hide()

    def _show_field_errors(self, account: ProviderAccount) -> None:
        errors = self._field_errors.get(account.id, {})
        for field, label in self._errors.items():
            text = errors.get(field, "")
            label.setText(text)
            self._form.setRowVisible(label, bool(text))
        set_invalid(self.url_edit, bool(errors.get("url")))
        set_invalid(self.key_edit, bool(errors.get("key")))
        set_invalid(self.model_combo, bool(errors.get("model")))
        self.url_edit.setAccessibleDescription(errors.get("url", ""))
        self.key_edit.setAccessibleDescription(errors.get("key", ""))
        self.model_combo.setAccessibleDescription(errors.get("model", ""))

    def _set_field_error(self, account: ProviderAccount, field: Field, text: str) -> None:
        errors = self._field_errors.setdefault(account.id, {})
        if text:
            errors[field] = text
        else:
            errors.pop(field, None)
        if self.current() is account:
            self._show_field_errors(account)

    def _clear_field_errors(self, account: ProviderAccount) -> None:
        self._field_errors.pop(account.id, None)
        if self.current() is account:
            self._show_field_errors(account)

    def field_error(self, field: Field) -> str:
        """What is shown next to `field` ("url", "key", "model") for the selected account."""
        label = self._errors.get(field)
        return label.text() if label is not None and not label.isHidden() else ""

    def _show_tool_format(self, account: ProviderAccount) -> None:
        """The "Tool calls" rows: only some APIs (OpenAI-compatible) have a choice to make."""
        shown = provider_kind(account.kind).tool_formats
        self._form.setRowVisible(self.tool_field, shown)
        self._form.setRowVisible(self.tool_hint, shown)
        self.tool_hint.setText(TOOL_FORMAT_HINTS[account.tool_format])

    def _show_result(self, ok: bool, text: str) -> None:
        self.test_result.setText(text)
        set_role(self.test_result, "ok" if ok else "error")

    def moved_from(self, account: ProviderAccount) -> str | None:
        """The saved base URL of `account` when the one typed names another server
        (scheme, host or port differ): its stored key is for that one. None otherwise."""
        saved = next((a for a in self._saved[0] if a.get("id") == account.id), None)
        saved_url = str(saved.get("base_url") or "") if saved else ""
        if not saved_url or origin(saved_url) == origin(account.base_url):
            return None
        return saved_url

    def _key_moved_note(self, account: ProviderAccount) -> str:
        saved_url = self.moved_from(account)
        if saved_url is None:
            return ""
        return (
            f"The stored key is for {display_origin(saved_url)}; paste it again to use it "
            f"with {display_origin(account.base_url)}."
        )

    def _show_url_note(self, account: ProviderAccount) -> None:
        """Under the URL: a key is set and the URL is http:// to a server that is not on
        this computer or the local network (not refused: some networks are trusted)."""
        where = origin(account.base_url)
        stored = bool(self._key_stored.get(account.id)) and account.id not in self._forget_keys
        has_key = account.id in self._new_keys or (stored and self.moved_from(account) is None)
        plain = where is not None and where[0] == "http" and not is_local_host(where[1])
        note = "This key would be sent unencrypted (http://)." if has_key and plain else ""
        self.url_note.setText(note)
        self._form.setRowVisible(self.url_note, bool(note))

    def _show_key_state(self, account: ProviderAccount) -> None:
        stored = self._key_stored.get(account.id)
        preset = preset_for(account.base_url)
        optional = preset is not None and not preset.needs_key
        if account.id in self._new_keys:
            status = "The new key will be stored in the system keyring when you save."
            placeholder = ""
        elif account.id in self._forget_keys:
            status = "The stored key will be removed from the keyring when you save."
            placeholder = "No key"
        elif stored and (moved := self._key_moved_note(account)):
            status = moved
            placeholder = "Paste the key for this server"
        elif stored:
            status = "✓ A key is stored in the system keyring. Type a new one to replace it."
            placeholder = "•••••••• stored in keyring"
        elif stored is None and account.id in self._key_errors:
            status = self._key_errors[account.id]
            placeholder = "Keyring unavailable"
        else:
            status = "Not needed for local servers." if optional else "No key stored."
            placeholder = "Optional" if optional else "Paste your API key"
        self.key_edit.setPlaceholderText(placeholder)
        self.key_status.setText(status)
        self.forget_button.setEnabled(bool(stored) and account.id not in self._forget_keys)
        self._show_url_note(account)

    def _show_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.show()

    def _flag_url(self, problem: str) -> None:
        account = self.current()
        if account is not None:
            self._set_field_error(account, "url", problem)

    # -- editing --

    def _on_kind_changed(self, _: int) -> None:
        account = self.current()
        if self._loading or account is None:
            return
        kind = self.kind_combo.currentData()
        account.kind = kind
        # Swap in the new kind's default URL unless the user typed their own.
        if not account.base_url.strip() or any(
            same_url(p.base_url, account.base_url) and p.kind != kind for p in PRESETS
        ):
            account.base_url = default_preset(kind).base_url
            self.url_edit.setText(account.base_url)
        self._forget_results(account, models=True)
        self._update_item(account)
        self._show_tool_format(account)

    def _on_label_edited(self, text: str) -> None:
        account = self.current()
        if account is not None:
            account.label = text
            self._update_item(account)

    def _on_url_edited(self, text: str) -> None:
        account = self.current()
        if account is not None:
            account.base_url = text.strip()
            self._set_field_error(account, "url", "")
            self.error_label.hide()
            self._forget_results(account, models=True)
            self._update_item(account)
            self._show_key_state(account)

    def _forget_results(self, account: ProviderAccount, *, models: bool) -> None:
        """The address or key changed: the last Test's "✓ Connected…" / "✗ …" line no
        longer says anything about it; `models`: nor does the server's model list."""
        self._results.pop(account.id, None)
        if models and self._models.pop(account.id, None) is not None:
            self._set_field_error(account, "model", "")
            if self.current() is account:
                self._refill_models(account)
        if self.current() is account:
            self._show_result(True, "")

    def _refill_models(self, account: ProviderAccount) -> None:
        """The model drop-down's list, keeping the name typed in it."""
        self._loading = True
        try:
            self.model_combo.clear()
            self.model_combo.addItems(self._models.get(account.id, []))
            self.model_combo.setEditText(account.model)
        finally:
            self._loading = False

    def _on_key_edited(self, text: str) -> None:
        account = self.current()
        if account is None:
            return
        if text:
            self._new_keys[account.id] = text
            self._forget_keys.discard(account.id)
        else:
            self._new_keys.pop(account.id, None)
        self._set_field_error(account, "key", "")
        self._forget_results(account, models=False)
        self._show_key_state(account)

    def _on_model_changed(self, text: str) -> None:
        account = self.current()
        if not self._loading and account is not None:
            account.model = text.strip()
            self._set_field_error(account, "model", "")

    def _on_tool_format_changed(self, _: int) -> None:
        account = self.current()
        if self._loading or account is None:
            return
        account.tool_format = self.tool_combo.currentData()
        self._show_tool_format(account)

    def _on_images_changed(self, _: int) -> None:
        account = self.current()
        if not self._loading and account is not None:
            account.images = self.images_combo.currentData()

    def add_account(self, preset: Preset, *, model: str = "") -> ProviderAccount:
        """Add an account from a preset, select it, and make it active if none is."""
        taken = {a.label for a in self.accounts}
        label, n = preset.name, 2
        while label in taken:
            label, n = f"{preset.name} {n}", n + 1
        account = ProviderAccount(
            kind=preset.kind, label=label, base_url=preset.base_url, model=model
        )
        self.accounts.append(account)
        self._key_stored[account.id] = False
        if self.active is None or self._index_of(self.active) < 0:
            self.active = account.id
        self._refill_list(select=len(self.accounts) - 1)
        self.label_edit.setFocus()
        return account

    def apply_preset(self, preset: Preset) -> None:
        account = self.current()
        if account is None:
            return
        account.kind = preset.kind
        account.base_url = preset.base_url
        self._forget_results(account, models=True)
        self._load_form()
        self._update_item(account)

    def remove_selected(self) -> None:
        account = self.current()
        if account is None:
            return
        row = self.account_list.currentRow()
        self.accounts.remove(account)
        self._new_keys.pop(account.id, None)
        self._removed.add(account.id)
        if self.active == account.id:
            self.active = self.accounts[0].id if self.accounts else None
        self._refill_list(select=row)

    def make_selected_active(self) -> None:
        account = self.current()
        if account is not None:
            self.active = account.id
            self._refill_list(select=self.account_list.currentRow())

    def forget_key(self) -> None:
        account = self.current()
        if account is not None:
            self._forget_keys.add(account.id)
            self._new_keys.pop(account.id, None)
            self.key_edit.clear()
            self._forget_results(account, models=False)
            self._show_key_state(account)

    # -- async work --

    @contextlib.contextmanager
    def _busy(self, *widgets: QWidget) -> Iterator[None]:
        """Disable `widgets` while the current task runs; remember the task for cancel()."""
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        for w in widgets:
            w.setEnabled(False)
        try:
            yield
        finally:
            for w in widgets:
                w.setEnabled(True)
            if task is not None:
                self._tasks.discard(task)

    def cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    @asyncSlot()
    async def load_key_states(self) -> None:
        """Ask the keyring (in a thread) which accounts have a stored key."""
        with self._busy():
            for account in list(self.accounts):
                try:
                    value = await in_thread(stored_key, self.runtime.secrets, account.id)
                except SecretStoreError as exc:
                    self._key_stored[account.id] = None
                    self._key_errors[account.id] = str(exc)
                else:
                    self._key_stored[account.id] = bool(value)
                current = self.current()
                if current is not None and current.id == account.id:
                    self._show_key_state(current)

    async def _api_key(self, account: ProviderAccount) -> str | None:
        """The key as typed, else the stored one (or the environment's for its own cloud
        API). The stored key is for the saved server: not sent to another one typed but
        not saved (`moved_from`)."""
        if account.id in self._new_keys:
            return self._new_keys[account.id]
        if account.id in self._forget_keys:
            return None
        if self.moved_from(account) is not None:
            return env_api_key(account.base_url)
        try:
            return await in_thread(self.runtime.secrets.api_key_for, account)
        except SecretStoreError:
            return None

    async def _config(self, account: ProviderAccount) -> ProviderConfig | None:
        """The config to test `account` with; its URL normalised (and shown so)."""
        problem = url_problem(account.base_url)
        if problem:
            self._flag_url(problem)
            return None
        normalized = normalize_base_url(account.kind, account.base_url)
        if normalized != account.base_url:
            account.base_url = normalized
            if self.current() is account:
                self.url_edit.setText(normalized)
            self._update_item(account)
        return probe_config(account.kind, normalized, await self._api_key(account), account.model)

    def _set_result(self, account: ProviderAccount, ok: bool, text: str) -> None:
        self._results[account.id] = (ok, text)
        current = self.current()
        if current is not None and current.id == account.id:
            self._show_result(ok, text)

    async def _ask_server(
        self,
        account: ProviderAccount,
        waiting: str,
        ask: Callable[[ProviderAccount, ProviderConfig], Awaitable[str]],
    ) -> bool:
        """Refresh and Test: check the URL, show `waiting`, then what `ask` returned, or
        why it failed next to the field that caused it (without the key). Cancel stops
        it; so does `test_timeout`. True when `ask` succeeded; `tested` tells."""
        ok = await self._ask_server_once(account, waiting, ask)
        self.tested.emit(account.id, ok)
        return ok

    async def _ask_server_once(
        self,
        account: ProviderAccount,
        waiting: str,
        ask: Callable[[ProviderAccount, ProviderConfig], Awaitable[str]],
    ) -> bool:
        with self._busy(self.refresh_button, self.test_button):
            self._clear_field_errors(account)
            config = await self._config(account)
            if config is None:
                self._set_result(account, False, "")
                return False
            self._stage[account.id] = "list"
            self._set_result(account, True, waiting)
            # (qasync may step this task outside a "running" loop: name the loop)
            task = asyncio.current_task(asyncio.get_event_loop())
            if task is not None:
                self._running[account.id] = task
            self.cancel_button.show()
            try:
                text = await asyncio.wait_for(ask(account, config), self.test_timeout)
            except asyncio.CancelledError:
                if account.id not in self._cancelled:
                    raise
                if task is not None:
                    task.uncancel()
                self._set_result(account, False, "Test cancelled.")
                return False
            except Exception as exc:
                self._fail(account, config, exc)
                return False
            finally:
                self._running.pop(account.id, None)
                self._cancelled.discard(account.id)
                self.cancel_button.hide()
            self._set_result(account, True, text)
            return True

    def _fail(self, account: ProviderAccount, config: ProviderConfig, exc: Exception) -> None:
        failure = (
            exc.failure
            if isinstance(exc, _Failed)
            else classify_failure(
                exc,
                stage=self._stage.get(account.id, "list"),
                key=config.api_key,
                model=config.model,
            )
        )
        if failure.field == "other":
            self._set_result(account, False, f"✗ {failure.text}")
            return
        self._set_field_error(account, failure.field, failure.text)
        where = {"url": "base URL", "key": "API key", "model": "model"}[failure.field]
        self._set_result(account, False, f"✗ Not connected: see the {where} above.")

    def cancel_test(self) -> None:
        """Stop the Test (or Refresh) of the selected account."""
        account = self.current()
        task = self._running.get(account.id) if account is not None else None
        if account is not None and task is not None and not task.done():
            self._cancelled.add(account.id)
            task.cancel()

    @asyncSlot()
    async def refresh_models(self) -> None:
        """Fill the model list from the server's `/models`."""
        account = self.current()
        if account is None:
            return
        fetched = await self._ask_server(account, "Asking the server for its models…", self._fetch)
        if fetched and self.current() is account:
            self._load_form()

    async def _list(self, account: ProviderAccount, provider: Any) -> list[str]:
        models = list(await provider.list_models())
        self._models[account.id] = models
        if not models:
            raise _Failed(Failure("model", NO_MODELS))
        return models

    async def _fetch(self, account: ProviderAccount, config: ProviderConfig) -> str:
        async with connected(config) as provider:
            models = await self._list(account, provider)
        if not account.model:
            account.model = models[0]
        return f"✓ {plural(len(models), 'model')} available"

    @asyncSlot()
    async def test_connection(self) -> None:
        """One step: list the models, select one (the current if listed, else the first)
        and ask it for a one-word reply."""
        account = self.current()
        if account is not None:
            await self._ask_server(account, "Connecting…", self._test)

    async def _test(self, account: ProviderAccount, config: ProviderConfig) -> str:
        async with connected(config) as provider:
            models = await self._list(account, provider)
            account.model = pick_model(account.model, models)
            config.model = account.model
            if self.current() is account:
                self._load_form()
            self._stage[account.id] = "ping"
            await ping(provider)
        name = one_line(account.model, 80)
        return f"✓ Connected: {plural(len(models), 'model')} available; “{name}” answered"

    @asyncSlot()
    async def detect_servers(self) -> None:
        """Look for local servers; add those not configured yet."""
        with self._busy(self.detect_button):
            self.detect_result.setText("Looking for local servers…")
            self.detect_result.show()
            servers = await detect_local_servers(candidates=self.local_candidates)
            if not servers:
                names = " or ".join(c.name for c in self.local_candidates)
                self.detect_result.setText(f"No {names} server is running on this computer.")
                return
            lines = []
            for server in servers:
                known = next(
                    (a for a in self.accounts if same_url(a.base_url, server.base_url)), None
                )
                if known is None:
                    preset = preset_for(server.base_url) or Preset(
                        server.name, server.kind, server.base_url, False
                    )
                    first = server.models[0] if server.models else ""
                    known = self.add_account(preset, model=first)
                    known.base_url = server.base_url
                    verb = "added"
                else:
                    verb = "already set up"
                self._models[known.id] = list(server.models)
                lines.append(f"{server.name} ({plural(len(server.models), 'model')}): {verb}")
            self._refill_list(select=self.account_list.currentRow())
            self.detect_result.setText("Found " + "; ".join(lines) + ".")

    async def store_keys(self) -> None:
        """Write pending key changes to the keyring (in a thread). Raises SecretStoreError."""
        removed = [a for a in self._removed if self._key_stored.get(a)]
        stored = await in_thread(
            partial(
                save_key_changes,
                self.runtime.secrets,
                removed=removed,
                cleared=set(self._forget_keys),
                typed=dict(self._new_keys),
            )
        )
        self._key_stored.update(stored)

    # -- saving --

    def problem(self) -> str | None:
        for row, account in enumerate(self.accounts):
            if account.kind == ENGINE_KIND:
                continue  # no address: Deskhand starts it
            problem = url_problem(account.base_url)
            if not account.label.strip():
                problem = "Give this provider a name."
                self.account_list.setCurrentRow(row)
                self._show_error(problem)
            elif problem:
                self.account_list.setCurrentRow(row)
                self._flag_url(problem)
            else:
                continue
            return f"{account.label.strip() or 'A provider'}: {problem}"
        return None

    def patch(self) -> Patch:
        if self._snapshot() == self._saved:
            return lambda s: None
        accounts = [a.model_copy(deep=True) for a in self.accounts]
        for a in accounts:
            a.base_url = normalize_base_url(a.kind, a.base_url)
            a.label = a.label.strip()
        active = self.active

        def apply(settings: Settings) -> None:
            settings.providers = accounts
            settings.active_provider = active

        return apply


def pick_model(current: str, models: list[str]) -> str:
    """The model to use from a server's list: the current one if listed (also as Ollama's
    "<name>:latest"), else the first."""
    if current in models:
        return current
    if f"{current}:latest" in models:
        return f"{current}:latest"
    return models[0]


def _attach_preset_menu(button: QPushButton, choose: Callable[[Preset], object]) -> None:
    """Give `button` a drop-down of the presets; picking one calls `choose(preset)`."""
    button.setProperty("hasMenu", True)
    menu = QMenu(button)
    for preset in PRESETS:
        menu.addAction(preset.name, partial(choose, preset))
    button.setMenu(menu)
