"""HTTP plumbing shared by the providers: typed errors, retries, SSE streaming.

Rules every provider relies on:

* every failure leaves here as a `ProviderError` subclass whose message a user understands
  and never contains the API key;
* 429, 5xx and connection failures are retried with backoff (honouring Retry-After), but
  only while nothing has been handed to the caller yet;
* a stream is always read inside `async with`, so cancelling the consuming task or closing
  the generator closes the HTTP response at once.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing, asynccontextmanager
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from httpx_sse import EventSource, ServerSentEvent, SSEError, aconnect_sse

from tools.redact import TRIPWIRE, shorten

from .base import (
    AuthError,
    BadRequestError,
    ProviderConfig,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    ServerError,
    StreamError,
    UnreachableError,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

#: First backoff step (seconds) when the server gave no Retry-After; doubles per attempt.
BACKOFF_BASE = 0.5
#: Errors worth another attempt: the request itself was fine, the server or network was not.
RETRYABLE = (RateLimitError, ServerError, UnreachableError)
CUT_OFF = "The model's reply was cut off before it finished"
#: A model list is kept to this many names, each at most MAX_MODEL_NAME characters long;
#: longer names are dropped (no real model has one; they would only fill the lists).
MAX_MODELS = 2_000
MAX_MODEL_NAME = 200
#: The most of a `/models` answer that is read (a few hundred KB for the biggest real lists).
MAX_MODELS_BYTES = 4 * 1024 * 1024
#: The most of an error response that is read (its message is cut to 300 characters).
ERROR_BODY_BYTES = 64 * 1024


# ---- messages ----------------------------------------------------------------


def host_of(url: str) -> str:
    """`scheme://host:port` of a URL — enough to name the server without paths or queries."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else url


def server_message(body: bytes | str, secret: str | None = None) -> str:
    """The human part of an error body: OpenAI, Anthropic and common proxy shapes; cut to
    300 characters only after `secret` and every known secret were masked."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    extra = (secret,) if secret else ()
    try:
        data: Any = json.loads(text)
    except ValueError:
        return shorten(" ".join(text.split()), 300, secrets=extra, mark="")
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, str):
            return shorten(err, 300, secrets=extra, mark="")
        if isinstance(err, dict):
            for key in ("message", "detail", "msg"):
                value = err.get(key)
                if isinstance(value, str):
                    return shorten(value, 300, secrets=extra, mark="")
    return shorten(" ".join(text.split()), 300, secrets=extra, mark="")


def _masked(text: str, secret: str | None) -> str:
    """`text` through the tripwire, with the request's own key too (a server may echo it)."""
    return TRIPWIRE.text(text, extra=(secret,) if secret else ())


def stream_cut_off(detail: str) -> StreamError:
    return StreamError(f"{CUT_OFF} ({detail}). Try again.")


# ---- Retry-After ----------------------------------------------------------------


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait, from `retry-after-ms`, or `Retry-After` as seconds or an HTTP-date."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def retry_delay(attempt: int, retry_after: float | None, cap: float) -> float:
    """Wait before retry number `attempt + 1`: the server's Retry-After if it gave one,
    else exponential backoff with jitter; never more than `cap`."""
    if retry_after is not None:
        return min(max(retry_after, 0.0), cap)
    step = min(cap, BACKOFF_BASE * 2**attempt)
    return random.uniform(step / 2, step)


# ---- error mapping ------------------------------------------------------------------


def error_from_status(
    status: int, headers: Mapping[str, str], body: bytes, *, url: str, secret: str | None
) -> ProviderError:
    """Typed error for an HTTP error response."""
    detail = server_message(body, secret)
    host = _masked(host_of(url), secret)
    suffix = f": {detail}" if detail else "."
    if status in (401, 403):
        # The server's text is left out on purpose: some echo (part of) the key.
        return AuthError(
            f"The API key was rejected by {host} (HTTP {status}). Check the key in the settings.",
            status=status,
        )
    if status == 429:
        wait = parse_retry_after(headers)
        hint = f" The server asked to wait {wait:g} s." if wait is not None else ""
        return RateLimitError(
            f"Rate limited by {host} (HTTP 429){suffix}{hint}", status=status, retry_after=wait
        )
    if status >= 500:
        return ServerError(f"{host} had a server error (HTTP {status}){suffix}", status=status)
    hint = " Check the base URL and the model name." if status == 404 else ""
    return BadRequestError(
        f"{host} rejected the request (HTTP {status}){suffix}{hint}", status=status
    )


