"""Fetching a model file from a Hugging Face endpoint: resumable, verified, cancellable.

huggingface_hub finds the file (the resolve URL, its HEAD with the Hub's redirect rules and
typed errors) and moves the bytes (its shared HTTP client). The byte loop is ours, not
hf_hub_download's: that one keeps partial files in its own cache layout, reads 10 MB at a
time (progress and cancel would only move every 10 MB), sleeps through hidden retries and
puts the file in place before any sha256 check. Here the partial file lives in
`partial_dir`, and `dest` appears only complete and verified, by a rename.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "DownloadCancelled",
    "DownloadError",
    "DownloadProgress",
    "download_model",
    "partial_files",
]

#: Free space kept on top of what the download still needs, so the disk is never filled.
MARGIN = 64 * 2**20
_READ_TIMEOUT = 30.0  # seconds without a byte before the connection counts as dropped
_RETRY_WAITS = (0.25, 1.0)  # waits after attempts that brought no new byte; then give up
_REPORT_EVERY = 0.2  # seconds between progress reports
_REPORT_BYTES = 2**20  # ... or bytes, whichever comes first
_SPEED_WINDOW = 5.0  # seconds of history the speed is measured over
_HASH_CHUNK = 2**20


@dataclass(frozen=True)
class DownloadProgress:
    """How far a download is: bytes on disk, the file's size, recent speed, time left."""

    done: int
    total: int
    bytes_per_s: float
    eta_s: float | None


class DownloadError(Exception):
    """A download failed; the message is plain words. `resumable`: pulling again continues."""

    def __init__(self, message: str, *, resumable: bool = False) -> None:
        super().__init__(message)
        self.resumable = resumable


class DownloadCancelled(DownloadError):
    """The user stopped the download; the partial file is kept for a later resume."""

    def __init__(self, file: str) -> None:
        super().__init__(
            f"The download of {file} was cancelled; pulling it again resumes it.", resumable=True
        )


@dataclass(frozen=True)
class _Remote:
    """What the endpoint said about the file: where its bytes are and what they should be."""

    location: str
    headers: dict[str, str]
    size: int
    etag: str | None


def partial_files(dest: Path, partial_dir: Path) -> list[Path]:
    """The partial downloads of `dest` in `partial_dir` (so removing a model removes them)."""
    if not partial_dir.is_dir():
        return []
    return sorted(partial_dir.glob(f"{_glob_escape(dest.name)}.*.part"))


def download_model(
    *,
    repo: str,
    file: str,
    revision: str,
    sha256: str | None,
    size: int | None,
    dest: Path,
    partial_dir: Path,
    endpoint: str | None = None,
    progress: Callable[[DownloadProgress], None] | None = None,
    cancel: threading.Event | None = None,
    token: str | None = None,
) -> Path:
    """Download `file` of `repo` at `revision` to `dest`, resuming any partial download.

    `endpoint` None means $HF_ENDPOINT, else huggingface_hub's default. Only `token` is ever
    sent as credentials (never one from the environment or the Hugging Face cache).
    Raises DownloadError (DownloadCancelled when `cancel` is set).
    """
    if dest.is_file():  # it only appears there verified, but maybe for another repository
        _check_existing(dest, sha256, size, file)
        return dest
    cancel = cancel or threading.Event()
    base = _endpoint(endpoint)
    remote = _find(repo, file, revision, base, token)
    if size is not None and size != remote.size:
        raise DownloadError(
            f"{file} in {repo} is {remote.size} bytes on {_host(base)}, but {size} were "
            "expected: the model list does not match the repository."
        )
    want = (sha256 or _sha_like(remote.etag) or "").lower() or None
    partial_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with _only_download(partial_dir / f"{dest.name}.lock", file):
        if dest.is_file():  # another process finished it meanwhile
            _check_existing(dest, sha256, size, file)
            return dest
        partial = partial_dir / f"{dest.name}.{_tag(want, remote.etag, repo, file, revision)}.part"
        for stale in partial_files(dest, partial_dir):
            if stale != partial:
                stale.unlink(missing_ok=True)
        _check_space(partial, remote.size)
        _fetch(remote, partial, file, progress, cancel)
        if want is not None:
            _verify(partial, want, file, repo)
        _move_into_place(partial, dest)
    return dest


