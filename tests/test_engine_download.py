"""Model downloads against a fake Hugging Face endpoint over real HTTP (tests/hf_endpoint.py):
verified, resumable after a cut or a killed process, cancellable, careful with disk space,
plain words for every failure, and no token sent unless given."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.engine.download import (
    MARGIN,
    DownloadCancelled,
    DownloadError,
    DownloadProgress,
    download_model,
    partial_files,
)
from tests.hf_endpoint import SMOLLM_FILE, SMOLLM_REPO, HFEndpoint

ROOT = Path(__file__).resolve().parents[1]
MB = 2**20


@pytest.fixture
def hub() -> Iterator[HFEndpoint]:
    with HFEndpoint() as server:
        yield server


def pull(hub: HFEndpoint, tmp: Path, **kwargs: Any) -> Path:
    args: dict[str, Any] = {
        "repo": SMOLLM_REPO,
        "file": SMOLLM_FILE,
        "revision": "main",
        "sha256": hub.sha256(),
        "size": hub.size(),
        "dest": tmp / "models" / "smollm.gguf",
        "partial_dir": tmp / "models" / "downloads",
        "endpoint": hub.url,
    }
    args.update(kwargs)
    return download_model(**args)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def the_partial(tmp: Path) -> Path:
    (found,) = partial_files(tmp / "models" / "smollm.gguf", tmp / "models" / "downloads")
    return found


# ---- the happy path and resuming -----------------------------------------------------


def test_a_full_download_is_verified_and_reports_progress(hub: HFEndpoint, tmp_path: Path) -> None:
    seen: list[DownloadProgress] = []
    dest = pull(hub, tmp_path, progress=seen.append)

    assert dest == tmp_path / "models" / "smollm.gguf"
    assert sha256(dest) == hub.sha256()
    assert partial_files(dest, tmp_path / "models" / "downloads") == []
    dones = [p.done for p in seen]
    assert dones == sorted(dones) and dones[0] == 0 and dones[-1] == hub.size()
    assert {p.total for p in seen} == {hub.size()}
    assert any(p.eta_s is not None and p.eta_s > 0 and p.bytes_per_s > 0 for p in seen)
    assert hub.ranges() == [None]


def test_a_cut_connection_resumes_from_the_bytes_on_disk(hub: HFEndpoint, tmp_path: Path) -> None:
    hub.cut_at(30 * MB)
    dest = pull(hub, tmp_path)

    assert sha256(dest) == hub.sha256()
    assert hub.ranges() == [None, f"bytes={30 * MB}-"]  # only the rest was asked for


def test_a_connection_that_keeps_dropping_gives_a_resumable_error(
    hub: HFEndpoint, tmp_path: Path
) -> None:
    hub.cut_at(30 * MB, times=None)
    with pytest.raises(DownloadError, match=r"kept dropping.*pulling again resumes") as caught:
        pull(hub, tmp_path)

    assert caught.value.resumable
    assert not (tmp_path / "models" / "smollm.gguf").exists()
    assert the_partial(tmp_path).stat().st_size == 30 * MB
    hub.cut_at(0, times=0)
    assert sha256(pull(hub, tmp_path)) == hub.sha256()
    assert hub.ranges()[-1] == f"bytes={30 * MB}-"


RESTART_CHILD = """
import json, sys
from pathlib import Path
from app.core.engine.download import download_model
args = json.loads(sys.argv[1])
def report(p):
    print(p.done, flush=True)
download_model(repo=args["repo"], file=args["file"], revision="main", sha256=args["sha256"],
    size=args["size"], dest=Path(args["dest"]), partial_dir=Path(args["partial_dir"]),
    endpoint=args["endpoint"], progress=report)
