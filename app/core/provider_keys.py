"""Provider accounts' API keys in the keyring: where each lives, reading one, and the
changes Settings → Providers saves (keys typed, cleared, and those of removed accounts)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from app.core.secrets import SecretStoreError, api_key_name

if TYPE_CHECKING:
    from app.core.secrets import SecretStore

log = logging.getLogger(__name__)


def stored_key(secrets: SecretStore, account_id: str) -> str | None:
    """(blocking) The account's stored key; an account with no key in the index of names
    — a local server — is answered without asking the keyring."""
    name = api_key_name(account_id)
    return secrets.get(name) if secrets.might_hold(name) else None


def save_key_changes(
    secrets: SecretStore,
    *,
    removed: Iterable[str] = (),
    cleared: Iterable[str] = (),
    typed: Mapping[str, str] | None = None,
) -> dict[str, bool]:
    """(blocking) Applies the Providers page's key changes; returns, for each account it
    touched, whether a key is stored now. Removed accounts' keys go on a best-effort basis
    (the account is gone either way); a failure to clear or store raises SecretStoreError."""
    stored: dict[str, bool] = {}
    for account_id in sorted(removed):
        try:
            secrets.delete(api_key_name(account_id))
        except SecretStoreError as exc:
            log.warning("could not remove the key of a deleted provider: %s", exc)
    for account_id in sorted(cleared):
        secrets.delete(api_key_name(account_id))
        stored[account_id] = False
    for account_id, value in (typed or {}).items():
        secrets.set(api_key_name(account_id), value)
        stored[account_id] = True
    return stored
