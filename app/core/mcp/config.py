"""`mcp.json` in the `mcpServers` format Claude Desktop and Cursor use, and importing one.

Secret values (in `env` or `headers`) may be `keyring:mcp/<server>/<name>`; inside any
string (an argument, the URL, part of a header) a secret may stand as
`${keyring:mcp/<server>/<name>}`. Both are resolved only when a server starts, and only
within the server's own entries (`mcp/<its name>/…`, never its sign-in record): an entry
that names another server's secret, or any other keyring entry, is not valid. Importing
a config moves every secret-looking value to the keyring: values under credential-looking
names, and values that look like credentials whatever their name (token formats, URLs with
a password, private keys, `--token=…` / `--api-key …` arguments), and an OAuth client
secret; a server one of whose secrets the keyring refuses is not imported at all.

Each entry is checked on its own (`read_config`): a bad entry is reported with its name and
field, and the others still load. Imports nothing heavier than pydantic.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.core.mcp.desktop import claude_desktop_config_path
from app.core.mcp.secret_shapes import (
    KEYRING_PREFIX,
    PLACEHOLDER,
    arg_spans,
    credential_values_of,
    is_literal,
    is_secret_key,
    masked_args,
    secret_args,
    secret_spans,
)
from app.core.visible import visible

log = logging.getLogger(__name__)

Transport = Literal["stdio", "http", "sse"]
#: Every way a config may name a transport (Claude Desktop, Claude Code, Cursor, VS Code,
#: Cline, Windsurf), lower-cased, and what it means here.
TRANSPORT_NAMES: dict[str, Transport] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
    "shttp": "http",
    "sse": "sse",
}
TIMEOUT_RANGE = (1.0, 3600.0)
DEFAULT_TIMEOUT = 120.0


class McpConfigError(Exception):
    """mcp.json (or a config being imported) cannot be used; the message says why."""


@dataclass(frozen=True)
class EntryProblem:
    """Why one `mcpServers` entry cannot be used. `field` is where (`timeout`, `env.PORT`,
    `args[2]`), None for the entry as a whole; `message` is the whole sentence, naming the
    server. Values that may hold a secret are never quoted in it."""

    name: str
    field: str | None
    #: What is wrong, without the server's name: "timeout must be … (got 'fast')".
    detail: str

    @property
    def message(self) -> str:
        return f"server {self.name!r}: {self.detail}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "field": self.field, "message": self.message}


class EntryError(McpConfigError):
    """One entry is invalid; `problems` lists every bad field."""

    def __init__(self, problems: list[EntryProblem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


AuthKind = Literal["oauth", "client_credentials", "none"]
#: How a client-credentials client proves itself at the token endpoint.
TokenAuthMethod = Literal["client_secret_basic", "client_secret_post", "private_key_jwt"]


@dataclass(frozen=True)
class AuthConfig:
    """How Deskhand signs in to a remote server (the `auth` object of an mcp.json entry).

    "oauth" (the default for remote servers): OAuth 2.1 on demand — when the server answers
    401, the user signs in through the system browser (`client_id`/`client_secret` for a
    client registered beforehand, otherwise dynamic registration or `client_metadata_url`).
    "client_credentials": machine to machine, no person involved (`client_id` with
    `client_secret`, or with `private_key_file` for `private_key_jwt`). "none": never."""

    kind: AuthKind = "oauth"
    client_id: str | None = None
    client_secret: str | None = None
    method: TokenAuthMethod | None = None
    private_key_file: str | None = None
    signing_algorithm: str = "ES256"
    scope: str | None = None
    issuer: str | None = None
    client_metadata_url: str | None = None


@dataclass(frozen=True)
class ServerConfig:
    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    disabled: bool = False
    timeout: float = DEFAULT_TIMEOUT
    auth: AuthConfig = field(default_factory=AuthConfig)

    @classmethod
    def from_json(cls, name: str, raw: Any) -> ServerConfig:
        """One `mcpServers` entry, checked; raises EntryError naming every bad field."""
        found = check_entry(name, raw)
        if isinstance(found, ServerConfig):
            return found
        raise EntryError(found)

    def resolved(self, get_secret: SecretGetter) -> ServerConfig:
        """This config as the server must get it: every `keyring:` value and `${keyring:…}`
        placeholder (env, headers, arguments, URL) replaced by the stored secret. Raises
        McpConfigError when a referenced secret does not exist, or is not one of this
        server's own (then nothing is read)."""
        for ref in (
            *secret_refs(list(self.args)),
            *secret_refs(dict(self.env)),
            *secret_refs(dict(self.headers)),
            *secret_refs(self.url or ""),
            *secret_refs(self.auth.client_secret or ""),
        ):
            if not is_own_ref(self.name, ref):
                raise McpConfigError(_not_own(self.name, "a value", ref))
        return replace(
            self,
            args=tuple(resolve_args(self.args, get_secret)),
            env=resolve_secrets(self.env, get_secret),
            headers=resolve_secrets(self.headers, get_secret),
            url=resolve_text("url", self.url, get_secret) if self.url else self.url,
            auth=replace(
                self.auth,
                client_secret=resolve_text(
                    "auth.client_secret", self.auth.client_secret, get_secret
                ),
            )
            if self.auth.client_secret
            else self.auth,
        )

    def fingerprint(self) -> str:
        """The server's identity for trust (app.core.sources.mcp_server_fingerprint): the
        program with its arguments and environment keys, or the URL's origin. No secret is
        part of it (it is kept on disk, and a hash of a weak token can be guessed): not the
        environment's or headers' values, not the URL past its origin, and each secret part
        of the arguments (`--token=…`, `--api-key VALUE`) stands as a mark. A rotated token
        is the same server, as for the environment; the tools cache, which must not outlive
        a token, is keyed apart (app.core.mcp.cached.entry_hashes)."""
        from app.core.sources import mcp_server_fingerprint

        return mcp_server_fingerprint(
            command=self.command,
            args=masked_args(self.args),
            env=self.env,
            url=self.url,
            cwd=self.cwd,
        )

    def credential_values(self) -> list[str]:
        """Literal (non-keyring) secrets, for the tripwire: values under credential-looking
        names, credential-looking values under any name, and the secret parts of the
        arguments and the URL."""
        return credential_values_of(
            self.env, self.headers, self.args, self.url, self.auth.client_secret
        )


