"""What every command of the command line shares: exit codes, the event loop, the terminal
check, and the notes printed once on stderr."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.core.runtime import Runtime

EXIT_OK = 0
EXIT_TOOL_FAILED = 1
EXIT_USAGE = 2
EXIT_PROVIDER = 3
EXIT_INTERRUPTED = 130


def run_async(coro: Coroutine[Any, Any, int]) -> int:
    import asyncio

    try:
        return asyncio.run(coro)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def can_ask(args: argparse.Namespace) -> bool:
    """Someone is at a terminal to answer approval questions."""
    return sys.stdin.isatty() and sys.stderr.isatty() and not args.json


def elicitation(args: argparse.Namespace, runtime: Runtime) -> None:
    """MCP servers asking the user for input get a question on the terminal when someone is
    there; otherwise (no terminal, --json) the manager declines."""
    if not can_ask(args) or runtime.started_mcp is None:
        return
    from app.cli.elicitation import terminal_elicitation

    runtime.mcp.set_elicitation_handler(terminal_elicitation())


def notices(runtime: Runtime) -> None:
    """What the app says once (e.g. what an upgrade changed), on stderr."""
    for notice in runtime.take_notices():
        print(f"deskhand: {notice}", file=sys.stderr)


def folder_note(runtime: Runtime) -> None:
    """Says once per run when file tools fall back to the current folder."""
    notices(runtime)
    import os
    from pathlib import Path

    try:
        from tools.fs.sandbox import effective_roots
    except ImportError:
        return
    _, note = effective_roots(runtime.settings, Path(os.getcwd()))
    if note:
        print(f"deskhand: {note}", file=sys.stderr)
