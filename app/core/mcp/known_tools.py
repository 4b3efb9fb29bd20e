"""The last tools each MCP server listed, kept in `<home>/mcp-known-tools.json`, so
`tools list` can show a server's tools while it is still starting — marked as the last
known list — and `deskhand ask` can offer them to the model before the server is up
(app/core/mcp/cached.py: the "offers", with their schemas).

Each server's list is stored with the fingerprint of its mcp.json identity (command,
arguments, environment keys, URL origin…): when the entry changes, the old list is not
shown as if it were this server's. That fingerprint leaves out every value Deskhand
takes for a secret (environment and header values, secret parts of the arguments, all of
the URL but its origin). The offers also carry a keyed hash of the whole raw entry
(app.core.mcp.cached.entry_hashes: an HMAC under the home's own key, so no token is
hashed in plain): any edit of the entry (a timeout, a token) makes them unusable.
Records written before that (no `format`) are dropped when the file is next written.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.spec import ToolManifest

log = logging.getLogger(__name__)

FILE_NAME = "mcp-known-tools.json"
#: A server's list is kept to this many tools, each with its first line only (what is shown):
#: the file must not grow with whatever a server sends.
MAX_TOOLS = 500
#: The most a server's cached offers may take in the file (1 MB of JSON).
MAX_OFFERS_CHARS = 1_000_000
SUMMARY_CHARS = 200
#: How `entry` values are made now (app.core.mcp.cached.entry_hashes).
ENTRY_PREFIX = "hmac-sha256:"
#: The record layout: records without it (plain hashes of entries) are dropped on write.
FORMAT = 2
_lock = threading.Lock()


@dataclass(frozen=True)
class KnownTool:
    name: str
    category: str
    description: str
    operations: tuple[str, ...]

    @property
    def summary(self) -> str:
        return self.description.strip().split("\n", 1)[0][:SUMMARY_CHARS]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "category": self.category,
            "description": self.description,
            "operations": list(self.operations),
        }


def known_tools_path(home: Path) -> Path:
    return home / FILE_NAME


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError, RecursionError):  # a damaged file is no cache
        return {}
    return data if isinstance(data, dict) else {}


def remember(
    home: Path,
    server: str,
    fingerprint: str,
    manifests: list[ToolManifest],
    *,
    entry: str = "",
    offers: list[dict[str, Any]] | None = None,
) -> None:
    """Keep `server`'s tools as listed now (a failure to write only loses the cache);
    `offers` (cached.offer_of) are kept when `entry`, the raw entry's hash, is given."""
    path = known_tools_path(home)
    kept: dict[str, Any] = {}
    if entry and offers is not None:
        offers = offers[:MAX_TOOLS]
        # a server listing more than this keeps no offers: it starts before `ask` asks
        if len(json.dumps(offers, ensure_ascii=False)) <= MAX_OFFERS_CHARS:
            kept = {"entry": entry, "offers": offers}
    record = kept | {
        "format": FORMAT,
        "fingerprint": fingerprint,
        "listed_at": time.time(),
        "tools": [
            KnownTool(
                m.name[:200],
                m.category[:200],
                m.summary[:SUMMARY_CHARS],
                tuple(sorted(o.value for o in m.operations)),
            ).to_json()
            for m in manifests[:MAX_TOOLS]
        ],
    }
    with _lock:
        data = _read(path)
        old = data.get(server)
        if isinstance(old, dict) and old == record | {"listed_at": old.get("listed_at")}:
            return
        data = {name: kept for name, kept in data.items() if _current(kept)}
        data[server] = record
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".mcp-known-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump(data, out, ensure_ascii=False)
                os.replace(tmp, path)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            log.info("could not keep the MCP tools list: %s", exc)


def _current(record: Any) -> bool:
    """Written in today's layout (older ones may hold plain hashes of entries with tokens)."""
    return isinstance(record, dict) and record.get("format") == FORMAT


def cached_offers(home: Path, server: str, entry: str) -> dict[str, Any] | None:
    """`server`'s cached offers and fingerprint, if listed with this raw entry (else None)."""
    record = _read(known_tools_path(home)).get(server)
    if not isinstance(record, dict) or not entry or record.get("entry") != entry:
        return None
    if not isinstance(record.get("offers"), list):
        return None
    return record


def last_known(home: Path, server: str, fingerprint: str) -> list[KnownTool] | None:
    """The tools `server` listed last time, if its entry is unchanged since (else None)."""
    entry = _read(known_tools_path(home)).get(server)
    if not isinstance(entry, dict) or entry.get("fingerprint") != fingerprint:
        return None
    out = []
    for raw in entry.get("tools") or []:
        try:
            out.append(
                KnownTool(
                    str(raw["name"]),
                    str(raw["category"]),
                    str(raw.get("description", "")),
                    tuple(str(o) for o in raw.get("operations", [])),
                )
            )
        except (KeyError, TypeError):
            continue
    return out
