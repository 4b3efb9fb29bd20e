"""`deskhand rules …` and `deskhand sources …`: the approval rules and the trust in
third-party tool sources, as the Settings pages show them."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.core.runtime import Runtime
    from tools.registry import PackInfo, ToolSource

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_parsers(sub: Any) -> None:
    rules = sub.add_parser("rules", help="approval rules: list or remove them")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True)
    lst = rules_sub.add_parser("list", help="every rule, with its scope")
    lst.add_argument("--json", action="store_true")
    rm = rules_sub.add_parser("remove", help="remove a rule by its id")
    rm.add_argument("id")

    sources = sub.add_parser(
        "sources", help="third-party tool sources (MCP servers, tool packs, skills)"
    )
    src_sub = sources.add_subparsers(dest="sources_command", required=True)
    src_list = src_sub.add_parser("list", help="every source, enabled and trusted or not")
    src_list.add_argument("--json", action="store_true")
    for verb, text in (
        ("enable", "import this tool pack (its calls still ask until trusted)"),
        ("disable", "stop importing this tool pack and forget the trust in it"),
        ("trust", "let this source's calls follow the rules instead of always asking"),
        ("untrust", "make every call of this source ask again"),
    ):
        cmd = src_sub.add_parser(verb, help=text)
        cmd.add_argument("id", help="e.g. pack:mytools.py, mcp:github, skill:pdf")


def run_trust(args: argparse.Namespace, runtime: Runtime) -> int:
    if args.command == "rules":
        return _rules(args, runtime)
    return _sources(args, runtime)


# ---- rules --------------------------------------------------------------------------------


def _rules(args: argparse.Namespace, runtime: Runtime) -> int:
    book = runtime.rules
    if args.rules_command == "remove":
        removed = book.remove(args.id)
        if removed is None:
            print(
                f"deskhand: there is no rule {args.id!r} (see `deskhand rules list`)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        print(f"Removed: {removed.describe()}")
        return EXIT_OK
    rules = book.rules()
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in rules], ensure_ascii=False))
        return EXIT_OK
    if not rules:
        print("No rules yet: calls that change something ask each time.")
        return EXIT_OK
    for rule in rules:
        scope = {"conversation": "this conversation", "task": f"task {rule.task_id}"}.get(
            rule.scope, "always"
        )
        print(f"{rule.id}  {rule.decision:<5}  {scope:<17}  {rule.describe()}")
    return EXIT_OK


# ---- sources ------------------------------------------------------------------------------


def print_packs(packs: list[PackInfo], trust: Any) -> None:
    print("\nthird-party tool packs")
    for pack in packs:
        state = _state(pack.source, trust, enabled=trust.is_enabled(pack.source))
        record = trust.record(pack.source.id)
        tools = f"  tools: {', '.join(record.tool_names)}" if record and record.tool_names else ""
        print(f"  {pack.source.id:<28} {state:<22} {pack.source.origin}{tools}")


def _state(source: ToolSource, trust: Any, *, enabled: bool) -> str:
    if not enabled:
        return "disabled"
    return "enabled, trusted" if trust.is_trusted(source) else "enabled, not trusted"


def _known_sources(runtime: Runtime, want: str | None) -> dict[str, ToolSource]:
    from app.core.sources import folder_fingerprint
    from tools.registry import ToolSource

    found: dict[str, ToolSource] = {p.source.id: p.source for p in runtime.listing_registry().packs}
    try:
        for skill in runtime.skills.discover():
            found[f"skill:{skill.name}"] = ToolSource(
                "skill",
                f"skill:{skill.name}",
                fingerprint=folder_fingerprint(skill.folder),
                origin=f"the skill folder {skill.folder}",
            )
    except Exception as exc:  # a broken skills folder must not hide the other sources
        print(f"deskhand: could not list skills: {exc}", file=sys.stderr)
    if (want is None or want.startswith("mcp:")) and runtime.mcp.configs():
        from app.core.runtime import MCP_LIST_WAIT

        runtime.mcp_tools(wait=MCP_LIST_WAIT)  # a hung server must not stall the listing
        for server, source in runtime.mcp.tool_sources().items():
            found[f"mcp:{server}"] = source
    return found


def _sources(args: argparse.Namespace, runtime: Runtime) -> int:
    trust = runtime.trust
    verb = args.sources_command
    if verb == "list":
        sources = _known_sources(runtime, None)
        rows = [
            {
                "id": s.id,
                "kind": s.kind,
                "origin": s.origin,
                "enabled": trust.is_enabled(s) or (s.kind != "pack" and s.kind != "entrypoint"),
                "trusted": trust.is_trusted(s),
            }
            for s in sources.values()
        ]
        if args.json:
            print(json.dumps(rows, ensure_ascii=False))
        elif not rows:
            print("No third-party tool sources: only Deskhand's own tools are installed.")
        for row in [] if args.json else rows:
            state = ("enabled" if row["enabled"] else "disabled") + (
                ", trusted" if row["trusted"] else ", not trusted"
            )
            print(f"{row['id']:<32} {state:<24} {row['origin']}")
        return EXIT_OK
    if verb in ("untrust", "disable") and trust.record(args.id) is not None:
        (trust.untrust if verb == "untrust" else trust.disable)(args.id)
        print(f"{args.id}: {'not trusted' if verb == 'untrust' else 'disabled'}")
        return EXIT_OK
    sources = _known_sources(runtime, args.id)
    source = sources.get(args.id)
    if source is None:
        print(
            f"deskhand: there is no tool source {args.id!r} (see `deskhand sources list`)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if verb == "enable":
        if source.kind not in ("pack", "entrypoint"):
            print(f"deskhand: {args.id} needs no enabling; `trust` it instead", file=sys.stderr)
            return EXIT_USAGE
        names = runtime.enable_pack(source)
        print(f"{args.id}: enabled ({len(names)} tools); its calls ask until you trust it")
        return EXIT_OK
    if verb == "trust":
        trust.trust(source)
        print(f"{args.id}: trusted as it is now; a change to it makes it untrusted again")
        return EXIT_OK
    return EXIT_OK  # untrust/disable of a source never recorded: nothing to do
