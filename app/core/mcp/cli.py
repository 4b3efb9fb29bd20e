"""`deskhand mcp list [--json]` and `deskhand mcp import [PATH] [--overwrite]`.

`mcp import` always moves every secret-looking value to the keyring (see config.py)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from app.core.mcp.config import McpConfigError, claude_desktop_config_path, import_servers
from app.core.paths import mcp_path

if TYPE_CHECKING:
    from app.core.runtime import Runtime

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    mcp = sub.add_parser("mcp", help="MCP servers (mcp.json)")
    mcp_sub = mcp.add_subparsers(dest="mcp_command", required=True)
    lst = mcp_sub.add_parser("list", help="configured MCP servers, their status and tools")
    lst.add_argument("--json", action="store_true")
    lst.add_argument("--wait", type=float, default=30.0, help="seconds to wait for each server")
    imp = mcp_sub.add_parser("import", help="import mcpServers from claude_desktop_config.json")
    imp.add_argument("path", nargs="?", help=f"default: {claude_desktop_config_path()}")
    # Secrets always move to the keyring now; the flag stays so old scripts keep working.
    imp.add_argument("--keyring", action="store_true", help=argparse.SUPPRESS)
    imp.add_argument("--overwrite", action="store_true", help="replace servers of the same name")
    imp.add_argument("--json", action="store_true")


def run_mcp(args: argparse.Namespace, runtime: Runtime) -> int:
    if args.mcp_command == "import":
        return _import(args, runtime)
    return _list(args, runtime)


def _list(args: argparse.Namespace, runtime: Runtime) -> int:
    manager = runtime.mcp
    manager.configs()
    if manager.config_error:
        print(f"deskhand: {manager.config_error}", file=sys.stderr)
        return EXIT_USAGE
    runtime.mcp_tools(args.wait)
    states = manager.states()
    if args.json:
        print(json.dumps([s.to_json() for s in states], ensure_ascii=False))
        return EXIT_OK
    if not states:
        print(f"no MCP servers configured in {mcp_path(runtime.home)}")
        return EXIT_OK
    for state in states:
        print(f"{state.name}  [{state.transport}]  {state.status.value}")
        if state.error:
            print(f"  error: {state.error}")
        if state.tools:
            print(f"  tools: {', '.join(state.tools)}")
        if state.resources:
            print(f"  resources: {', '.join(state.resources)}")
        if state.prompts:
            print(f"  prompts: {', '.join(state.prompts)}")
    return EXIT_OK


def _import(args: argparse.Namespace, runtime: Runtime) -> int:
    from pathlib import Path

    source = Path(args.path).expanduser() if args.path else None
    try:
        report = import_servers(
            mcp_path(runtime.home),
            source,
            set_secret=runtime.secrets.set,
            overwrite=args.overwrite,
        )
    except McpConfigError as exc:
        print(f"deskhand: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False))
        return EXIT_OK
    print(f"imported {len(report.added)} server(s) from {report.source}")
    for name in report.added:
        print(f"  + {name}")
    for name in report.skipped:
        print(f"  = {name} (already configured; --overwrite replaces it)")
    for item in report.moved_to_keyring:
        print(f"  moved {item} to the keyring")
    for item in report.kept_in_file:
        print(
            f"deskhand: could not move {item} to the keyring; it stays in "
            f"{mcp_path(runtime.home)} (readable by you only). Fix the keyring and import "
            "again with --overwrite to move it.",
            file=sys.stderr,
        )
    return EXIT_OK
