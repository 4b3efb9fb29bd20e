"""The terminal tools' bodies: run a command line or a snippet, in a pseudo-terminal, in
the OS sandbox where there is one, with the user's environment minus secrets; and the
background commands (dev servers) they start, which end when Deskhand quits."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tools.redact import TRIPWIRE, shorten
from tools.shell.hooks import sandbox_state, working_folder
from tools.spec import ToolCancelled, ToolContext, ToolError, ToolResult

#: What the model gets of a command's output (start and end), below the runner's own cap so
#: the end and the exit code always reach it (the card gets more, streamed).
MAX_OUTPUT = 24_000
#: How often streamed output reaches the tool card.
PROGRESS_EVERY = 0.25
_INTERPRETERS = {
    "python": ("python3", ".py"),
    "javascript": ("node", ".js"),
    "shell": ("bash", ".sh"),
}

#: bash exactly as the parser reads the line: no startup files, no $BASH_ENV.
BASH = ["bash", "--noprofile", "--norc", "-c"]

_background: Any = None
_background_lock = threading.Lock()
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="deskhand-shell-spawner")


def background() -> Any:
    """The background commands of this process (created on first use; they end at exit)."""
    global _background
    with _background_lock:
        if _background is None:
            import atexit

            from tools.shell.process import Background

            _background = Background()
            atexit.register(end_background)
        return _background


def end_background() -> None:
    """At quit: background commands end (unless kept) and their last changes are copied
    back (held writes are not: nobody is asked)."""
    if _background is not None:
        _background.stop_all()
    settle_all()


# ---- the sandbox and the environment ------------------------------------------------------


def _hidden(ctx: ToolContext) -> list[Path]:
    """Protected places (credential stores, Deskhand's home) the command must not see."""
    from tools.fs.sandbox import Sandbox

    box = Sandbox.from_context(ctx)
    hidden = [Path(p) for p in box.denied]
    if box.deskhand_home is not None:
        hidden.append(box.deskhand_home)
    return hidden


def _argv(
    argv: list[str],
    ctx: ToolContext,
    folder: Path,
    writable: list[Path],
    network: bool,
    *,
    keep: bool = False,
    overlay: Any = None,
) -> tuple[list[str], str]:
    """The command line to start (wrapped in the sandbox when it applies) and, in plain
    words, whether it runs sandboxed. `overlay` (`tools.shell.overlay.Overlay`): writes go
    to it and are copied back after the run, auto-run places held."""
    sandboxed, how = sandbox_state(ctx)
    if not sandboxed:
        return argv, how
    from tools.shell.sandbox import autorun_readonly, wrap

    wrapped = wrap(
        argv,
        cwd=folder,
        writable=writable,
        hidden=_hidden(ctx) + ([overlay.private] if overlay is not None else []),
        network=network,
        die_with_parent=not keep,
        # git config and hooks, start-up files… inside the writable folders stay read-only:
        # what sandboxed code plants there must not run later outside the sandbox
        readonly=autorun_readonly(writable, Path.home()),
    )
    return (wrapped if overlay is None else overlay.argv(wrapped)), how


def _allow_held(ctx: ToolContext, report: Any) -> bool:
    """Asks a person — never `--yes`, never a rule — whether the writes the command made
    to places that run code later (held, not written) may be written now."""
    count = len(report.held)
    summary = (
        f"Write the command's changes to {count} place{'s' if count != 1 else ''} whose "
        "files run later outside the sandbox?"
    )
    detail = (
        "The sandboxed command changed places whose files run later with your full rights, "
        "outside the sandbox (git hooks and config, hook managers, .envrc, start-up files, "
        "folders on PATH). None of it was written. Allow writes it now; Deny keeps your "
        "files as they were.\n\n" + "\n".join(report.held)
    )
    return ctx.confirm(summary, detail, never_covered=True)


def _foreground(
    args: Any, ctx: ToolContext, argv: list[str], folder: Path, writable: list[Path], shown: str
) -> ToolResult:
    """Run `argv` in `folder` and wait: streamed to the card, ended with its tree on timeout
    or Stop; the result for the model."""
    from tools.shell.overlay import annotate
    from tools.shell.process import run as run_process

    # writes land in an overlay and are copied back afterwards, auto-run places held
    sandboxed = sandbox_state(ctx)[0]
    overlay = _overlay_for(ctx, writable) if sandboxed else None
    # Linux has an overlay unless it could not be mounted: say when protection was missing
    without_overlay = (
        sandboxed and overlay is None and sys.platform.startswith("linux")
        and any(Path(p).is_dir() for p in writable)
    )
    try:
        command, how = _argv(argv, ctx, folder, writable, args.network, overlay=overlay)
        done = run_process(
            command,
            cwd=folder,
            env=_environment(ctx),
            timeout=_timeout(args, ctx),
            cancel=ctx.cancel_event,
            on_output=_streamer(ctx),
            redactor=TRIPWIRE.redactor(ctx.secret_values()),
        )
    finally:
        ask = None if ctx.cancelled else (lambda held: _allow_held(ctx, held))
        report = overlay.finish(ask) if overlay is not None else None
    try:
        result = _result(shown, folder, done, how, ctx)
    except ToolCancelled as stopped:
        notes = report.notes() if report is not None else []
        if without_overlay:
            from tools.shell.overlay import WITHOUT_OVERLAY

            notes.append(WITHOUT_OVERLAY)
        raise ToolCancelled("\n".join([str(stopped), *notes])) from None
    return annotate(result, report, without_overlay=without_overlay)


def _environment(ctx: ToolContext) -> dict[str, str]:
    from tools.shell.environment import child_environment

    env = child_environment(os.environ, ctx.secret_values())
    for name in ("BASH_ENV", "ENV"):  # files bash would run before the line
        env.pop(name, None)
    return env


def _roots(ctx: ToolContext) -> list[Path]:
    from tools.fs.sandbox import Sandbox

    return list(Sandbox.from_context(ctx).allowed_roots)


def _timeout(args: Any, ctx: ToolContext) -> float:
    if args.timeout is not None:
        return float(args.timeout)
    shell = getattr(getattr(ctx, "settings", None), "shell", None)
    return float(getattr(shell, "timeout", 120) or 120)


# ---- streaming to the card ------------------------------------------------------------------


def _streamer(ctx: ToolContext) -> Callable[[str], None]:
    """Sends the newest output lines to the tool card, a few times a second at most. The
    output passes the tripwire as it streams (a secret split across chunks is still caught,
    the end that could be part of one held back) before anything of it is cut."""
    from tools.shell.process import plain

    last = 0.0
    tail = ""
    stream = TRIPWIRE.stream(ctx.secret_values())

    def on_output(chunk: str) -> None:
        nonlocal last, tail
        tail = shorten(tail + stream.feed(plain(chunk)), 2000, end=True, mark="", redacted=True)
        now = time.monotonic()
        if now - last >= PROGRESS_EVERY:
            last = now
            lines = [line for line in tail.splitlines() if line.strip()]
            if lines:
                shown = shorten("\n".join(lines[-6:]), 600, end=True, mark="", redacted=True)
                ctx.progress(shown)

    return on_output


def _result(command: str, folder: Path, run: Any, how: str, ctx: ToolContext) -> ToolResult:
    from tools.shell.process import plain

    redactor = TRIPWIRE.redactor(ctx.secret_values())
    shown = plain(run.output)
    output = redactor.text(shown)  # redacted before anything is cut
    # The card shows the output with its colours; a secret split by an escape sequence
    # ("sec\x1b[0mret") or hidden in one would get past the tripwire there, so then it
    # gets the plain text.
    raw = run.output
    if output != shown or redactor.text(raw) != raw:
        raw = output
    if len(output) > MAX_OUTPUT:
        cut = len(output) - MAX_OUTPUT
        middle = f"\n… {cut} characters left out …\n"
        half = MAX_OUTPUT // 2
        output = (
            shorten(output, half, mark="", redacted=True)
            + middle
            + shorten(output, half, end=True, mark="", redacted=True)
        )
    notes = []
    if run.truncated:
        notes.append("the output was shortened (its middle left out)")
    if run.timed_out:
        notes.append("it ran out of time and was stopped, with everything it started")
    if run.cancelled:
        notes.append("it was stopped, with everything it started")
    status = f"exit code {run.exit_code}" if run.exit_code is not None else "no exit code"
    if run.signal:
        status += f" (ended by signal {run.signal})"
    footer = f"[{status}; {how}" + ("; " + "; ".join(notes) if notes else "") + "]"
    data = {
        "command": command,
        "folder": str(folder),
        "exit_code": run.exit_code,
        "timed_out": run.timed_out,
        "sandboxed": how.startswith("sandboxed"),
        # with colours, for the card
        "terminal": shorten(raw, MAX_OUTPUT, redactor=redactor, end=True, mark=""),
    }
    text = f"{output.rstrip()}\n{footer}" if output.strip() else footer
    if run.cancelled:
        raise ToolCancelled(text)
    ok = run.exit_code == 0 and not run.timed_out
    return ToolResult(ok=ok, content=text, data=data, error=None if ok else footer)


# ---- the tools ------------------------------------------------------------------------------


def run_command(args: Any, ctx: ToolContext) -> ToolResult:
    folder, problem = working_folder(args, ctx)
    if folder is None:
        raise ToolError(problem or "no folder to run in")
    return _foreground(args, ctx, [*BASH, args.command], folder, _roots(ctx), args.command)


def run_code(args: Any, ctx: ToolContext) -> ToolResult:
    program, suffix = _INTERPRETERS[args.language]
    if shutil.which(program) is None:
        raise ToolError(f"{args.language} code needs `{program}`, which is not installed")
    folder = Path(tempfile.mkdtemp(prefix="deskhand-code-"))
    try:
        script = folder / f"snippet{suffix}"
        script.write_text(args.code, "utf-8")
        argv = [program, script.name]
        return _foreground(args, ctx, argv, folder, [folder], shlex.join(argv))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


#: Background commands writing through an overlay, by id: copied back as they run, settled
#: (last pass, the question about held writes) when they end.
_LIVE: dict[str, Any] = {}
_LIVE_LOCK = threading.Lock()


def _overlay_for(ctx: ToolContext, writable: list[Path]) -> Any:
    """An overlay over the writable folders (None where none can be mounted); the changes
    wait under Deskhand's home (`overlays/`) until they are copied back."""
    from tools.fs.sandbox import Sandbox
    from tools.shell.overlay import prepare

    own = Sandbox.from_context(ctx).deskhand_home
    return prepare(writable, Path.home(), own / "overlays" if own is not None else None)


def start_command(args: Any, ctx: ToolContext) -> ToolResult:
    from tools.shell.overlay import LiveCopy

    folder, problem = working_folder(args, ctx)
    if folder is None:
        raise ToolError(problem or "no folder to run in")
    roots = _roots(ctx)
    # a kept command outlives Deskhand: nobody would copy its writes back (keeping asks)
    overlay = _overlay_for(ctx, roots) if sandbox_state(ctx)[0] and not args.keep else None
    argv, how = _argv(
        [*BASH, args.command], ctx, folder, roots, args.network, keep=args.keep, overlay=overlay
    )
    processes = background()
    env = _environment(ctx)
    # started from one thread that lives as long as Deskhand: a sandboxed command dies with
    # the thread that started it (bubblewrap's --die-with-parent), not with a pool thread
    ident = _SPAWNER.submit(
        processes.start,
        argv,
        cwd=folder,
        env=env,
        label=args.label or shorten(args.command, 80, secrets=ctx.secret_values(), mark=""),
        command=args.command,
    ).result()
    if args.keep:
        processes.keep(ident, True)
    if overlay is not None:
        with _LIVE_LOCK:
            _LIVE[ident] = LiveCopy(overlay, alive=lambda: processes.info(ident).running)
    return ToolResult(
        ok=True,
        content=f"started background command {ident} in {folder} ({how}); "
        "read its output with shell_read",
        data={"id": ident, "folder": str(folder), "sandboxed": how.startswith("sandboxed")},
    )


def list_commands(args: Any, ctx: ToolContext) -> ToolResult:
    found = background().list()
    if not found:
        return ToolResult(ok=True, content="no background commands", data={"processes": []})
    lines = []
    for info in found:
        state = "running" if info.running else f"ended (exit code {info.exit_code})"
        lines.append(f"{info.id}  {state}  in {info.cwd}: {info.command}")
    return ToolResult(
        ok=True,
        content="\n".join(lines),
        data={"processes": [_info_json(i) for i in found]},
    )


def _info_json(info: Any) -> dict[str, Any]:
    return {
        "id": info.id,
        "label": info.label,
        "command": info.command,
        "folder": str(info.cwd),
        "running": info.running,
        "exit_code": info.exit_code,
    }


def _known(ident: str) -> Any:
    for info in background().list():
        if info.id == ident:
            return info
    raise ToolError(f"there is no background command {ident!r} (see shell_list)")


def read_output(args: Any, ctx: ToolContext) -> ToolResult:
    from tools.shell.process import plain

    _known(args.id)
    background().wait(args.id, 1.0)  # a moment for output the command is about to print
    info = _known(args.id)
    redactor = TRIPWIRE.redactor(ctx.secret_values())
    text = plain(background().read(args.id, args.max_bytes, redactor))
    state = "running" if info.running else f"ended with exit code {info.exit_code}"
    notes = [] if info.running else _settle(args.id, ctx)
    return ToolResult(
        ok=True,
        content=(text.rstrip() + "\n" if text.strip() else "(no new output)\n")
        + f"[{state}]"
        + "".join(f"\n[{n}]" for n in notes),
        data={"id": args.id, "running": info.running, "exit_code": info.exit_code},
    )


def _settle(ident: str, ctx: ToolContext | None) -> list[str]:
    """A background command that ended: its last copy-back and, with a person to ask
    (`ctx`, never `--yes`), the question about the writes held; notes for the result."""
    with _LIVE_LOCK:
        live = _LIVE.pop(ident, None)
    if live is None:
        return []
    live.stop()
    ask = None if ctx is None or ctx.cancelled else (lambda held: _allow_held(ctx, held))
    return [str(n) for n in live.overlay.finish(ask).notes()]


def settle_all() -> None:
    """At quit: every background command's last copy-back; what was held is not written
    (nobody is asked)."""
    with _LIVE_LOCK:
        idents = list(_LIVE)
    for ident in idents:
        _settle(ident, None)


def send_input(args: Any, ctx: ToolContext) -> ToolResult:
    info = _known(args.id)
    if not info.running:
        raise ToolError(f"background command {args.id} has ended (exit code {info.exit_code})")
    try:
        background().send(args.id, args.text)
    except ProcessLookupError:
        raise ToolError(f"background command {args.id} has ended") from None
    except TimeoutError:
        raise ToolError(f"background command {args.id} is not reading its input") from None
    return ToolResult(ok=True, content=f"typed {len(args.text)} characters into {args.id}")


def stop_command(args: Any, ctx: ToolContext) -> ToolResult:
    _known(args.id)
    info = background().stop(args.id)
    notes = _settle(args.id, ctx)
    return ToolResult(
        ok=True,
        content=f"stopped background command {args.id} and everything it started "
        f"(exit code {info.exit_code})" + "".join(f"\n[{n}]" for n in notes),
        data=_info_json(info),
    )