# ---- one entry, checked on its own ----------------------------------------------------------


def _scalar_text(value: Any) -> Any:
    """JSON numbers and booleans where text is expected become their JSON text (`"PORT":
    8080`, `["--port", 8080]` are common and meant as text); anything else is left to fail."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return value


_Text = Annotated[str, BeforeValidator(_scalar_text)]


class AuthEntry(BaseModel):
    """The typed shape of an entry's `auth` object (camelCase names accepted too)."""

    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=True)

    type: AuthKind = "oauth"
    client_id: str | None = Field(default=None, alias="clientId")
    client_secret: _Text | None = Field(default=None, alias="clientSecret")
    token_endpoint_auth_method: TokenAuthMethod | None = Field(
        default=None, alias="tokenEndpointAuthMethod"
    )
    private_key_file: str | None = Field(default=None, alias="privateKeyFile")
    signing_algorithm: Literal["ES256", "ES384", "ES512", "RS256", "RS384", "RS512"] = Field(
        default="ES256", alias="signingAlgorithm"
    )
    scope: str | None = None
    issuer: str | None = None
    client_metadata_url: str | None = Field(default=None, alias="clientMetadataUrl")

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_unset(cls, raw: Any) -> Any:
        return {k: v for k, v in raw.items() if v is not None} if isinstance(raw, dict) else raw

    @field_validator("client_metadata_url")
    @classmethod
    def _https_document(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value.strip())
        if parts.scheme != "https" or not parts.netloc or parts.path in {"", "/"}:
            raise PydanticCustomError("metadata_url", "not an https document address")
        return value.strip()

    @field_validator("issuer")
    @classmethod
    def _issuer_address(cls, value: str | None) -> str | None:
        if value is not None and urlsplit(value).scheme not in {"http", "https"}:
            raise PydanticCustomError("web_address", "not an http(s) address")
        return value

    def config(self) -> AuthConfig:
        return AuthConfig(
            kind=self.type,
            client_id=self.client_id,
            client_secret=self.client_secret,
            method=self.token_endpoint_auth_method,
            private_key_file=self.private_key_file,
            signing_algorithm=self.signing_algorithm,
            scope=self.scope,
            issuer=self.issuer,
            client_metadata_url=self.client_metadata_url,
        )


