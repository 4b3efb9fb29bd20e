"""The engine: one llama-cpp-python server child process per loaded model.

A model starts on first use (`ensure`) on 127.0.0.1, on a free port, with a bearer token made
for that start, and stops after it has been unused for `idle_seconds` (its memory goes back
to the machine). The token and all settings reach the child in a private config file named
by the CONFIG_FILE environment variable (llama_cpp.server reads it), never on the command
line, which other users can read. The child gets an allow-listed environment, so none of the
parent's API keys, and its output goes to a log file, never to the app's terminal.

Children never outlive the app: stop_all runs at exit, and on Linux each child also gets
PR_SET_PDEATHSIG (SIGKILL) from a dedicated spawner thread that lives as long as the app
(the signal follows the thread that forked, not the process). The child's stdin is a pipe
the app holds open; a launcher that runs the server (`--engine-server`) can end itself when
it reads end-of-file there, which covers macOS and Windows after a hard kill.

Nothing here imports llama_cpp (it would stay in the app's memory): the GPU back-end is
known by the build's library names, and what the child really did by its log.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import platform
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import IO, Any

from app.core.engine.gguf import GgufError, GgufInfo, read_gguf_info
from app.core.engine.memory import MIN_CONTEXT, available_memory, fit_context, gigabytes

PORT_ATTEMPTS = 3
STOP_GRACE_S = 10.0
_PROBE_TIMEOUT_S = 1.0
_PROBE_INTERVAL_S = 0.05
_LOG_TAIL_BYTES = 16384

# What the child may see of the parent's environment (no keys, tokens or proxies).
_ENV_ALLOW = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TEMP",
    "TMP",
    "SYSTEMROOT",
    "SYSTEMDRIVE",
    "WINDIR",
    "COMSPEC",
    "PATHEXT",
    "USERPROFILE",
    "LOCALAPPDATA",
    "APPDATA",
    "PROGRAMDATA",
    "NUMBER_OF_PROCESSORS",
    "PROCESSOR_ARCHITECTURE",
    "LD_LIBRARY_PATH",
    "DYLD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "GGML_VK_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
)


class EngineError(Exception):
    """The engine could not run a model; the message is plain words for the user."""


class _PortTaken(Exception):
    """The child could not listen on its port: another program took it first."""


@dataclass(frozen=True)
class Choice:
    """How a model is run: context, GPU layers (-1 = all), backend and why, in words."""

    n_ctx: int
    gpu_layers: int
    backend: str
    why: str


@dataclass(frozen=True)
class Endpoint:
    """Where a started model answers (OpenAI-compatible) and the token it wants."""

    base_url: str
    api_key: str
    model: str
    choice: Choice


@dataclass(frozen=True)
class Loaded:
    """A running model: its process, its memory now, when it started (epoch seconds)."""

    model_id: str
    pid: int
    rss_bytes: int
    started: float
    choice: Choice


@dataclass
class _Child:
    """One running server process and what the engine knows about it."""

    model_id: str
    path: Path
    embedding: bool
    proc: subprocess.Popen[bytes]
    log_path: Path
    log: IO[bytes]
    endpoint: Endpoint
    started: float
    last_used: float
    stop_reason: str | None = None  # set when the engine itself stops it
    recorded: bool = False  # its exit is in Engine._exits
    ready: bool = False  # it answered; a start that fails is the caller's error, not an exit
    ended: threading.Event = field(default_factory=threading.Event)


def server_command() -> list[str]:
    """The command that runs llama-cpp-python's server (the launcher's, when frozen)."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "--engine-server"]
    return [sys.executable, "-m", "llama_cpp.server"]


