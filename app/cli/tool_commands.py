"""`deskhand tools list` and `deskhand tools call NAME`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from app.cli.common import (
    EXIT_OK,
    EXIT_TOOL_FAILED,
    EXIT_USAGE,
    can_ask,
    elicitation,
    folder_note,
    notices,
)

if TYPE_CHECKING:
    from app.core.runtime import Runtime


def tools_list(args: argparse.Namespace, runtime: Runtime) -> int:
    mcp_started = runtime.start_mcp()  # MCP servers come up while the listing is built
    registry = runtime.listing_registry()
    listing = runtime.mcp_listing(registry) if mcp_started else []
    waiting = [(note, known) for cat, note, known in listing if args.category in (None, cat)]
    infos = registry.infos(args.category)
    for note, known in waiting:  # servers still starting (or failed): never waited for long
        shown = (
            "its last known tools are listed, marked as such"
            if known
            else ("its tools are not listed")
        )
        print(f"deskhand: {note}; {shown}", file=sys.stderr)
    last_known = [tool for _, known in waiting for tool in known]
    if args.json:
        out = [i.to_json() for i in infos]
        out += [t.to_json() | {"available": False, "last_known": True} for t in last_known]
        print(json.dumps(out, ensure_ascii=False))
        return EXIT_OK
    if not infos and not registry.packs:
        if waiting:
            _print_last_known(last_known)
            return EXIT_OK
        print(f"no tools in category {args.category!r}", file=sys.stderr)
        return EXIT_USAGE if args.category else EXIT_OK
    current = None
    for info in infos:
        m = info.manifest
        if m.category != current:
            current = m.category
            print(f"\n{current}")
        ops = "/".join(sorted(m.operations))
        state = "" if info.available else f"  [unavailable: {info.unavailable_reason}]"
        print(f"  {m.name:<28} {ops:<22} {m.summary}{state}")
    _print_last_known(last_known)
    if registry.packs and args.category is None:
        from app.cli.trust import print_packs

        print_packs(registry.packs, runtime.trust)
    for error in registry.errors:
        print(f"deskhand: skipped tool pack {error.source}: {error.message}", file=sys.stderr)
    return EXIT_OK


def _print_last_known(tools: list[Any]) -> None:
    """Tools of servers still starting, as they listed them last time (not callable yet)."""
    from app.core.visible import one_line

    current = None
    for tool in tools:
        if tool.category != current:
            current = tool.category
            print(f"\n{current}  [last known list: the server is not ready yet]")
        ops = "/".join(tool.operations)
        print(f"  {tool.name:<28} {ops:<22} {one_line(tool.summary, 200)}  [last known]")


async def tools_call(args: argparse.Namespace, runtime: Runtime) -> int:
    from app.cli.output import JsonPrinter, interactive_approver
    from app.core.approval import deny_all
    from app.core.events import ApprovalDecided, ApprovalRequested, ToolProgress
    from app.core.visible import one_line
    from tools.spec import ToolResult

    if args.name.startswith("mcp__") and args.name not in runtime.registry:
        import asyncio

        # waits for that tool's server only, a bounded time; others keep starting meanwhile
        hint = await asyncio.to_thread(runtime.wait_for_mcp_tool, args.name)
        if hint:
            return _print_result(ToolResult.failure(hint), args.json, EXIT_USAGE)
    manifest = runtime.registry.get(args.name)
    if manifest is not None and manifest.category == "fs":
        folder_note(runtime)
    else:
        notices(runtime)
    approver = interactive_approver if can_ask(args) else deny_all
    elicitation(args, runtime)
    pipeline = runtime.make_pipeline(approver, auto_approve=args.yes, record=False)

    events = JsonPrinter() if args.json else None

    def show(event: Any) -> None:
        if events is not None:  # progress and approvals as `ask --json` shows them
            if isinstance(event, ToolProgress | ApprovalRequested | ApprovalDecided):
                events.handle(event)
            return
        if isinstance(event, ToolProgress):
            print(f"… {one_line(event.message, 300)}", file=sys.stderr)
        elif isinstance(event, ApprovalDecided) and event.source == "yes":
            print(f"deskhand: {event.tool} approved by --yes", file=sys.stderr)
        elif isinstance(event, ApprovalRequested) and not can_ask(args):
            req = event.request  # made visible already; one line for the terminal
            print(
                f"deskhand: {one_line(req.tool)} needs approval: {one_line(req.reason or '')}",
                file=sys.stderr,
            )

    outcome = await pipeline.call(
        "cli", args.name, args.args, session=runtime.new_session(), emit=show, for_model=False
    )
    result = outcome.result
    if outcome.status == "invalid":
        return _print_result(result, args.json, EXIT_USAGE)
    if outcome.status == "denied" and result.error and "declined" in result.error:
        hint = "" if args.yes else " (pass --yes to approve)"
        result = ToolResult.failure(f"{args.name} was not approved{hint}")
    return _print_result(result, args.json, EXIT_OK if result.ok else EXIT_TOOL_FAILED)


def _visible(text: str) -> str:
    from app.core.visible import visible

    return visible(text)


def _print_result(result: Any, as_json: bool, code: int) -> int:
    if as_json:
        line = {"type": "result"} | result.to_json()  # last, after any event
        print(json.dumps(line, ensure_ascii=False, default=str))
    elif result.ok:
        # on a terminal, escapes in what a tool read are shown, never obeyed
        print(_visible(result.content) if sys.stdout.isatty() else result.content)
    else:
        print(f"deskhand: {result.error or result.content}", file=sys.stderr)
    return code