class ServerEntry(BaseModel):
    """The typed shape of one `mcpServers` entry. Keys other tools add (`autoApprove`,
    `alwaysAllow`, `description`, …) are ignored; a JSON `null` means "not set"."""

    model_config = ConfigDict(strict=True, extra="ignore", populate_by_name=True)

    type: str | None = None
    transport: str | None = None
    command: str | None = None
    args: list[_Text] = Field(default_factory=list)
    env: dict[str, _Text] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    server_url: str | None = Field(default=None, alias="serverUrl")  # Windsurf
    headers: dict[str, _Text] = Field(default_factory=dict)
    disabled: bool = False
    timeout: float = Field(
        default=DEFAULT_TIMEOUT, ge=TIMEOUT_RANGE[0], le=TIMEOUT_RANGE[1], allow_inf_nan=False
    )
    #: Checked on its own by `_auth` (one clear message rather than one per union member).
    auth: Any = None

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_unset(cls, raw: Any) -> Any:
        return {k: v for k, v in raw.items() if v is not None} if isinstance(raw, dict) else raw

    @field_validator("type", "transport")
    @classmethod
    def _known_transport(cls, value: str | None) -> str | None:
        if value is not None and value.strip().lower() not in TRANSPORT_NAMES:
            raise PydanticCustomError("transport", "unknown transport")
        return value

    @field_validator("command")
    @classmethod
    def _some_command(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise PydanticCustomError("empty", "empty")
        return value

    @field_validator("url", "server_url")
    @classmethod
    def _web_address(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value.strip())
        if parts.scheme.lower() not in {"http", "https"} or not parts.netloc:
            raise PydanticCustomError("web_address", "not an http(s) address")
        return value.strip()


def check_entry(name: str, raw: Any) -> ServerConfig | list[EntryProblem]:
    """One `mcpServers` entry as a ServerConfig, or every reason it cannot be used."""
    if not str(name).strip():
        return [EntryProblem(name, None, "the server has an empty name; give it a name")]
    hidden = _hidden_character(str(name))
    if hidden is not None:
        return [
            EntryProblem(
                name,
                None,
                f"the name holds an invisible or control character ({hidden}); "
                "type the name again without it",
            )
        ]
    if not isinstance(raw, dict):
        what = "an object with a 'command' (a local server) or a 'url' (a remote one)"
        return [EntryProblem(name, None, f"must be {what} (got {_kind(raw)})")]
    foreign = [
        EntryProblem(name, where, _not_own(name, where, ref))
        for where, ref in _refs_by_field(raw)
        if not is_own_ref(name, ref)
    ]
    try:
        entry = ServerEntry.model_validate(raw)
    except ValidationError as exc:
        return [_problem(name, error) for error in exc.errors(include_url=False)] + foreign
    return foreign or _build(name, raw, entry)


def _refs_by_field(raw: dict[str, Any]) -> list[tuple[str, str]]:
    """Each keyring reference of an entry with where it is (`env.TOKEN`, `args[2]`, `url`)."""
    found: list[tuple[str, str]] = []
    for key, value in raw.items():
        if isinstance(value, dict):
            found += [(f"{key}.{k}", ref) for k, v in value.items() for ref in secret_refs(v)]
        elif isinstance(value, list):
            found += [(f"{key}[{i}]", ref) for i, v in enumerate(value) for ref in secret_refs(v)]
        else:
            found += [(str(key), ref) for ref in secret_refs(value)]
    return found


def _not_own(name: str, where: str, ref: str) -> str:
    return (
        f"{where} refers to the keyring entry {ref!r}, which is not one of its own "
        f"({server_keys(name)}…); a server may only use the secrets stored for it (it belongs "
        "to another server or to something else). Enter the secret itself; it moves to the "
        "keyring"
    )


#: Characters a server name may not hold: controls, invisible format characters (bidi
#: overrides, zero-width joiners), lone surrogates, line and paragraph separators.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _hidden_character(name: str) -> str | None:
    """The first character of `name` that cannot be seen or typed, as `U+XXXX`."""
    for ch in name:
        if unicodedata.category(ch) in _HIDDEN_CATEGORIES:
            return f"U+{ord(ch):04X}"
    return None


def _build(name: str, raw: dict[str, Any], entry: ServerEntry) -> ServerConfig | list[EntryProblem]:
    def problem(where: str | None, text: str) -> list[EntryProblem]:
        return [EntryProblem(name, where, text)]

    named = [k for k in (entry.type, entry.transport) if k is not None]
    kinds = {TRANSPORT_NAMES[k.strip().lower()] for k in named}
    if len(kinds) > 1:
        return problem("type", "'type' and 'transport' name different transports; keep one")
    kind = kinds.pop() if kinds else None
    where = "type" if entry.type is not None else "transport"
    url = entry.url or entry.server_url
    common: dict[str, Any] = {"disabled": entry.disabled, "timeout": float(entry.timeout)}
    if entry.command is not None and kind in (None, "stdio"):
        if entry.auth is not None:
            return problem("auth", "auth applies only to remote servers (with a 'url')")
        return ServerConfig(
            name,
            "stdio",
            command=entry.command,
            args=tuple(entry.args),
            env=dict(entry.env),
            cwd=entry.cwd,
            **common,
        )
    if kind == "stdio":
        return problem("command", f"{where} is {raw.get(where)!r} but there is no 'command' to run")
    if url is None:
        if kind is not None:
            return problem("url", f"{where} is {raw.get(where)!r} but there is no 'url'")
        return problem(None, "needs either 'command' (a local server) or 'url' (a remote one)")
    if kind is None:
        kind = "sse" if url.rstrip("/").endswith("/sse") else "http"
    auth = _auth(name, entry.auth)
    if isinstance(auth, list):
        return auth
    return ServerConfig(name, kind, url=url, headers=dict(entry.headers), auth=auth, **common)


def _auth(name: str, raw: Any) -> AuthConfig | list[EntryProblem]:
    """The entry's sign-in settings, or every reason they cannot be used."""
    if raw is None:
        return AuthConfig()
    if raw in ("none", "oauth"):
        return AuthConfig(kind=raw)
    if not isinstance(raw, dict):
        return [EntryProblem(name, "auth", f"auth must be {_MUST_BE['auth']} (got {_kind(raw)})")]
    try:
        entry = AuthEntry.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        return [_problem(name, {**e, "loc": ("auth", *e["loc"])}) for e in errors]
    found = _auth_problem(entry.config())
    if isinstance(found, str):
        where, text = found.split(": ", 1)
        return [EntryProblem(name, where, text)]
    return found


def _auth_problem(auth: AuthConfig) -> AuthConfig | str:
    """`auth` made complete, or "<field>: <what is wrong>"."""
    if auth.kind == "client_credentials":
        found = _client_credentials(auth)
        if isinstance(found, AuthConfig) and not found.issuer:
            return (
                "auth.issuer: client credentials need the issuer (the address of the "
                "authorization server that gave you the client id), so that the secret is "
                "only ever sent there and never to a server the MCP server points to"
            )
        return found
    if auth.kind == "oauth" and auth.method == "private_key_jwt":
        return "auth.token_endpoint_auth_method: private_key_jwt is for client_credentials"
    if auth.kind == "oauth" and auth.client_secret and not auth.issuer:
        return (
            "auth.issuer: a client registered beforehand with a client_secret needs the "
            "issuer (the authorization server that registered it), so that the secret is only "
            "ever sent there"
        )
    return auth


def _client_credentials(auth: AuthConfig) -> AuthConfig | str:
    if not auth.client_id:
        return "auth.client_id: client credentials need the client_id the server gave you"
    if auth.method == "private_key_jwt" or (auth.private_key_file and not auth.client_secret):
        if not auth.private_key_file:
            return "auth.private_key_file: private_key_jwt needs the PEM file of your key"
        return AuthConfig(**{**auth.__dict__, "method": "private_key_jwt"})
    if not auth.client_secret:
        return "auth.client_secret: client credentials need a client_secret (or a private_key_file)"
    return AuthConfig(**{**auth.__dict__, "method": auth.method or "client_secret_basic"})


_TRANSPORTS_IN_WORDS = "one of stdio, http (also written streamable-http) or sse"
#: What each field must be, in plain words.
_MUST_BE = {
    "type": _TRANSPORTS_IN_WORDS,
    "transport": _TRANSPORTS_IN_WORDS,
    "command": "the program to run, as text",
    "args": "a list of text arguments",
    "env": 'an object of NAME: "value" pairs',
    "headers": 'an object of Header-Name: "value" pairs',
    "cwd": "a folder path, as text",
    "url": "an http:// or https:// address",
    "serverUrl": "an http:// or https:// address",
    "disabled": "true or false",
    "timeout": f"a number of seconds between {TIMEOUT_RANGE[0]:g} and {TIMEOUT_RANGE[1]:g}",
    "auth": 'an object like {"type": "oauth"}, or "none"',
}
#: What each field of `auth` must be, in plain words.
_AUTH_MUST_BE = {
    "type": "one of oauth, client_credentials or none",
    "token_endpoint_auth_method": (
        "one of client_secret_basic, client_secret_post or private_key_jwt"
    ),
    "signing_algorithm": "one of ES256, ES384, ES512, RS256, RS384, RS512",
    "client_metadata_url": "an https:// address of a document (not a bare host)",
    "issuer": "an http:// or https:// address",
}
_AUTH_ALIASES = {
    "clientId": "client_id",
    "clientSecret": "client_secret",
    "tokenEndpointAuthMethod": "token_endpoint_auth_method",
    "privateKeyFile": "private_key_file",
    "signingAlgorithm": "signing_algorithm",
    "clientMetadataUrl": "client_metadata_url",
}
#: Fields whose value is quoted in a message; the others may hold a secret.
_QUOTED = {"type", "transport", "disabled", "timeout"}
_AUTH_CHOICES = {"type", "token_endpoint_auth_method", "signing_algorithm"}


def _problem(name: str, error: Any) -> EntryProblem:
    loc = [str(part) for part in error["loc"]]
    top = loc[0] if loc else ""
    got = _got(top, error["input"])
    if top in {"args", "env", "headers"} and len(loc) > 1:
        if top == "args":
            where, text = f"args[{loc[1]}]", f"argument {int(loc[1]) + 1} must be text"
        else:
            what = "environment variable" if top == "env" else "header"
            where, text = f"{top}.{loc[1]}", f"the {what} {loc[1]!r} must have a text value"
        return EntryProblem(name, where, f"{text} (got {got})")
    if top == "auth" and len(loc) > 1:
        sub = _AUTH_ALIASES.get(loc[1], loc[1])
        if error["type"] == "extra_forbidden":
            return EntryProblem(name, f"auth.{sub}", f"auth has an unknown field {sub!r}")
        must = _AUTH_MUST_BE.get(sub, "text")
        # only a choice among fixed words is quoted: an address field may hold a secret
        # typed into the wrong box
        got = _got("type", error["input"]) if sub in _AUTH_CHOICES else _kind(error["input"])
        return EntryProblem(name, f"auth.{sub}", f"auth.{sub} must be {must} (got {got})")
    if error["type"] == "empty":
        return EntryProblem(name, top, f"{top} must not be empty")
    if error["type"] == "web_address":
        return EntryProblem(name, top, f"{top} must be {_MUST_BE[top]}")
    must = _MUST_BE.get(top, "valid")
    return EntryProblem(name, top or None, f"{top} must be {must} (got {got})")


def _got(field_name: str, value: Any) -> str:
    if field_name in _QUOTED and isinstance(value, str | int | float | bool):
        shown = visible(json.dumps(value, ensure_ascii=False), keep_newlines=False)
        if isinstance(value, str):
            shown = repr(visible(value, keep_newlines=False))
        return shown if len(shown) <= 40 else shown[:39] + "…"
    return _kind(value)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


# ---- the whole file -------------------------------------------------------------------------


@dataclass
class McpConfig:
    """What mcp.json holds: the usable servers, and why each other entry is not usable.
    `names` is every entry's name in file order (good and bad)."""

    servers: list[ServerConfig] = field(default_factory=list)
    problems: list[EntryProblem] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def problems_of(self, name: str) -> list[EntryProblem]:
        return [p for p in self.problems if p.name == name]

    def server(self, name: str) -> ServerConfig | None:
        return next((s for s in self.servers if s.name == name), None)


def parse_servers(block: Mapping[str, Any]) -> McpConfig:
    """Check every entry of an `mcpServers` object on its own."""
    config = McpConfig()
    for name, raw in block.items():
        config.names.append(name)
        found = check_entry(name, raw)
        if isinstance(found, ServerConfig):
            config.servers.append(found)
        else:
            config.problems += found
    return config


def read_config(path: Path) -> McpConfig:
    """mcp.json, each entry checked on its own (an empty McpConfig when the file does not
    exist). Raises McpConfigError only when the file as a whole cannot be used (unreadable,
    not JSON, `mcpServers` not an object)."""
    return parse_servers(read_servers_block(path))


def read_servers_block(path: Path) -> dict[str, Any]:
    """The raw `mcpServers` object of a JSON file ({} when the file does not exist)."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        raise McpConfigError(f"{path} is not UTF-8 text") from None
    except OSError as exc:
        raise McpConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpConfigError(
            f"{path} is not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise McpConfigError(f"{path} is nested too deeply to read") from None
    if not isinstance(data, dict):
        raise McpConfigError(f"{path}: expected a JSON object (got {_kind(data)})")
    servers = data.get("mcpServers", {})
    if servers is None:
        return {}
    if not isinstance(servers, dict):
        raise McpConfigError(f"{path}: mcpServers must be an object (got {_kind(servers)})")
    return servers


def load_config(path: Path) -> list[ServerConfig]:
    """The usable servers of mcp.json; each unusable entry is left out and its problem
    logged (once). Prefer `read_config`, which also says what is wrong with the others."""
    config = read_config(path)
    for problem in config.problems:
        if (path, problem) not in _logged:  # callers may read the file again and again
            _logged.add((path, problem))
            log.warning("mcp.json: %s", problem.message)
    return config.servers


_logged: set[tuple[Path, EntryProblem]] = set()


def write_servers_block(path: Path, servers: Mapping[str, Any]) -> None:
    """Atomically rewrite `path`, keeping any other top-level keys; mode 0600."""
    data: dict[str, Any] = {}
    if path.exists():
        try:
            loaded = json.loads(path.read_text("utf-8") or "{}")
            data = loaded if isinstance(loaded, dict) else {}
        except (OSError, json.JSONDecodeError):
            data = {}
    data["mcpServers"] = dict(servers)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".mcp-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---- secrets --------------------------------------------------------------------------------

SecretGetter = Callable[[str], "str | None"]


def keyring_key(server: str, name: str) -> str:
    """The keyring username a secret of this server lives under (`mcp/<server>/<name>`)."""
    return f"mcp/{_key_part(server)}/{_key_part(name)}"


def server_keys(server: str) -> str:
    """What every keyring key of `server`'s secrets starts with (`mcp/<server>/`)."""
    return f"mcp/{_key_part(server)}/"


def is_own_ref(server: str, ref: str) -> bool:
    """Whether a reference names one of `server`'s own secrets: under `mcp/<server>/`, one
    part, and not its sign-in record (tokens and client secret, for Deskhand alone)."""
    prefix = server_keys(server)
    tail = ref[len(prefix) :]
    return ref.startswith(prefix) and bool(tail) and "/" not in tail and tail != "oauth"


def _key_part(text: str) -> str:
    """One part of a keyring key, reversible so two names never share a key ("a/b", "a b",
    "a_b" and "a " differ): `%`, `/`, whitespace (also at either end) and every character
    that is not printable (controls, NUL, format characters, which a keyring may refuse)
    are percent-escaped as their UTF-8 bytes."""
    if not text:
        return "_"
    return "".join(_escaped(ch) for ch in text)


def _escaped(ch: str) -> str:
    if ch not in "%/" and ch.isprintable() and not ch.isspace():
        return ch
    return "".join(f"%{byte:02X}" for byte in ch.encode("utf-8", "surrogatepass"))


def resolve_secrets(values: Mapping[str, str], get_secret: SecretGetter) -> dict[str, str]:
    """Replace `keyring:<key>` values (and `${keyring:<key>}` inside values) by the stored
    secret; a missing one is an error."""
    out: dict[str, str] = {}
    for key, value in values.items():
        if value.startswith(KEYRING_PREFIX):
            out[key] = _stored(key, value[len(KEYRING_PREFIX) :], get_secret)
        else:
            out[key] = resolve_text(key, value, get_secret)
    return out


def resolve_text(what: str, text: str, get_secret: SecretGetter) -> str:
    """`text` with every `${keyring:<key>}` replaced by the stored secret."""
    return PLACEHOLDER.sub(lambda m: _stored(what, m.group("ref"), get_secret), text)


def resolve_args(args: tuple[str, ...] | list[str], get_secret: SecretGetter) -> list[str]:
    """A stdio server's arguments with their `${keyring:<key>}` placeholders resolved."""
    return [resolve_text(f"argument {i + 1}", arg, get_secret) for i, arg in enumerate(args)]


def _stored(what: str, ref: str, get_secret: SecretGetter) -> str:
    secret = get_secret(ref)
    if secret is None:
        raise McpConfigError(
            f"{what} refers to the keyring entry {ref!r}, which does not exist; "
            f"store it in the keyring (service 'deskhand', username {ref!r})"
        )
    return secret


# ---- importing Claude Desktop's config -------------------------------------------------------


@dataclass
class ImportReport:
    source: Path
    added: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    moved_to_keyring: list[str] = field(default_factory=list)
    #: Always empty: a server whose secret the keyring refuses is not imported (it is in
    #: `invalid`), so no secret is ever kept in mcp.json. Kept for `mcp import --json`.
    kept_in_file: list[str] = field(default_factory=list)
    #: Entries of the source that are not imported, and why: not valid, or a secret of
    #: theirs could not be stored in the keyring (then nothing was written for them).
    invalid: list[EntryProblem] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "added": self.added,
            "skipped": self.skipped,
            "moved_to_keyring": self.moved_to_keyring,
            "kept_in_file": self.kept_in_file,
            "invalid": [p.to_json() for p in self.invalid],
        }


