"""Deskhand's client entry for the official MCP conformance suite
(`@modelcontextprotocol/conformance`, pinned in tests/conformance/package.json).

The suite starts a mock server for one scenario and runs this file as
`python tests/conformance/client.py <server URL>`, with the scenario's name in
`MCP_CONFORMANCE_SCENARIO` and, for some scenarios, a JSON `MCP_CONFORMANCE_CONTEXT`
(client credentials and the like). The scenario's checks are made by the mock server from
what this client sends; the exit status says whether the client itself thinks it managed.

Everything goes through Deskhand's own MCP code, as the app uses it: the server is written
to a fresh home's `mcp.json` (`app.core.paths.mcp_path`), read and checked by
`app.core.mcp.config`, started by `McpManager` (which runs `ServerConnection` on its MCP
thread), its tools are the manager's `ToolManifest`s, and calls go through each manifest's
parameter model and `impl` with a `ToolContext`, so the results pass through
`app.core.mcp.results` as well. Nothing calls the SDK directly: that would test the SDK.

OAuth (`auth/*`) and elicitation are not built yet (issue 14 §5); those scenarios run the
generic flow below and fail, and tests/conformance/expected-failures.yml says why. When they
land, this entry must hand the context's credentials to Deskhand the way a user would (an
`mcp.json` field, the keyring), not to the SDK.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script by the suite, from any folder
    sys.path.insert(0, str(ROOT))

from app.core.mcp.manager import McpManager  # noqa: E402
from app.core.mcp.manifests import tool_name  # noqa: E402
from app.core.mcp.status import Status  # noqa: E402
from app.core.paths import mcp_path  # noqa: E402
from tools.spec import ToolContext, ToolManifest, ToolResult  # noqa: E402

SERVER = "conformance"
#: How long the server may take to be ready (the suite gives a scenario 30 s in all).
READY_WAIT = 15.0

log = logging.getLogger("deskhand.conformance")


class ScenarioFailed(Exception):
    """The client could not do what the scenario asks; the message says why."""


class Session:
    """One Deskhand MCP manager with the scenario's server as its only `mcp.json` entry."""

    def __init__(self, url: str, home: Path) -> None:
        self.home = home
        mcp_path(home).write_text(
            json.dumps({"mcpServers": {SERVER: {"type": "http", "url": url}}}), "utf-8"
        )
        self.manager = McpManager(mcp_path(home), home=home, backoff_start=30.0)

    def connect(self) -> None:
        problems = [p.message for p in self.manager.config_problems]
        self.manager.start(wait=READY_WAIT)
        problems += [p.message for p in self.manager.config_problems]
        if self.manager.config_error or problems:
            raise ScenarioFailed(f"mcp.json: {self.manager.config_error or problems}")
        state = self.manager.status(SERVER)
        if state is None or state.status is not Status.READY:
            why = state.error if state is not None else "not configured"
            raise ScenarioFailed(f"the server did not become ready: {why}")
        log.info("ready; tools: %s", state.tools)

    def tools(self) -> dict[str, ToolManifest]:
        return {m.name: m for m in self.manager.tools(SERVER)}

    def call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Call the server's `tool` the way the runner does: validate the arguments with the
        manifest's model, then run its `impl`."""
        manifest = self.tools().get(tool_name(SERVER, tool))
        if manifest is None:
            raise ScenarioFailed(f"the server has no tool {tool!r} (tools: {list(self.tools())})")
        params = manifest.params.model_validate(arguments)
        result = manifest.impl(params, ToolContext(call_id=f"conformance-{tool}", home=self.home))
        log.info("%s -> ok=%s %s", tool, result.ok, result.content[:200])
        return result

    def close(self) -> None:
        self.manager.shutdown()


def _call_must_succeed(tool: str, arguments: dict[str, Any]) -> Callable[[Session], None]:
    def run(session: Session) -> None:
        result = session.call(tool, arguments)
        if not result.ok:
            raise ScenarioFailed(f"{tool} failed: {result.error}")

    return run


def _first_tool(session: Session) -> None:
    """The flow of every other scenario (the `auth/*` ones): connect, list, call the first
    tool with no arguments (whatever it answers)."""
    tools = session.manager.status(SERVER)
    names = tools.tools if tools is not None else []
    if names:
        session.call(names[0], {})


#: What each scenario does once connected (connecting lists the tools).
SCENARIOS: dict[str, Callable[[Session], None]] = {
    "initialize": lambda session: None,
    "tools_call": _call_must_succeed("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": _call_must_succeed("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": _call_must_succeed(
        "test_client_elicitation_defaults", {}
    ),
}


def run(scenario: str, url: str) -> None:
    with tempfile.TemporaryDirectory(prefix="deskhand-conformance-") as folder:
        home = Path(folder)
        session = Session(url, home)
        try:
            session.connect()
            SCENARIOS.get(scenario, _first_tool)(session)
        finally:
            session.close()


def main(argv: list[str]) -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    if len(argv) < 2:
        print(f"usage: {argv[0]} <server URL> (scenario in MCP_CONFORMANCE_SCENARIO)",
              file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    try:
        run(scenario, argv[-1])
    except ScenarioFailed as exc:
        print(f"scenario {scenario!r}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
