"""Docker SDK clients per account, cached. Imports the docker package (heavy): only tools and
connection tests load this module."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from integrations.spec import Account

_clients: dict[tuple[str, str], Any] = {}
_lock = threading.Lock()


def docker_client(account: Account, *, timeout: int = 30) -> Any:
    import docker

    host = account.fields.get("host", "")
    key = (account.id, host)
    with _lock:
        client = _clients.get(key)
        if client is not None:
            return client
        if not host:
            client = docker.from_env(timeout=timeout)
        else:
            tls: Any = False
            cert, key_file = account.get("tls_client_cert"), account.get("tls_client_key")
            ca = account.get("tls_ca_cert")
            if host.startswith("tcp://") and (cert or ca):
                tls = docker.tls.TLSConfig(
                    client_cert=(cert, key_file) if cert and key_file else None,
                    ca_cert=ca or None,
                    verify=account.get("tls_verify", "true").lower() != "false",
                )
            client = docker.DockerClient(
                base_url=host, tls=tls, timeout=timeout, use_ssh_client=host.startswith("ssh://")
            )
        _clients[key] = client
        return client


def forget_clients() -> None:
    with _lock:
        for client in _clients.values():
            with contextlib.suppress(Exception):  # closing a broken client must not raise
                client.close()
        _clients.clear()
