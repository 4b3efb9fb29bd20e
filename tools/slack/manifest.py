"""Slack tools: cheap declarations. Implementations load httpx on first call."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tools.spec import Operation, ToolManifest

_ACCOUNT_HELP = "Label or id of the Slack account (workspace) to use (default: the active one)"
_CHANNEL_HELP = "Channel name like '#general' or 'general', or a channel ID like 'C0123ABCD'"
_ACCOUNT_NOTE = "Acts as the active Slack account unless `account` names another."


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    account: str | None = Field(None, description=_ACCOUNT_HELP)


class Health(_Params):
    pass


class ListChannels(_Params):
    include_private: bool = Field(True, description="Include private channels the token can see")
    include_archived: bool = Field(False, description="Include archived channels")
    limit: int = Field(200, ge=1, le=1000, description="Show at most this many channels")


class SearchUsers(_Params):
    query: str = Field(
        "", description="Part of a name, display name or email; empty lists everyone"
    )
    limit: int = Field(20, ge=1, le=200, description="Show at most this many people")


class ReadMessages(_Params):
    channel: str = Field(..., min_length=1, description=_CHANNEL_HELP)
    limit: int = Field(20, ge=1, le=200, description="The newest N messages")


class SendMessage(_Params):
    channel: str = Field(..., min_length=1, description=_CHANNEL_HELP)
    text: str = Field(..., min_length=1, max_length=40_000, description="Message text (mrkdwn)")
    thread_ts: str | None = Field(None, description="Reply in this message's thread (its ts)")


def _impl(name: str) -> str:
    return f"tools.slack.tools:{name}"


def _tool(
    name: str,
    description: str,
    params: type[BaseModel],
    *,
    create: bool = False,
    preview: str | None = None,
) -> ToolManifest:
    short = name.removeprefix("slack_")
    return ToolManifest(
        name=name,
        category="slack",
        description=f"{description} {_ACCOUNT_NOTE}",
        params=params,
        operations=frozenset({Operation.CREATE if create else Operation.READ}),
        impl=_impl(short),
        preview=preview,
        subject="tools.slack.approval:subject" if create else None,
        summary_line=f"tools.slack.approval:summary_{short}" if create else None,
        requires=("httpx",),
        integration="slack",
    )


MANIFESTS: list[ToolManifest] = [
    _tool(
        "slack_health",
        "Check the Slack connection: workspace, the identity of the token, bot or user.",
        Health,
    ),
    _tool(
        "slack_list_channels",
        "List Slack channels the account can see, with member counts and topics.",
        ListChannels,
    ),
    _tool(
        "slack_search_users",
        "Find people in the Slack workspace by name, display name or email.",
        SearchUsers,
    ),
    _tool(
        "slack_read_messages",
        "Read the most recent messages of a Slack channel (oldest first, with authors).",
        ReadMessages,
    ),
    _tool(
        "slack_send_message",
        "Post a message to a Slack channel or thread.",
        SendMessage,
        create=True,
        preview=_impl("preview_send_message"),
    ),
]
