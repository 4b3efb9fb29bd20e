"""Ending a `docker exec` command when the call is stopped or times out.

Docker has no API to kill an exec session: closing the stream leaves the command running.
So Deskhand learns the command's PID inside the container and kills it with another exec:

* when the container has `/bin/sh`, the command is started as
  `sh -c 'echo $$; exec "$@"' sh <command>`: the first output line is its PID (the shell
  replaces itself with the command, so the PID stays), and a second `sh` exec kills that
  process and everything it started (found through /proc);
* without a shell, when the engine runs on this machine, the exec's host PID (from the
  engine) is mapped to its PID inside the container through /proc, after checking that the
  process really belongs to that container, and the image's `kill` program ends it;
* otherwise the result says plainly that the command may still be running.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SHELL = "/bin/sh"
#: Prints the shell's PID, then becomes the command (same PID).
PID_WRAPPER = 'echo "$$"; exec "$@"'
#: Kills process $1 and all its descendants, root first, found through /proc/<pid>/stat
#: (field 4 is the parent; the command name in field 2 may contain spaces and parentheses).
KILL_TREE = r"""
all=" $1 "; grew=1
while [ "$grew" = 1 ]; do
  grew=0
  for f in /proc/[0-9]*/stat; do
    read -r line < "$f" 2>/dev/null || continue
    p=${f#/proc/}; p=${p%/stat}
    set -- ${line##*") "}
    case "$all" in *" $p "*) continue ;; esac
    case "$all" in *" $2 "*) all="$all$p "; grew=1 ;; esac
  done
done
kill -KILL $all 2>/dev/null
exit 0
"""
#: How long to wait for the engine to see the command end after the kill.
CONFIRM_SECONDS = 5.0
#: How long a command stopped right after its start may take to report its PID.
PID_SECONDS = 3.0
_MAX_PID_LINE = 32


def has_shell(api: Any, container_id: str) -> bool:
    """Whether the container has /bin/sh, asked without starting a process (a HEAD on the
    engine's archive endpoint, which only stats the path)."""
    url = api._url("/containers/{0}/archive", container_id)  # docker-py builds versioned URLs
    try:
        response = api.head(url, params={"path": SHELL})
    except Exception:
        return False
    return bool(response.status_code == 200)


def wrap(argv: list[str]) -> list[str]:
    return [SHELL, "-c", PID_WRAPPER, "sh", *argv]


class PidLine:
    """Passes a wrapped exec's output through, minus the first line, which is the PID."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = chunks
        self.pid: int | None = None

    def __iter__(self) -> Iterator[bytes]:
        buffer = b""
        for chunk in self._chunks:
            if self.pid is not None:
                yield chunk
                continue
            buffer += chunk
            line, sep, rest = buffer.partition(b"\n")
            if not sep and len(buffer) < _MAX_PID_LINE:
                continue
            if sep and line.strip().isdigit():
                self.pid = int(line)
                if rest:
                    yield rest
            else:  # the wrapper did not run as expected: show everything, know no PID
                self.pid = 0
                yield buffer
        if self.pid is None and buffer:
            yield buffer


def container_pid(host_pid: int, container_id: str, proc: Path = Path("/proc")) -> int | None:
    """The PID inside the container of host process `host_pid`, when this machine runs the
    engine and that process belongs to `container_id`; None otherwise (a remote engine's
    PIDs mean nothing here, and a reused PID must not be mistaken for the command)."""
    if host_pid <= 0:
        return None
    try:
        cgroup = (proc / str(host_pid) / "cgroup").read_text()
        status = (proc / str(host_pid) / "status").read_text()
    except OSError:
        return None
    if container_id not in cgroup:
        return None
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            ids = line.split()[1:]
            return int(ids[-1]) if ids and ids[-1].isdigit() else None
    return None


@dataclass
class ExecStopper:
    """Ends one running exec session's command; `report` says what happened, in plain words."""

    api: Any
    container_id: str
    container_name: str
    exec_id: str
    user: str
    pid_line: PidLine | None = None
    report: str = ""
    stopped: bool = False
    _done: bool = field(default=False, repr=False)

    def stop(self) -> None:
        if self._done:
            return
        self._done = True
        if not self._running():
            self.stopped, self.report = True, "the command had already ended"
            return
        how = self._kill()
        if how is None:
            self.report = (
                f"the command may still be running in {self.container_name}: Docker cannot "
                "end an exec session, and the container has no shell (and this machine cannot "
                "see its process) to end it"
            )
            return
        if self._ended():
            self.stopped, self.report = True, f"the command was ended in {self.container_name}"
        else:
            self.report = (
                f"the command may still be running in {self.container_name}: Docker cannot "
                f"end an exec session, and {how} did not end it"
            )

    def _kill(self) -> str | None:
        pid = self._pid()
        if pid:
            self._run([SHELL, "-c", KILL_TREE, "sh", str(pid)])
            return f"killing process {pid} and its children"
        host_pid = int(self._inspect().get("Pid") or 0)
        inner = container_pid(host_pid, self.container_id)
        if inner is None:
            return None
        self._run(["kill", "-KILL", str(inner)])
        return f"`kill` on process {inner}"

    def _pid(self) -> int | None:
        """The wrapped command's PID; a call stopped right after its start waits briefly
        for the line the reader thread is about to see."""
        if self.pid_line is None:
            return None
        deadline = time.monotonic() + PID_SECONDS
        while self.pid_line.pid is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.pid_line.pid

    def _run(self, argv: list[str]) -> None:
        """Starts a helper command in the container, detached: what counts is the command's
        end, awaited for CONFIRM_SECONDS, so a helper that hangs cannot hang the call."""
        with contextlib.suppress(Exception):  # a missing program shows as "still running"
            helper = self.api.exec_create(
                self.container_id, argv, stdout=False, stderr=False, user=self.user
            )["Id"]
            self.api.exec_start(helper, detach=True)

    def _inspect(self) -> dict[str, Any]:
        try:
            details: dict[str, Any] = self.api.exec_inspect(self.exec_id)
        except Exception:
            return {}
        return details

    def _running(self) -> bool:
        return bool(self._inspect().get("Running", False))

    def _ended(self) -> bool:
        deadline = time.monotonic() + CONFIRM_SECONDS
        while time.monotonic() < deadline:  # the engine notices the exit asynchronously
            if not self._running():
                return True
            time.sleep(0.05)
        return False
