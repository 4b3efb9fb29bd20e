"""Anthropic Messages API (`POST /v1/messages`) with SSE streaming."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import ServerSentEvent

from . import _http, vision
from .base import (
    ChatMessage,
    ProviderConfig,
    ProviderEvent,
    StreamDone,
    TextChunk,
    ToolCallReady,
    ToolCallRequest,
    ToolCallStart,
    ToolSpec,
    Usage,
)
from .http_client import new_client

API_VERSION = "2023-06-01"


# ---- request ----------------------------------------------------------------------


def image_block(url: str) -> dict[str, Any]:
    """An image block from a data URL (base64) or a plain http(s) URL."""
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        media_type = header[len("data:") :].split(";")[0] or "image/png"
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    return {"type": "image", "source": {"type": "url", "url": url}}


def _tool_input(arguments: str) -> dict[str, Any]:
    """The API wants an object; a call whose arguments never parsed is sent back as `{}`."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _blocks(message: ChatMessage) -> list[dict[str, Any]]:
    """Content blocks of one message (system messages are handled elsewhere)."""
    if message.role == "tool":
        content: str | list[dict[str, Any]] = message.content
        if message.images:  # the tool's images, inside its result (vision.request_view)
            content = [{"type": "text", "text": message.content}] if message.content else []
            content += [
                image_block(value) if kind == "image" else {"type": "text", "text": value}
                for kind, value in vision.labelled(message.images, message.tool_call_id)
            ]
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": content,
        }
        if message.is_error:
            block["is_error"] = True
        return [block]
    blocks = [image_block(url) for url in message.images] if message.role == "user" else []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    if message.role == "assistant":
        blocks += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c.arguments)}
            for c in message.tool_calls
        ]
    return blocks


def to_wire_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Chat history as Anthropic messages: tool results become user blocks and
    consecutive messages of one role are merged (the API wants alternating roles)."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"] += blocks
        else:
            wire.append({"role": role, "content": blocks})
    for entry in wire:  # a lone text block reads better as a plain string
        content = entry["content"]
        if len(content) == 1 and content[0]["type"] == "text":
            entry["content"] = content[0]["text"]
    return wire


def system_text(messages: list[ChatMessage], system: str | None) -> str:
    parts = [system] if system else []
    parts += [m.content for m in messages if m.role == "system" and m.content]
    return "\n\n".join(parts)


def build_payload(
    config: ProviderConfig, messages: list[ChatMessage], tools: list[ToolSpec], system: str | None
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "model": config.model,
        "max_tokens": config.max_tokens,
        "messages": to_wire_messages(messages),
        "stream": True,
    }
    if text := system_text(messages, system):
        payload["system"] = text
    if config.temperature is not None:
        payload["temperature"] = config.temperature
    if tools:
        payload["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools
        ]
    return payload


# ---- response ---------------------------------------------------------------------------


@dataclass
class _ToolBlock:
    ordinal: int  # position among this turn's tool calls (what ToolCallStart.index means)
    id: str
    name: str
    arguments: str = ""


