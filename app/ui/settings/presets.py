"""Checks on the base URLs a provider account is given. The servers an account can start
from (`PRESETS`) are rows of the core table, app/core/providers/kinds.py."""

from __future__ import annotations

from urllib.parse import urlsplit

from app.core.providers.kinds import PRESETS, Preset
from app.core.providers.urls import display_host, with_scheme

__all__ = ["PRESETS", "Preset", "host", "preset_for", "same_url", "url_problem"]


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a provider's base URL, or None if it can. A URL without a
    scheme is fine: http:// (https:// for a cloud API) is added."""
    url = url.strip()
    if not url:
        return "Enter the server's base URL, for example http://127.0.0.1:11434/v1."
    parts = urlsplit(with_scheme(url))
    if parts.scheme not in ("http", "https") or not parts.hostname or " " in url:
        return f"“{url}” is not a valid URL: it must look like host:port or http://host:port/path."
    if "@" in parts.netloc:  # user:password@host, or api.openai.com@evil.example
        return "Put the key in the API key field, not in the address."
    try:
        _ = parts.port
    except ValueError:
        return f"“{url}” has an invalid port number."
    return None


def host(url: str) -> str:
    """The `host:port` part of a URL, to name the server in a list: a non-ASCII host name
    in its punycode form, so a lookalike of a known name shows as different."""
    return display_host(url)


def same_url(a: str, b: str) -> bool:
    return with_scheme(a).rstrip("/").lower() == with_scheme(b).rstrip("/").lower()


def preset_for(url: str) -> Preset | None:
    """The preset whose base URL is `url`, if any."""
    return next((p for p in PRESETS if same_url(p.base_url, url)), None)
