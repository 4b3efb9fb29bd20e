"""Recognises credentials by their *name* and by their *shape*: the classifier and the
shape masks behind the tripwire (`tools.redact.Tripwire`), which is how everything else
uses them.

`is_credential_key` is the one list of credential words (settings.json's guard, the
tripwire's data walk, mcp.json's secret mover all ask it). The tripwire masks values
Deskhand knows (its stored secrets); the shape masks here catch the rest: a GitHub token
in an environment variable called `NOTE`, a password in a database URL, `--password=…`
on a command line, a private key pasted into a label. Formats are matched precisely
(prefix, alphabet, length) so that image digests, UUIDs, git SHAs and ordinary base64
are left alone.

Imports nothing heavy: the tripwire uses it on every result.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "REDACTED",
    "is_credential_key",
    "is_secret_name",
    "looks_like_credential_value",
    "mask_command",
    "mask_credential_data",
    "mask_credential_values",
    "mask_env_entries",
]

REDACTED = "[redacted]"

# ---- names -------------------------------------------------------------------------------

_CREDENTIAL_WORDS = (
    "password|passwd|passphrase|pwd|secret|secrets|token|apikey|api_key|private_key|"
    "privatekey|access_key|accesskey|secret_key|client_secret|clientsecret|authorization|"
    "auth|credential|credentials|cookie|session_id|bearer|refresh_token|access_token|id_token"
)
_CREDENTIAL_KEY = re.compile(rf"(?:^|_)(?:{_CREDENTIAL_WORDS})(?:$|_)")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_WORD = re.compile(r"[^a-z0-9]+")


def is_credential_key(key: str) -> bool:
    """True for `password`, `apiKey`, `X-Api-Key`, `access_token`, `client.secret`; false
    for `max_tokens` or `send_key` (whole words only)."""
    normal = _NOT_WORD.sub("_", _CAMEL_BOUNDARY.sub("_", key).lower()).strip("_")
    return bool(_CREDENTIAL_KEY.search(normal))


# ---- shapes ------------------------------------------------------------------------------

# Characters that may not stand right before a token (so "xghp_…" or "task-…" do not count).
_START = r"(?<![A-Za-z0-9_\-])"
_END = r"(?![A-Za-z0-9_\-])"

_TOKEN_FORMATS: tuple[str, ...] = (
    r"gh[pousr]_[A-Za-z0-9]{30,251}",  # GitHub classic / OAuth / app tokens
    r"github_pat_[A-Za-z0-9_]{40,251}",  # GitHub fine-grained tokens
    r"glpat-[A-Za-z0-9_\-]{20,}",  # GitLab personal access tokens
    r"xox[abprs]-[A-Za-z0-9\-]{10,}",  # Slack
    r"(?:AKIA|ASIA)[A-Z0-9]{16}",  # AWS access key ids
    r"sk-ant-[A-Za-z0-9_\-]{20,}",  # Anthropic
    r"sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_\-]*[0-9])(?=[A-Za-z0-9_\-]*[A-Za-z])"
    r"[A-Za-z0-9_\-]{32,}",  # OpenAI (needs letters and digits: not a long slug)
    r"AIza[0-9A-Za-z_\-]{35}",  # Google API keys
    r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}",  # Stripe secret / restricted keys
    r"npm_[A-Za-z0-9]{36}",  # npm
    r"pypi-[A-Za-z0-9_\-]{40,}",  # PyPI upload tokens
    r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",  # JWTs
)
_TOKEN = re.compile(_START + "(?:" + "|".join(_TOKEN_FORMATS) + ")" + _END)

_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
#: The body of a key whose END line is missing (cut output): base64, also with escaped "\n".
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=\s\\:,\-]*")
# scheme://user:password@host — the user and host stay, the password goes.
_URL_PASSWORD = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s:/@?#\"']*:)(?P<secret>[^\s@/?#\"']+)(?=@)"
)
_AUTH_HEADER = re.compile(
    r"(?P<head>\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?"
    r"(?:(?:bearer|basic|token|digest|negotiate|bot)\s+)?)"
    r"(?P<secret>[^\s\"',;]+)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<head>\bbearer\s+)(?P<secret>[A-Za-z0-9._~+/\-]{16,}=*)", re.IGNORECASE)
# aws_secret_access_key = <40 chars>; "SecretAccessKey": "<40 chars>"
_AWS_SECRET = re.compile(
    r"(?P<head>(?:aws_?)?secret_?access_?key[\"']?\s*[:=]\s*[\"']?)"
    r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
    re.IGNORECASE,
)
_NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*"
# NAME=value and --flag=value (the value may be quoted).
_ASSIGNMENT = re.compile(
    rf"(?<![A-Za-z0-9_.\-])(?P<dashes>-{{0,2}})(?P<name>{_NAME})="
    r"(?P<secret>\"[^\"]*\"|'[^']*'|[^\s\"'&;,]+)"
)
# --flag value
_FLAG_VALUE = re.compile(
    rf"(?<![A-Za-z0-9_\-])(?P<dashes>--)(?P<name>{_NAME})(?P<gap>[ \t]+)"
    r"(?P<secret>\"[^\"]*\"|'[^']*'|[^\s\-\"'][^\s]*)"
)
# "password": "value" (JSON) and `password: value` at a line's start (YAML).
_JSON_PAIR = re.compile(
    rf"(?P<q>[\"'])(?P<name>{_NAME})(?P=q)(?P<gap>\s*:\s*)"
    r"(?P<secret>\"(?:[^\"\\]|\\.)*\"|'[^']*')"
)
_YAML_PAIR = re.compile(
    rf"(?m)^(?P<indent>[ \t]*(?:-[ \t]+)?)(?P<name>{_NAME}):(?P<gap>[ \t]+)"
    r"(?P<secret>[^\s#|>](?:[^\n]*[^\s])?)[ \t]*$"
)
# Kubernetes env entries written as JSON: {"name": "DB_PASSWORD", "value": "…"}.
_NAME_VALUE_JSON = re.compile(
    r"(?P<head>\"name\"\s*:\s*\"(?P<name>[^\"]+)\"\s*,\s*\"value\"\s*:\s*)"
    r"(?P<secret>\"(?:[^\"\\]|\\.)*\")"
)

# Credential-looking names whose values are not themselves secret.
_HARMLESS_SUFFIX = re.compile(
    r"(?i)[_\-.](file|path|dir|directory|ttl|length|len|min|max|url|uri|endpoint|type|"
    r"method|mode|timeout|expiry|expires|expiration|kind|enabled|required|backend|provider|"
    r"plugin|name|ref|secret_ref|header|scheme|policy|count)$"
)
# Names `is_credential_key` leaves out but environments use for secrets: SSH_KEY, DB_PASS.
_KEYISH_NAME = re.compile(r"(?i)[_\-.](key|pass|pw|pat)$|^(pass|pw)$")
_HARMLESS_VALUE = re.compile(
    r"(?i)^(|true|false|yes|no|on|off|none|null|nil|\*+|•+|\[redacted\]|<[^>]*>|"
    r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\{\{.*\}\})$"
)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def is_secret_name(name: str) -> bool:
    """A credential-looking name (`password`, `apiKey`, `DB_TOKEN`, `SSH_KEY`) that does not
    name a harmless companion setting (`password_file`, `token_ttl`, `auth_url`)."""
    if _HARMLESS_SUFFIX.search(name):
        return False
    return is_credential_key(name) or bool(_KEYISH_NAME.search(name))


def _secret_value(raw: str) -> bool:
    """False for empty, placeholder, variable-reference and already-masked values."""
    return REDACTED not in raw and not _HARMLESS_VALUE.match(_unquote(raw).strip())


def _requote(raw: str) -> str:
    """The marker in the same quotes as the value it replaces (keeps JSON valid)."""
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return f"{raw[0]}{REDACTED}{raw[0]}"
    return REDACTED


def _named(head: Callable[[re.Match[str]], str]) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        secret = match.group("secret")
        if not is_secret_name(match.group("name")) or not _secret_value(secret):
            return match.group(0)
        return head(match) + _requote(secret)

    return replace


def _keep_head(match: re.Match[str]) -> str:
    if not _secret_value(match.group("secret")):
        return match.group(0)
    return match.group("head") + REDACTED


_STEPS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (_URL_PASSWORD, _keep_head),
    (_AUTH_HEADER, _keep_head),
    (_BEARER, _keep_head),
    (_AWS_SECRET, _keep_head),
    (_NAME_VALUE_JSON, _named(lambda m: m.group("head"))),
    (_JSON_PAIR, _named(lambda m: f"{m['q']}{m['name']}{m['q']}{m['gap']}")),
    (_ASSIGNMENT, _named(lambda m: f"{m['dashes']}{m['name']}=")),
    (_FLAG_VALUE, _named(lambda m: f"{m['dashes']}{m['name']}{m['gap']}")),
    (_YAML_PAIR, _named(lambda m: f"{m['indent']}{m['name']}:{m['gap']}")),
    (_TOKEN, lambda _m: REDACTED),
)
# Cheap pre-check: text without any of these cannot match a step above.
_HINT = re.compile(
    r"[=:@]|-----BEGIN|bearer|--|gh[pousr]_|github_pat_|glpat-|xox|AKIA|ASIA|sk-|sk_|rk_|"
    r"AIza|npm_|pypi-|eyJ",
    re.IGNORECASE,
)


def _mask_private_keys(text: str) -> str:
    """PEM private key blocks → the marker. Searched by hand, not with one lazy regex, so
    that many BEGIN lines without an END cannot make it quadratic."""
    out: list[str] = []
    pos = 0
    ends_left = True
    for begin in _PEM_BEGIN.finditer(text):
        if begin.start() < pos:
            continue
        end = _PEM_END.search(text, begin.end()) if ends_left else None
        if end is None:
            ends_left = False
            stop = _PEM_BODY.match(text, begin.end())
            close = stop.end() if stop else begin.end()
        else:
            close = end.end()
        out += [text[pos : begin.start()], REDACTED]
        pos = close
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def mask_credential_values(text: str) -> str:
    """`text` with every credential-looking substring replaced by "[redacted]": token
    formats, URL passwords (user and host kept), private keys, authorization headers and
    values of credential-named pairs (`TOKEN=…`, `--password=…`, `--token …`, `"secret": …`)."""
    if not text or not _HINT.search(text):
        return text
    if "-----BEGIN" in text:
        text = _mask_private_keys(text)
    for pattern, replace in _STEPS:
        text = pattern.sub(replace, text)
    return text


def looks_like_credential_value(value: str) -> bool:
    """True when `value` is or contains something credential-shaped (see above)."""
    return mask_credential_values(value) != value


def mask_env_entries(entries: Sequence[str]) -> list[str]:
    """`NAME=value` environment entries: the value is masked when the name looks like a
    credential or the value looks like one, whatever the name."""
    masked: list[str] = []
    for entry in entries:
        name, sep, value = entry.partition("=")
        if not sep:
            masked.append(mask_credential_values(entry))
        elif value and _secret_value(value) and is_secret_name(name):
            masked.append(f"{name}={REDACTED}")
        else:
            masked.append(f"{name}={mask_credential_values(value)}")
    return masked


def mask_command(argv: Sequence[str]) -> list[str]:
    """A command's arguments with credentials masked, including a `--password` flag whose
    value is the next argument."""
    masked: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next and _secret_value(arg) and not arg.startswith("-"):
            masked.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        if arg.startswith("-") and "=" not in arg:
            hide_next = is_secret_name(arg.lstrip("-"))
        masked.append(mask_credential_values(arg))
    return masked


def mask_credential_data(value: Any) -> Any:
    """Walks JSON-like data (an inspect result, a Kubernetes object): strings are masked as
    text, string fields with credential-looking names are hidden, and `{"name": X,
    "value": Y}` entries (Kubernetes env) hide Y when X looks like a credential name."""
    if isinstance(value, str):
        return mask_credential_values(value)
    if isinstance(value, list | tuple):
        if value and all(isinstance(item, str) for item in value):
            return mask_command(value)  # maybe a command line: `--token`, then its value
        return [mask_credential_data(item) for item in value]
    if not isinstance(value, dict):
        return value
    named = value.get("name")
    hide_value = isinstance(named, str) and is_secret_name(named)
    out: dict[Any, Any] = {}
    for key, item in value.items():
        named_secret = isinstance(key, str) and is_secret_name(key)
        secret_field = named_secret or (hide_value and key == "value")
        if secret_field and isinstance(item, str) and _secret_value(item):
            out[key] = REDACTED
        else:
            out[key] = mask_credential_data(item)
    return out
