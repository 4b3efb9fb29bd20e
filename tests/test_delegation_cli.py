"""Sub-agents in `deskhand ask`: the agent's calls on stderr say whose they are ("[Researcher]
fs_read_file …") between progress lines of its delegation; `--json` gives them `agent` and
`parent_call_id`; a question of the agent's on the terminal says who asks, with only Allow
once and Deny.

`deskhand ask` runs as a real subprocess against the scripted model server over real HTTP
(parent and agent share the one script, served in order); the terminal is a real
pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.fakellm import ScriptedLLM, text, tool_calls
from tests.test_cli import REPO, deskhand, deskhand_env, events_of

WRITER = {"name": "Writer", "description": "Writes notes.", "tools": ["fs_write_file"]}
TASK = "What does notes.txt say?"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The one folder the file tools may use (outside Deskhand's home, which they never
    touch), with a note in it."""
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "notes.txt").write_text("the meeting moved to Thursday", "utf-8")
    return folder


@pytest.fixture
def home(tmp_path: Path, llm: ScriptedLLM, work: Path) -> Path:
    """A home whose model is the scripted one, with the Writer agent."""
    folder = tmp_path / "home"
    folder.mkdir()
    account = {"id": "acct01", "kind": "openai", "label": "t", "base_url": llm.openai_base_url}
    settings = {
        "providers": [account | {"model": "m"}],
        "active_provider": "acct01",
        "files": {"allowed_roots": [str(work)], "folders_chosen": True},
        "agents": [WRITER],
    }
    (folder / "settings.json").write_text(json.dumps(settings), "utf-8")
    return folder


def _research(llm: ScriptedLLM, work: Path, answer: str = "Your meeting is on Thursday.") -> None:
    """The parent hands Researcher a task; Researcher reads the note and reports."""
    notes = str(work / "notes.txt")
    llm.add(tool_calls(("d1", "delegate_agent", {"agent": "Researcher", "task": TASK})))
    llm.add(tool_calls(("c1", "fs_read_file", {"path": notes})))
    llm.add(text("The note says the meeting moved to Thursday."))
    if answer:
        llm.add(text(answer))


def _write(llm: ScriptedLLM, work: Path, call_id: str = "d1") -> Path:
    """The parent hands Writer a task; Writer writes a file (which asks)."""
    target = work / "out.txt"
    llm.add(tool_calls((call_id, "delegate_agent", {"agent": "Writer", "task": "write hi"})))
    llm.add(tool_calls(("w1", "fs_write_file", {"path": str(target), "content": "hi"})))
    llm.add(text("I wrote it."))
    llm.add(text("Done."))
    return target


def test_text_mode_tags_the_agents_calls_and_shows_the_delegations_progress(
    llm: ScriptedLLM, home: Path, work: Path
) -> None:
    _research(llm, work)
    proc = deskhand("--home", str(home), "ask", "when is the meeting?")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Your meeting is on Thursday."
    lines = proc.stderr.splitlines()
    delegated = next(i for i, line in enumerate(lines) if line.startswith("→ delegate_agent "))
    read = next(i for i, line in enumerate(lines) if "fs_read_file" in line)
    assert lines[read].startswith("→ [Researcher] fs_read_file ")
    assert "notes.txt" in lines[read]
    assert lines[delegated + 1] == "  … Researcher started"
    assert delegated < read
    # the agent's result says whose it is; the delegation's result is its report
    assert any(line.startswith("  ✓ [Researcher] ") for line in lines[read + 1 :])
    assert lines[-1].startswith("  ✓ The note says the meeting moved to Thursday.")


def test_json_events_of_the_agents_calls_carry_agent_and_parent_call_id(
    llm: ScriptedLLM, home: Path, work: Path
) -> None:
    _research(llm, work, answer="")  # then the parent hands Writer a task too
    target = _write(llm, work, call_id="d2")
    proc = deskhand("--home", str(home), "ask", "when is the meeting?", "--json")
    assert proc.returncode == 0, proc.stderr
    events = events_of(proc.stdout)

    def about(call_id: str) -> list[dict[str, Any]]:
        return [e for e in events if e.get("id") == call_id]

    [call] = [e for e in events if e["type"] == "tool_call" and e["name"] == "fs_read_file"]
    assert (call["agent"], call["parent_call_id"]) == ("Researcher", "d1")
    assert call["id"] not in ("c1", "d1")  # known outside the agent by an id of its own
    assert {e["type"] for e in about(call["id"])} == {"tool_call", "tool_result"}
    assert all(e["agent"] == "Researcher" for e in about(call["id"]))
    # the delegation itself is the conversation's own call: its shape is unchanged
    own = [e for e in about("d1") if e["type"] == "tool_call"]
    assert own and all("agent" not in e and "parent_call_id" not in e for e in own)
    progress = [e["message"] for e in about("d1") if e["type"] == "progress"]
    assert progress[0] == "Researcher started"
    # the second agent asks (nobody answers under --json: denied)
    [write] = [e for e in events if e["type"] == "tool_call" and e["name"] == "fs_write_file"]
    asked = [e for e in events if e["type"] == "approval_requested"]
    assert [(e["id"], e["agent"], e["parent_call_id"]) for e in asked] == [
        (write["id"], "Writer", "d2")
    ]
    assert asked[0]["choices"] == ["allow_once", "deny"]
    decided = [e for e in events if e["type"] == "approval"]
    assert [(e["id"], e["decision"], e["agent"]) for e in decided] == [
        (write["id"], "deny", "Writer")
    ]
    assert not target.exists()


class _Terminal:
    """A real pseudo-terminal for `ask`'s stdin and stderr; what it shows is collected, and
    `until` waits (on a condition, not a clock) for some text to appear."""

    def __init__(self) -> None:
        self.master, self.slave = pty.openpty()
        self.shown = ""
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                chunk = b""
            with self._changed:
                if not chunk:
                    self._changed.notify_all()
                    return
                self.shown += chunk.decode("utf-8", "replace")
                self._changed.notify_all()

    def until(self, words: str, timeout: float = 30) -> str:
        with self._changed:
            if not self._changed.wait_for(lambda: words in self.shown, timeout):
                raise AssertionError(f"the terminal never showed {words!r}:\n{self.shown}")
            return self.shown

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def close(self) -> None:
        os.close(self.master)
        self._reader.join(5)


def test_the_terminal_asks_in_the_agents_name_with_only_allow_once_and_deny(
    llm: ScriptedLLM, home: Path, work: Path
) -> None:
    target = _write(llm, work)
    terminal = _Terminal()
    env = deskhand_env()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "--home", str(home), "ask", "write hi"],
            stdin=terminal.slave,
            stderr=terminal.slave,
            stdout=subprocess.PIPE,
            env=env,
            cwd=REPO,
            text=True,
        )
        os.close(terminal.slave)
        try:
            shown = terminal.until("Allow? ")
            question = shown[shown.index("Writer wants to: ") :]
            assert question.splitlines()[0].startswith("Writer wants to: ")
            assert "out.txt" in question.splitlines()[0]
            assert "Allow? [y] once  [N] deny: " in question  # nothing that would last
            terminal.type("y")
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        terminal.close()
    assert proc.returncode == 0, terminal.shown
    assert out.strip() == "Done."
    assert target.read_text("utf-8") == "hi"
    assert "[Writer] fs_write_file" in terminal.shown
