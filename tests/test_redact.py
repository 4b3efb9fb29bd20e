from __future__ import annotations

import pytest

from tools.redact import REDACTED, Redactor, is_credential_key


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "api_key",
        "apiKey",
        "X-Api-Key",
        "access_token",
        "client_secret",
        "Authorization",
        "db_password",
        "privateKey",
        "cookie",
    ],
)
def test_credential_keys(key):
    assert is_credential_key(key)


@pytest.mark.parametrize("key", ["max_tokens", "input_tokens", "name", "author", "path", "passes"])
def test_ordinary_keys(key):
    assert not is_credential_key(key)


def test_longest_secret_wins_and_short_values_are_ignored():
    r = Redactor(["abcd1234", "abcd1234efgh", "ab"])
    assert r.text("x abcd1234efgh y abcd1234 z ab") == f"x {REDACTED} y {REDACTED} z ab"


def test_secret_with_regex_characters():
    r = Redactor(["a.b*c+(d)"])
    assert r.text("val=a.b*c+(d);") == f"val={REDACTED};"
    assert r.text("val=aXbbc") == "val=aXbbc"


def test_data_walk_keeps_shape():
    r = Redactor(["s3cr3t-value"])
    data = {"list": ["s3cr3t-value", 1, None], "token": "", "auth": {"user": "me"}}
    out = r.data(data)
    assert out == {"list": [REDACTED, 1, None], "token": "", "auth": {"user": "me"}}
