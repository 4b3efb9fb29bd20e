"""Behaviour of both providers against the scripted model server, over real HTTP."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncGenerator, Coroutine
from contextlib import aclosing
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any, TypeVar

import httpx
import pytest
from httpx_sse import ServerSentEvent

from app.core.providers import _http, make_provider
from app.core.providers import anthropic as anthropic_mod
from app.core.providers.anthropic import AnthropicProvider
from app.core.providers.base import (
    AuthError,
    BadRequestError,
    ChatMessage,
    Provider,
    ProviderConfig,
    ProviderError,
    ProviderEvent,
    RateLimitError,
    ServerError,
    StreamDone,
    StreamError,
    TextChunk,
    ToolCallReady,
    ToolCallRequest,
    ToolCallStart,
    ToolSpec,
    UnreachableError,
)
from app.core.providers.openai_compat import OpenAICompatProvider
from tests.fakellm import (
    ScriptedLLM,
    error,
    garbage,
    hang,
    text,
    tool_calls,
    truncated,
)

T = TypeVar("T")
KEY = "sk-test-0123456789-secret"
KINDS = ["openai", "anthropic"]
HI = [ChatMessage("user", "hi there")]
READ_TOOL = ToolSpec(
    "fs_read_file",
    "Read a text file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
PNG = "data:image/png;base64,iVBORw0KGgo="


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine with a hard deadline so a hang fails the test instead of the run."""
    return asyncio.run(asyncio.wait_for(coro, timeout=15))


def make_config(llm: ScriptedLLM, kind: str, **overrides: Any) -> ProviderConfig:
    base_url = llm.openai_base_url if kind == "openai" else llm.anthropic_base_url
    settings: dict[str, Any] = {"api_key": KEY, "max_retries": 2, "max_retry_wait": 0.01}
    settings.update(overrides)
    return ProviderConfig(kind, base_url, "fake-model", **settings)  # type: ignore[arg-type]


async def _collect(
    config: ProviderConfig,
    messages: list[ChatMessage],
    tools: list[ToolSpec],
    system: str | None,
    into: list[ProviderEvent],
) -> list[ProviderEvent]:
    provider = make_provider(config)
    try:
        async with aclosing(provider.stream(messages, tools, system=system)) as events:  # type: ignore[type-var]
            async for event in events:
                into.append(event)
    finally:
        await provider.aclose()
    return into


def stream(
    config: ProviderConfig,
    messages: list[ChatMessage] = HI,
    tools: list[ToolSpec] | None = None,
    system: str | None = None,
) -> list[ProviderEvent]:
    """All events of one streamed turn."""
    return run(_collect(config, messages, tools or [], system, []))


def stream_error(
    config: ProviderConfig, messages: list[ChatMessage] = HI
) -> tuple[ProviderError, list[ProviderEvent]]:
    """The error a turn ends with, and the events that came before it."""
    seen: list[ProviderEvent] = []
    with pytest.raises(ProviderError) as caught:
        run(_collect(config, messages, [], None, seen))
    return caught.value, seen


def texts(events: list[ProviderEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextChunk)]


def done(events: list[ProviderEvent]) -> StreamDone:
    assert isinstance(events[-1], StreamDone), events
    return events[-1]


def chat_requests(llm: ScriptedLLM) -> list[Any]:
    return [r for r in llm.requests if r.method == "POST"]


# ---- streaming ------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_text_streams_in_many_deltas_and_joins(llm: ScriptedLLM, kind: str) -> None:
    answer = "Hello world, this reply arrives three characters at a time."
    llm.add(text(answer, chunk_size=3))

    events = stream(make_config(llm, kind))

    assert len(texts(events)) == len(answer) // 3 + 1
    assert "".join(texts(events)) == answer
    final = done(events)
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == len(answer.split())
    assert final.usage.input_tokens == 2  # "hi there"
    assert sum(isinstance(e, StreamDone) for e in events) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_several_tool_calls_split_across_deltas_reassemble(llm: ScriptedLLM, kind: str) -> None:
    write_args = {"path": "notes/a.txt", "content": 'hi there, "quoted" and ünïcode\n'}
    read_args = {"path": "b.txt"}
    llm.add(
        tool_calls(
            ("call_1", "fs_write_file", write_args),
            ("call_2", "fs_read_file", read_args),
            text_before="Let me do that.",
            arg_chunk_size=5,
            interleave=True,  # OpenAI: deltas of both calls alternate
        )
    )

    events = stream(make_config(llm, kind), tools=[READ_TOOL])

    assert "".join(texts(events)) == "Let me do that."
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [(s.index, s.id, s.name) for s in starts] == [
        (0, "call_1", "fs_write_file"),
        (1, "call_2", "fs_read_file"),
    ]
    ready = [e.call for e in events if isinstance(e, ToolCallReady)]
    assert [(c.id, c.name) for c in ready] == [
        ("call_1", "fs_write_file"),
        ("call_2", "fs_read_file"),
    ]
    assert ready[0].arguments == json.dumps(write_args)
    assert json.loads(ready[1].arguments) == read_args
    assert events.index(starts[-1]) < events.index(
        next(e for e in events if isinstance(e, ToolCallReady))
    )
    final = done(events)
    assert final.stop_reason == "tool_use"
    assert final.usage.output_tokens > 0


