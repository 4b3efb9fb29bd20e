"""Kubernetes API clients per account (context), cached. Imports the kubernetes package
(heavy): only tools and connection tests load this module."""

from __future__ import annotations

import threading
from typing import Any

from integrations.kubernetes import kubeconfig_paths
from integrations.spec import Account

_clients: dict[tuple[str, str], Any] = {}
_lock = threading.Lock()


def api_client(account: Account) -> Any:
    from kubernetes import config

    context = account.fields.get("context") or None
    paths = kubeconfig_paths(account.fields.get("kubeconfig", ""))
    key = (context or "", ":".join(map(str, paths)))
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = config.new_client_from_config(
                config_file=str(paths[0]), context=context, persist_config=False
            )
            _clients[key] = client
        return client


def forget_clients() -> None:
    with _lock:
        _clients.clear()
