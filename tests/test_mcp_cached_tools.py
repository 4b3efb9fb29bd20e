"""`deskhand ask` offers MCP tools from each server's last listing (app/core/mcp/cached.py):
the first request goes out before the MCP SDK is imported or any server started; an edited
mcp.json entry makes its cache unusable; a call to a cached tool waits for its server, and
fails plainly when the server no longer has the tool."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.core.mcp.cached import cached_tools
from app.core.mcp.manager import McpManager
from app.core.paths import mcp_path
from app.core.runtime import Runtime
from tests.fakellm import ScriptedLLM, text
from tools.spec import ToolContext, ToolError, ToolResult

REPO = Path(__file__).resolve().parents[1]
SERVER = str(REPO / "tests" / "mcp_servers.py")

#: Runs `deskhand` and notes, in order, when the MCP SDK is first imported and when the
#: first chat request is handed to httpx; prints them as JSON at exit.
CHILD = """
import atexit, json, sys
events = []

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "mcp" and "mcp-import" not in events:
            events.append("mcp-import")
        return None

sys.meta_path.insert(0, Watch())
import httpx

send = httpx.AsyncClient.send

async def noted(self, request, **kwargs):
    if request.url.path.endswith("/chat/completions"):
        events.append("request")
    return await send(self, request, **kwargs)

