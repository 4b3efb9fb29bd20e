"""`deskhand agents …`: the named sub-agents the assistant may hand a task to (list, add,
edit, remove), Deskhand's own and the user's (settings `agents`, app.core.agent_book)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: building the parser stays light (`deskhand ask`)
    from app.core.agent_book import AgentBook, ListedAgent
    from app.core.runtime import Runtime
    from app.core.settings import AgentDefinition

EXIT_OK, EXIT_USAGE = 0, 2

#: Options whose value is a field of the definition as it is ("--max-steps" → max_steps).
_FIELDS = ("description", "provider", "model", "max_steps", "max_seconds", "max_tokens")


def add_parsers(sub: Any) -> None:
    agents = sub.add_parser("agents", help="named sub-agents the assistant may hand tasks to")
    agents_sub = agents.add_subparsers(dest="agents_command", required=True)
    lst = agents_sub.add_parser("list", help="Deskhand's agents and yours")
    lst.add_argument("--json", action="store_true")
    add = agents_sub.add_parser("add", help="add an agent of your own")
    add.add_argument("name", help="what you and the assistant call it, e.g. Summarizer")
    add.add_argument("--description", required=True, help="what it is for (the model reads it)")
    _definition_options(add, editing=False)
    edit = agents_sub.add_parser("edit", help="change one of your agents")
    edit.add_argument("name")
    edit.add_argument("--rename", metavar="NEW_NAME", help="give it another name")
    edit.add_argument("--description")
    _definition_options(edit, editing=True)
    rm = agents_sub.add_parser("remove", help="remove one of your agents")
    rm.add_argument("name")


def _definition_options(cmd: argparse.ArgumentParser, *, editing: bool) -> None:
    told = cmd.add_mutually_exclusive_group()
    told.add_argument("--instructions", help="what it is told before its task")
    told.add_argument("--instructions-file", metavar="PATH", help="the instructions, from a file")
    replaces = " (replaces its list)" if editing else ""
    cmd.add_argument(
        "--tool",
        action="append",
        metavar="ENTRY",
        help="a tool it may use: a name, a glob (fs_read_*), category:NAME or read-only "
        f"(repeatable; default read-only){replaces}",
    )
    allow = cmd.add_mutually_exclusive_group() if editing else cmd
    allow.add_argument(
        "--allow",
        action="append",
        metavar="TOOL[@SOURCE][,KIND=VALUE]",
        help="a call it may make without asking, as `tasks add --allow` takes "
        f'(repeatable){replaces}, e.g. "fs_write_file,folder=/home/me/notes"',
    )
    if editing:
        allow.add_argument("--clear-allow", action="store_true", help="no calls without asking")
    cmd.add_argument(
        "--provider",
        metavar="ACCOUNT_ID",
        help="a provider account id from Settings → Providers (empty: the conversation's)",
    )
    cmd.add_argument("--model", help="a model of that account (empty: the conversation's)")
    cmd.add_argument("--max-steps", type=int, help="model calls per task (1 to 200)")
    cmd.add_argument("--max-seconds", type=int, help="time per task (5 to 86400)")
    cmd.add_argument("--max-tokens", type=int, help="tokens per task (1000 to 50000000)")
    cmd.add_argument("--json", action="store_true", help="print the saved agent as JSON")


def run_agents(args: argparse.Namespace, runtime: Runtime) -> int:
    from app.core.agent_book import AgentError

    book = runtime.agents
    try:
        if args.agents_command == "list":
            return _list(args, book)
        if args.agents_command == "remove":
            removed = book.remove(args.name)
            print(f"Removed the agent {removed.name}")
            return EXIT_OK
        changes = _changes(args)
        runtime.offer_cached_mcp()  # MCP tools known from their last listing count too
        if args.agents_command == "add":
            saved = book.add({"name": args.name, **changes})
            verb = "Added"
        else:
            saved = book.edit(args.name, **changes)
            verb = "Saved"
    except AgentError as exc:
        for field, message in exc.problems:
            print(f"deskhand: agents: {field}: {message}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(_row(saved, builtin=False), ensure_ascii=False))
    else:
        print(f"{verb} the agent {saved.name}")
    return EXIT_OK


def _changes(args: argparse.Namespace) -> dict[str, Any]:
    """The fields the options give (only those given, for `edit`)."""
    changes = {f: getattr(args, f) for f in _FIELDS if getattr(args, f) is not None}
    if getattr(args, "rename", None) is not None:
        changes["name"] = args.rename
    if args.tool is not None:
        changes["tools"] = args.tool
    if args.allow is not None:
        changes["allow"] = args.allow
    elif getattr(args, "clear_allow", False):
        changes["allow"] = []
    if args.instructions is not None:
        changes["instructions"] = args.instructions
    elif args.instructions_file is not None:
        changes["instructions"] = _read(args.instructions_file)
    return changes


def _read(path: str) -> str:
    from app.core.agent_book import AgentError

    try:
        return Path(path).expanduser().read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise AgentError([("instructions", f"cannot read {path}: {why}")]) from None


def _row(definition: AgentDefinition, *, builtin: bool) -> dict[str, Any]:
    return {**definition.model_dump(mode="json"), "builtin": builtin}


def _list(args: argparse.Namespace, book: AgentBook) -> int:
    agents = book.list()
    if args.json:
        rows = [_row(a.definition, builtin=a.builtin) for a in agents]
        print(json.dumps(rows, ensure_ascii=False))
        return EXIT_OK
    for agent in agents:
        _print(agent)
    if not any(not a.builtin for a in agents):
        print("You have no agents of your own yet: add one with `deskhand agents add`.")
    return EXIT_OK


def _print(agent: ListedAgent) -> None:
    from app.core.visible import one_line

    d = agent.definition
    print(f"{one_line(d.name)}{'  (built-in)' if agent.builtin else ''}")
    print(f"    {one_line(d.description, 400)}")
    print(f"    tools: {one_line(', '.join(d.tools), 400)}")
    if d.allow:
        print(f"    allowed without asking: {one_line('; '.join(d.allow), 400)}")
    if d.provider:
        print(f"    provider account: {one_line(d.provider)}")
    if d.model:
        print(f"    model: {one_line(d.model)}")
    print(f"    budget: {d.max_steps} steps, {d.max_seconds} s, {d.max_tokens} tokens")
