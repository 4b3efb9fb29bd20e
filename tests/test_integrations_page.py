"""Settings → Integrations against the real store (SQLite on disk) and a memory keyring:
add, edit, test, make active and remove accounts through the page (pytest-qt, qasync)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit

import integrations.registry
from app.core.runtime import Runtime
from app.core.secrets import SERVICE, secret_key
from app.ui.settings import integrations_page
from app.ui.settings.dialog import SettingsDialog
from app.ui.settings.integrations_page import SET_PLACEHOLDER, IntegrationsPage
from integrations.spec import Account, IntegrationField, IntegrationSpec
from tests import test_settings_dialog as base
from tests.fixtures_qt import wait_until
from tests.test_settings_dialog import MemoryKeyring, run

# The settings dialog's fixtures: a runtime with a memory keyring, and open_dialog.
runtime = base.runtime
open_dialog = base.open_dialog
restore_theme = base.restore_theme

pytestmark = pytest.mark.gui

TOKEN = "tok-9f8e7d6c5b4a"
OTHER_TOKEN = "tok-1a2b3c4d5e6f"
GOOD = {TOKEN}


def _test_connection(account: Account) -> str:
    """Succeeds for a known token; says why not otherwise (echoing the token, as servers do)."""
    assert threading.current_thread() is not threading.main_thread()  # never on the UI thread
    if account.get("token") in GOOD:
        return f"Connected to {account.get('url')} as {account.get('user') or 'anonymous'}"
    raise PermissionError(f"server refused token {account.get('token')!r}")


TEST_SPEC = IntegrationSpec(
    id="testsvc",
    title="Test service",
    description="A service for tests.",
    fields=(
        IntegrationField("url", "Server URL", required=True),
        IntegrationField("user", "User name"),
        IntegrationField("token", "API token", secret=True, required=True),
    ),
    discover=lambda: [Account("local", "testsvc", "This computer", {"url": ""}, discovered=True)],
    test_connection=_test_connection,
)


@pytest.fixture
def spec(monkeypatch: pytest.MonkeyPatch) -> IntegrationSpec:
    monkeypatch.setitem(integrations.registry.SPECS, TEST_SPEC.id, TEST_SPEC)
    return TEST_SPEC


@pytest.fixture
def confirmations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Answer Yes to the removal question, recording it."""
    asked: list[str] = []

    def yes(parent: Any, title: str, text: str) -> bool:
        asked.append(text)
        return True

    monkeypatch.setattr(integrations_page, "confirm", yes)
    return asked


def open_page(qloop: Any, open_dialog: Any, runtime: Runtime) -> tuple[SettingsDialog, Any]:
    dialog = open_dialog(runtime, page="integrations")
    page = dialog.integrations
    run(qloop, asyncio.shield(page.ensure_loaded()))
    page.select_integration("testsvc")
    return dialog, page


def fill(qtbot: Any, edit: QLineEdit, text: str) -> None:
    edit.selectAll()
    qtbot.keyClick(edit, Qt.Key.Key_Backspace)
    qtbot.keyClicks(edit, text)


def click(qtbot: Any, button: Any) -> None:
    assert button.isEnabled(), button.text()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def labels(page: IntegrationsPage) -> list[str]:
    return [page.account_list.item(i).text() for i in range(page.account_list.count())]


async def add_account(qtbot: Any, page: IntegrationsPage, name: str, token: str) -> None:
    before = page.account_list.count()
    click(qtbot, page.add_button)
    editor = page.editor
    assert page.stack.currentWidget() is editor
    fill(qtbot, editor.label_edit, name)
    fill(qtbot, editor.inputs["url"], "https://svc.example.com")
    fill(qtbot, editor.inputs["user"], "ann")
    token_input = editor.secret_inputs["token"]
    assert token_input.edit.echoMode() == QLineEdit.EchoMode.Password
    qtbot.keyClicks(token_input.edit, token)
    click(qtbot, editor.save_button)
    await wait_until(lambda: page.account_list.count() == before + 1, what="the new account")