"""


def test_a_new_process_resumes_what_a_killed_one_left(hub: HFEndpoint, tmp_path: Path) -> None:
    hub.stall_at(20 * MB)  # the first process can never finish: the kill lands mid-file
    dest, partial_dir = tmp_path / "models" / "smollm.gguf", tmp_path / "models" / "downloads"
    args = {"repo": SMOLLM_REPO, "file": SMOLLM_FILE, "sha256": hub.sha256()}
    args |= {"size": hub.size(), "dest": str(dest), "partial_dir": str(partial_dir)}
    args |= {"endpoint": hub.url}
    child = subprocess.Popen(
        [sys.executable, "-c", RESTART_CHILD, json.dumps(args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    reported = 0
    while reported == 0:  # progress is reported after the bytes are flushed to the file
        reported = int(child.stdout.readline())
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    child.stdout.close()
    on_disk = the_partial(tmp_path).stat().st_size
    assert reported <= on_disk <= 20 * MB
    hub.release.set()

    assert sha256(pull(hub, tmp_path)) == hub.sha256()
    assert hub.ranges() == [None, f"bytes={on_disk}-"]


def test_cancel_keeps_the_partial_and_a_later_pull_resumes(hub: HFEndpoint, tmp_path: Path) -> None:
    cancel = threading.Event()

    def stop_after_ten_mb(p: DownloadProgress) -> None:
        if p.done >= 10 * MB:
            cancel.set()

    with pytest.raises(DownloadCancelled, match="cancelled; pulling it again resumes it"):
        pull(hub, tmp_path, progress=stop_after_ten_mb, cancel=cancel)

    assert not (tmp_path / "models" / "smollm.gguf").exists()
    kept = the_partial(tmp_path).stat().st_size
    assert 10 * MB <= kept < hub.size()
    assert sha256(pull(hub, tmp_path)) == hub.sha256()
    assert hub.ranges()[-1] == f"bytes={kept}-"


def test_cancel_wakes_a_download_the_server_stalls(hub: HFEndpoint, tmp_path: Path) -> None:
    hub.stall_at(5 * MB)
    cancel = threading.Event()
    threading.Thread(target=lambda: hub.stalled.wait() and cancel.set(), daemon=True).start()

    started = time.monotonic()
    with pytest.raises(DownloadCancelled):
        pull(hub, tmp_path, cancel=cancel)
    assert time.monotonic() - started < 10  # well before the 30 s read timeout
    assert 0 < the_partial(tmp_path).stat().st_size <= 5 * MB


# ---- refusing bad data ----------------------------------------------------------------


def test_a_corrupted_byte_is_refused_and_nothing_is_kept(hub: HFEndpoint, tmp_path: Path) -> None:
    hub.corrupt_at(12345)
    with pytest.raises(DownloadError) as caught:
        pull(hub, tmp_path)

    message = str(caught.value)
    assert SMOLLM_FILE in message and "damaged" in message
    assert hub.sha256()[:12] in message
    assert not caught.value.resumable
    assert not (tmp_path / "models" / "smollm.gguf").exists()
    assert (
        partial_files(tmp_path / "models" / "smollm.gguf", tmp_path / "models" / "downloads") == []
    )


def test_a_size_that_does_not_match_the_list_is_refused(hub: HFEndpoint, tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match=f"{hub.size()} bytes on .* but 1234 were expected"):
        pull(hub, tmp_path, size=1234)
    assert hub.downloads() == []


# ---- the disk -------------------------------------------------------------------------

DISK_CHILD = """
import json, os, sys
from pathlib import Path
from app.core.engine.download import DownloadError, download_model, partial_files
args = json.loads(sys.argv[1])
root = Path(args["root"])
dest, partial_dir = root / "smollm.gguf", root / "downloads"
def fill(p):
    if args["fill_after"] is not None and p.done >= args["fill_after"]:
        if not (root / "filler").exists():  # another program takes the rest of the disk
            with open(root / "filler", "wb") as fh:
                try:
                    while True:
                        fh.write(bytes(2**16))
                        fh.flush()
                except OSError:
                    pass
report = {}
try:
    download_model(repo=args["repo"], file=args["file"], revision="main",
        sha256=args["sha256"], size=args["size"], dest=dest, partial_dir=partial_dir,
        endpoint=args["endpoint"], progress=fill)
except DownloadError as exc:
    report = {"error": str(exc), "resumable": exc.resumable}