def free_port() -> int:
    """A loopback port nothing listens on now (another program may take it before we do)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


#: llama.cpp's GPU back-ends, by the name of the library each build ships
#: (libggml-cuda.so, ggml-vulkan.dll, libggml-metal.dylib…).
_BACKEND_LIBRARIES = (
    ("cuda", "CUDA"),
    ("metal", "Metal"),
    ("vulkan", "Vulkan"),
    ("hip", "ROCm"),
    ("sycl", "SYCL"),
    ("opencl", "OpenCL"),
)
#: What llama.cpp writes once a model is loaded: how many layers went to the GPU.
_OFFLOADED = re.compile(rb"offloaded (\d+)/(\d+) layers to GPU")


@cache
def _gpu_backend() -> str | None:
    """The GPU back-end the installed llama.cpp build has, by its libraries' names, or None
    (CPU only). Importing llama_cpp to ask would cost the app ~31 MiB that never goes back;
    whether a GPU was really used is read from the child's log once the model is loaded."""
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "lib"
    names = [p.name.lower() for p in folder.iterdir()] if folder.is_dir() else []
    for part, backend in _BACKEND_LIBRARIES:
        if any(f"ggml-{part}" in name for name in names):
            return backend
    if sys.platform == "darwin" and platform.machine() == "arm64":
        return "Metal"  # Apple silicon builds have Metal inside libggml
    return None


def _confirmed(choice: Choice, log_path: Path) -> Choice:
    """`choice` as the loaded model shows it: a GPU build that offloaded nothing (no usable
    GPU, a driver missing) says so instead of failing silently."""
    if choice.gpu_layers == 0:
        return choice
    try:
        with log_path.open("rb") as log:
            found = _OFFLOADED.findall(log.read())
    except OSError:
        return choice
    context = choice.why.split("; ", 1)[1] if "; " in choice.why else choice.why
    if not found:
        return replace(choice, why=f"{choice.backend}, layers unknown; {context}")
    done, total = (int(n) for n in found[-1])
    if done == 0:
        return replace(
            choice,
            gpu_layers=0,
            backend="CPU",
            why=f"CPU: the {choice.backend} build found no usable GPU; {context}",
        )
    why = f"{choice.backend}, {done}/{total} layers; {context}"
    return replace(choice, gpu_layers=done, why=why)


def child_environment(config_file: Path) -> dict[str, str]:
    """The child's environment: the allow-listed variables and the config file's path."""
    env = {k: v for k, v in os.environ.items() if k.upper() in _ENV_ALLOW}
    env.update(
        CONFIG_FILE=str(config_file),
        PYTHONUNBUFFERED="1",
        PYTHONIOENCODING="utf-8",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def describe_exit(returncode: int) -> str:
    """An exit status in words: "killed by SIGKILL", "exited with code 1"."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def _log_tail(path: Path) -> list[str]:
    """The last lines of a child's log."""
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - _LOG_TAIL_BYTES))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def _telling_lines(lines: list[str]) -> str:
    """The lines of a log tail that say what went wrong (not traceback frames)."""
    loads = [m.group(1) for ln in lines if (m := re.search(r"error loading model: (.+)", ln))]
    if loads:  # llama.cpp's own reason beats the Python traceback that follows it
        return loads[-1].strip()[:500]
    plain = [ln for ln in lines if not ln.startswith((" ", "\t", "Traceback"))]
    errors = [ln for ln in plain if "error" in ln.lower() or "failed" in ln.lower()]
    chosen = (errors or plain)[-2:]
    return "; ".join(ln.strip() for ln in chosen)[:500]


def _failure(lines: list[str], returncode: int) -> Exception:
    """What a child's death while starting means: unsupported model, port taken, or else."""
    text = "\n".join(lines)
    arch = re.search(r"unknown model architecture: '([^']*)'", text)
    if arch:
        return EngineError(
            f"this model's architecture ({arch.group(1)}) is not supported by the built-in engine"
        )
    if re.search(r"address already in use|errno (98|48|10048)|only one usage", text, re.I):
        return _PortTaken()
    detail = _telling_lines(lines)
    why = describe_exit(returncode)
    return EngineError(
        f"the engine stopped while loading the model ({why})" + (f": {detail}" if detail else "")
    )


class _DeathSignal:
    """PR_SET_PDEATHSIG for children on Linux: resolved in the parent, called after fork."""

    def __init__(self) -> None:
        self._prctl: Callable[..., int] | None = None
        self._parent = os.getpid()
        if sys.platform.startswith("linux"):
            import ctypes

            try:
                self._prctl = ctypes.CDLL(None, use_errno=True).prctl
            except (OSError, AttributeError):
                self._prctl = None

    @property
    def available(self) -> bool:
        return self._prctl is not None

    def __call__(self) -> None:
        """Runs in the child between fork and exec."""
        if self._prctl is None:
            return
        self._prctl(1, int(signal.SIGKILL))  # 1 = PR_SET_PDEATHSIG
        if os.getppid() != self._parent:  # the app died before the call
            os._exit(1)