class StreamParser:
    """Turns Messages API events into provider events."""

    def __init__(self, *, url: str, secret: str | None) -> None:
        self._url = url
        self._secret = secret
        self._tools: dict[int, _ToolBlock] = {}  # by content-block index
        self._usage = Usage()
        self._stop_reason: str | None = None
        self.done = False  # saw message_stop

    def feed(self, sse: ServerSentEvent) -> list[ProviderEvent]:
        if not sse.data.strip() or self.done:  # nothing counts after message_stop
            return []
        data = _http.parse_json_data(sse.data)
        if not isinstance(data, dict):
            raise _http.stream_cut_off("unexpected data in the stream")
        kind = data.get("type") or sse.event
        handler = getattr(self, f"_on_{kind}", None)
        return handler(data) if handler else []  # ping and unknown events

    def _on_message_start(self, data: dict[str, Any]) -> list[ProviderEvent]:
        usage = (data.get("message") or {}).get("usage") or {}
        self._usage.input_tokens = _input_tokens(usage)
        self._usage.output_tokens = int(usage.get("output_tokens") or 0)
        return []

    def _on_content_block_start(self, data: dict[str, Any]) -> list[ProviderEvent]:
        block = data.get("content_block") or {}
        if block.get("type") == "text" and block.get("text"):
            return [TextChunk(block["text"])]
        if block.get("type") != "tool_use":
            return []  # thinking and server-side blocks are not ours to show
        tool = _ToolBlock(len(self._tools), block.get("id") or "", block.get("name") or "")
        if block.get("input"):  # normally {} with the input streamed as JSON deltas
            tool.arguments = json.dumps(block["input"])
        self._tools[int(data.get("index", len(self._tools)))] = tool
        return [ToolCallStart(index=tool.ordinal, id=tool.id, name=tool.name)]

    def _on_content_block_delta(self, data: dict[str, Any]) -> list[ProviderEvent]:
        delta = data.get("delta") or {}
        if delta.get("type") == "text_delta" and delta.get("text"):
            return [TextChunk(delta["text"])]
        if delta.get("type") == "input_json_delta":
            tool = self._tools.get(int(data.get("index", -1)))
            if tool is None:
                raise _http.stream_cut_off("argument data for an unknown tool call")
            tool.arguments += delta.get("partial_json") or ""
        return []

    def _on_message_delta(self, data: dict[str, Any]) -> list[ProviderEvent]:
        self._stop_reason = (data.get("delta") or {}).get("stop_reason") or self._stop_reason
        usage = data.get("usage") or {}
        if usage.get("output_tokens") is not None:  # cumulative, not an increment
            self._usage.output_tokens = int(usage["output_tokens"])
        if usage.get("input_tokens") is not None:
            self._usage.input_tokens = _input_tokens(usage)
        return []

    def _on_message_stop(self, data: dict[str, Any]) -> list[ProviderEvent]:
        self.done = True
        return []

    def _on_error(self, data: dict[str, Any]) -> list[ProviderEvent]:
        error = data.get("error") or {}
        status = ERROR_STATUS.get(error.get("type", ""), 500) if isinstance(error, dict) else 500
        raise _http.error_in_stream(
            {**error, "status": status} if isinstance(error, dict) else error,
            url=self._url,
            secret=self._secret,
        )

    def finish(self) -> list[ProviderEvent]:
        """Events that close the turn; a stream without message_stop is an error."""
        if not self.done:
            raise _http.stream_cut_off("the stream ended before message_stop")
        events: list[ProviderEvent] = [
            ToolCallReady(ToolCallRequest(t.id, t.name, t.arguments or "{}"))
            for t in sorted(self._tools.values(), key=lambda t: t.ordinal)
        ]
        reason = self._stop_reason or ("tool_use" if self._tools else "end_turn")
        events.append(StreamDone(stop_reason=reason, usage=self._usage))
        return events


#: Anthropic error types (sent inside a stream) → the HTTP status they stand for.
ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


def _input_tokens(usage: dict[str, Any]) -> int:
    """Prompt tokens including cached ones (the API counts those separately)."""
    keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(int(usage.get(key) or 0) for key in keys)


# ---- provider ---------------------------------------------------------------------------


class AnthropicProvider:
    """`Provider` for the Anthropic Messages API. `base_url` is e.g. https://api.anthropic.com."""

    def __init__(self, config: ProviderConfig, *, client: httpx.AsyncClient | None = None) -> None:
        self.config = config
        self._owns_client = client is None
        self._client = client or new_client(config.base_url, _http.timeouts(config))
        #: Called (on the loop) each time a request's body has been sent (`deskhand ask`
        #: starts its MCP servers then, so they never delay the first request).
        self.on_sent: Callable[[], None] | None = None

    @property
    def _base(self) -> str:
        return self.config.base_url.rstrip("/")

    def _headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "anthropic-version": API_VERSION,
            **self.config.extra_headers,
        }
        if self.config.api_key:
            headers["x-api-key"] = self.config.api_key
        return headers

    def stream(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        *,
        system: str | None = None,
        known_tools: set[str] | None = None,
    ) -> AsyncIterator[ProviderEvent]:
        payload = build_payload(self.config, messages, tools, system)
        return _http.stream_with_retries(lambda: self._attempt(payload), self.config)

    async def _attempt(self, payload: dict[str, Any]) -> AsyncGenerator[ProviderEvent, None]:
        url = f"{self._base}/v1/messages"
        parser = StreamParser(url=url, secret=self.config.api_key)
        async with _http.open_event_stream(
            self._client,
            url,
            headers=self._headers(),
            payload=payload,
            config=self.config,
            on_sent=self.on_sent,
        ) as events:
            # Read to the end of the body even after the final event: the connection then
            # goes back to the pool, and no half-read generator is left for the GC to close.
            async for sse in events:
                for event in parser.feed(sse):
                    yield event
        for event in parser.finish():
            yield event

    async def list_models(self) -> list[str]:
        data = await _http.get_json(
            self._client,
            f"{self._base}/v1/models?limit=1000",
            headers=self._headers(),
            config=self.config,
            max_bytes=_http.MAX_MODELS_BYTES,
        )
        return _http.model_ids(data, url=self._base)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()