report["dest"] = dest.exists()
report["partials"] = [p.stat().st_size for p in partial_files(dest, partial_dir)]
print(json.dumps(report))
"""


def in_small_disk(hub: HFEndpoint, tmp_path: Path, size: int, fill_after: int | None) -> Any:
    """Runs a download in a child whose folder is a tmpfs of `size` bytes (bubblewrap)."""
    bwrap = shutil.which("bwrap")
    assert bwrap is not None, "bubblewrap is needed (scripts/test.sh installs it)"
    small = tmp_path / "small"
    small.mkdir()
    args = {"root": str(small), "repo": SMOLLM_REPO, "file": SMOLLM_FILE}
    args |= {"sha256": hub.sha256(), "size": hub.size(), "endpoint": hub.url}
    args |= {"fill_after": fill_after}
    argv = [bwrap, "--dev-bind", "/", "/", "--size", str(size), "--tmpfs", str(small)]
    argv += [sys.executable, "-c", DISK_CHILD, json.dumps(args)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_disk_that_fills_mid_download_says_so_and_keeps_the_partial(
    hub: HFEndpoint, tmp_path: Path
) -> None:
    report = in_small_disk(hub, tmp_path, hub.size() + MARGIN + 8 * MB, fill_after=8 * MB)

    assert "The disk is full" in report["error"] and "pull again to resume" in report["error"]
    assert report["resumable"] is True
    assert report["dest"] is False
    (kept,) = report["partials"]
    assert 8 * MB <= kept < hub.size()


def test_too_little_free_space_is_refused_before_writing(hub: HFEndpoint, tmp_path: Path) -> None:
    report = in_small_disk(hub, tmp_path, 40 * MB, fill_after=None)

    needed = f"{(hub.size() + MARGIN) / 1e6:,.0f} MB"
    assert f"needs {needed}" in report["error"] and "MB is free" in report["error"]
    assert report["dest"] is False and report["partials"] == []
    assert hub.downloads() == []


# ---- plain words for the endpoint's answers --------------------------------------------


def test_a_missing_file_repository_or_revision_is_named(hub: HFEndpoint, tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match=f"{SMOLLM_REPO} on .* has no file nope.gguf"):
        pull(hub, tmp_path, file="nope.gguf", sha256=None, size=None)
    with pytest.raises(DownloadError, match="There is no repository someone/nothing-here"):
        pull(hub, tmp_path, repo="someone/nothing-here", sha256=None, size=None)
    with pytest.raises(DownloadError, match=f"{SMOLLM_REPO} on .* has no revision v9"):
        pull(hub, tmp_path, revision="v9", sha256=None, size=None)
    assert not (tmp_path / "models").exists()


def test_a_gated_model_says_how_to_get_it_another_way(hub: HFEndpoint, tmp_path: Path) -> None:
    hub.gate(SMOLLM_REPO)
    with pytest.raises(DownloadError) as caught:
        pull(hub, tmp_path)
    message = str(caught.value)
    assert f"{SMOLLM_REPO} is a gated model" in message
    assert "accept its licence" in message and "deskhand models add" in message


def test_an_unreachable_server_is_a_plain_resumable_error(tmp_path: Path) -> None:
    with HFEndpoint() as gone:
        url = gone.url
    with pytest.raises(DownloadError, match=r"Could not reach 127\.0\.0\.1:.*pull again") as caught:
        download_model(
            repo="a/b",
            file="c.gguf",
            revision="main",
            sha256=None,
            size=None,
            dest=tmp_path / "c.gguf",
            partial_dir=tmp_path / "downloads",
            endpoint=url,
        )
    assert caught.value.resumable


# ---- where requests go, and what they carry ---------------------------------------------


def test_hf_endpoint_is_honoured_and_no_stored_token_is_sent(
    hub: HFEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = b"small file " * 1000
    sha = hub.add_file("someone/small", "notes.bin", data)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", "hf_from_the_environment")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    (tmp_path / "hf-home").mkdir()
    (tmp_path / "hf-home" / "token").write_text("hf_from_the_cache")

    dest = download_model(
        repo="someone/small",
        file="notes.bin",
        revision="main",
        sha256=sha,
        size=len(data),
        dest=tmp_path / "notes.bin",
        partial_dir=tmp_path / "downloads",
    )

    assert dest.read_bytes() == data
    assert [r.method for r in hub.requests] == ["HEAD", "GET"]
    assert [r.authorization for r in hub.requests] == [None, None]


def test_a_given_token_goes_to_the_endpoint_but_not_to_its_cdn(
    hub: HFEndpoint, tmp_path: Path
) -> None:
    data = os.urandom(5000)
    sha = hub.add_file("someone/gated", "w.gguf", data)
    dest = pull(
        hub, tmp_path, repo="someone/gated", file="w.gguf", sha256=sha, size=None, token="hf_mine"
    )

    assert dest.read_bytes() == data
    head, get = hub.requests
    assert (head.host, head.authorization) == (f"127.0.0.1:{hub.port}", "Bearer hf_mine")
    assert (get.host, get.authorization) == (f"localhost:{hub.port}", None)


def test_without_a_sha256_the_hubs_own_checksum_is_checked(hub: HFEndpoint, tmp_path: Path) -> None:
    hub.corrupt_at(10)
    with pytest.raises(DownloadError, match="damaged"):
        pull(hub, tmp_path, sha256=None)


# ---- a mirror that lies ---------------------------------------------------------------------


class LyingMirror:
    """A Hub-like server whose file answers are whatever the test says: `blob(handler)`
    sends the response to each GET of the file's bytes. Counts those GETs."""

    def __init__(self, size: int, sha: str, blob: Any) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        mirror = self
        self.gets = 0

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_HEAD(self) -> None:
                if self.path == "/blob":
                    send(self, 200, b"")
                    return
                self.send_response(302)
                self.send_header("Location", f"http://localhost:{mirror.port}/blob")
                self.send_header("X-Repo-Commit", "0" * 40)
                self.send_header("X-Linked-Size", str(size))
                self.send_header("ETag", f'"{sha}"')
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                mirror.gets += 1
                blob(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> LyingMirror:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def send(handler: Any, status: int, body: bytes, **headers: str) -> None:
    handler.send_response(status)
    for name, value in headers.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def test_a_body_is_stored_as_sent_never_decompressed(tmp_path: Path) -> None:
    # a mirror that gzips despite "identity" (layered gzip can inflate a 64 kB read into
    # gigabytes in memory): its bytes are stored as they came, and the checksum decides
    import gzip

    raw = gzip.compress(b"\0" * (4 * MB))
    sha = hashlib.sha256(raw).hexdigest()

    def blob(handler: Any) -> None:
        send(handler, 200, raw, Content_Encoding="gzip")

    with LyingMirror(len(raw), sha, blob) as mirror:
        dest = download_model(
            repo="someone/zipped", file="z.gguf", revision="main", sha256=sha, size=None,
            dest=tmp_path / "z.gguf", partial_dir=tmp_path / "downloads",
            endpoint=f"http://127.0.0.1:{mirror.port}",
        )  # fmt: skip
    assert dest.read_bytes() == raw


@pytest.mark.parametrize("answer", ["empty 206", "short 200"])
def test_a_mirror_whose_answers_end_early_gives_up_soon(tmp_path: Path, answer: str) -> None:
    data = os.urandom(4000)
    sha = hashlib.sha256(data).hexdigest()

    def blob(handler: Any) -> None:
        if mirror.gets > 20:  # the loop did not give up: end it, and fail below
            send(handler, 404, b"")
        elif answer == "empty 206" and handler.headers.get("Range"):
            send(handler, 206, b"", Content_Range=f"bytes 1000-1000/{len(data)}")
        else:  # ignores the range, and sends a quarter of what it announced
            send(handler, 200, data[:1000])

    with LyingMirror(len(data), sha, blob) as mirror, pytest.raises(DownloadError) as caught:
        download_model(
            repo="someone/short", file="s.gguf", revision="main", sha256=sha, size=None,
            dest=tmp_path / "s.gguf", partial_dir=tmp_path / "downloads",
            endpoint=f"http://127.0.0.1:{mirror.port}",
        )  # fmt: skip
    assert mirror.gets <= 5
    assert caught.value.resumable
    assert not (tmp_path / "s.gguf").exists()


@pytest.mark.parametrize("announced", [0, -5])
def test_a_size_that_cannot_be_a_file_is_refused_plainly(tmp_path: Path, announced: int) -> None:
    refused = pytest.raises(DownloadError, match=rf"says s\.gguf in someone/odd is {announced} ")
    mirror = LyingMirror(announced, "0" * 64, lambda handler: send(handler, 200, b""))
    with mirror, refused:
        download_model(
            repo="someone/odd", file="s.gguf", revision="main", sha256=None, size=None,
            dest=tmp_path / "s.gguf", partial_dir=tmp_path / "downloads",
            endpoint=f"http://127.0.0.1:{mirror.port}",
        )  # fmt: skip
    assert mirror.gets == 0
    assert not (tmp_path / "s.gguf").exists()


def test_another_file_already_at_the_destination_is_not_taken_for_the_one_asked(
    hub: HFEndpoint, tmp_path: Path
) -> None:
    # e.g. a same-named GGUF pulled earlier from another repository: the pinned sha256 decides
    dest = tmp_path / "models" / "smollm.gguf"
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"GGUF from some other repository")
    with pytest.raises(DownloadError, match=r"smollm\.gguf .*is not the .* asked for"):
        pull(hub, tmp_path, size=None)
    assert dest.read_bytes() == b"GGUF from some other repository"
    assert hub.requests == []


def test_the_file_already_at_the_destination_is_used_when_it_matches(
    hub: HFEndpoint, tmp_path: Path
) -> None:
    first = pull(hub, tmp_path)
    assert pull(hub, tmp_path) == first
    assert len(hub.downloads()) == 1


def test_a_second_download_of_the_same_file_is_refused_while_the_first_runs(
    hub: HFEndpoint, tmp_path: Path
) -> None:
    """The window's card, Settings and `deskhand models pull` could start the same file
    at once: both would write into one partial file and ruin it."""
    hub.stall_at(5 * MB)
    first: dict[str, Any] = {}

    def download() -> None:
        try:
            first["path"] = pull(hub, tmp_path)
        except Exception as exc:
            first["error"] = exc

    worker = threading.Thread(target=download)
    worker.start()
    try:
        assert hub.stalled.wait(30), "the first download never got under way"
        with pytest.raises(DownloadError, match="is already being downloaded"):
            pull(hub, tmp_path)
    finally:
        hub.release.set()
        worker.join(60)
    assert "error" not in first, first.get("error")
    assert sha256(first["path"]) == hub.sha256()
