"""Running commands for real: in a pseudo-terminal, in their own session, with output streamed
and capped, and ending the whole process tree on timeout, Stop or quit — no orphans.

Every command gets a fresh marker variable (`MARKER_ENV`); its descendants inherit it. Ending
a command: SIGTERM (and SIGCONT) to its process group and to every process carrying its
marker, a short grace, then SIGKILL to all of them, repeated until none is left (a process
that forks while dying is caught by the next round). The marker finds descendants that
left the group (`setsid`, `nohup … &` in a new session) on Linux (/proc); a process that
both leaves the session and clears its environment is out of reach. Until a command is
reaped its root stays a zombie, so its process-group id cannot be reused by a stranger.

`run` (one command, waits for it): stdout and stderr are the terminal (programs see a tty:
colours, progress, line buffering); stdin is `stdin_text` then end-of-file, and there is
no controlling terminal, so a prompt (`read`, ssh/sudo passwords) fails at once instead of
waiting for the timeout. Stragglers left in its tree when it ends are ended too.
`Background` (dev servers and REPLs): the terminal is also stdin and the controlling
terminal (`send("\\x03")` interrupts), echo off. Kept processes survive `stop_all`: their
terminal is handed to a detached `cat` that drains it, so they never see a hang-up.

Windows: no pty; pipes, a new process group, `taskkill /T /F` for the tree.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import os
import queue
import re
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tools.redact import Redactor, reach
from tools.shell.environment import MARKER_ENV

WINDOWS = sys.platform == "win32"
PROC = Path("/proc")
#: The terminal's size as the command sees it (rows, columns).
TERMINAL_SIZE = (40, 120)
#: How often waiting loops look at cancel, timeout and exit.
POLL = 0.05
#: How long reading goes on after a command ended (output still in the terminal).
DRAIN = 1.0
#: Unread output a background command keeps (the oldest goes first).
BACKGROUND_BUFFER = 1_000_000
#: How long `send` waits for a command that does not read its input.
SEND_TIMEOUT = 5.0
_KILL_ROUNDS = 40


# ---- plain text for the model ---------------------------------------------------------------

_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor, erase
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC: title, hyperlinks
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]"  # two-character and charset sequences (ESC 7, ESC ( B)
    r"|\x1b"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _visible_line(line: str) -> str:
    """A line as a terminal leaves it: after a carriage return the last write shows
    (progress bars); a backspace removes the character before it."""
    if "\r" in line:
        parts = [part for part in line.split("\r") if part]
        line = parts[-1] if parts else ""
    if "\b" in line:
        kept: list[str] = []
        for char in line:
            if char == "\b":
                if kept:
                    kept.pop()
            else:
                kept.append(char)
        line = "".join(kept)
    return line


def plain(text: str) -> str:
    """Terminal output as plain text: escape sequences (CSI, OSC, DCS…) removed, `\\r\\n` as
    `\\n`, overwritten progress collapsed, other control characters dropped."""
    text = _ESCAPES.sub("", text).replace("\r\n", "\n")
    lines = [_visible_line(line) for line in text.split("\n")]
    return _CONTROL.sub("", "\n".join(lines))


# ---- results --------------------------------------------------------------------------------


@dataclass
class RunResult:
    """How a command ended. `exit_code` is None when a signal ended it (`signal` says which);
    `output` is the terminal's raw text (with escapes; see `plain`)."""

    exit_code: int | None
    output: str
    truncated: bool
    timed_out: bool
    cancelled: bool
    signal: int | None


@dataclass(frozen=True)
class BackgroundInfo:
    id: str
    label: str
    command: str
    cwd: Path
    pid: int
    running: bool
    exit_code: int | None
    started_at: float
    signal: int | None = None
    kept: bool = False


