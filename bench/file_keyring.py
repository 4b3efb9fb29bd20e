"""A keyring backend for benchmarks: plain JSON in $DESKHAND_BENCH_KEYRING, so a home can
hold "stored secrets" without a desktop keyring. Never for real use (nothing is encrypted)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend


class FileKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]

    def _path(self) -> Path:
        return Path(os.environ["DESKHAND_BENCH_KEYRING"])

    def _load(self) -> dict[str, str]:
        try:
            return dict(json.loads(self._path().read_text("utf-8")))
        except FileNotFoundError:
            return {}

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}\0{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._load()
        data[f"{service}\0{username}"] = password
        self._path().write_text(json.dumps(data), "utf-8")

    def delete_password(self, service: str, username: str) -> None:
        data = self._load()
        data.pop(f"{service}\0{username}", None)
        self._path().write_text(json.dumps(data), "utf-8")
