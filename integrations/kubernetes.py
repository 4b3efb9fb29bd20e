"""Kubernetes clusters as accounts: one per kubeconfig context. Switching the active account
never rewrites the user's kubeconfig."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from integrations.spec import Account, IntegrationField, IntegrationSpec


def kubeconfig_paths(explicit: str = "") -> list[Path]:
    raw = explicit or os.environ.get("KUBECONFIG", "") or str(Path.home() / ".kube" / "config")
    return [Path(p).expanduser() for p in raw.split(os.pathsep) if p]


def read_kubeconfig(explicit: str = "") -> dict[str, Any]:
    """Merged contexts and current-context of the kubeconfig file(s), read with PyYAML only
    (imported only when a file exists: most machines have none)."""
    contexts: list[dict[str, Any]] = []
    current = ""
    paths = [p for p in kubeconfig_paths(explicit) if p.is_file()]
    if not paths:
        return {"contexts": contexts, "current-context": current}
    import yaml

    for path in paths:
        try:
            data = yaml.safe_load(path.read_text("utf-8")) or {}
        except (OSError, yaml.YAMLError):
            continue
        current = current or data.get("current-context", "")
        seen = {c.get("name") for c in contexts}
        contexts.extend(c for c in data.get("contexts") or [] if c.get("name") not in seen)
    return {"contexts": contexts, "current-context": current}


def discover(kubeconfig: str = "") -> list[Account]:
    """One account per context; the current context first, so it is the default.
    `kubeconfig`: a file (or path list) to read instead of $KUBECONFIG / ~/.kube/config."""
    config = read_kubeconfig(kubeconfig)
    current = config["current-context"]
    accounts = []
    for ctx in config["contexts"]:
        name = ctx.get("name", "")
        details = ctx.get("context") or {}
        label = f"{name} (cluster {details.get('cluster', '?')})"
        accounts.append(
            Account(
                f"context:{name}",
                "kubernetes",
                label,
                {
                    "context": name,
                    "kubeconfig": kubeconfig,
                    "namespace": details.get("namespace", ""),
                },
                discovered=True,
            )
        )
    accounts.sort(key=lambda a: a.fields["context"] != current)
    return accounts


def test_connection(account: Account) -> str:
    from kubernetes import client as k8s

    from integrations.kube_client import api_client

    version = k8s.VersionApi(api_client(account)).get_code()
    return f"Kubernetes {version.git_version} (context {account.fields.get('context')})"


SPEC = IntegrationSpec(
    id="kubernetes",
    title="Kubernetes",
    description="Clusters from your kubeconfig; each context is an account.",
    fields=(
        IntegrationField("context", "Context", required=True),
        IntegrationField(
            "kubeconfig", "Kubeconfig file", help="empty: $KUBECONFIG or ~/.kube/config"
        ),
        IntegrationField("namespace", "Default namespace"),
    ),
    discover=discover,
    test_connection=test_connection,
)
