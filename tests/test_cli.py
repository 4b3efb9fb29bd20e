"""`deskhand` as a user runs it: a real subprocess, real HTTP to the scripted model server."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakellm import ScriptedLLM, hang, text, tool_calls

SECRET = "sk-cli-SECRET-0a1b2c3d4e5f"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path]:
    """A home whose settings confine file tools to `root`."""
    home = tmp_path / "home"
    root = tmp_path / "root"
    home.mkdir()
    root.mkdir()
    settings = {"files": {"allowed_roots": [str(root)]}}
    (home / "settings.json").write_text(json.dumps(settings))
    return home, root


def deskhand_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("DESKHAND_HOME", None)
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def deskhand(*args: str, env: dict[str, str] | None = None, stdin: str = "", timeout: float = 60):
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        capture_output=True,
        text=True,
        input=stdin,
        env=env or deskhand_env(),
        timeout=timeout,
        cwd=REPO,
    )


def events_of(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_ask_json_creates_edits_and_reads_files(llm: ScriptedLLM, workspace):
    home, root = workspace
    notes = root / "notes.md"
    llm.add(
        tool_calls(
            ("w1", "fs_write_file", {"path": str(notes), "content": "# Todo\n- milk\n"}),
            text_before="Creating the file.",
            arg_chunk_size=4,
        )
    )
    llm.add(
        tool_calls(
            (
                "e1",
                "fs_edit_file",
                {"path": str(notes), "old_text": "- milk", "new_text": "- milk\n- eggs"},
            )
        )
    )
    llm.add(tool_calls(("r1", "fs_read_file", {"path": str(notes)})))
    llm.add(text("Your list has milk and eggs.", chunk_size=5))
    proc = deskhand(
        "--home",
        str(home),
        "ask",
        "make a todo list",
        "--base-url",
        llm.openai_base_url,
        "--model",
        "m",
        "--json",
        "--yes",
        env=deskhand_env(OPENAI_API_KEY=SECRET),
    )
    assert proc.returncode == 0, proc.stderr
    assert notes.read_text() == "# Todo\n- milk\n- eggs\n"
    events = events_of(proc.stdout)
    calls = [e for e in events if e["type"] == "tool_call"]
    assert [c["name"] for c in calls] == ["fs_write_file", "fs_edit_file", "fs_read_file"]
    assert calls[0]["arguments"]["content"] == "# Todo\n- milk\n"
    results = {e["id"]: e for e in events if e["type"] == "tool_result"}
    assert all(r["ok"] for r in results.values())
    assert "- eggs" in results["r1"]["content"]
    answer = "".join(e["delta"] for e in events if e["type"] == "text")
    assert answer == "Creating the file.Your list has milk and eggs."
    assert events[-1]["type"] == "done" and events[-1]["stop_reason"] == "end_turn"
    assert events[-1]["usage"]["output_tokens"] > 0
    # what the model server received
    assert len(llm.requests) == 4
    last = llm.requests[-1]
    tool_msgs = [m for m in last.body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["w1", "e1", "r1"]
    # OPENAI_API_KEY is for api.openai.com only: never sent to another server
    assert last.headers.get("authorization") is None
    for recorded in llm.requests:
        assert SECRET not in json.dumps(recorded.body)
    # and the history is in the store
    db = sqlite3.connect(home / "deskhand.db")
    roles = [r[0] for r in db.execute("SELECT role FROM messages ORDER BY id")]
    assert roles == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]


def test_without_yes_writes_are_denied_and_disk_is_unchanged(llm: ScriptedLLM, workspace):
    home, root = workspace
    existing = root / "keep.txt"
    existing.write_text("original")
    llm.add(
        tool_calls(
            ("w1", "fs_write_file", {"path": str(existing), "content": "clobbered"}),
            ("d1", "fs_delete", {"path": str(existing)}),
        )
    )
    llm.add(text("I was not allowed to change it."))
    proc = deskhand(
        "--home",
        str(home),
        "ask",
        "overwrite it",
        "--base-url",
        llm.openai_base_url,
        "--model",
        "m",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert existing.read_text() == "original"
    events = events_of(proc.stdout)
    decisions = [e for e in events if e["type"] == "approval"]
    assert {d["decision"] for d in decisions} == {"deny"} and len(decisions) == 2
    results = [e for e in events if e["type"] == "tool_result"]
    assert all(not r["ok"] and "declined" in r["content"] for r in results)


def test_deny_rule_in_settings_beats_yes(llm: ScriptedLLM, workspace):
    home, root = workspace
    settings = json.loads((home / "settings.json").read_text())
    settings["approvals"] = {"always_allow": ["fs_*"], "deny": ["fs_write_file"]}
    (home / "settings.json").write_text(json.dumps(settings))
    llm.add(tool_calls(("w1", "fs_write_file", {"path": str(root / "x"), "content": "x"})))
    llm.add(text("blocked"))
    proc = deskhand(
        "--home",
        str(home),
        "ask",
        "write",
        "--base-url",
        llm.openai_base_url,
        "--model",
        "m",
        "--json",
        "--yes",
    )
    assert proc.returncode == 0
    assert not (root / "x").exists()
    result = next(e for e in events_of(proc.stdout) if e["type"] == "tool_result")
    assert "deny rule" in result["content"]


def test_anthropic_text_mode_streams_to_stdout(llm: ScriptedLLM, workspace):
    home, _ = workspace
    llm.add(text("Plain answer.\n"))
    proc = deskhand(
        "--home",
        str(home),
        "ask",
        "hi",
        "--provider",
        "anthropic",
        "--base-url",
        llm.anthropic_base_url,
        "--model",
        "claude-test",
        env=deskhand_env(ANTHROPIC_API_KEY=SECRET),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Plain answer.\n"
    assert llm.requests[0].path == "/v1/messages"
    assert llm.requests[0].headers.get("x-api-key") is None  # the key is for its own cloud


def test_model_is_picked_from_the_server_when_not_given(llm: ScriptedLLM, workspace):
    home, _ = workspace
    llm.add(text("hi"))
    proc = deskhand("--home", str(home), "ask", "hi", "--base-url", llm.openai_base_url)
    assert proc.returncode == 0, proc.stderr
    assert "using model" in proc.stderr
    assert llm.requests[-1].body["model"]


def test_conversation_can_be_continued(llm: ScriptedLLM, workspace):
    home, _ = workspace
    llm.add(text("first answer"))
    llm.add(text("second answer"))
    args = ("--base-url", llm.openai_base_url, "--model", "m", "--json")
    first = deskhand("--home", str(home), "ask", "first", *args)
    assert first.returncode == 0
    conv_id = (
        sqlite3.connect(home / "deskhand.db").execute("SELECT id FROM conversations").fetchone()[0]
    )
    second = deskhand("--home", str(home), "ask", "second", "--conversation", conv_id, *args)
    assert second.returncode == 0, second.stderr
    sent = [m["content"] for m in llm.requests[-1].body["messages"] if m["role"] != "system"]
    assert sent == ["first", "first answer", "second"]


def test_exit_codes(llm: ScriptedLLM, workspace, unused_port: int):
    home, _ = workspace
    unreachable = deskhand(
        "--home",
        str(home),
        "ask",
        "hi",
        "--base-url",
        f"http://127.0.0.1:{unused_port}/v1",
        "--model",
        "m",
        "--json",
    )
    assert unreachable.returncode == 3
    err = events_of(unreachable.stdout)[-1]
    assert err["type"] == "error" and f"127.0.0.1:{unused_port}" in err["message"]
    no_provider = deskhand("--home", str(home), "ask", "hi")
    assert no_provider.returncode == 2 and "no model provider is configured" in no_provider.stderr
    bad_usage = deskhand("ask")
    assert bad_usage.returncode == 2
    missing = deskhand(
        "--home",
        str(home),
        "ask",
        "hi",
        "--conversation",
        "nope",
        "--base-url",
        llm.openai_base_url,
        "--model",
        "m",
    )
    assert missing.returncode == 2 and "no conversation" in missing.stderr


def test_tools_list_json_shape(workspace):
    home, _ = workspace
    proc = deskhand("--home", str(home), "tools", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    tools = {t["name"]: t for t in json.loads(proc.stdout)}
    write = tools["fs_write_file"]
    assert set(write) == {
        "name",
        "category",
        "description",
        "operations",
        "parameters",
        "available",
        "unavailable_reason",
    }
    assert write["operations"] == ["create", "update"] and write["available"] is True
    assert "content" in write["parameters"]["properties"]
    only_core = json.loads(
        deskhand("--home", str(home), "tools", "list", "--category", "core", "--json").stdout
    )
    assert {t["name"] for t in only_core} == {"browse_tools", "get_tool_details"}


def test_tools_call(workspace):
    home, root = workspace
    (root / "a.txt").write_text("one\ntwo\nthree\n")
    read = deskhand(
        "--home",
        str(home),
        "tools",
        "call",
        "fs_read_file",
        "--args",
        json.dumps({"path": str(root / "a.txt"), "start_line": 2, "end_line": 2}),
        "--json",
    )
    assert read.returncode == 0, read.stderr
    assert events_of(read.stdout) == [events_of(read.stdout)[-1]]  # nothing to say first
    assert events_of(read.stdout)[-1]["content"].startswith("two")
    write_args = json.dumps({"path": str(root / "b.txt"), "content": "new"})
    refused = deskhand(
        "--home", str(home), "tools", "call", "fs_write_file", "--args", write_args, "--json"
    )
    assert refused.returncode == 1 and not (root / "b.txt").exists()
    *before, result = events_of(refused.stdout)
    assert "not approved" in result["error"] and result["type"] == "result"
    assert [e["type"] for e in before] == ["approval_requested", "approval"]
    assert before[1]["decision"] == "deny" and before[0]["name"] == "fs_write_file"
    allowed = deskhand(
        "--home",
        str(home),
        "tools",
        "call",
        "fs_write_file",
        "--args",
        write_args,
        "--yes",
        "--json",
    )
    assert allowed.returncode == 0 and (root / "b.txt").read_text() == "new"
    *before, result = events_of(allowed.stdout)
    assert result["ok"] and [(e["type"], e["source"]) for e in before] == [("approval", "yes")]
    unknown = deskhand("--home", str(home), "tools", "call", "fs_nope", "--json")
    assert unknown.returncode == 2 and "no tool named" in events_of(unknown.stdout)[-1]["error"]
    bad = deskhand("--home", str(home), "tools", "call", "fs_read_file", "--args", "{", "--json")
    assert bad.returncode == 2 and "not valid JSON" in events_of(bad.stdout)[-1]["error"]


def test_sigkill_while_streaming_keeps_every_completed_message(llm: ScriptedLLM, workspace):
    """A crash loses at most the message being streamed."""
    home, root = workspace
    (root / "a.txt").write_text("A")
    llm.add(tool_calls(("r1", "fs_read_file", {"path": str(root / "a.txt")})))
    llm.add(hang("this partial answer is being streamed when the process dies"))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli",
            "--home",
            str(home),
            "ask",
            "read a",
            "--base-url",
            llm.openai_base_url,
            "--model",
            "m",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=deskhand_env(),
        cwd=REPO,
    )
    try:
        for line in proc.stdout:  # wait until the second turn is streaming
            event = json.loads(line)
            if event["type"] == "text":
                break
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()
        llm.release()
    db = sqlite3.connect(home / "deskhand.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = db.execute("SELECT role, content, tool_call_id FROM messages ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ["user", "assistant", "tool"]
    assert rows[2][2] == "r1" and "A" in rows[2][1]
