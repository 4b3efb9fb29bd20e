"""Manifests load cheaply; implementations load on first call; broken packs are skipped."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tools.registry import ToolRegistry

PACK = textwrap.dedent(
    """
    from pydantic import BaseModel
    from tools.spec import ToolManifest, Operation

    class Hello(BaseModel):
        who: str = "world"

    def hello(args, ctx):
        return f"hello {args.who}"

    MANIFESTS = [ToolManifest(name="{name}", category="packs", description="Say hello.",
                              params=Hello, operations={Operation.READ}, impl=hello)]
    """
)


def test_builtin_categories_are_found():
    registry = ToolRegistry.default(None, entry_points=False)
    assert {"core", "fs"} <= set(registry.categories())
    assert "browse_tools" in registry and "fs_read_file" in registry
    assert registry.errors == []


def test_drop_in_packs_load_and_broken_ones_are_skipped(tmp_path: Path, caplog):
    tools_dir = tmp_path / "tools"
    tools_dir.mkdir()
    (tools_dir / "good.py").write_text(PACK.replace("{name}", "pack_hello"))
    (tools_dir / "broken.py").write_text("raise RuntimeError('pack is broken')\n")
    (tools_dir / "empty.py").write_text("X = 1\n")
    with caplog.at_level(logging.WARNING):
        listed = ToolRegistry.default(tmp_path, entry_points=False)
    # found but not imported: disabled until the user enables them
    assert "pack_hello" not in listed and not listed.errors
    assert {p.source.id: p.enabled for p in listed.packs} == {
        "pack:broken.py": False,
        "pack:empty.py": False,
        "pack:good.py": False,
    }
    assert "deskhand_pack_good" not in sys.modules
    with caplog.at_level(logging.WARNING):
        registry = ToolRegistry.default(tmp_path, entry_points=False, pack_enabled=lambda s: True)
    assert "pack_hello" in registry
    assert registry.source_of("pack_hello").kind == "pack"
    sources = {e.source.removeprefix("pack:"): e.message for e in registry.errors}
    assert "pack is broken" in sources["broken.py"]
    assert "MANIFESTS" in sources["empty.py"]
    assert "skipped" in caplog.text
    assert registry.resolve("pack_hello") is not None


def test_entry_point_packs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    site = tmp_path / "site"
    site.mkdir()
    (site / "ep_pack_demo.py").write_text(PACK.replace("{name}", "ep_hello"))
    dist = site / "ep_pack_demo-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-pack-demo\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[deskhand.tools]\ndemo = ep_pack_demo:MANIFESTS\nbroken = ep_pack_demo:NOPE\n"
    )
    monkeypatch.syspath_prepend(str(site))
    listed = ToolRegistry()
    listed.load_entry_points()
    assert "ep_hello" not in listed and "ep_pack_demo" not in sys.modules
    demo = next(p.source for p in listed.packs if p.source.id.endswith(":demo"))
    assert demo.fingerprint == "ep-pack-demo==1.0" and demo.kind == "entrypoint"
    registry = ToolRegistry()
    registry.load_entry_points(lambda s: True)
    assert "ep_hello" in registry
    assert any("broken" in e.source for e in registry.errors)


def test_duplicate_names_are_reported_not_overwritten(tmp_path: Path):
    tools_dir = tmp_path / "tools"
    tools_dir.mkdir()
    (tools_dir / "dup.py").write_text(PACK.replace("{name}", "fs_read_file"))
    registry = ToolRegistry.default(tmp_path, entry_points=False, pack_enabled=lambda s: True)
    assert registry.get("fs_read_file").category == "fs"
    assert registry.source_of("fs_read_file").builtin
    assert any("duplicate" in e.message for e in registry.errors)


def test_search_filters(tmp_path: Path):
    registry = ToolRegistry.default(None, entry_points=False)
    reads = registry.search(category="fs", operation="read")
    assert reads and all("read" in m.operations for m in reads)
    assert [m.name for m in registry.search(category="core", query="browse")] == ["browse_tools"]
    assert {m.category for m in registry.search(query="container logs")} <= {"docker", "kubectl"}
    assert "docker_container_logs" in {m.name for m in registry.search(query="container logs")}


def test_listing_tools_imports_no_implementation(tmp_path: Path):
    """Listing reads manifests only: no heavy SDK and no tool implementation module loads."""
    code = textwrap.dedent(
        """
        import json, sys
        from app.cli import main
        main(["--home", sys.argv[1], "tools", "list", "--json"])
        heavy = ("docker", "kubernetes", "playwright", "caldav", "PySide6", "qasync")
        loaded = [m for m in sys.modules if m.split(".")[0] in heavy]
        impls = [m for m in sys.modules if m.startswith("tools.")
                 and m.count(".") >= 2 and not m.endswith(".manifest")]
        print(json.dumps({"heavy": loaded, "impls": impls}), file=sys.stderr)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    )
    import json

    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report == {"heavy": [], "impls": []}
    assert "fs_write_file" in proc.stdout
