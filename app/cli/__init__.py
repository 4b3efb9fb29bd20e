"""The command line: the GUI by default, or headless commands (`ask`, `tools`, `accounts`,
`mcp`, `rules`, `sources`, `tasks`, `agents`, `knowledge`).

Imports stay inside the commands so `deskhand tools list` loads no provider, Qt or
tool implementation.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from app.cli.common import EXIT_USAGE, run_async


class _VersionAction(argparse.Action):
    """Like action="version", but looks the version up only when asked (start-up stays fast)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from app.version import version

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
    ask.add_argument("--provider", choices=["openai", "anthropic", "engine"])
    ask.add_argument("--base-url")
    ask.add_argument(
        "--model", help="the model; one of `deskhand models list` runs in the built-in engine"
    )
    ask.add_argument(
        "--yes",
        action="store_true",
        help="approve calls that would ask (never those no rule may cover)",
    )
    ask.add_argument("--json", action="store_true", help="one JSON object per event and line")
    ask.add_argument("--conversation", help="continue this conversation (its id)")
    ask.add_argument(
        "--attach",
        action="append",
        default=[],
        metavar="FILE",
        help="attach a file: text, a document (PDF, Word, Excel, PowerPoint, OpenDocument, "
        "HTML, EPUB) or an image; repeatable",
    )

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
    from app.cli.mcp_servers import add_parser as add_mcp_parser

    add_mcp_parser(sub)
    from app.cli.trust import add_parsers as add_trust_parsers

    add_trust_parsers(sub)
    from app.cli.tasks import add_parsers as add_tasks_parsers

    add_tasks_parsers(sub)
    from app.cli.agents import add_parsers as add_agents_parsers

    add_agents_parsers(sub)
    from app.cli.knowledge import add_parsers as add_knowledge_parsers

    add_knowledge_parsers(sub)
    from app.cli.models import add_parsers as add_models_parsers

    add_models_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        return _gui(args)
    from app.cli.keyring_prompts import install_terminal_prompts

    install_terminal_prompts()  # an encrypted-file keyring asks for its passphrase here
    if args.command == "ask":
        from app.cli.ask import ask_command
        from app.cli.collector import StartUpPause

        with StartUpPause() as pause:
            return run_async(ask_command(args, pause))
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
            from app.cli.accounts import run_accounts

            return run_accounts(args, runtime)
        if args.command == "mcp":
            from app.cli.mcp_servers import run_mcp

            return run_mcp(args, runtime)
        if args.command in ("rules", "sources"):
            from app.cli.trust import run_trust

            return run_trust(args, runtime)
        if args.command == "tasks":
            from app.cli.task_run import run_task_now, serve
            from app.cli.tasks import run_tasks

            return run_tasks(
                args,
                runtime.home,
                book=runtime.tasks,
                runner=lambda task_id: run_task_now(runtime, task_id),
                serve=lambda: serve(runtime),
            )
        if args.command == "agents":
            from app.cli.agents import run_agents

            return run_agents(args, runtime)
        if args.command == "knowledge":
            from app.cli.knowledge import run_knowledge

            return run_knowledge(args, runtime)
        if args.command == "models":
            from app.cli.models import run_models

            return run_models(args, runtime)
        from app.cli.tool_commands import tools_call, tools_list

        if args.tools_command == "list":
            return tools_list(args, runtime)
        return run_async(tools_call(args, runtime))
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
