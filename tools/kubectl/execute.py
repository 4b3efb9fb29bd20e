"""kubectl_exec: run a command in a container over the API server's exec websocket."""

from __future__ import annotations

import re
import shlex
import time
from typing import Any

from tools.kubectl.cluster import Cluster, connect
from tools.kubectl.common import find_pod, keep_tail, result
from tools.kubectl.errors import Attempt, api_error, unreachable
from tools.kubectl.manifest import Exec
from tools.spec import ToolContext, ToolError, ToolResult

_HANDSHAKE = re.compile(r"Handshake status (\d{3})")


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


def _open(cluster: Cluster, namespace: str, pod: str, args: Exec) -> Any:
    from kubernetes import client as k8s
    from kubernetes.client.rest import ApiException
    from kubernetes.stream import stream

    # stream() swaps the request method of the ApiClient it is given: use a private one so
    # other calls on the shared, cached client are not affected.
    private = k8s.ApiClient(configuration=cluster.client.configuration)
    attempt = Attempt("create", "pods/exec", namespace, pod)
    try:
        return stream(
            k8s.CoreV1Api(private).connect_get_namespaced_pod_exec,
            pod,
            namespace,
            command=args.command,
            container=args.container,
            stderr=True,
            stdin=False,
            stdout=True,
            tty=False,
            _preload_content=False,
        )
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
    session = _open(cluster, ns, name, args)
    stdout, stderr = [], []
    deadline = time.monotonic() + args.timeout_seconds
    timed_out = False
    try:
        while session.is_open():
            session.update(timeout=0.5)
            stdout.append(session.read_stdout())
            stderr.append(session.read_stderr())
            if ctx.cancelled or time.monotonic() > deadline:
                timed_out = not ctx.cancelled
                break
        ctx.check_cancelled()
        stdout.append(session.read_stdout())
        stderr.append(session.read_stderr())
        code = None if timed_out else session.returncode
    finally:
        session.close()
    out, err = "".join(stdout), "".join(stderr)
    command = shlex.join(args.command)
    parts = [f"$ {command}   (pod {name}, container {container})"]
    if out:
        parts.append(keep_tail(out.rstrip("\n"), 20_000))
    if err:
        parts.append("[stderr]\n" + keep_tail(err.rstrip("\n"), 6_000))
    if timed_out:
        parts.append(f"[stopped waiting after {args.timeout_seconds}s; the command may still run]")
    else:
        parts.append(f"[exit code {code}]")
    data = {
        "pod": name,
        "container": container,
        "command": args.command,
        "exit_code": code,
        "stdout": keep_tail(out, 20_000),
        "stderr": keep_tail(err, 6_000),
        "timed_out": timed_out,
    }
    res = result(cluster, "\n".join(parts), data, ns)
    res.ok = code == 0
    if not res.ok:
        res.error = "timed out" if timed_out else f"the command exited with code {code}"
    return res