SecretSetter = Callable[[str, str], None]


def import_servers(
    target: Path,
    source: Path | None = None,
    *,
    set_secret: SecretSetter | None = None,
    overwrite: bool = False,
) -> ImportReport:
    """Merge the `mcpServers` block of `source` (default: Claude Desktop's config) into
    `target`. Existing servers are kept unless `overwrite`. With `set_secret`, every
    secret-looking value moves to the keyring and is replaced by a reference; a server one
    of whose secrets the keyring refuses is not imported (never written with the secret in
    clear). Invalid and refused entries are left out and listed in `report.invalid`; when no
    entry is valid, nothing changes and EntryError says why."""
    source = source or claude_desktop_config_path()
    if not source.exists():
        raise McpConfigError(f"{source} does not exist")
    return import_block(
        target, read_servers_block(source), source, set_secret=set_secret, overwrite=overwrite
    )


def import_block(
    target: Path,
    incoming: dict[str, Any],
    source: Path,
    *,
    set_secret: SecretSetter | None = None,
    delete_secret: Callable[[str], None] | None = None,
    overwrite: bool = False,
) -> ImportReport:
    """`import_servers` for an `mcpServers` block already in memory (pasted text never
    goes to disk); `source` only names where it came from in the report.

    An imported entry brings its secrets as values: one that refers to the keyring (even
    under its own name, as an entry replacing a configured server could) is not imported,
    so a config from elsewhere never reaches a secret stored here. A new secret never
    overwrites one mcp.json refers to; with `delete_secret`, those stored for an entry
    the keyring then refuses are deleted again."""
    checked = parse_servers(incoming)  # before changing anything
    problems = list(checked.problems)
    usable = {server.name for server in checked.servers}
    for name in sorted(usable):
        refs = _refs_by_field(incoming[name])
        if refs:
            usable.discard(name)
            problems += [
                EntryProblem(name, where, _imported_ref(where, ref)) for where, ref in refs
            ]
    current = read_servers_block(target)
    names: dict[str, Any] = dict(current)
    for name in [n for n in incoming if n in usable]:
        twin = case_twin(name, names)
        if twin is not None and name not in current:
            usable.discard(name)
            problems.append(EntryProblem(name, "name", case_twin_detail(twin)))
        names[name] = None
    if problems and not usable:
        raise EntryError(problems)
    taken = frozenset(secret_refs(current))
    report = ImportReport(source, invalid=problems)
    for name, raw in incoming.items():
        if name not in usable:
            continue
        if name in current and not overwrite:
            report.skipped.append(name)
            continue
        entry = json.loads(json.dumps(raw))
        if set_secret is not None:
            try:
                report.moved_to_keyring += move_secrets(
                    name, entry, set_secret, taken=taken, delete_secret=delete_secret
                )
            except SecretNotStored as refused:
                report.invalid.append(refused.problem)
                continue
        current[name] = entry
        report.added.append(name)
    if report.added:
        write_servers_block(target, current)
    return report


