"""The "Integrations" page: every service in `integrations.registry.SPECS`, its accounts,
and per account: add, edit, remove (with confirmation), test, make active.

Built generically from the specs: each spec's fields become the account form; secret
fields are password inputs that never show a stored value (only "set" and Replace).
Account changes are saved right away through `AccountDirectory` (non-secret fields in the
database, secrets in the keyring); every directory, keyring and test call runs in a worker
thread. Discovered accounts (local Docker, kube contexts, the local calendar) are listed
but cannot be edited or removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QSizePolicy,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)
from qasync import asyncSlot

from app.core.accounts import AccountError
from app.core.runtime import Runtime
from app.core.secrets import SecretStoreError, secret_key
from app.core.settings import Settings
from app.ui.settings.account_list import ACTIVE_ROLE, DETAIL_ROLE, AccountDelegate
from app.ui.settings.page import Patch, SettingsPage, in_thread
from app.ui.settings.widgets import (
    ROW_HEIGHT,
    form_label,
    form_layout,
    muted_label,
    plural,
    role_label,
    set_role,
)
from integrations.registry import SPECS
from integrations.spec import Account, IntegrationField, IntegrationSpec
from tools.redact import Tripwire

log = logging.getLogger(__name__)

LIST_WIDTH = 220
NARROW_LIST_WIDTH = 150  # at 800×600 and below
SIDE_BUTTON_WIDTH = 96
LABEL_WIDTH = 150
SET_PLACEHOLDER = "•••••••• set"
#: Problems the user can act on; anything else is shown with its type name.
USER_ERRORS = (AccountError, SecretStoreError, ValueError)


@dataclass
class IntegrationState:
    """What the page knows about one integration (read in a worker thread)."""

    accounts: list[Account] = field(default_factory=list)
    active: str | None = None
    #: account id -> the secret fields that have a value in the keyring
    secrets_set: dict[str, set[str]] = field(default_factory=dict)
    error: str = ""


def confirm(parent: QWidget, title: str, text: str) -> bool:
    """A Yes/No question (tests replace this)."""
    answer = QMessageBox.question(
        parent,
        title,
        text,
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No,
    )
    return answer == QMessageBox.StandardButton.Yes


def describe(exc: BaseException, tripwire: Tripwire, secrets: dict[str, str]) -> str:
    """A readable, secret-free line for a failure (`secrets`: the account's, maybe not
    stored yet)."""
    text = str(exc).strip() if isinstance(exc, USER_ERRORS) else f"{type(exc).__name__}: {exc}"
    return tripwire.text(text, extra=secrets.values()) or type(exc).__name__


def account_detail(account: Account, spec: IntegrationSpec) -> str:
    if account.discovered:
        return "Found on this computer"
    for f in spec.fields:
        value = account.fields.get(f.name, "").strip()
        if value and not f.secret:
            return value
    return spec.title


class SecretInput(QWidget):
    """A password input that never shows a stored value: "set", and a Replace button."""

    def __init__(self, spec_field: IntegrationField, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.spec_field = spec_field
        self.edit = QLineEdit()
        self.edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.replace_button = QPushButton("Replace")
        self.replace_button.setFixedWidth(SIDE_BUTTON_WIDTH)
        self.replace_button.clicked.connect(self._toggle)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        layout.addWidget(self.edit, 1)
        layout.addWidget(self.replace_button)
        self.stored = False
        self.replacing = False
        self.reset(stored=False)

    def reset(self, *, stored: bool) -> None:
        self.stored, self.replacing = stored, not stored
        self.edit.clear()
        self._show()

    def _toggle(self) -> None:
        self.replacing = not self.replacing
        self.edit.clear()
        self._show()
        if self.replacing:
            self.edit.setFocus()

    def _show(self) -> None:
        self.replace_button.setVisible(self.stored)
        self.replace_button.setText("Keep" if self.replacing else "Replace")
        self.edit.setEnabled(self.replacing)
        if self.replacing:
            self.edit.setPlaceholderText(
                "New value" if self.stored else ("Required" if self.spec_field.required else "")
            )
        else:
            self.edit.setPlaceholderText(SET_PLACEHOLDER)
        self.edit.setToolTip(
            "Stored in the keyring; it is never shown. Click Replace to type a new one."
            if self.stored
            else ""
        )

    def value(self) -> str | None:
        """The new value to store, or None to keep what is stored."""
        return self.edit.text() if self.replacing and self.edit.text() else None


class AccountEditor(QWidget):
    """The form for one account of one integration, generated from its spec."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(10)
        self.heading = role_label("", "section")
        outer.addWidget(self.heading)
        self._outer = outer
        self._form_box = QWidget()
        outer.addWidget(self._form_box)
        self.error_label = role_label("", "error", wrap=True)
        self.error_label.hide()
        outer.addWidget(self.error_label)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.cancel_button = QPushButton("Cancel")
        self.save_button = QPushButton("Save account")
        self.save_button.setProperty("accent", True)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.save_button)
        outer.addLayout(buttons)
        outer.addStretch(1)
        self.spec: IntegrationSpec | None = None
        self.account: Account | None = None
        self.label_edit = QLineEdit()
        self.inputs: dict[str, QLineEdit] = {}
        self.secret_inputs: dict[str, SecretInput] = {}
        self._form: QFormLayout | None = None

    def open(self, spec: IntegrationSpec, account: Account | None, secrets_set: set[str]) -> None:
        """Rebuild the form for `spec`; `account` None means a new account."""
        self.spec, self.account = spec, account
        self.heading.setText(f"Edit “{account.label}”" if account else f"New {spec.title} account")
        old, self._form_box = self._form_box, QWidget()
        self._outer.replaceWidget(old, self._form_box)
        old.deleteLater()
        form = form_layout(self._form_box, margins=(0, 0, 0, 0), spacing=(14, 8))
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self._form = form
        self.label_edit = QLineEdit(account.label if account else "")
        self.label_edit.setPlaceholderText("A name you recognise, e.g. “Work”")
        form.addRow(form_label("Name", LABEL_WIDTH), self.label_edit)
        self.inputs, self.secret_inputs = {}, {}
        for f in spec.fields:
            text = f.label + (" *" if f.required else "")
            if f.secret:
                secret = SecretInput(f)
                secret.reset(stored=f.name in secrets_set)
                self.secret_inputs[f.name] = secret
                form.addRow(form_label(text, LABEL_WIDTH), secret)
            else:
                edit = QLineEdit(account.fields.get(f.name, "") if account else f.default)
                self.inputs[f.name] = edit
                form.addRow(form_label(text, LABEL_WIDTH), edit)
            if f.help:
                form.addRow("", muted_label(f.help))
        self.error_label.hide()
        self.label_edit.setFocus()

    def values(self) -> tuple[str, dict[str, str], dict[str, str]]:
        """(label, plain values, secrets to store)."""
        plain = {name: edit.text().strip() for name, edit in self.inputs.items()}
        secrets = {
            name: value
            for name, widget in self.secret_inputs.items()
            if (value := widget.value()) is not None
        }
        return self.label_edit.text().strip(), plain, secrets

    def problem(self) -> str | None:
        assert self.spec is not None
        label, plain, secrets = self.values()
        if not label:
            return "Give this account a name."
        for f in self.spec.fields:
            if not f.required:
                continue
            if f.secret:
                widget = self.secret_inputs[f.name]
                if not (widget.stored and not widget.replacing) and not secrets.get(f.name):
                    return f"{f.label} is required."
            elif not plain.get(f.name):
                return f"{f.label} is required."
        return None

    def show_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))


