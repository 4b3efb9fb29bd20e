"""Which tool sources the user enabled and trusts, and for exactly which version of them.

Built-in tools are Deskhand's own. Everything else — MCP servers, installed tool packages,
drop-in files in `<home>/tools/`, skills' scripts — is untrusted until the user trusts that
source in Settings: until then every one of its calls asks, whatever it declares about
itself. Packs are not even imported until enabled. Trust and enablement are tied to the
source's fingerprint (file hash, package version, server command/arguments/environment
keys or URL origin) and, for MCP, to each tool's definition: when one changes, that part is
untrusted again. Stored in `<home>/trust.json`, which no tool can read or write.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tools.registry import ToolSource

log = logging.getLogger(__name__)

TRUST_FILE = "trust.json"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class SourceRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    fingerprint: str
    origin: str = ""
    enabled: bool = False
    trusted: bool = False
    #: Tool name → definition hash, as they were when the user trusted the source.
    tools: dict[str, str] = Field(default_factory=dict)
    #: Tool names seen when the pack was enabled (listing without importing it).
    tool_names: list[str] = Field(default_factory=list)
    updated: str = Field(default_factory=_now)


class _TrustFile(BaseModel):
    version: int = 1
    sources: dict[str, SourceRecord] = Field(default_factory=dict)


class TrustStore:
    def __init__(self, path: Path | None) -> None:
        """`path` None keeps trust in memory only (embedders, tests)."""
        self.path = path
        self._lock = threading.RLock()
        self._records = self._load()

    def _load(self) -> dict[str, SourceRecord]:
        if self.path is None:
            return {}
        try:
            raw = self.path.read_bytes()
        except OSError:
            return {}
        try:
            return _TrustFile.model_validate(json.loads(raw)).sources
        except (ValueError, ValidationError) as exc:
            log.warning("%s is unreadable (%s); third-party sources are untrusted", self.path, exc)
            return {}

    def _save(self) -> None:
        from app.core.atomic_file import atomic_write

        if self.path is None:
            return
        text = _TrustFile(sources=self._records).model_dump_json(indent=2) + "\n"
        atomic_write(self.path, text.encode("utf-8"), mode=0o600)

    # ---- queries -----------------------------------------------------------------

    def records(self) -> list[SourceRecord]:
        with self._lock:
            return [r.model_copy() for r in self._records.values()]

    def record(self, source_id: str) -> SourceRecord | None:
        with self._lock:
            rec = self._records.get(source_id)
            return rec.model_copy() if rec else None

    def is_enabled(self, source: ToolSource) -> bool:
        """For packs: enabled by the user, and still the same file or package version."""
        if source.builtin:
            return True
        rec = self.record(source.id)
        return rec is not None and rec.enabled and rec.fingerprint == source.fingerprint

    def is_trusted(self, source: ToolSource, tool: str | None = None) -> bool:
        if source.builtin:
            return True
        rec = self.record(source.id)
        if rec is None or not rec.trusted or rec.fingerprint != source.fingerprint:
            return False
        if tool is not None and tool in source.tools:
            return rec.tools.get(tool) == source.tools[tool]
        return True

    def why_untrusted(self, source: ToolSource, tool: str | None = None) -> str:
        """Plain words for the approval card."""
        rec = self.record(source.id)
        if rec is None or not rec.trusted:
            return f"{describe(source)} is not trusted yet"
        if rec.fingerprint != source.fingerprint:
            return f"{describe(source)} changed since you trusted it"
        if tool is not None and tool in source.tools and tool not in rec.tools:
            return f"{tool} is a new tool of {describe(source)}"
        return f"{tool} of {describe(source)} changed its definition since you trusted it"

    # ---- changes -----------------------------------------------------------------

    def _update(self, source: ToolSource, **changes: Any) -> SourceRecord:
        with self._lock:
            rec = self._records.get(source.id)
            if rec is None or rec.fingerprint != source.fingerprint:
                rec = SourceRecord(
                    id=source.id, fingerprint=source.fingerprint, origin=source.origin
                )
            rec = rec.model_copy(update={**changes, "updated": _now()})
            self._records[source.id] = rec
            self._save()
            return rec

    def trust(self, source: ToolSource) -> SourceRecord:
        """Trusts this version of the source and its tools as they are now."""
        return self._update(source, trusted=True, enabled=True, tools=dict(source.tools))

    def untrust(self, source_id: str) -> None:
        with self._lock:
            rec = self._records.get(source_id)
            if rec is not None:
                self._records[source_id] = rec.model_copy(update={"trusted": False, "tools": {}})
                self._save()

    def enable(self, source: ToolSource, tool_names: Iterable[str] = ()) -> SourceRecord:
        return self._update(source, enabled=True, tool_names=sorted(tool_names))

    def disable(self, source_id: str) -> None:
        with self._lock:
            rec = self._records.get(source_id)
            if rec is not None:
                self._records[source_id] = rec.model_copy(
                    update={"enabled": False, "trusted": False, "tools": {}}
                )
                self._save()

    def forget(self, source_id: str) -> None:
        with self._lock:
            if self._records.pop(source_id, None) is not None:
                self._save()


def describe(source: ToolSource) -> str:
    match source.kind:
        case "mcp":
            return f"the MCP server {source.id.removeprefix('mcp:')!r}"
        case "pack":
            return f"the tool pack {source.id.removeprefix('pack:')}"
        case "entrypoint":
            return f"the installed tool package {source.fingerprint}"
        case "skill":
            return f"the skill {source.id.removeprefix('skill:')!r}"
        case "builtin":
            return "Deskhand"
    return f"an unknown source ({source.id})"


# ---- fingerprints -------------------------------------------------------------------------


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def mcp_server_fingerprint(
    *,
    command: str | None,
    args: Iterable[str],
    env: Mapping[str, str],
    url: str | None,
    cwd: str | None = None,
) -> str:
    """What would change a server's behaviour: the program it runs with its arguments and
    environment keys (values are often secrets and rotate), or the URL's origin."""
    if url:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)
        return _digest({"origin": f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"})
    return _digest({"command": command, "args": list(args), "env": sorted(env), "cwd": cwd})


def mcp_tool_fingerprint(tool: Any) -> str:
    """A hash of everything the server says about a tool (name, description, schema, hints)."""
    dump = getattr(tool, "model_dump", None)
    value = dump(mode="json", exclude_none=True) if callable(dump) else repr(tool)
    return _digest(value)


def folder_fingerprint(folder: Path) -> str:
    """A hash over a folder's files (names and contents), for skills' scripts."""
    digest = hashlib.sha256()
    try:
        files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    except OSError:
        return "unreadable"
    for path in files:
        digest.update(str(path.relative_to(folder)).encode("utf-8", "surrogateescape") + b"\0")
        try:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError:
            digest.update(b"unreadable")
    return "sha256:" + digest.hexdigest()