def case_twin(name: str, servers: Mapping[str, Any]) -> str | None:
    """Another server whose name differs from `name` only by upper/lower case: their
    secrets would share keys where the keyring ignores case (the encrypted-file store)."""
    return next((k for k in servers if k != name and k.lower() == name.lower()), None)


def case_twin_detail(twin: str) -> str:
    return (
        f"another server is called {twin!r}: names that differ only by upper/lower case "
        "would share their secrets in the keyring; choose another name"
    )


def _imported_ref(where: str, ref: str) -> str:
    return (
        f"{where} refers to the keyring entry {ref!r}; an imported server cannot use secrets "
        "already stored here, so it was not imported. Give the secret itself; it moves to "
        "the keyring"
    )


class SecretNotStored(EntryError):
    """A secret of the server could not be stored in the keyring (nothing was written for
    the server, so the secret is never kept in clear)."""

    def __init__(self, problem: EntryProblem) -> None:
        super().__init__([problem])
        self.problem = problem


class _Mover:
    """Moves one server's secrets to the keyring, noting what moved; raises SecretNotStored
    when one cannot be stored (the server is then not written at all). A key in `taken` (a
    reference the entry still holds) is never overwritten: the new secret gets another."""

    def __init__(self, server: str, set_secret: SecretSetter, taken: frozenset[str]) -> None:
        self.server, self.set_secret = server, set_secret
        #: Compared without case: the encrypted-file store lower-cases its keys.
        self.taken = {key.lower() for key in taken}
        self.moved: list[str] = []
        #: The keys written so far (to delete again when a later one is refused).
        self.written: list[str] = []

    def _free_key(self, name: str) -> str:
        ref = keyring_key(self.server, name)
        if ref == keyring_key(self.server, "oauth"):  # the server's sign-in record lives there
            ref = keyring_key(self.server, f"{name}_value")
        base, n = ref, 1
        while ref.lower() in self.taken:
            n += 1
            ref = f"{base}_{n}"
        self.taken.add(ref.lower())
        return ref

    def store(self, where: str, name: str, value: str) -> str:
        """The reference to `value`, once stored."""
        ref = self._free_key(name)
        try:
            self.set_secret(ref, value)
        except Exception as exc:
            reason = _plain_reason(exc, value)
            log.warning(
                "could not move %s of MCP server %r to the keyring: %s", where, self.server, reason
            )
            detail = (
                f"could not store its secret in the keyring: {reason}; nothing was written for it"
            )
            raise SecretNotStored(EntryProblem(self.server, where, detail)) from None
        self.written.append(ref)
        self.moved.append(f"{self.server}.{where}")
        return ref

    def replace_spans(self, where: str, name: str, text: str, spans: list[tuple[int, int]]) -> str:
        """`text` with each secret span replaced by a `${keyring:…}` placeholder."""
        for n, (a, b) in enumerate(sorted(spans, reverse=True)):
            key = name if len(spans) == 1 else f"{name}_{len(spans) - n}"
            ref = self.store(where, key, text[a:b])
            text = f"{text[:a]}${{{KEYRING_PREFIX}{ref}}}{text[b:]}"
        return text


