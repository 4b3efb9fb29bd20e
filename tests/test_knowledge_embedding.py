"""Embedders: the built-in WordLlama model (offline, unit vectors, meaning over words) and a
provider's OpenAI-compatible /v1/embeddings over real HTTP, with its failures in plain
words."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.core.knowledge.embedding import (
    BUILTIN_NAME,
    PROVIDER_BATCH,
    EmbeddingError,
    ProviderEmbedder,
    builtin_embedder,
)

KEY = "sk-test-embeddings-key"
REPO = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------- built-in


def test_builtin_embedder_gives_unit_float32_rows_of_256() -> None:
    embedder = builtin_embedder()
    vectors = embedder.embed(["The invoice is due in 30 days.", "Café crème, 東京, ünïcödé"])
    assert embedder.name == BUILTIN_NAME
    assert embedder.dim == 256
    assert vectors.shape == (2, 256)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_builtin_embedder_is_deterministic_and_batch_independent() -> None:
    embedder = builtin_embedder()
    texts = [f"sentence number {i} about budgets" for i in range(10)]
    alone = np.vstack([embedder.embed([t]) for t in texts])
    assert np.allclose(embedder.embed(texts), alone, atol=1e-6)


def test_builtin_embedder_of_nothing_is_an_empty_matrix() -> None:
    vectors = builtin_embedder().embed([])
    assert vectors.shape == (0, 256)
    assert vectors.dtype == np.float32


def test_builtin_embedder_ranks_by_meaning_not_shared_words() -> None:
    embedder = builtin_embedder()
    passages = [
        "The invoice is due within 30 days of receipt; late payment incurs a fee.",
        "Our office cat likes sleeping on the warm keyboard.",
        "Waterproof hiking boots are best for mountain trails.",
        "The quarterly meeting moved to the large conference room.",
    ]
    query = embedder.embed(["when must the bill be paid"])[0]
    similarity = embedder.embed(passages) @ query
    assert int(np.argmax(similarity)) == 0


def test_builtin_embedder_is_one_instance_across_threads() -> None:
    found: list[object] = []
    threads = [threading.Thread(target=lambda: found.append(builtin_embedder())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(embedder) for embedder in found}) == 1


NO_NETWORK_CHILD = """
import logging, socket, sys

def refuse(*args, **kwargs):
    raise AssertionError("the built-in embedder tried to use the network")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse

