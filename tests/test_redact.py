from __future__ import annotations

import base64
import html
import json
import random
import re
import urllib.parse
from pathlib import Path

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


# ---- hostile encodings: a tool or a page hands a known secret back in disguise ------------

# Symbols that every encoder treats differently: @ : / + " \ space, and a non-ASCII letter.
NASTY = 'p@ss:w/rd+"q\\ x€9'
TOKEN = "ghp_T0k3nW1thD1g1tsAndL3tt3rs0123"


def _leaks(text: str, secret: str) -> bool:
    """Whether `text` still carries `secret` in any form this test produced."""
    raw = secret.encode()
    forms = [secret, urllib.parse.quote(secret, safe=""), raw.hex(), base64.b64encode(raw).decode()]
    return any(f in text for f in forms)


@pytest.mark.parametrize(
    "encode",
    [
        pytest.param(lambda s: s, id="raw"),
        pytest.param(lambda s: urllib.parse.quote(s, safe=""), id="percent-upper"),
        pytest.param(
            lambda s: re.sub("%..", lambda m: m[0].lower(), urllib.parse.quote(s, safe="")),
            id="percent-lower",
        ),
        pytest.param(urllib.parse.quote_plus, id="percent-plus-for-space"),
        pytest.param(urllib.parse.quote, id="percent-slash-kept"),
        pytest.param(lambda s: urllib.parse.quote(urllib.parse.quote(s, safe="")), id="percent-2x"),
        pytest.param(lambda s: "".join(f"%{b:02x}" for b in s.encode()), id="percent-every-byte"),
        pytest.param(lambda s: json.dumps(s), id="json"),
        pytest.param(lambda s: json.dumps(s, ensure_ascii=False), id="json-utf8"),
        pytest.param(lambda s: json.dumps(json.dumps({"k": s})), id="json-in-json"),
        pytest.param(lambda s: "".join(f"\\u{ord(c):04X}" for c in s), id="json-every-char"),
        pytest.param(html.escape, id="html"),
        pytest.param(lambda s: "".join(f"&#x{ord(c):x};" for c in s), id="html-every-char"),
        pytest.param(lambda s: s.encode().hex(), id="hex"),
        pytest.param(lambda s: s.encode().hex().upper(), id="HEX"),
        pytest.param(lambda s: base64.b64encode(s.encode()).decode(), id="base64"),
        pytest.param(lambda s: base64.urlsafe_b64encode(s.encode()).decode(), id="base64url"),
        pytest.param(
            lambda s: base64.b64encode(s.encode()).decode().rstrip("="), id="base64-unpadded"
        ),
    ],
)
@pytest.mark.parametrize("secret", [NASTY, TOKEN, "abcd"], ids=["symbols", "token", "short"])
def test_known_secret_is_caught_in_every_encoding(encode, secret: str) -> None:
    encoded = encode(secret)
    out = Redactor([secret]).text(f"before {encoded} after")
    assert REDACTED in out
    assert out.startswith("before ") and out.endswith(" after")
    assert encoded not in out


@pytest.mark.parametrize("prefix", ["", "a", "ab", "abc", "user:", "longer-prefix:"])
@pytest.mark.parametrize("suffix", ["", "x", "xy", "-and-more-after"])
def test_secret_inside_a_longer_base64_string_at_every_alignment(prefix: str, suffix: str) -> None:
    blob = base64.b64encode(f"{prefix}{NASTY}{suffix}".encode()).decode()
    out = Redactor([NASTY]).text(blob)
    assert REDACTED in out
    # What is left are the edges, which carry at most a few bits of the secret.
    leftover = out.replace(REDACTED, "")
    assert len(leftover) <= len(base64.b64encode(f"{prefix}{suffix}".encode())) + 4


def test_basic_auth_header() -> None:
    secret = "correct-horse-battery"
    header = "Authorization: Basic " + base64.b64encode(f"alice:{secret}".encode()).decode()
    out = Redactor([secret]).text(header)
    assert out.startswith("Authorization: Basic ") and REDACTED in out
    decoded_rest = out.removeprefix("Authorization: Basic ").replace(REDACTED, "")
    assert len(decoded_rest) <= 8  # "alice:" is 6 bytes: 8 characters, one of them mixed


def test_base64_of_a_secret_inside_a_json_blob() -> None:
    secret = "s3cr3t-Value-with/slash+plus"
    inner = base64.b64encode(json.dumps({"auth": {"pw": secret}}).encode()).decode()
    blob = json.dumps({"result": {"payload": inner, "note": "ok"}})
    out = Redactor([secret]).text(blob)
    assert REDACTED in out
    assert json.loads(out)["result"]["note"] == "ok"  # still valid JSON around it
    assert not _leaks(out, secret)