httpx.AsyncClient.send = noted
atexit.register(lambda: print("EVENTS " + json.dumps(events), file=sys.stderr))
from app.cli import main
main(sys.argv[1:])
"""


def entry(markers: Path, mode: str = "stdio", **extra: Any) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [SERVER, mode],
        "env": {"MCP_TEST_MARKERS": str(markers)},
        **extra,
    }


def write_servers(home: Path, servers: dict[str, Any]) -> None:
    mcp_path(home).write_text(json.dumps({"mcpServers": servers}), "utf-8")


def list_once(home: Path) -> None:
    """The servers start and list their tools once (as any earlier use of them would)."""
    manager = McpManager(mcp_path(home), home=home)
    try:
        manager.start(wait=30)
        assert all(s.status.value == "ready" for s in manager.states()), manager.states()
    finally:
        manager.shutdown()


def no_call(*_: Any) -> ToolResult:
    raise AssertionError("not called")


def run_cached(runtime: Runtime, name: str, **args: Any) -> ToolResult:
    manifest = runtime.registry.get(name)
    assert manifest is not None and callable(manifest.impl)
    ctx = ToolContext(home=runtime.home, call_id="call-1")
    try:
        return manifest.impl(manifest.params.model_validate(args), ctx)
    except ToolError as exc:
        return ToolResult.failure(str(exc))


def test_ask_sends_its_first_request_before_importing_the_mcp_sdk(
    home: Path, markers: Path, llm: ScriptedLLM
) -> None:
    write_servers(home, {"one": entry(markers), "two": entry(markers)})
    list_once(home)
    llm.add(text("done"))
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPO),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
    }
    argv = ["--home", str(home), "ask", "hi", "--base-url", llm.openai_base_url, "--model", "m"]
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stderr.splitlines() if x.startswith("EVENTS "))
    events = json.loads(line.removeprefix("EVENTS "))
    assert "request" in events
    assert "mcp-import" not in events[: events.index("request")]
    system = llm.requests[0].body["messages"][0]["content"]
    assert "mcp:one" in system and "mcp:two" in system  # their cached tools were offered


def test_an_edited_entry_makes_its_cached_tools_unusable(home: Path, markers: Path) -> None:
    write_servers(home, {"one": entry(markers), "two": entry(markers)})
    list_once(home)
    found, missing = cached_tools(home, mcp_path(home), no_call)
    assert set(found) == {"one", "two"} and missing == []
    assert "mcp__one__echo" in {m.name for m in found["one"].manifests}

    write_servers(home, {"one": entry(markers, timeout=30), "two": entry(markers)})
    found, missing = cached_tools(home, mcp_path(home), no_call)
    assert set(found) == {"two"} and missing == ["one"]


def test_a_cached_tool_waits_for_its_server_and_works(home: Path, markers: Path) -> None:
    write_servers(home, {"srv": entry(markers)})
    list_once(home)
    runtime = Runtime(home)
    try:
        assert runtime.offer_cached_mcp() == []
        assert "mcp__srv__echo" in runtime.registry
        assert "mcp" not in runtime.__dict__  # nothing started yet
        source = runtime.registry.source_of("mcp__srv__echo")
        assert source is not None and source.id == "mcp:srv"  # the same trust as a live one

        result = run_cached(runtime, "mcp__srv__echo", text="hello", times=2)
        assert result.ok, result.error
        assert result.content == "hello hello"
    finally:
        runtime.close()


def test_a_server_that_no_longer_has_the_tool_says_so(home: Path, markers: Path) -> None:
    (markers / "extra").write_text("")  # the server lists `extra` this time only
    write_servers(home, {"srv": entry(markers, "lc")})
    list_once(home)
    (markers / "extra").unlink()
    runtime = Runtime(home)
    try:
        runtime.offer_cached_mcp()
        assert "mcp__srv__extra" in runtime.registry

        result = run_cached(runtime, "mcp__srv__extra")
        assert not result.ok
        assert "no longer has the tool 'extra'" in (result.error or "")
    finally:
        runtime.close()


@pytest.mark.parametrize(
    "damage", ["{", '{"srv": {"entry": 1, "offers": [{"name": 3}]}}', "[" * 100_000]
)
def test_a_damaged_cache_is_no_cache(home: Path, markers: Path, damage: str) -> None:
    write_servers(home, {"srv": entry(markers)})
    (home / "mcp-known-tools.json").write_text(damage, "utf-8")
    found, missing = cached_tools(home, mcp_path(home), no_call)
    assert found == {} and missing == ["srv"]


def test_cached_tools_are_trusted_under_the_server_the_entry_names_now(
    home: Path, markers: Path
) -> None:
    """A cache written from an older server (its fingerprint in the file) under the current
    entry's hash: the tools count as the current entry's server's, whose trust is its own,
    and a call refuses a running server that is not that one."""
    from app.core.mcp.cached import server_fingerprint

    write_servers(home, {"srv": entry(markers)})
    list_once(home)
    cache = home / "mcp-known-tools.json"
    data = json.loads(cache.read_text("utf-8"))
    data["srv"]["fingerprint"] = "an-older-server"  # e.g. listed before mcp.json changed
    cache.write_text(json.dumps(data), "utf-8")
    found, _missing = cached_tools(home, mcp_path(home), no_call)
    now = server_fingerprint("srv", entry(markers))
    assert now is not None and found["srv"].source.fingerprint == now

    manager = McpManager(mcp_path(home), home=home)
    try:
        manager.start(wait=30)
        ctx = ToolContext(home=home, call_id="c1")
        with pytest.raises(ToolError, match="not the one this tool was offered from"):
            manager.call_cached_tool("srv", "echo", "", "an-older-server", {"text": "x"}, ctx)
    finally:
        manager.shutdown()


def test_a_server_listing_too_much_keeps_no_offers(home: Path) -> None:
    """A hostile server cannot bloat the cache every `ask` reads: over 1 MB, it keeps none
    (it is then started before the first request, as a server with no cache)."""
    from app.core.mcp.known_tools import MAX_OFFERS_CHARS, cached_offers, remember

    big = [{"name": "mcp__srv__t", "description": "x" * (MAX_OFFERS_CHARS + 1)}]
    remember(home, "srv", "fp", [], entry="hash", offers=big)
    assert cached_offers(home, "srv", "hash") is None
    remember(home, "srv", "fp", [], entry="hash", offers=[{"name": "mcp__srv__t"}])
    assert cached_offers(home, "srv", "hash") is not None
