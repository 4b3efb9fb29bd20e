"""Settings → Tools: readable names grouped by category, the search box, the category check
box and the keyboard (pytest-qt, offscreen, real registry and rules.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QComboBox

from app.core.rules import Rule, RuleDecision
from app.core.runtime import Runtime
from app.ui.settings.tools_page import APPROVAL, NAME, TITLE, ToolsPage
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
    qtbot.keyClick(page.tree, Qt.Key.Key_Return)  # Enter opens the approval choice
    combo = page.rule_editor()
    assert combo is not None
    qtbot.waitUntil(lambda: combo.view().isVisible())
    view = combo.view()
    view.setCurrentIndex(combo.model().index(combo.findData("deny"), 0))
    qtbot.keyClick(view, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: page.rule_editor() is None)
    assert page.rule("fs_write_file") == "deny"
    page.patch()(runtime.settings)
    page.commit()
    assert {(r.tool, r.decision.value) for r in runtime.rules.rules()} == {
        ("fs_write_file", "deny")
    }


def open_choice(qtbot: Any, page: ToolsPage, name: str, key: Qt.Key, **mods: Any) -> QComboBox:
    """Puts the list on `name`'s row and opens its approval choice with `key`."""
    page.tree.setFocus()
    page.tree.setCurrentItem(page.tool_item(name), TITLE)
    qtbot.keyClick(page.tree, key, **mods)
    combo = page.rule_editor()
    assert combo is not None, f"{key!r} opened no choice"
    qtbot.waitUntil(lambda: combo.view().isVisible())
    return combo


def test_the_page_builds_no_combo_box_per_tool(page: ToolsPage) -> None:
    combos = page.findChildren(QComboBox)
    assert len(page.runtime.registry.manifests()) > 50
    assert len(combos) <= 1 and not any(c.isVisible() for c in combos)  # the painter's model
    assert page.rule_label("fs_write_file") == "Ask"
    assert page.rule_label("fs_read_file") == "Allow"


def test_f2_opens_the_choice_named_for_its_tool_and_typing_picks_one(
    qtbot: Any, page: ToolsPage
) -> None:
    combo = open_choice(qtbot, page, "fs_write_file", Qt.Key.Key_F2)
    assert combo.accessibleName() == "Approval for Write file"
    assert [combo.itemText(i) for i in range(combo.count())] == page.rule_choices("fs_write_file")
    assert combo.currentText() == "Ask"  # opened on the tool's choice
    with qtbot.waitSignal(page.edited):
        qtbot.keyClicks(combo.view(), "n")  # typing moves to "Never"
        qtbot.keyClick(combo.view(), Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: page.rule_editor() is None)
    assert page.rule("fs_write_file") == "deny" and page.rule_label("fs_write_file") == "Never"
    assert page.focusWidget() is page.tree  # back on the list, on the same tool
    assert page.tree.currentItem() is page.tool_item("fs_write_file")
    assert page.has_changes()


def test_escape_closes_the_choice_and_keeps_what_was_chosen(qtbot: Any, page: ToolsPage) -> None:
    combo = open_choice(qtbot, page, "fs_delete", Qt.Key.Key_Return)
    qtbot.keyClick(combo.view(), Qt.Key.Key_Down)
    qtbot.keyClick(combo.view(), Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: page.rule_editor() is None)
    assert page.rule("fs_delete") == "ask"
    assert not page.has_changes()
    assert page.isVisible() and page.focusWidget() is page.tree


def test_f4_and_alt_down_open_the_choice_as_on_a_combo_box(qtbot: Any, page: ToolsPage) -> None:
    combo = open_choice(qtbot, page, "fs_move", Qt.Key.Key_F4)
    qtbot.keyClick(combo.view(), Qt.Key.Key_Down)  # Ask → Always allow
    qtbot.keyClick(combo.view(), Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: page.rule_editor() is None)
    assert page.rule("fs_move") == "allow"
    combo = open_choice(
        qtbot, page, "fs_read_file", Qt.Key.Key_Down, modifier=Qt.KeyboardModifier.AltModifier
    )
    assert [combo.itemText(i) for i in range(combo.count())] == ["Allow", "Never"]
    qtbot.keyClick(combo.view(), Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: page.rule_editor() is None)
    assert page.rule("fs_read_file") == "allow"


