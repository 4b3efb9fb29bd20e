"""Readable tool and category names (app/core/tool_names.py)."""

from __future__ import annotations

from pathlib import Path

from app.core.runtime import Runtime
from app.core.tool_names import category_title, tool_title


def test_builtin_titles_read_as_actions_and_are_unique(tmp_path: Path) -> None:
    rt = Runtime(tmp_path, entry_points=False)
    try:
        names = [m.name for m in rt.registry.manifests()]
    finally:
        rt.close()
    titles = {name: tool_title(name) for name in names}
    assert titles["fs_write_file"] == "Write file"
    assert titles["fs_delete"] == "Delete file"
    assert titles["set_active_integration_account"] == "Switch service account"
    assert titles["integration_list"] == "List services"
    assert titles["kubectl_rollout_restart"] == "Restart workload"
    for name, title in titles.items():
        assert "_" not in title, name  # never a machine name
        assert title[0].isupper(), name
    # no two of Deskhand's own tools look the same to a person
    assert len(set(titles.values())) == len(titles), sorted(titles.values())


def test_third_party_names_are_made_readable() -> None:
    assert tool_title("mcp__github__create_issue") == "Create issue"
    assert tool_title("getUserById") == "Get user by ID"
    assert tool_title("mcp__web__fetch-url") == "Fetch URL"
    assert tool_title("pack_hello") == "Pack hello"
    assert tool_title("mcp__x__") == "mcp__x__"  # nothing readable left: the name itself


def test_category_titles() -> None:
    assert category_title("fs") == "Files"
    assert category_title("kubectl") == "Kubernetes"
    assert category_title("mcp:wiki") == "MCP: wiki"
    assert category_title("my_pack") == "My Pack"
