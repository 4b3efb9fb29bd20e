"""The HTTP client a provider talks through.

httpx loads the system's CA certificates whenever a client is made (20–40 ms here), also
for a plain-http local model server that never needs them. A client for an `http://` base
URL gets a TLS context with no CA at all instead: it never makes an https request (the
providers send to their base URL only and follow no redirects), and if it ever did, the
request would fail verification rather than go out unchecked. With a proxy configured in
the environment (which may be https) the default context is kept.
"""

from __future__ import annotations

import os
import ssl

import httpx

_PROXY_VARIABLES = frozenset({"http_proxy", "https_proxy", "all_proxy"})


def new_client(base_url: str, timeout: httpx.Timeout) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=timeout, verify=_tls_for(base_url))


def _tls_for(base_url: str) -> ssl.SSLContext | bool:
    if not base_url.lower().startswith("http://") or _proxy_configured():
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, and trusts nobody


def _proxy_configured() -> bool:
    return any(name.lower() in _PROXY_VARIABLES and value for name, value in os.environ.items())
