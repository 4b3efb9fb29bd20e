"""The environment a terminal command gets: the user's, minus secrets and Deskhand's own
variables, plus defaults that make programs fail or go on instead of waiting for a keyboard.

Removed: a variable whose value is or contains a known secret or looks like a credential
(a token format, a password in a URL), whose name looks like a credential (`GITHUB_TOKEN`,
`PGPASSWORD`, `DB_PASS`, `SSH_AUTH_SOCK` — the agent socket lends the user's keys to whatever
runs), Deskhand's own (`DESKHAND_*`), the keyring's (`KEYRING_*`, `PYTHON_KEYRING_*`) and
`CI` (it changes how test runners and installers behave).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from tools.redact import MIN_SECRET_LENGTH, TRIPWIRE, is_credential_key

#: Set by `tools.shell.process` to a fresh value per command: every descendant inherits it,
#: so the whole tree can be found and ended, also processes that left the process group.
MARKER_ENV = "DESKHAND_SHELL_RUN"

#: Programs that would open a pager, an editor or a prompt get one that does not wait.
#: GIT_EDITOR=true: git keeps the message it prepared (merge, rebase --continue, amend) and
#: refuses an empty one (`git commit` without -m aborts); other editors fail visibly.
NON_INTERACTIVE: dict[str, str] = {
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "MANPAGER": "cat",
    "SYSTEMD_PAGER": "cat",
    "GH_PAGER": "cat",
    "AWS_PAGER": "",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_EDITOR": "true",
    "GIT_MERGE_AUTOEDIT": "no",
    "EDITOR": "false",
    "VISUAL": "false",
    "GH_PROMPT_DISABLED": "1",
    "PIP_NO_INPUT": "1",
    "DEBIAN_FRONTEND": "noninteractive",
    "TERM": "xterm-256color",
}

_OWN_PREFIXES = ("DESKHAND_", "KEYRING_", "PYTHON_KEYRING_")
#: CDPATH would send `cd sub` somewhere else than the folder rules were checked against.
_DROPPED = frozenset({"CI", "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "CDPATH"})
#: Names the credential pattern matches that hold nothing secret.
_NOT_CREDENTIALS = frozenset({"PWD", "OLDPWD", "XDG_SESSION_ID"})
#: Names `is_credential_key` leaves out: `SSH_KEY`, `DB_PASS`, `GH_PAT`, `PGPASSWORD`.
_KEYISH_NAME = re.compile(r"(?i)[_\-.](key|pass|pw|pat)$|passw(or)?d|passphrase")


def credential_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a credential."""
    if name in _NOT_CREDENTIALS:
        return False
    return is_credential_key(name) or bool(_KEYISH_NAME.search(name))


def _dropped(name: str, value: str, secrets: list[str]) -> bool:
    if name in _DROPPED or name.upper().startswith(_OWN_PREFIXES) or credential_name(name):
        return True
    if any(secret in value for secret in secrets):
        return True
    return TRIPWIRE.looks_like_credential(value)


def child_environment(base: Mapping[str, str], secrets: Iterable[str]) -> dict[str, str]:
    """`base` (normally os.environ) without secrets and Deskhand's variables, with the
    non-interactive defaults. The per-command marker is added by the process runner."""
    known = [s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH]
    env = {name: value for name, value in base.items() if not _dropped(name, value, known)}
    env.update(NON_INTERACTIVE)
    return env