class _OutputCap:
    """The first and the last `limit / 2` bytes of a stream, and how many were left out.

    With a `redactor`, each end keeps `margin` more bytes (the reach of the longest known
    secret) so that the tripwire sees a secret crossing a cut whole: it is masked whole,
    and a piece of one beyond the cut is left out — never half a secret on show."""

    def __init__(self, limit: int, redactor: Redactor | None = None) -> None:
        self.redactor = redactor
        self.margin = 4 * reach(redactor.secrets) if redactor is not None else 0
        self.head_limit = max(limit, 2) // 2
        self.tail_limit = max(limit, 2) - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.head_limit + self.margin - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        over = len(self.tail) - self.tail_limit - self.margin
        if over > 0:
            del self.tail[:over]
            self.dropped += over

    def text(self) -> tuple[str, bool]:
        if not self.dropped:
            return bytes(self.head + self.tail).decode("utf-8", "replace"), False

        def upto(data: bytes) -> str:  # a character cut at the end is left out
            return codecs.getincrementaldecoder("utf-8")("replace").decode(data)

        head = upto(bytes(self.head))
        tail_bytes = _from_char_start(bytes(self.tail))
        tail = tail_bytes.decode("utf-8", "replace")
        if self.redactor is None:
            return f"{head}\n… {self.dropped} bytes left out …\n{tail}", True
        # the ends without their margins, judged with them (see the class)
        head = self.redactor.window(head, 0, len(upto(bytes(self.head[: self.head_limit]))))
        lead = max(len(tail_bytes) - self.tail_limit, 0)
        tail = self.redactor.window(tail, len(upto(tail_bytes[:lead])))
        return f"{head}\n… about {self.dropped + 2 * self.margin} bytes left out …\n{tail}", True


def _from_char_start(data: bytes) -> bytes:
    """`data` without the continuation bytes of a UTF-8 character cut at its start."""
    start = 0
    while start < min(len(data), 3) and 0x80 <= data[start] < 0xC0:
        start += 1
    return data[start:]


def _code_and_signal(returncode: int | None) -> tuple[int | None, int | None]:
    if returncode is None:
        return None, None
    if returncode < 0:
        return None, -returncode
    return returncode, None


# ---- one started command --------------------------------------------------------------------


class _PosixChild:
    """A command in its own session, writing to a pseudo-terminal."""

    def __init__(
        self,
        argv: Sequence[str],
        cwd: Path,
        env: Mapping[str, str],
        *,
        interactive: bool,
        stdin_text: str | None,
    ) -> None:
        self.marker = uuid.uuid4().hex
        self.reaped = False
        self._reap_lock = threading.Lock()
        self.master, slave = os.openpty()
        try:
            _configure_terminal(slave)
            stdin: int = slave if interactive else subprocess.DEVNULL
            if not interactive and stdin_text is not None:
                stdin = subprocess.PIPE
            self.proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env={**env, MARKER_ENV: self.marker},
                stdin=stdin,
                stdout=slave,
                stderr=slave,
                start_new_session=True,
                # Between fork and exec: signals as a terminal gives them, and (one ioctl)
                # the controlling terminal, which has no other way without a helper program.
                preexec_fn=_interactive_child if interactive else _default_signals,
            )
        except BaseException:
            os.close(self.master)
            raise
        finally:
            os.close(slave)
        self.pid = self.proc.pid
        os.set_blocking(self.master, False)
        if self.proc.stdin is not None:
            threading.Thread(
                target=_feed, args=(self.proc.stdin, stdin_text or ""), daemon=True
            ).start()

    def read(self, timeout: float) -> bytes | None:
        if not _ready(self.master, timeout):
            return b""
        try:
            return os.read(self.master, 65536) or None
        except BlockingIOError:
            return b""
        except OSError as err:  # EIO: every writer closed the terminal (Linux)
            if err.errno == errno.EIO:
                return None
            raise

    def write(self, data: bytes) -> None:
        deadline = time.monotonic() + SEND_TIMEOUT
        while data:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the command is not reading its input")
            if _ready(self.master, left, write=True):
                with contextlib.suppress(BlockingIOError):
                    data = data[os.write(self.master, data) :]

    def returncode(self) -> int | None:
        if self.reaped or not hasattr(os, "waitid"):
            return self.proc.poll()
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return self.proc.poll()
        if info is None:
            return None
        return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status

    def reap(self) -> int:
        with self._reap_lock:
            code = self.proc.wait()
            self.reaped = True
            return code

    def close(self) -> None:
        if self.master >= 0:
            with contextlib.suppress(OSError):
                os.close(self.master)
            self.master = -1

    def hand_off(self) -> subprocess.Popen[bytes]:
        """Give the terminal to a detached `cat` that drains it, so the command outlives
        Deskhand without a hang-up; this object stops reading."""
        os.set_blocking(self.master, True)
        holder = subprocess.Popen(
            ["cat"],
            stdin=self.master,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
        self.close()
        return holder


def _ready(fd: int, timeout: float, *, write: bool = False) -> bool:
    """Whether `fd` can be read (written) within `timeout` seconds. poll() where it works
    with terminals (not macOS), so descriptors above 1023 are fine."""
    if sys.platform == "darwin" or not hasattr(select, "poll"):
        ready = select.select([] if write else [fd], [fd] if write else [], [], timeout)
        return bool(ready[0] or ready[1])
    poller = select.poll()
    poller.register(fd, select.POLLOUT if write else select.POLLIN)
    return bool(poller.poll(max(timeout, 0.0) * 1000))


def _configure_terminal(fd: int) -> None:
    import fcntl
    import struct
    import termios

    rows, cols = TERMINAL_SIZE
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    attrs = termios.tcgetattr(fd)
    attrs[3] &= ~(termios.ECHO | termios.ECHONL)
    termios.tcsetattr(fd, termios.TCSANOW, attrs)


#: Signals a command gets its default handling of, whatever Deskhand inherited: started in
#: the background of a shell, Deskhand ignores SIGINT and SIGQUIT, and a command that
#: inherited that could not be stopped with Ctrl-C (nor trap it: a shell cannot trap a signal
#: ignored when it started).
CHILD_DEFAULT_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGQUIT", "SIGHUP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGCHLD")
    if hasattr(signal, name)
)


