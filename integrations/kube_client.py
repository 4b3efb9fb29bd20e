"""Kubernetes API clients per account (context), cached. Imports the kubernetes package
(heavy): only tools and connection tests load this module."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from integrations.kubernetes import kubeconfig_paths
from integrations.spec import Account

_clients: dict[tuple[str, str, tuple[int, ...]], Any] = {}
_lock = threading.Lock()


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def api_client(account: Account) -> Any:
    """The client of the account's context. All kubeconfig files (a `KUBECONFIG` list) are
    merged like kubectl does; a file that changed since (a fresh login) gives a new client."""
    from kubernetes import config

    context = account.fields.get("context") or None
    paths = kubeconfig_paths(account.fields.get("kubeconfig", ""))
    joined = os.pathsep.join(map(str, paths))
    key = (context or "", joined, tuple(_mtime(p) for p in paths))
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = config.new_client_from_config(
                config_file=joined, context=context, persist_config=False
            )
            _clients[key] = client
        return client


def forget_clients() -> None:
    with _lock:
        _clients.clear()
