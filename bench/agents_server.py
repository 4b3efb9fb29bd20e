"""A model server for bench/delegation.py that answers by what each request holds (a
queue of scripted turns cannot serve eight sub-agents whose requests interleave): in its
own process, so its threads do not compete for the measured process's interpreter lock.

* a sub-agent's request (its system prompt starts "You are <name>, a sub-agent"): while it
  has fewer than CALLS tool results since its task, one `fs_list_dir` call on ROOT, sent
  after THINK seconds; then an answer of ANSWER_TOKENS tokens, one every TOKEN seconds;
* the parent's first request (its user message "delegate N"): N `delegate_agent` calls in
  one message; its next: a short answer.
With "instant", nothing waits and the sub-agent answers at once, without tools.

Run: python bench/agents_server.py ROOT paced|instant — prints the base URL (OpenAI, ending
in /v1) on stdout, then serves until stdin closes.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CALLS = 3
THINK = 0.2
TOKEN = 0.02
ANSWER_TOKENS = 40


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, instant: bool) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.root, self.instant = root, instant
        self.count = 0
        self.lock = threading.Lock()

    def next_id(self) -> int:
        with self.lock:
            self.count += 1
            return self.count


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"
    #: as model servers do: a small frame is sent at once, not held for the last one's ACK
    #: (on a kept-alive connection that wait is the peer's delayed ACK, 40 ms)
    disable_nagle_algorithm = True

    def log_message(self, *_: Any) -> None:
        return

    def do_GET(self) -> None:
        body = json.dumps({"data": [{"id": "m"}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        messages = request["messages"]
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        since_user = _after_last_user(messages)
        results = sum(1 for m in since_user if m["role"] == "tool")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        n = self.server.next_id()
        if "a sub-agent of Deskhand" in system:
            self._child(n, results)
        else:
            self._parent(n, messages, results)
        self._frame("[DONE]")
        self.wfile.write(b"0\r\n\r\n")

    def _child(self, n: int, results: int) -> None:
        if self.server.instant:
            self._text(n, "done", pace=0)
            return
        if results < CALLS:
            time.sleep(THINK)
            self._calls(n, [("fs_list_dir", {"path": str(self.server.root)})])
            return
        self._text(n, " ".join(["word"] * ANSWER_TOKENS), pace=TOKEN)

    def _parent(self, n: int, messages: list[dict[str, Any]], results: int) -> None:
        if results:
            self._text(n, "All done.", pace=0)
            return
        user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        count = int(user.split()[-1]) if user.startswith("delegate") else 0
        if not count:
            self._text(n, "Hello.", pace=0)
            return
        task = {"agent": "Lister", "task": "list the folder three times and say so"}
        self._calls(n, [("delegate_agent", task)] * count)

    def _text(self, n: int, content: str, *, pace: float) -> None:
        for word in content.split(" "):
            if pace:
                time.sleep(pace)
            self._chunk(n, {"content": word + " "})
        self._chunk(n, {}, finish="stop")

    def _calls(self, n: int, calls: list[tuple[str, dict[str, Any]]]) -> None:
        deltas = [
            {
                "index": i,
                "id": f"c{n}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(calls)
        ]
        self._chunk(n, {"tool_calls": deltas})
        self._chunk(n, {}, finish="tool_calls")

    def _chunk(self, n: int, delta: dict[str, Any], finish: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        self._frame(json.dumps({"id": f"c{n}", "object": "chat.completion.chunk",
                                "model": "m", "choices": [choice]}))

    def _frame(self, data: str) -> None:
        payload = f"data: {data}\n\n".encode()
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()


def _after_last_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    return messages[last + 1 :]


def main() -> None:
    server = Server(Path(sys.argv[1]), sys.argv[2] == "instant")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
