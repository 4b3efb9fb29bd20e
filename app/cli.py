"""The command line: the GUI by default, or headless `ask` and `tools` commands.

Imports stay inside the commands so `deskhand tools list` loads no provider, Qt or
tool implementation.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.core.ask_early import EarlyRequest
    from app.core.runtime import Runtime

EXIT_OK = 0
EXIT_TOOL_FAILED = 1
EXIT_USAGE = 2
EXIT_PROVIDER = 3
EXIT_INTERRUPTED = 130


def version() -> str:
    """The installed package's version, or pyproject.toml's in a plain checkout."""
    import importlib.metadata

    try:
        return importlib.metadata.version("deskhand")
    except importlib.metadata.PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        try:
            return tomllib.loads(pyproject.read_text("utf-8"))["project"]["version"]
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


class _VersionAction(argparse.Action):
    """Like action="version", but looks the version up only when asked (start-up stays fast)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"deskhand {version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deskhand", description="Deskhand, a desktop AI assistant that does real work."
    )
    parser.add_argument("--home", help="folder for settings, history and logs")
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    sub = parser.add_subparsers(dest="command")

    ask = sub.add_parser("ask", help="ask once and stream the answer")
    ask.add_argument("prompt")
    ask.add_argument("--provider", choices=["openai", "anthropic"])
    ask.add_argument("--base-url")
    ask.add_argument("--model")
    ask.add_argument(
        "--yes",
        action="store_true",
        help="approve calls that would ask (never those no rule may cover)",
    )
    ask.add_argument("--json", action="store_true", help="one JSON object per event and line")
    ask.add_argument("--conversation", help="continue this conversation (its id)")

    tools = sub.add_parser("tools", help="list or call tools")
    tools_sub = tools.add_subparsers(dest="tools_command", required=True)
    lst = tools_sub.add_parser("list", help="list the tools")
    lst.add_argument("--category")
    lst.add_argument("--json", action="store_true")
    call = tools_sub.add_parser("call", help="call one tool")
    call.add_argument("name")
    call.add_argument("--args", default="{}", help="arguments as a JSON object")
    call.add_argument(
        "--yes", action="store_true", help="approve the call if it asks (unless no rule may)"
    )
    call.add_argument("--json", action="store_true")
    accounts = sub.add_parser("accounts", help="accounts of connected services")
    acc_sub = accounts.add_subparsers(dest="accounts_command", required=True)
    acc_list = acc_sub.add_parser("list", help="accounts of every (or one) integration")
    acc_list.add_argument("integration", nargs="?")
    acc_list.add_argument("--json", action="store_true")
    acc_add = acc_sub.add_parser("add", help="add an account")
    acc_add.add_argument("integration")
    acc_add.add_argument("--label", required=True)
    acc_add.add_argument("--field", action="append", default=[], metavar="NAME=VALUE")
    acc_add.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME",
        help="a secret field, read from the terminal (or one line of stdin)",
    )
    acc_add.add_argument("--use", action="store_true", help="make it the active account")
    acc_use = acc_sub.add_parser("use", help="make an account the active one")
    acc_use.add_argument("integration")
    acc_use.add_argument("account")
    acc_rm = acc_sub.add_parser("remove", help="remove an added account (and its secrets)")
    acc_rm.add_argument("integration")
    acc_rm.add_argument("account")
    from app.core.mcp.cli import add_parser as add_mcp_parser

    add_mcp_parser(sub)
    from app.core.cli_trust import add_parsers as add_trust_parsers

    add_trust_parsers(sub)
    from app.core.cli_tasks import add_parsers as add_tasks_parsers

    add_tasks_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        return _gui(args)
    if args.command == "ask":
        return _run_async(_ask_command(args))
    from app.core.logging_setup import configure
    from app.core.runtime import ConfigError, Runtime

    try:
        runtime = Runtime(args.home)
    except Exception as exc:  # an unreadable home or database: say so plainly
        print(f"deskhand: cannot open the home folder: {exc}", file=sys.stderr)
        return EXIT_USAGE
    configure(runtime.secrets.known_values, log_dir=runtime.home / "logs")
    try:
        if args.command == "accounts":
            from app.core.cli_accounts import run_accounts

            return run_accounts(args, runtime)
        if args.command == "mcp":
            from app.core.mcp.cli import run_mcp

            return run_mcp(args, runtime)
        if args.command in ("rules", "sources"):
            from app.core.cli_trust import run_trust

            return run_trust(args, runtime)
        if args.command == "tasks":
            from app.core.cli_task_run import run_task_now, serve
            from app.core.cli_tasks import run_tasks

            return run_tasks(
                args,
                runtime.home,
                book=runtime.tasks,
                runner=lambda task_id: run_task_now(runtime, task_id),
                serve=lambda: serve(runtime),
            )
        if args.tools_command == "list":
            return _tools_list(args, runtime)
        return _run_async(_tools_call(args, runtime))
    except ConfigError as exc:
        print(f"deskhand: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        runtime.close()


def _gui(args: argparse.Namespace) -> int:
    try:
        from app.ui.main import run_gui
    except ImportError as exc:
        print(
            f"deskhand: the window needs PySide6 and qasync ({exc}); "
            "install with: pip install 'deskhand[gui]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return run_gui(args.home)


def _run_async(coro: Any) -> int:
    import asyncio

    try:
        return asyncio.run(coro)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


# ---- ask ----------------------------------------------------------------------------------


async def _ask_command(args: argparse.Namespace) -> int:
    """The first request may go out before Deskhand has loaded (app.core.ask_early); the
    rest loads on a worker meanwhile, so the event loop keeps sending it."""
    import asyncio

    from app.core.ask_early import SEND_HEAD_START, begin
    from app.core.paths import deskhand_home

    try:
        home = deskhand_home(args.home)
    except OSError as exc:
        print(f"deskhand: cannot open the home folder: {exc}", file=sys.stderr)
        return EXIT_USAGE
    flags = (args.provider, args.base_url, args.model)
    early = begin(home, args.prompt, flags, new_conversation=not args.conversation)
    try:
        await early.wait_written(SEND_HEAD_START)
        try:
            runtime = await asyncio.to_thread(_load_for_ask, home, early.secrets)
        except Exception as exc:  # an unreadable home or database: say so plainly
            print(f"deskhand: cannot open the home folder: {exc}", file=sys.stderr)
            return EXIT_USAGE
        try:
            from app.core.logging_setup import configure
            from app.core.runtime import ConfigError

            configure(runtime.secrets.known_values, log_dir=runtime.home / "logs")
            runtime.time_line = early.time_line
            early.key_mode = runtime.secrets.mode
            try:
                return await _ask(args, runtime, early)
            except ConfigError as exc:
                print(f"deskhand: {exc}", file=sys.stderr)
                return EXIT_USAGE
        finally:
            runtime.close()
    finally:
        await early.aclose()


def _load_for_ask(home: Any, secrets: Any = None) -> Runtime:
    """The runtime with what a turn needs loaded (settings, store, tools, agent, client);
    `secrets`: the store the early request already read (taken over when it fits)."""
    import app.core.cli_output  # noqa: F401
    from app.core.runtime import Runtime

    runtime = Runtime(home, secrets=secrets)
    try:
        runtime.warm_up()
        _ = runtime.store
    except BaseException:
        runtime.close()
        raise
    return runtime


async def _ask(
    args: argparse.Namespace, runtime: Runtime, early: EarlyRequest | None = None
) -> int:
    from app.core.approval import deny_all
    from app.core.cli_output import JsonPrinter, TextPrinter, interactive_approver
    from app.core.providers import make_provider
    from app.core.providers.base import ProviderError

    config = runtime.provider_config(args.provider, args.base_url, args.model)
    # MCP servers' cached tool lists are offered at once; those with none start now and get
    # a short head start, the others once the first request is on its way (no SDK import
    # or server start ever competes with it).
    uncached = runtime.offer_cached_mcp()
    if uncached:
        runtime.start_mcp()
    provider = make_provider(config)
    provider.early = early
    starter = _McpStarter(args, runtime)
    if not uncached:
        provider.on_sent = starter.start
    printer = JsonPrinter() if args.json else TextPrinter()
    try:
        if not config.model:
            try:
                models = await provider.list_models()
            except ProviderError as exc:
                printer.error(f"no model given and the server's model list failed: {exc}")
                return EXIT_PROVIDER
            if not models:
                printer.error("no model given (--model) and the server lists none")
                return EXIT_USAGE
            config.model = models[0]
            print(f"deskhand: using model {config.model}", file=sys.stderr)
        approver = interactive_approver if _can_ask(args) else deny_all
        _folder_note(runtime)
        _elicitation(args, runtime)
        conversation = runtime.open_conversation(args.conversation)
        if not args.conversation:
            runtime.store.auto_title(conversation.id, args.prompt)
        if uncached:
            await _mcp_head_start(runtime, uncached)
        agent = runtime.make_agent(provider, approver, auto_approve=args.yes)
        async for event in agent.run(conversation, args.prompt):
            printer.handle(event)
        printer.close()
        return EXIT_PROVIDER if printer.failed else EXIT_OK
    finally:
        await provider.aclose()
        starter.join()  # then runtime.close() stops every server it started


async def _mcp_head_start(runtime: Runtime, names: list[str]) -> None:
    """A short, bounded wait so MCP servers with no cached tool list that start quickly are
    in the first request; slower ones join later requests (a hung one never holds the
    question up longer)."""
    import asyncio

    from app.core.runtime import MCP_ASK_WAIT

    if runtime.started_mcp is not None:
        await asyncio.to_thread(runtime.wait_mcp, MCP_ASK_WAIT, names)


class _McpStarter:
    """Starts the MCP servers once, on a thread of its own (the manager's import and
    mcp.json's checks stay off the event loop), when the first request has been sent."""

    def __init__(self, args: argparse.Namespace, runtime: Runtime) -> None:
        self._args, self._runtime = args, runtime
        self._thread: Any = None

    def start(self) -> None:
        if self._thread is not None:
            return
        import threading

        self._thread = threading.Thread(target=self._run, name="deskhand-mcp-start", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        if self._runtime.start_mcp():
            _elicitation(self._args, self._runtime)

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()


# ---- tools -------------------------------------------------------------------------------


def _can_ask(args: argparse.Namespace) -> bool:
    """Someone is at a terminal to answer approval questions."""
    return sys.stdin.isatty() and sys.stderr.isatty() and not args.json


def _elicitation(args: argparse.Namespace, runtime: Runtime) -> None:
    """MCP servers asking the user for input get a question on the terminal when someone is
    there; otherwise (no terminal, --json) the manager declines."""
    if not _can_ask(args) or runtime.started_mcp is None:
        return
    from app.core.cli_output import terminal_elicitation

    runtime.mcp.set_elicitation_handler(terminal_elicitation())


def _notices(runtime: Runtime) -> None:
    """What the app says once (e.g. what an upgrade changed), on stderr."""
    for notice in runtime.take_notices():
        print(f"deskhand: {notice}", file=sys.stderr)


def _folder_note(runtime: Runtime) -> None:
    """Says once per run when file tools fall back to the current folder."""
    _notices(runtime)
    import os
    from pathlib import Path

    try:
        from tools.fs.sandbox import effective_roots
    except ImportError:
        return
    _, note = effective_roots(runtime.settings, Path(os.getcwd()))
    if note:
        print(f"deskhand: {note}", file=sys.stderr)


def _tools_list(args: argparse.Namespace, runtime: Runtime) -> int:
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
        from app.core.cli_trust import print_packs

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


async def _tools_call(args: argparse.Namespace, runtime: Runtime) -> int:
    from app.core.approval import deny_all
    from app.core.cli_output import interactive_approver
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
        _folder_note(runtime)
    else:
        _notices(runtime)
    approver = interactive_approver if _can_ask(args) else deny_all
    _elicitation(args, runtime)
    pipeline = runtime.make_pipeline(approver, auto_approve=args.yes, record=False)

    def show(event: Any) -> None:
        if isinstance(event, ToolProgress):
            print(f"… {one_line(event.message, 300)}", file=sys.stderr)
        elif isinstance(event, ApprovalDecided) and event.source == "yes":
            print(f"deskhand: {event.tool} approved by --yes", file=sys.stderr)
        elif isinstance(event, ApprovalRequested) and not _can_ask(args):
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
        print(json.dumps(result.to_json(), ensure_ascii=False, default=str))
    elif result.ok:
        # on a terminal, escapes in what a tool read are shown, never obeyed
        print(_visible(result.content) if sys.stdout.isatty() else result.content)
    else:
        print(f"deskhand: {result.error or result.content}", file=sys.stderr)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