def test_percent_encoded_secret_in_a_url() -> None:
    secret = "p@ss/w0rd:with&symbols"
    url = "https://evil.example/collect?" + urllib.parse.urlencode({"q": secret, "x": "1"})
    out = Redactor([secret]).text(f"GET {url}")
    assert out == f"GET https://evil.example/collect?q={REDACTED}&x=1"


def test_secret_split_by_json_escaping() -> None:
    secret = 'quote"back\\slash/line\nbreak'
    dumped = json.dumps({"value": secret})  # "quote\"back\\slash/line\nbreak"
    assert secret not in dumped  # a literal search would miss it
    out = Redactor([secret]).text(dumped)
    assert json.loads(out) == {"value": REDACTED}


def test_hex_in_a_hexdump_like_output() -> None:
    out = Redactor([TOKEN]).text("bytes: " + TOKEN.encode().hex() + " end")
    assert out == f"bytes: {REDACTED} end"


def test_mixed_per_character_escaping_is_still_caught() -> None:
    # Each encoder escapes a different subset; an attacker may mix them on purpose.
    mixed = "p%40ss\\u003aw\\/rd&#43;&quot;q\\\\+x%E2%82%AC9"
    assert Redactor([NASTY]).text(mixed) == REDACTED


def test_text_without_secrets_is_unchanged() -> None:
    rng = random.Random(7)
    blob = base64.b64encode(bytes(rng.randrange(256) for _ in range(20_000))).decode()
    hexdump = bytes(rng.randrange(256) for _ in range(5_000)).hex()
    prose = "The quick brown fox; tokens=42 %20 &amp; \\u0041 " * 200
    redactor = Redactor([NASTY, TOKEN, "abcd1234", *(f"secret-value-{i:04d}" for i in range(50))])
    for text in (blob, hexdump, prose):
        assert redactor.text(text) == text


def test_overlapping_secrets_in_an_encoding_leave_no_tail() -> None:
    r = Redactor(["abcd1234", "abcd1234efgh"])
    assert r.text(b"abcd1234efgh".hex()) == REDACTED
    assert r.text(urllib.parse.quote("abcd1234efgh")) == REDACTED


def test_update_adds_and_removes_secrets() -> None:
    r = Redactor()
    assert r.text(TOKEN) == TOKEN
    r.update([TOKEN])
    assert r.text(base64.b64encode(TOKEN.encode()).decode()) == REDACTED
    r.update([])
    assert r.text(TOKEN) == TOKEN


def test_data_scrubs_keys_and_encoded_values() -> None:
    r = Redactor([TOKEN])
    data = {TOKEN: 1, "items": [urllib.parse.quote(TOKEN)], "nested": {"x": TOKEN.encode().hex()}}
    assert r.data(data) == {REDACTED: 1, "items": [REDACTED], "nested": {"x": REDACTED}}


def test_long_secrets_are_caught_raw_and_escaped() -> None:
    pem = "-----BEGIN PRIVATE KEY-----\n" + "A" * 1500 + "/x+\n-----END PRIVATE KEY-----\n"
    r = Redactor([pem])
    assert r.text(f"key: {pem}") == f"key: {REDACTED}"
    assert r.text(json.dumps(pem)) == json.dumps(REDACTED)


# ---- one tripwire: nothing else masks or classifies credentials -----------------------------


def test_only_the_tripwire_uses_the_credential_shape_masks() -> None:
    """`tools.credential_values` holds the patterns; everything else asks the Tripwire."""
    root = Path(__file__).resolve().parents[1]
    users = [
        str(path.relative_to(root))
        for folder in ("app", "tools", "integrations")
        for path in (root / folder).rglob("*.py")
        if re.search(r"from tools\.credential_values import[^\n]*\bmask_", path.read_text())
    ]
    assert users == []


def test_settings_guard_and_tripwire_share_one_list_of_credential_words() -> None:
    from app.core.settings import looks_like_credential
    from tools.redact import TRIPWIRE

    for key in ("apiKey", "client.secret", "SECRETS", "session_id", "max_tokens", "send_key"):
        assert looks_like_credential(key) == TRIPWIRE.is_credential_key(key)
    assert TRIPWIRE.is_credential_key("client.secret")
    assert not TRIPWIRE.is_credential_key("max_tokens")
