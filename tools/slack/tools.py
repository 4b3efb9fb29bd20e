"""Implementations of the Slack tools."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from integrations.slack import SlackClient, SlackError
from integrations.spec import Account
from tools.slack.manifest import Health, ListChannels, ReadMessages, SearchUsers, SendMessage
from tools.spec import ToolContext, ToolError, ToolResult

_CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{6,}$")
#: Authors looked up by id for one read (users.info each); the rest show as ids.
_MAX_NAME_LOOKUPS = 25


def account_for(ctx: ToolContext, ref: str | None) -> Account:
    """The account named by `ref` (label or id), or the active Slack account; secrets in."""
    return ctx.account("slack", named=ref)


@contextmanager
def slack(ctx: ToolContext, ref: str | None) -> Iterator[tuple[SlackClient, Account]]:
    """A client for the chosen account; Slack failures become ToolErrors."""
    account = account_for(ctx, ref)
    try:
        with SlackClient.for_account(account) as client:
            yield client, account
    except SlackError as exc:
        raise ToolError(str(exc)) from None


def _more(more: bool, shown: int) -> str:
    return f"\n(showing the first {shown}; more exist)" if more else ""


def health(args: Health, ctx: ToolContext) -> ToolResult:
    with slack(ctx, args.account) as (client, account):
        who = client.call("auth.test")
    data = {
        "team": who.get("team"),
        "team_id": who.get("team_id"),
        "user": who.get("user"),
        "user_id": who.get("user_id"),
        "bot": bool(who.get("bot_id")),
        "url": who.get("url"),
    }
    kind = "bot" if data["bot"] else "user"
    content = (
        f"Slack OK ({account.label}): workspace {data['team']} ({data['url']}), "
        f"signed in as {kind} {data['user']} ({data['user_id']})"
    )
    return ToolResult(ok=True, content=content, data=data)


def _channel_row(c: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": c.get("id"),
        "name": c.get("name"),
        "private": bool(c.get("is_private")),
        "archived": bool(c.get("is_archived")),
        "member": bool(c.get("is_member")),
        "members": c.get("num_members"),
        "topic": (c.get("topic") or {}).get("value") or "",
    }


def _channels(
    client: SlackClient, *, private: bool, archived: bool, limit: int
) -> tuple[list[Any], bool]:
    params = {
        "types": "public_channel,private_channel" if private else "public_channel",
        "exclude_archived": "false" if archived else "true",
    }
    return client.paginate("conversations.list", "channels", params, limit=limit)


def list_channels(args: ListChannels, ctx: ToolContext) -> ToolResult:
    with slack(ctx, args.account) as (client, account):
        channels, more = _channels(
            client, private=args.include_private, archived=args.include_archived, limit=args.limit
        )
    rows = [_channel_row(c) for c in channels]
    lines = [
        f"- #{r['name']} ({r['id']}){' private' if r['private'] else ''}"
        f"{' archived' if r['archived'] else ''}{'' if r['member'] else ' [not a member]'}"
        f", {r['members'] if r['members'] is not None else '?'} members"
        f"{': ' + r['topic'] if r['topic'] else ''}"
        for r in rows
    ]
    header = f"{len(rows)} channels ({account.label}):"
    return ToolResult(
        ok=True, content="\n".join([header, *lines]) + _more(more, len(rows)), data=rows
    )


def _user_row(u: dict[str, Any]) -> dict[str, Any]:
    profile = u.get("profile") or {}
    return {
        "id": u.get("id"),
        "name": u.get("name"),
        "real_name": u.get("real_name") or profile.get("real_name") or "",
        "display_name": profile.get("display_name") or "",
        "email": profile.get("email") or "",
        "title": profile.get("title") or "",
        "bot": bool(u.get("is_bot")),
    }


def search_users(args: SearchUsers, ctx: ToolContext) -> ToolResult:
    needle = args.query.strip().lower().lstrip("@")
    matches: list[dict[str, Any]] = []
    with slack(ctx, args.account) as (client, account):
        # users.list has no server-side filter: scan pages (bounded by the client's page cap).
        users, _ = client.paginate("users.list", "members", limit=10_000)
    for user in users:
        if user.get("deleted"):
            continue
        row = _user_row(user)
        haystack = " ".join(str(row[k]) for k in ("name", "real_name", "display_name", "email"))
        if needle in haystack.lower():
            matches.append(row)
    shown = matches[: args.limit]
    if not shown:
        return ToolResult(
            ok=True, content=f"Nobody matches {args.query!r} ({account.label}).", data=[]
        )
    lines = [
        f"- {r['real_name'] or r['name']} (@{r['display_name'] or r['name']}, {r['id']})"
        f"{' <' + r['email'] + '>' if r['email'] else ''}{' [bot]' if r['bot'] else ''}"
        for r in shown
    ]
    header = f"{len(matches)} people match {args.query!r} ({account.label}):"
    content = "\n".join([header, *lines]) + _more(len(matches) > len(shown), len(shown))
    return ToolResult(ok=True, content=content, data=shown)


def resolve_channel(client: SlackClient, channel: str) -> tuple[str, str]:
    """(id, display name) of a channel given by id, name or #name."""
    ref = channel.strip()
    if _CHANNEL_ID.match(ref):
        return ref, ref
    name = ref.lstrip("#").lower()
    channels, _ = _channels(client, private=True, archived=False, limit=10_000)
    for c in channels:
        if str(c.get("name", "")).lower() == name:
            return str(c["id"]), f"#{c['name']}"
    raise ToolError(f"no Slack channel named #{name} that this account can see")


