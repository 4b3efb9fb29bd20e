"""The terminal tool's OS sandbox (tools/shell/sandbox.py), with real bubblewrap and real
commands: writes only in the allowed folders, protected places hidden, no network unless
asked, a private /tmp, nothing left running when bwrap goes. Plus the macOS profile's text
and the plain "no sandbox" answers."""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import service_unavailable
from tools.fs.protected import catalogue_paths
from tools.shell import sandbox
from tools.shell.sandbox import (
    REPOSITORY_SCAN_MAX_FOLDERS,
    SandboxUnavailable,
    autorun_readonly,
    bwrap_argv,
    macos_profile,
    probe,
    sandbox_exec_argv,
    wrap,
)

KEY = "-----BEGIN OPENSSH PRIVATE KEY----- not-a-real-key"


@dataclass
class Place:
    """A user's world outside /tmp (so the sandbox's private /tmp is not what hides it)."""

    root: Path
    home: Path
    project: Path
    deskhand: Path
    env: dict[str, str]

    def hidden(self) -> list[Path]:
        """What the shell tool hides: the protected catalogue plus Deskhand's home."""
        return [path for path, _ in catalogue_paths(self.home, self.env)] + [self.deskhand]



#: The system's Python for code run inside the sandbox: the test's own interpreter may live
#: under /tmp (a clone there), which the sandbox replaces with a private, empty /tmp.
SYSTEM_PYTHON = "/usr/bin/python3"

def _root_outside_tmp() -> Path:
    # /var/tmp is not covered by the sandbox's own /tmp.
    root = Path(tempfile.mkdtemp(prefix="deskhand-sandbox-", dir="/var/tmp"))
    assert not str(root.resolve()).startswith("/tmp/")
    return root


@pytest.fixture
def bubblewrap() -> None:
    """A working bubblewrap (installed by scripts/test.sh); CI fails without one."""
    if not sys.platform.startswith("linux"):
        service_unavailable("bubblewrap tests need Linux")
    info = probe()
    if not info.available:
        service_unavailable(info.why)