def test_lists_every_registered_integration_with_status(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, spec: IntegrationSpec
) -> None:
    dialog, page = open_page(qloop, open_dialog, runtime)
    ids = [
        page.integration_list.item(i).data(Qt.ItemDataRole.UserRole)
        for i in range(page.integration_list.count())
    ]
    assert ids == sorted(integrations.registry.SPECS)
    assert "testsvc" in ids
    assert dialog.current_page() == "integrations"
    assert page.heading.text() == "Test service"
    assert labels(page) == ["This computer"]
    # Discovered accounts are shown, but cannot be edited or removed.
    assert not page.remove_button.isEnabled() and not page.edit_button.isEnabled()
    assert "cannot be removed" in page.remove_button.toolTip()
    assert page.active_button.isEnabled() is False  # it is the default, hence active
    row = ids.index("testsvc")
    assert (
        page.integration_list.item(row).data(integrations_page.DETAIL_ROLE)
        == "1 account · using This computer"
    )


def test_add_test_switch_edit_and_remove_accounts(
    qtbot: Any,
    qloop: Any,
    open_dialog: Any,
    runtime: Runtime,
    spec: IntegrationSpec,
    confirmations: list[str],
    home: Path,
) -> None:
    dialog, page = open_page(qloop, open_dialog, runtime)
    keyring: MemoryKeyring = runtime.secrets._backend  # type: ignore[assignment]

    async def body() -> None:
        # Add: the secret goes to the keyring, the rest to the store.
        await add_account(qtbot, page, "Work", TOKEN)
        assert labels(page) == ["Work", "This computer"]
        work = page.current_account()
        assert work is not None and work.label == "Work"
        assert keyring.items[(SERVICE, secret_key("testsvc", work.id, "token"))] == TOKEN
        assert "token" not in work.fields

        # Test: success is shown.
        click(qtbot, page.test_button)
        await wait_until(lambda: page.test_result.text().startswith("✓"), what="the result")
        assert page.test_result.text() == "✓ Connected to https://svc.example.com as ann"
        assert page.test_result.property("role") == "ok"

        # A second account with a rejected token: the failure is shown, without the token.
        await add_account(qtbot, page, "Home", OTHER_TOKEN)
        page.select_account(
            next(a.id for a in runtime.accounts.list("testsvc") if a.label == "Home")
        )
        click(qtbot, page.test_button)
        await wait_until(lambda: page.test_result.text().startswith("✗"), what="the failure")
        result = page.test_result.text()
        assert "server refused token" in result and OTHER_TOKEN not in result
        assert page.test_result.property("role") == "error"

        # Make active.
        home_id = page.current_account().id  # type: ignore[union-attr]
        click(qtbot, page.active_button)
        await wait_until(
            lambda: runtime.accounts.active("testsvc").id == home_id, what="the switch"
        )
        await wait_until(lambda: not page.active_button.isEnabled(), what="the active state")

        # Edit: the stored secret is never shown; only "set" and Replace.
        click(qtbot, page.edit_button)
        editor = page.editor
        token_input = editor.secret_inputs["token"]
        assert token_input.edit.text() == ""
        assert token_input.edit.placeholderText() == SET_PLACEHOLDER
        assert not token_input.edit.isEnabled()
        assert token_input.replace_button.isVisible()
        fill(qtbot, editor.label_edit, "Home lab")
        click(qtbot, token_input.replace_button)
        assert token_input.edit.isEnabled()
        qtbot.keyClicks(token_input.edit, TOKEN)
        click(qtbot, editor.save_button)
        await wait_until(lambda: "Home lab" in labels(page), what="the edited account")
        edited = runtime.accounts.active("testsvc")
        assert edited.label == "Home lab"  # still the active one
        assert runtime.accounts.with_secrets(edited).secrets["token"] == TOKEN
        assert (SERVICE, secret_key("testsvc", home_id, "token")) not in keyring.items
        click(qtbot, page.test_button)
        await wait_until(lambda: page.test_result.text().startswith("✓"), what="the retest")

        # Edit without replacing keeps the stored secret.
        click(qtbot, page.edit_button)
        fill(qtbot, page.editor.inputs["user"], "bob")
        click(qtbot, page.editor.save_button)
        await wait_until(
            lambda: runtime.accounts.active("testsvc").fields.get("user") == "bob", what="edit"
        )
        kept = runtime.accounts.with_secrets(runtime.accounts.active("testsvc"))
        assert kept.secrets["token"] == TOKEN
        # the page reloads after the edit: select only once that is done (a late reload
        # would select the active account again)
        await wait_until(
            lambda: (
                any(a.fields.get("user") == "bob" for a in page.states["testsvc"].accounts)
                and page.remove_button.isEnabled()
            ),
            what="the page to show the edit",
        )

        # Remove, after confirming: the secret leaves the keyring too.
        page.select_account(
            next(a.id for a in runtime.accounts.list("testsvc") if a.label == "Work")
        )
        click(qtbot, page.remove_button)
        await wait_until(lambda: "Work" not in labels(page), what="the removal")
        assert confirmations and "Work" in confirmations[0]
        assert (SERVICE, secret_key("testsvc", work.id, "token")) not in keyring.items

        # accounts are saved as they change: the dialog has nothing left to save
        assert not dialog.save_button.isEnabled()

    run(qloop, body())
    assert sorted(labels(page)) == ["Home lab", "This computer"]
    # The secrets never reached settings.json (if written at all) or the database.
    files = [*home.glob("settings.json*"), *home.glob("deskhand.db*")]
    assert any(p.name == "deskhand.db" for p in files)
    for path in files:
        data = path.read_bytes()
        assert TOKEN.encode() not in data and OTHER_TOKEN.encode() not in data, path