def test_fakellm_really_interleaves_argument_fragments(llm: ScriptedLLM) -> None:
    """Guards the test above: the wire must carry many small, interleaved fragments."""
    llm.add(
        tool_calls(
            ("a", "one", {"x": "0123456789"}),
            ("b", "two", {"y": "abcdefghij"}),
            arg_chunk_size=4,
            interleave=True,
        )
    )
    body = {"model": "m", "messages": [], "stream": True}
    with httpx.stream("POST", f"{llm.openai_base_url}/chat/completions", json=body) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: {")]
    parts = [
        part
        for line in lines
        for choice in json.loads(line[6:])["choices"]
        for part in choice["delta"].get("tool_calls", [])
    ]
    order = [p["index"] for p in parts]
    assert order[:4] == [0, 1, 0, 1]
    assert sum(1 for p in parts if p["function"].get("arguments")) >= 8


def test_openai_generates_ids_for_calls_without_one(llm: ScriptedLLM) -> None:
    llm.add(tool_calls((None, "one", {"a": 1}), (None, "two", {"b": 2}), arg_chunk_size=2))

    events = stream(make_config(llm, "openai"))

    starts = [e for e in events if isinstance(e, ToolCallStart)]
    ready = [e.call for e in events if isinstance(e, ToolCallReady)]
    assert [s.id for s in starts] == [c.id for c in ready]
    assert all(c.id.startswith("call_") for c in ready)
    assert len({c.id for c in ready}) == 2
    assert [json.loads(c.arguments) for c in ready] == [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize("kind", KINDS)
def test_length_limit_maps_to_max_tokens(llm: ScriptedLLM, kind: str) -> None:
    llm.add(text("It was the best of", stop_reason="max_tokens", usage=(11, 5)))

    final = done(stream(make_config(llm, kind)))

    assert final.stop_reason == "max_tokens"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (11, 5)


# ---- request translation ------------------------------------------------------------

HISTORY = [
    ChatMessage("user", "What is in these files?", images=[PNG]),
    ChatMessage(
        "assistant",
        "I'll look.",
        tool_calls=[
            ToolCallRequest("call_a", "fs_read_file", '{"path": "a.txt"}'),
            ToolCallRequest("call_b", "fs_read_file", '{"path": "b.txt"}'),
        ],
    ),
    ChatMessage("tool", "alpha", tool_call_id="call_a"),
    ChatMessage("tool", "no such file", tool_call_id="call_b", is_error=True),
    ChatMessage("user", "Thanks, go on."),
]


def test_openai_request_translates_history(llm: ScriptedLLM) -> None:
    llm.add(text("ok"))

    stream(make_config(llm, "openai", temperature=0.2), HISTORY, [READ_TOOL], system="Be brief.")

    (request,) = llm.wait_for_requests(1)
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = request.body
    assert body["model"] == "fake-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 4096
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "fs_read_file",
                "description": "Read a text file.",
                "parameters": READ_TOOL.parameters,
            },
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in these files?"},
                {"type": "image_url", "image_url": {"url": PNG}},
            ],
        },
        {
            "role": "assistant",
            "content": "I'll look.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "fs_read_file", "arguments": '{"path": "a.txt"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "fs_read_file", "arguments": '{"path": "b.txt"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "alpha"},
        {"role": "tool", "tool_call_id": "call_b", "content": "Error: no such file"},
        {"role": "user", "content": "Thanks, go on."},
    ]


