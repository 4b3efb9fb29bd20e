"""A scripted model server for tests and benchmarks, over real HTTP on 127.0.0.1.

It speaks both wire protocols the providers use, so their real code paths run:

* OpenAI:    ``POST /v1/chat/completions`` (SSE chunks, ``data: [DONE]``), ``GET /v1/models``
* Anthropic: ``POST /v1/messages`` (SSE events), ``GET /v1/models`` (told apart from
  OpenAI's by the ``anthropic-version`` / ``x-api-key`` headers)

Replies come from ONE first-in-first-out queue of scripted turns, whichever protocol
asks; each turn is rendered in the asking protocol. Every request is recorded. ::

    with ScriptedLLM() as llm:
        config = ProviderConfig("openai", llm.openai_base_url, "fake-model")
        llm.add(text("Hello world", chunk_size=3))
        llm.add(tool_calls(("call_1", "fs_read_file", {"path": "a.txt"}), text_before="Let me"))
        ...                                   # drive the code under test
        llm.wait_for_requests(2)              # blocks on a Condition, no sleeping
        assert llm.requests[0].body["messages"][-1]["content"] == "hi"

Turn builders: `text`, `tool_calls`, `error`, `truncated`, `garbage`, `hang`.
When the queue is empty the server answers 500 "fakellm: script exhausted …" so a test
that makes more model calls than it scripted fails loudly.

Stdlib only; the server runs in a daemon thread.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = [
    "Recorded",
    "ScriptedCall",
    "ScriptedLLM",
    "Turn",
    "error",
    "garbage",
    "hang",
    "raw_openai",
    "text",
    "tool_calls",
    "truncated",
    "whole_openai",
]

Protocol = Literal["openai", "anthropic"]
#: How a streamed turn ends: normally; connection dropped mid-body ("cut"); body ends
#: cleanly but without the protocol's finish ("eof"); a malformed data line; or blocked.
Ending = Literal["finish", "cut", "eof", "garbage", "hang"]

EXHAUSTED = "fakellm: script exhausted (no scripted turn left for {method} {path})"


# ---- the script ---------------------------------------------------------------------


@dataclass(frozen=True)
class ScriptedCall:
    """A tool call the scripted model makes. `id=None` leaves the id out (OpenAI only)."""

    id: str | None
    name: str
    arguments: str  # raw JSON text, sent as is (so it may be deliberately invalid)


@dataclass(frozen=True)
class Turn:
    """One scripted reply. Build it with the helpers below rather than by hand."""

    text: str = ""
    calls: tuple[ScriptedCall, ...] = ()
    chunk_size: int = 4  # characters of text per streamed delta
    arg_chunk_size: int = 8  # characters of tool-call arguments per delta
    interleave: bool = False  # OpenAI: round-robin the calls' deltas
    delay: float = 0.0  # seconds before each streamed delta
    stop_reason: str = "end_turn"  # neutral word: end_turn | tool_use | max_tokens
    usage: tuple[int, int] | None = None  # (input, output); default counts words
    ending: Ending = "finish"
    status: int = 200  # != 200: an error response instead of a stream
    message: str | None = None  # error message (default: a typical one per status)
    retry_after: float | str | None = None  # Retry-After header of an error
    #: OpenAI only: exact SSE frames to send (real servers' quirks), instead of rendering.
    raw: tuple[str, ...] | None = None
    #: OpenAI only: a whole (non-streamed) JSON completion, as servers that ignore
    #: `stream: true` send it.
    whole: dict[str, Any] | None = None


def text(
    content: str,
    *,
    chunk_size: int = 4,
    delay: float = 0.0,
    stop_reason: str = "end_turn",
    usage: tuple[int, int] | None = None,
) -> Turn:
    """A plain answer streamed `chunk_size` characters per delta."""
    return Turn(
        text=content, chunk_size=chunk_size, delay=delay, stop_reason=stop_reason, usage=usage
    )


def tool_calls(
    *calls: tuple[str | None, str, dict[str, Any] | str],
    text_before: str = "",
    chunk_size: int = 4,
    arg_chunk_size: int = 8,
    interleave: bool = False,
    delay: float = 0.0,
    usage: tuple[int, int] | None = None,
) -> Turn:
    """A turn that calls tools: each call is `(id, name, arguments)`, arguments a dict
    (sent as JSON) or a raw string. Arguments stream `arg_chunk_size` characters per delta."""
    scripted = tuple(
        ScriptedCall(id, name, args if isinstance(args, str) else json.dumps(args))
        for id, name, args in calls
    )
    return Turn(
        text=text_before,
        calls=scripted,
        chunk_size=chunk_size,
        arg_chunk_size=arg_chunk_size,
        interleave=interleave,
        delay=delay,
        stop_reason="tool_use",
        usage=usage,
    )


def raw_openai(*chunks: dict[str, Any] | str, done: bool = True) -> Turn:
    """Sends these chat-completion chunks verbatim (dicts as `data:` JSON lines, strings
    as they are — e.g. ": keep-alive\n\n" or "event: message\n"), then `[DONE]` if `done`."""
    frames = tuple(c if isinstance(c, str) else f"data: {json.dumps(c)}\n\n" for c in chunks)
    return Turn(raw=frames + (("data: [DONE]\n\n",) if done else ()))


def whole_openai(
    message: dict[str, Any], *, finish_reason: str = "stop", usage: tuple[int, int] = (5, 7)
) -> Turn:
    """A non-streamed completion (`application/json`) with this assistant `message`."""
    body = {
        "id": "chatcmpl-whole",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
    }
    return Turn(whole=body)


def error(
    status: int, *, message: str | None = None, retry_after: float | str | None = None
) -> Turn:
    """An HTTP error response in the asking protocol's error format. The default 401
    message echoes the key the client sent, like real servers do, to catch leaks."""
    return Turn(status=status, message=message, retry_after=retry_after)


def truncated(partial: str = "", *, chunk_size: int = 4, abrupt: bool = True) -> Turn:
    """Streams `partial`, then stops without finishing: `abrupt` drops the connection
    mid-body; otherwise the HTTP body ends cleanly but the protocol never says "done"."""
    return Turn(text=partial, chunk_size=chunk_size, ending="cut" if abrupt else "eof")


def garbage(text_before: str = "") -> Turn:
    """Streams `text_before`, then a `data:` line that is not JSON."""
    return Turn(text=text_before, ending="garbage")


def hang(partial: str = "", *, chunk_size: int = 4) -> Turn:
    """Streams `partial`, then blocks until `ScriptedLLM.release()` (then finishes
    normally), the client disconnects (counted in `disconnects`) or the server stops."""
    return Turn(text=partial, chunk_size=chunk_size, ending="hang")


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # parsed JSON; None when there was no (valid) JSON body

    @property
    def protocol(self) -> Protocol | None:
        return _protocol_for(self.path)


# ---- rendering ----------------------------------------------------------------------

Step = tuple[Literal["text"], str] | tuple[Literal["start", "args"], int, str]


def _pieces(value: str, size: int) -> list[str]:
    size = max(1, size)
    return [value[i : i + size] for i in range(0, len(value), size)]


def _steps(turn: Turn, *, interleave: bool) -> list[Step]:
    """The turn as neutral streaming steps: text deltas, tool-call starts, argument deltas."""
    steps: list[Step] = [("text", piece) for piece in _pieces(turn.text, turn.chunk_size)]
    per_call: list[list[Step]] = [
        [("start", i, ""), *(("args", i, p) for p in _pieces(c.arguments, turn.arg_chunk_size))]
        for i, c in enumerate(turn.calls)
    ]
    if not interleave:
        return steps + [step for call in per_call for step in call]
    longest = max((len(call) for call in per_call), default=0)
    steps += [call[k] for k in range(longest) for call in per_call if k < len(call)]
    return steps


#: Keys whose values are structure, not prose, when counting "tokens".
_NOT_PROSE = frozenset(
    {"role", "type", "id", "tool_call_id", "tool_use_id", "media_type", "data", "url"}
)


def _words(value: Any) -> int:
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, dict):
        return sum(_words(v) for k, v in value.items() if k not in _NOT_PROSE)
    if isinstance(value, list):
        return sum(_words(v) for v in value)
    return 0


def _usage(turn: Turn, body: Any) -> tuple[int, int]:
    """Plausible token counts: words in the request / in the reply."""
    if turn.usage is not None:
        return turn.usage
    prompt = body if isinstance(body, dict) else {}
    input_tokens = max(1, _words(prompt.get("messages")) + _words(prompt.get("system")))
    output = _words(turn.text) + sum(1 + _words(c.arguments) for c in turn.calls)
    return input_tokens, max(1, output)


def _sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n"


OPENAI_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


class _OpenAIRenderer:
    def __init__(self, turn: Turn, body: Any, n: int) -> None:
        self.turn = turn
        self.usage = _usage(turn, body)
        self.model = body.get("model", "fake-model") if isinstance(body, dict) else "fake-model"
        self.id = f"chatcmpl-fake{n}"

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse(
            {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": self.model,
                "choices": [choice],
            }
        )

    def opening(self) -> list[str]:
        return [": keepalive\n\n", self._chunk({"role": "assistant", "content": ""})]

    def step(self, step: Step) -> list[str]:
        if step[0] == "text":
            return [self._chunk({"content": step[1]})]
        index = step[1]
        if step[0] == "args":
            part: dict[str, Any] = {"index": index, "function": {"arguments": step[2]}}
        else:
            call = self.turn.calls[index]
            part = {"index": index, "type": "function"}
            if call.id is not None:
                part["id"] = call.id
            part["function"] = {"name": call.name, "arguments": ""}
        return [self._chunk({"tool_calls": [part]})]

    def closing(self) -> list[str]:
        finish = OPENAI_FINISH.get(self.turn.stop_reason, self.turn.stop_reason)
        prompt, completion = self.usage
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        final = {"id": self.id, "object": "chat.completion.chunk", "choices": [], "usage": usage}
        return [self._chunk({}, finish), _sse(final), "data: [DONE]\n\n"]

    def garbage(self) -> str:
        return 'data: {"choices": [{"delta": {"content": "oops\n\n'

    @staticmethod
    def error_body(status: int, message: str) -> dict[str, Any]:
        kind = "invalid_request_error" if status < 500 else "server_error"
        return {"error": {"message": message, "type": kind, "code": None}}


class _AnthropicRenderer:
    def __init__(self, turn: Turn, body: Any, n: int) -> None:
        self.turn = turn
        self.usage = _usage(turn, body)
        self.model = body.get("model", "fake-model") if isinstance(body, dict) else "fake-model"
        self.id = f"msg_fake{n}"
        self.block = -1  # index of the open content block, -1 when none
        self.block_kind = ""

    def opening(self) -> list[str]:
        message: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self.usage[0], "output_tokens": 1},
        }
        start = _sse({"type": "message_start", "message": message}, "message_start")
        return [start, _sse({"type": "ping"}, "ping")]

    def _open(self, kind: str, block: dict[str, Any]) -> list[str]:
        frames = self._close()
        self.block += 1
        self.block_kind = kind
        data = {"type": "content_block_start", "index": self.block, "content_block": block}
        return [*frames, _sse(data, "content_block_start")]

    def _close(self) -> list[str]:
        if not self.block_kind:
            return []
        self.block_kind = ""
        return [_sse({"type": "content_block_stop", "index": self.block}, "content_block_stop")]

    def _delta(self, delta: dict[str, Any]) -> str:
        data = {"type": "content_block_delta", "index": self.block, "delta": delta}
        return _sse(data, "content_block_delta")

    def step(self, step: Step) -> list[str]:
        if step[0] == "text":
            frames = (
                []
                if self.block_kind == "text"
                else self._open("text", {"type": "text", "text": ""})
            )
            return [*frames, self._delta({"type": "text_delta", "text": step[1]})]
        if step[0] == "args":
            return [self._delta({"type": "input_json_delta", "partial_json": step[2]})]
        call = self.turn.calls[step[1]]
        block = {
            "type": "tool_use",
            "id": call.id or f"toolu_fake{step[1]}",
            "name": call.name,
            "input": {},
        }
        frames = self._open("tool_use", block)
        return [*frames, self._delta({"type": "input_json_delta", "partial_json": ""})]

    def closing(self) -> list[str]:
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": self.turn.stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": self.usage[1]},
        }
        stop = _sse({"type": "message_stop"}, "message_stop")
        return [*self._close(), _sse(delta, "message_delta"), stop]

    def garbage(self) -> str:
        return 'event: content_block_delta\ndata: {"type": "content_block_delta", "ind\n\n'

    @classmethod
    def error_body(cls, status: int, message: str) -> dict[str, Any]:
        kind = ANTHROPIC_ERROR_TYPES.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        return {"type": "error", "error": {"type": kind, "message": message}}


RENDERERS: dict[Protocol, type[_OpenAIRenderer] | type[_AnthropicRenderer]] = {
    "openai": _OpenAIRenderer,
    "anthropic": _AnthropicRenderer,
}


def _protocol_for(path: str) -> Protocol | None:
    path = path.split("?")[0].rstrip("/")
    if path.endswith("/chat/completions"):
        return "openai"
    if path.endswith("/messages"):
        return "anthropic"
    return None


def _default_message(status: int, headers: dict[str, str]) -> str:
    if status == 401:
        key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
        return f"Incorrect API key provided: {key}"
    return {
        400: "Invalid request.",
        403: "You do not have access to this model.",
        404: "The model does not exist.",
        429: "Rate limit reached. Please slow down.",
        529: "Overloaded",
    }.get(status, "The server had an error while processing your request.")


# ---- the server ---------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: ScriptedLLM) -> None:
        self.owner = owner
        self.connections: set[socket.socket] = set()
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client going away mid-request is routine here


class _ClientGone(Exception):
    pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streaming, like real servers
    server: _Server

    # -- plumbing --

    def setup(self) -> None:
        super().setup()
        # Each SSE frame is a small write; without this, Nagle + delayed ACK add ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.owner._cond:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.owner._cond:
            self.server.connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _record(self) -> Recorded:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in self.headers.items()}
        recorded = Recorded(self.command, self.path, headers, body)
        self.server.owner._add_request(recorded)
        return recorded

    def _write(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError as exc:
            raise _ClientGone from exc

    def _send_json(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self._write(data)

    def _send_chunk(self, text: str) -> None:
        data = text.encode()
        self._write(b"%X\r\n%s\r\n" % (len(data), data))

    # -- requests --

    def do_GET(self) -> None:
        recorded = self._record()
        if not recorded.path.split("?")[0].rstrip("/").endswith("/models"):
            self._send_json(404, {"error": {"message": f"no route for GET {recorded.path}"}})
            return
        ids = self.server.owner.models
        if "anthropic-version" in recorded.headers or "x-api-key" in recorded.headers:
            data = [{"type": "model", "id": m, "display_name": m} for m in ids]
            payload: dict[str, Any] = {"data": data, "has_more": False, "first_id": None}
        else:
            data = [{"id": m, "object": "model", "owned_by": "fakellm"} for m in ids]
            payload = {"object": "list", "data": data}
        self._send_json(200, payload)

    def do_POST(self) -> None:
        recorded = self._record()
        protocol = recorded.protocol
        if protocol is None:
            self._send_json(404, {"error": {"message": f"no route for POST {recorded.path}"}})
            return
        owner = self.server.owner
        turn = owner._next_turn()
        if turn is None:
            turn = error(500, message=EXHAUSTED.format(method="POST", path=recorded.path))
        try:
            if turn.status != 200:
                self._send_error(protocol, turn, recorded)
            elif turn.whole is not None:
                self._send_json(200, turn.whole)
            elif turn.raw is not None:
                self._send_raw(turn.raw)
            else:
                self._stream(protocol, turn, recorded)
        except _ClientGone:
            owner._note_disconnect()
            self.close_connection = True

    def _send_error(self, protocol: Protocol, turn: Turn, recorded: Recorded) -> None:
        message = turn.message or _default_message(turn.status, recorded.headers)
        extra = {} if turn.retry_after is None else {"Retry-After": str(turn.retry_after)}
        if protocol == "anthropic":
            extra["x-should-retry"] = "true" if turn.status in (429, 500, 529) else "false"
        self._send_json(turn.status, RENDERERS[protocol].error_body(turn.status, message), extra)

    def _send_raw(self, frames: tuple[str, ...]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for frame in frames:
            self._send_chunk(frame)
        self._write(b"0\r\n\r\n")

    def _stream(self, protocol: Protocol, turn: Turn, recorded: Recorded) -> None:
        owner = self.server.owner
        render = RENDERERS[protocol](turn, recorded.body, len(owner.requests))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for frame in render.opening():
            self._send_chunk(frame)
        for step in _steps(turn, interleave=turn.interleave and protocol == "openai"):
            if turn.delay and owner._stopped.wait(turn.delay):
                self.close_connection = True  # server stopping: just drop the stream
                return
            for frame in render.step(step):
                self._send_chunk(frame)
        if turn.ending == "cut":
            self.close_connection = True  # no terminating chunk: the body is incomplete
            return
        if turn.ending == "garbage":
            self._send_chunk(render.garbage())
        if turn.ending == "hang" and not self._hang():
            self.close_connection = True
            return
        if turn.ending in ("finish", "hang"):
            for frame in render.closing():
                self._send_chunk(frame)
        self._write(b"0\r\n\r\n")

    def _hang(self) -> bool:
        """Block until released (True), or the client leaves / the server stops (False)."""
        owner = self.server.owner
        with owner._cond:
            generation = owner._release_generation
            owner._hanging += 1
            owner._cond.notify_all()
        try:
            while True:
                with owner._cond:
                    owner._cond.wait_for(
                        lambda: owner._release_generation != generation or owner._stopped.is_set(),
                        timeout=0.02,  # also poll the socket: a closed client sends no signal
                    )
                    if owner._stopped.is_set():
                        return False
                    if owner._release_generation != generation:
                        return True
                if self._client_gone():
                    owner._note_disconnect()
                    return False
        finally:
            with owner._cond:
                owner._hanging -= 1

    def _client_gone(self) -> bool:
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            peeked: bytes = self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return True
        return peeked == b""


class ScriptedLLM:
    """The scripted model server. Use as a context manager (or `start()` / `stop()`)."""

    def __init__(self, *, models: tuple[str, ...] = ("fake-model", "fake-model-large")) -> None:
        #: What `GET /v1/models` lists (both protocols).
        self.models: tuple[str, ...] = models
        self._cond = threading.Condition()
        self._queue: deque[Turn] = deque()
        self._requests: list[Recorded] = []
        self._disconnects = 0
        self._hanging = 0
        self._release_generation = 0
        self._stopped = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --

    def start(self) -> ScriptedLLM:
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; unblocks hanging turns and drops open connections."""
        server = self._server
        if server is None:
            return
        with self._cond:
            self._stopped.set()
            self._cond.notify_all()
            connections = list(server.connections)
        server.shutdown()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        server.server_close()
        self._server = None

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses --

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("ScriptedLLM is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """For `ProviderConfig(kind="openai")`: ends in /v1."""
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """For `ProviderConfig(kind="anthropic")`: the bare origin, like api.anthropic.com."""
        return self.base_url

    # -- script --

    def add(self, *turns: Turn) -> None:
        """Queue turns; each model request takes the oldest one."""
        with self._cond:
            self._queue.extend(turns)

    @property
    def pending(self) -> int:
        """Scripted turns not yet served."""
        with self._cond:
            return len(self._queue)

    def release(self) -> None:
        """Let every currently hanging turn finish its stream normally."""
        with self._cond:
            self._release_generation += 1
            self._cond.notify_all()

    # -- observations --

    @property
    def requests(self) -> list[Recorded]:
        """Every request so far, oldest first (a copy)."""
        with self._cond:
            return list(self._requests)

    @property
    def disconnects(self) -> int:
        """Streams the client abandoned (closed the connection before the end)."""
        with self._cond:
            return self._disconnects

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[Recorded]:
        """Block until at least `n` requests arrived; return them. TimeoutError otherwise."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._requests) >= n, timeout):
                raise TimeoutError(f"expected {n} requests, got {len(self._requests)}")
            return list(self._requests)

    def wait_for_disconnects(self, n: int = 1, timeout: float = 5.0) -> None:
        """Block until the server saw `n` abandoned streams. TimeoutError otherwise."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._disconnects >= n, timeout):
                raise TimeoutError(f"expected {n} disconnects, saw {self._disconnects}")

    def wait_for_hang(self, timeout: float = 5.0) -> None:
        """Block until some `hang` turn is blocking. TimeoutError otherwise."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._hanging > 0, timeout):
                raise TimeoutError("no scripted turn is hanging")

    # -- used by the handler --

    def _add_request(self, recorded: Recorded) -> None:
        with self._cond:
            self._requests.append(recorded)
            self._cond.notify_all()

    def _next_turn(self) -> Turn | None:
        with self._cond:
            return self._queue.popleft() if self._queue else None

    def _note_disconnect(self) -> None:
        with self._cond:
            self._disconnects += 1
            self._cond.notify_all()