_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()


def _stop_every_engine() -> None:
    for each in list(_ENGINES):
        each.stop_all()


atexit.register(_stop_every_engine)


class Engine:
    """Starts, watches and stops the server processes; safe to call from any thread."""

    def __init__(
        self,
        *,
        idle_seconds: float = 600,
        command: Callable[[], list[str]] | None = None,
        log_dir: Path | None = None,
        available: Callable[[], int] | None = None,
        ports: Callable[[], int] | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        self._idle_seconds = idle_seconds
        self._command = command or server_command
        self._log_dir = log_dir
        self._available = available or available_memory
        self._ports = ports or free_port
        self._start_timeout = start_timeout
        self._cond = threading.Condition()
        self._children: dict[str, _Child] = {}
        self._starting: set[str] = set()
        self._stopping: dict[str, _Child] = {}  # asked to stop, not yet ended
        self._exits: dict[str, str] = {}
        #: Why a model's process ended when nobody asked it to (a crash, a kill).
        self._crashes: dict[str, str] = {}
        self._run_dir: Path | None = None
        self._spawner: ThreadPoolExecutor | None = None
        self._reaper: threading.Thread | None = None
        self._death_signal: _DeathSignal | None = None
        _ENGINES.add(self)

    # ---- public ----

    @property
    def idle_seconds(self) -> float:
        """How long a model may go unused before its process is stopped."""
        return self._idle_seconds

    @idle_seconds.setter
    def idle_seconds(self, seconds: float) -> None:
        with self._cond:
            self._idle_seconds = seconds
            self._cond.notify_all()  # the idle timer re-reads it

    def ensure(self, model_id: str, path: Path, *, embedding: bool = False) -> Endpoint:
        """The running model's endpoint, starting it first when needed (blocks while it loads)."""
        old: _Child | None = None
        with self._cond:
            while model_id in self._starting or model_id in self._stopping:
                self._cond.wait()
            child = self._children.get(model_id)
            if child is not None and child.proc.poll() is not None:
                self._record_exit(child)  # died; its watcher has not noted it yet
                child = None
            if child is not None:
                if child.path == Path(path) and child.embedding == embedding:
                    child.last_used = time.monotonic()
                    return child.endpoint
                old = self._detach(child, "stopped to load it again with other settings")
            self._starting.add(model_id)
        started: _Child | None = None
        try:
            if old is not None:
                self._terminate(old)
            started = self._start(model_id, Path(path), embedding)
            return started.endpoint
        finally:
            with self._cond:
                self._starting.discard(model_id)
                if started is not None:
                    self._children[model_id] = started
                    self._exits.pop(model_id, None)
                    self._crashes.pop(model_id, None)
                self._cond.notify_all()
            if started is not None:
                self._ensure_reaper()

    def running(self, model_id: str, path: Path, *, embedding: bool = False) -> Endpoint | None:
        """The endpoint of the model if it runs now as asked (its idle time starts again),
        else None: `ensure`'s answer without blocking, for the common case."""
        with self._cond:
            child = self._children.get(model_id)
            if (
                child is None
                or not child.ready
                or child.proc.poll() is not None
                or child.path != Path(path)
                or child.embedding != embedding
            ):
                return None
            child.last_used = time.monotonic()
            self._cond.notify_all()
            return child.endpoint

    def touch(self, model_id: str) -> None:
        """The model is in use: its idle time starts again."""
        with self._cond:
            child = self._children.get(model_id)
            if child is not None:
                child.last_used = time.monotonic()
                self._cond.notify_all()

    def stop(self, model_id: str) -> None:
        """Stop a model's process (if running) and wait until it has gone."""
        with self._cond:
            child = self._children.get(model_id)
            if child is not None:
                self._detach(child, "stopped on request")
        if child is not None:
            self._terminate(child)

    def stop_all(self) -> None:
        """Stop every process (the app is quitting)."""
        with self._cond:
            children = list(self._children.values())
            for child in children:
                self._detach(child, "stopped when Deskhand quit")
        for child in children:
            self._terminate(child)
        self._remove_private_dir()

    def loaded(self) -> list[Loaded]:
        """The models running now."""
        with self._cond:
            children = [c for c in self._children.values() if c.proc.poll() is None]
        return [
            Loaded(c.model_id, c.proc.pid, _rss(c.proc.pid), c.started, c.endpoint.choice)
            for c in children
        ]

    def last_exit(self, model_id: str) -> str | None:
        """Why the model's last process ended, in plain words (None: running or never ran)."""
        with self._cond:
            child = self._children.get(model_id)
            if child is not None and child.proc.poll() is not None:
                self._record_exit(child)
            return self._exits.get(model_id)

    def crashed(self, model_id: str) -> str | None:
        """Why the model's last process ended when nobody stopped it (died, killed), or
        None: what the user is told, where a stop on request or when idle is not news."""
        self.last_exit(model_id)  # notes an end its watcher has not noted yet
        with self._cond:
            return self._crashes.get(model_id)

    def wait_stopped(self, model_id: str, timeout: float) -> bool:
        """Wait until the model is not running (idle stop, crash); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                child = self._children.get(model_id) or self._stopping.get(model_id)
                if child is None:
                    return True
                if child.proc.poll() is not None:
                    self._record_exit(child)
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 1.0))

    # ---- starting ----

    def _start(self, model_id: str, path: Path, embedding: bool) -> _Child:
        """Check the file and memory, then start the server, retrying when a port was taken."""
        try:
            info = read_gguf_info(path)
        except GgufError as exc:
            raise EngineError(str(exc)) from exc
        choice = self._choose(info)
        for _attempt in range(PORT_ATTEMPTS):
            try:
                return self._start_once(model_id, path, embedding, choice)
            except _PortTaken:
                continue
        raise EngineError(
            f"no free port to run the model on ({PORT_ATTEMPTS} ports were taken by other "
            "programs while it started)"
        )

    def _choose(self, info: GgufInfo) -> Choice:
        """Context and GPU offload for this model on this machine, or EngineError (too large)."""
        free = self._available()
        label = info.name or info.path.name
        if free <= 0:  # unknown: do not refuse, use the default
            fit_ctx = fit_context(info, available=1 << 62).n_ctx or MIN_CONTEXT
            room = "free memory unknown"
        else:
            fit = fit_context(info, available=free)
            if fit.n_ctx is None:
                raise EngineError(
                    f"{label} needs {gigabytes(fit.needed)} of memory, and "
                    f"{gigabytes(free)} is free (with the smallest context, "
                    f"{MIN_CONTEXT:,} tokens); close other programs or choose a smaller model"
                )
            fit_ctx = fit.n_ctx
            room = f"fits in {gigabytes(free)} free"
        backend = _gpu_backend()
        if backend is None:
            return Choice(fit_ctx, 0, "CPU", f"CPU; context {fit_ctx:,} tokens {room}")
        return Choice(
            fit_ctx, -1, backend, f"{backend}, all layers; context {fit_ctx:,} tokens {room}"
        )

    def _start_once(self, model_id: str, path: Path, embedding: bool, choice: Choice) -> _Child:
        """One start on one port: spawn, wait until it answers, or raise why not."""
        port = self._ports()
        token = secrets.token_urlsafe(32)
        config = self._write_config(model_id, path, embedding, choice, port, token)
        try:
            log_path = self._log_path(model_id)
            fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError as exc:
            config.unlink(missing_ok=True)  # it holds the token
            raise EngineError(f"the engine's log cannot be written: {exc.strerror or exc}") from exc
        with contextlib.suppress(OSError, AttributeError):  # an older log kept its mode
            os.fchmod(fd, 0o600)
        log = os.fdopen(fd, "wb")
        try:
            proc = self._spawn(config, log)
        except (OSError, subprocess.SubprocessError) as exc:
            log.close()
            config.unlink(missing_ok=True)
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise EngineError(f"the engine could not be started: {why}") from exc
        now = time.monotonic()
        endpoint = Endpoint(f"http://127.0.0.1:{port}/v1", token, model_id, choice)
        child = _Child(model_id, path, embedding, proc, log_path, log, endpoint, time.time(), now)
        threading.Thread(
            target=self._watch, args=(child,), name=f"engine-watch-{model_id}", daemon=True
        ).start()
        try:
            self._wait_ready(child)
        except BaseException:
            self._terminate(child)
            raise
        finally:
            config.unlink(missing_ok=True)
        choice = _confirmed(choice, log_path)
        with self._cond:
            child.endpoint = replace(child.endpoint, choice=choice)
            child.ready = True
            child.last_used = time.monotonic()
        return child

    def _write_config(
        self, model_id: str, path: Path, embedding: bool, choice: Choice, port: int, token: str
    ) -> Path:
        """The child's settings, token included, in a file only this user can read."""
        model = {
            "model": str(path),
            "model_alias": model_id,
            "n_ctx": choice.n_ctx,
            "n_gpu_layers": choice.gpu_layers,
            "embedding": embedding,
            "verbose": True,  # llama.cpp's load errors (e.g. unknown architecture) need it
        }
        settings = {"host": "127.0.0.1", "port": port, "api_key": token, "models": [model]}
        config = self._private_dir() / f"{secrets.token_hex(8)}.json"
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(settings, fh)
        return config

    def _private_dir(self) -> Path:
        """A folder only this user can read, for config files (and logs when none is given)."""
        with self._cond:
            if self._run_dir is None or not self._run_dir.is_dir():
                self._run_dir = Path(tempfile.mkdtemp(prefix="deskhand-engine-"))
            return self._run_dir

    def _remove_private_dir(self) -> None:
        """Remove the config folder (and the logs in it when no log folder was given)."""
        with self._cond:
            run_dir, self._run_dir = self._run_dir, None
        if run_dir is not None:
            shutil.rmtree(run_dir, ignore_errors=True)

    def _log_path(self, model_id: str) -> Path:
        folder = self._log_dir or self._private_dir()
        folder.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id)[:80] or "model"
        return folder / f"engine-{safe}.log"

    def _spawn(self, config: Path, log: IO[bytes]) -> subprocess.Popen[bytes]:
        """Start the child on the spawner thread (so Linux's death signal follows the app)."""
        with self._cond:
            if self._spawner is None:
                self._spawner = ThreadPoolExecutor(1, thread_name_prefix="engine-spawn")
                self._death_signal = _DeathSignal()
            spawner, death = self._spawner, self._death_signal
        return spawner.submit(self._popen, config, log, death).result()

    def _popen(
        self, config: Path, log: IO[bytes], death: _DeathSignal | None
    ) -> subprocess.Popen[bytes]:
        apart: dict[str, Any]  # the terminal's Ctrl-C is the app's, not the child's
        if sys.platform == "win32":
            flags = subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.CREATE_NO_WINDOW
            apart = {"creationflags": flags}
        else:
            dies_with_us = death if death is not None and death.available else None
            apart = {"start_new_session": True, "preexec_fn": dies_with_us}
        return subprocess.Popen(
            self._command(),
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_environment(config),
            **apart,
        )

    def _wait_ready(self, child: _Child) -> None:
        """Until GET /models answers 200 with the token; the child's death ends it at once."""
        deadline = time.monotonic() + self._start_timeout
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        request = urllib.request.Request(
            f"{child.endpoint.base_url}/models",
            headers={"Authorization": f"Bearer {child.endpoint.api_key}"},
        )
        while True:
            if child.ended.is_set() or child.proc.poll() is not None:
                child.proc.wait()
                raise _failure(_log_tail(child.log_path), child.proc.returncode)
            # Only once our child says it listens: until then the port may be another
            # program's, which must not get the token.
            if _listening(child.log_path, child.endpoint.base_url) and _answers(
                opener, request, child.model_id
            ):
                return
            if time.monotonic() > deadline:
                raise EngineError(
                    f"the engine did not answer within {self._start_timeout:g} seconds of starting"
                )
            child.ended.wait(_PROBE_INTERVAL_S)

    # ---- watching and stopping ----

    def _watch(self, child: _Child) -> None:
        """Waits for the process to end, then records why (crash or our stop)."""
        child.proc.wait()
        child.log.close()
        with self._cond:
            self._record_exit(child)
            child.ended.set()
            self._cond.notify_all()

    def _record_exit(self, child: _Child) -> None:
        """Note why a process ended and forget it (caller holds the lock)."""
        if self._children.get(child.model_id) is child:
            del self._children[child.model_id]
        if self._stopping.get(child.model_id) is child:
            del self._stopping[child.model_id]
        if child.recorded or not child.ready:
            return
        child.recorded = True
        if child.stop_reason is not None:
            self._exits[child.model_id] = child.stop_reason
            self._crashes.pop(child.model_id, None)
            return
        why = describe_exit(child.proc.returncode)
        verb = "was " if why.startswith("killed") else ""
        detail = _telling_lines(_log_tail(child.log_path))
        self._exits[child.model_id] = self._crashes[child.model_id] = f"the engine {verb}{why}" + (
            f"; its log ends: {detail}" if detail else ""
        )

    def _detach(self, child: _Child, reason: str) -> _Child:
        """Take a child out of use before stopping it (caller holds the lock)."""
        if self._children.get(child.model_id) is child:
            del self._children[child.model_id]
        child.stop_reason = reason
        self._stopping[child.model_id] = child
        self._cond.notify_all()
        return child

    def _terminate(self, child: _Child) -> None:
        """Ask the process to end, then kill it after a grace period; wait until it has."""
        if child.proc.poll() is None:
            try:
                child.proc.terminate()
                child.proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                child.proc.kill()
                child.proc.wait()
            except OSError:  # already gone
                pass
        if child.proc.stdin is not None:
            child.proc.stdin.close()
        child.ended.wait(STOP_GRACE_S)

    def _ensure_reaper(self) -> None:
        with self._cond:
            if self._reaper is None or not self._reaper.is_alive():
                self._reaper = threading.Thread(target=self._reap, name="engine-idle", daemon=True)
                self._reaper.start()

    def _reap(self) -> None:
        """Stops models unused for idle_seconds; sleeps on the condition until the next is due."""
        while True:
            with self._cond:
                due = self._idle_children()
                while not due:
                    if not self._children:
                        self._reaper = None
                        return
                    self._cond.wait(self._until_next_idle())
                    due = self._idle_children()
                for child in due:
                    self._detach(child, f"stopped after {_duration(self.idle_seconds)} unused")
            for child in due:
                self._terminate(child)

    def _idle_children(self) -> list[_Child]:
        now = time.monotonic()
        return [c for c in self._children.values() if now - c.last_used >= self.idle_seconds]

    def _until_next_idle(self) -> float:
        now = time.monotonic()
        nxt = min(c.last_used + self.idle_seconds for c in self._children.values())
        return max(nxt - now, 0.01)


