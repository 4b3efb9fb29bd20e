"""`mcp.json` in the `mcpServers` format Claude Desktop and Cursor use, and importing one.

Secret values (in `env` or `headers`) may be `keyring:mcp/<server>/<name>`; they are
resolved only when a server starts. Imports nothing heavy.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tools.redact import is_credential_key

log = logging.getLogger(__name__)

KEYRING_PREFIX = "keyring:"
Transport = Literal["stdio", "http", "sse"]
_HTTP_TYPES = {"http", "streamable-http", "streamable_http", "streamablehttp", "shttp"}


class McpConfigError(Exception):
    """mcp.json (or a config being imported) cannot be used; the message says why."""


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
    timeout: float = 120.0

    @classmethod
    def from_json(cls, name: str, raw: Any) -> ServerConfig:
        if not isinstance(raw, dict):
            raise McpConfigError(f"server {name!r}: expected an object")
        env = _str_map(name, "env", raw.get("env"))
        headers = _str_map(name, "headers", raw.get("headers"))
        kind = str(raw.get("type") or raw.get("transport") or "").lower()
        common: dict[str, Any] = {
            "disabled": bool(raw.get("disabled", False)),
            "timeout": float(raw.get("timeout", 120.0)),
        }
        if raw.get("command"):
            args = raw.get("args") or []
            if not isinstance(args, list):
                raise McpConfigError(f"server {name!r}: args must be a list")
            return cls(
                name,
                "stdio",
                command=str(raw["command"]),
                args=tuple(str(a) for a in args),
                env=env,
                cwd=raw.get("cwd"),
                **common,
            )
        if raw.get("url"):
            url = str(raw["url"])
            if kind == "sse" or (kind not in _HTTP_TYPES and url.rstrip("/").endswith("/sse")):
                transport: Transport = "sse"
            else:
                transport = "http"
            return cls(name, transport, url=url, headers=headers, **common)
        raise McpConfigError(f"server {name!r}: needs either 'command' (stdio) or 'url' (HTTP)")

    def credential_values(self) -> list[str]:
        """Literal (non-keyring) values under credential-looking names, for the tripwire."""
        out = []
        for key, value in [*self.env.items(), *self.headers.items()]:
            if not value.startswith(KEYRING_PREFIX) and is_credential_key(key):
                out.append(value.split(" ", 1)[-1] if key.lower() == "authorization" else value)
        return out


def _str_map(server: str, what: str, raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise McpConfigError(f"server {server!r}: {what} must be an object")
    return {str(k): str(v) for k, v in raw.items()}


def read_servers_block(path: Path) -> dict[str, Any]:
    """The raw `mcpServers` object of a JSON file ({} when the file does not exist)."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise McpConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"{path} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise McpConfigError(f"{path}: expected a JSON object")
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise McpConfigError(f"{path}: mcpServers must be an object")
    return servers


def load_config(path: Path) -> list[ServerConfig]:
    return [ServerConfig.from_json(name, raw) for name, raw in read_servers_block(path).items()]


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


def _key_part(text: str) -> str:
    return re.sub(r"[/\s]+", "_", text.strip()) or "_"


def resolve_secrets(values: Mapping[str, str], get_secret: SecretGetter) -> dict[str, str]:
    """Replace `keyring:<key>` values by the stored secret; a missing one is an error."""
    out: dict[str, str] = {}
    for key, value in values.items():
        if value.startswith(KEYRING_PREFIX):
            ref = value[len(KEYRING_PREFIX) :]
            secret = get_secret(ref)
            if secret is None:
                raise McpConfigError(
                    f"{key} refers to the keyring entry {ref!r}, which does not exist; "
                    f"store it in the keyring (service 'deskhand', username {ref!r})"
                )
            out[key] = secret
        else:
            out[key] = value
    return out


# ---- importing Claude Desktop's config -------------------------------------------------------


def claude_desktop_config_path() -> Path:
    """Where Claude Desktop keeps its config on this platform."""
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "Claude" / "claude_desktop_config.json"


@dataclass
class ImportReport:
    source: Path
    added: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    moved_to_keyring: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "added": self.added,
            "skipped": self.skipped,
            "moved_to_keyring": self.moved_to_keyring,
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
    `target`. Existing servers are kept unless `overwrite`. With `set_secret`, credential
    -looking env/header values move to the keyring and are replaced by references."""
    source = source or claude_desktop_config_path()
    if not source.exists():
        raise McpConfigError(f"{source} does not exist")
    incoming = read_servers_block(source)
    for name, raw in incoming.items():
        ServerConfig.from_json(name, raw)  # validate before changing anything
    current = read_servers_block(target)
    report = ImportReport(source)
    for name, raw in incoming.items():
        if name in current and not overwrite:
            report.skipped.append(name)
            continue
        entry = json.loads(json.dumps(raw))
        if set_secret is not None:
            report.moved_to_keyring += _move_secrets(name, entry, set_secret)
        current[name] = entry
        report.added.append(name)
    if report.added:
        write_servers_block(target, current)
    return report


def _move_secrets(server: str, entry: dict[str, Any], set_secret: SecretSetter) -> list[str]:
    moved = []
    for section in ("env", "headers"):
        values = entry.get(section)
        if not isinstance(values, dict):
            continue
        for key, value in values.items():
            if not isinstance(value, str) or value.startswith(KEYRING_PREFIX):
                continue
            if not value or not is_credential_key(key):
                continue
            ref = keyring_key(server, key)
            try:
                set_secret(ref, value)
            except Exception as exc:  # keep the literal value rather than lose it
                log.warning(
                    "could not move %s of MCP server %s to the keyring: %s", key, server, exc
                )
                continue
            values[key] = KEYRING_PREFIX + ref
            moved.append(f"{server}.{section}.{key}")
    return moved