def error_in_stream(error: Any, *, url: str, secret: str | None) -> ProviderError:
    """Typed error for an error object sent inside a stream (`status`/`code` if numeric)."""
    status = 500
    if isinstance(error, dict):
        for key in ("status", "code"):
            if isinstance(error.get(key), int) and error[key] >= 400:
                status = error[key]
    body = json.dumps({"error": error}).encode()
    return error_from_status(status, {}, body, url=url, secret=secret)


def error_from_transport(
    exc: httpx.TransportError, *, url: str, secret: str | None
) -> ProviderError:
    """Typed error for a network-level failure."""
    where = _masked(url, secret)
    if isinstance(exc, httpx.ConnectTimeout):
        return UnreachableError(f"Could not reach {where}: the connection timed out.")
    if isinstance(exc, httpx.ConnectError):
        return UnreachableError(
            f"Could not reach {where}: {_masked(str(exc), secret) or 'connection failed'}."
        )
    if isinstance(exc, httpx.TimeoutException):
        return ProviderTimeout(f"The model at {host_of(where)} stopped responding (timed out).")
    return stream_cut_off(f"connection to {host_of(where)} lost: {type(exc).__name__}")


# ---- retries --------------------------------------------------------------------------


async def _before_retry(err: ProviderError, attempt: int, config: ProviderConfig) -> None:
    """Raise `err` if it may not be retried, else log and wait."""
    if not isinstance(err, RETRYABLE) or attempt >= config.max_retries:
        raise err
    wait = retry_delay(attempt, getattr(err, "retry_after", None), config.max_retry_wait)
    log.warning(
        "%s; retrying in %.2f s (retry %d of %d)", err, wait, attempt + 1, config.max_retries
    )
    await asyncio.sleep(wait)


async def stream_with_retries(
    attempt: Callable[[], AsyncGenerator[T, None]], config: ProviderConfig
) -> AsyncIterator[T]:
    """Run `attempt()` again on retryable errors — but never once an item reached the caller."""
    for n in itertools.count():
        yielded = False
        try:
            async with aclosing(attempt()) as items:
                async for item in items:
                    yielded = True
                    yield item
            return
        except ProviderError as err:
            if yielded:
                raise
            await _before_retry(err, n, config)


async def call_with_retries(call: Callable[[], Awaitable[T]], config: ProviderConfig) -> T:
    """Await `call()` again on retryable errors."""
    attempt = 0
    while True:
        try:
            return await call()
        except ProviderError as err:
            await _before_retry(err, attempt, config)
        attempt += 1


# ---- requests -------------------------------------------------------------------------


def timeouts(config: ProviderConfig) -> httpx.Timeout:
    return httpx.Timeout(config.read_timeout, connect=config.connect_timeout)


def _content_type(response: httpx.Response) -> str:
    kind: str = response.headers.get("content-type", "")
    return kind.partition(";")[0].strip().lower()


async def _one_event(data: str) -> AsyncIterator[ServerSentEvent]:
    yield ServerSentEvent(data=data)


def _check_event_stream(response: httpx.Response) -> None:
    kind = _content_type(response)
    if kind != "text/event-stream":
        raise StreamError(
            f"The server answered with {kind or 'no content type'} instead of a stream of "
            "events. Is the base URL right?"
        )


@asynccontextmanager
async def open_event_stream(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str],
    payload: dict[str, Any],
    config: ProviderConfig,
    on_sent: Callable[[], None] | None = None,
) -> AsyncIterator[AsyncIterator[ServerSentEvent]]:
    """POST `payload` and give the response's server-sent events.

    One attempt, no retries. HTTP errors and network failures (before or during the
    stream) come out as typed errors; leaving the block closes the response. `on_sent` is
    called (on the loop) once the request's body is on the wire.

    The one exit to the model: every string of `payload` passes the tripwire here
    (`masked_payload`), whoever built it — the agent's history, memory note, tool calls
    and system prompt, a compaction summary's prompt — so text kept before a secret became
    known goes out masked too."""
    secret = config.api_key
    payload = masked_payload(payload)
    try:
        async with _connect(client, url, headers, payload, config, on_sent) as source:
            await _raise_for_status(source.response, url=url, secret=secret)
            if _content_type(source.response) == "application/json":
                # The server ignored `stream: true` and sent the whole reply at once.
                body = (await source.response.aread()).decode("utf-8", errors="replace")
                yield _one_event(body)
                return
            _check_event_stream(source.response)
            async with aclosing(source.aiter_sse()) as events:
                yield events
    except httpx.TransportError as exc:
        raise error_from_transport(exc, url=url, secret=secret) from exc
    except SSEError as exc:
        raise StreamError(f"The server's event stream could not be read: {exc}") from exc