@pytest.fixture
def place() -> Iterator[Place]:
    root = _root_outside_tmp()
    try:
        home = root / "home"
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "id_rsa").write_text(KEY)
        (home / ".git-credentials").write_text("https://user:token-123@example.test\n")
        (home / "notes.txt").write_text("plain notes\n")
        aws_real = root / "aws-elsewhere"
        aws_real.mkdir()
        (aws_real / "credentials").write_text("aws_secret_access_key = aws-secret-456\n")
        (home / ".aws").symlink_to(aws_real)
        project = home / "project"
        project.mkdir()
        deskhand = home / ".local" / "share" / "deskhand"
        deskhand.mkdir(parents=True)
        (deskhand / "rules.json").write_text('{"rules": "deskhand-private"}')
        env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
        env.pop("SSH_AUTH_SOCK", None)
        env["HOME"] = str(home)
        yield Place(root, home, project, deskhand, env)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _sh(
    place: Place,
    script: str,
    *,
    writable: Sequence[Path] | None = None,
    hidden: Sequence[Path] | None = None,
    network: bool = False,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    readonly: Sequence[Path] = (),
) -> subprocess.CompletedProcess[str]:
    folder = place.project if cwd is None else cwd
    argv = wrap(
        ["bash", "-c", script],
        cwd=folder,
        writable=[place.project] if writable is None else writable,
        hidden=place.hidden() if hidden is None else hidden,
        network=network,
        readonly=readonly,
    )
    return subprocess.run(
        argv,
        cwd=folder,
        env=dict(place.env if env is None else env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# ---- the probe --------------------------------------------------------------------------------


def test_probe_runs_bubblewrap_once_and_says_so(bubblewrap: None) -> None:
    info = probe()
    assert info.available and info.kind == sandbox.BUBBLEWRAP
    assert "bubblewrap" in info.why
    assert probe() is info  # cached for the process
    assert probe(refresh=True) == info


def test_probe_without_bwrap_says_it_is_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("PATH", str(tmp_path))
    try:
        info = probe(refresh=True)
        assert info == sandbox.SandboxInfo(False, None, "bubblewrap (bwrap) is not installed")
        with pytest.raises(SandboxUnavailable, match="not installed"):
            wrap(["true"], cwd=tmp_path, writable=[], hidden=[], network=False)
    finally:
        monkeypatch.undo()
        probe(refresh=True)


def test_probe_runs_bwrap_rather_than_trusting_its_presence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bwrap that cannot make namespaces (restricted user namespaces) means no sandbox."""
    fake = tmp_path / "bwrap"
    fake.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "sys.stderr.write('bwrap: setting up uid map: Permission denied\\n')\nsys.exit(1)\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("PATH", str(tmp_path))
    try:
        info = probe(refresh=True)
        assert not info.available and info.kind is None
        assert "cannot make a sandbox here" in info.why
        assert "setting up uid map: Permission denied" in info.why
    finally:
        monkeypatch.undo()
        probe(refresh=True)


def test_windows_says_plainly_there_is_no_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    try:
        info = probe(refresh=True)
        assert not info.available and info.kind is None
        assert info.why.startswith("Windows has no sandbox")
        with pytest.raises(SandboxUnavailable, match="Windows"):
            wrap(["cmd"], cwd=tmp_path, writable=[tmp_path], hidden=[], network=False)
    finally:
        monkeypatch.undo()
        probe(refresh=True)


# ---- writes -----------------------------------------------------------------------------------


def test_writes_inside_the_writable_folder_work(bubblewrap: None, place: Place) -> None:
    done = _sh(place, "echo built > out.txt && mkdir -p sub && touch sub/made && pwd")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(place.project)
    assert (place.project / "out.txt").read_text() == "built\n"
    assert (place.project / "sub" / "made").exists()


@pytest.mark.parametrize(
    "target",
    ["$HOME/evil.txt", "$HOME/.bashrc", "/etc/deskhand-evil", "/usr/deskhand-evil", "../evil"],
)
def test_writes_outside_are_refused(bubblewrap: None, place: Place, target: str) -> None:
    done = _sh(place, f"echo x > {target}")
    assert done.returncode != 0
    assert "Read-only file system" in done.stderr
    check = subprocess.run(
        ["bash", "-c", f"test -e {target}"], cwd=place.project, env=place.env, check=False
    )
    assert check.returncode != 0, f"{target} was written"


def test_no_capabilities_even_for_root(bubblewrap: None, place: Place) -> None:
    """Run as root, bwrap keeps every capability unless told otherwise: a command could then
    unmount what hides ~/.ssh or remount / writable."""
    done = _sh(
        place,
        "grep CapEff /proc/self/status; umount $HOME/.ssh; mount -o remount,rw /; "
        "cat $HOME/.ssh/id_rsa; touch /usr/deskhand-evil",
    )
    assert "CapEff:\t0000000000000000" in done.stdout
    assert KEY not in done.stdout
    assert not Path("/usr/deskhand-evil").exists()


# ---- hidden places ----------------------------------------------------------------------------


def test_the_key_is_readable_when_nothing_is_hidden(bubblewrap: None, place: Place) -> None:
    """The control for the tests below: the fake HOME is visible inside the sandbox."""
    done = _sh(place, "cat $HOME/.ssh/id_rsa $HOME/.aws/credentials", hidden=[])
    assert done.returncode == 0, done.stderr
    assert KEY in done.stdout and "aws-secret-456" in done.stdout


def test_protected_places_cannot_be_read(bubblewrap: None, place: Place) -> None:
    assert place.home / ".ssh" in place.hidden()
    done = _sh(
        place,
        "cat $HOME/.ssh/id_rsa; ls -A $HOME/.ssh; cat $HOME/.git-credentials; "
        f"cat $HOME/.aws/credentials {place.root}/aws-elsewhere/credentials; "
        f"cat {place.deskhand}/rules.json; ln -s $HOME/.ssh/id_rsa link; cat link; "
        "cat $HOME/notes.txt",
    )
    for secret in (KEY, "token-123", "aws-secret-456", "deskhand-private"):
        assert secret not in done.stdout
    assert "No such file or directory" in done.stderr
    assert "plain notes" in done.stdout  # only the protected places are hidden


def test_protected_places_cannot_be_written(bubblewrap: None, place: Place) -> None:
    done = _sh(place, "echo k >> $HOME/.ssh/authorized_keys; echo x > $HOME/.git-credentials")
    refusals = [
        line
        for line in done.stderr.splitlines()
        if line.endswith(("Read-only file system", "Permission denied"))
    ]
    assert len(refusals) == 2, done.stderr
    assert not (place.home / ".ssh" / "authorized_keys").exists()
    assert "token-123" in (place.home / ".git-credentials").read_text()


def test_hidden_places_stay_hidden_inside_a_writable_home(bubblewrap: None, place: Place) -> None:
    done = _sh(place, "echo ok > $HOME/fine.txt && cat $HOME/.ssh/id_rsa", writable=[place.home])
    assert (place.home / "fine.txt").read_text() == "ok\n"
    assert KEY not in done.stdout and done.returncode != 0


def test_session_sockets_are_hidden(bubblewrap: None, place: Place) -> None:
    """The ssh agent and the session bus are reachable through the file system even without
    network: they are covered too."""
    runtime = place.root / "runtime"
    runtime.mkdir()
    (runtime / "bus").write_text("session bus")
    agent_path = place.root / "agent.sock"
    agent = socket.socket(socket.AF_UNIX)
    agent.bind(str(agent_path))
    agent.listen()
    env = {**place.env, "XDG_RUNTIME_DIR": str(runtime), "SSH_AUTH_SOCK": str(agent_path)}
    connect = (
        "import os, socket; s = socket.socket(socket.AF_UNIX); "
        "s.connect(os.environ['SSH_AUTH_SOCK']); print('agent reached')"
    )
    script = f'cat $XDG_RUNTIME_DIR/bus; {SYSTEM_PYTHON} -c "{connect}"'
    argv = bwrap_argv(
        shutil.which("bwrap") or "bwrap",
        ["bash", "-c", script],
        cwd=place.project,
        writable=[place.project],
        hidden=[],
        network=False,
        environ=env,
    )
    try:
        done = subprocess.run(
            argv, cwd=place.project, env=env, capture_output=True, text=True, timeout=60
        )
    finally:
        agent.close()
    assert "session bus" not in done.stdout
    assert "agent reached" not in done.stdout
    assert "Connection refused" in done.stderr


# ---- network ----------------------------------------------------------------------------------


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello from the host"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def _fetch(url: str) -> str:
    code = f"import urllib.request; print(urllib.request.urlopen('{url}', timeout=20).read())"
    return f'{SYSTEM_PYTHON} -c "{code}"'


def test_network_is_off_unless_asked_for(bubblewrap: None, place: Place, server: str) -> None:
    done = _sh(place, _fetch(server))
    assert done.returncode != 0
    assert "hello from the host" not in done.stdout
    assert "Connection refused" in done.stderr


def test_network_on_reaches_the_server(bubblewrap: None, place: Place, server: str) -> None:
    done = _sh(place, _fetch(server), network=True)
    assert done.returncode == 0, done.stderr
    assert "hello from the host" in done.stdout


# ---- Unix sockets in the file system: by allow-list of socket families (tools/shell/seccomp.py)


@pytest.fixture
def unix_server(place: Place) -> Iterator[Path]:
    """A daemon's socket in a folder the sandbox sees (like /run/dbus/system_bus_socket):
    answers every connection with a greeting."""
    path = place.root / "run" / "daemon.sock"
    path.parent.mkdir()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"hello from the daemon")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join()


def _unix_connect(path: Path) -> str:
    code = (
        "import socket; s = socket.socket(socket.AF_UNIX); s.settimeout(20); "
        f"s.connect('{path}'); print(s.recv(100).decode())"
    )
    return f'{SYSTEM_PYTHON} -c "{code}"'


def test_a_unix_socket_of_the_host_is_unreachable_without_network(
    bubblewrap: None, place: Place, unix_server: Path
) -> None:
    done = _sh(place, f"test -S {unix_server} && echo visible; {_unix_connect(unix_server)}")
    assert "visible" in done.stdout  # not hidden by name: refused by what the sandbox allows
    assert "hello from the daemon" not in done.stdout
    assert done.returncode != 0
    assert "Address family not supported" in done.stderr


def test_the_same_unix_socket_answers_outside_the_sandbox(place: Place, unix_server: Path) -> None:
    done = subprocess.run(
        ["bash", "-c", _unix_connect(unix_server)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "hello from the daemon" in done.stdout


def test_a_unix_socket_in_the_writable_folder_is_unreachable_too(
    bubblewrap: None, place: Place
) -> None:
    path = place.project / "app.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    try:
        done = _sh(place, _unix_connect(path))
    finally:
        listener.close()
    assert done.returncode != 0
    assert "Address family not supported" in done.stderr


def test_socketpair_and_loopback_still_work_inside_without_network(
    bubblewrap: None, place: Place
) -> None:
    code = (
        "import socket; a, b = socket.socketpair(); a.sendall(b'pair'); print(b.recv(4).decode()); "
        "srv = socket.create_server(('127.0.0.1', 0)); "
        "c = socket.create_connection(srv.getsockname()); conn, _ = srv.accept(); "
        "c.sendall(b'loopback'); print(conn.recv(8).decode())"
    )
    done = _sh(place, f'{SYSTEM_PYTHON} -c "{code}"')
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["pair", "loopback"]


def test_with_network_the_filter_is_not_applied(
    bubblewrap: None, place: Place, unix_server: Path
) -> None:
    """`network: true` already shares the host's network (a never-covered question): Unix
    sockets are then reachable like the rest of it."""
    done = _sh(place, _unix_connect(unix_server), network=True)
    assert done.returncode == 0, done.stderr
    assert "hello from the daemon" in done.stdout


# ---- /tmp, processes, environment -------------------------------------------------------------


def test_tmp_is_private(bubblewrap: None, place: Place, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("from the host's /tmp")
    name = f"/tmp/deskhand-inside-{uuid.uuid4().hex}"
    done = _sh(place, f"cat {outside}; echo inside > {name} && cat {name}")
    assert "from the host's /tmp" not in done.stdout
    assert "inside" in done.stdout  # /tmp is writable inside
    assert not Path(name).exists()


def test_a_folder_under_tmp_can_be_the_working_folder(
    bubblewrap: None, place: Place, tmp_path: Path
) -> None:
    """A read-only working folder under /tmp is bound back in (read-only), a writable one too."""
    readonly = tmp_path / "ro"
    readonly.mkdir()
    (readonly / "data.txt").write_text("data\n")
    done = _sh(place, "cat data.txt; touch new", cwd=readonly, writable=[])
    assert done.stdout == "data\n"
    assert "Read-only file system" in done.stderr
    done = _sh(place, "touch new && echo made", cwd=readonly, writable=[readonly])
    assert done.stdout == "made\n" and (readonly / "new").exists()


def test_environment_passes_but_other_processes_are_invisible(
    bubblewrap: None, place: Place
) -> None:
    env = {**place.env, "DESKHAND_TEST_PASSED": "yes"}
    done = _sh(place, f"echo $DESKHAND_TEST_PASSED; cat /proc/{os.getpid()}/environ", env=env)
    assert done.stdout.startswith("yes\n")
    assert "DESKHAND_TEST_PASSED" not in done.stdout.split("\n", 1)[1]


def _marked(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if f"DESKHAND_SANDBOX_MARK={marker}".encode() in environ.split(b"\0"):
                pids.append(int(entry.name))
    return pids


def test_killing_bwrap_ends_everything_inside(bubblewrap: None, place: Place) -> None:
    """Even a process that started its own session: the PID namespace dies with bwrap."""
    marker = uuid.uuid4().hex
    env = {**place.env, "DESKHAND_SANDBOX_MARK": marker}
    argv = wrap(
        ["bash", "-c", "setsid sleep 300 & trap '' TERM; sleep 300 & echo ready; wait"],
        cwd=place.project,
        writable=[place.project],
        hidden=place.hidden(),
        network=False,
    )
    proc = subprocess.Popen(argv, cwd=place.project, env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    pids = _marked(marker)
    assert len(pids) >= 3  # bash and the two sleeps (and bwrap's init)
    handles = [os.pidfd_open(pid) for pid in pids]
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        pending = set(handles)
        while pending:
            ready, _, _ = select.select(list(pending), [], [], 30)
            assert ready, f"still running: {_marked(marker)}"
            pending -= set(ready)
    finally:
        for handle in handles:
            os.close(handle)
        proc.stdout.close()
    assert _marked(marker) == []


# ---- read-only places inside writable folders -------------------------------------------------

FSMONITOR = "[core]\n\tfsmonitor = touch pwned\n"


def _git(place: Place, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["git", "-c", "user.name=u", "-c", "user.email=u@x", *args],
        cwd=folder,
        env=place.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def _guarded(place: Place, script: str, folder: Path | None = None) -> str:
    """Run `script` with the project writable and its auto-run places read-only; its stderr."""
    readonly = autorun_readonly([place.project], place.home)
    return _sh(place, script, cwd=folder, readonly=readonly).stderr


def _plant(where: str) -> str:
    return (
        f"printf '{FSMONITOR}' >> {where}/.git/config; "
        f"echo 'touch pwned' > {where}/.git/hooks/post-checkout; "
        f"echo x > {where}/.git/info/attributes; "
        f"mv {where}/.git {where}/moved; "
    )


def test_git_config_and_hooks_stay_read_only_in_a_writable_project(
    bubblewrap: None, place: Place
) -> None:
    """What code in the sandbox writes there runs later outside it, at the user's `git status`."""
    _git(place, place.project, "init", "-q")
    config = (place.project / ".git" / "config").read_text()
    stderr = _guarded(
        place,
        _plant(".") + "echo built > out.txt && git add out.txt && "
        "git -c user.name=u -c user.email=u@x commit -qm built",
    )
    assert stderr.count("Read-only file system") == 3, stderr
    assert "Device or resource busy" in stderr  # .git cannot be renamed away either
    assert (place.project / ".git" / "config").read_text() == config
    assert not (place.project / ".git" / "hooks" / "post-checkout").exists()
    assert not (place.project / ".git" / "info" / "attributes").exists()
    assert (place.project / "out.txt").read_text() == "built\n"  # the project stays writable
    assert _git(place, place.project, "log", "--format=%s").stdout == "built\n"  # git works
    _git(place, place.project, "status")
    assert not (place.project / "pwned").exists()


def test_the_same_writes_succeed_without_readonly(bubblewrap: None, place: Place) -> None:
    """The control: the project's git folder is writable when nothing is kept read-only."""
    _git(place, place.project, "init", "-q")
    done = _sh(place, _plant("."))
    assert done.returncode == 0, done.stderr
    assert "fsmonitor" in (place.project / "moved" / "config").read_text()


def test_a_nested_repository_two_levels_down_is_protected(bubblewrap: None, place: Place) -> None:
    nested = place.project / "libs" / "vendored"
    nested.mkdir(parents=True)
    _git(place, nested, "init", "-q")
    config = (nested / ".git" / "config").read_text()
    stderr = _guarded(place, _plant("libs/vendored") + "mv libs elsewhere; echo ok > libs/new")
    assert stderr.count("Read-only file system") == 3, stderr
    assert stderr.count("Device or resource busy") == 2, stderr  # the folders above are pinned
    assert (nested / ".git" / "config").read_text() == config
    assert not (nested / ".git" / "hooks" / "post-checkout").exists()
    assert (place.project / "libs" / "new").read_text() == "ok\n"
    _git(place, nested, "status")
    assert not (nested / "pwned").exists()


def test_a_gitfile_and_the_folder_it_names_are_protected(bubblewrap: None, place: Place) -> None:
    """A worktree-style `.git` file: rewritten, it could name a folder with any config."""
    _git(place, place.project, "init", "-q")
    linked = place.project / "linked"
    _git(place, place.project, "commit", "-q", "--allow-empty", "-m", "first")
    _git(place, place.project, "worktree", "add", "-q", str(linked))
    gitfile = (linked / ".git").read_text()
    stderr = _guarded(
        place, "echo 'gitdir: ../evil' > linked/.git; " + _plant("."), folder=place.project
    )
    assert stderr.count("Read-only file system") == 4, stderr
    assert (linked / ".git").read_text() == gitfile


def test_the_repository_walk_is_bounded(bubblewrap: None, place: Place) -> None:
    """Depth, skipped folders and the folder budget: only the reachable repositories count."""
    deep = place.project / "a" / "b" / "c" / "d"
    shallow = place.project / "a" / "b" / "c"
    skipped = place.project / "node_modules" / "pkg"
    for folder in (deep, skipped):
        folder.mkdir(parents=True)
        _git(place, folder, "init", "-q")
    found = autorun_readonly([place.project], place.home)
    assert found == []  # nothing at the root or within three levels
    _git(place, shallow, "init", "-q")
    assert shallow / ".git" / "config" in autorun_readonly([place.project], place.home)
    for index in range(REPOSITORY_SCAN_MAX_FOLDERS):
        (place.project / f"_{index:03}").mkdir()  # looked into before "a"
    assert autorun_readonly([place.project], place.home) == []


def test_start_up_files_and_path_folders_inside_a_writable_folder(
    bubblewrap: None, place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the whole home writable, ~/.bashrc and a folder on $PATH stay read-only."""
    bashrc = place.home / ".bashrc"
    bashrc.write_text("# mine\n")
    tools = place.home / "bin"
    tools.mkdir()
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ.get('PATH', '')}")
    found = autorun_readonly([place.home], place.home)
    assert bashrc in found and tools in found and place.home not in found
    readonly = autorun_readonly([place.home], place.home)
    script = "echo evil >> $HOME/.bashrc; echo evil > $HOME/bin/ls; echo ok > $HOME/fine.txt"
    done = _sh(place, script, writable=[place.home], readonly=readonly)
    assert done.stderr.count("Read-only file system") == 2, done.stderr
    assert bashrc.read_text() == "# mine\n" and not (tools / "ls").exists()
    assert (place.home / "fine.txt").read_text() == "ok\n"


def test_readonly_places_outside_writable_folders_are_not_bound(tmp_path: Path) -> None:
    """They are read-only already; one under /tmp must not show through the private /tmp."""
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    argv = bwrap_argv(
        "bwrap",
        ["true"],
        cwd=project,
        writable=[project],
        hidden=[],
        network=False,
        environ={},
        readonly=[project / "sub", outside, project / "missing"],
    )
    real = project.resolve()
    assert str(outside.resolve()) not in argv
    assert str(real / "missing") not in argv
    sub = argv.index(str(real / "sub"))
    assert argv[sub - 1] == "--ro-bind" and sub > argv.index(str(real))


# ---- macOS: the profile -----------------------------------------------------------------------


def test_macos_profile_text() -> None:
    text = macos_profile(2, 1, network=False)
    lines = text.splitlines()
    assert lines[:3] == ["(version 1)", "(allow default)", "(deny file-write*)"]
    allow_w = lines.index('(allow file-write* (subpath (param "W1")))')
    assert lines.index('(allow file-write* (subpath (param "W0")))') < allow_w
    hide = lines.index('(deny file-read* file-write* (subpath (param "H0")))')
    assert hide > allow_w  # last match wins: hidden beats writable
    git = lines.index(
        '(deny file-write* (regex #"/\\.git(/(modules/.+/)?(config|hooks|info|commondir)|$)"))'
    )
    assert allow_w < git < hide  # a repository's config and hooks are never writable
    assert lines[-1] == "(deny network*)"
    assert '(subpath (param "TMP"))' in text and '(literal "/dev/null")' in text
    assert "H1" not in text and "W2" not in text
    assert "(deny network*)" not in macos_profile(0, 0, network=True)
    assert "R0" not in text
    with_readonly = macos_profile(1, 1, network=True, readonly=2).splitlines()
    denied = with_readonly.index('(deny file-write* (subpath (param "R1")))')
    assert with_readonly.index('(allow file-write* (subpath (param "W0")))') < denied
    assert denied < with_readonly.index('(deny file-read* file-write* (subpath (param "H0")))')


def test_sandbox_exec_command_line(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    home = tmp_path / "home"
    quoted = tmp_path / 'odd "name") (allow default'
    argv = sandbox_exec_argv(
        "/usr/bin/sandbox-exec",
        ["/bin/echo", "hi"],
        writable=[tmp_path / "link", quoted],
        hidden=[home / ".ssh", home / ".ssh", home / ".aws"],
        network=True,
        temp=tmp_path,
    )
    assert argv[:2] == ["/usr/bin/sandbox-exec", "-p"]
    assert argv[2] == macos_profile(2, 2, network=True)
    params = argv[3:-2]
    assert params[0::2] == ["-D"] * (len(params) // 2)
    assert params[1::2] == [
        f"TMP={tmp_path.resolve()}",
        f"W0={real.resolve()}",  # macOS checks real paths
        f"W1={quoted.resolve()}",  # a parameter, never text in the profile
        f"H0={(home / '.ssh').resolve()}",
        f"H1={(home / '.aws').resolve()}",
    ]
    assert argv[-2:] == ["/bin/echo", "hi"]
    argv = sandbox_exec_argv(
        "/usr/bin/sandbox-exec",
        ["/bin/echo"],
        writable=[real],
        hidden=[],
        network=False,
        temp=tmp_path,
        readonly=[real / ".git" / "config", real / ".git" / "config"],
    )
    assert argv[2] == macos_profile(1, 0, network=False, readonly=1)
    assert argv[3:-1][-1] == f"R0={(real / '.git' / 'config').resolve()}"
    with pytest.raises(ValueError):
        sandbox_exec_argv("/usr/bin/sandbox-exec", ["-x"], writable=[], hidden=[], network=False)