from app.core.knowledge.embedding import builtin_embedder
vectors = builtin_embedder().embed(["offline, please"])
assert vectors.shape == (1, 256), vectors.shape
assert "wordllama" not in sys.modules, "importing wordllama configures the root logger"
assert not logging.getLogger().handlers, "loading touched the root logger"
print("ok")
"""


def test_builtin_embedder_loads_and_embeds_without_any_network() -> None:
    done = subprocess.run(
        [sys.executable, "-c", NO_NETWORK_CHILD],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={"PATH": "", "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


# ---------------------------------------------------------------------------- provider


@dataclass
class EmbeddingsServer:
    """An OpenAI-compatible /v1/embeddings on 127.0.0.1 whose behaviour a test sets."""

    dim: int = 8
    status: int = 200
    error: dict[str, Any] | None = None
    raw: bytes | None = None  # an answer that is not JSON
    hold: threading.Event | None = None  # answer only once set (to make the client time out)
    reverse: bool = False  # list the answers in reverse order (with their index)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def vector(self, text: str) -> list[float]:
        """A vector that depends on the text only (not unit length: the client normalises)."""
        seed = sum(ord(c) for c in text)
        return [float((seed * (i + 3)) % 17 + 1) for i in range(self.dim)]

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        if path != "/v1/embeddings":
            return 404, b'{"error": {"message": "no such route"}}'
        if self.raw is not None:
            return 200, self.raw
        if self.status != 200:
            return self.status, json.dumps(self.error or {}).encode()
        items = [
            {"object": "embedding", "index": i, "embedding": self.vector(text)}
            for i, text in enumerate(body["input"])
        ]
        if self.reverse:
            items.reverse()
        return 200, json.dumps({"object": "list", "data": items, "model": body["model"]}).encode()


@pytest.fixture
def server() -> Iterator[EmbeddingsServer]:
    state = EmbeddingsServer()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(body)
            state.headers.append(dict(self.headers))
            if state.hold is not None:
                state.hold.wait(10)
            status, payload = state.answer(self.path, body)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the client gave up (the timeout test)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        if state.hold is not None:
            state.hold.set()
        httpd.shutdown()
        httpd.server_close()


def _embedder(server: EmbeddingsServer, **kwargs: Any) -> ProviderEmbedder:
    options: dict[str, Any] = {
        "base_url": server.base_url,
        "model": "nomic-embed-text",
        "api_key": KEY,
        "account": "local",
    }
    options.update(kwargs)
    return ProviderEmbedder(**options)


def test_provider_embedder_posts_batches_and_returns_unit_rows(
    server: EmbeddingsServer,
) -> None:
    embedder = _embedder(server)
    texts = [f"text {i}" for i in range(PROVIDER_BATCH * 2 + 5)]
    vectors = embedder.embed(texts)
    assert vectors.shape == (len(texts), server.dim)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert [len(r["input"]) for r in server.requests] == [PROVIDER_BATCH, PROVIDER_BATCH, 5]
    assert [t for r in server.requests for t in r["input"]] == texts
    assert server.requests[0]["model"] == "nomic-embed-text"
    assert server.headers[0]["Authorization"] == f"Bearer {KEY}"
    expected = np.asarray(server.vector("text 7"), dtype=np.float32)
    assert np.allclose(vectors[7], expected / np.linalg.norm(expected), atol=1e-6)
    assert embedder.name == "provider:local:nomic-embed-text"
    assert embedder.dim == server.dim


def test_provider_embedder_orders_answers_by_their_index(server: EmbeddingsServer) -> None:
    server.reverse = True
    vectors = _embedder(server).embed(["first", "second text"])
    first = np.asarray(server.vector("first"), dtype=np.float32)
    assert np.allclose(vectors[0], first / np.linalg.norm(first), atol=1e-6)


def test_provider_embedder_takes_a_bare_address_and_no_key(server: EmbeddingsServer) -> None:
    embedder = _embedder(server, base_url=f"127.0.0.1:{server.port}", api_key=None)
    assert embedder.embed(["hello"]).shape == (1, server.dim)
    assert "Authorization" not in server.headers[0]


def test_provider_embedder_learns_its_size_by_asking_once(server: EmbeddingsServer) -> None:
    embedder = _embedder(server)
    assert embedder.dim == server.dim
    assert len(server.requests) == 1
    assert embedder.embed([]).shape == (0, server.dim)


def test_provider_embedder_says_when_the_server_is_unreachable(unused_port: int) -> None:
    embedder = ProviderEmbedder(
        base_url=f"http://127.0.0.1:{unused_port}/v1", model="m", api_key=KEY, account="local"
    )
    with pytest.raises(EmbeddingError, match=r"Cannot reach the embeddings server at .*running"):
        embedder.embed(["x"])


def test_provider_embedder_says_when_the_key_is_refused(server: EmbeddingsServer) -> None:
    server.status, server.error = 401, {"error": {"message": f"bad key {KEY}"}}
    with pytest.raises(EmbeddingError) as caught:
        _embedder(server).embed(["x"])
    assert "refused the API key of account local (HTTP 401)" in str(caught.value)
    assert KEY not in str(caught.value)


def test_provider_embedder_says_when_the_model_gives_no_embeddings(
    server: EmbeddingsServer,
) -> None:
    server.status = 400
    server.error = {"error": {"message": "this model does not support embeddings"}}
    with pytest.raises(EmbeddingError) as caught:
        _embedder(server, model="llama3.2").embed(["x"])
    message = str(caught.value)
    assert "Model llama3.2" in message and "gives no embeddings" in message
    assert "does not support embeddings" in message


def test_provider_embedder_refuses_vectors_of_another_size(server: EmbeddingsServer) -> None:
    embedder = _embedder(server)
    embedder.embed(["a"])
    server.dim = 12
    with pytest.raises(EmbeddingError, match=r"vectors of size 12, but 8 was expected"):
        embedder.embed(["b"])


def test_provider_embedder_refuses_a_size_other_than_the_one_given(
    server: EmbeddingsServer,
) -> None:
    with pytest.raises(EmbeddingError, match=r"vectors of size 8, but 768 was expected"):
        _embedder(server, dim=768).embed(["a"])


def test_provider_embedder_says_when_the_answer_is_not_embeddings(
    server: EmbeddingsServer,
) -> None:
    server.raw = b"<html>proxy login</html>"
    with pytest.raises(EmbeddingError, match=r"not a list of 1 embeddings"):
        _embedder(server).embed(["x"])
    server.raw = b'{"data": [{"embedding": [1.0, 2.0]}, {"embedding": [1.0]}]}'
    with pytest.raises(EmbeddingError, match=r"not a list of 2 embeddings"):
        _embedder(server).embed(["x", "y"])


def test_provider_embedder_says_when_the_server_does_not_answer_in_time(
    server: EmbeddingsServer,
) -> None:
    server.hold = threading.Event()
    with pytest.raises(EmbeddingError, match=r"did not answer within 0.3 seconds"):
        _embedder(server, timeout=0.3).embed(["x"])
