"""Credential-shaped values are recognised whatever name they travel under, and ordinary
values (digests, UUIDs, git SHAs, base64 of plain text) are left alone."""

from __future__ import annotations

import base64
import json
import time

import pytest

from tools.credential_values import (
    REDACTED,
    looks_like_credential_value,
    mask_command,
    mask_credential_data,
    mask_credential_values,
    mask_env_entries,
)

GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "-----END OPENSSH PRIVATE KEY-----"
)

TOKENS = {
    "github classic": GHP,
    "github oauth": "gho_" + "x" * 36,
    "github app": "ghs_" + "Z9" * 18,
    "github refresh": "ghr_" + "k" * 40,
    "github fine-grained": "github_pat_11ABCDEFG0" + "a1B2c3" * 10,
    "gitlab": "glpat-" + "Abc123xyz_-Abc123xyz",
    "slack bot": "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp",
    "slack user": "xoxp-1234-5678-abcdef",
    "aws access key id": "AKIAIOSFODNN7EXAMPLE",
    "aws session key id": "ASIAY34FZKBOKMUTVV7A",
    "openai": "sk-" + "T3BlbkFJ" * 6,
    "openai project": "sk-proj-" + "Ab3_dE9-" * 12,
    "anthropic": "sk-ant-api03-" + "aB3dE6gH9" * 10,
    "google": "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"[:35],
    "stripe": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "stripe restricted": "rk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "npm": "npm_" + "aB3" * 12,
    "pypi": "pypi-AgEIcHlwaS5vcmcCJDU3MTAzZjRlLTk0YjktNDRlZS04ZTA3LTE0NTc1",
    "jwt": JWT,
}


@pytest.mark.parametrize("value", TOKENS.values(), ids=TOKENS.keys())
def test_token_formats_are_recognised_alone_and_inside_text(value: str):
    assert looks_like_credential_value(value)
    assert mask_credential_values(value) == REDACTED
    line = f"NOTE={value} and more"
    assert mask_credential_values(line) == f"NOTE={REDACTED} and more"
    assert value not in mask_credential_values(json.dumps({"note": value}))


HARMLESS = {
    "image digest": "sha256:" + "a3f5" * 16,
    "docker image id": "sha256:9c7a54a9a43cca047013b82af109fe963fde787f63f9e016fdc3384500c2823d",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "git sha": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    "base64 of plain text": base64.b64encode(b"hello world, this is not a secret").decode(),
    "path": "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin",
    "url with port": "http://registry.example.com:5000/v2/",
    "url with user only": "ssh://git@github.com/org/repo.git",
    "max tokens": "max_tokens=4096",
    "token file": "--token-file /run/secrets/token",
    "password file": "DB_PASSWORD_FILE=/run/secrets/db",
    "variable reference": "API_TOKEN=${API_TOKEN}",
    "empty value": "PASSWORD=",
    "kubernetes annotation": "kubectl.kubernetes.io/last-applied-configuration",
    "yaml image": "image: nginx:1.27",
    "a task slug": "task-force-one-two-three-four-five-six-seven",
    "aws-like but longer": "AKIAIOSFODNN7EXAMPLEXYZ",
    "prose with bearer": "The bearer of this letter is welcome.",
    "selector key": "- key: app\n  operator: In",
}


@pytest.mark.parametrize("value", HARMLESS.values(), ids=HARMLESS.keys())
def test_ordinary_values_are_not_masked(value: str):
    assert mask_credential_values(value) == value
    assert not looks_like_credential_value(value)


def test_url_passwords_keep_the_user_and_host():
    assert (
        mask_credential_values("postgres://app:s3cr3t-pw@db.internal:5432/shop")
        == f"postgres://app:{REDACTED}@db.internal:5432/shop"
    )
    assert mask_credential_values("redis://:hunter2@cache:6379") == f"redis://:{REDACTED}@cache:6379"
    assert "hunter2" not in mask_credential_values("git clone https://me:hunter2@host/r.git")


