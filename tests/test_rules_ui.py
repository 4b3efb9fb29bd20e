"""Rules and trust in the window: the approval card's "always" answer adds the narrow rule
through the real pipeline, the Rules page removes rules from rules.json, the Sources page
never imports a pack before Enable, and the first-run folder question (pytest-qt, offscreen,
qasync, the scripted model server over HTTP)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from app.core.approval import Decision
from app.core.rules import Matcher, Rule, RuleDecision, Scope
from app.core.runtime import Runtime
from app.ui.icons import app_icon
from app.ui.main_window import MainWindow
from app.ui.settings.rules_page import RulesPage
from app.ui.settings.sources_page import SourcesPage
from app.ui.tray import Tray
from tests.fakellm import ScriptedLLM, text, tool_calls
from tests.fixtures_qt import wait_until
from tests.fixtures_runtime import RuntimeFactory

pytestmark = pytest.mark.gui


def _window(rt: Runtime, qtbot: Any) -> MainWindow:
    tray = Tray(app_icon())
    win = MainWindow(rt, tray)
    qtbot.addWidget(win)
    win.show()
    return win


def _choice(win: MainWindow, label: str) -> QPushButton | None:
    for button in win.chat_view.findChildren(QPushButton):
        if button.property("choice_label") == label and button.isVisible():
            return button
    return None


def test_always_allow_on_the_card_adds_the_narrow_rule(
    home: Path,
    tmp_path: Path,
    llm: ScriptedLLM,
    qtbot: Any,
    qloop: Any,
    make_runtime: RuntimeFactory,
) -> None:
    root = tmp_path / "files"
    notes = root / "notes"
    notes.mkdir(parents=True)
    rt = make_runtime("m", roots=[str(root)])
    win = _window(rt, qtbot)
    first, second, elsewhere = notes / "a.txt", notes / "b.txt", root / "c.txt"
    llm.add(tool_calls(("w1", "fs_write_file", {"path": str(first), "content": "1"})))
    llm.add(tool_calls(("w2", "fs_write_file", {"path": str(second), "content": "2"})))
    llm.add(tool_calls(("w3", "fs_write_file", {"path": str(elsewhere), "content": "3"})))
    llm.add(text("Done."))
    label = f"Always allow: fs_write_file in {notes}"

    async def body() -> None:
        win.send("write the notes", [])
        # the card, not only the pending question (the view adds it a moment later)
        await wait_until(lambda: win.chat_view.bar("w1") is not None, what="the card")
        bar = win.chat_view.bar("w1")
        assert bar is not None
        assert bar.choices() == [
            Decision.ALLOW_ONCE,
            Decision.ALLOW_CONVERSATION,
            Decision.ALWAYS_ALLOW,
            Decision.ALWAYS_ALLOW_ANY,
            Decision.DENY,
        ]
        button = _choice(win, label)
        assert button is not None, [b.property("choice_label") for b in bar.buttons.values()]
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
        # the second write, in the same folder, runs without asking; the third, outside it,
        # asks again: the rule covers that folder only
        await wait_until(lambda: win.chat_view.bar("w3") is not None, what="the third card")
        assert second.read_text() == "2"
        assert not elsewhere.exists()
        deny = _choice(win, "Deny")
        assert deny is not None
        qtbot.mouseClick(deny, Qt.MouseButton.LeftButton)
        await wait_until(lambda: not win.controller.busy, what="the turn to finish")

    try:
        qloop.run_until_complete(body())
        assert first.read_text() == "1"
        stored = json.loads((home / "rules.json").read_text())["rules"]
        assert [(r["tool"], r["decision"], r["matcher"]) for r in stored] == [
            ("fs_write_file", "allow", {"kind": "folder", "value": str(notes)})
        ]
    finally:
        win.stop_background_work()
        rt.close()


def test_rules_page_lists_and_removes_rules(
    home: Path, qtbot: Any, qloop: Any, make_runtime: RuntimeFactory
) -> None:
    rt = make_runtime(llm=None, roots=["/tmp"])
    keep = rt.rules.add(Rule(tool="fs_delete", decision=RuleDecision.DENY, origin="Settings"))
    gone = rt.rules.add(
        Rule(
            tool="fs_write_file",
            matcher=Matcher(kind="path", value="/home/u/notes"),
            decision=RuleDecision.ALLOW,
            origin="“Always allow” on an approval card",
        )
    )
    chat = rt.rules.add(
        Rule(
            tool="docker_*",
            decision=RuleDecision.ALLOW,
            scope=Scope.CONVERSATION,
            conversation_id="c1",
        )
    )
    page = RulesPage(rt)
    qtbot.addWidget(page)
    page.show()
    assert page.rule_ids() == [keep.id, gone.id, chat.id]
    row = page.tree.topLevelItem(1)
    covers, origin = row.text(0).split("\n")
    assert covers == "Allow fs_write_file in /home/u/notes"
    assert origin.startswith("“Always allow” on an approval card · 20")
    assert (row.text(1), row.text(2)) == ("Allow", "Always")
    assert page.tree.topLevelItem(2).text(2) == "This conversation"
    assert page.tree.topLevelItem(0).text(1) == "Never"
    qtbot.mouseClick(page.remove_buttons[gone.id], Qt.MouseButton.LeftButton)
    assert page.rule_ids() == [keep.id, chat.id]
    stored = json.loads((home / "rules.json").read_text())["rules"]
    assert gone.id not in {r["id"] for r in stored}  # gone from the file at once
    assert "Removed: Allow fs_write_file in /home/u/notes" in page.message.text()
    for rule_id in (keep.id, chat.id):
        qtbot.mouseClick(page.remove_buttons[rule_id], Qt.MouseButton.LeftButton)
    assert page.rule_ids() == [] and not page.empty.isHidden()
    rt.close()


PACK = textwrap.dedent(
    """
    from pathlib import Path
    from pydantic import BaseModel
    from tools.spec import ToolManifest, Operation

    Path({marker!r}).write_text("imported")  # what a hostile pack could do on import

    class Hello(BaseModel):
        who: str = "world"

    MANIFESTS = [ToolManifest(name="pack_hello", category="packs", description="Say hello.",
                              params=Hello, operations={{Operation.READ}},
                              impl=lambda args, ctx: "hello")]
    """
)


def test_sources_page_never_imports_a_pack_before_enable(
    home: Path, tmp_path: Path, qtbot: Any, qloop: Any, make_runtime: RuntimeFactory
) -> None:
    marker = tmp_path / "imported.txt"
    (home / "tools").mkdir()
    (home / "tools" / "hello.py").write_text(PACK.format(marker=str(marker)))
    rt = make_runtime(llm=None, roots=["/tmp"])
    page = SourcesPage(rt)
    qtbot.addWidget(page)
    page.show()

    async def body() -> None:
        await page.refresh()
        row = page.row("pack:hello.py")
        assert row is not None and row.state.startswith("Disabled")
        assert not marker.exists()  # listing did not run the pack's code
        assert set(page.action_buttons) == {("pack:hello.py", "enable")}
        click = Qt.MouseButton.LeftButton
        qtbot.mouseClick(page.action_buttons[("pack:hello.py", "enable")], click)
        await wait_until(lambda: ("pack:hello.py", "trust") in page.action_buttons, what="enable")
        row = page.row("pack:hello.py")
        assert row is not None and "not trusted" in row.state and "pack_hello" in row.state
        qtbot.mouseClick(page.action_buttons[("pack:hello.py", "trust")], click)
        await wait_until(lambda: ("pack:hello.py", "untrust") in page.action_buttons, what="trust")
        assert rt.trust.record("pack:hello.py").trusted  # type: ignore[union-attr]
        # the pack changes: trust and enablement are gone until the user looks again
        (home / "tools" / "hello.py").write_text(PACK.format(marker=str(marker)) + "\n# v2\n")
        await page.refresh()
        row = page.row("pack:hello.py")
        assert row is not None and row.state.startswith("Changed since you enabled it")
        assert set(page.action_buttons) == {("pack:hello.py", "enable")}

    qloop.run_until_complete(body())
    rt.close()


def test_first_run_asks_for_folders_and_saves_the_choice(
    home: Path,
    tmp_path: Path,
    llm: ScriptedLLM,
    qtbot: Any,
    qloop: Any,
    make_runtime: RuntimeFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    user_home = tmp_path / "user"
    for name in ("Documents", "Projects"):
        (user_home / name).mkdir(parents=True)
    monkeypatch.setenv("HOME", str(user_home))
    rt = make_runtime("m")
    win = _window(rt, qtbot)
    prompt = win.folders_prompt
    try:
        assert prompt.isVisible()  # not a blocking dialog: the window works meanwhile
        qtbot.waitUntil(lambda: prompt.suggested)
        suggested = [str(user_home / "Documents"), str(user_home / "Projects")]
        assert sorted(prompt.chosen()) == suggested
        assert str(user_home) not in prompt.checks  # never the whole home by default
        extra = tmp_path / "work"
        extra.mkdir()
        monkeypatch.setattr("app.ui.folders_dialog.choose_folder", lambda parent: str(extra))
        qtbot.mouseClick(prompt.add_button, Qt.MouseButton.LeftButton)
        prompt.checks[str(user_home / "Projects")].setChecked(False)
        qtbot.mouseClick(prompt.save_button, Qt.MouseButton.LeftButton)
        saved = json.loads(rt.settings_store.path.read_text())["files"]
        assert saved["folders_chosen"] is True
        assert saved["allowed_roots"] == [str(user_home / "Documents"), str(extra)]
        assert not prompt.isVisible()
    finally:
        win.stop_background_work()
    # answered once: the next start does not ask again
    again = _window(make_runtime(llm=None), qtbot)
    try:
        assert not again.folders_prompt.isVisible()
    finally:
        again.stop_background_work()
        again.runtime.close()
        rt.close()


def test_upgrade_notice_is_shown_once(
    home: Path, llm: ScriptedLLM, qtbot: Any, qloop: Any, make_runtime: RuntimeFactory
) -> None:
    rt = make_runtime("m", roots=["/tmp"])
    rt.settings = rt.settings_store.update(
        lambda s: s.pending_notices.append("Your 2 per-tool approval setting(s) are now rules.")
    )
    win = _window(rt, qtbot)
    try:
        texts = [i.plain_text() for i in win.chat_view.chat_model.items]
        assert texts == ["Your 2 per-tool approval setting(s) are now rules."]
        assert rt.settings_store.load().pending_notices == []
    finally:
        win.stop_background_work()
        rt.close()


def test_a_tasks_profile_is_listed_with_its_scope_and_removable(
    home: Path, qtbot: Any, qloop: Any, make_runtime: RuntimeFactory
) -> None:
    from datetime import UTC, datetime, timedelta

    from app.core.tasks import Schedule, parse_allow

    rt = make_runtime(llm=None, roots=["/tmp"])
    now = datetime.now(UTC)
    task = rt.tasks.add(
        "Digest",
        "Summarise",
        Schedule.once(now + timedelta(hours=1)),
        now=now,
        profile=[parse_allow("fs_read_file")],
    )
    page = RulesPage(rt)
    qtbot.addWidget(page)
    page.show()
    [rule] = rt.rules.for_task(task.id)
    assert page.rule_ids() == [rule.id]
    row = page.tree.topLevelItem(0)
    assert row.text(2) == f"Runs of task {task.id}"
    assert "permission profile of the task “Digest”" in row.text(0)
    qtbot.mouseClick(page.remove_buttons[rule.id], Qt.MouseButton.LeftButton)
    assert rt.tasks.profile_rules(task.id) == []
    rt.close()


def test_the_suggested_folders_are_found_off_the_gui_thread(
    tmp_path: Path, qtbot: Any, qloop: Any, make_runtime: RuntimeFactory, monkeypatch: Any
) -> None:
    """Finding them loads the file tools' path rules and looks at the disk: while the event
    loop runs, a worker does it and the window only adds the boxes."""
    import threading

    import app.ui.folders_dialog as folders

    user_home = tmp_path / "user"
    (user_home / "Documents").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(user_home))
    threads: list[str] = []
    real = folders.suggested_folders

    def recorded(home: Path) -> list[Path]:
        threads.append(threading.current_thread().name)
        return real(home)

    monkeypatch.setattr(folders, "suggested_folders", recorded)
    win = _window(make_runtime("m"), qtbot)
    prompt = win.folders_prompt
    try:

        async def suggest() -> None:
            prompt.suggested, prompt._suggesting = False, False
            prompt.suggest()
            await wait_until(lambda: prompt.suggested, timeout=10)

        qloop.run_until_complete(suggest())
        assert threads and threads[-1].startswith("deskhand-off-gui")
        assert str(user_home / "Documents") in prompt.chosen()
    finally:
        win.stop_background_work()