_STORE_PREFIX = re.compile(r"^could not save '[^']*' to the [^:]{1,40}: (?=.)", re.IGNORECASE)


def _plain_reason(exc: Exception, secret: str) -> str:
    """Why the keyring refused, in its own words (the store's errors are written for the
    user), on one line, never quoting the secret."""
    text = str(exc).replace(secret, "…") if secret else str(exc)
    text = visible(" ".join(text.split()), keep_newlines=False).strip().rstrip(".")
    text = _STORE_PREFIX.sub("", text)  # "Could not save '<key>' to the system keyring: "
    if not text:
        return "the keyring refused it"
    text = text if len(text) <= 300 else text[:299] + "…"
    return text[0].lower() + text[1:] if text[:2] != text[:2].upper() else text


def move_secrets(
    server: str,
    entry: dict[str, Any],
    set_secret: SecretSetter,
    *,
    token: str | None = None,
    taken: frozenset[str] = frozenset(),
    delete_secret: Callable[[str], None] | None = None,
) -> list[str]:
    """The one secret mover, for typed, pasted and imported entries alike: move the
    secrets of one entry (changed in place) to the keyring — values under credential-looking
    names, credential-looking values and parts of values under any name, `--token=…` /
    `--api-key VALUE` arguments, a URL's password, an OAuth client secret, and an access
    `token` (sent as `Authorization: Bearer …`). Returns where each was (`server.env.NAME`).
    A key in `taken` (what mcp.json refers to now) is never written: a refused save leaves
    the secrets in force as they were. Raises SecretNotStored when the keyring refuses one;
    with `delete_secret`, the ones stored before it are deleted again (no orphans)."""
    mover = _Mover(server, set_secret, taken | frozenset(secret_refs(entry)))
    try:
        _move(mover, entry, token)
    except SecretNotStored:
        if delete_secret is not None:
            for ref in mover.written:
                try:
                    delete_secret(ref)
                except Exception as exc:
                    log.warning("could not delete %s from the keyring: %s", ref, exc)
        raise
    return mover.moved


