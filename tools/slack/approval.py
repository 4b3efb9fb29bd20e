"""Approval hooks of the Slack tools that write: the workspace and channel a call acts on
(`subject`) and one plain line saying what it will do (`summary_line`).

No network, no secrets: the account is named from the local account list, the channel as the
arguments give it (resolving a name would ask Slack).
"""

from __future__ import annotations

import re
from typing import Any

from tools.integrations.approval import call_account, clean, quoted
from tools.spec import Subject, ToolContext

#: As tools.slack.tools: a channel id is used as given, anything else is a channel name.
_CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{6,}$")


def channel_words(channel: str) -> str:
    """"#general" for a name (with or without its #), the id itself for an id."""
    ref = channel.strip()
    if _CHANNEL_ID.match(ref):
        return f"channel {ref}"
    return "#" + clean(ref.lstrip("#"), 40)


def subject(args: Any, ctx: ToolContext) -> Subject:
    account = call_account(ctx, "slack", args.account)
    target = f"{account.name} · {channel_words(args.channel)}" if account.name else None
    return account.subject(target)


def summary_send_message(args: Any, ctx: ToolContext) -> str:
    account = call_account(ctx, "slack", args.account)
    where = f"{account.title} · {account.label}" if account.label else account.words()
    channel = channel_words(args.channel)
    if args.thread_ts:
        return f"Reply in a thread of {channel} in {where}: {quoted(args.text)}"
    return f"Post to {channel} in {where}: {quoted(args.text)}"
