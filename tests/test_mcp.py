"""MCP client against servers written with the SDK in tests/mcp_servers.py."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from app.core.mcp.config import (
    McpConfigError,
    ServerConfig,
    claude_desktop_config_path,
    import_servers,
    keyring_key,
    load_config,
    read_servers_block,
    resolve_secrets,
)
from app.core.mcp.manager import McpManager
from app.core.mcp.manifests import build_manifests, operations_of, tool_name
from app.core.mcp.status import ServerState, Status
from tests.fixtures_qt import wait_until
from tools.redact import Tripwire
from tools.registry import ToolRegistry
from tools.runner import ToolRunner
from tools.spec import Operation, ToolContext, ToolManifest, ToolResult

SERVER = str(Path(__file__).with_name("mcp_servers.py"))
TOKEN = "tok-7c1e9a55d2"


# ---- helpers ----------------------------------------------------------------------------------


def stdio_entry(markers: Path, **env: str) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [SERVER, "stdio"],
        "env": {"MCP_TEST_MARKERS": str(markers), **env},
    }


def write_config(home: Path, servers: dict[str, Any]) -> Path:
    path = home / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}), "utf-8")
    return path


def wait_for(predicate: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def call(manifests: dict[str, ToolManifest], name: str, ctx: ToolContext, **args: Any) -> Any:
    manifest = manifests[name]
    assert callable(manifest.impl)
    return manifest.impl(manifest.params.model_validate(args), ctx)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


@pytest.fixture
def stdio_manager(home: Path, markers: Path) -> Iterator[McpManager]:
    config = write_config(home, {"test": stdio_entry(markers, MCP_TEST_TOKEN=TOKEN)})
    manager = McpManager(config, home=home, backoff_start=0.2)
    yield manager
    manager.shutdown()


def _http_server(mode: str, port: int) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, SERVER, mode, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def listening() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        if not wait_for(listening, 20):
            pytest.fail(f"the {mode} test server did not start")
        yield f"http://127.0.0.1:{port}/{'sse' if mode == 'sse' else 'mcp'}"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def http_url(unused_port: int) -> Iterator[str]:
    yield from _http_server("http", unused_port)


@pytest.fixture
def sse_url(unused_port: int) -> Iterator[str]:
    yield from _http_server("sse", unused_port)


# ---- configuration ----------------------------------------------------------------------------


def test_config_transports_and_errors(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        {
            "local": {"command": "npx", "args": ["-y", "srv"], "env": {"A": "1"}},
            "remote": {"url": "https://example.com/mcp", "headers": {"X-Key": "v"}},
            "legacy": {"url": "https://example.com/sse"},
            "typed": {"type": "sse", "url": "https://example.com/events"},
            "off": {"command": "x", "disabled": True},
        },
    )
    configs = {c.name: c for c in load_config(path)}
    assert configs["local"].transport == "stdio"
    assert configs["local"].args == ("-y", "srv")
    assert configs["remote"].transport == "http"
    assert configs["remote"].headers == {"X-Key": "v"}
    assert configs["legacy"].transport == "sse"
    assert configs["typed"].transport == "sse"
    assert configs["off"].disabled
    assert load_config(tmp_path / "missing.json") == []
    with pytest.raises(McpConfigError, match="needs either"):
        ServerConfig.from_json("bad", {"args": []})
    (tmp_path / "broken.json").write_text("{nope", "utf-8")
    with pytest.raises(McpConfigError, match="not valid JSON"):
        load_config(tmp_path / "broken.json")


def test_keyring_references_resolve_and_literal_tokens_are_known() -> None:
    store = {"mcp/gh/GITHUB_TOKEN": "ghp_secretvalue"}
    values = {"GITHUB_TOKEN": "keyring:mcp/gh/GITHUB_TOKEN", "PLAIN": "x"}
    assert resolve_secrets(values, store.get) == {"GITHUB_TOKEN": "ghp_secretvalue", "PLAIN": "x"}
    with pytest.raises(McpConfigError, match="does not exist"):
        resolve_secrets({"T": "keyring:mcp/gh/missing"}, store.get)
    config = ServerConfig.from_json(
        "api",
        {"url": "https://x/mcp", "headers": {"Authorization": "Bearer abcdef", "Accept": "j"}},
    )
    assert config.credential_values() == ["abcdef"]
    assert keyring_key("my server", "API_KEY") == "mcp/my%20server/API_KEY"  # reversible
    assert keyring_key("my_server", "API_KEY") == "mcp/my_server/API_KEY"


def test_import_claude_desktop_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(sys, "platform", "linux")
    source = claude_desktop_config_path()
    assert source == tmp_path / "xdg" / "Claude" / "claude_desktop_config.json"
    source.parent.mkdir(parents=True)
    source.write_text(
        json.dumps(
            {
                "globalShortcut": "Ctrl+Space",
                "mcpServers": {
                    "github": {
                        "command": "npx",
                        "args": ["-y", "@modelcontextprotocol/server-github"],
                        "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_abc123", "LOG": "1"},
                    },
                    "existing": {"url": "https://new.example/mcp"},
                },
            }
        ),
        "utf-8",
    )
    target = tmp_path / "home" / "mcp.json"
    target.parent.mkdir()
    write_config(target.parent, {"existing": {"url": "https://old.example/mcp"}})
    stored: dict[str, str] = {}
    report = import_servers(target, set_secret=stored.__setitem__)
    assert report.source == source
    assert report.added == ["github"] and report.skipped == ["existing"]
    servers = read_servers_block(target)
    assert servers["existing"]["url"] == "https://old.example/mcp"
    env = servers["github"]["env"]
    assert env["GITHUB_PERSONAL_ACCESS_TOKEN"] == "keyring:mcp/github/GITHUB_PERSONAL_ACCESS_TOKEN"
    assert env["LOG"] == "1"
    assert stored == {"mcp/github/GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_abc123"}
    assert "ghp_abc123" not in target.read_text("utf-8")
    assert target.stat().st_mode & 0o777 == 0o600

    again = import_servers(target, source, overwrite=True)
    assert sorted(again.added) == ["existing", "github"]
    assert read_servers_block(target)["existing"]["url"] == "https://new.example/mcp"
    with pytest.raises(McpConfigError, match="does not exist"):
        import_servers(target, tmp_path / "nowhere.json")


def test_cli_mcp_import(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    source = tmp_path / "claude_desktop_config.json"
    source.write_text(json.dumps({"mcpServers": {"fs": {"command": "fs-server"}}}), "utf-8")
    assert main(["mcp", "import", str(source), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["added"] == ["fs"]
    assert read_servers_block(home / "mcp.json") == {"fs": {"command": "fs-server"}}
    assert main(["mcp", "import", str(tmp_path / "nope.json")]) == 2


# ---- manifests --------------------------------------------------------------------------------


class _Annotations:
    def __init__(self, read_only: bool | None = None, destructive: bool | None = None) -> None:
        self.read_only_hint = read_only
        self.destructive_hint = destructive


class _Tool:
    def __init__(self, name: str, schema: dict[str, Any], annotations: Any = None) -> None:
        self.name = name
        self.title = None
        self.description = f"The {name} tool."
        self.input_schema = schema
        self.annotations = annotations


def test_manifests_from_tool_listing() -> None:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "A file"}},
        "required": ["path"],
    }
    tools = [
        _Tool("readFile", schema, _Annotations(read_only=True)),
        _Tool("delete-file", schema, _Annotations(read_only=False, destructive=True)),
        _Tool("run", {"type": "object"}),
    ]
    manifests, names = build_manifests("My Files", tools, lambda tool: lambda a, c: tool)
    by_name = {m.name: m for m in manifests}
    assert set(by_name) == {
        "mcp__my_files__read_file",
        "mcp__my_files__delete_file",
        "mcp__my_files__run",
    }
    assert names["mcp__my_files__read_file"] == "readFile"
    read = by_name["mcp__my_files__read_file"]
    assert read.category == "mcp:my_files"
    assert read.operations == {Operation.READ}
    assert by_name["mcp__my_files__delete_file"].operations == {Operation.DELETE}
    assert by_name["mcp__my_files__run"].operations == {Operation.EXECUTE}
    assert read.json_schema()["required"] == ["path"]
    assert read.json_schema()["properties"]["path"]["description"] == "A file"
    assert read.params.model_validate({"path": "a", "extra": 1}).arguments() == {
        "path": "a",
        "extra": 1,
    }
    runner = ToolRunner(ToolRegistry())
    runner.registry.add(manifests, "test")
    with pytest.raises(Exception, match="'path' is a required property"):
        runner.validate("mcp__my_files__read_file", {})
    runner.shutdown()
    assert operations_of(None) == {Operation.EXECUTE}
    assert tool_name("srv", "getHTTPStatus").startswith("mcp__srv__get")


# ---- stdio ------------------------------------------------------------------------------------


def test_stdio_list_and_call(stdio_manager: McpManager, home: Path) -> None:
    manifests = {m.name: m for m in stdio_manager.tool_manifests(wait=30)}
    (state,) = stdio_manager.states()
    assert state.status is Status.READY, state.error
    assert "echo" in state.tools
    assert state.resources == ["note://hello"]
    assert state.prompts == ["summarize"]
    assert manifests["mcp__test__echo"].operations == {Operation.READ}
    assert manifests["mcp__test__add"].operations == {Operation.EXECUTE}
    assert manifests["mcp__test__delete_note"].operations == {Operation.DELETE}
    assert manifests["mcp__test__echo"].category == "mcp:test"
    schema = manifests["mcp__test__echo"].json_schema()
    assert schema["required"] == ["text"] and "times" in schema["properties"]

    ctx = ToolContext(home=home)
    result = call(manifests, "mcp__test__echo", ctx, text="hi", times=3)
    assert isinstance(result, ToolResult) and result.ok and result.content == "hi hi hi"
    assert call(manifests, "mcp__test__add", ctx, a=2, b=40).content == "42"

    failed = call(manifests, "mcp__test__fail", ctx, reason="nope")
    assert not failed.ok and failed.error

    picture = call(manifests, "mcp__test__picture", ctx)
    assert picture.ok and len(picture.attachments) == 1
    saved = Path(picture.attachments[0])
    assert saved.parent == home / "attachments" and saved.suffix == ".png"
    assert saved.read_bytes().startswith(b"\x89PNG")

    resource = call(manifests, "mcp__test__read_resource", ctx, uri="note://hello")
    assert resource.ok and "Hello from a resource" in resource.content


def test_errors_through_the_runner(stdio_manager: McpManager, home: Path) -> None:
    registry = ToolRegistry()
    registry.add(stdio_manager.tool_manifests(wait=30), "mcp")
    runner = ToolRunner(registry, tripwire=Tripwire({TOKEN}))
    ctx = ToolContext(home=home)
    try:
        bad = asyncio.run(runner.run("mcp__test__add", {"a": "x", "b": 1}, ctx))
        assert not bad.ok and "invalid arguments" in (bad.error or "")
        unknown = asyncio.run(runner.run("mcp__test__nope", {}, ctx))
        assert not unknown.ok and "no tool named" in (unknown.error or "")
        failed = asyncio.run(runner.run("mcp__test__fail", {}, ctx))
        assert not failed.ok
        # The server got the token through env; the tripwire hides it from the model.
        who = asyncio.run(runner.run("mcp__test__whoami", {}, ctx))
        assert who.ok and TOKEN not in who.content and "[redacted]" in who.content
    finally:
        runner.shutdown()


def test_stop_cancels_an_in_flight_call(
    stdio_manager: McpManager, home: Path, markers: Path
) -> None:
    registry = ToolRegistry()
    registry.add(stdio_manager.tool_manifests(wait=30), "mcp")
    runner = ToolRunner(registry)
    ctx = ToolContext(home=home)

    async def scenario() -> float:
        task = asyncio.create_task(runner.run("mcp__test__slow", {"seconds": 30}, ctx))
        await wait_until(
            lambda: (markers / "slow-started").exists(), 15, what="the slow call to start"
        )
        started = time.monotonic()
        task.cancel()  # what Stop does to the agent's task
        with pytest.raises(asyncio.CancelledError):
            await task
        return started

    try:
        started = asyncio.run(scenario())
        assert ctx.cancel_event.is_set()
        # notifications/cancelled reached the server, which cancelled the handler.
        assert wait_for(lambda: (markers / "slow-cancelled").exists(), 10)
        assert time.monotonic() - started < 10
    finally:
        runner.shutdown()
    # The server still works after a cancellation.
    manifests = {m.name: m for m in stdio_manager.tool_manifests(wait=5)}
    assert call(manifests, "mcp__test__echo", ToolContext(home=home), text="ok").content == "ok"


def test_cancel_event_stops_the_waiting_body(stdio_manager: McpManager, home: Path) -> None:
    from tools.spec import ToolCancelled

    manifests = {m.name: m for m in stdio_manager.tool_manifests(wait=30)}
    ctx = ToolContext(home=home)
    threading.Timer(0.3, ctx.cancel_event.set).start()
    started = time.monotonic()
    with pytest.raises(ToolCancelled):
        call(manifests, "mcp__test__slow", ctx, seconds=30)
    assert time.monotonic() - started < 15  # not the call's 30 s


def test_crashed_server_is_restarted_and_reported(
    stdio_manager: McpManager, home: Path, markers: Path
) -> None:
    seen: list[ServerState] = []
    stdio_manager.subscribe(seen.append)
    manifests = {m.name: m for m in stdio_manager.tool_manifests(wait=30)}
    ctx = ToolContext(home=home)
    first_pid = int(call(manifests, "mcp__test__pid", ctx).content)

    crashed = call_safely(manifests, "mcp__test__crash", ctx)
    assert not crashed.ok
    assert (markers / "crashes").read_text() == "1"
    assert not alive(first_pid) or wait_for(lambda: not alive(first_pid), 5)

    assert wait_for(lambda: stdio_manager.states()[0].restarts >= 1, 15)
    assert wait_for(lambda: stdio_manager.states()[0].status is Status.READY, 20)
    assert any(s.status is Status.RESTARTING and s.error for s in seen)
    second_pid = int(call(manifests, "mcp__test__pid", ctx).content)
    assert second_pid != first_pid
    assert call(manifests, "mcp__test__echo", ctx, text="back").content == "back"


def call_safely(manifests: dict[str, ToolManifest], name: str, ctx: ToolContext) -> ToolResult:
    """Like the runner: an expected failure becomes an ok=False result."""
    from tools.spec import ToolError

    try:
        return call(manifests, name, ctx)
    except ToolError as exc:
        return ToolResult.failure(str(exc))


def test_shutdown_ends_the_server_process(stdio_manager: McpManager, home: Path) -> None:
    manifests = {m.name: m for m in stdio_manager.tool_manifests(wait=30)}
    pid = int(call(manifests, "mcp__test__pid", ToolContext(home=home)).content)
    assert alive(pid)
    stdio_manager.shutdown()
    assert wait_for(lambda: not alive(pid), 10)
    assert stdio_manager.states()[0].status is Status.STOPPED


def test_shutdown_ends_descendants_that_left_the_process_group(
    stdio_manager: McpManager, home: Path
) -> None:
    manifests = {m.name: m for m in stdio_manager.tool_manifests(wait=30)}
    ctx = ToolContext(home=home)
    server = int(call(manifests, "mcp__test__pid", ctx).content)
    child = int(call(manifests, "mcp__test__spawn_child", ctx).content)
    assert alive(child)
    stdio_manager.shutdown()
    assert wait_for(lambda: not alive(server) and not alive(child), 10)


def test_failing_server_is_reported_not_raised(home: Path) -> None:
    config = write_config(
        home,
        {
            "broken": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(2)"]},
            "off": {"command": "nothing", "disabled": True},
        },
    )
    manager = McpManager(config, home=home, backoff_start=5)
    try:
        assert manager.tool_manifests(wait=20) == []
        states = {s.name: s for s in manager.states()}
        assert states["broken"].status is Status.FAILED and states["broken"].error
        assert states["off"].status is Status.DISABLED
    finally:
        manager.shutdown()


# ---- HTTP -------------------------------------------------------------------------------------


def test_streamable_http_with_keyring_header(http_url: str, home: Path) -> None:
    ref = keyring_key("remote", "Authorization")
    config = write_config(
        home, {"remote": {"url": http_url, "headers": {"Authorization": f"keyring:{ref}"}}}
    )
    asked: list[str] = []

    def get_secret(key: str) -> str | None:
        asked.append(key)
        return "Bearer secret-header-value" if key == ref else None

    manager = McpManager(config, home=home, get_secret=get_secret)
    try:
        manifests = {m.name: m for m in manager.tool_manifests(wait=30)}
        (state,) = manager.states()
        assert state.status is Status.READY, state.error
        assert state.transport == "http" and asked == [ref]
        ctx = ToolContext(home=home)
        assert call(manifests, "mcp__remote__echo", ctx, text="over http").content == "over http"
        assert not call(manifests, "mcp__remote__fail", ctx).ok
        assert (
            "Hello"
            in call(manifests, "mcp__remote__read_resource", ctx, uri="note://hello").content
        )
    finally:
        manager.shutdown()


def test_http_cancel(http_url: str, home: Path, markers: Path) -> None:
    from tools.spec import ToolCancelled

    config = write_config(home, {"remote": {"url": http_url}})
    manager = McpManager(config, home=home)
    try:
        manifests = {m.name: m for m in manager.tool_manifests(wait=30)}
        ctx = ToolContext(home=home)
        threading.Timer(0.5, ctx.cancel_event.set).start()
        started = time.monotonic()
        with pytest.raises(ToolCancelled):
            call(manifests, "mcp__remote__slow", ctx, seconds=30)
        assert time.monotonic() - started < 15  # not the call's 30 s
        assert call(manifests, "mcp__remote__echo", ctx.__class__(home=home), text="x").ok
    finally:
        manager.shutdown()


def test_legacy_sse(sse_url: str, home: Path) -> None:
    config = write_config(home, {"old": {"url": sse_url}})
    manager = McpManager(config, home=home)
    try:
        manifests = {m.name: m for m in manager.tool_manifests(wait=30)}
        assert manager.states()[0].transport == "sse"
        out = call(manifests, "mcp__old__add", ToolContext(home=home), a=1, b=2)
        assert out.ok and out.content == "3"
    finally:
        manager.shutdown()


def test_http_server_down_is_failed(home: Path, unused_port: int) -> None:
    config = write_config(home, {"down": {"url": f"http://127.0.0.1:{unused_port}/mcp"}})
    manager = McpManager(config, home=home, backoff_start=5)
    try:
        assert manager.tool_manifests(wait=20) == []
        (state,) = manager.states()
        assert state.status is Status.FAILED and state.error
    finally:
        manager.shutdown()


# ---- runtime and command line -----------------------------------------------------------------


def test_cli_mcp_list_and_tools_call(
    home: Path, markers: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main

    write_config(home, {"test": stdio_entry(markers, MCP_TEST_TOKEN=TOKEN)})
    assert main(["mcp", "list", "--json"]) == 0
    (server,) = json.loads(capsys.readouterr().out)
    assert server["name"] == "test" and server["status"] == "ready"
    assert "echo" in server["tools"] and server["resources"] == ["note://hello"]

    # the server says echo is read-only, but it is not trusted yet: the call asks, and
    # without a terminal or --yes it is refused
    assert main(["tools", "call", "mcp__test__echo", "--args", '{"text": "cli"}', "--json"]) == 1
    assert "not approved" in json.loads(capsys.readouterr().out.splitlines()[-1])["error"]
    assert main(["sources", "trust", "mcp:test"]) == 0
    assert "trusted" in capsys.readouterr().out
    assert main(["tools", "call", "mcp__test__echo", "--args", '{"text": "cli"}', "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["content"] == "cli"
    # EXECUTE asks even from a trusted server; without --yes a non-interactive call is denied.
    assert main(["tools", "call", "mcp__test__add", "--args", '{"a": 1, "b": 2}', "--json"]) == 1
    capsys.readouterr()
    assert main(["tools", "call", "mcp__test__add", "--args", '{"a":1,"b":2}', "--yes"]) == 0
    assert capsys.readouterr().out.strip() == "3"
    assert main(["tools", "call", "mcp__test__whoami", "--json"]) == 0
    assert TOKEN not in capsys.readouterr().out
    assert main(["tools", "call", "mcp__test__nope", "--json"]) == 2
    assert "has no such tool" in json.loads(capsys.readouterr().out)["error"]
    assert main(["tools", "call", "mcp__other__x", "--json"]) == 2
    assert "no MCP server 'other'" in json.loads(capsys.readouterr().out)["error"]


def test_cli_mcp_list_reports_a_bad_config(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    (home / "mcp.json").write_text("{", "utf-8")
    assert main(["mcp", "list"]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_runtime_registers_mcp_tools_lazily(home: Path, markers: Path) -> None:
    from app.core.runtime import Runtime

    write_config(home, {"test": stdio_entry(markers)})
    runtime = Runtime(home, entry_points=False)
    try:
        assert "mcp" not in runtime.__dict__
        assert not any(n.startswith("mcp__") for n in runtime.registry.names())
        manifests = runtime.mcp_tools()
        assert manifests and "mcp__test__echo" in runtime.registry
        assert "mcp:test" in runtime.registry.categories()
        runtime.mcp_tools()  # idempotent: no duplicate errors
        assert not [e for e in runtime.registry.errors if e.source == "mcp"]
    finally:
        runtime.close()


def test_tools_list_without_mcp_json_imports_no_mcp(home: Path) -> None:
    """No servers configured: listing never loads the MCP SDK (tests/test_mcp_lifecycle.py
    covers listing the tools of configured servers)."""
    code = (
        "import sys, json; from app.cli import main; main(['tools', 'list', '--json']);"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.'))),"
        " file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DESKHAND_HOME": str(home)},
        cwd=Path(__file__).resolve().parents[1],
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == []
    assert not any(n.startswith("mcp__") for n in (t["name"] for t in json.loads(proc.stdout)))


def test_literal_tokens_in_mcp_json_feed_the_tripwire(home: Path) -> None:
    config = write_config(
        home,
        {
            "api": {"url": "https://x.example/mcp", "headers": {"X-Api-Key": "literal-key-123"}},
            "local": {"command": "srv", "env": {"SLACK_TOKEN": "keyring:mcp/local/SLACK_TOKEN"}},
        },
    )
    remembered: list[str] = []
    manager = McpManager(config, home=home, remember_secret=remembered.append)
    assert len(manager.configs()) == 2
    assert remembered == ["literal-key-123"]
    manager.shutdown()


def test_server_stderr_is_logged_through_the_tripwire(
    home: Path, markers: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from app.core.logging_setup import RedactingFilter

    caplog.set_level(logging.INFO, logger="deskhand.mcp")
    caplog.handler.addFilter(RedactingFilter(lambda: {TOKEN}))
    config = write_config(home, {"noisy": stdio_entry(markers, MCP_TEST_TOKEN=TOKEN)})
    manager = McpManager(config, home=home)
    try:
        manager.tool_manifests(wait=30)
        assert wait_for(lambda: "test server starting" in caplog.text, 10)
    finally:
        manager.shutdown()
    assert "token=[redacted]" in caplog.text
    assert TOKEN not in caplog.text
