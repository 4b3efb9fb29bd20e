"""Accounts of every integration: added ones (fields in the store, secrets in the keyring)
plus discovered ones (kubeconfig contexts, the local Docker); one active per integration.

Blocking (SQLite, keyring, reading kubeconfig): call from a thread, not the UI loop.
"""

from __future__ import annotations

import builtins
import logging
from typing import Any

from app.core.secrets import SecretStore, SecretStoreError, secret_key
from app.core.threads import off_gui_thread
from integrations.registry import SPECS
from integrations.spec import Account, IntegrationSpec

log = logging.getLogger(__name__)


class AccountError(LookupError):
    """A readable problem with an account request (unknown integration or account)."""

    def __str__(self) -> str:  # LookupError would quote the message
        return str(self.args[0]) if self.args else ""


class AccountDirectory:
    def __init__(self, store: Any, secrets: SecretStore) -> None:
        self.store = store
        self.secrets = secrets

    def spec(self, integration: str) -> IntegrationSpec:
        spec = SPECS.get(integration)
        if spec is None:
            known = ", ".join(sorted(SPECS))
            raise AccountError(f"unknown integration {integration!r} (known: {known})")
        return spec

    def integrations(self) -> list[IntegrationSpec]:
        return [SPECS[k] for k in sorted(SPECS)]

    # ---- reading ------------------------------------------------------------------------

    def list(self, integration: str) -> list[Account]:
        spec = self.spec(integration)
        added = [
            Account(row["id"], integration, row["label"], dict(row["fields"]))
            for row in self.store.list_accounts(integration)
        ]
        discovered: list[Account] = []
        if spec.discover is not None:
            try:
                discovered = spec.discover()
            except Exception as exc:  # a broken kubeconfig must not hide added accounts
                log.warning("could not discover %s accounts: %s", integration, exc)
        taken = {a.id for a in added}
        return added + [a for a in discovered if a.id not in taken]

    def find(self, integration: str, ref: str) -> Account:
        """By id, or by label / context name (what a user or the model would type)."""
        accounts = self.list(integration)
        for account in accounts:
            if ref in (account.id, account.label, account.fields.get("context")):
                return account
        names = ", ".join(a.label for a in accounts) or "none"
        raise AccountError(f"no {integration} account {ref!r} (accounts: {names})")

    def active(self, integration: str) -> Account | None:
        accounts = self.list(integration)
        chosen = self.store.active_account_id(integration)
        for account in accounts:
            if account.id == chosen:
                return account
        # Nothing chosen: what the machine itself uses (local Docker, current kube context);
        # adding an account never silently moves where tools act.
        discovered = [a for a in accounts if a.discovered]
        candidates = discovered or accounts
        return candidates[0] if candidates else None

    def with_secrets(self, account: Account) -> Account:
        """The account with its secret fields read from the keyring (for a tool's use)."""
        for name in self.spec(account.integration).secret_fields:
            try:
                value = self.secrets.get(secret_key(account.integration, account.id, name))
            except SecretStoreError as exc:
                log.warning("%s", exc)
                value = None
            if value:
                account.secrets[name] = value
        return account

    def resolve(self, integration: str) -> Account:
        """What `ctx.account()` returns: the active account, secrets included."""
        account = self.active(integration)
        if account is None:
            title = self.spec(integration).title
            raise AccountError(f"no {title} account is set up; add one in Settings → Accounts")
        return self.with_secrets(account)

    @off_gui_thread  # reads kubeconfig YAML, Docker contexts, the store
    def active_summary(self) -> builtins.list[tuple[str, str]]:
        """(integration title, active account label) where the choice matters: the
        integration has several accounts, or the user picked an added one."""
        summary = []
        for spec in self.integrations():
            try:
                accounts = self.list(spec.id)
                active = self.active(spec.id)
            except Exception as exc:  # a broken integration must not hide the others
                log.warning("could not read %s accounts: %s", spec.id, exc)
                continue
            if active is not None and (len(accounts) > 1 or not active.discovered):
                summary.append((spec.title, active.label))
        return summary

    # ---- changing -----------------------------------------------------------------------

    def add(
        self,
        integration: str,
        label: str,
        values: dict[str, str],
        *,
        make_active: bool = False,
    ) -> Account:
        spec = self.spec(integration)
        known = {f.name for f in spec.fields}
        unknown = sorted(set(values) - known)
        if unknown:
            raise AccountError(
                f"{spec.title} accounts have no field(s) {', '.join(unknown)}; "
                f"fields: {', '.join(sorted(known))}"
            )
        missing = [f.label for f in spec.fields if f.required and not values.get(f.name)]
        if missing:
            raise AccountError(f"missing required field(s): {', '.join(missing)}")
        secret_names = set(spec.secret_fields)
        plain = {k: v for k, v in values.items() if k not in secret_names}
        account_id = self.store.add_account(integration, label, plain)
        for name in secret_names & set(values):
            if values[name]:
                self.secrets.set(secret_key(integration, account_id, name), values[name])
        if make_active:
            self.store.set_active_account(integration, account_id)
        return Account(account_id, integration, label, plain)

    def remove(self, integration: str, ref: str) -> Account:
        account = self.find(integration, ref)
        if account.discovered:
            raise AccountError(
                f"{account.label} comes from the machine's own configuration; "
                "it cannot be removed here"
            )
        self.store.remove_account(integration, account.id)
        for name in self.spec(integration).secret_fields:
            self.secrets.delete(secret_key(integration, account.id, name))
        return account

    def set_active(self, integration: str, account_id: str) -> Account:
        account = self.find(integration, account_id)
        self.store.set_active_account(integration, account.id)
        return account