def _move(mover: _Mover, entry: dict[str, Any], token: str | None) -> None:
    if token is not None:
        ref = mover.store("token", "oauth_token", f"Bearer {token}")
        headers = entry.get("headers")
        if not isinstance(headers, dict):
            headers = entry["headers"] = {}
        headers["Authorization"] = KEYRING_PREFIX + ref
    for section in ("env", "headers"):
        values = entry.get(section)
        if not isinstance(values, dict):
            continue
        for key, value in values.items():
            if not isinstance(value, str) or not is_literal(value):
                continue
            where = f"{section}.{key}"
            spans = [(0, len(value))] if is_secret_key(key) else secret_spans(value)
            if spans == [(0, len(value))]:
                values[key] = KEYRING_PREFIX + mover.store(where, key, value)
            elif spans:  # a password inside a URL, a token inside a longer value
                values[key] = mover.replace_spans(where, key, value, spans)
    args = entry.get("args")
    if isinstance(args, list) and all(isinstance(a, str) for a in args):
        spans_by_arg = {i: arg_spans(args, i) for i in secret_args(args)}
        for i, spans in spans_by_arg.items():
            args[i] = mover.replace_spans(f"args[{i}]", f"arg{i + 1}", args[i], spans)
    url = entry.get("url")
    if isinstance(url, str) and (spans := secret_spans(url)):
        entry["url"] = mover.replace_spans("url", "url", url, spans)
    auth = entry.get("auth")
    if isinstance(auth, dict):
        for key in ("client_secret", "clientSecret"):
            value = auth.get(key)
            if isinstance(value, str) and is_literal(value):
                ref = mover.store(f"auth.{key}", "client_secret", value)
                auth[key] = f"${{{KEYRING_PREFIX}{ref}}}"


