"""Running commands for real (tools/shell/process.py, tools/shell/environment.py): real bash in
a pseudo-terminal, streaming, capping, timeouts, Stop ending whole trees (a child ignoring
SIGTERM, one that left the session with setsid) checked against /proc, the environment
without secrets, background commands, plain text for the model."""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.shell.environment import MARKER_ENV, NON_INTERACTIVE, child_environment
from tools.shell.process import Background, RunResult, plain, run

#: A program that leaves the session (like setsid(1)) and becomes `sleep SECONDS`.
ESCAPE = shlex.join(
    [
        sys.executable,
        "-c",
        "import os, sys; os.setsid(); os.execvp('sleep', ['sleep', sys.argv[1]])",
    ]
)
#: A tree: a plain child, one ignoring SIGTERM, one that left the session; then "ready".
TREE = f"sleep 300 & (trap '' TERM; exec sleep 301) & {ESCAPE} 302 & echo ready; wait"
SECRET = "s3cr3t-value-Zq9"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A small environment with a tag that lets the test find every process it started."""
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TREE_TAG": uuid.uuid4().hex}


def tagged(tag: str) -> list[int]:
    """Live (non-zombie) processes carrying TREE_TAG=tag."""
    needle = f"TREE_TAG={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state = (entry / "stat").read_bytes().rsplit(b")", 1)[-1].split()[0]
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if needle in environ and state not in (b"Z", b"X"):
            found.append(int(entry.name))
    return found


def wait_tagged(tag: str, count: int, timeout: float = 30.0) -> bool:
    """Whether `count` tagged processes are there within `timeout` (a child that just forked
    may still be in the middle of exec, when /proc shows no environment)."""
    deadline = time.monotonic() + timeout
    while len(tagged(tag)) < count:
        if time.monotonic() > deadline:
            return False
    return True


def bash(script: str, env: dict[str, str], cwd: Path, **kw: object) -> RunResult:
    options: dict = {"timeout": 20.0, "cancel": threading.Event(), **kw}
    return run(["bash", "-c", script], cwd=cwd, env=env, **options)


class Seen:
    """Collects streamed output; `wait_for` blocks until a text has appeared."""

    def __init__(self) -> None:
        self.text = ""
        self.chunks: list[str] = []
        self.changed = threading.Condition()

    def __call__(self, chunk: str) -> None:
        with self.changed:
            self.chunks.append(chunk)
            self.text += chunk
            self.changed.notify_all()

    def wait_for(self, text: str, timeout: float = 30.0) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: text in self.text, timeout)


# ---- run ------------------------------------------------------------------------------------


def test_exit_codes_and_signals(env: dict[str, str], tmp_path: Path) -> None:
    assert bash("true", env, tmp_path).exit_code == 0
    failed = bash("echo out; exit 3", env, tmp_path)
    assert (failed.exit_code, failed.signal, plain(failed.output)) == (3, None, "out\n")
    killed = bash("kill -TERM $$", env, tmp_path)
    assert (killed.exit_code, killed.signal) == (None, 15)
    assert not (killed.timed_out or killed.cancelled or killed.truncated)


def test_runs_in_the_folder_on_a_terminal_without_prompts(
    env: dict[str, str], tmp_path: Path
) -> None:
    script = (
        "pwd; test -t 1 && echo out-tty; test -t 2 && echo err-tty; "
        "stty size <&1; read answer; echo read=$?; (: </dev/tty) 2>/dev/null || echo no-tty"
    )
    result = bash(script, env, tmp_path)
    lines = plain(result.output).splitlines()
    assert lines == [str(tmp_path), "out-tty", "err-tty", "40 120", "read=1", "no-tty"]


def test_stdin_text_then_end_of_file(env: dict[str, str], tmp_path: Path) -> None:
    result = bash("cat; echo done", env, tmp_path, stdin_text="one\ntwo\n")
    assert plain(result.output) == "one\ntwo\ndone\n"


def test_output_streams_in_order_while_it_runs(env: dict[str, str], tmp_path: Path) -> None:
    # The command waits for a file the test creates only after seeing "first": without
    # streaming it would run into the timeout.
    flag = tmp_path / "flag"
    seen = Seen()

    def on_output(chunk: str) -> None:
        seen(chunk)
        if "first" in seen.text:
            flag.touch()

    script = (
        f"echo first; while test ! -e {flag}; do sleep 0.01; done; "
        "for i in 1 2 3; do echo n$i; done"
    )
    result = bash(script, env, tmp_path, timeout=60.0, on_output=on_output)
    assert not result.timed_out
    assert plain(seen.text) == "first\nn1\nn2\nn3\n" == plain(result.output)
    assert len(seen.chunks) >= 2


def test_output_is_capped_with_head_tail_and_note(env: dict[str, str], tmp_path: Path) -> None:
    script = "printf START; head -c 100000 /dev/zero | tr '\\0' x; printf END"
    seen = Seen()
    result = bash(script, env, tmp_path, max_output=1000, on_output=seen)
    assert result.truncated and result.exit_code == 0
    head, note, tail = result.output.split("\n")
    assert head == "START" + "x" * 495 and tail == "x" * 497 + "END"
    assert note == "… 99008 bytes left out …"
    assert len(seen.text) == 100008  # the stream itself is complete


def test_timeout_ends_the_whole_tree(env: dict[str, str], tmp_path: Path) -> None:
    started = time.monotonic()
    result = bash(TREE, env, tmp_path, timeout=3.0, grace=0.3)
    assert result.timed_out and not result.cancelled
    assert result.signal is not None and result.exit_code is None
    assert "ready" in result.output
    assert tagged(env["TREE_TAG"]) == []
    assert time.monotonic() - started < 60  # not the tree's `sleep 300`


def test_cancel_ends_the_whole_tree_promptly(env: dict[str, str], tmp_path: Path) -> None:
    cancel = threading.Event()
    seen = Seen()
    done: list[RunResult] = []
    worker = threading.Thread(
        target=lambda: done.append(
            bash(TREE, env, tmp_path, timeout=60.0, cancel=cancel, on_output=seen, grace=0.3)
        )
    )
    worker.start()
    assert seen.wait_for("ready")
    assert wait_tagged(env["TREE_TAG"], 4)  # bash and the three sleeps
    cancel.set()
    worker.join(timeout=60)  # bounds a hang only: the tree sleeps for 300 seconds
    assert not worker.is_alive()
    assert done[0].cancelled and not done[0].timed_out
    assert tagged(env["TREE_TAG"]) == []


def test_stragglers_end_with_the_command(env: dict[str, str], tmp_path: Path) -> None:
    result = bash(f"{ESCAPE} 300 & echo left", env, tmp_path, grace=0.3)
    assert (result.exit_code, plain(result.output)) == (0, "left\n")
    assert tagged(env["TREE_TAG"]) == []


def test_a_missing_program_raises(env: dict[str, str], tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        run(["no-such-program-x"], cwd=tmp_path, env=env, timeout=5, cancel=threading.Event())


# ---- the environment ------------------------------------------------------------------------


def test_environment_without_secrets_with_non_interactive_defaults(
    env: dict[str, str], tmp_path: Path
) -> None:
    base = {
        **env,
        "HARMLESS": "kept",
        "PWD": str(tmp_path),
        "NOTE": f"prefix-{SECRET}",  # a known secret under an innocent name
        "GITHUB_TOKEN": "gho-not-known-but-named",
        "AWS_SECRET_ACCESS_KEY": "named-too",
        "PGPASSWORD": "named-three",
        "DB_PASS": "named-four",
        "SSH_AUTH_SOCK": "/run/agent.sock",
        "DATABASE_URL": "postgres://app:hunter2hunter@db/app",
        "SOME_VALUE": "ghp_" + "a" * 36,
        "DESKHAND_HOME": "/somewhere",
        "DESKHAND_KEYRING_PASSPHRASE": "named-five",
        "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
        "CI": "true",
        "PAGER": "less",
    }
    child = child_environment(base, [SECRET, ""])
    result = bash("env", child, tmp_path)
    seen = dict(line.split("=", 1) for line in plain(result.output).splitlines() if "=" in line)
    gone = {
        "NOTE", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD", "DB_PASS",
        "SSH_AUTH_SOCK", "DATABASE_URL", "SOME_VALUE", "DESKHAND_HOME",
        "DESKHAND_KEYRING_PASSPHRASE", "PYTHON_KEYRING_BACKEND", "CI",
    }  # fmt: skip
    assert not gone & set(seen)
    for value in (SECRET, "named", "hunter2hunter", "ghp_"):
        assert value not in result.output
    assert seen["HARMLESS"] == "kept" and seen["TREE_TAG"] == env["TREE_TAG"]
    for name, value in NON_INTERACTIVE.items():
        assert seen[name] == value
    assert seen["PAGER"] == "cat" and seen["GIT_TERMINAL_PROMPT"] == "0"
    assert len(seen[MARKER_ENV]) == 32


def test_git_does_not_wait_for_an_editor_or_a_pager(env: dict[str, str], tmp_path: Path) -> None:
    child = child_environment({**env, "GIT_CONFIG_NOSYSTEM": "1"}, [])
    script = (
        "git init -q . && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m one "
        "&& git -c user.name=t -c user.email=t@t commit -q --allow-empty; echo commit=$?; "
        "git log --oneline | wc -l"
    )
    result = bash(script, child, tmp_path, timeout=15.0)
    assert not result.timed_out
    lines = plain(result.output).splitlines()
    assert lines[-2:] == ["commit=1", "1"]  # the empty message was refused, nothing waited


# ---- background commands --------------------------------------------------------------------


@pytest.fixture
def background() -> Iterator[Background]:
    processes = Background()
    yield processes
    for info in processes.list():
        processes.stop(info.id, grace=0.2)


def read_until(processes: Background, ident: str, text: str, timeout: float = 30.0) -> str:
    got = ""
    deadline = time.monotonic() + timeout
    while text not in got and time.monotonic() < deadline:
        processes.wait(ident, deadline - time.monotonic())
        got += processes.read(ident, 100_000)
    assert text in got, got
    return got


def test_background_read_send_list_stop(
    background: Background, env: dict[str, str], tmp_path: Path
) -> None:
    ident = background.start(["cat"], cwd=tmp_path, env=env, label="echo")
    (info,) = background.list()
    assert (info.id, info.label, info.command, info.cwd) == (ident, "echo", "cat", tmp_path)
    assert info.running and info.exit_code is None and info.pid > 0
    assert background.read(ident) == ""
    background.send(ident, "hello\n")
    assert plain(read_until(background, ident, "hello")) == "hello\n"  # no echo of input
    background.send(ident, "world\n")
    assert "hello" not in read_until(background, ident, "world")  # only new output
    stopped = background.stop(ident, grace=0.3)
    assert not stopped.running and stopped.signal is not None
    with pytest.raises(ProcessLookupError):
        background.send(ident, "late\n")
    with pytest.raises(KeyError):
        background.read("bg-unknown")


def test_background_has_a_controlling_terminal(
    background: Background, env: dict[str, str], tmp_path: Path
) -> None:
    script = "test -t 0 && echo in-tty; trap 'echo interrupted; exit 7' INT; echo ready; cat"
    ident = background.start(["bash", "-c", script], cwd=tmp_path, env=env, label="tty")
    assert "in-tty" in read_until(background, ident, "ready")
    # `cat` echoing a line shows it is running: a Ctrl-C sent while bash was still forking
    # it could be lost in the child before exec, leaving `cat` waiting for ever.
    background.send(ident, "ping\n")
    read_until(background, ident, "ping")
    background.send(ident, "\x03")  # Ctrl-C through the terminal
    read_until(background, ident, "interrupted")
    exited = os.waitid(os.P_PID, background.info(ident).pid, os.WEXITED | os.WNOWAIT)
    assert exited is not None and exited.si_code == os.CLD_EXITED and exited.si_status == 7
    assert background.info(ident).exit_code == 7


def test_ctrl_c_reaches_a_background_command_when_deskhand_ignores_it(
    background: Background, env: dict[str, str], tmp_path: Path
) -> None:
    """Started in the background of a shell, Deskhand ignores SIGINT (and may have SIGCHLD
    blocked); its commands must not inherit that, or Ctrl-C could never stop them."""
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    try:
        script = "trap 'echo interrupted; exit 7' INT; echo ready; cat"
        ident = background.start(["bash", "-c", script], cwd=tmp_path, env=env, label="ign")
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        signal.signal(signal.SIGINT, ignored)
    read_until(background, ident, "ready")
    background.send(ident, "ping\n")
    read_until(background, ident, "ping")
    background.send(ident, "\x03")
    read_until(background, ident, "interrupted")


def test_background_stop_ends_the_whole_tree(
    background: Background, env: dict[str, str], tmp_path: Path
) -> None:
    ident = background.start(["bash", "-c", TREE], cwd=tmp_path, env=env, label="tree")
    read_until(background, ident, "ready")
    assert wait_tagged(env["TREE_TAG"], 4)
    info = background.stop(ident, grace=0.3)
    assert not info.running
    assert tagged(env["TREE_TAG"]) == []


def test_stop_all_spares_kept_commands_which_go_on_writing(
    background: Background, env: dict[str, str], tmp_path: Path
) -> None:
    fifo = tmp_path / "beats"
    os.mkfifo(fifo)
    beats = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # never at end-of-file
    kept_env = {**env, "TREE_TAG": uuid.uuid4().hex}
    ticker = f"while :; do echo tick || exit 9; echo beat > {fifo}; sleep 0.02; done"
    kept = background.start(["bash", "-c", ticker], cwd=tmp_path, env=kept_env, label="kept")
    other = background.start(["bash", "-c", TREE], cwd=tmp_path, env=env, label="other")
    background.keep(kept, True)
    read_until(background, kept, "tick")
    read_until(background, other, "ready")
    background.stop_all(grace=0.3)
    assert tagged(env["TREE_TAG"]) == []
    assert not background.info(other).running
    try:
        assert _beats(beats, after=time.monotonic(), count=5)  # still running, still writing
    finally:
        os.close(beats)
    assert background.info(kept).running and background.info(kept).kept
    background.stop(kept, grace=0.3)
    assert tagged(kept_env["TREE_TAG"]) == []


def _beats(fd: int, *, after: float, count: int, timeout: float = 30.0) -> bool:
    """Whether `count` beats arrive on the fifo within `timeout` seconds."""
    import select

    got = b""
    while got.count(b"beat") < count and time.monotonic() - after < timeout:
        ready, _, _ = select.select([fd], [], [], timeout)
        if ready:
            got += os.read(fd, 4096)
    return got.count(b"beat") >= count


# ---- plain text -----------------------------------------------------------------------------


def test_plain_removes_terminal_escapes() -> None:
    raw = (
        "\x1b[1;31mred\x1b[0m \x1b]0;title\x07\x1b]8;;https://x.example\x1b\\link\x1b]8;;\x1b\\"
        "\x1b(B\x1b=ok\r\n10%\r50%\r100%\r\nab\bc\x00\x07\x1bPqdata\x1b\\end\x9b2Jz\n"
    )
    assert plain(raw) == "red linkok\n100%\nacendz\n"


def test_plain_on_real_colour_output(env: dict[str, str], tmp_path: Path) -> None:
    result = bash("printf '\\033[32mgreen\\033[0m\\n'; ls --color=always -d .", env, tmp_path)
    assert "\x1b[" in result.output
    assert plain(result.output) == "green\n.\n"
