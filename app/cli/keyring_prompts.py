"""The command line's answers for the encrypted secret store (app/core/keyring_fallback.py):
`DESKHAND_KEYRING_PASSPHRASE`, else a question on the terminal, else nobody is asked."""

from __future__ import annotations

import getpass
import sys

from app.core.keyring_fallback import (
    FallbackError,
    Prompts,
    check_new_passphrase,
    env_passphrase,
    install_prompts,
)


def terminal_passphrase(creating: bool) -> str | None:
    """`$DESKHAND_KEYRING_PASSPHRASE`, else a prompt on a terminal, else None."""
    value = env_passphrase()
    if value:
        return value
    if not _interactive():
        return None
    first = getpass.getpass("Passphrase for Deskhand's encrypted secret store: ")
    if creating and first:
        check_new_passphrase(first)  # before asking to repeat a passphrase we will refuse
        if getpass.getpass("Repeat the passphrase: ") != first:
            raise FallbackError("the two passphrases differ; nothing was set up")
    return first or None


def terminal_consent(explanation: str) -> bool:
    """Setting the passphrase variable is consent; on a terminal the user is asked."""
    if env_passphrase():
        return True
    if not _interactive():
        return False
    print(explanation, file=sys.stderr)
    answer = input("Use an encrypted file for Deskhand's secrets? [y/N] ")
    return answer.strip().lower() in {"y", "yes"}


def _interactive() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


TERMINAL_PROMPTS = Prompts(terminal_passphrase, terminal_consent)


def install_terminal_prompts() -> Prompts:
    """Ask on the terminal from now on; returns the answers that were installed before."""
    return install_prompts(TERMINAL_PROMPTS)