def rehome_refs(
    entry: dict[str, Any], old_server: str, new_server: str, taken: frozenset[str]
) -> dict[str, str]:
    """Point `entry`'s references to `old_server`'s secrets at keys of `new_server` (a
    rename; changed in place), never at a key in `taken`. Returns old key → new key; the
    caller copies the secrets."""
    moves: dict[str, str] = {}
    used = {key.lower() for key in taken}  # the encrypted-file store lower-cases keys

    def new_key(ref: str) -> str:
        if ref not in moves:
            base = server_keys(new_server) + ref[len(server_keys(old_server)) :]
            key, n = base, 1
            while key.lower() in used:
                n += 1
                key = f"{base}_{n}"
            used.add(key.lower())
            moves[ref] = key
        return moves[ref]

    def placeholder(match: re.Match[str]) -> str:
        ref = match.group("ref")
        if not is_own_ref(old_server, ref):
            return match.group(0)
        return f"${{{KEYRING_PREFIX}{new_key(ref)}}}"

    def fix(value: Any) -> Any:
        if isinstance(value, str):
            whole = value[len(KEYRING_PREFIX) :]
            if value.startswith(KEYRING_PREFIX) and is_own_ref(old_server, whole):
                return KEYRING_PREFIX + new_key(whole)
            return PLACEHOLDER.sub(placeholder, value)
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fix(v) for v in value]
        return value

    for key, value in list(entry.items()):
        entry[key] = fix(value)
    return moves


def secret_refs(entry: Any) -> list[str]:
    """The keyring keys an entry refers to: `keyring:<key>` values and `${keyring:<key>}`
    placeholders anywhere in it (arguments, URL, environment, headers, auth)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            if value.startswith(KEYRING_PREFIX):
                found.append(value[len(KEYRING_PREFIX) :])
            found.extend(m.group("ref") for m in PLACEHOLDER.finditer(value))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(entry)
    return found
