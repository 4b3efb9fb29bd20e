"""Docker hosts as accounts: the local engine (DOCKER_HOST or the platform socket), or a
named remote host (tcp:// with TLS files, or ssh://)."""

from __future__ import annotations

import os

from integrations.spec import Account, IntegrationField, IntegrationSpec

LOCAL_ID = "local"


def discover() -> list[Account]:
    host = os.environ.get("DOCKER_HOST", "")
    label = f"Local Docker ({host})" if host else "Local Docker"
    return [Account(LOCAL_ID, "docker", label, {"host": ""}, discovered=True)]


def test_connection(account: Account) -> str:
    from integrations.docker_client import docker_client

    client = docker_client(account)
    version = client.version()
    return f"Docker {version.get('Version', '?')} on {describe_host(account)}"


def describe_host(account: Account) -> str:
    return account.fields.get("host") or os.environ.get("DOCKER_HOST") or "the local socket"


SPEC = IntegrationSpec(
    id="docker",
    title="Docker",
    description="Docker engines the assistant may inspect and manage.",
    fields=(
        IntegrationField(
            "host", "Host", help="tcp://host:2376 or ssh://user@host; empty for the local engine"
        ),
        IntegrationField("tls_ca_cert", "TLS CA certificate (path)"),
        IntegrationField("tls_client_cert", "TLS client certificate (path)"),
        IntegrationField("tls_client_key", "TLS client key (path)"),
        IntegrationField("tls_verify", "Verify TLS (true/false)", default="true"),
    ),
    discover=discover,
    test_connection=test_connection,
)
