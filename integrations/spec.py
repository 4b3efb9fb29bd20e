"""What an account IS for each connected service: its fields, which are secret, how to find
accounts that already exist on the machine, and how to test one.

No app, Qt or heavy SDK imports here; SDKs load inside the functions that need them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class IntegrationField:
    name: str
    label: str
    secret: bool = False
    required: bool = False
    default: str = ""
    help: str = ""


@dataclass
class Account:
    """One configured (or discovered) account. `secrets` is filled only when the account is
    handed to a tool; it never goes to settings, the store or the model."""

    id: str
    integration: str
    label: str
    fields: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    #: Found on the machine (a kubeconfig context, the local Docker) rather than added.
    discovered: bool = False

    def get(self, name: str, default: str = "") -> str:
        return self.secrets.get(name) or self.fields.get(name) or default

    def public(self) -> dict[str, Any]:
        """What may be shown to the model and the user: secrets masked."""
        masked = {k: "••••••" for k, v in self.secrets.items() if v}
        return {
            "id": self.id,
            "integration": self.integration,
            "label": self.label,
            "fields": dict(self.fields),
            "secrets": masked,
            "discovered": self.discovered,
        }


@dataclass(frozen=True)
class IntegrationSpec:
    id: str
    title: str
    description: str
    fields: tuple[IntegrationField, ...] = ()
    #: () -> list[Account]: accounts that exist without being added (kube contexts, the local
    #: Docker). The first one is the default when the user has chosen none.
    discover: Callable[[], list[Account]] | None = None
    #: (Account) -> str: a short success message; raises with a readable message on failure.
    test_connection: Callable[[Account], str] | None = None

    @property
    def secret_fields(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields if f.secret)


class AccountDirectory(Protocol):
    """The accounts of every integration, as tools see them (through `ctx.accounts`)."""

    def list(self, integration: str) -> list[Account]: ...

    def active(self, integration: str) -> Account | None: ...

    def set_active(self, integration: str, account_id: str) -> Account: ...

    def find(self, integration: str, ref: str) -> Account:
        """By id, label or context name; raises LookupError naming the accounts there are."""
        ...
