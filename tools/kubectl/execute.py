"""kubectl_exec: run a command in a container over the API server's exec websocket.

Closing an exec stream does not end the command in the container. So the command runs
through the container's shell, which prints its PID first (see tools.docker.exec_stop, the
same technique for Docker), and a cancel or timeout kills that process and its children with
a second exec. Without a shell, the result says plainly that the command may still run."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import time
from dataclasses import dataclass, field
from typing import Any

from websocket import WebSocketException

from tools.docker.exec_stop import KILL_TREE, SHELL, wrap
from tools.kubectl.cluster import Cluster, connect
from tools.kubectl.common import find_pod, keep_tail, result
from tools.kubectl.errors import Attempt, api_error, unreachable
from tools.kubectl.manifest import Exec
from tools.redact import TRIPWIRE
from tools.spec import ToolContext, ToolError, ToolResult

_HANDSHAKE = re.compile(r"Handshake status (\d{3})")
#: The exec protocol's status channel (kubernetes.stream.ws_client.ERROR_CHANNEL).
ERROR_CHANNEL = 3
#: How long ending a command after a cancel or timeout may take.
STOP_SECONDS = 10.0
#: How long a command stopped right after its start may take to report its PID.
PID_SECONDS = 3.0
#: Longest a single read of an exec stream may block (a frame the server never finishes).
READ_SECONDS = 30.0


def _handshake_failure(exc: BaseException) -> tuple[int, str] | None:
    """(HTTP status, body) of a refused websocket upgrade, from the exception text
    `Handshake status 403 Forbidden -+-+- {headers} -+-+- {body}`."""
    text = str(getattr(exc, "reason", None) or exc)
    status = _HANDSHAKE.search(text)
    if status is None:
        return None
    body = text.rsplit("-+-+-", 1)[-1].strip()
    if body.startswith(("b'", 'b"')):
        body = body[2:-1].encode().decode("unicode_escape")
    return int(status.group(1)), body


def _open(cluster: Cluster, namespace: str, pod: str, command: list[str], container: str) -> Any:
    from kubernetes import client as k8s
    from kubernetes.client.rest import ApiException
    from kubernetes.stream import stream

    # stream() swaps the request method of the ApiClient it is given: use a private one so
    # other calls on the shared, cached client are not affected.
    private = k8s.ApiClient(configuration=cluster.client.configuration)
    attempt = Attempt("create", "pods/exec", namespace, pod)
    try:
        session = stream(
            k8s.CoreV1Api(private).connect_get_namespaced_pod_exec,
            pod,
            namespace,
            command=command,
            container=container or None,
            stderr=True,
            stdin=False,
            stdout=True,
            tty=False,
            _preload_content=False,
        )
        session.sock.settimeout(READ_SECONDS)  # no read may wait forever
        return session
    except (ApiException, AttributeError) as exc:
        # The client's error handling itself fails on a refused upgrade (AttributeError on a
        # missing body); the ApiException with the details is then the context.
        cause = exc if isinstance(exc, ApiException) else exc.__context__
        if not isinstance(cause, ApiException):
            raise
        refused = _handshake_failure(cause)
        if refused is not None:
            code, body = refused
            raise api_error(code, body, attempt, cluster.context, cluster.server) from None
        raise unreachable(cluster.server, cluster.context, cause) from None


def _drop(session: Any) -> None:
    """Closes an exec stream without waiting for the server's close reply (the websocket
    default waits 3 s, and a server still running the command may never send it)."""
    with contextlib.suppress(OSError, WebSocketException):
        session.close(timeout=0)


@dataclass
class _Run:
    """One exec session's output so far; with the PID wrapper, its first stdout line (the
    command's PID in the container) is taken out of the output."""

    session: Any
    wrapped: bool
    pid: int | None = None
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    #: The stream failed (reset, a read that timed out): whether the command ended is unknown.
    broken: str = ""
    _head: str = ""

    def pump(self, timeout: float) -> None:
        try:
            self.session.update(timeout=timeout)
            self.take()
        except (OSError, WebSocketException) as exc:
            self.broken = str(exc) or type(exc).__name__
            _drop(self.session)

    def take(self) -> None:
        out = self.session.read_stdout(timeout=0)
        if self.wrapped and self.pid is None and out:
            self._head += out
            line, sep, rest = self._head.partition("\n")
            if not sep:
                return
            self.pid = int(line) if line.strip().isdigit() else 0
            out = rest if self.pid else self._head
        self.stdout.append(out)
        self.stderr.append(self.session.read_stderr(timeout=0))

    @property
    def shell_missing(self) -> bool:
        """The wrapper never printed its PID: the container has no shell, nothing ran."""
        return self.wrapped and not self.pid

    def status(self) -> tuple[int | None, str]:
        """(exit code, message) from the error channel once the session has ended."""
        raw = self.session.read_channel(ERROR_CHANNEL)
        try:
            status = json.loads(raw) if raw else {}
        except ValueError:
            return None, raw
        if status.get("status") == "Success":
            return 0, ""
        for cause in (status.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode" and str(cause.get("message", "")).isdigit():
                return int(cause["message"]), ""
        return None, str(status.get("message", ""))


def _follow(run: _Run, ctx: ToolContext, deadline: float) -> bool:
    """Reads until the command ends (True) or the call is cancelled or out of time (False)."""
    while run.session.is_open():
        run.pump(0.5)
        if run.broken or ctx.cancelled or time.monotonic() > deadline:
            return False
    run.take()
    return True


def _stop(
    cluster: Cluster, ns: str, pod: str, container: str, run: _Run
) -> tuple[bool, str]:
    """Ends the command in the container after a cancel or timeout: Kubernetes does not stop
    it when the exec stream closes. (stopped, what happened in plain words)."""
    where = f"pod {pod}, container {container}"
    settle = time.monotonic() + PID_SECONDS
    while run.wrapped and run.pid is None and run.session.is_open():
        if time.monotonic() > settle:  # stopped right after the start: the PID is on its way
            break
        run.pump(0.1)
    if not run.pid:
        return False, (
            f"the command may still be running in {where}: closing the exec stream does not "
            "end it, and the container has no shell to end it with"
        )
    deadline = time.monotonic() + STOP_SECONDS
    try:
        killer = _open(cluster, ns, pod, [SHELL, "-c", KILL_TREE, "sh", str(run.pid)], container)
    except ToolError as exc:
        return False, f"the command may still be running in {where}: ending it failed ({exc})"
    try:  # the kill script's own end is not awaited: the command's end is what counts
        while run.session.is_open() and not run.broken and time.monotonic() < deadline:
            run.pump(0.2)
            if killer.is_open():
                killer.update(timeout=0)
    except (OSError, WebSocketException):
        pass
    finally:
        _drop(killer)
    if run.broken:
        return False, (
            f"the command may still be running in {where}: the exec stream failed "
            f"({run.broken}), so whether killing process {run.pid} ended it is unknown"
        )
    if run.session.is_open():
        return False, (
            f"the command may still be running in {where}: killing process {run.pid} did not "
            f"end it within {STOP_SECONDS:g} s"
        )
    return True, f"the command was ended in {where}"


def exec_command(args: Exec, ctx: ToolContext) -> ToolResult:
    cluster = connect(ctx, args.context)
    ns, pod = find_pod(cluster, args.pod, args.namespace)
    name = pod["metadata"]["name"]
    containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    if args.container is None and len(containers) > 1:
        raise ToolError(
            f"pod {name} has several containers ({', '.join(containers)}); pass container"
        )
    container = args.container or (containers[0] if containers else "")
    ctx.check_cancelled()
    deadline = time.monotonic() + args.timeout_seconds
    # Through the container's shell the command reports its PID, so that Stop can end it;
    # when the wrapper cannot start (no shell), nothing ran and the command runs as given.
    run = _Run(_open(cluster, ns, name, wrap(args.command), container), wrapped=True)
    try:
        ended = _follow(run, ctx, deadline)
        if ended and run.shell_missing:
            _drop(run.session)
            ctx.check_cancelled()
            run = _Run(_open(cluster, ns, name, args.command, container), wrapped=False)
            ended = _follow(run, ctx, deadline)
        end = _Ending(ended=ended, cancelled=ctx.cancelled)
        if not ended:
            end.stopped, end.report = _stop(cluster, ns, name, container, run)
        if ended or end.stopped:
            end.code, end.message = run.status()
    finally:
        _drop(run.session)
    return _result(cluster, ns, args, (name, container), run, end)


@dataclass
class _Ending:
    ended: bool  # the command finished by itself
    cancelled: bool
    stopped: bool = False  # ended by Deskhand after a cancel or timeout
    report: str = ""
    code: int | None = None
    message: str = ""

    @property
    def error(self) -> str | None:
        if not self.ended:
            why = "cancelled" if self.cancelled else "timed out"
            return why if self.stopped else f"{why}; {self.report}"
        if self.code is None:
            return f"the command could not run: {self.message or 'no exit status'}"
        return None if self.code == 0 else f"the command exited with code {self.code}"


def _result(
    cluster: Cluster, ns: str, args: Exec, where: tuple[str, str], run: _Run, end: _Ending
) -> ToolResult:
    name, container = where
    out, err = "".join(run.stdout), "".join(run.stderr)
    command = shlex.join(TRIPWIRE.command(args.command))
    parts = [f"$ {command}   (pod {name}, container {container})"]
    if out:
        parts.append(keep_tail(out.rstrip("\n"), 20_000))
    if err:
        parts.append("[stderr]\n" + keep_tail(err.rstrip("\n"), 6_000))
    if not end.ended:
        why = "cancelled" if end.cancelled else f"stopped waiting after {args.timeout_seconds}s"
        parts.append(f"[{why}; {end.report}]")
    elif end.code is None:
        parts.append(f"[the command could not run: {end.message or 'no exit status'}]")
    else:
        parts.append(f"[exit code {end.code}]")
    data = {
        "pod": name,
        "container": container,
        "command": TRIPWIRE.command(args.command),
        "exit_code": end.code if end.ended else None,
        "stdout": keep_tail(out, 20_000),
        "stderr": keep_tail(err, 6_000),
        "timed_out": not end.ended and not end.cancelled,
        "cancelled": end.cancelled,
        "stopped": end.stopped,
    }
    res = result(cluster, "\n".join(parts), data, ns)
    res.error = end.error
    res.ok = res.error is None
    return res
