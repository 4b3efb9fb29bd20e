"""The HTTP client a provider talks through.

httpx loads the system's CA certificates whenever a client is made (20–40 ms here), also
for a plain-http local model server that never needs them. A client for an `http://` base
URL gets a TLS context with no CA at all instead: it never makes an https request (the
providers send to their base URL only and follow no redirects), and if it ever did, the
request would fail verification rather than go out unchecked. With a proxy configured in
the environment (which may be https) the default context is kept.

A server on this machine (loopback: the built-in engine, a local Ollama) is reached
directly, never through a proxy from the environment: httpx would send loopback requests
there too, with the conversation and the engine's token.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
from urllib.parse import urlsplit

import httpx

_PROXY_VARIABLES = frozenset({"http_proxy", "https_proxy", "all_proxy"})


def new_client(base_url: str, timeout: httpx.Timeout) -> httpx.AsyncClient:
    direct = is_loopback(base_url)
    return httpx.AsyncClient(timeout=timeout, verify=_tls_for(base_url), trust_env=not direct)


def is_loopback(base_url: str) -> bool:
    """Whether the URL names this machine by a loopback address or "localhost"."""
    host = (urlsplit(base_url).hostname or "").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _tls_for(base_url: str) -> ssl.SSLContext | bool:
    plain = base_url.lower().startswith("http://")
    if not plain or (_proxy_configured() and not is_loopback(base_url)):
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, and trusts nobody


def _proxy_configured() -> bool:
    return any(name.lower() in _PROXY_VARIABLES and value for name, value in os.environ.items())
