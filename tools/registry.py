"""Reads tool manifests and resolves implementations on first call.

Only `tools/<category>/manifest.py` modules, entry-point packs and `<home>/tools/*.py` files
are imported here; implementation modules (with their heavy imports) load when a tool is
first called.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import logging
import pkgutil
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from tools.spec import ImplFn, Operation, ToolManifest

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "deskhand.tools"


@dataclass(frozen=True)
class PackError:
    source: str
    message: str


SourceKind = str  # "builtin", "mcp", "pack", "entrypoint", "skill"


@dataclass(frozen=True)
class ToolSource:
    """Where a tool really comes from, assigned by whoever loads it (never by the tool).

    `fingerprint` is what would change the source's behaviour (a pack's file hash, a
    package's version, an MCP server's command, arguments and environment keys); trust is
    lost when it changes. `tools` maps tool name → a hash of its definition for sources whose
    tools can change on their own (MCP): a new or changed tool is untrusted again.
    """

    kind: SourceKind
    id: str
    fingerprint: str = ""
    origin: str = ""
    tools: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def builtin(self) -> bool:
        return self.kind == "builtin"


BUILTIN_SOURCE = ToolSource("builtin", "builtin", origin="part of Deskhand")


@dataclass
class PackInfo:
    """A third-party tool pack found on this machine; imported only once enabled."""

    source: ToolSource
    enabled: bool = False
    loaded: bool = False
    error: str | None = None
    tools: list[str] = field(default_factory=list)


def file_fingerprint(path: Path) -> str:
    try:
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        return f"unreadable:{exc.errno}"


@dataclass(frozen=True)
class ToolInfo:
    manifest: ToolManifest
    available: bool
    unavailable_reason: str | None

    def to_json(self) -> dict[str, Any]:
        m = self.manifest
        return {
            "name": m.name,
            "category": m.category,
            "description": m.description,
            "operations": sorted(o.value for o in m.operations),
            "parameters": m.json_schema(),
            "available": self.available,
            "unavailable_reason": self.unavailable_reason,
        }


def _manifests_of(obj: Any) -> list[ToolManifest]:
    """A pack is a module with MANIFESTS, a list of manifests, or a callable returning one."""
    if isinstance(obj, ModuleType):
        obj = getattr(obj, "MANIFESTS", None)
        if obj is None:
            raise ValueError("module defines no MANIFESTS")
    if callable(obj) and not isinstance(obj, ToolManifest):
        obj = obj()
    items = list(obj)
    for item in items:
        if not isinstance(item, ToolManifest):
            raise TypeError(f"expected ToolManifest, got {type(item).__name__}")
    return items


class ToolRegistry:
    def __init__(self) -> None:
        self._manifests: dict[str, ToolManifest] = {}
        self._impls: dict[str, ImplFn] = {}
        self._hooks: dict[tuple[str, str], ImplFn] = {}
        self._availability: dict[str, str | None] = {}
        self._sources: dict[str, ToolSource] = {}
        self._lock = threading.Lock()
        self.errors: list[PackError] = []
        self.packs: list[PackInfo] = []

    # ---- loading -------------------------------------------------------------

    @classmethod
    def default(
        cls,
        home: Path | None = None,
        *,
        entry_points: bool = True,
        pack_enabled: Callable[[ToolSource], bool] = lambda _source: False,
    ) -> ToolRegistry:
        """Built-in categories, then the installed packs and the user's drop-in files —
        the packs only listed, and imported only where `pack_enabled` says the user
        enabled exactly this version of them."""
        registry = cls()
        registry.load_builtin()
        if entry_points:
            registry.load_entry_points(pack_enabled)
        if home is not None:
            registry.load_directory(home / "tools", pack_enabled)
        return registry

    def add(
        self, manifests: Iterable[ToolManifest], source: str | ToolSource = BUILTIN_SOURCE
    ) -> list[str]:
        """Registers manifests as coming from `source` (a plain string means Deskhand's own
        code). Returns the names added; duplicates of existing names are skipped."""
        origin = source if isinstance(source, ToolSource) else BUILTIN_SOURCE
        label = origin.id if isinstance(source, ToolSource) else source
        added: list[str] = []
        with self._lock:
            for manifest in manifests:
                if manifest.name in self._manifests:
                    self.errors.append(PackError(label, f"duplicate tool name {manifest.name}"))
                    log.warning("%s: duplicate tool name %s skipped", label, manifest.name)
                    continue
                self._manifests[manifest.name] = manifest
                self._sources[manifest.name] = origin
                added.append(manifest.name)
        return added

    def remove(self, names: Iterable[str]) -> None:
        """Drops tools (e.g. of an MCP server that was removed or changed its tools)."""
        with self._lock:
            for name in names:
                self._drop(name)

    def replace_source(
        self, source: ToolSource, manifests: Iterable[ToolManifest]
    ) -> tuple[list[str], list[tuple[str, ToolSource]]]:
        """In one step (no moment without them, for a call looking a tool up meanwhile):
        drop every tool registered from `source.id` and register `manifests` from `source`
        (a fresh definition hash per tool). A name another source holds is never taken
        over: it is skipped. Returns (names added, [(name skipped, its owner)])."""
        added: list[str] = []
        skipped: list[tuple[str, ToolSource]] = []
        with self._lock:
            for name in [n for n, s in self._sources.items() if s.id == source.id]:
                self._drop(name)
            for manifest in manifests:
                owner = self._sources.get(manifest.name)
                if manifest.name in self._manifests:
                    skipped.append((manifest.name, owner or BUILTIN_SOURCE))
                    continue
                self._manifests[manifest.name] = manifest
                self._sources[manifest.name] = source
                added.append(manifest.name)
        return added, skipped

    def _drop(self, name: str) -> None:
        self._manifests.pop(name, None)
        self._sources.pop(name, None)
        self._impls.pop(name, None)
        self._availability.pop(name, None)
        for key in [k for k in self._hooks if k[0] == name]:
            del self._hooks[key]

    def source_of(self, name: str) -> ToolSource:
        """Where a registered tool comes from; unknown names count as untrusted."""
        return self._sources.get(name) or ToolSource("unknown", f"unknown:{name}")

    def _add_from(self, source: str, loader: Any, origin: ToolSource = BUILTIN_SOURCE) -> list[str]:
        try:
            return self.add(_manifests_of(loader()), origin if not origin.builtin else source)
        except Exception as exc:  # a broken pack must never take the others down
            self.errors.append(PackError(source, f"{type(exc).__name__}: {exc}"))
            log.warning("tool pack %s failed to load and was skipped: %s", source, exc)
            return []

    def _load_pack(
        self, source: ToolSource, loader: Any, pack_enabled: Callable[[ToolSource], bool]
    ) -> None:
        info = PackInfo(source, enabled=pack_enabled(source))
        self.packs.append(info)
        if not info.enabled:
            return
        before = len(self.errors)
        info.tools = self._add_from(source.id, loader, source)
        info.loaded = len(self.errors) == before
        if not info.loaded:
            info.error = self.errors[-1].message

    def load_builtin(self) -> None:
        import tools

        for info in sorted(pkgutil.iter_modules(tools.__path__), key=lambda i: i.name):
            if not info.ispkg:
                continue
            module_name = f"tools.{info.name}.manifest"
            if importlib.util.find_spec(module_name) is None:
                continue
            self._add_from(module_name, lambda m=module_name: importlib.import_module(m))

    def load_entry_points(
        self, pack_enabled: Callable[[ToolSource], bool] = lambda _source: False
    ) -> None:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = getattr(ep, "dist", None)
            dist_name = getattr(dist, "name", None) or ep.value.split(":")[0]
            version = getattr(dist, "version", None) or "unknown"
            source = ToolSource(
                "entrypoint",
                f"entrypoint:{dist_name}:{ep.name}",
                fingerprint=f"{dist_name}=={version}",
                origin=f"the installed package {dist_name} {version} (entry point {ep.name})",
            )
            self._load_pack(source, ep.load, pack_enabled)

    def load_directory(
        self, folder: Path, pack_enabled: Callable[[ToolSource], bool] = lambda _source: False
    ) -> None:
        if not folder.is_dir():
            return
        for path in sorted(folder.glob("*.py")):
            source = ToolSource(
                "pack",
                f"pack:{path.name}",
                fingerprint=file_fingerprint(path),
                origin=f"the file {path}",
            )
            self._load_pack(source, lambda p=path: _import_file(p), pack_enabled)

    # ---- queries ---------------------------------------------------------------

    def __contains__(self, name: str) -> bool:
        return name in self._manifests

    def get(self, name: str) -> ToolManifest | None:
        return self._manifests.get(name)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._manifests)

    def manifests(self) -> list[ToolManifest]:
        with self._lock:
            return [self._manifests[n] for n in sorted(self._manifests)]

    def categories(self) -> list[str]:
        return sorted({m.category for m in self.manifests()})

    def unavailable_reason(self, manifest: ToolManifest) -> str | None:
        """Why a tool cannot run (a missing optional dependency), without importing it."""
        if manifest.name not in self._availability:
            missing = [r for r in manifest.requires if not _module_present(r)]
            reason = (
                f"needs the Python package(s) {', '.join(missing)}; install them to use this tool"
                if missing
                else None
            )
            self._availability[manifest.name] = reason
        return self._availability[manifest.name]

    def info(self, name: str) -> ToolInfo:
        manifest = self._manifests[name]
        reason = self.unavailable_reason(manifest)
        return ToolInfo(manifest, reason is None, reason)

    def infos(self, category: str | None = None) -> list[ToolInfo]:
        return [self.info(m.name) for m in self.manifests() if category in (None, m.category)]

    def search(
        self,
        *,
        category: str | None = None,
        query: str | None = None,
        operation: Operation | None = None,
    ) -> list[ToolManifest]:
        words = [w for w in (query or "").lower().split() if w]
        found = []
        for m in self.manifests():
            if category and m.category != category:
                continue
            if operation and operation not in m.operations:
                continue
            haystack = f"{m.name} {m.category} {m.description}".lower()
            if words and not all(w in haystack for w in words):
                continue
            found.append(m)
        return found

    # ---- implementations ---------------------------------------------------------

    def resolve(self, name: str) -> ImplFn:
        """The implementation function, importing its module on first use."""
        with self._lock:
            fn = self._impls.get(name)
            if fn is None:
                fn = _load_callable(self._manifests[name].impl, name)
                self._impls[name] = fn
            return fn

    def resolve_preview(self, name: str) -> ImplFn | None:
        return self._resolve_hook(name, "preview")

    def resolve_escalate(self, name: str) -> ImplFn | None:
        return self._resolve_hook(name, "escalate")

    def resolve_hook(self, name: str, hook: str) -> ImplFn:
        """A manifest hook ("preview", "escalate", "subject", "summary_line"), imported on
        first use; raises LookupError when the tool has none."""
        fn = self._resolve_hook(name, hook)
        if fn is None:
            raise LookupError(f"{name} has no {hook} hook")
        return fn

    def _resolve_hook(self, name: str, hook: str) -> ImplFn | None:
        ref = getattr(self._manifests[name], hook)
        if ref is None:
            return None
        with self._lock:
            fn = self._hooks.get((name, hook))
            if fn is None:
                fn = _load_callable(ref, name)
                self._hooks[(name, hook)] = fn
            return fn


def _load_callable(ref: str | ImplFn, tool: str) -> ImplFn:
    if callable(ref):
        return ref
    module_name, sep, attr = ref.partition(":")
    if not sep:
        raise ImportError(f"tool {tool}: impl {ref!r} must look like 'package.module:function'")
    module = importlib.import_module(module_name)
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ImportError(f"tool {tool}: {ref} is not a function")
    return cast(ImplFn, fn)


def _module_present(name: str) -> bool:
    if name in sys.modules:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _import_file(path: Path) -> ModuleType:
    module_name = f"deskhand_pack_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module
