"""The HTTP client the providers talk to a model server with."""

from __future__ import annotations

import asyncio
import os
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.core.providers import make_provider
from app.core.providers.base import ProviderConfig
from app.core.providers.http_client import _tls_for, is_loopback
from tests.fakellm import ScriptedLLM


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
    assert _tls_for("http://192.168.1.20:11434/v1") is True  # the proxy may speak TLS
    # a server on this machine is reached directly, never through the proxy
    assert isinstance(_tls_for("http://127.0.0.1:11434/v1"), ssl.SSLContext)


def test_a_server_on_this_machine_is_never_reached_through_a_proxy(
    llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy from the environment would see the conversation (and the built-in engine's
    token): loopback requests go straight to the server."""
    proxied: list[str] = []

    class Proxy(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            proxied.append(self.path)
            self.send_response(502)
            self.end_headers()

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    proxy = f"http://127.0.0.1:{server.server_address[1]}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    config = ProviderConfig("openai", llm.base_url, "fake-model", api_key="engine-token")

    async def models() -> list[str]:
        provider = make_provider(config)
        try:
            return await provider.list_models()
        finally:
            await provider.aclose()

    try:
        assert asyncio.run(models()) == ["fake-model", "fake-model-large"]
    finally:
        server.shutdown()
    assert proxied == []
    assert is_loopback("http://localhost:1234/v1") and is_loopback("http://[::1]:8080/v1")
    assert not is_loopback("http://192.168.1.20:11434/v1")
