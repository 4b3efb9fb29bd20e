"""Log lines never carry a known secret, in any encoding, including secrets that become
known after logging was configured (loaded in the background, set during the run)."""

from __future__ import annotations

import base64
import json
import logging
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.logging_setup import configure
from app.core.secrets import SecretStore, remember_secret, secret_key


def _value() -> str:
    return f"pw-{uuid.uuid4().hex}/+x"


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[tuple[Path, SecretStore]]:
    from tests.test_secret_loading import GatedKeyring

    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    store = SecretStore(backend=GatedKeyring(open_=True), home=tmp_path / "home")
    configure(store.known_values, log_dir=tmp_path / "logs", console_level=logging.CRITICAL)
    try:
        yield tmp_path / "logs" / "deskhand.log", store
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
            handler.close()
        for handler in saved_handlers:
            root.addHandler(handler)
        root.setLevel(saved_level)


def _flush() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()


def test_encoded_secrets_never_reach_the_log(log_file: tuple[Path, SecretStore]) -> None:
    path, store = log_file
    value = _value()
    store.set(secret_key("caldav", "c1", "password"), value)  # known from now on
    log = logging.getLogger("deskhand.test")
    basic = base64.b64encode(f"alice:{value}".encode()).decode()
    log.warning("request headers: %s", {"Authorization": f"Basic {basic}"})
    log.info("redirect to https://x.example/cb?pw=%s", urllib.parse.quote(value, safe=""))
    log.info("server said %s", json.dumps({"error": f"bad password {value}"}))
    log.info("hexdump %s", value.encode().hex())
    try:
        raise RuntimeError(f"login failed for {value}")
    except RuntimeError:
        log.exception("while logging in")
    _flush()
    text = path.read_text("utf-8")
    assert text.count("[redacted]") >= 5
    for form in (value, basic, urllib.parse.quote(value, safe=""), value.encode().hex()):
        assert form not in text
    assert "login failed for [redacted]" in text  # the traceback is scrubbed too


def test_secrets_learnt_later_are_redacted_from_then_on(
    log_file: tuple[Path, SecretStore],
) -> None:
    path, _store = log_file
    later = _value()
    log = logging.getLogger("deskhand.test")
    remember_secret(later)  # e.g. the background load finished, or an MCP config was read
    log.warning("token in a URL: https://h/?t=%s", urllib.parse.quote(later))
    _flush()
    text = path.read_text("utf-8")
    assert later not in text and urllib.parse.quote(later) not in text
    assert "https://h/?t=[redacted]" in text


def test_bad_format_arguments_still_log_and_are_scrubbed(
    log_file: tuple[Path, SecretStore],
) -> None:
    path, _store = log_file
    value = _value()
    remember_secret(value)
    logging.getLogger("deskhand.test").warning("two %s %s but one arg", value)
    _flush()
    text = path.read_text("utf-8")
    assert "two %s %s but one arg" in text and value not in text