def _names(client: SlackClient, ids: list[str]) -> dict[str, str]:
    names: dict[str, str] = {}
    for user_id in ids[:_MAX_NAME_LOOKUPS]:
        try:
            user = client.call("users.info", {"user": user_id}).get("user") or {}
        except SlackError:
            continue
        row = _user_row(user)
        names[user_id] = row["display_name"] or row["real_name"] or row["name"] or user_id
    return names


def _clock(ts: str) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(float(ts)))
    except ValueError:
        return ts


def read_messages(args: ReadMessages, ctx: ToolContext) -> ToolResult:
    with slack(ctx, args.account) as (client, account):
        channel_id, label = resolve_channel(client, args.channel)
        payload = client.call("conversations.history", {"channel": channel_id, "limit": args.limit})
        messages = list(reversed(payload.get("messages", [])[: args.limit]))
        authors = sorted({m["user"] for m in messages if m.get("user")})
        names = _names(client, authors)
    rows = [
        {
            "ts": m.get("ts"),
            "user": m.get("user") or m.get("bot_id"),
            "author": names.get(m.get("user", ""), m.get("username") or m.get("user") or "bot"),
            "text": m.get("text", ""),
            "replies": m.get("reply_count", 0),
        }
        for m in messages
    ]
    if not rows:
        return ToolResult(ok=True, content=f"{label} has no messages ({account.label}).", data=[])
    lines = [f"[{_clock(str(r['ts']))}] {r['author']}: {r['text']}{_thread(r)}" for r in rows]
    header = f"Last {len(rows)} messages in {label} ({account.label}):"
    more = _more(bool(payload.get("has_more")), len(rows))
    return ToolResult(ok=True, content="\n".join([header, *lines]) + more, data=rows)


def _thread(row: dict[str, Any]) -> str:
    return f" ({row['replies']} replies, thread ts {row['ts']})" if row["replies"] else ""


def preview_send_message(args: SendMessage, ctx: ToolContext) -> str:
    account = account_for(ctx, args.account)
    where = f"thread {args.thread_ts} in {args.channel}" if args.thread_ts else args.channel
    return f"Post to {where} as {account.label}:\n\n{args.text}"


def send_message(args: SendMessage, ctx: ToolContext) -> ToolResult:
    with slack(ctx, args.account) as (client, account):
        channel_id, label = resolve_channel(client, args.channel)
        body = {"channel": channel_id, "text": args.text, "thread_ts": args.thread_ts}
        sent = client.call("chat.postMessage", body, post=True)
    data = {"channel": sent.get("channel", channel_id), "ts": sent.get("ts")}
    content = f"Posted to {label} as {account.label} (ts {data['ts']})."
    return ToolResult(ok=True, content=content, data=data)
