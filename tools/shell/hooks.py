"""What the approval pipeline needs to know about a terminal call, before it runs.

`subject`: every simple command of the line (parsed as bash would, after unwrapping `env`,
`sh -c`, `xargs`…), each with the prefix "Always allow" proposes; the folder. A call runs
without asking only when an allow rule covers every one of them (app/core/rules.py).
`escalate`: why it must ask although a rule might cover it — and what no rule covers
(privilege escalation, a download piped into an interpreter, writing to a protected place,
a line the parser cannot understand, no sandbox).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from tools.spec import CommandPart, Escalation, Subject, ToolContext
from tools.summary_text import quoted


def part_of(command: Any) -> CommandPart:
    """One parsed simple command as rules see it: its words, quoted; with a risky
    assignment in front (or words not known before it runs) no prefix can match it."""
    from tools.shell.danger import runs_model_code
    from tools.shell.parse import _risky, proposal_prefix

    words = list(command.words)
    risky = [a for a in command.assignments if _risky(a.split("=", 1)[0].rstrip("+"))]
    text = shlex.join([*risky, *words]) if words else ""
    if command.dynamic or not words:
        text = "$(not known before it runs) " + text  # never matches a prefix
    return CommandPart(
        text=text,
        prefix=proposal_prefix(command) if words else "",
        in_folder=runs_model_code(command),
    )


def working_folder(args: Any, ctx: ToolContext) -> tuple[Path | None, str | None]:
    """The checked working folder, or None and why it cannot be used."""
    from tools.fs.sandbox import Sandbox, SandboxError

    box = Sandbox.from_context(ctx)
    raw = getattr(args, "folder", None)
    if raw is None:
        if not box.allowed_roots:
            return None, box.note or "Deskhand has no folder to run commands in"
        return box.allowed_roots[0], None
    try:
        folder = box.resolve(raw)
    except SandboxError as exc:
        return None, str(exc)
    if not folder.is_dir():
        return None, f"'{raw}' is not a folder"
    return folder, None


def _parsed(args: Any) -> Any:
    from tools.shell.parse import parse_line

    return parse_line(args.command)


def subject(args: Any, ctx: ToolContext) -> Subject:
    folder, _ = working_folder(args, ctx) if hasattr(args, "folder") else (None, None)
    paths = (str(folder),) if folder is not None else ()
    network = bool(getattr(args, "network", False))
    if hasattr(args, "command"):
        parsed = _parsed(args)
        parts = tuple(part_of(c) for c in parsed.commands)
        if not parts:  # nothing understood: one part that no rule covers
            parts = (CommandPart(text="$(not understood) " + args.command, prefix=""),)
        target = f"Terminal · {_short(folder)}" if folder is not None else "Terminal"
        return Subject(
            paths=paths, command=args.command, commands=parts, network=network, target=target
        )
    if hasattr(args, "id"):
        return Subject(target=f"Terminal · background command {args.id}")
    return Subject(paths=paths, network=network, target="Terminal · a new temporary folder")


def _short(folder: Path | None) -> str:
    if folder is None:
        return "?"
    home = Path.home()
    try:
        return "~/" + folder.relative_to(home).as_posix() if folder != home else "~"
    except ValueError:
        return str(folder)


def sandbox_state(ctx: ToolContext) -> tuple[bool, str]:
    """(whether commands run sandboxed, in plain words why or why not)."""
    from tools.shell.sandbox import probe

    shell = getattr(getattr(ctx, "settings", None), "shell", None)
    if getattr(shell, "sandbox", "auto") == "off":
        return False, "the sandbox is turned off in Settings"
    info = probe()
    if not info.available:
        return False, f"this system has no usable sandbox ({info.why})"
    return True, f"sandboxed ({info.kind})"


def escalate(args: Any, ctx: ToolContext) -> Escalation | None:
    """Never covered: privilege escalation, a download run by an interpreter, writes to
    protected places, a line not understood, no sandbox. Otherwise an escalation only a
    command rule covering every simple command waives (a broad rule never does)."""
    name = type(args).__name__
    if name == "SendInput":
        return Escalation("types into a running program; what it does depends on that program")
    if name == "ProcessRef":
        return None
    sandboxed, why = sandbox_state(ctx)
    network = bool(getattr(args, "network", False))
    if name == "RunCode":
        if not sandboxed:
            return Escalation(f"runs code the model wrote without a sandbox: {why}", True)
        if network:
            return Escalation("runs code the model wrote with the network (data may leave)")
        return None
    folder, _ = working_folder(args, ctx)
    if folder is None:
        return None  # the tool refuses the folder itself; nothing to ask
    reasons = _never(args, folder, ctx)
    if getattr(args, "keep", False):
        reasons.append("it keeps running after Deskhand quits")
    if not sandboxed:
        reasons.append(f"it would run without a sandbox: {why}")
    if reasons:
        return Escalation("; ".join(reasons), never_covered=True)
    where = "with the network (data may leave the machine)" if network else "sandboxed"
    return Escalation(f"runs a command on your machine, {where}")


def _never(args: Any, folder: Path, ctx: ToolContext) -> list[str]:
    from tools.fs.sandbox import Sandbox
    from tools.shell.danger import never_covered

    box = Sandbox.from_context(ctx)

    def protected(path: str) -> str | None:
        hit = box.protected.match(Path(path), follow_final=False)
        return hit.label if hit is not None else None

    return list(never_covered(_parsed(args), protected=protected, cwd=folder))


def summary_line(args: Any, ctx: ToolContext) -> str:
    name = type(args).__name__
    if name == "SendInput":
        return f"Type {quoted(args.text, 60)} into background command {args.id}"
    if name == "ProcessRef":
        return f"Stop background command {args.id} and everything it started"
    sandboxed, _ = sandbox_state(ctx)
    how = "sandboxed" if sandboxed else "NOT sandboxed"
    net = ", with the network" if getattr(args, "network", False) else ""
    if name == "RunCode":
        return f"Run {args.language} code in a temporary folder ({how}{net})"
    folder, problem = working_folder(args, ctx)
    where = _short(folder) if folder is not None else (problem or "?")
    verb = "Start in the background" if name == "StartCommand" else "Run"
    keep = ", kept running after Deskhand quits" if getattr(args, "keep", False) else ""
    return f"{verb} {quoted(args.command, 120)} in {where} ({how}{net}{keep})"
