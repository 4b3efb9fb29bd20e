"""`deskhand mcp list [--json]`, `deskhand mcp import [PATH] [--overwrite]`, and
`deskhand mcp login NAME` / `deskhand mcp logout NAME` for remote servers that use OAuth.

`mcp import` always moves every secret-looking value to the keyring (app/core/mcp/config.py).
Building the parser imports nothing heavy (`deskhand ask` builds it too)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from app.core.mcp.desktop import claude_desktop_config_path
from app.core.paths import mcp_path
from app.core.visible import one_line

if TYPE_CHECKING:
    from app.core.mcp.config import McpConfig
    from app.core.mcp.status import ServerState
    from app.core.runtime import Runtime

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = sub.add_parser("mcp", help="MCP servers (mcp.json)")
    mcp_sub = mcp.add_subparsers(dest="mcp_command", required=True)
    lst = mcp_sub.add_parser(
        "list",
        help="configured MCP servers, their status and tools (exit 1: an entry is invalid)",
    )
    lst.add_argument("--json", action="store_true")
    lst.add_argument("--wait", type=float, default=30.0, help="seconds to wait for each server")
    imp = mcp_sub.add_parser("import", help="import mcpServers from claude_desktop_config.json")
    imp.add_argument("path", nargs="?", help=f"default: {claude_desktop_config_path()}")
    # Secrets always move to the keyring now; the flag stays so old scripts keep working.
    imp.add_argument("--keyring", action="store_true", help=argparse.SUPPRESS)
    imp.add_argument("--overwrite", action="store_true", help="replace servers of the same name")
    imp.add_argument("--json", action="store_true")
    login = mcp_sub.add_parser(
        "login", help="sign in to a remote MCP server in your browser (OAuth)"
    )
    login.add_argument("name", help="the server's name in mcp.json")
    login.add_argument(
        "--no-browser",
        action="store_true",
        help="print the sign-in address instead of opening the browser",
    )
    logout = mcp_sub.add_parser("logout", help="forget a remote MCP server's sign-in")
    logout.add_argument("name", help="the server's name in mcp.json")


def run_mcp(args: argparse.Namespace, runtime: Runtime) -> int:
    if args.mcp_command == "import":
        return _import(args, runtime)
    if args.mcp_command == "login":
        return _login(args, runtime)
    if args.mcp_command == "logout":
        return _logout(args, runtime)
    return _list(args, runtime)


def _remote(runtime: Runtime, name: str) -> str | None:
    """Why `name` cannot sign in (None: it can)."""
    manager = runtime.mcp
    cfg = manager.config(name)
    if manager.config_error:
        return manager.config_error
    if cfg is None:
        return f"there is no MCP server {name!r} in {mcp_path(runtime.home)}"
    if cfg.transport == "stdio":
        return f"{name!r} is a local server; only remote (http/sse) servers sign in"
    if cfg.auth.kind != "oauth":
        return f"{name!r} does not sign in with a browser (auth is {cfg.auth.kind!r} in mcp.json)"
    if cfg.disabled:
        return f"{name!r} is disabled in mcp.json"
    return None


def _login(args: argparse.Namespace, runtime: Runtime) -> int:
    from app.core.mcp.status import Status

    problem = _remote(runtime, args.name)
    if problem:
        print(f"deskhand: {problem}", file=sys.stderr)
        return EXIT_USAGE
    manager = runtime.mcp

    def show(url: str) -> bool:
        from urllib.parse import urlsplit

        from app.core.visible import visible

        host = visible(urlsplit(url).hostname or "?", keep_newlines=False)
        print(
            f"Sign in to {args.name} at {host}. If no browser opens, visit:\n"
            f"  {visible(url, keep_newlines=False)}",
            file=sys.stderr,
        )
        if args.no_browser:
            return True
        import webbrowser

        return webbrowser.open(url)

    manager.set_url_opener(show)
    print(f"waiting for you to sign in to {args.name} (up to 5 minutes)…", file=sys.stderr)
    state = manager.sign_in(args.name)
    if state is not None and state.status is Status.READY:
        print(f"signed in to {args.name}: {len(state.tools)} tools")
        return EXIT_OK
    why = state.error if state is not None and state.error else "it did not connect"
    print(f"deskhand: not signed in to {args.name}: {one_line(why, 500)}", file=sys.stderr)
    return EXIT_FAILED


def _logout(args: argparse.Namespace, runtime: Runtime) -> int:
    manager = runtime.mcp
    if manager.config(args.name) is None:
        print(f"deskhand: there is no MCP server {args.name!r}", file=sys.stderr)
        return EXIT_USAGE
    runtime.mcp_servers.sign_out(args.name)
    print(f"signed out of {args.name}: its tokens were removed from the keyring")
    return EXIT_OK


def _list(args: argparse.Namespace, runtime: Runtime) -> int:
    from app.core.mcp.config import McpConfigError, read_config

    manager = runtime.mcp
    manager.configs()
    if manager.config_error:
        print(f"deskhand: {manager.config_error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        config = read_config(manager.config_path)
    except McpConfigError as exc:  # changed since the manager read it
        print(f"deskhand: {exc}", file=sys.stderr)
        return EXIT_USAGE
    runtime.mcp_tools(args.wait)
    states = listed_states(manager.states(), config)
    if args.json:
        print(json.dumps([s.to_json() for s in states], ensure_ascii=False))
    elif not states:
        print(f"no MCP servers configured in {mcp_path(runtime.home)}")
    else:
        for state in states:
            print("\n".join(describe(state)))
    return EXIT_FAILED if config.problems else EXIT_OK


def listed_states(states: list[ServerState], config: McpConfig) -> list[ServerState]:
    """Every entry of mcp.json in file order: the manager's state of each usable server
    (with the last lines of its stderr when it is not running), an INVALID state for each
    entry that cannot be used."""
    from app.core.mcp.status import ServerState
    from app.core.mcp.stderr import recent as recent_stderr

    by_name = {s.name: s for s in states}
    out: list[ServerState] = []
    for name in [*config.names, *(n for n in by_name if n not in config.names)]:
        problems = config.problems_of(name)
        if problems:
            out.append(ServerState.invalid(name, problems))
            continue
        state = by_name.get(name)
        if state is None:
            continue
        if _has_failed(state) and not state.stderr:
            state = state.copy()
            state.stderr = recent_stderr(name)
        out.append(state)
    return out


def _has_failed(state: ServerState) -> bool:
    """Failed, or trying again after a failure (a retry keeps the last error)."""
    from app.core.mcp.status import Status

    if state.status in {Status.FAILED, Status.RESTARTING}:
        return True
    return state.status is Status.STARTING and state.error is not None


def describe(state: ServerState) -> list[str]:
    """A server's lines in `mcp list`, every text from the server made visible."""
    from app.core.mcp.manifests import NEEDS_TASKS
    from app.core.mcp.status import Status

    if state.status is Status.INVALID:
        lines = [f"{state.name}  [not started: mcp.json entry is invalid]"]
        return lines + [f"  problem: {one_line(p.detail, 300)}" for p in state.problems]
    lines = [f"{state.name}  [{state.transport}]  {state.status.value}"]
    if state.error:
        lines.append(f"  error: {one_line(state.error, 500)}")
    if state.stderr:
        lines.append("  the server's last output (stderr):")
        lines += [f"    {one_line(line, 300)}" for line in state.stderr]
    for label, names in (
        ("tools", state.tools),
        ("resources", state.resources),
        ("prompts", state.prompts),
    ):
        if names:
            lines.append(f"  {label}: {one_line(', '.join(names), 2000)}")
    if state.hidden_tools:
        lines.append(f"  {NEEDS_TASKS}: {one_line(', '.join(state.hidden_tools), 500)}")
    return lines


def _import(args: argparse.Namespace, runtime: Runtime) -> int:
    from pathlib import Path

    from app.core.mcp.config import McpConfigError

    source = Path(args.path).expanduser() if args.path else None
    try:  # the window's import too: secrets to the keyring, orphans cleaned, manager told
        report = runtime.mcp_servers.import_file(source, overwrite=args.overwrite)
    except McpConfigError as exc:
        print(f"deskhand: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False))
        return EXIT_FAILED if report.invalid else EXIT_OK
    print(f"imported {len(report.added)} server(s) from {report.source}")
    for name in report.added:
        print(f"  + {name}")
    for name in report.skipped:
        print(f"  = {name} (already configured; --overwrite replaces it)")
    for item in report.moved_to_keyring:
        print(f"  moved {item} to the keyring")
    for problem in report.invalid:
        print(f"deskhand: not imported: {one_line(problem.message, 300)}", file=sys.stderr)
    for item in report.kept_in_file:
        print(
            f"deskhand: could not move {item} to the keyring; it stays in "
            f"{mcp_path(runtime.home)} (readable by you only). Fix the keyring and import "
            "again with --overwrite to move it.",
            file=sys.stderr,
        )
    return EXIT_FAILED if report.invalid else EXIT_OK
