"""`deskhand ask PROMPT`: one question, its answer streamed as text or JSON events."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.common import (
    EXIT_OK,
    EXIT_PROVIDER,
    EXIT_USAGE,
    can_ask,
    elicitation,
    folder_note,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.cli.collector import StartUpPause
    from app.core.providers.base import ChatMessage
    from app.core.runtime import Runtime


async def ask_command(args: argparse.Namespace, pause: StartUpPause | None = None) -> int:
    """`pause`: the collector's pause while the command starts (ended when the turn does)."""
    try:
        runtime = load_for_ask(args.home)
    except Exception as exc:  # an unreadable home or database: say so plainly
        print(f"deskhand: cannot open the home folder: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        from app.core.logging_setup import configure
        from app.core.runtime import ConfigError

        configure(runtime.secrets.known_values, log_dir=runtime.home / "logs")
        try:
            return await _ask(args, runtime, pause)
        except ConfigError as exc:
            print(f"deskhand: {exc}", file=sys.stderr)
            return EXIT_USAGE
    finally:
        runtime.close()


def load_for_ask(home: str | Path | None) -> Runtime:
    """The runtime with what a turn needs loaded (settings, store, tools, agent, client)."""
    from app.core.runtime import Runtime

    # the stored secrets load after the imports rather than beside them: in one process
    # the two only take turns with the interpreter, and each hand-over cost the other a
    # switch interval (a stored key added 30 ms to the start, now 10 ms)
    runtime = Runtime(home, load_secrets=False)
    try:
        runtime.warm_up()
        _ = runtime.store
        runtime.secrets.wait_loaded()
    except BaseException:
        runtime.close()
        raise
    return runtime


async def _ask(args: argparse.Namespace, runtime: Runtime, pause: StartUpPause | None) -> int:
    from app.cli.output import JsonPrinter, TextPrinter, interactive_approver
    from app.core.approval import deny_all
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
        large: list[Path] = []  # large attached documents: searchable once it is stored
        message = _message(args, large.append)
        if message is None:
            return EXIT_USAGE
        approver = interactive_approver if can_ask(args) else deny_all
        folder_note(runtime)
        elicitation(args, runtime)
        conversation = runtime.open_conversation(args.conversation)
        if not args.conversation and conversation.id:  # stored: it has its id
            runtime.store.auto_title(conversation.id, args.prompt)
        if not _searchable(runtime, conversation.id, large):
            return EXIT_USAGE
        if uncached:
            await _mcp_head_start(runtime, uncached)
        agent = runtime.make_agent(provider, approver, auto_approve=args.yes)
        if pause is not None:
            pause.over()
        if conversation.id is not None:  # background jobs report here, also after the turn
            runtime.jobs.listen(conversation.id, printer.handle)
        async for event in agent.run(conversation, message):
            printer.handle(event)
        await _wait_for_jobs(runtime, conversation.id)
        printer.close()
        return EXIT_PROVIDER if printer.failed else EXIT_OK
    finally:
        await provider.aclose()
        starter.join()  # then runtime.close() stops every server it started


def _message(
    args: argparse.Namespace, searchable: Callable[[Path], object]
) -> str | ChatMessage | None:
    """The prompt with its attached files; None (each problem said) when one cannot be
    attached: nothing is sent half-attached. A large document goes in as its outline and
    is handed to `searchable` (made searchable once the conversation is stored)."""
    if not args.attach:
        return str(args.prompt)
    from app.core.attachments import PasswordTries, build_user_message

    tries = PasswordTries()
    while True:
        message, problems = build_user_message(
            args.prompt, list(args.attach), searchable=searchable, passwords=tries.passwords
        )
        locked = tries.to_ask(problems)
        if not locked or not can_ask(args):
            break
        for problem in locked:  # someone is at the terminal: ask, then read them again
            name = Path(problem.path).name
            tries.answer(problem.path, _read_password(name, problem.reason))
    for problem in problems:
        print(f"deskhand: cannot attach {problem.path}: {problem.reason}", file=sys.stderr)
    return None if problems else message


def _read_password(name: str, reason: str) -> str:
    """A line typed at the terminal without echo (the password of an encrypted file)."""
    from app.core.documents.model import WRONG_PASSWORD

    if reason == WRONG_PASSWORD:
        prompt = f"That password does not open {name}. Password: "
    else:
        prompt = f"{name} is encrypted. Password (used for this message only): "
    if os.name != "posix":
        import getpass

        return getpass.getpass(prompt, stream=sys.stderr)
    import termios

    fd = sys.stdin.fileno()
    before = termios.tcgetattr(fd)
    quiet = termios.tcgetattr(fd)
    quiet[3] &= ~termios.ECHO
    try:
        termios.tcsetattr(fd, termios.TCSADRAIN, quiet)  # echo off before the prompt shows
        print(prompt, end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, before)
        print(file=sys.stderr)
    return line.rstrip("\r\n")


def _searchable(runtime: Runtime, conversation_id: str | None, large: list[Path]) -> bool:
    """The large attached documents join the conversation's knowledge (read by page with
    knowledge_read); False (each problem said) when one cannot."""
    for path in dict.fromkeys(large):  # read again after a password: once each
        try:
            if conversation_id is None:
                raise ValueError("the conversation is not stored")
            runtime.knowledge.add_attachment(conversation_id, path)
        except ValueError as exc:
            print(f"deskhand: cannot attach {path}: {exc}", file=sys.stderr)
            return False
    return True


async def _wait_for_jobs(runtime: Runtime, conversation_id: str | None) -> None:
    """Jobs the turn left running end before the command does (Ctrl-C stops them)."""
    running = runtime.jobs.active(conversation_id)
    if running:
        names = ", ".join(f"{job.id} ({job.tool})" for job in running)
        print(f"deskhand: waiting for {names}; Ctrl-C stops them", file=sys.stderr)
        await runtime.jobs.wait(running)


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
            elicitation(self._args, self._runtime)

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()