def test_openai_without_key_or_tools_sends_neither(llm: ScriptedLLM) -> None:
    llm.add(text("ok"))

    stream(make_config(llm, "openai", api_key=None))

    (request,) = llm.wait_for_requests(1)
    assert "authorization" not in request.headers
    assert "tools" not in request.body
    assert request.body["messages"] == [{"role": "user", "content": "hi there"}]


def test_anthropic_request_translates_history(llm: ScriptedLLM) -> None:
    llm.add(text("ok"))
    history = [ChatMessage("system", "Use metric units."), *HISTORY]

    stream(make_config(llm, "anthropic"), history, [READ_TOOL], system="Be brief.")

    (request,) = llm.wait_for_requests(1)
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    body = request.body
    assert body["stream"] is True
    assert body["max_tokens"] == 4096
    assert body["system"] == "Be brief.\n\nUse metric units."
    assert body["tools"] == [
        {
            "name": "fs_read_file",
            "description": "Read a text file.",
            "input_schema": READ_TOOL.parameters,
        }
    ]
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }
    assert body["messages"] == [
        {"role": "user", "content": [image, {"type": "text", "text": "What is in these files?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll look."},
                {
                    "type": "tool_use",
                    "id": "call_a",
                    "name": "fs_read_file",
                    "input": {"path": "a.txt"},
                },
                {
                    "type": "tool_use",
                    "id": "call_b",
                    "name": "fs_read_file",
                    "input": {"path": "b.txt"},
                },
            ],
        },
        {
            "role": "user",  # both results and the next user text merged into one message
            "content": [
                {"type": "tool_result", "tool_use_id": "call_a", "content": "alpha"},
                {
                    "type": "tool_result",
                    "tool_use_id": "call_b",
                    "content": "no such file",
                    "is_error": True,
                },
                {"type": "text", "text": "Thanks, go on."},
            ],
        },
    ]


# ---- errors and retries ---------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_rejected_key_is_an_auth_error_without_the_key(
    llm: ScriptedLLM, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    llm.add(error(401))  # the fake echoes the key in its message, as real servers do

    err, _ = stream_error(make_config(llm, kind))

    assert isinstance(err, AuthError)
    assert err.status == 401
    assert "API key was rejected" in str(err)
    assert KEY not in str(err) and KEY not in repr(err)
    assert KEY not in caplog.text
    assert len(chat_requests(llm)) == 1  # never retried


@pytest.mark.parametrize("kind", KINDS)
def test_rate_limit_waits_and_retries_once(
    llm: ScriptedLLM, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    llm.add(error(429, retry_after=1), text("made it"))
    caplog.set_level(logging.WARNING, logger="app.core.providers._http")

    events = stream(make_config(llm, kind, max_retry_wait=0.05))

    assert "".join(texts(events)) == "made it"
    assert len(chat_requests(llm)) == 2
    assert "retrying in 0.05 s" in caplog.text  # Retry-After 1 s, capped by max_retry_wait
    assert KEY not in caplog.text


@pytest.mark.parametrize("kind", KINDS)
def test_rate_limit_reports_retry_after_when_retries_run_out(llm: ScriptedLLM, kind: str) -> None:
    llm.add(error(429, retry_after=0))

    err, _ = stream_error(make_config(llm, kind, max_retries=0))

    assert isinstance(err, RateLimitError)
    assert err.retry_after == 0


@pytest.mark.parametrize("kind", KINDS)
def test_server_errors_are_retried_up_to_max_retries(llm: ScriptedLLM, kind: str) -> None:
    llm.add(error(500), error(503), error(529), text("never reached"))

    err, events = stream_error(make_config(llm, kind, max_retries=2))

    assert isinstance(err, ServerError)
    assert err.status == 529
    assert events == []
    assert len(chat_requests(llm)) == 3
    assert llm.pending == 1


@pytest.mark.parametrize("kind", KINDS)
def test_bad_request_carries_the_server_message(llm: ScriptedLLM, kind: str) -> None:
    llm.add(error(400, message="max_tokens: 999999 > 8192, the maximum allowed"))

    err, _ = stream_error(make_config(llm, kind))

    assert isinstance(err, BadRequestError)
    assert "max_tokens: 999999 > 8192" in str(err)
    assert len(chat_requests(llm)) == 1


def test_exhausted_script_fails_loudly(llm: ScriptedLLM) -> None:
    err, _ = stream_error(make_config(llm, "openai", max_retries=0))

    assert isinstance(err, ServerError)
    assert "script exhausted" in str(err)


@pytest.mark.parametrize("kind", KINDS)
def test_unreachable_server_names_the_url(kind: str) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = ProviderConfig(
        kind,  # type: ignore[arg-type]
        f"http://127.0.0.1:{port}",
        "m",
        api_key=KEY,
        max_retries=1,
        max_retry_wait=0.01,
    )

    err, _ = stream_error(config)

    assert isinstance(err, UnreachableError)
    assert f"127.0.0.1:{port}" in str(err)
    assert KEY not in str(err)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("abrupt", [True, False], ids=["connection-dropped", "clean-eof"])
def test_stream_without_finish_is_a_stream_error(llm: ScriptedLLM, kind: str, abrupt: bool) -> None:
    llm.add(truncated("The answer is", abrupt=abrupt), text("not used"))

    err, events = stream_error(make_config(llm, kind))

    assert isinstance(err, StreamError)
    assert "cut off" in str(err)
    assert "".join(texts(events)) == "The answer is"
    assert len(chat_requests(llm)) == 1  # text was already delivered: no retry


@pytest.mark.parametrize("kind", KINDS)
def test_malformed_data_is_a_stream_error(llm: ScriptedLLM, kind: str) -> None:
    llm.add(garbage("Some text"))

    err, events = stream_error(make_config(llm, kind))

    assert isinstance(err, StreamError)
    assert "malformed" in str(err)
    assert "".join(texts(events)) == "Some text"


def test_anthropic_error_event_in_stream_is_typed() -> None:
    parser = anthropic_mod.StreamParser(url="https://api.anthropic.com/v1/messages", secret=None)
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}

    with pytest.raises(ServerError, match="Overloaded") as caught:
        parser.feed(ServerSentEvent(event="error", data=json.dumps(overloaded)))
    assert caught.value.status == 529


