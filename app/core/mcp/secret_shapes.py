"""Where the secrets are in an MCP server's entry, found by their shape (names like
`API_KEY`, token formats, a URL's password, `--token=…`): pure functions over strings, which
the tripwire's view of mcp.json (`ServerConfig.credential_values`) is built from."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from urllib.parse import unquote

from tools.credential_values import is_secret_name, looks_like_credential_value
from tools.redact import is_credential_key

KEYRING_PREFIX = "keyring:"
#: A secret inside a longer string: `${keyring:mcp/<server>/<name>}`.
PLACEHOLDER = re.compile(r"\$\{keyring:(?P<ref>[^}\s]+)\}")


def is_secret_key(name: str) -> bool:
    """A name whose value is treated as a secret: a credential word (`API_TOKEN`,
    `X-Api-Key`) or a key-ish name the tripwire also knows (`BRAVE_KEY`, `DB_PASS`,
    `--ssh-key`). Either is enough: a harmless value moved to the keyring costs nothing."""
    return is_credential_key(name) or is_secret_name(name)


def credential_values_of(
    env: Mapping[str, str],
    headers: Mapping[str, str],
    args: Sequence[str],
    url: str | None,
    client_secret: str | None,
) -> list[str]:
    """Literal (non-keyring) secrets, for the tripwire: values under credential-looking
    names, credential-looking values under any name, and the secret parts of the
    arguments and the URL."""
    out = []
    for key, value in [*env.items(), *headers.items()]:
        if value.startswith(KEYRING_PREFIX) or not is_literal(value):
            continue
        if is_secret_key(key):
            out.append(value.split(" ", 1)[-1] if key.lower() == "authorization" else value)
        else:
            out += [value[a:b] for a, b in secret_spans(value)]
    for i in secret_args(args):
        out += [args[i][a:b] for a, b in arg_spans(args, i)]
    if url:
        out += [url[a:b] for a, b in secret_spans(url)]
    if client_secret and not client_secret.startswith(KEYRING_PREFIX) and is_literal(client_secret):
        out.append(client_secret)
    return out


# ---- finding secrets by their shape ----------------------------------------------------------

_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://(?P<rest>.*)$", re.DOTALL)
_NAMED_VALUE = re.compile(r"^-{0,2}(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)=(?P<value>.+)$", re.DOTALL)


def is_literal(value: str) -> bool:
    """A value that is really there (not empty, not a reference to one elsewhere)."""
    stripped = value.strip()
    return bool(stripped) and not (
        stripped.startswith(KEYRING_PREFIX)
        or PLACEHOLDER.fullmatch(stripped)
        or re.fullmatch(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", stripped)
    )


def secret_spans(value: str) -> list[tuple[int, int]]:
    """Where the secrets are in one string: a URL's password and credential query values,
    the value of `--token=…` / `API_KEY=…`, or the whole string when it looks like a
    credential (a token format, a private key)."""
    if not is_literal(value):
        return []
    url = _URL.match(value)
    if url:
        spans = _url_spans(value, url.start("rest"))
        if spans:
            return spans
    named = _NAMED_VALUE.match(value)
    if named and not is_literal(named.group("value")):
        return []  # `--token=${keyring:…}`: already a reference
    if named:
        if is_secret_key(named.group("name")):
            return [named.span("value")]
        found = secret_spans(named.group("value"))
        return [(a + named.start("value"), b + named.start("value")) for a, b in found]
    return [(0, len(value))] if looks_like_credential_value(value) else []


def _url_spans(url: str, start: int) -> list[tuple[int, int]]:
    """A URL's secret parts: the password, a token as a path segment (`/s/<token>/sse`,
    as webhook-style servers hand out), and credential values of the query and fragment.
    The scheme and host always stay, so the URL remains a URL."""
    spans: list[tuple[int, int]] = []
    end = len(url)
    for mark in "/?#":
        found = url.find(mark, start)
        if found != -1:
            end = min(end, found)
    authority = url[start:end]
    if "@" in authority:
        userinfo = authority[: authority.rindex("@")]
        if ":" in userinfo and is_literal(userinfo.split(":", 1)[1]):
            spans.append((start + userinfo.index(":") + 1, start + len(userinfo)))
    path_end = len(url)
    for mark in "?#":
        found = url.find(mark, end)
        if found != -1:
            path_end = min(path_end, found)
    offset = end
    for segment in url[end:path_end].split("/"):
        if segment and is_literal(segment) and looks_like_credential_value(unquote(segment)):
            spans.append((offset, offset + len(segment)))
        offset += len(segment) + 1
    fragment = url.find("#", path_end)
    query_end = fragment if fragment != -1 else len(url)
    if url.startswith("?", path_end):
        spans += _pair_spans(url, path_end + 1, query_end)
    if fragment != -1:  # `#access_token=…`, as implicit-flow URLs carry it
        spans += _pair_spans(url, fragment + 1, len(url))
    return spans


def _pair_spans(url: str, offset: int, stop: int) -> list[tuple[int, int]]:
    """The credential values of the `name=value&…` pairs in `url[offset:stop]`."""
    spans: list[tuple[int, int]] = []
    for pair in url[offset:stop].split("&"):
        name, sep, value = pair.partition("=")
        value_start = offset + len(name) + 1
        plain = unquote(value.replace("+", " "))
        if (
            sep
            and is_literal(value)
            and (is_secret_key(unquote(name)) or looks_like_credential_value(plain))
        ):
            spans.append((value_start, value_start + len(value)))
        offset += len(pair) + 1
    return spans


def secret_args(args: Sequence[str]) -> list[int]:
    """Indexes of the arguments holding a secret (in whole or in part)."""
    return [i for i in range(len(args)) if arg_spans(args, i)]


def masked_args(args: Sequence[str]) -> list[str]:
    """The arguments with each secret part (as `secret_args` finds them) replaced by a mark."""
    out = []
    for i, arg in enumerate(args):
        for start, end in sorted(arg_spans(args, i), reverse=True):
            arg = f"{arg[:start]}<secret>{arg[end:]}"
        out.append(arg)
    return out


def arg_spans(args: Sequence[str], i: int) -> list[tuple[int, int]]:
    arg = args[i]
    before = args[i - 1] if i else ""
    if (
        before.startswith("-")
        and "=" not in before
        and is_secret_key(before.lstrip("-"))
        and not arg.startswith("-")
        and is_literal(arg)
    ):
        return [(0, len(arg))]  # `--api-key VALUE`
    return secret_spans(arg)
