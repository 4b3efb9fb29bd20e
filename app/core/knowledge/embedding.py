"""Text to vectors: the built-in WordLlama model that ships inside its wheel (offline, no
download, ever), or a provider's OpenAI-compatible `/v1/embeddings` endpoint.

Every embedder hands back float32 rows of unit length, so a dot product is the cosine and
the index can compare vectors from any of them the same way.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import httpx
    import numpy as np
    import numpy.typing as npt
    from tokenizers import Tokenizer

    Vectors = npt.NDArray[np.float32]

BUILTIN_NAME = "builtin:wordllama-256"
BUILTIN_DIM = 256
#: Texts per request to a provider: small enough for any server's request limit.
PROVIDER_BATCH = 64
PROVIDER_TIMEOUT = 60.0
#: How much of a server's error message is shown.
_MESSAGE_CHARS = 200


class EmbeddingError(Exception):
    """Embedding failed; the message says why in plain words, for the user."""


class Embedder(Protocol):
    @property
    def name(self) -> str:
        """Who made the vectors, "builtin:wordllama-256" or "provider:<account>:<model>":
        vectors from embedders with different names are not comparable."""
        ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """(len(texts), dim) float32, rows L2-normalised."""
        ...


def normalise(rows: npt.NDArray[Any]) -> Vectors:
    """Rows scaled to unit length; an all-zero row (no tokens) stays zero."""
    import numpy as np

    out = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.maximum(norms, np.float32(1e-12), out=norms)
    return np.ascontiguousarray(out / norms, dtype=np.float32)


# ---------------------------------------------------------------------------- built-in


class _WordLlama:
    """WordLlama's 256-dimension static embeddings: the mean of the text's token vectors.

    Loaded by hand from the wheel's own files: `WordLlama.load()` looks in another folder
    and would try to download, and importing `wordllama` configures the root logger."""

    def __init__(self, table: npt.NDArray[np.float16], tokenizer: Tokenizer) -> None:
        self._table = table  # (vocab, 256) float16: half the memory of float32
        self._tokenizer = tokenizer

    @property
    def name(self) -> str:
        return BUILTIN_NAME

    @property
    def dim(self) -> int:
        return BUILTIN_DIM

    def embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        rows = np.zeros((len(texts), BUILTIN_DIM), dtype=np.float32)
        if not texts:
            return rows
        # The tokenizer is Rust and thread-safe; nothing here is shared state to guard.
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        last = self._table.shape[0] - 1
        for i, encoding in enumerate(encodings):
            if encoding.ids:
                ids = np.clip(np.asarray(encoding.ids, dtype=np.int64), 0, last)
                rows[i] = self._table[ids].sum(axis=0, dtype=np.float32)
        return normalise(rows)


def _wordllama_folder() -> Path:
    """The installed `wordllama` package, found without importing it."""
    import importlib.util

    bundle = getattr(sys, "_MEIPASS", None)  # the installed app: its files are data there
    if bundle is not None and (Path(bundle) / "wordllama" / "weights").is_dir():
        return Path(bundle) / "wordllama"
    spec = importlib.util.find_spec("wordllama")
    if spec is None or spec.origin is None:
        raise EmbeddingError("The built-in embedding model (wordllama) is not installed.")
    return Path(spec.origin).parent


def _load_wordllama() -> _WordLlama:
    from tokenizers import Tokenizer

    folder = _wordllama_folder()
    tokens = folder / "tokenizers" / "l2_supercat_tokenizer_config.json"
    weights = folder / "weights" / f"l2_supercat_{BUILTIN_DIM}.safetensors"
    try:
        tokenizer = Tokenizer.from_file(str(tokens))
        table = _mapped_table(weights, "embedding.weight")
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as e:
        raise EmbeddingError(f"The built-in embedding model could not be loaded: {e}") from e
    if table.ndim != 2 or table.shape[1] != BUILTIN_DIM:
        raise EmbeddingError("The built-in embedding model's weights have an unexpected shape.")
    return _WordLlama(table, tokenizer)


#: The largest safetensors header read (the file's own JSON index of its tensors).
_HEADER_MAX = 1 << 20


def _mapped_table(path: Path, name: str) -> npt.NDArray[np.float16]:
    """A float16 tensor of a safetensors file, mapped rather than read: its pages are the
    file's, shared and droppable, where `safe_open(...).get_tensor` makes a private copy
    (16 MB, and as much again while reading it) in every process that embeds.

    The format: an 8-byte little-endian header length, a JSON header giving each tensor's
    dtype, shape and byte range after the header, then the data."""
    import json
    import struct

    import numpy as np

    with path.open("rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        if not 0 < length <= _HEADER_MAX:
            raise ValueError(f"{path.name} has no readable safetensors header")
        entry = json.loads(f.read(length))[name]
    if entry["dtype"] != "F16":
        raise ValueError(f"{name} in {path.name} is {entry['dtype']}, not float16")
    shape = tuple(int(n) for n in entry["shape"])
    start, end = (int(n) for n in entry["data_offsets"])
    if end - start != 2 * int(np.prod(shape)) or 8 + length + end > path.stat().st_size:
        raise ValueError(f"{name} in {path.name} does not fit its declared shape")
    table = np.memmap(path, dtype=np.float16, mode="r", offset=8 + length + start, shape=shape)
    return table


_builtin: _WordLlama | None = None
_builtin_lock = threading.Lock()


def builtin_embedder() -> Embedder:
    """The process-wide built-in embedder, loaded once on first use (about 0.1 s)."""
    global _builtin
    with _builtin_lock:
        if _builtin is None:
            _builtin = _load_wordllama()
        return _builtin


# ---------------------------------------------------------------------------- provider


class ProviderEmbedder:
    """A provider's OpenAI-compatible `POST /v1/embeddings` (Ollama, LM Studio, llama.cpp
    server, OpenAI...), synchronous: it runs on the indexer's thread or a worker.

    `dim` is learned from the first answer (asking the server once if read before any) and
    every later answer must keep it: a model swapped on the server would otherwise mix
    vectors that cannot be compared."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None,
        account: str,
        dim: int | None = None,
        timeout: float = PROVIDER_TIMEOUT,
    ) -> None:
        from app.core.providers.urls import display_origin, normalize_base_url

        self._url = normalize_base_url("openai", base_url) + "/embeddings"
        self._where = display_origin(base_url)
        self._model = model
        self._api_key = api_key
        self._account = account
        self._dim = dim
        self._timeout = timeout
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"provider:{self._account}:{self._model}"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed(["dimension"])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        parts = [
            self._embed_batch(list(texts[i : i + PROVIDER_BATCH]))
            for i in range(0, len(texts), PROVIDER_BATCH)
        ]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _http(self) -> httpx.Client:
        import httpx

        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self._timeout, follow_redirects=False)
            return self._client

    def _embed_batch(self, texts: list[str]) -> Vectors:
        import httpx

        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        # OpenAI refuses an empty string; a blank one embeds as nothing much, as it should.
        inputs = [text if text.strip() else " " for text in texts]
        body = {"model": self._model, "input": inputs, "encoding_format": "float"}
        try:
            response = self._http().post(self._url, json=body, headers=headers)
        except httpx.TimeoutException as e:
            raise EmbeddingError(
                f"The embeddings server at {self._where} did not answer within "
                f"{self._timeout:g} seconds."
            ) from e
        except httpx.HTTPError as e:
            raise EmbeddingError(
                f"Cannot reach the embeddings server at {self._where}: is it running?"
            ) from e
        if response.status_code >= 400:
            raise EmbeddingError(self._status_message(response))
        return self._vectors(response, len(texts))

    def _status_message(self, response: httpx.Response) -> str:
        status = response.status_code
        said = _server_message(response)
        if status in (401, 403):
            return (
                f"The embeddings server at {self._where} refused the API key of account "
                f"{self._account} (HTTP {status}): check the key."
            )
        if status in (400, 404, 405, 422, 501):
            return (
                f"Model {self._model} at {self._where} gives no embeddings (HTTP {status}"
                f"{': ' + said if said else ''}): choose an embedding model, or the built-in one."
            )
        return f"The embeddings server at {self._where} answered HTTP {status}" + (
            f": {said}" if said else "."
        )

    def _vectors(self, response: httpx.Response, count: int) -> Vectors:
        import numpy as np

        bad = EmbeddingError(
            f"The embeddings server at {self._where} sent an answer that is not a list of "
            f"{count} embeddings."
        )
        try:
            items = response.json()["data"]
            ordered = sorted(items, key=lambda item: int(item.get("index", 0)))
            embeddings = [item["embedding"] for item in ordered]
            first = embeddings[0] if embeddings else None
            if isinstance(first, list) and first and isinstance(first[0], list):
                raise EmbeddingError(
                    f"Model {self._model} at {self._where} gave a vector per word, not "
                    "one per passage: it is a chat model, not an embedding model. "
                    "Choose an embedding model (e.g. nomic-embed-text)."
                )
            rows = np.asarray(embeddings, dtype=np.float32)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise bad from e
        if rows.ndim != 2 or rows.shape[0] != count or rows.shape[1] == 0:
            raise bad
        if not np.isfinite(rows).all():
            raise bad
        if self._dim is None:
            self._dim = int(rows.shape[1])
        elif rows.shape[1] != self._dim:
            raise EmbeddingError(
                f"Model {self._model} at {self._where} gave vectors of size {rows.shape[1]}, "
                f"but {self._dim} was expected: the model on the server changed; re-embed."
            )
        return normalise(rows)


def _server_message(response: httpx.Response) -> str:
    """The error text a server put in its answer, shortened; "" when it gave none."""
    try:
        payload = response.json()
    except ValueError:
        text = response.text.strip()
        return text[:_MESSAGE_CHARS]
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        error = error.get("message")
    if not isinstance(error, str) and isinstance(payload, dict):
        error = payload.get("message") or payload.get("detail")
    return str(error).strip()[:_MESSAGE_CHARS] if error else ""