def test_a_locked_choice_does_not_open_from_the_keyboard_or_a_click(
    qtbot: Any, runtime: Runtime, restore_theme: None
) -> None:
    runtime.rules.add(Rule(tool="fs_*", decision=RuleDecision.DENY))
    page = ToolsPage(runtime)
    qtbot.addWidget(page)
    page.show()
    page.tree.setFocus()
    page.tree.setCurrentItem(page.tool_item("fs_copy"), TITLE)
    qtbot.keyClick(page.tree, Qt.Key.Key_Return)
    cell = page.tree.visualItemRect(page.tool_item("fs_copy"))
    cell.setLeft(page.tree.header().sectionPosition(APPROVAL))
    qtbot.mouseClick(page.tree.viewport(), Qt.MouseButton.LeftButton, pos=cell.center())
    assert page.rule_editor() is None
    assert page.rule("fs_copy") == "deny" and page.rule_label("fs_copy") == "Never"


def test_a_click_on_the_choice_opens_its_list(qtbot: Any, page: ToolsPage) -> None:
    page.set_filter("fs_copy")
    item = page.tool_item("fs_copy")
    cell = page.tree.visualItemRect(item)
    cell.setLeft(page.tree.header().sectionPosition(APPROVAL))
    qtbot.mouseClick(page.tree.viewport(), Qt.MouseButton.LeftButton, pos=cell.center())
    combo = page.rule_editor()
    assert combo is not None
    qtbot.waitUntil(lambda: combo.view().isVisible())
    assert page.tree.currentItem() is item
    view = combo.view()
    view.setCurrentIndex(combo.model().index(combo.findData("allow"), 0))
    qtbot.keyClick(view, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: page.rule_editor() is None)
    assert page.rule("fs_copy") == "allow"


def test_a_wildcard_rule_shows_its_decision_and_locks_the_choice_it_decides(
    qtbot: Any, runtime: Runtime, restore_theme: None
) -> None:
    runtime.rules.add(Rule(tool="fs_*", decision=RuleDecision.ASK))
    runtime.rules.add(Rule(tool="fs_write_file", decision=RuleDecision.DENY))
    page = ToolsPage(runtime)
    qtbot.addWidget(page)
    # read-only: "Ask" is listed because a rule says so
    assert page.rule("fs_read_file") == "ask" and page.rule_label("fs_read_file") == "Ask"
    read_tip = page.tool_item("fs_read_file").toolTip(APPROVAL)
    assert not page.rule_editable("fs_read_file") and "fs_*" in read_tip
    assert page.open_rule_editor("fs_read_file") is None
    # its own rule is stricter: the page may edit it
    assert page.rule("fs_write_file") == "deny" and page.rule_editable("fs_write_file")
    page.set_rule("fs_write_file", "allow")
    page.commit()  # the wildcard ask still wins over the tool's allow
    assert page.rule("fs_write_file") == "allow"
    reopened = ToolsPage(runtime)
    qtbot.addWidget(reopened)
    assert reopened.rule("fs_write_file") == "ask"
    assert not reopened.rule_editable("fs_write_file")


def test_screenshots_light_and_dark(page: ToolsPage, qapp: QApplication) -> None:
    from app.ui import theme

    for mode in ("light", "dark"):
        theme.apply_theme(qapp, mode)
        page.set_filter("" if mode == "light" else "docker")
        out = Path(f"/tmp/tools_page_{mode}.png")
        assert page.grab().save(str(out))
        header = page.tree.header()
        assert header.sectionSize(NAME) >= 120  # the machine names have room
