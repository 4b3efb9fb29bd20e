"""MCP servers for the tests, written with the official SDK (`MCPServer`).

Run as a script: `python tests/mcp_servers.py stdio | http PORT | sse PORT | hang | late |
crash | lc`:

* `hang` never answers (not even `initialize`); `crash` writes to stderr and exits at start;
* `late` serves stdio only once the file `$MCP_TEST_MARKERS/go` exists;
* `lc` (list change) adds the tools `grow` / `shrink`, which add or remove the tool `extra`
  and send `notifications/tools/list_changed`; it starts with `extra` when
  `$MCP_TEST_MARKERS/extra` exists and hangs at start when `$MCP_TEST_MARKERS/hang` does.
* `proto` (stdio) adds tools that use the client side of the protocol: `client` (what the
  client said it is and can do), `progress`, `log`, `sample`, `roots`, `ask` / `ask_url` /
  `ask_nested` (elicitation); each `notifications/roots/list_changed` is counted in
  `$MCP_TEST_MARKERS/roots-changed`.
`MCP_TEST_MARKERS` (a folder) is where tools leave evidence (e.g. of a cancellation);
`MCP_TEST_TOKEN`, when set, is echoed by `whoami` so tests can check secret passing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.types import NotificationParams, SamplingMessage, TextContent, ToolAnnotations

# A 1x1 transparent PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


def _marker(name: str) -> Path | None:
    folder = os.environ.get("MCP_TEST_MARKERS")
    return Path(folder) / name if folder else None


def build() -> MCPServer:
    server = MCPServer("deskhand-test")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str, times: int = 1) -> str:
        """Echo the text back. Repeats it `times` times."""
        return " ".join([text] * times)

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def delete_note(name: str) -> str:
        """Delete a note (pretend)."""
        return f"deleted {name}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def fail(reason: str = "it broke") -> str:
        """Always fails."""
        raise ValueError(reason)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def whoami() -> str:
        """Report the token the server was started with."""
        return f"token={os.environ.get('MCP_TEST_TOKEN', '')}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def picture() -> Image:
        """Return a tiny PNG."""
        return Image(data=PNG, format="png")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def slow(seconds: float = 30.0) -> str:
        """Sleep, leaving a marker if cancelled."""
        started = _marker("slow-started")
        if started:
            started.write_text("1")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            marker = _marker("slow-cancelled")
            if marker:
                marker.write_text("1")
            raise
        return "slept"

    @server.tool()
    def crash() -> str:
        """Exit the server process abruptly (stdio only)."""
        count = _marker("crashes")
        if count:
            count.write_text(str(int(count.read_text() or 0) + 1) if count.exists() else "1")
        os._exit(3)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    def spawn_child() -> int:
        """Start a long-running grandchild in its own session; return its pid."""
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)"],  # must outlive the server
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return child.pid

    @server.resource("note://hello", name="hello", mime_type="text/plain")
    def hello() -> str:
        return "Hello from a resource"

    @server.prompt()
    def summarize(topic: str) -> str:
        """Ask for a summary."""
        return f"Summarize {topic}."

    return server


def extra() -> str:
    """A tool that comes and goes."""
    return "extra here"


def add_list_change_tools(server: MCPServer) -> None:
    @server.tool()
    async def grow(ctx: Context) -> str:
        """Add the tool `extra` and tell the client."""
        server.add_tool(extra, annotations=ToolAnnotations(read_only_hint=True))
        await ctx.session.send_tool_list_changed()
        return "grown"

    @server.tool()
    async def shrink(ctx: Context) -> str:
        """Remove the tool `extra` and tell the client."""
        server.remove_tool("extra")
        await ctx.session.send_tool_list_changed()
        return "shrunk"

    if _exists("extra"):
        server.add_tool(extra, annotations=ToolAnnotations(read_only_hint=True))


ASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 1},
        "age": {"type": "integer", "title": "Age", "minimum": 0, "maximum": 150},
        "color": {"type": "string", "title": "Colour", "enum": ["red", "green", "blue"]},
        "subscribe": {"type": "boolean", "title": "Subscribe", "default": False},
    },
    "required": ["name", "color"],
}


def add_protocol_tools(server: MCPServer) -> None:
    warnings.simplefilter("ignore")  # logging and roots are deprecated in the newest spec

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def client(ctx: Context) -> str:
        """What the client said it is and can do."""
        params = ctx.session.client_params
        caps = ctx.session.client_capabilities
        return json.dumps(
            {
                "name": params.client_info.name if params else None,
                "version": params.client_info.version if params else None,
                "sampling": caps is not None and caps.sampling is not None,
                "elicitation": caps is not None and caps.elicitation is not None,
                "roots": caps is not None and caps.roots is not None,
            }
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def progress(ctx: Context, steps: int = 3, message: str = "step") -> str:
        """Report progress `steps` times."""
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"{message} {i}/{steps}")
        return "done"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def log(ctx: Context, levels: list[str], text: str = "hello", logger: str = "") -> str:
        """Send one log message at each level."""
        for level in levels:
            await ctx.log(level, f"{level}: {text}", logger_name=logger or None)  # type: ignore[arg-type]
        return "logged"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def sample(ctx: Context) -> str:
        """Ask the client's model to write something."""
        try:
            result = await ctx.session.create_message(
                [SamplingMessage(role="user", content=TextContent(type="text", text="hi"))],
                max_tokens=10,
            )
        except Exception as exc:
            return f"refused: {getattr(exc, 'message', None) or exc}"
        return f"sampled: {result.content}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def roots(ctx: Context) -> str:
        """The client's roots."""
        listed = await ctx.session.list_roots()
        return json.dumps([[str(r.uri), r.name] for r in listed.roots])

    async def roots_changed(ctx: Any, params: NotificationParams) -> None:
        marker = _marker("roots-changed")
        if marker:
            marker.write_text(str(int(marker.read_text() or 0) + 1) if marker.exists() else "1")

    server._lowlevel_server.add_notification_handler(
        "notifications/roots/list_changed", NotificationParams, roots_changed
    )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def ask(ctx: Context, message: str = "Tell me about you") -> str:
        """Ask the user to fill a form."""
        result = await ctx.session.elicit_form(message, ASK_SCHEMA, ctx.request_id)
        return json.dumps({"action": result.action, "content": result.content})

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def ask_nested(ctx: Context) -> str:
        """Ask with a schema the spec does not allow (a nested object)."""
        schema = {
            "type": "object",
            "properties": {
                "card": {"type": "object", "properties": {"number": {"type": "string"}}}
            },
        }
        result = await ctx.session.elicit_form("Your card", schema, ctx.request_id)
        return json.dumps({"action": result.action, "content": result.content})

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def ask_url(ctx: Context, url: str, message: str = "Sign in there") -> str:
        """Ask the user to open a web page."""
        result = await ctx.elicit_url(message, url, "elicit-1")
        return json.dumps({"action": result.action})


def _exists(name: str) -> bool:
    marker = _marker(name)
    return marker is not None and marker.exists()


def _hang() -> None:
    print("hanging at start", file=sys.stderr, flush=True)
    while True:
        time.sleep(60)  # under test: a server that never answers


def main(argv: list[str]) -> None:
    server = build()
    mode = argv[1] if len(argv) > 1 else "stdio"
    token = os.environ.get("MCP_TEST_TOKEN", "")
    print(f"test server starting ({mode}) token={token}", file=sys.stderr, flush=True)
    if mode == "stdio":
        server.run("stdio")
    elif mode == "hang":
        _hang()
    elif mode == "crash":
        print("fatal: cannot open the database /nowhere/db", file=sys.stderr, flush=True)
        raise SystemExit(3)
    elif mode == "late":
        while not _exists("go"):  # under test: a server that starts only when told
            time.sleep(0.05)
        server.run("stdio")
    elif mode == "lc":
        if _exists("hang"):
            _hang()
        add_list_change_tools(server)
        server.run("stdio")
    elif mode == "proto":
        add_protocol_tools(server)
        server.run("stdio")
    elif mode == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(argv[2]))
    elif mode == "sse":
        server.run("sse", host="127.0.0.1", port=int(argv[2]))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv)