def masked_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """`payload` with every known secret masked in every string value (keys are the API's
    own words and schema names), except an image's base64 bytes (no text to mask there)."""
    redactor = TRIPWIRE.redactor()
    if redactor.pattern is None:
        return payload

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return redactor.text(value)
        if isinstance(value, list):
            return [walk(item) for item in value]
        if not isinstance(value, dict):
            return value
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if _image_bytes(value, key, item):
                out[key] = item
            else:
                out[key] = walk(item)
        return out

    masked: dict[str, Any] = walk(payload)
    return masked


def _image_bytes(block: dict[Any, Any], key: Any, item: Any) -> bool:
    """An image's data: `{"type": "base64", "data": …}` (Anthropic), a `data:` URL under
    `image_url` (OpenAI)."""
    if not isinstance(item, str):
        return False
    if key == "data" and block.get("type") == "base64":
        return True
    return key == "url" and item.startswith("data:image/") and ";base64," in item[:100]


@asynccontextmanager
async def _connect(
    client: httpx.AsyncClient,
    url: str,
    headers: Mapping[str, str],
    payload: dict[str, Any],
    config: ProviderConfig,
    on_sent: Callable[[], None] | None,
) -> AsyncIterator[EventSource]:
    extra: dict[str, Any] = {}
    if on_sent is not None:
        extra["extensions"] = {"trace": _body_sent_trace(on_sent)}
    async with aconnect_sse(
        client,
        "POST",
        url,
        headers=dict(headers),
        json=payload,
        timeout=timeouts(config),
        **extra,
    ) as source:
        yield source


def _body_sent_trace(on_sent: Callable[[], None]) -> Callable[[str, Any], Awaitable[None]]:
    """An httpcore trace hook that calls `on_sent` when a request body was written."""

    async def trace(event: str, _info: Any) -> None:
        if event.endswith(".send_request_body.complete"):
            on_sent()

    return trace


async def _raise_for_status(response: httpx.Response, *, url: str, secret: str | None) -> None:
    if response.status_code < 400:
        return
    body = b""
    async for chunk in response.aiter_bytes():  # enough for a message, not a flood
        body += chunk
        if len(body) >= ERROR_BODY_BYTES:
            break
    raise error_from_status(response.status_code, response.headers, body, url=url, secret=secret)


async def get_json(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str],
    config: ProviderConfig,
    max_bytes: int | None = None,
) -> Any:
    """GET a JSON document, with retries and typed errors. `max_bytes`: read no more of
    the body than this (a larger one is an error, not a memory hog)."""
    secret = config.api_key

    async def once() -> Any:
        try:
            async with client.stream(
                "GET", url, headers=dict(headers), timeout=timeouts(config)
            ) as response:
                await _raise_for_status(response, url=url, secret=secret)
                body = await _read_capped(response, max_bytes, url=url)
        except httpx.TransportError as exc:
            raise error_from_transport(exc, url=url, secret=secret) from exc
        try:
            return json.loads(body)
        except ValueError as exc:
            raise BadRequestError(f"{host_of(url)} did not answer with JSON.") from exc

    return await call_with_retries(once, config)


async def _read_capped(response: httpx.Response, max_bytes: int | None, *, url: str) -> bytes:
    if max_bytes is None:
        return await response.aread()
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise BadRequestError(
                f"{host_of(url)} sent more than {max_bytes // (1024 * 1024)} MB for its list "
                "of models; Deskhand stopped reading. Is the base URL right?",
                status=200,
            )
        chunks.append(chunk)
    return b"".join(chunks)


def model_ids(data: Any, *, url: str) -> list[str]:
    """The ids of a `/models` answer (`{"data": [{"id": ...}, ...]}`, both APIs): each
    once, none empty or longer than MAX_MODEL_NAME, at most MAX_MODELS. Any other JSON
    means the base URL points at something that is not a model API."""
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise BadRequestError(
            f"{host_of(url)} answered, but not with a list of models. Is the base URL right?",
            status=200,
        )
    ids = (str(item["id"]) for item in items if isinstance(item, dict) and "id" in item)
    kept = (i for i in dict.fromkeys(ids) if i and len(i) <= MAX_MODEL_NAME)
    return list(itertools.islice(kept, MAX_MODELS))


def parse_json_data(data: str) -> Any:
    """Decode one SSE `data:` payload; garbage becomes a StreamError."""
    try:
        return json.loads(data)
    except ValueError:
        raise StreamError(
            "The model's reply could not be read: the server sent malformed data. Try again."
        ) from None
