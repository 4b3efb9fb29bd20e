"""Accounts: added and discovered, one active per integration, secrets only in the keyring."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from app.core.accounts import AccountDirectory, AccountError
from app.core.runtime import Runtime
from integrations import registry
from integrations.spec import IntegrationField, IntegrationSpec
from tools.spec import ToolError

REPO = Path(__file__).resolve().parents[1]

KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "current-context": "prod",
    "clusters": [
        {"name": "c1", "cluster": {"server": "https://127.0.0.1:1"}},
        {"name": "c2", "cluster": {"server": "https://127.0.0.1:2"}},
    ],
    "users": [{"name": "u", "user": {"token": "abc"}}],
    "contexts": [
        {"name": "dev", "context": {"cluster": "c1", "user": "u", "namespace": "team"}},
        {"name": "prod", "context": {"cluster": "c2", "user": "u"}},
    ],
}


@pytest.fixture
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    monkeypatch.setenv("KUBECONFIG", str(path))
    return path


@pytest.fixture
def runtime(home: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    rt = Runtime(home, entry_points=False)
    yield rt
    rt.close()


def test_docker_has_a_discovered_local_default(runtime):
    active = runtime.accounts.active("docker")
    assert active.id == "local" and active.discovered


def test_added_account_becomes_active_and_is_resolved_for_tools(runtime):
    added = runtime.accounts.add("docker", "build box", {"host": "ssh://me@build"})
    assert runtime.accounts.active("docker").id == "local"
    runtime.accounts.set_active("docker", "build box")
    resolved = runtime.resolve_account("docker")
    assert resolved.id == added.id and resolved.fields["host"] == "ssh://me@build"
    assert runtime.accounts.list("docker")[0].label == "build box"
    runtime.accounts.remove("docker", added.id)
    assert runtime.accounts.active("docker").id == "local"


def test_kube_contexts_are_accounts_and_switching_keeps_kubeconfig(runtime, kubeconfig):
    before = kubeconfig.read_bytes()
    accounts = runtime.accounts.list("kubernetes")
    assert [a.fields["context"] for a in accounts] == ["prod", "dev"]  # current first
    assert runtime.accounts.active("kubernetes").fields["context"] == "prod"
    runtime.accounts.set_active("kubernetes", "dev")
    assert runtime.accounts.active("kubernetes").fields["namespace"] == "team"
    assert kubeconfig.read_bytes() == before
    with pytest.raises(AccountError, match="comes from the machine"):
        runtime.accounts.remove("kubernetes", "dev")


def test_bad_requests_are_readable(runtime, kubeconfig):
    with pytest.raises(AccountError, match="unknown integration 'jira'"):
        runtime.accounts.list("jira")
    with pytest.raises(AccountError, match="no kubernetes account 'staging'"):
        runtime.accounts.set_active("kubernetes", "staging")
    with pytest.raises(AccountError, match="no field"):
        runtime.accounts.add("docker", "x", {"hots": "tcp://a"})
    with pytest.raises(AccountError, match="missing required field"):
        runtime.accounts.add("kubernetes", "x", {})


def test_no_account_is_a_tool_error(runtime, monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(ToolError, match="no Kubernetes account is set up"):
        runtime.resolve_account("kubernetes")


def test_secret_fields_go_to_the_keyring_only(home, keyring_env, monkeypatch):
    spec = IntegrationSpec(
        id="demo",
        title="Demo",
        description="A service with a token.",
        fields=(IntegrationField("url", "URL"), IntegrationField("token", "Token", secret=True)),
    )
    monkeypatch.setitem(registry.SPECS, "demo", spec)
    rt = Runtime(home, entry_points=False)
    try:
        directory: AccountDirectory = rt.accounts
        account = directory.add("demo", "work", {"url": "https://x", "token": "tok-123456"})
        db_text = (home / "deskhand.db").read_bytes()
        assert b"tok-123456" not in db_text
        listed = directory.list("demo")[0]
        assert listed.secrets == {} and listed.public()["fields"] == {"url": "https://x"}
        resolved = rt.resolve_account("demo")
        assert resolved.secrets == {"token": "tok-123456"}
        assert resolved.public()["secrets"] == {"token": "••••••"}
        assert "tok-123456" in rt.secrets.known_values()  # so the tripwire scrubs it
        directory.remove("demo", account.id)
        assert rt.secrets.get(f"demo/{account.id}/token") is None
    finally:
        rt.close()


def test_cli_accounts(home, kubeconfig):
    env = {
        "PYTHONPATH": str(REPO),
        "KUBECONFIG": str(kubeconfig),
        "PATH": "/usr/bin:/bin",
        "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
        "HOME": str(home),
    }

    def cli(*args: str):
        return subprocess.run(
            [sys.executable, "-m", "app.cli", "--home", str(home), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )

    assert cli("accounts", "use", "kubernetes", "dev").returncode == 0
    listed = json.loads(cli("accounts", "list", "kubernetes", "--json").stdout)
    assert [(a["fields"]["context"], a["active"]) for a in listed] == [
        ("prod", False),
        ("dev", True),
    ]
    added = cli(
        "accounts", "add", "docker", "--label", "nas", "--field", "host=tcp://nas:2375", "--use"
    )
    assert added.returncode == 0, added.stderr
    rows = json.loads(cli("accounts", "list", "docker", "--json").stdout)
    assert [(r["label"], r["active"]) for r in rows] == [("nas", True), ("Local Docker", False)]
    bad = cli("accounts", "use", "docker", "nope")
    assert bad.returncode == 2 and "no docker account 'nope'" in bad.stderr


def test_account_tools_for_the_model(runtime, kubeconfig):
    import asyncio

    from app.core.approval import Verdict
    from tests.test_approval import verdict

    runner = runtime.runner

    def call(name: str, args: dict):
        manifest, params = runner.validate(name, args)
        ctx = runtime_ctx(runtime)
        return manifest, asyncio.run(runner.run_validated(manifest, params, ctx))

    _, listed = call("list_integration_accounts", {"integration": "kubernetes"})
    assert "* prod (cluster c2)" in listed.content
    manifest, switched = call(
        "set_active_integration_account", {"integration": "kubernetes", "account": "dev"}
    )
    assert verdict(manifest) is Verdict.ASK
    assert switched.ok and runtime.accounts.active("kubernetes").fields["context"] == "dev"
    _, unknown = call("integration_is_enabled", {"integration": "jira"})
    assert not unknown.ok and unknown.error.startswith("unknown integration 'jira'")
    _, overview = call("integration_list", {})
    assert "docker: Docker — 1 account(s)" in overview.content


def runtime_ctx(runtime):
    from tools.spec import ToolContext

    return ToolContext(
        home=runtime.home, accounts=runtime.accounts, account_resolver=runtime.resolve_account
    )
