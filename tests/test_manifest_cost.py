"""Reading the tool manifests is on the path of the first model request: every built-in
parameter model defers building its validator and schema to first use."""

from __future__ import annotations

from pathlib import Path

from tools.registry import ToolRegistry


def test_every_builtin_parameter_model_defers_its_build(tmp_path: Path):
    registry = ToolRegistry.default(tmp_path, entry_points=False)
    eager = sorted(
        name
        for name in registry.names()
        if not registry.get(name).params.model_config.get("defer_build")
    )
    assert eager == []


def test_a_deferred_model_still_validates_and_gives_its_schema(tmp_path: Path):
    registry = ToolRegistry.default(tmp_path, entry_points=False)
    manifest = registry.get("fs_read_file")
    schema = manifest.params.model_json_schema()
    assert "path" in schema["properties"]
    assert manifest.params.model_validate({"path": "notes.txt"}).path == "notes.txt"
