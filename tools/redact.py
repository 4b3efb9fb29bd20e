"""The secret tripwire: nothing that passes here carries a known secret value or a
credential-looking field to the model, the UI, the logs or the store."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 4

_CREDENTIAL_WORDS = (
    "password|passwd|passphrase|pwd|secret|token|apikey|api_key|private_key|access_key|"
    "secret_key|client_secret|authorization|auth|credential|credentials|cookie|session_id|"
    "bearer|refresh_token|access_token|id_token"
)
_CREDENTIAL_KEY = re.compile(rf"(^|_)({_CREDENTIAL_WORDS})($|_)")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def is_credential_key(key: str) -> bool:
    """True for `password`, `apiKey`, `X-Api-Key`, `access_token`; false for `max_tokens`."""
    normal = _CAMEL_BOUNDARY.sub("_", key).replace("-", "_").replace(" ", "_").lower()
    return bool(_CREDENTIAL_KEY.search(normal))


class Redactor:
    """Replaces known secret values with a marker; longest first, so overlapping secrets
    cannot leave a recognisable tail behind."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._pattern: re.Pattern[str] | None = None
        self._secrets: frozenset[str] = frozenset()
        self.update(secrets)

    def update(self, secrets: Iterable[str]) -> None:
        values = frozenset(s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH)
        if values == self._secrets:
            return
        self._secrets = values
        ordered = sorted(values, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def text(self, value: str) -> str:
        if self._pattern is None or not value:
            return value
        return self._pattern.sub(REDACTED, value)

    def data(self, value: Any) -> Any:
        """Walks JSON-like data: masks credential-named string fields, scrubs all strings."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for key, item in value.items():
                if (
                    isinstance(key, str)
                    and is_credential_key(key)
                    and isinstance(item, str)
                    and item
                ):
                    out[key] = REDACTED
                else:
                    out[key] = self.data(item)
            return out
        if isinstance(value, list | tuple):
            return [self.data(item) for item in value]
        return value
