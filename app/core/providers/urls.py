"""Base URLs as people type them, made into what each provider kind expects.

"127.0.0.1:11434", "http://localhost:1234/v1/", "https://api.openai.com/v1/chat/completions"
and "api.anthropic.com/v1" all name a server; the providers append their own paths
(`/chat/completions`, `/models` for OpenAI-compatible servers; `/v1/messages`,
`/v1/models` for Anthropic), so the base must end where those paths begin.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit, urlunsplit

from .kinds import ADDRESS_KIND, PROVIDER_KINDS

#: Hosts that only speak HTTPS: a URL typed without a scheme gets https:// for these.
CLOUD_HOSTS = (
    "api.openai.com",
    "openrouter.ai",
    "api.anthropic.com",
    "api.groq.com",
    "api.mistral.ai",
    "api.deepseek.com",
    "api.together.xyz",
    "api.fireworks.ai",
    "generativelanguage.googleapis.com",
)
#: Endpoint paths people paste along with the base; the providers add them again.
_ENDPOINTS = ("/chat/completions", "/completions", "/models", "/messages")


def is_cloud_host(host: str) -> bool:
    host = host.lower().rstrip(".")
    return any(host == known or host.endswith("." + known) for known in CLOUD_HOSTS)


#: Name endings of hosts on a home or office network (no certificate expected there).
_LOCAL_SUFFIXES = (".local", ".lan", ".home", ".internal", ".localdomain", ".home.arpa")


def is_local_host(host: str) -> bool:
    """Loopback, private and link-local addresses, "localhost", single-label names and
    names under a local-network suffix: where model servers usually speak plain HTTP."""
    host = host.lower().rstrip(".")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost" or "." not in host or host.endswith(_LOCAL_SUFFIXES)
    return address.is_private or address.is_loopback or address.is_link_local


def with_scheme(url: str) -> str:
    """`url` with a scheme when it has none: http:// for a server on this machine or the
    local network, https:// for anything else (a key must not cross the internet in the
    clear because a scheme was left out; type http:// to mean it)."""
    url = url.strip()
    if not url or "://" in url:
        return url
    bare = url.removeprefix("//")
    host = urlsplit(f"http://{bare}").hostname or ""
    secure = is_cloud_host(host) or not is_local_host(host)
    return f"{'https' if secure else 'http'}://{bare}"


def normalize_base_url(kind: str, url: str) -> str:
    """The base URL a provider of `kind` ("openai" or "anthropic") needs: a scheme, no
    trailing slash, no pasted endpoint; the kind's `bare_path` added to a bare address
    ("/v1" for an OpenAI-compatible server), its `own_path` cut (an Anthropic base ends
    before "/v1"). A URL that cannot be parsed comes back only stripped."""
    found = next((k for k in PROVIDER_KINDS.values() if k.name == kind), None)
    rule = found or PROVIDER_KINDS[ADDRESS_KIND]
    url = with_scheme(url)
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError:
        return url.rstrip("/")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return url.rstrip("/")
    path = parts.path.rstrip("/")
    for endpoint in _ENDPOINTS:
        if path.endswith(endpoint):
            path = path[: -len(endpoint)].rstrip("/")
            break
    if rule.own_path:
        path = path.removesuffix(rule.own_path)
    path = path or rule.bare_path
    return urlunsplit((parts.scheme.lower(), parts.netloc, path, parts.query, ""))


def _ascii_host(host: str) -> str:
    """`host` as it goes on the wire: IDNA (punycode) for a non-ASCII name, so a lookalike
    ("аpi.openai.com" with a Cyrillic а) shows as what it is ("xn--pi-6kc.openai.com")."""
    if host.isascii():
        return host.lower()
    import idna  # httpx's own dependency: it encodes host names the same way

    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError):
        return host.encode("ascii", "backslashreplace").decode("ascii").lower()


def origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) a request to `url` goes to, the host in its ASCII form and the
    port filled in; None for what is not an http(s) URL. Two URLs with the same origin
    reach the same server."""
    try:
        parts = urlsplit(with_scheme(url))
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return None
    host = _ascii_host(parts.hostname.rstrip("."))
    return scheme, host, port or (443 if scheme == "https" else 80)


def display_host(url: str) -> str:
    """`host:port` of `url` for showing to the user: the host in its ASCII (punycode) form,
    the port only when one was given, no user name or password."""
    try:
        parts = urlsplit(with_scheme(url))
        port = parts.port
    except ValueError:
        return url.strip()
    if not parts.hostname:
        return url.strip()
    host = _ascii_host(parts.hostname)
    if ":" in host:  # IPv6
        host = f"[{host}]"
    return f"{host}:{port}" if port is not None else host


def display_origin(url: str) -> str:
    """`scheme://host:port` of `url` for showing to the user (see `display_host`)."""
    found = origin(url)
    if found is None:
        return url.strip()
    return f"{found[0]}://{display_host(url)}"


def display_url(url: str) -> str:
    """`url` for showing to the user: its origin as `display_origin` shows it, then the
    path (no user name, password, query or fragment)."""
    if origin(url) is None:
        return url.strip()
    return display_origin(url) + urlsplit(with_scheme(url)).path
