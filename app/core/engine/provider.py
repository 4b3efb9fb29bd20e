"""`EngineProvider`: the built-in engine as a `Provider` (kind "engine").

The account's model is a local model (app/core/engine/store.py). The first request starts
the engine for it (or wakes it after an idle stop), then goes to it exactly as to any
OpenAI-compatible server, through `OpenAICompatProvider`: the same streaming, tool calls
(native or written into the text) and errors. The engine is on this machine, so a failed
connection is not retried: it means the engine died, and the user is told why; the next
message starts it again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from app.core.providers.base import (
    ChatMessage,
    ProviderConfig,
    ProviderError,
    ProviderEvent,
    ServerError,
    StreamError,
    ToolSpec,
    UnreachableError,
)

if TYPE_CHECKING:
    from app.core.engine.engine import Endpoint
    from app.core.engine.store import LocalModel
    from app.core.providers.openai_compat import OpenAICompatProvider


#: While an answer streams, the engine is told it is in use this often (its idle stop
#: must never land in the middle of a long answer).
TOUCH_EVERY_S = 1.0
#: How long a cut connection waits for the engine's process to be seen ending, if it is.
DEATH_WAIT_S = 2.0


class NoLocalModel(ProviderError):
    kind = "config"


class EngineProvider:
    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self.on_sent: Callable[[], None] | None = None
        self._inner: OpenAICompatProvider | None = None
        self._endpoint: Endpoint | None = None
        #: The local model, found once (the account's model does not change under it).
        self._local: LocalModel | None = None

    def _model(self) -> LocalModel:
        from app.core.engine.store import ModelStore

        if not self.config.models_dir:
            raise NoLocalModel("the built-in engine has no models folder configured")
        store = ModelStore(Path(self.config.models_dir).parent)
        name = self.config.model.strip()
        model = store.resolve(name) if name else None
        if model is None:
            raise NoLocalModel(
                f"no downloaded model is named {name!r}: download one in Settings → "
                "Providers → Built-in engine, or with `deskhand models pull`"
                if name
                else "no model is chosen for the built-in engine: download one in Settings → "
                "Providers → Built-in engine, or with `deskhand models pull`"
            )
        return model

    async def _ready(self) -> tuple[OpenAICompatProvider, LocalModel]:
        from app.core.engine.engine import EngineError, engine
        from app.core.engine.models import engine_missing
        from app.core.providers.openai_compat import OpenAICompatProvider

        missing = engine_missing()
        if missing:
            raise NoLocalModel(f"{missing[0].upper()}{missing[1:]}.")
        model = self._local
        if model is None or not model.path.is_file():
            model = self._local = await asyncio.to_thread(self._model)
        # running: no thread hop (a request's first token is not kept waiting for one)
        endpoint = engine().running(model.id, model.path)
        if endpoint is None:
            try:
                endpoint = await asyncio.to_thread(engine().ensure, model.id, model.path)
            except EngineError as exc:
                raise ServerError(
                    f"The built-in engine could not start {model.name}: {exc}"
                ) from exc
        if self._inner is None or self._endpoint != endpoint:
            if self._inner is not None:
                await self._inner.aclose()
            config = replace(
                self.config,
                kind="openai",
                base_url=endpoint.base_url,
                api_key=endpoint.api_key,
                model=endpoint.model,
                max_retries=0,  # nothing to wait for: a refused connection is a dead engine
                key_source=None,
            )
            self._inner = OpenAICompatProvider(config)
            self._endpoint = endpoint
        self._inner.on_sent = self.on_sent
        return self._inner, model

    def stream(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        *,
        system: str | None = None,
        known_tools: set[str] | None = None,
    ) -> AsyncIterator[ProviderEvent]:
        return self._stream(messages, tools, system, known_tools)

    async def _stream(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        system: str | None,
        known_tools: set[str] | None,
    ) -> AsyncGenerator[ProviderEvent, None]:
        from app.core.engine.engine import engine

        inner, model = await self._ready()
        running = engine()
        touched = time.monotonic()
        try:
            async for event in inner.stream(
                messages, tools, system=system, known_tools=known_tools
            ):
                now = time.monotonic()
                if now - touched > min(TOUCH_EVERY_S, running.idle_seconds / 4):
                    running.touch(model.id)  # a long answer is use
                    touched = now
                yield event
        except ProviderError as exc:
            if isinstance(exc, StreamError | UnreachableError):
                # a connection cut: the engine may be dying, and is not yet reaped
                await asyncio.to_thread(engine().wait_stopped, model.id, DEATH_WAIT_S)
            why = engine().crashed(model.id)
            if why:
                raise ServerError(
                    f"The built-in engine stopped while answering ({why}). Send your message "
                    "again to start it anew."
                ) from exc
            raise
        finally:
            engine().touch(model.id)

    async def list_models(self) -> list[str]:
        from app.core.engine.store import ModelStore

        if not self.config.models_dir:
            return []
        store = ModelStore(Path(self.config.models_dir).parent)
        return [m.id for m in await asyncio.to_thread(store.models)]

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()
            self._inner = None
