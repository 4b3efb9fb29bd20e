"""Base URLs as people type them, made into what each provider kind expects.

"127.0.0.1:11434", "http://localhost:1234/v1/", "https://api.openai.com/v1/chat/completions"
and "api.anthropic.com/v1" all name a server; the providers append their own paths
(`/chat/completions`, `/models` for OpenAI-compatible servers; `/v1/messages`,
`/v1/models` for Anthropic), so the base must end where those paths begin.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

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


def with_scheme(url: str) -> str:
    """`url` with http:// (https:// for a known cloud host) when it has no scheme."""
    url = url.strip()
    if not url or "://" in url:
        return url
    bare = url.removeprefix("//")
    host = urlsplit(f"http://{bare}").hostname or ""
    return f"{'https' if is_cloud_host(host) else 'http'}://{bare}"


def normalize_base_url(kind: str, url: str) -> str:
    """The base URL a provider of `kind` ("openai" or "anthropic") needs: a scheme, no
    trailing slash, no pasted endpoint; "/v1" added to a bare OpenAI-compatible server and
    removed from an Anthropic one. A URL that cannot be parsed comes back only stripped."""
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
    if kind == "anthropic":
        path = path.removesuffix("/v1")
    elif not path:
        path = "/v1"
    return urlunsplit((parts.scheme.lower(), parts.netloc, path, parts.query, ""))
