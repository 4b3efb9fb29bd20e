"""MCP lifecycle: servers start in parallel, the registry follows them (late
start, reconnection, `notifications/tools/list_changed`), a hung server stalls only calls to
its own tools, and `tools list` / `tools call` / `ask` all see the same MCP tools.

Real server processes from tests/mcp_servers.py; `deskhand` itself as a subprocess where the
user would run it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from app.core.mcp.manager import McpManager
from app.core.runtime import MCP_LIST_WAIT, Runtime
from tests.fakellm import ScriptedLLM, text, tool_calls
from tests.test_cli import deskhand, deskhand_env
from tests.test_mcp import SERVER, _http_server, wait_for, write_config
from tools.spec import ToolContext, ToolError, ToolResult


def entry(mode: str, markers: Path, **extra: Any) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [SERVER, mode],
        "env": {"MCP_TEST_MARKERS": str(markers)},
        **extra,
    }


def run_tool(runtime: Runtime, name: str, home: Path, **args: Any) -> ToolResult:
    """The tool's body as the runner calls it (no approval: these tests are about the
    lifecycle; approval of MCP tools is tested in test_mcp / test_approvals_cannot_be_tricked)."""
    manifest = runtime.registry.get(name)
    assert manifest is not None, f"{name} is not in the registry"
    assert callable(manifest.impl)
    try:
        return manifest.impl(manifest.params.model_validate(args), ToolContext(home=home))
    except ToolError as exc:
        return ToolResult.failure(str(exc))


@pytest.fixture
def good_url(unused_port: int) -> Iterator[str]:
    """A good server already listening (Streamable HTTP), so timings measure Deskhand only."""
    yield from _http_server("http", unused_port)


def timed(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    proc = deskhand(*args, env=deskhand_env())
    return proc, time.monotonic() - started


# ---- never a stall --------------------------------------------------------------------------


def test_tools_list_with_a_hung_server_is_fast_and_lists_the_good_one(
    tmp_path: Path, markers: Path, good_url: str
) -> None:
    alone, with_hung = tmp_path / "alone", tmp_path / "with-hung"
    for home in (alone, with_hung):
        home.mkdir()
    write_config(alone, {"good": {"url": good_url}})
    write_config(with_hung, {"good": {"url": good_url}, "hung": entry("hang", markers)})

    timed("--home", str(alone), "tools", "list", "--json")  # warm the file caches once
    base, base_time = timed("--home", str(alone), "tools", "list", "--json")
    hung, hung_time = timed("--home", str(with_hung), "tools", "list", "--json")
    print(f"tools list: {base_time:.2f} s alone, {hung_time:.2f} s with a hung server")

    assert base.returncode == 0 and hung.returncode == 0, hung.stderr
    assert hung_time - base_time < 10  # its bounded 1.5 s wait, never the hung server's 20 s
    names = {t["name"] for t in json.loads(hung.stdout)}
    assert {"mcp__good__echo", "mcp__good__add"} <= names
    assert not any(n.startswith("mcp__hung__") for n in names)
    assert "the MCP server 'hung' is not ready (still starting after" in hung.stderr
    assert {t["name"] for t in json.loads(base.stdout)} == names

    one, _ = timed("--home", str(with_hung), "tools", "list", "--category", "mcp:good", "--json")
    assert {t["category"] for t in json.loads(one.stdout)} == {"mcp:good"}
    waiting = deskhand("--home", str(with_hung), "tools", "list", "--category", "mcp:hung")
    assert waiting.returncode == 0 and "'hung' is not ready" in waiting.stderr


def test_tools_list_shows_the_last_known_list_of_a_server_still_starting(
    home: Path, markers: Path
) -> None:
    """A server that listed its tools once and now hangs at start: `tools list` does not
    wait for it, and shows its last known tools marked as such (not callable); once its
    mcp.json entry changes, that old list is no longer shown as its own."""
    write_config(home, {"flaky": entry("lc", markers)})
    ready = deskhand("--home", str(home), "mcp", "list", "--wait", "30", env=deskhand_env())
    assert ready.returncode == 0 and "ready" in ready.stdout, ready.stderr
    (markers / "hang").write_text("1")

    listed = deskhand("--home", str(home), "tools", "list", "--json", env=deskhand_env())
    assert listed.returncode == 0, listed.stderr
    known = {t["name"]: t for t in json.loads(listed.stdout) if t.get("last_known")}
    assert "mcp__flaky__echo" in known and known["mcp__flaky__echo"]["available"] is False
    assert "its last known tools are listed, marked as such" in listed.stderr
    text = deskhand("--home", str(home), "tools", "list", "--category", "mcp:flaky",
                    env=deskhand_env())
    assert "[last known list: the server is not ready yet]" in text.stdout
    assert "mcp__flaky__echo" in text.stdout and "[last known]" in text.stdout

    write_config(home, {"flaky": entry("lc", markers, cwd=str(home))})  # another identity
    changed = deskhand("--home", str(home), "tools", "list", "--json", env=deskhand_env())
    assert not any(t.get("last_known") for t in json.loads(changed.stdout))
    assert "its tools are not listed" in changed.stderr


def test_a_call_to_a_hung_server_fails_fast_while_the_good_one_works(
    tmp_path: Path, markers: Path, good_url: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # the hung server keeps its default timeout: a call waiting for it would take 20 s
    write_config(home, {"hung": entry("hang", markers), "good": {"url": good_url}})
    good, good_time = timed(
        "--home", str(home), "tools", "call", "mcp__good__echo",
        "--args", '{"text": "still here"}', "--yes", "--json",
    )
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout.splitlines()[-1])["content"] == "still here"
    assert good_time < 18  # not the hung server's 20 s

    write_config(home, {"hung": entry("hang", markers, timeout=2), "good": {"url": good_url}})
    hung, hung_time = timed(
        "--home", str(home), "tools", "call", "mcp__hung__echo", "--args", "{}", "--json"
    )
    assert hung.returncode == 2
    error = json.loads(hung.stdout.splitlines()[-1])["error"]
    assert error.startswith("the MCP server 'hung' is not ready (still starting after 2"), error
    assert hung_time < 18  # its 2 s, not the default 20 s


def test_a_registered_tool_of_a_server_that_hangs_on_restart_fails_with_a_clear_message(
    home: Path, markers: Path, good_url: str
) -> None:
    """A server crashes and hangs when started again: calls to its tools wait a bounded
    time and say why; the other server's tools keep working meanwhile."""
    write_config(home, {"flaky": entry("lc", markers), "good": {"url": good_url}})
    runtime = Runtime(home, entry_points=False)
    runtime.mcp.ready_wait = 1.0
    try:
        runtime.mcp_tools(wait=30)
        assert run_tool(runtime, "mcp__flaky__echo", home, text="a").content == "a"
        (markers / "hang").write_text("1")
        crashed = run_tool(runtime, "mcp__flaky__crash", home)
        assert not crashed.ok
        assert wait_for(lambda: runtime.mcp.status("flaky").status.value == "starting", 15)
        started = time.monotonic()
        stuck = run_tool(runtime, "mcp__flaky__echo", home, text="b")
        assert time.monotonic() - started < 15  # its 1 s ready wait, not the server's hang
        assert not stuck.ok and "the MCP server 'flaky' is not ready" in (stuck.error or "")
        assert run_tool(runtime, "mcp__good__echo", home, text="c").content == "c"
    finally:
        runtime.close()