def _listening(log_path: Path, base_url: str) -> bool:
    """Whether the child's own log (0600, written by it alone) says it listens at
    `base_url`'s address: uvicorn's "Uvicorn running on http://127.0.0.1:PORT"."""
    address = base_url.removesuffix("/v1").encode()
    try:
        with log_path.open("rb") as log:
            return b"Uvicorn running on " + address in log.read()
    except OSError:
        return False


def _answers(
    opener: urllib.request.OpenerDirector, request: urllib.request.Request, alias: str
) -> bool:
    """Whether our server answers: 200 and it serves our model (not another program)."""
    try:
        with opener.open(request, timeout=_PROBE_TIMEOUT_S) as response:
            if response.status != 200:
                return False
            body = json.loads(response.read() or b"{}")
    except (OSError, ValueError):
        return False
    models = body.get("data") if isinstance(body, dict) else None
    return isinstance(models, list) and any(
        isinstance(m, dict) and m.get("id") == alias for m in models
    )


def _duration(seconds: float) -> str:
    if seconds >= 120:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds:g} seconds"


def _rss(pid: int) -> int:
    """Resident memory of a process in bytes (0 when the platform does not tell)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if sys.platform == "win32" or sys.platform.startswith("linux"):
        return 0
    try:
        out = subprocess.run(
            ["ps", "-o", "rss=", "-p", str(pid)], capture_output=True, text=True, timeout=5
        ).stdout
        return int(out.strip() or 0) * 1024
    except (OSError, ValueError, subprocess.SubprocessError):
        return 0


_engine: Engine | None = None
_engine_lock = threading.Lock()


def engine() -> Engine:
    """The process-wide engine."""
    global _engine
    with _engine_lock:
        if _engine is None:
            _engine = Engine()
        return _engine