def test_private_keys_authorization_headers_and_aws_secrets():
    assert mask_credential_values(f"key:\n{PEM}\nend") == f"key:\n{REDACTED}\nend"
    escaped = json.dumps({"k": PEM})  # newlines escaped, as in a JSON blob
    assert "b3BlbnNzaC1" not in mask_credential_values(escaped)
    cut = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq\nQ2x"  # output cut short
    assert "MIIEow" not in mask_credential_values(cut)
    header = 'curl -H "Authorization: Bearer abc.def-ghi_jkl" https://api'
    assert mask_credential_values(header) == (
        f'curl -H "Authorization: Bearer {REDACTED}" https://api'
    )
    assert "dXNlcjpwYXNz" not in mask_credential_values("Authorization: Basic dXNlcjpwYXNz")
    aws = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert mask_credential_values(aws) == f"aws_secret_access_key = {REDACTED}"


def test_credential_named_pairs_and_flags():
    assert mask_credential_values("DB_PASSWORD=hunter2 MODE=prod") == (
        f"DB_PASSWORD={REDACTED} MODE=prod"
    )
    assert mask_credential_values("app --password=hunter2 --port=80") == (
        f"app --password={REDACTED} --port=80"
    )
    assert mask_credential_values("app --api-key hunter2 -v") == f"app --api-key {REDACTED} -v"
    assert mask_credential_values('{"clientSecret": "abc", "user": "bob"}') == (
        f'{{"clientSecret": "{REDACTED}", "user": "bob"}}'
    )
    assert mask_credential_values("password: hunter2\nuser: bob") == (
        f"password: {REDACTED}\nuser: bob"
    )
    env_json = '{"name":"DB_PASSWORD","value":"hunter2"}'
    assert mask_credential_values(env_json) == f'{{"name":"DB_PASSWORD","value":"{REDACTED}"}}'


def test_commands_env_entries_and_structured_data():
    argv = ["db", "--password", "hunter2", "--user", "bob", "--token=t0k3n", GHP]
    assert mask_command(argv) == [
        "db", "--password", REDACTED, "--user", "bob", f"--token={REDACTED}", REDACTED
    ]  # fmt: skip
    assert mask_env_entries(["NOTE=" + GHP, "SSH_KEY=abc", "HOME=/root", "PLAIN"]) == [
        f"NOTE={REDACTED}",
        f"SSH_KEY={REDACTED}",
        "HOME=/root",
        "PLAIN",
    ]
    pod = {
        "env": [
            {"name": "API_KEY", "value": "plain-looking"},
            {"name": "NOTE", "value": GHP},
            {"name": "MODE", "value": "prod"},
        ],
        "args": ["--password=x1"],
        "annotations": {"note": f"https://u:pw@h/x {JWT}"},
    }
    masked = mask_credential_data(pod)
    assert masked["env"] == [
        {"name": "API_KEY", "value": REDACTED},
        {"name": "NOTE", "value": REDACTED},
        {"name": "MODE", "value": "prod"},
    ]
    assert masked["args"] == [f"--password={REDACTED}"]
    assert masked["annotations"]["note"] == f"https://u:{REDACTED}@h/x {REDACTED}"


HOSTILE = {
    "many BEGIN lines": "-----BEGIN RSA PRIVATE KEY-----\n" * 8000,
    "dotted words": "a." * 100_000 + "b",
    "long yaml padding": "password: x" + " " * 200_000 + "y",
    "unterminated url password": "http://u:" + "p" * 200_000,
    "assignments": "a=" * 100_000,
    "flags": "--token " * 30_000,
    "quotes": '"password": "' + "x" * 200_000,
    "long token run": "ghp_" + "a" * 200_000,
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_input_cannot_make_masking_slow(text: str):
    """Tool output is attacker-controlled: masking stays linear (no catastrophic regex)."""
    began = time.perf_counter()
    mask_credential_values(text)
    assert time.perf_counter() - began < 10.0  # linear: milliseconds; quadratic: minutes