def test_no_retry_once_an_event_was_delivered() -> None:
    calls = 0

    async def fails_after_one_event() -> AsyncGenerator[str, None]:
        nonlocal calls
        calls += 1
        yield "first"
        raise ServerError("boom", status=500)

    async def consume() -> list[str]:
        config = ProviderConfig("openai", "http://127.0.0.1:9", "m", max_retry_wait=0.01)
        return [item async for item in _http.stream_with_retries(fails_after_one_event, config)]

    with pytest.raises(ServerError):
        run(consume())
    assert calls == 1


# ---- cancellation -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_cancelling_the_consumer_closes_the_connection(llm: ScriptedLLM, kind: str) -> None:
    llm.add(hang("partial answer"))
    seen: list[ProviderEvent] = []

    async def scenario() -> None:
        # The provider (and its connection pool) stays open until the server has seen
        # the disconnect: only closing the response itself can pass this test.
        provider = make_provider(make_config(llm, kind))
        got_partial = asyncio.Event()

        async def consume() -> None:
            async for event in provider.stream(HI, []):
                seen.append(event)
                if "".join(texts(seen)) == "partial answer":
                    got_partial.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(got_partial.wait(), 5)
        await asyncio.to_thread(llm.wait_for_hang)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 2)
        await asyncio.to_thread(llm.wait_for_disconnects, 1, 5)
        await provider.aclose()

    run(scenario())
    assert texts(seen) == ["part", "ial ", "answ", "er"]
    assert not any(isinstance(e, StreamDone) for e in seen)


def test_closing_the_stream_closes_the_connection(llm: ScriptedLLM) -> None:
    llm.add(hang("partial answer"))

    async def scenario() -> ProviderEvent:
        provider = OpenAICompatProvider(make_config(llm, "openai"))
        events = provider.stream(HI, [])
        first = await anext(events)
        await asyncio.wait_for(events.aclose(), 2)  # type: ignore[attr-defined]
        await asyncio.to_thread(llm.wait_for_disconnects, 1, 5)
        await provider.aclose()
        return first

    assert isinstance(run(scenario()), TextChunk)


@pytest.mark.parametrize("kind", KINDS)
def test_released_hang_finishes_normally(llm: ScriptedLLM, kind: str) -> None:
    llm.add(hang("wait for it"))

    async def scenario() -> list[ProviderEvent]:
        consumer = asyncio.create_task(_collect(make_config(llm, kind), HI, [], None, []))
        await asyncio.to_thread(llm.wait_for_hang)
        llm.release()
        return await consumer

    events = run(scenario())
    assert "".join(texts(events)) == "wait for it"
    assert done(events).stop_reason == "end_turn"
    assert llm.disconnects == 0


