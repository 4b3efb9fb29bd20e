"""Integration accounts (non-secret fields only; secrets live in the keyring) and which
account of each integration is active."""

from __future__ import annotations

import json
import uuid
from typing import TypedDict

from app.core.store.database import Database


class AccountRow(TypedDict):
    id: str
    integration: str
    label: str
    fields: dict[str, str]


class Accounts(Database):
    """The `integration_accounts` and `integration_active` tables."""

    def add_account(self, integration: str, label: str, fields: dict[str, str]) -> str:
        account_id = uuid.uuid4().hex[:12]
        with self._write() as db:
            db.execute(
                "INSERT INTO integration_accounts (id, integration, label, fields, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (account_id, integration, label, json.dumps(fields), self._clock()),
            )
        return account_id

    def list_accounts(self, integration: str) -> list[AccountRow]:
        rows = self._read(
            "SELECT id, integration, label, fields FROM integration_accounts"
            " WHERE integration = ? ORDER BY created_at",
            (integration,),
        )
        return [
            AccountRow(
                id=r["id"],
                integration=r["integration"],
                label=r["label"],
                fields=json.loads(r["fields"]),
            )
            for r in rows
        ]

    def remove_account(self, integration: str, account_id: str) -> bool:
        with self._write() as db:
            cur = db.execute(
                "DELETE FROM integration_accounts WHERE integration = ? AND id = ?",
                (integration, account_id),
            )
            db.execute(
                "DELETE FROM integration_active WHERE integration = ? AND account_id = ?",
                (integration, account_id),
            )
        return cur.rowcount > 0

    def set_active_account(self, integration: str, account_id: str) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO integration_active (integration, account_id) VALUES (?, ?)"
                " ON CONFLICT (integration) DO UPDATE SET account_id = excluded.account_id",
                (integration, account_id),
            )

    def active_account_id(self, integration: str) -> str | None:
        rows = self._read(
            "SELECT account_id FROM integration_active WHERE integration = ?", (integration,)
        )
        return str(rows[0]["account_id"]) if rows else None