class IntegrationsPage(SettingsPage):
    title = "Integrations"
    subtitle = (
        "Services the assistant can work with, and the accounts it uses. Account changes are "
        "saved right away; passwords and tokens are kept in the system keyring."
    )

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self.states: dict[str, IntegrationState] = {}
        self._results: dict[tuple[str, str], tuple[bool, str]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loaded: asyncio.Task[None] | None = None
        self._filling = False
        self._build()
        self._fill_integrations()

    # -- layout --

    def resizeEvent(self, event: QResizeEvent) -> None:
        """In a small dialog the list narrows first, so the accounts keep their width."""
        super().resizeEvent(event)
        width = event.size().width()
        self.integration_list.setFixedWidth(max(NARROW_LIST_WIDTH, min(LIST_WIDTH, width // 4)))

    def _build(self) -> None:
        root = QHBoxLayout(self)
        root.setContentsMargins(0, 0, 0, 0)
        root.setSpacing(18)

        self.integration_list = QListWidget()
        self.integration_list.setObjectName("integrationList")
        self.integration_list.setFixedWidth(LIST_WIDTH)
        self.integration_list.setItemDelegate(AccountDelegate(self.integration_list))
        self.integration_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.integration_list.currentRowChanged.connect(self._on_integration_changed)
        root.addWidget(self.integration_list)

        self.stack = QStackedWidget()
        self.stack.addWidget(self._build_accounts_view())
        self.editor = AccountEditor()
        self.editor.cancel_button.clicked.connect(self.close_editor)
        self.editor.save_button.clicked.connect(self.save_editor)
        self.stack.addWidget(self.editor)
        root.addWidget(self.stack, 1)

    def _build_accounts_view(self) -> QWidget:
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        self.heading = role_label("", "section")
        self.description = muted_label("")
        self.status = muted_label("")
        layout.addWidget(self.heading)
        layout.addWidget(self.description)
        self.account_list = QListWidget()
        self.account_list.setObjectName("accountList")
        self.account_list.setItemDelegate(AccountDelegate(self.account_list))
        self.account_list.setMouseTracking(True)
        self.account_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.account_list.currentRowChanged.connect(lambda _: self._update_buttons())
        self.account_list.itemDoubleClicked.connect(lambda _: self.edit_selected())
        layout.addWidget(self.account_list, 1)
        layout.addWidget(self.status)

        row = QHBoxLayout()
        row.setSpacing(6)
        self.add_button = QPushButton("Add…")
        self.add_button.clicked.connect(self.add_account)
        self.edit_button = QPushButton("Edit…")
        self.edit_button.clicked.connect(self.edit_selected)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self.remove_selected)
        self.active_button = QPushButton("Make active")
        self.active_button.setToolTip("Tools use this account unless told otherwise")
        self.active_button.clicked.connect(self.make_selected_active)
        self.test_button = QPushButton("Test connection")
        self.test_button.clicked.connect(self.test_selected)
        for b in (self.add_button, self.edit_button, self.remove_button, self.active_button):
            row.addWidget(b)
        row.addStretch(1)
        layout.addLayout(row)

        self.test_result = QLabel("")
        self.test_result.setTextFormat(Qt.TextFormat.PlainText)  # may hold a server's words
        self.test_result.setWordWrap(True)
        self.test_result.setMinimumHeight(ROW_HEIGHT)
        self.test_result.setMinimumWidth(120)  # wraps rather than widening the page
        self.test_result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.test_result.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        test_row = QHBoxLayout()  # on its own row: five buttons in one do not fit 800×600
        test_row.setSpacing(12)
        test_row.addWidget(self.test_button, 0, Qt.AlignmentFlag.AlignTop)
        test_row.addWidget(self.test_result, 1)
        layout.addLayout(test_row)
        self.error_label = role_label("", "error", wrap=True)
        self.error_label.hide()
        layout.addWidget(self.error_label)
        return box

    # -- what is shown --

    def specs(self) -> list[IntegrationSpec]:
        """Every registered integration, looked up now: specs may be added at any time."""
        return [SPECS[k] for k in sorted(SPECS)]

    def current_spec(self) -> IntegrationSpec | None:
        row = self.integration_list.currentRow()
        item = self.integration_list.item(row)
        return SPECS.get(item.data(Qt.ItemDataRole.UserRole)) if item is not None else None

    def current_account(self) -> Account | None:
        spec = self.current_spec()
        if spec is None:
            return None
        accounts = self.states.get(spec.id, IntegrationState()).accounts
        row = self.account_list.currentRow()
        return accounts[row] if 0 <= row < len(accounts) else None

    def select_integration(self, integration: str) -> None:
        for row in range(self.integration_list.count()):
            item = self.integration_list.item(row)
            if item.data(Qt.ItemDataRole.UserRole) == integration:
                self.integration_list.setCurrentRow(row)
                return

    def select_account(self, account_id: str) -> None:
        spec = self.current_spec()
        accounts = self.states.get(spec.id, IntegrationState()).accounts if spec else []
        for row, account in enumerate(accounts):
            if account.id == account_id:
                self.account_list.setCurrentRow(row)

    def _status_line(self, spec: IntegrationSpec) -> str:
        state = self.states.get(spec.id)
        if state is None:
            return "Loading…"
        if state.error:
            return "Could not read the accounts"
        if not state.accounts:
            return "Not set up"
        active = next((a for a in state.accounts if a.id == state.active), None)
        count = plural(len(state.accounts), "account")
        return f"{count} · using {active.label}" if active else count

    def _fill_integrations(self) -> None:
        current = self.current_spec()
        self._filling = True
        self.integration_list.clear()
        for spec in self.specs():
            item = QListWidgetItem(spec.title)
            item.setData(Qt.ItemDataRole.UserRole, spec.id)
            item.setData(DETAIL_ROLE, self._status_line(spec))
            item.setToolTip(f"{spec.description}\n{item.data(DETAIL_ROLE)}")
            self.integration_list.addItem(item)
        self._filling = False
        if current is not None:
            self.select_integration(current.id)
        if self.integration_list.currentRow() < 0 and self.integration_list.count():
            self.integration_list.setCurrentRow(0)
        self._on_integration_changed(self.integration_list.currentRow())

    def _on_integration_changed(self, _: int) -> None:
        if self._filling:
            return
        self.close_editor()
        self._fill_accounts()

    def _fill_accounts(self, select: str | None = None) -> None:
        spec = self.current_spec()
        previous = self.current_account()
        self.account_list.clear()
        self.error_label.hide()
        if spec is None:
            return
        self.heading.setText(spec.title)
        self.description.setText(spec.description)
        state = self.states.get(spec.id)
        for account in state.accounts if state else []:
            item = QListWidgetItem(account.label)
            item.setData(DETAIL_ROLE, account_detail(account, spec))
            item.setData(ACTIVE_ROLE, state is not None and account.id == state.active)
            self.account_list.addItem(item)
        if state is None:
            self.status.setText("Loading accounts…")
        elif state.error:
            self.status.setText("")
            self._show_error(state.error)
        elif not state.accounts:
            self.status.setText(f"No {spec.title} account yet. Click “Add…” to set one up.")
        else:
            self.status.setText("")
        self.status.setVisible(bool(self.status.text()))
        target = select or (previous.id if previous else None) or (state.active if state else None)
        if target:
            self.select_account(target)
        if self.account_list.currentRow() < 0 and self.account_list.count():
            self.account_list.setCurrentRow(0)
        self._update_buttons()

    def _update_buttons(self) -> None:
        spec = self.current_spec()
        account = self.current_account()
        state = self.states.get(spec.id) if spec else None
        added = account is not None and not account.discovered
        self.add_button.setEnabled(spec is not None and state is not None)
        self.edit_button.setEnabled(added)
        self.remove_button.setEnabled(added)
        hint = "Found on this computer: it cannot be removed here" if account and not added else ""
        self.remove_button.setToolTip(hint)
        self.edit_button.setToolTip(hint.replace("removed", "edited"))
        is_active = account is not None and state is not None and account.id == state.active
        self.active_button.setEnabled(account is not None and not is_active)
        can_test = account is not None and spec is not None and spec.test_connection is not None
        self.test_button.setEnabled(can_test)
        self.test_button.setToolTip("" if can_test or account is None else "No test available")
        ok, text = (True, "")
        if account is not None and spec is not None:
            ok, text = self._results.get((spec.id, account.id), (True, ""))
        self.test_result.setText(text)
        set_role(self.test_result, "ok" if ok else "error")

    def _show_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))

    # -- loading --

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.ensure_loaded()

    def ensure_loaded(self) -> asyncio.Task[None] | None:
        """Read the accounts once (a task; tests await it). Started when first shown."""
        if self._loaded is None:
            self._loaded = self.start_task(self.reload())
        return self._loaded

    async def reload(self, integration: str | None = None, select: str | None = None) -> None:
        """Read accounts (and which secrets are set) in a thread, then show them."""
        with self._busy():
            for spec in self.specs() if integration is None else [SPECS[integration]]:
                self.states[spec.id] = await in_thread(self._read_state, spec)
                self._show_state(spec.id, select)

    def _show_state(self, integration: str, select: str | None) -> None:
        """Refresh one integration's status line, and its accounts if it is shown."""
        for i in range(self.integration_list.count()):
            item = self.integration_list.item(i)
            if item.data(Qt.ItemDataRole.UserRole) == integration:
                spec = SPECS[integration]
                item.setData(DETAIL_ROLE, self._status_line(spec))
                item.setToolTip(f"{spec.description}\n{item.data(DETAIL_ROLE)}")
        shown = self.current_spec()
        if shown is not None and shown.id == integration and self.stack.currentIndex() == 0:
            self._fill_accounts(select)

    def _read_state(self, spec: IntegrationSpec) -> IntegrationState:
        """Blocking: the directory (SQLite, discovery) and the keyring."""
        directory = self.runtime.accounts
        state = IntegrationState()
        try:
            state.accounts = directory.list(spec.id)
            active = directory.active(spec.id)
            state.active = active.id if active else None
        except Exception as exc:
            state.error = describe(exc, self.runtime.tripwire, {})
            return state
        for account in state.accounts:
            if account.discovered:
                continue
            names: set[str] = set()
            for name in spec.secret_fields:
                try:
                    if self.runtime.secrets.get(secret_key(spec.id, account.id, name)):
                        names.add(name)
                except SecretStoreError as exc:
                    state.error = str(exc)
            state.secrets_set[account.id] = names
        return state

    # -- actions --

    @contextlib.contextmanager
    def _busy(self, *widgets: QWidget) -> Iterator[None]:
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

    def add_account(self) -> None:
        spec = self.current_spec()
        if spec is not None:
            self.editor.open(spec, None, set())
            self.stack.setCurrentIndex(1)

    def edit_selected(self) -> None:
        spec, account = self.current_spec(), self.current_account()
        if spec is None or account is None or account.discovered:
            return
        secrets_set = self.states[spec.id].secrets_set.get(account.id, set())
        self.editor.open(spec, account, secrets_set)
        self.stack.setCurrentIndex(1)

    def close_editor(self) -> None:
        self.stack.setCurrentIndex(0)
        self._update_buttons()

    def save_editor(self) -> asyncio.Future[None] | None:
        """Check the form now; if it is complete, add or save the account in a thread."""
        editor = self.editor
        spec, original = editor.spec, editor.account
        if spec is None:
            return None
        problem = editor.problem()
        if problem:
            editor.show_error(problem)
            return None
        return self.start_task(self._save_editor(spec, original))

    async def _save_editor(self, spec: IntegrationSpec, original: Account | None) -> None:
        editor = self.editor
        label, plain, secrets = editor.values()
        with self._busy(editor.save_button, editor.cancel_button):
            try:
                account = await in_thread(
                    self._write_account, spec, original, label, plain, secrets
                )
            except Exception as exc:
                why = describe(exc, self.runtime.tripwire, secrets)
                editor.show_error(f"Nothing was saved. {why}")
                return
        if original is not None:
            self._results.pop((spec.id, original.id), None)
        self.stack.setCurrentIndex(0)
        await self.reload(spec.id, select=account.id)

    def _write_account(
        self,
        spec: IntegrationSpec,
        original: Account | None,
        label: str,
        plain: dict[str, str],
        secrets: dict[str, str],
    ) -> Account:
        """Blocking. An edit is written as a new account (kept secrets copied over), made
        active if the old one was, then the old one removed: a failure loses nothing."""
        directory = self.runtime.accounts
        values = {k: v for k, v in plain.items() if v} | secrets
        if original is None:
            return directory.add(spec.id, label, values)
        kept = directory.with_secrets(Account(original.id, spec.id, original.label))
        values = kept.secrets | values
        was_active = directory.store.active_account_id(spec.id) == original.id
        account = directory.add(spec.id, label, values, make_active=was_active)
        directory.remove(spec.id, original.id)
        return account

    @asyncSlot()
    async def remove_selected(self) -> None:
        spec, account = self.current_spec(), self.current_account()
        if spec is None or account is None or account.discovered:
            return
        question = (
            f"Remove the {spec.title} account “{account.label}”? Its stored credentials are "
            "deleted from the keyring."
        )
        if not confirm(self, "Remove account", question):
            return
        await self._act(spec, lambda: self.runtime.accounts.remove(spec.id, account.id))
        self._results.pop((spec.id, account.id), None)

    @asyncSlot()
    async def make_selected_active(self) -> None:
        spec, account = self.current_spec(), self.current_account()
        if spec is not None and account is not None:
            await self._act(
                spec, lambda: self.runtime.accounts.set_active(spec.id, account.id), account.id
            )

    async def _act(
        self, spec: IntegrationSpec, change: Callable[[], Any], select: str | None = None
    ) -> None:
        buttons = (self.remove_button, self.active_button, self.edit_button, self.add_button)
        with self._busy(*buttons):
            try:
                await in_thread(change)
            except Exception as exc:
                self._show_error(describe(exc, self.runtime.tripwire, {}))
                return
        await self.reload(spec.id, select=select)

    @asyncSlot()
    async def test_selected(self) -> None:
        """Run the spec's test_connection (in a thread) and show what it said."""
        spec, account = self.current_spec(), self.current_account()
        if spec is None or account is None or spec.test_connection is None:
            return
        key = (spec.id, account.id)
        test = spec.test_connection
        self._set_result(key, True, "Connecting…")
        secrets: dict[str, str] = {}

        def run() -> str:
            full = self.runtime.accounts.with_secrets(
                Account(account.id, spec.id, account.label, dict(account.fields))
            )
            full.discovered = account.discovered
            secrets.update(full.secrets)
            return test(full)

        with self._busy(self.test_button):
            try:
                text = await in_thread(run)
            except Exception as exc:
                self._set_result(key, False, f"✗ {describe(exc, self.runtime.tripwire, secrets)}")
                return
        shown = self.runtime.tripwire.text(str(text), extra=secrets.values())
        self._set_result(key, True, f"✓ {shown}")

    def _set_result(self, key: tuple[str, str], ok: bool, text: str) -> None:
        self._results[key] = (ok, text)
        spec, account = self.current_spec(), self.current_account()
        if spec is not None and account is not None and (spec.id, account.id) == key:
            self.test_result.setText(text)
            set_role(self.test_result, "ok" if ok else "error")

    # -- the dialog's Save: nothing to do, account changes are saved right away --

    def patch(self) -> Patch:
        def apply(settings: Settings) -> None:
            return None

        return apply