def test_servers_start_in_parallel(home: Path, markers: Path) -> None:
    """Three hung servers and a good one: the good one is ready no later than it would be
    alone (no server waits for another)."""
    servers = {f"hung{i}": entry("hang", markers) for i in range(3)}
    servers["good"] = entry("stdio", markers)
    manager = McpManager(write_config(home, servers), home=home)
    try:
        states = {s.name: s for s in manager.start(wait=0)}
        assert {s.status.value for s in states.values()} <= {"starting", "stopped"}
        started = time.monotonic()
        manager.wait_settled(30, ["good"])
        assert manager.status("good").status.value == "ready"  # type: ignore[union-attr]
        assert time.monotonic() - started < 25
        assert all(manager.status(f"hung{i}").status.value == "starting" for i in range(3))  # type: ignore[union-attr]
        assert "mcp__good__echo" in {m.name for m in manager.tools("good")}
    finally:
        started = time.monotonic()
        manager.shutdown()
        assert time.monotonic() - started < 5  # hung servers are ended, not waited for


# ---- the registry follows the servers ---------------------------------------------------------


def test_a_late_server_joins_the_registry(home: Path, markers: Path) -> None:
    write_config(home, {"late": entry("late", markers)})
    runtime = Runtime(home, entry_points=False)
    try:
        assert runtime.start_mcp()
        runtime.wait_mcp(MCP_LIST_WAIT)
        assert not any(n.startswith("mcp__late__") for n in runtime.registry.names())
        (markers / "go").write_text("1")
        assert wait_for(lambda: "mcp__late__echo" in runtime.registry, 30)
        assert runtime.registry.source_of("mcp__late__echo").id == "mcp:late"
        assert run_tool(runtime, "mcp__late__echo", home, text="late").content == "late"
    finally:
        runtime.close()


def test_list_changed_adds_and_removes_a_tool(home: Path, markers: Path) -> None:
    write_config(home, {"lc": entry("lc", markers)})
    runtime = Runtime(home, entry_points=False)
    try:
        runtime.mcp_tools(wait=30)
        assert "mcp__lc__extra" not in runtime.registry
        before = runtime.registry.source_of("mcp__lc__echo")
        assert run_tool(runtime, "mcp__lc__grow", home).content == "grown"
        assert wait_for(lambda: "mcp__lc__extra" in runtime.registry, 15)
        source = runtime.registry.source_of("mcp__lc__extra")
        assert source.id == "mcp:lc" and source.tools["mcp__lc__extra"]  # a definition hash
        assert source.tools["mcp__lc__echo"] == before.tools["mcp__lc__echo"]
        assert "extra" in runtime.mcp.status("lc").tools
        assert run_tool(runtime, "mcp__lc__extra", home).content == "extra here"
        assert run_tool(runtime, "mcp__lc__shrink", home).content == "shrunk"
        assert wait_for(lambda: "mcp__lc__extra" not in runtime.registry, 15)
        assert "mcp__lc__echo" in runtime.registry
    finally:
        runtime.close()


