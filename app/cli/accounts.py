"""`deskhand accounts list | add | use | remove`."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from typing import Any

from app.core.accounts import AccountError

EXIT_OK, EXIT_USAGE = 0, 2


def run_accounts(args: argparse.Namespace, runtime: Any) -> int:
    directory = runtime.accounts
    try:
        if args.accounts_command == "list":
            return _list(directory, args)
        if args.accounts_command == "add":
            values = dict(_pair(f) for f in args.field)
            secret_fields = set(directory.spec(args.integration).secret_fields)
            passed = sorted(secret_fields & set(values))
            if passed:
                raise ValueError(
                    f"{', '.join(passed)} is secret: pass --secret {passed[0]} and type it at "
                    "the prompt (arguments end up in shell history)"
                )
            for name in args.secret:
                values[name] = _read_secret(name)
            account = directory.add(args.integration, args.label, values, make_active=args.use)
            print(f"added {account.integration} account {account.label} ({account.id})")
            return EXIT_OK
        if args.accounts_command == "use":
            account = directory.set_active(args.integration, args.account)
            print(f"{account.integration}: now using {account.label}")
            return EXIT_OK
        account = directory.remove(args.integration, args.account)
        print(f"removed {account.integration} account {account.label}")
        return EXIT_OK
    except (AccountError, ValueError) as exc:
        print(f"deskhand: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _list(directory: Any, args: argparse.Namespace) -> int:
    specs = [directory.spec(args.integration)] if args.integration else directory.integrations()
    rows = []
    for spec in specs:
        active = directory.active(spec.id)
        for account in directory.list(spec.id):
            row = account.public()
            row["active"] = active is not None and account.id == active.id
            rows.append(row)
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
        return EXIT_OK
    for row in rows:
        mark = "*" if row["active"] else " "
        origin = " (found on this machine)" if row["discovered"] else ""
        print(f"{mark} {row['integration']:<12} {row['label']}  [{row['id']}]{origin}")
    if not rows:
        print("no accounts")
    return EXIT_OK


def _pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise ValueError(f"--field wants NAME=VALUE, got {text!r}")
    return name, value


def _read_secret(name: str) -> str:
    if sys.stdin.isatty():
        return getpass.getpass(f"{name}: ")
    return sys.stdin.readline().rstrip("\n")
