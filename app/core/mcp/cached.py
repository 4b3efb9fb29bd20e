"""MCP tools offered from each server's last listing, before the server is up.

`deskhand ask` must send its first request without importing the MCP SDK or waiting for a
server. So when a server lists its tools, the manager keeps what the model needs of each
(name, description, input schema, hints, definition hash) in `<home>/mcp-known-tools.json`
(app/core/mcp/known_tools.py), keyed by a keyed hash of the server's raw mcp.json entry
(`entry_hashes`): any edit of the entry makes the cached list unusable. `cached_tools` turns
those lists back into manifests (json, pydantic and no SDK), each with the same
`ToolSource` a live listing gives — so the same trust rules and labels apply; a cached
description is as untrusted as a live one. A call to such a tool goes through
`CachedCall` (the manager's `call_cached_tool`): it waits for the server, and refuses if
the server no longer has the tool as cached. When the server is up, its live tools replace
the cached ones in the registry.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from app.core.mcp.known_tools import ENTRY_PREFIX, cached_offers
from app.core.mcp.manifests import ServerTools, category, params_model
from tools.registry import ToolSource
from tools.spec import Operation, ToolContext, ToolManifest, ToolResult

#: (server, the server's tool name, its cached definition hash, arguments, ctx) → result.
#: (server, tool, definition hash, server fingerprint, arguments, context) → result
CachedCall = Callable[[str, str, str, str, dict[str, Any], ToolContext], ToolResult]
#: The most of one tool's description and schema that is cached (bigger tools wait for
#: their server: the cache must not grow with whatever a server sends).
MAX_DESCRIPTION = 20_000
MAX_SCHEMA = 100_000
#: The home's own random key for `entry_hash` (hex), readable by the user only.
KEY_FILE = "mcp-known-tools.key"
KEY_BYTES = 32

log = logging.getLogger(__name__)


def entry_hash(home: Path, entry: Any) -> str:
    """The cache key of one raw `mcpServers` entry: any change to it, a token included,
    gives another key ("" when the home has no key: nothing is cached then)."""
    return entry_hashes(home, {"": entry}).get("", "")


def entry_hashes(home: Path, entries: Mapping[str, Any]) -> dict[str, str]:
    """Each entry's cache key: an HMAC-SHA256 of the entry, as written, under `home`'s key.

    An entry may hold literal secrets (an `env` token, an `Authorization` header, a
    `--api-key=` argument). A plain hash of it on disk would let anyone holding the cache
    file test guesses of a weak token offline. Keyed by a random 256-bit key that lives in
    its own file (0600, made on first use, never in the cache file), the stored value says
    nothing about the entry without that key; and two homes never store the same value
    for the same entry. Any change of the entry, a rotated token too (the server may then
    act for another account), still changes the key, so the cached list is not reused.
    Losing the key file only loses the cache: a new key is made."""
    key = home_key(home)
    if key is None:
        return {name: "" for name in entries}
    return {name: ENTRY_PREFIX + _mac(key, entry) for name, entry in entries.items()}


def _mac(key: bytes, entry: Any) -> str:
    text = json.dumps(entry, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hmac.new(key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def home_key(home: Path) -> bytes | None:
    """The home's cache key, made now if it has none (or a damaged one); None when it
    can be neither read nor made (e.g. a read-only home)."""
    path = home / KEY_FILE
    key = _read_key(path)
    if key is not None:
        return key
    try:
        _write_key(path, damaged=path.exists())
    except OSError as exc:
        log.info("no key for the MCP tools cache: %s", exc)
        return None
    return _read_key(path)


def _read_key(path: Path) -> bytes | None:
    try:
        text = path.read_text("ascii").strip()
        if path.stat().st_mode & 0o077:  # e.g. copied with other rights: the user's only
            os.chmod(path, 0o600)
        key = bytes.fromhex(text)
    except (OSError, ValueError):
        return None
    return key if len(key) == KEY_BYTES else None


def _write_key(path: Path, *, damaged: bool) -> None:
    """A new random key, in place at once: a process starting now either makes it or finds
    it whole, never half written, and one process never overwrites another's good key."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".mcp-key-")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(secrets.token_bytes(KEY_BYTES).hex())
        if damaged:
            os.replace(tmp, path)
        else:
            with contextlib.suppress(FileExistsError):  # another process made it first
                os.link(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def raw_entries(config_path: Path) -> dict[str, Any]:
    """mcp.json's `mcpServers` entries as written, without checking them (a file that
    cannot be read gives none: the manager reports it when it starts)."""
    try:
        data = json.loads(config_path.read_text("utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    return servers if isinstance(servers, dict) else {}


def enabled_entries(config_path: Path) -> dict[str, Any]:
    """The entries the manager would start (an object not marked disabled)."""
    return {
        name: entry
        for name, entry in raw_entries(config_path).items()
        if isinstance(entry, dict) and entry.get("disabled") is not True
    }


def offer_of(manifest: ToolManifest, tool: str, definition: str) -> dict[str, Any] | None:
    """What the cache keeps of one live tool (None: too big to keep)."""
    schema = manifest.params.model_json_schema()
    if len(manifest.description) > MAX_DESCRIPTION or len(json.dumps(schema)) > MAX_SCHEMA:
        return None
    return {
        "name": manifest.name,
        "tool": tool,
        "description": manifest.description,
        "schema": schema,
        "operations": sorted(o.value for o in manifest.operations),
        "definition": definition,
        "timeout": manifest.timeout,
    }


def cached_tools(
    home: Path, config_path: Path, call: CachedCall
) -> tuple[dict[str, ServerTools], list[str]]:
    """The cached tools of each enabled server whose entry is unchanged since it listed
    them, and the names of the enabled servers that have no usable cache."""
    found: dict[str, ServerTools] = {}
    missing: list[str] = []
    entries = enabled_entries(config_path)
    keys = entry_hashes(home, entries) if entries else {}
    for name, entry in entries.items():
        cached = cached_offers(home, name, keys[name])
        fingerprint = server_fingerprint(name, entry)
        tools = None
        if cached is not None and fingerprint is not None:
            tools = _server_tools(name, cached, fingerprint, call)
        if tools is None:
            missing.append(name)
        else:
            found[name] = tools
    return found, missing


def server_fingerprint(name: str, entry: Any) -> str | None:
    """The identity of the server mcp.json's entry starts now (None: not a valid entry).
    Cached tools are trusted, and called, under this one, never the cache's own: the
    server that runs is the one the entry names today."""
    from app.core.mcp.config import parse_servers

    try:
        loaded = parse_servers({name: entry})
    except Exception:  # a bad entry means no cached tools, never a crash
        return None
    if not loaded.servers:
        return None
    return loaded.servers[0].fingerprint()


def _server_tools(
    server: str, cached: dict[str, Any], fingerprint: str, call: CachedCall
) -> ServerTools | None:
    manifests: list[ToolManifest] = []
    definitions: dict[str, str] = {}
    for raw in cached.get("offers") or []:
        try:
            manifest = _manifest(server, raw, fingerprint, call)
        except (KeyError, TypeError, ValueError):
            return None  # a damaged cache is no cache
        manifests.append(manifest)
        definitions[manifest.name] = str(raw["definition"])
    source = ToolSource(
        "mcp",
        f"mcp:{server}",
        fingerprint=fingerprint,
        origin=f"the MCP server {server!r} in mcp.json",
        tools=definitions,
    )
    return ServerTools(server, manifests, source)


def _manifest(server: str, raw: dict[str, Any], fingerprint: str, call: CachedCall) -> ToolManifest:
    name, tool, definition = str(raw["name"]), str(raw["tool"]), str(raw["definition"])
    if category(server) != f"mcp:{name.removeprefix('mcp__').partition('__')[0]}":
        raise ValueError("a cached tool of another server")

    def run(args: Any, ctx: ToolContext) -> ToolResult:
        return call(server, tool, definition, fingerprint, args.arguments(), ctx)

    return ToolManifest(
        name=name,
        category=category(server),
        description=str(raw["description"]),
        params=params_model(name, raw["schema"]),
        operations=frozenset(Operation(o) for o in raw["operations"]),
        impl=run,
        timeout=float(raw["timeout"]),
    )
