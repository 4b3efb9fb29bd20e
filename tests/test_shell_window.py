"""The terminal tools in the real window: the scripted model builds and tests a small project,
each command approved on its card, the output shown as a terminal; Stop ends a running
command and everything it started."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from tests.fakellm import text, tool_calls
from tests.fixtures_qt import wait_until
from tests.test_main_window import buttons, root, runtime, type_and_send, window  # noqa: F401
from tests.test_shell_tools import CALC, TEST, heredoc, sandbox  # noqa: F401

pytestmark = pytest.mark.gui


def test_the_model_builds_and_tests_a_project_in_the_window(window, llm, root, qtbot, qloop):  # noqa: F811
    llm.add(tool_calls(("c1", "shell_run", {"command": heredoc("calc/calc.py", CALC)})))
    llm.add(tool_calls(("c2", "shell_run", {"command": heredoc("calc/test_calc.py", TEST)})))
    llm.add(tool_calls(("c3", "shell_run", {"command": "python3 -m unittest -v",
                                            "folder": str(root / "calc")})))
    llm.add(text("Built and tested."))

    async def body():
        type_and_send(qtbot, window, "build a calculator and test it")
        for approved in range(1, 4):
            await wait_until(lambda: buttons(window, "Allow once"), what="the approval card")
            qtbot.mouseClick(buttons(window, "Allow once")[0], Qt.MouseButton.LeftButton)
            await wait_until(lambda n=approved: len(finished()) == n, what="the command to end")
        await wait_until(lambda: not window.controller.busy, what="the turn to finish")

    def finished() -> list:
        return [c for c in shell_cards() if c.finished]

    def shell_cards() -> list:
        items = window.chat_view.chat_model.items
        return [c for c in items if getattr(c, "name", "") == "shell_run"]

    qloop.run_until_complete(body())
    assert (root / "calc" / "calc.py").read_text() == CALC
    cards = shell_cards()
    assert len(cards) == 3 and all(c.terminal is not None for c in cards)
    last = cards[-1].terminal
    assert last.exit_code == 0 and last.sandboxed
    assert "OK" in cards[-1].result


def sleepers(tag: str) -> list[int]:
    """Processes whose command line carries `tag` (the host sees inside the sandbox)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if tag.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_stop_ends_a_running_command_and_its_children(window, llm, root, qtbot, qloop):  # noqa: F811
    tag = "600.4242"
    line = f"(trap '' TERM; sleep {tag}) & sleep {tag}"
    llm.add(tool_calls(("c1", "shell_run", {"command": line})))
    llm.add(text("never reached"))

    async def body():
        type_and_send(qtbot, window, "run something long")
        await wait_until(lambda: buttons(window, "Allow once"), what="the approval card")
        qtbot.mouseClick(buttons(window, "Allow once")[0], Qt.MouseButton.LeftButton)
        await wait_until(lambda: len(sleepers(tag)) >= 2, what="the command and its child")
        qtbot.keyClick(window, Qt.Key.Key_Escape)  # Stop
        await wait_until(lambda: not window.controller.busy, what="the turn to stop")
        await wait_until(lambda: not sleepers(tag), what="every process of the tree to end")

    qloop.run_until_complete(body())
    assert not sleepers(tag)
