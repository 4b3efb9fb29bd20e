"""Provider-neutral chat types, streamed events and typed errors.

Providers translate these to and from their wire format. The agent loop only sees these.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .kinds import KindName

Role = Literal["system", "user", "assistant", "tool"]
#: Whether a model takes images (`ProviderAccount.images`): "auto" goes by the model's name
#: (`vision.takes_images`), "on" and "off" override it.
ImagesChoice = Literal["auto", "on", "off"]


@dataclass
class ToolCallRequest:
    """A complete tool call the model asked for. `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass
class ChatMessage:
    role: Role
    content: str = ""
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    #: For role "tool": which call this answers, and whether the tool failed.
    tool_call_id: str | None = None
    is_error: bool = False
    #: Images as data URLs ("data:image/png;base64,..."): a user message's attached ones
    #: (kept with it); a tool result's only in the request right after it (`vision`).
    images: list[str] = field(default_factory=list)


@dataclass
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


# ---- streamed events -------------------------------------------------------


@dataclass
class TextChunk:
    text: str


@dataclass
class ReasoningChunk:
    """The model's visible thinking (`<think>`, `reasoning_content`): shown apart from the
    answer, never sent back as answer text."""

    text: str


@dataclass
class ToolCallStart:
    """A tool call has begun streaming (lets a UI show a card before arguments arrive)."""

    index: int
    id: str
    name: str


@dataclass
class ToolCallReady:
    """A tool call is complete (all argument deltas joined)."""

    call: ToolCallRequest


@dataclass
class StreamDone:
    stop_reason: str  # "end_turn" | "tool_use" | "max_tokens" | provider's own word
    usage: Usage


ProviderEvent = TextChunk | ReasoningChunk | ToolCallStart | ToolCallReady | StreamDone


# ---- errors ------------------------------------------------------------------


class ProviderError(Exception):
    """Base of every provider failure. `str(err)` is a message a user understands."""

    kind = "provider"

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class AuthError(ProviderError):
    kind = "auth"


class RateLimitError(ProviderError):
    kind = "rate_limit"

    def __init__(self, message: str, *, status: int | None = 429, retry_after: float | None = None):
        super().__init__(message, status=status)
        self.retry_after = retry_after


class ServerError(ProviderError):
    kind = "server"


class BadRequestError(ProviderError):
    kind = "bad_request"


class ProviderTimeout(ProviderError):
    kind = "timeout"


class UnreachableError(ProviderError):
    kind = "unreachable"


class StreamError(ProviderError):
    """The stream was malformed or ended before the model finished."""

    kind = "stream"


@dataclass
class ProviderConfig:
    kind: KindName
    base_url: str
    model: str
    api_key: str | None = None
    max_tokens: int = 4096
    temperature: float | None = None
    connect_timeout: float = 10.0
    read_timeout: float = 120.0
    max_retries: int = 3
    #: Cap on any single wait between retries (seconds), whatever Retry-After says.
    max_retry_wait: float = 30.0
    #: How tool calls come back from an OpenAI-compatible server: "auto" accepts native
    #: `tool_calls` and calls written into the text (Hermes, Llama 3, Mistral, bare JSON);
    #: "native" only the former; "none" sends no tools at all.
    tool_format: str = "auto"
    #: Whether the model takes images (`vision.model_takes_images`).
    images: ImagesChoice = "auto"
    extra_headers: dict[str, str] = field(default_factory=dict)
    #: Merged into every request body (server-specific options, e.g. `tool_choice`).
    extra_body: dict[str, Any] = field(default_factory=dict)
    #: Where `api_key` comes from, so it can be read again the same way: the account's id
    #: and base URL, and the URL the key is for (`SecretStore.api_key_for`). Not secret.
    key_source: tuple[str, str, str] | None = None
    #: The built-in engine (kind "engine"): the home's models folder, where `model` is
    #: looked up (app/core/engine/store.py).
    models_dir: str = ""


class Provider(Protocol):
    config: ProviderConfig
    #: Called (on the loop) each time a request's body has been sent.
    on_sent: Callable[[], None] | None

    def stream(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        *,
        system: str | None = None,
        known_tools: set[str] | None = None,
    ) -> AsyncIterator[ProviderEvent]:
        """Stream one model turn. Raises ProviderError subclasses. Cancelling the
        consuming task closes the HTTP connection promptly."""
        ...

    async def list_models(self) -> list[str]: ...

    async def aclose(self) -> None: ...
