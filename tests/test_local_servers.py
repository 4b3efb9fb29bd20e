"""Finding local model servers: a scripted server stands in for Ollama (real HTTP, loopback)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Coroutine, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

import pytest

from app.core.local_servers import DEFAULTS, Candidate, LocalServer, detect_local_servers
from tests.fakellm import ScriptedLLM

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, timeout=10))


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) but never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


class _NotAModelServer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html>hello</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def web_page_port() -> Iterator[int]:
    """Some other HTTP service: answers 200, but not with a model list."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotAModelServer)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_defaults_are_ollama_and_lm_studio() -> None:
    assert [c.name for c in DEFAULTS] == ["Ollama", "LM Studio"]
    assert DEFAULTS[0].base_url == "http://127.0.0.1:11434/v1"
    assert DEFAULTS[1].base_url == "http://127.0.0.1:1234/v1"


def test_running_server_is_found_with_its_models(llm: ScriptedLLM, unused_port: int) -> None:
    candidates = [
        Candidate("Ollama", llm.openai_base_url + "/"),
        ("LM Studio", f"http://127.0.0.1:{unused_port}/v1"),  # plain tuples work too
    ]
    found = run(detect_local_servers(candidates=candidates))
    assert found == [LocalServer("Ollama", llm.openai_base_url, ["fake-model", "fake-model-large"])]
    assert llm.requests[0].method == "GET"
    assert llm.requests[0].path == "/v1/models"


def test_nothing_running_is_an_empty_list(unused_port: int) -> None:
    dead = [("Ollama", f"http://127.0.0.1:{unused_port}/v1")]
    assert run(detect_local_servers(candidates=dead)) == []
    assert run(detect_local_servers(candidates=[])) == []


def test_a_server_that_never_answers_is_left_out_within_the_timeout(
    llm: ScriptedLLM, silent_port: int
) -> None:
    """The silent server holds its probe until the shared deadline; the call still returns
    (run() would fail after 10 s) with the server that did answer."""
    candidates = [
        Candidate("Silent", f"http://127.0.0.1:{silent_port}/v1"),
        Candidate("Ollama", llm.openai_base_url),
    ]
    # the answering server gets 2 s: enough on a busy machine (the silent one holds them all)
    found = run(detect_local_servers(timeout=2.0, candidates=candidates))
    assert [s.name for s in found] == ["Ollama"]


def test_other_http_services_are_not_model_servers(web_page_port: int) -> None:
    candidates = [("Web page", f"http://127.0.0.1:{web_page_port}/v1")]
    assert run(detect_local_servers(candidates=candidates)) == []


def test_a_server_with_no_models_pulled_is_still_found() -> None:
    with ScriptedLLM(models=()) as empty:
        url = empty.openai_base_url
        found = run(detect_local_servers(candidates=[("Ollama", url)]))
    assert found == [LocalServer("Ollama", url, [])]


def test_nothing_listening_is_ruled_out_without_importing_httpx():
    """Most machines run no local model server: the first-run probe must not load httpx."""
    import socket
    import subprocess
    import sys
    import textwrap

    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = textwrap.dedent(
        f"""
        import asyncio, sys
        from app.core.local_servers import detect_local_servers
        found = asyncio.run(detect_local_servers(candidates=[("X", "http://127.0.0.1:{port}/v1")]))
        print(found, "httpx" in sys.modules)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    assert out.strip() == "[] False"