# ---- models and factory -------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_list_models(llm: ScriptedLLM, kind: str) -> None:
    async def models() -> list[str]:
        provider = make_provider(make_config(llm, kind))
        try:
            return await provider.list_models()
        finally:
            await provider.aclose()

    assert run(models()) == ["fake-model", "fake-model-large"]
    (request,) = llm.wait_for_requests(1)
    assert request.method == "GET"
    assert request.path.split("?")[0] == "/v1/models"
    auth = (
        request.headers.get("authorization") if kind == "openai" else request.headers["x-api-key"]
    )
    assert auth is not None and KEY in auth


def test_make_provider_chooses_by_kind() -> None:
    async def build(kind: str) -> Provider:
        provider = make_provider(ProviderConfig(kind, "http://127.0.0.1:9", "m"))  # type: ignore[arg-type]
        await provider.aclose()
        return provider

    assert isinstance(run(build("openai")), OpenAICompatProvider)
    assert isinstance(run(build("anthropic")), AnthropicProvider)
    with pytest.raises(ValueError, match="unknown provider kind"):
        run(build("gemini"))


# ---- Retry-After and backoff ------------------------------------------------------------


def test_retry_after_parses_seconds_dates_and_milliseconds() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    in_90s = format_datetime(now + timedelta(seconds=90), usegmt=True)

    assert _http.parse_retry_after({"retry-after": "2.5"}) == 2.5
    assert _http.parse_retry_after({"retry-after": in_90s}, now=now.timestamp()) == 90
    assert _http.parse_retry_after({"retry-after-ms": "150", "retry-after": "9"}) == 0.15
    assert _http.parse_retry_after({"retry-after": "soon"}) is None
    assert _http.parse_retry_after({}) is None


def test_backoff_honours_retry_after_and_caps_with_jitter() -> None:
    assert _http.retry_delay(0, 3.0, cap=30) == 3.0
    assert _http.retry_delay(0, 120.0, cap=30) == 30
    delays = {_http.retry_delay(2, None, cap=30) for _ in range(50)}
    assert all(1.0 <= d <= 2.0 for d in delays)  # 0.5 s * 2**2, jittered down to half
    assert len(delays) > 1
    assert _http.retry_delay(10, None, cap=4) <= 4


@pytest.mark.parametrize("kind", KINDS)
def test_a_huge_model_list_is_capped(kind: str) -> None:
    """A server may list anything: each name once, none over 200 characters, 2,000 at most
    (the picker and the settings keep the whole list)."""
    names = ("x" * 201, "dup", "dup", *(f"m{i}" for i in range(2_500)))
    with ScriptedLLM(models=names) as server:

        async def models() -> list[str]:
            provider = make_provider(make_config(server, kind))
            try:
                return await provider.list_models()
            finally:
                await provider.aclose()

        listed = run(models())
    assert len(listed) == _http.MAX_MODELS == 2_000
    assert listed[:3] == ["dup", "m0", "m1"]
    assert all(len(name) <= 200 for name in listed)


class _FloodServer:
    """Answers every GET with an endless JSON-looking body (Content-Length: 1 GB)."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from threading import Thread

        owner = self
        self.sent = 0

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(1 << 30))
                self.end_headers()
                chunk = b'{"data": [' + b" " * (64 * 1024)
                try:
                    while owner.sent < (1 << 30):
                        self.wfile.write(chunk)
                        owner.sent += len(chunk)
                except OSError:
                    return  # the client stopped reading

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_model_list_body_over_4_mb_is_refused(kind: str) -> None:
    flood = _FloodServer()
    try:
        base = f"{flood.url}/v1" if kind == "openai" else flood.url
        config = ProviderConfig(kind, base, "", max_retries=0)  # type: ignore[arg-type]

        async def models() -> list[str]:
            provider = make_provider(config)
            try:
                return await provider.list_models()
            finally:
                await provider.aclose()

        with pytest.raises(BadRequestError, match="more than 4 MB") as caught:
            run(models())
        assert "Is the base URL right?" in str(caught.value)
        assert flood.sent < 64 * 1024 * 1024  # it stopped reading, not at the end
    finally:
        flood.close()
