"""A server that failed to start in this process is named by `McpManager.failed_servers`
(the runtime then stops offering its cached tools), until it lists its tools again."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from app.core.mcp.cached import cached_tools
from app.core.mcp.manager import McpManager
from app.core.mcp.status import ServerState, Status
from app.core.paths import mcp_path
from tests.test_mcp_cached_tools import SERVER, entry, list_once, no_call, write_servers

#: Starts tests/mcp_servers.py in the mode written in `<markers>/mode`: the mcp.json entry
#: stays the same (its cached tools usable) while the server behind it fails or works.
WRAPPER = """
import pathlib, runpy, sys
sys.argv = [{server!r}, (pathlib.Path({markers!r}) / "mode").read_text()]
runpy.run_path({server!r}, run_name="__main__")
"""


def switchable(tmp_path: Path, markers: Path, mode: str) -> dict[str, Any]:
    (markers / "mode").write_text(mode)
    wrapper = tmp_path / "server.py"
    wrapper.write_text(WRAPPER.format(server=SERVER, markers=str(markers)))
    return {"command": sys.executable, "args": [str(wrapper)]}


def test_a_server_that_fails_to_start_is_named_until_it_lists_again(
    home: Path, markers: Path, tmp_path: Path
) -> None:
    write_servers(home, {"flaky": switchable(tmp_path, markers, "stdio"), "ok": entry(markers)})
    list_once(home)
    (markers / "mode").write_text("crash")  # same entry, its program now exits at once
    found, _missing = cached_tools(home, mcp_path(home), no_call)
    assert set(found) == {"flaky", "ok"}  # both cached: offered before anything starts

    ready = threading.Event()

    def on_change(state: ServerState) -> None:
        if state.name == "flaky" and state.status is Status.READY:
            ready.set()

    manager = McpManager(mcp_path(home), home=home, backoff_start=0.05)
    manager.subscribe(on_change)
    try:
        assert manager.failed_servers() == set()  # nothing started yet
        states = {s.name: s.status for s in manager.start(wait=30)}
        assert states == {"flaky": Status.FAILED, "ok": Status.READY}
        assert manager.failed_servers() == {"flaky"}

        (markers / "mode").write_text("stdio")  # it works again: the next retry lists
        assert ready.wait(30)
        assert manager.failed_servers() == set()
        assert "mcp__flaky__echo" in {m.name for m in manager.tools("flaky")}
    finally:
        manager.shutdown()


def test_a_reloaded_server_that_starts_is_no_longer_failed(
    home: Path, markers: Path, tmp_path: Path
) -> None:
    write_servers(home, {"flaky": switchable(tmp_path, markers, "crash")})
    manager = McpManager(mcp_path(home), home=home)
    try:
        manager.start(wait=30)
        assert manager.failed_servers() == {"flaky"}
        (markers / "mode").write_text("stdio")
        manager.reload("flaky", wait=30)
        assert manager.failed_servers() == set()
        state = manager.status("flaky")
        assert state is not None and state.status is Status.READY
    finally:
        manager.shutdown()


def test_a_rebuilt_registry_no_longer_offers_a_failed_servers_cached_tools(
    home: Path, markers: Path, tmp_path: Path
) -> None:
    from app.core.runtime import Runtime

    write_servers(home, {"flaky": switchable(tmp_path, markers, "stdio"), "ok": entry(markers)})
    list_once(home)
    (markers / "mode").write_text("crash")
    runtime = Runtime(home)
    try:
        runtime.offer_cached_mcp()
        assert {"mcp__flaky__echo", "mcp__ok__echo"} <= set(runtime.registry.names())
        runtime.start_mcp()
        runtime.wait_mcp(30)
        names = set(runtime.reload_registry().names())
        assert "mcp__flaky__echo" not in names
        assert "mcp__ok__echo" in names
    finally:
        runtime.close()