def test_a_reconnected_server_is_registered_again_with_what_it_says_now(
    home: Path, markers: Path
) -> None:
    write_config(home, {"lc": entry("lc", markers)})
    runtime = Runtime(home, entry_points=False)
    runtime.mcp._backoff_start = 0.1
    try:
        runtime.mcp_tools(wait=30)
        assert "mcp__lc__extra" not in runtime.registry
        (markers / "extra").write_text("1")  # the restarted server has one more tool
        assert not run_tool(runtime, "mcp__lc__crash", home).ok
        assert wait_for(lambda: "mcp__lc__extra" in runtime.registry, 30)
        assert runtime.registry.source_of("mcp__lc__extra").tools["mcp__lc__extra"]
    finally:
        runtime.close()


def test_reload_and_remove_one_server(home: Path, markers: Path) -> None:
    config = write_config(home, {"a": entry("stdio", markers), "b": entry("lc", markers)})
    runtime = Runtime(home, entry_points=False)
    try:
        runtime.mcp_tools(wait=30)
        assert "mcp__a__echo" in runtime.registry and "mcp__b__grow" in runtime.registry
        pid_b = run_tool(runtime, "mcp__b__pid", home).content
        write_config(home, {"a": {**entry("stdio", markers), "disabled": True},
                            "b": entry("lc", markers)})
        state = runtime.mcp.reload("a")
        assert state is not None and state.status.value == "disabled"
        assert "mcp__a__echo" not in runtime.registry
        assert run_tool(runtime, "mcp__b__pid", home).content == pid_b  # b never restarted
        write_config(home, {"a": entry("stdio", markers), "b": entry("lc", markers)})
        runtime.mcp.reload("a", wait=30)
        assert "mcp__a__echo" in runtime.registry
        write_config(home, {"a": entry("stdio", markers)})
        runtime.mcp.remove("b")
        assert not any(n.startswith("mcp__b__") for n in runtime.registry.names())
        assert [s.name for s in runtime.mcp.states()] == ["a"]
        assert config.exists()
    finally:
        runtime.close()


def test_a_server_changing_its_list_never_takes_another_servers_tool_name(
    home: Path, markers: Path, tmp_path: Path
) -> None:
    """Attack: a hostile server named like a trusted one ("My-Server" vs "my_server") waits
    until it is running, then announces a new tool whose name the trusted server already
    has (`notifications/tools/list_changed`). Safe: the name stays the trusted server's."""
    trusted_marks = tmp_path / "trusted"
    trusted_marks.mkdir()
    (trusted_marks / "extra").write_text("1")
    write_config(
        home, {"my_server": entry("lc", trusted_marks), "My-Server": entry("lc", markers)}
    )
    runtime = Runtime(home, entry_points=False)
    try:
        runtime.mcp_tools(wait=30)
        assert runtime.registry.source_of("mcp__my_server__extra").id == "mcp:my_server"
        hostile = runtime.mcp.tools("My-Server")
        grow = next(m for m in hostile if m.name == "mcp__my_server__grow")
        assert callable(grow.impl)
        grow.impl(grow.params.model_validate({}), ToolContext(home=home))
        assert wait_for(lambda: "extra" in runtime.mcp.status("My-Server").tools, 15)
        assert wait_for(
            lambda: "mcp__my_server__extra" in {m.name for m in runtime.mcp.tools("My-Server")}
        )
        assert runtime.registry.source_of("mcp__my_server__extra").id == "mcp:my_server"
        assert run_tool(runtime, "mcp__my_server__pid", home).ok
    finally:
        runtime.close()


# ---- everywhere -------------------------------------------------------------------------------


def test_ask_offers_mcp_tools_to_the_model(
    llm: ScriptedLLM, tmp_path: Path, markers: Path, good_url: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    write_config(home, {"good": {"url": good_url}, "hung": entry("hang", markers)})
    llm.add(tool_calls(("b1", "browse_tools", {"category": "mcp:good"})))
    llm.add(text("Found them."))
    started = time.monotonic()
    proc = deskhand(
        "--home", str(home), "ask", "which tools?", "--base-url", llm.openai_base_url,
        "--model", "m", "--json", env=deskhand_env(OPENAI_API_KEY="sk-test"),
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 20
    first, second = llm.requests
    system = first.body["messages"][0]["content"]
    assert "mcp:good" in system  # the category is offered for browsing from the first request
    offered = {t["function"]["name"] for t in second.body["tools"]}
    assert "mcp__good__echo" in offered  # browse_tools found it and activated it
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    result = next(e for e in events if e["type"] == "tool_result")
    assert "mcp__good__echo" in result["content"]
