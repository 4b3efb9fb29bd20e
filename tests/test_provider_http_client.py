"""The HTTP client the providers talk to a model server with."""

from __future__ import annotations

import os
import ssl

import pytest

from app.core.providers.http_client import _tls_for


def test_a_plain_http_client_skips_the_ca_bundle_but_trusts_no_tls_peer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [n for n in os.environ if n.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)
    plain = _tls_for("http://127.0.0.1:11434/v1")
    assert isinstance(plain, ssl.SSLContext)
    assert plain.verify_mode is ssl.CERT_REQUIRED and plain.check_hostname
    assert plain.cert_store_stats()["x509_ca"] == 0  # any https peer fails verification
    assert _tls_for("https://api.openai.com/v1") is True  # the system's CAs
    monkeypatch.setenv("HTTPS_PROXY", "https://proxy.example:3128")
    assert _tls_for("http://127.0.0.1:11434/v1") is True  # the proxy may speak TLS
