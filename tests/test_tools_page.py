"""Settings → Tools: readable names grouped by category, the search box, the category check
box and the keyboard (pytest-qt, offscreen, real registry and rules.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.core.runtime import Runtime
from app.ui.settings.tools_page import NAME, TITLE, ToolsPage
from tests import test_settings_dialog as base

runtime = base.runtime
restore_theme = base.restore_theme

pytestmark = pytest.mark.gui


@pytest.fixture
def page(qtbot: Any, runtime: Runtime, restore_theme: None) -> ToolsPage:
    widget = ToolsPage(runtime)
    qtbot.addWidget(widget)
    widget.resize(560, 440)  # its room in the settings dialog at 800×600
    widget.show()
    return widget


def categories_shown(page: ToolsPage) -> list[str]:
    tree = page.tree
    items = [tree.topLevelItem(i) for i in range(tree.topLevelItemCount())]
    return [item.text(TITLE) for item in items if not item.isHidden()]


def test_tools_show_readable_names_with_the_machine_name_beside(page: ToolsPage) -> None:
    item = page.tool_item("fs_write_file")
    assert item.text(TITLE) == "Write file"
    assert item.text(NAME) == "fs_write_file"
    assert item.parent().text(TITLE) == "Files"
    assert "Write text to a file" in item.toolTip(TITLE)
    assert "Kubernetes" in categories_shown(page)
    assert page.tool_item("kubectl_rollout_restart").text(TITLE) == "Restart workload"


def test_search_matches_title_name_category_and_description(qtbot: Any, page: ToolsPage) -> None:
    qtbot.keyClicks(page.search_edit, "docker logs")  # every word: category and title
    assert page.visible_tools() == ["docker_container_logs"]
    assert categories_shown(page) == ["Docker"]
    assert page.tool_item("docker_container_logs").parent().text(NAME) == "1 of 16 tools"

    page.set_filter("fs_write")  # the machine name
    assert page.visible_tools() == ["fs_write_file"]
    page.set_filter("kubernetes")  # the category: all its tools, and others that say it
    shown = page.visible_tools()
    assert {m.name for m in page.runtime.registry.manifests() if m.category == "kubectl"} <= set(
        shown
    )
    assert "list_integration_accounts" in shown  # "Kubernetes contexts" in its description
    assert "fs_read_file" not in shown
    page.set_filter("trash")  # only the description says it
    assert page.visible_tools() == ["fs_delete"]

    page.set_filter("no such tool anywhere")
    assert page.visible_tools() == []
    assert page.no_match.isVisible() and not page.tree.isVisible()
    assert page.no_match.text() == "No tools match “no such tool anywhere”."

    page.search_edit.setFocus()
    qtbot.keyClick(page.search_edit, Qt.Key.Key_Escape)  # Esc clears
    assert page.search_edit.text() == ""
    assert page.tree.isVisible() and not page.no_match.isVisible()
    assert len(page.visible_tools()) == len(page.runtime.registry.manifests())
    assert page.tool_item("fs_read_file").parent().text(NAME) == "9 tools"


def test_category_check_box_turns_its_tools_off_and_on(page: ToolsPage) -> None:
    files = page.tool_item("fs_read_file").parent()
    files.setCheckState(TITLE, Qt.CheckState.Unchecked)
    assert not page.is_enabled("fs_write_file") and not page.is_enabled("fs_read_file")
    page.set_enabled("fs_read_file", True)
    assert files.checkState(TITLE) == Qt.CheckState.PartiallyChecked
    files.setCheckState(TITLE, Qt.CheckState.Checked)
    assert page.is_enabled("fs_write_file")


def test_keyboard_search_then_toggle_and_choose_approval(
    qtbot: Any, page: ToolsPage, runtime: Runtime
) -> None:
    page.search_edit.setFocus()
    qtbot.keyClicks(page.search_edit, "fs_write")
    qtbot.keyClick(page.search_edit, Qt.Key.Key_Down)  # into the list, on the first match
    assert page.tree.hasFocus()
    assert page.tree.currentItem() is page.tool_item("fs_write_file")
    qtbot.keyClick(page.tree, Qt.Key.Key_Space)  # Space turns it off
    assert not page.is_enabled("fs_write_file")
    qtbot.keyClick(page.tree, Qt.Key.Key_Space)
    assert page.is_enabled("fs_write_file")
    combo = page.rule_combo("fs_write_file")
    qtbot.keyClick(page.tree, Qt.Key.Key_Return)  # Enter opens the approval choice
    qtbot.waitUntil(lambda: combo.view().isVisible())
    view = combo.view()
    view.setCurrentIndex(combo.model().index(combo.findData("deny"), 0))
    qtbot.keyClick(view, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not view.isVisible())
    assert page.rule("fs_write_file") == "deny"
    page.patch()(runtime.settings)
    page.commit()
    assert {(r.tool, r.decision.value) for r in runtime.rules.rules()} == {
        ("fs_write_file", "deny")
    }


def test_screenshots_light_and_dark(page: ToolsPage, qapp: QApplication) -> None:
    from app.ui import theme

    for mode in ("light", "dark"):
        theme.apply_theme(qapp, mode)
        page.set_filter("" if mode == "light" else "docker")
        out = Path(f"/tmp/tools_page_{mode}.png")
        assert page.grab().save(str(out))
        header = page.tree.header()
        assert header.sectionSize(NAME) >= 120  # the machine names have room