def _default_signals() -> None:
    """In the child, before exec: default signal handling and nothing blocked."""
    for sig in CHILD_DEFAULT_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())


def _interactive_child() -> None:
    """In the child, after setsid: default signals, and stdin's terminal becomes the
    controlling terminal."""
    import fcntl
    import termios

    _default_signals()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _feed(stream: object, text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        stream.write(text.encode())  # type: ignore[attr-defined]
    with contextlib.suppress(OSError, ValueError):
        stream.close()  # type: ignore[attr-defined]


class _WindowsChild:
    """A command in a new process group, writing to a pipe (Windows has no pty here)."""

    def __init__(
        self,
        argv: Sequence[str],
        cwd: Path,
        env: Mapping[str, str],
        *,
        interactive: bool,
        stdin_text: str | None,
    ) -> None:
        self.marker = uuid.uuid4().hex
        piped = interactive or stdin_text is not None
        self.proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env={**env, MARKER_ENV: self.marker},
            stdin=subprocess.PIPE if piped else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0),
        )
        self.pid = self.proc.pid
        self._chunks: queue.Queue[bytes | None] = queue.Queue()
        self._ended = False
        threading.Thread(target=self._pump, daemon=True).start()
        if stdin_text is not None and not interactive:
            threading.Thread(target=_feed, args=(self.proc.stdin, stdin_text), daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with contextlib.suppress(OSError):
            while chunk := os.read(fd, 65536):
                self._chunks.put(chunk)
        self._chunks.put(None)

    def read(self, timeout: float) -> bytes | None:
        if self._ended:
            return None
        try:
            chunk = self._chunks.get(timeout=timeout)
        except queue.Empty:
            return b""
        self._ended = chunk is None
        return chunk

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def returncode(self) -> int | None:
        return self.proc.poll()

    def reap(self) -> int:
        return self.proc.wait()

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()


def _spawn(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    *,
    interactive: bool,
    stdin_text: str | None = None,
) -> _PosixChild | _WindowsChild:
    kind = _WindowsChild if WINDOWS else _PosixChild
    return kind(argv, cwd, env, interactive=interactive, stdin_text=stdin_text)


# ---- ending whole trees ---------------------------------------------------------------------


def _tree_pids(children: Sequence[_PosixChild]) -> set[int]:
    """Live (not zombie) processes in these commands' process groups or carrying their
    markers."""
    groups = {child.pid for child in children if not child.reaped}
    needles = {f"{MARKER_ENV}={child.marker}".encode() for child in children}
    if PROC.is_dir():
        return _scan_proc(groups, needles)
    return _scan_ps(groups)


def _scan_proc(groups: set[int], needles: set[bytes]) -> set[int]:
    found: set[int] = set()
    me = os.getpid()
    for entry in os.scandir(PROC):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            stat = (PROC / entry.name / "stat").read_bytes()
            fields = stat.rsplit(b")", 1)[-1].split()
            if fields[0] in (b"Z", b"X"):
                continue
            if int(fields[2]) in groups:
                found.add(int(entry.name))
                continue
            environ = (PROC / entry.name / "environ").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if needles.intersection(environ.split(b"\0")):
            found.add(int(entry.name))
    return found


def _scan_ps(groups: set[int]) -> set[int]:
    """Without /proc (macOS): the process groups only, from `ps`."""
    try:
        listing = subprocess.run(
            ["ps", "-axo", "pid=,pgid=,stat="], capture_output=True, text=True, timeout=5
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return set()
    found: set[int] = set()
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) < 3 or not (parts[0].isdigit() and parts[1].isdigit()):
            continue
        if int(parts[1]) in groups and not parts[2].startswith("Z"):
            found.add(int(parts[0]))
    return found


def _signal_trees(children: Sequence[_PosixChild], pids: set[int], sig: int) -> None:
    for child in children:
        if not child.reaped:
            with contextlib.suppress(OSError):
                os.killpg(child.pid, sig)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def end_trees(children: Sequence[_PosixChild | _WindowsChild], grace: float) -> None:
    """End every process of these commands: SIGTERM, `grace` seconds, then SIGKILL until
    none is left. Blocking; does not reap the roots."""
    if WINDOWS:
        for child in children:
            subprocess.run(
                ["taskkill", "/T", "/F", "/PID", str(child.pid)], capture_output=True, check=False
            )
        return
    posix = [child for child in children if isinstance(child, _PosixChild)]
    pids = _tree_pids(posix)
    if not pids:
        return
    _signal_trees(posix, pids, signal.SIGTERM)
    _signal_trees(posix, pids, signal.SIGCONT)
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        time.sleep(POLL)
        pids = _tree_pids(posix)
    empty = 0  # a process in the middle of exec shows no environment: look twice
    for _ in range(_KILL_ROUNDS):
        empty = 0 if pids else empty + 1
        if empty == 2:
            return
        _signal_trees(posix, pids, signal.SIGKILL)
        time.sleep(0.01)
        pids = _tree_pids(posix)


# ---- run: one command, waited for -----------------------------------------------------------


def run(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    cancel: threading.Event,
    on_output: Callable[[str], None] | None = None,
    max_output: int = 100_000,
    stdin_text: str | None = None,
    grace: float = 1.0,
    redactor: Redactor | None = None,
) -> RunResult:
    """Run `argv` to its end, the timeout or `cancel`; whatever it started ends with it.
    `on_output` gets the output as it comes (decoded text, in order); the result keeps the
    first and last `max_output / 2` bytes (with a `redactor`, cut only after it masked the
    secrets there). Raises OSError when it cannot start."""
    child = _spawn(argv, cwd, env, interactive=False, stdin_text=stdin_text)
    cap = _OutputCap(max_output, redactor)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def take(data: bytes, final: bool = False) -> None:
        cap.add(data)
        text = decoder.decode(data, final)
        if text and on_output is not None:
            on_output(text)

    ended = False
    try:
        timed_out, cancelled = _follow(child, take, timeout, cancel)
        if not (timed_out or cancelled):
            _drain(child, take, DRAIN / 2, until_quiet=True)
        end_trees([child], grace)
        ended = True
        _drain(child, take, DRAIN, until_quiet=False)
        take(b"", final=True)
    finally:
        if not ended:  # on_output raised: still leave nothing behind
            end_trees([child], 0.0)
        code = child.reap()
        child.close()
    output, truncated = cap.text()
    exit_code, sig = _code_and_signal(code)
    return RunResult(exit_code, output, truncated, timed_out, cancelled, sig)


def _follow(
    child: _PosixChild | _WindowsChild,
    take: Callable[[bytes], None],
    timeout: float,
    cancel: threading.Event,
) -> tuple[bool, bool]:
    """Read until the command ends; (timed out, cancelled)."""
    deadline = time.monotonic() + timeout
    reading = True
    while child.returncode() is None:
        if cancel.is_set():
            return False, True
        if time.monotonic() >= deadline:
            return True, False
        if not reading:
            cancel.wait(POLL)
            continue
        data = child.read(POLL)
        if data is None:
            reading = False
        elif data:
            take(data)
    return False, False


def _drain(
    child: _PosixChild | _WindowsChild,
    take: Callable[[bytes], None],
    limit: float,
    *,
    until_quiet: bool,
) -> None:
    """Read what the terminal still holds, for at most `limit` seconds: until nothing is
    pending (`until_quiet`) or until every writer closed it."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        data = child.read(0.0 if until_quiet else POLL)
        if data is None or (until_quiet and not data):
            return
        if data:
            take(data)


# ---- background commands --------------------------------------------------------------------


class _Job:
    def __init__(
        self, ident: str, child: _PosixChild | _WindowsChild, label: str, command: str, cwd: Path
    ) -> None:
        self.id = ident
        self.child = child
        self.label = label
        self.command = command
        self.cwd = cwd
        self.started_at = time.time()
        self.kept = False
        self.holder: subprocess.Popen[bytes] | None = None
        self.unread = bytearray()
        self.dropped = 0
        self.output_ended = False
        self.changed = threading.Condition()
        self.quit = threading.Event()
        self.reader = threading.Thread(target=self._read, name=f"shell-{ident}", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while not self.quit.is_set():
            data = self.child.read(0.1)
            if data is None:
                break
            if data:
                with self.changed:
                    self.unread += data
                    over = len(self.unread) - BACKGROUND_BUFFER
                    if over > 0:
                        del self.unread[:over]
                        self.dropped += over
                    self.changed.notify_all()
        with self.changed:
            self.output_ended = True
            self.changed.notify_all()

    def stop_reading(self) -> None:
        self.quit.set()
        self.reader.join(timeout=5)

    def info(self) -> BackgroundInfo:
        code, sig = _code_and_signal(self.child.returncode())
        running = code is None and sig is None
        return BackgroundInfo(
            self.id,
            self.label,
            self.command,
            self.cwd,
            self.child.pid,
            running,
            code,
            self.started_at,
            sig,
            self.kept,
        )


class Background:
    """Commands that keep running (dev servers, watchers, REPLs) while the conversation goes
    on. Thread-safe. `stop_all` at quit ends all but the kept ones."""

    def __init__(self) -> None:
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()
        self._count = 0

    def start(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        label: str,
        command: str | None = None,
    ) -> str:
        """Start `argv`; its id. `command` is what lists show (default: argv joined)."""
        child = _spawn(argv, cwd, env, interactive=True)
        with self._lock:
            self._count += 1
            ident = f"bg{self._count}"
            self._jobs[ident] = _Job(ident, child, label, command or shlex.join(argv), cwd)
        return ident

    def _job(self, ident: str) -> _Job:
        with self._lock:
            if ident not in self._jobs:
                raise KeyError(f"no background command {ident!r}")
            return self._jobs[ident]

    def list(self) -> list[BackgroundInfo]:
        with self._lock:
            jobs = list(self._jobs.values())
        return [job.info() for job in jobs]

    def info(self, ident: str) -> BackgroundInfo:
        return self._job(ident).info()

    def read(self, ident: str, max_bytes: int = 60_000, redactor: Redactor | None = None) -> str:
        """The output that came since the last read (raw; see `plain`), at most the newest
        `max_bytes` of it with a note of what was left out. With a `redactor`, text that
        lost its start also loses its first `reach` characters — where the end of a secret
        cut in two could stand — and known secrets are masked."""
        job = self._job(ident)
        with job.changed:
            data, dropped = bytes(job.unread), job.dropped
            job.unread.clear()
            job.dropped = 0
        if len(data) > max_bytes:
            dropped += len(data) - max_bytes
            data = _from_char_start(data[-max_bytes:])
        text = data.decode("utf-8", "replace")
        if redactor is not None:
            text = redactor.window(text, min(reach(redactor.secrets), len(text)) if dropped else 0)
        return f"… {dropped} bytes left out …\n{text}" if dropped else text

    def wait(self, ident: str, timeout: float) -> bool:
        """Wait up to `timeout` seconds for unread output or the end of the output; whether
        there is either."""
        job = self._job(ident)
        with job.changed:
            return bool(job.changed.wait_for(lambda: job.unread or job.output_ended, timeout))

    def send(self, ident: str, text: str) -> None:
        """Type `text` into the command's terminal. ProcessLookupError once it has ended;
        TimeoutError when it does not read its input."""
        job = self._job(ident)
        if job.holder is not None or job.child.returncode() is not None:
            raise ProcessLookupError(f"background command {ident} has ended")
        job.child.write(text.encode())

    def keep(self, ident: str, keep: bool) -> None:
        """Whether the command outlives Deskhand (`stop_all` leaves it running)."""
        self._job(ident).kept = keep

    def stop(self, ident: str, grace: float = 2.0) -> BackgroundInfo:
        """End the command and everything it started; how it ended."""
        job = self._job(ident)
        self._end([job], grace)
        return job.info()

    def stop_all(self, grace: float = 2.0) -> None:
        """At quit: end every command not kept (together, one grace for all); kept ones keep
        running, their terminal drained by a detached `cat`."""
        with self._lock:
            jobs = list(self._jobs.values())
        self._end([job for job in jobs if not job.kept], grace)
        for job in jobs:
            if job.kept and job.holder is None and isinstance(job.child, _PosixChild):
                job.stop_reading()
                job.holder = job.child.hand_off()

    @staticmethod
    def _end(jobs: Sequence[_Job], grace: float) -> None:
        end_trees([job.child for job in jobs], grace)
        for job in jobs:
            job.child.reap()
            job.stop_reading()
            if job.holder is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    job.holder.wait(timeout=DRAIN)
            job.child.close()