@contextlib.contextmanager
def _only_download(lock_path: Path, file: str) -> Iterator[None]:
    """One download of a file at a time, across processes (the window's card, Settings and
    `deskhand models pull`): a second one would write into the same partial file."""
    from filelock import FileLock, Timeout

    lock = FileLock(lock_path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise DownloadError(
            f"{file} is already being downloaded (in another window or `deskhand models "
            "pull`): wait for that download, or stop it there first"
        ) from None
    try:
        yield
    finally:
        lock.release()


# ---- finding the file ----------------------------------------------------------------


def _endpoint(endpoint: str | None) -> str:
    """The argument, else $HF_ENDPOINT read now (not at import), else the Hub's default."""
    from huggingface_hub import constants

    chosen = endpoint or os.environ.get("HF_ENDPOINT") or constants._HF_DEFAULT_ENDPOINT
    return chosen.rstrip("/")


def _host(url: str) -> str:
    return urlparse(url).netloc or url


def _find(repo: str, file: str, revision: str, base: str, token: str | None) -> _Remote:
    """HEAD the resolve URL; a redirect off the endpoint is a CDN, which never gets the token."""
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import build_hf_headers

    try:
        url = hf_hub_url(repo, file, revision=revision, endpoint=base)
        headers: dict[str, str] = build_hf_headers(token=token or False, library_name="deskhand")
        meta = get_hf_file_metadata(
            url, token=token or False, endpoint=base, timeout=constants.HF_HUB_ETAG_TIMEOUT
        )
    except HFValidationError as exc:
        raise DownloadError(f"{repo!r} is not a valid repository name ({exc}).") from exc
    except Exception as exc:
        raise _plain(exc, repo, file, revision, base) from exc
    if meta.commit_hash is None:
        raise DownloadError(
            f"{base} does not look like a Hugging Face server (it sent no repository commit): "
            "check the download address."
        )
    if meta.size is None:
        raise DownloadError(f"{_host(base)} did not say how big {file} in {repo} is.")
    if meta.size < 1:  # nothing to fetch, or a lie: either way no model
        raise DownloadError(
            f"{_host(base)} says {file} in {repo} is {meta.size} bytes long, which is no model."
        )
    if _origin(meta.location) != _origin(url):
        headers.pop("authorization", None)
    headers["Accept-Encoding"] = "identity"  # sizes and ranges count the file's own bytes
    return _Remote(location=meta.location, headers=headers, size=meta.size, etag=meta.etag)


def _origin(url: str) -> tuple[str, str, int | None]:
    parsed = urlparse(url)
    return parsed.scheme, (parsed.hostname or "").lower(), parsed.port


def _plain(exc: Exception, repo: str, file: str, revision: str, base: str) -> DownloadError:
    """huggingface_hub's and httpx's errors, in words a user can act on."""
    import httpx2
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    host = _host(base)
    status = exc.response.status_code if isinstance(exc, HfHubHTTPError) else None
    if isinstance(exc, GatedRepoError) or (
        status in (401, 403) and not isinstance(exc, RepositoryNotFoundError)
    ):
        return DownloadError(
            f"{repo} is a gated model, which Deskhand cannot download (it would need your "
            f"Hugging Face sign-in): accept its licence at {base}/{repo}, download the file "
            'there, and add it with "Use a model file…" or `deskhand models add`.'
        )
    if isinstance(exc, RepositoryNotFoundError):
        return DownloadError(
            f"There is no repository {repo} on {host} (a private or gated one cannot be "
            "downloaded by Deskhand: download the file yourself and add it)."
        )
    if isinstance(exc, RevisionNotFoundError):
        return DownloadError(f"{repo} on {host} has no revision {revision}.")
    if isinstance(exc, RemoteEntryNotFoundError):
        return DownloadError(f"{repo} on {host} has no file {file} (at revision {revision}).")
    if isinstance(exc, OfflineModeIsEnabled):
        return DownloadError("Downloads are switched off: HF_HUB_OFFLINE is set.")
    if status is not None:
        return DownloadError(
            f"{host} answered {status} for {file} in {repo}; pulling again later may work.",
            resumable=True,
        )
    if isinstance(exc, httpx2.HTTPError | OSError):
        return DownloadError(
            f"Could not reach {host} ({_reason(exc)}): check the network or the download "
            "address, then pull again.",
            resumable=True,
        )
    return DownloadError(f"Downloading {file} from {repo} failed: {_reason(exc)}")


def _reason(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _sha_like(etag: str | None) -> str | None:
    """A large (LFS) file's ETag is its sha256: the check to make when none was given."""
    if etag and len(etag) == 64 and all(c in "0123456789abcdefABCDEF" for c in etag):
        return etag
    return None


def _tag(want: str | None, etag: str | None, repo: str, file: str, revision: str) -> str:
    """Names the partial after the content it is for, so a changed file never resumes it."""
    if want is not None:
        return want[:16]
    key = etag or f"{repo}\0{file}\0{revision}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _check_space(partial: Path, total: int) -> None:
    """Refuse before writing anything when the rest of the file would not fit."""
    have = _size(partial)
    if have > total:
        partial.unlink()
        have = 0
    needed = total - have + MARGIN
    free = shutil.disk_usage(partial.parent).free
    if free < needed:
        raise DownloadError(
            f"Not enough free disk space in {partial.parent}: the download needs "
            f"{_mb(needed)} (including {_mb(MARGIN)} to spare) and {_mb(free)} is free."
        )


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 10**6 else f"{n / 1e3:,.0f} kB"


# ---- moving the bytes ----------------------------------------------------------------


class _Meter:
    """Turns bytes on disk into throttled progress reports with a recent speed and an ETA."""

    def __init__(self, total: int, report: Callable[[DownloadProgress], None] | None) -> None:
        self.total = total
        self._report = report
        self._samples: list[tuple[float, int]] = []
        self._last_time = 0.0
        self._last_done = -1

    def due(self, done: int) -> bool:
        if self._report is None:
            return False
        return (
            done >= self.total
            or time.monotonic() - self._last_time >= _REPORT_EVERY
            or done - self._last_done >= _REPORT_BYTES
        )

    def restart(self) -> None:
        """A new connection: bytes already on disk are not speed."""
        self._samples.clear()

    def tell(self, done: int) -> None:
        if self._report is None:
            return
        now = time.monotonic()
        self._samples.append((now, done))
        while len(self._samples) > 2 and now - self._samples[0][0] > _SPEED_WINDOW:
            self._samples.pop(0)
        first_time, first_done = self._samples[0]
        speed = (done - first_done) / (now - first_time) if now > first_time else 0.0
        eta = (self.total - done) / speed if speed > 0 else None
        self._last_time, self._last_done = now, done
        self._report(DownloadProgress(done, self.total, speed, eta))


def _fetch(
    remote: _Remote,
    partial: Path,
    file: str,
    progress: Callable[[DownloadProgress], None] | None,
    cancel: threading.Event,
) -> None:
    """Fill `partial` up to the file's size, resuming after dropped connections."""
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    meter = _Meter(remote.size, progress)
    fruitless = 0
    while (have := _size(partial)) < remote.size:
        if cancel.is_set():
            raise DownloadCancelled(file)
        meter.restart()
        meter.tell(have)
        failure: Exception | None = None
        try:
            _fetch_once(remote, partial, have, meter, cancel)
        except (httpx2.TransportError, HfHubHTTPError) as exc:
            if cancel.is_set():
                raise DownloadCancelled(file) from exc
            status = exc.response.status_code if isinstance(exc, HfHubHTTPError) else None
            if status == 416:  # the server no longer agrees with what we hold: start afresh
                partial.unlink(missing_ok=True)
            elif status is not None and status < 500 and status not in (408, 429):
                raise DownloadError(
                    f"{_host(remote.location)} answered {status} while sending {file}; "
                    "pulling again may work.",
                    resumable=True,
                ) from exc
            failure = exc
        if _size(partial) > have:
            fruitless = 0
            continue
        fruitless += 1  # a dropped connection, or an answer that ended with no new byte
        if fruitless > len(_RETRY_WAITS):
            why = _reason(failure) if failure else "its answers ended before the file did"
            raise DownloadError(
                f"The connection to {_host(remote.location)} kept dropping while downloading "
                f"{file} ({why}); pulling again resumes it.",
                resumable=True,
            ) from failure
        if cancel.wait(_RETRY_WAITS[fruitless - 1]):
            raise DownloadCancelled(file)
    if progress is not None:
        meter.tell(remote.size)


def _fetch_once(
    remote: _Remote, partial: Path, have: int, meter: _Meter, cancel: threading.Event
) -> None:
    """One GET from `have` on, appended to `partial` as the bytes arrive."""
    import httpx2
    from huggingface_hub.utils import get_session, hf_raise_for_status

    headers = dict(remote.headers)
    if have:
        headers["Range"] = f"bytes={have}-"
    timeout = httpx2.Timeout(_READ_TIMEOUT, connect=10.0)
    with get_session().stream("GET", remote.location, headers=headers, timeout=timeout) as resp:
        hf_raise_for_status(resp)
        if have and resp.status_code != 206:
            have = 0  # the server ignored the range: its whole answer is the file
        with _watch(cancel, resp), _writing(partial, append=have > 0) as out:
            done = have
            for chunk in resp.iter_raw():  # never decoded: a gzip bomb stays small
                if cancel.is_set():
                    return
                out.write(chunk)
                done += len(chunk)
                if done > remote.size:
                    raise DownloadError(
                        f"{_host(remote.location)} sent more than the {remote.size} bytes "
                        "it announced; pulling again starts afresh."
                    )
                if meter.due(done):
                    out.flush()
                    meter.tell(done)


@contextlib.contextmanager
def _writing(partial: Path, *, append: bool) -> Iterator[Any]:
    """The partial file open for writing; a full disk becomes plain words."""
    try:
        with open(partial, "ab" if append else "wb") as out:
            if hasattr(os, "fchmod"):
                os.fchmod(out.fileno(), 0o600)
            yield out
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DownloadError(
                f"The disk is full ({partial.parent}): free some space, then pull again to "
                "resume the download.",
                resumable=True,
            ) from exc
        raise DownloadError(f"Could not write {partial}: {exc.strerror or exc}") from exc


@contextlib.contextmanager
def _watch(cancel: threading.Event, response: httpx2.Response) -> Iterator[None]:
    """Cancel also wakes a read the server is stalling, by shutting the socket down."""
    finished = threading.Event()

    def watch() -> None:
        while not finished.is_set():
            if cancel.wait(0.1):
                stream = response.extensions.get("network_stream")
                sock = stream.get_extra_info("socket") if stream is not None else None
                if isinstance(sock, socket.socket):
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                return

    watcher = threading.Thread(target=watch, name="download-cancel", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        finished.set()
        watcher.join()


# ---- checking and placing the file ---------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_HASH_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _check_existing(dest: Path, sha256: str | None, size: int | None, file: str) -> None:
    """A file already at `dest` stands for `file` only with its size and sha256, if known
    (it is left alone: it may be another model of the same name)."""
    try:
        wrong = (size is not None and _size(dest) != size) or (
            sha256 is not None and _sha256(dest) != sha256.lower()
        )
    except OSError as exc:
        raise DownloadError(f"Could not read {dest}: {exc.strerror or exc}") from exc
    if wrong:
        raise DownloadError(
            f"{dest.name} in {dest.parent} is not the {file} asked for (its size or sha256 "
            "differs): remove that model first, then pull again."
        )


def _verify(partial: Path, want: str, file: str, repo: str) -> None:
    """A file whose sha256 is not the expected one is deleted, never used."""
    got = _sha256(partial)
    if got != want:
        partial.unlink(missing_ok=True)
        raise DownloadError(
            f"{file} from {repo} arrived damaged: its sha256 is {got[:12]}…, expected "
            f"{want[:12]}…. The download was deleted; pulling again fetches it afresh."
        )


def _move_into_place(partial: Path, dest: Path) -> None:
    """Durable, then renamed: `dest` is either absent or the whole verified file."""
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(partial, "rb+") as fh:
        os.fsync(fh.fileno())
    try:
        os.replace(partial, dest)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise DownloadError(f"Could not move the download to {dest}: {exc.strerror}") from exc
        tmp = dest.with_name(f".{dest.name}.tmp")
        try:
            shutil.copyfile(partial, tmp)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        partial.unlink()
    if os.name == "posix":
        dir_fd = os.open(dest.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