def test_required_fields_and_cancel_refuse_to_add(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, spec: IntegrationSpec
) -> None:
    _, page = open_page(qloop, open_dialog, runtime)
    click(qtbot, page.add_button)
    editor = page.editor
    fill(qtbot, editor.label_edit, "Nope")
    click(qtbot, editor.save_button)
    assert editor.error_label.text() == "Server URL is required."
    fill(qtbot, editor.inputs["url"], "https://x.example.com")
    click(qtbot, editor.save_button)
    assert editor.error_label.text() == "API token is required."
    click(qtbot, editor.cancel_button)
    assert page.stack.currentIndex() == 0
    assert runtime.accounts.list("testsvc")[0].discovered  # nothing was added


def test_declined_removal_keeps_the_account(
    qtbot: Any,
    qloop: Any,
    open_dialog: Any,
    runtime: Runtime,
    spec: IntegrationSpec,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, page = open_page(qloop, open_dialog, runtime)
    asked: list[str] = []
    monkeypatch.setattr(integrations_page, "confirm", lambda *a: asked.append(a[2]) or False)

    async def body() -> None:
        await add_account(qtbot, page, "Keep me", TOKEN)
        click(qtbot, page.remove_button)
        # the slot returns right after the answer: nothing can be removed later
        await wait_until(lambda: asked, what="the removal question")

    run(qloop, body())
    assert "Keep me" in labels(page)
    assert runtime.accounts.list("testsvc")[0].label == "Keep me"


def test_a_keyring_failure_is_shown_and_nothing_is_added(
    qtbot: Any, qloop: Any, open_dialog: Any, runtime: Runtime, spec: IntegrationSpec
) -> None:
    from keyring.backends import fail

    from app.core.secrets import SecretStore

    runtime.secrets = SecretStore(backend=fail.Keyring())
    runtime.__dict__.pop("accounts", None)  # rebuilt with the failing keyring
    _, page = open_page(qloop, open_dialog, runtime)

    async def body() -> None:
        click(qtbot, page.add_button)
        fill(qtbot, page.editor.label_edit, "Work")
        fill(qtbot, page.editor.inputs["url"], "https://svc.example.com")
        qtbot.keyClicks(page.editor.secret_inputs["token"].edit, TOKEN)
        click(qtbot, page.editor.save_button)
        await wait_until(lambda: page.editor.error_label.text(), what="the failure")

    run(qloop, body())
    text = page.editor.error_label.text()
    assert text.startswith("Nothing was saved.") and "keyring" in text
    assert TOKEN not in text
    assert page.stack.currentWidget() is page.editor  # the form stays, so nothing is lost
