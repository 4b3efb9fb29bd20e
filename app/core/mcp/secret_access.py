"""The keyring as MCP sign-ins use it (no SDK import): where a server's OAuth record lives
and how to forget it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from app.core.mcp.config import keyring_key


@dataclass
class SecretAccess:
    """Blocking keyring access (run on a worker thread)."""

    get: Callable[[str], str | None]
    set: Callable[[str, str], None]
    delete: Callable[[str], None]
    #: Adds a value to the secret tripwire.
    remember: Callable[[str], None] = lambda value: None


def token_key(server: str) -> str:
    """The keyring entry of `server`'s tokens, registration and metadata."""
    return keyring_key(server, "oauth")


def forget_sign_in(server: str, secrets: SecretAccess) -> None:
    """Blocking: remove `server`'s tokens and registration from the keyring (sign out)."""
    secrets.delete(token_key(server))


def has_sign_in(server: str, url: str | None, secrets: SecretAccess) -> bool:
    """Blocking: whether `server` has a stored sign-in for its `url` (for "Sign out")."""
    try:
        text = secrets.get(token_key(server))
        record = json.loads(text) if text else None
    except Exception:
        return False
    return isinstance(record, dict) and record.get("url") == url and bool(record.get("tokens"))
