"""A second start finds the running instance and asks it to come to the front."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from app.ui.single_instance import InstanceServer, ask_running_instance, server_name

REPO = Path(__file__).resolve().parents[1]


def test_nobody_answers_without_a_running_instance(tmp_path: Path, qapp):
    assert ask_running_instance(tmp_path / "home-a") is False


def test_a_second_start_activates_the_first(tmp_path: Path, qtbot):
    home = tmp_path / "home"
    home.mkdir()
    server = InstanceServer(home)
    try:
        assert server.listening
        code = textwrap.dedent(
            """
            import sys
            from pathlib import Path
            from PySide6.QtCore import QCoreApplication
            from app.ui.single_instance import ask_running_instance
            app = QCoreApplication([])
            sys.exit(0 if ask_running_instance(Path(sys.argv[1]), 3000) else 1)
            """
        )
        with qtbot.waitSignal(server.activationRequested, timeout=10_000):
            second = subprocess.Popen(
                [sys.executable, "-c", code, str(home)],
                env={
                    "PYTHONPATH": str(REPO),
                    "QT_QPA_PLATFORM": "offscreen",
                    "PATH": "/usr/bin:/bin",
                },
            )
        assert second.wait(timeout=20) == 0
    finally:
        server.close()


def test_each_home_has_its_own_instance(tmp_path: Path):
    assert server_name(tmp_path / "a") != server_name(tmp_path / "b")
    assert server_name(tmp_path / "a") == server_name(tmp_path / "a")


def test_a_stale_socket_from_a_crash_is_replaced_and_closing_removes_ours(tmp_path: Path, qapp):
    import socket

    from app.ui.single_instance import socket_path

    home = tmp_path / "home"
    home.mkdir()
    path = socket_path(home)
    assert path is not None and path.parent == home
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens: what a crash leaves
    assert ask_running_instance(home) is False
    server = InstanceServer(home)
    try:
        assert server.listening
        assert oct(path.stat().st_mode & 0o777) == oct(0o600)  # only this user can connect
    finally:
        server.close()
    assert not path.exists()


def test_a_home_too_long_for_a_socket_address_uses_a_private_runtime_folder(
    tmp_path: Path, qtbot, monkeypatch
):
    import shutil
    import tempfile

    from app.ui.single_instance import MAX_SOCKET_PATH, socket_path

    # a short runtime folder, as /run/user/<uid> is (tmp_path's length varies by machine)
    runtime = Path(tempfile.mkdtemp(prefix="dh-run-"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    home = tmp_path / ("h" * (MAX_SOCKET_PATH + 10))
    home.mkdir()
    server = InstanceServer(home)
    try:
        path = socket_path(home)
        assert path is not None and path.parent.parent == runtime
        assert server.listening
        with qtbot.waitSignal(server.activationRequested, timeout=5_000):
            assert ask_running_instance(home) is True
    finally:
        server.close()
        shutil.rmtree(runtime, ignore_errors=True)


def test_a_fallback_address_too_long_as_well_means_no_socket(tmp_path: Path, monkeypatch, qapp):
    """A runtime folder so deep that the fallback address is too long too: no single-
    instance socket (a second start opens a second window), not a failed bind."""
    from app.ui.single_instance import MAX_SOCKET_PATH, socket_path

    runtime = tmp_path / ("r" * MAX_SOCKET_PATH)
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    home = tmp_path / ("h" * (MAX_SOCKET_PATH + 10))
    home.mkdir()
    assert socket_path(home, create=True) is None
    server = InstanceServer(home)
    try:
        assert not server.listening
        assert ask_running_instance(home) is False
    finally:
        server.close()


def test_a_fallback_folder_others_can_write_is_not_used(tmp_path: Path, monkeypatch, qapp):
    """Another user could have made the shared folder first: then no single-instance
    socket at all (a second start opens a second window) rather than one in their hands."""
    import os

    from app.ui.single_instance import MAX_SOCKET_PATH, socket_path

    runtime = tmp_path / "run"
    (runtime / f"deskhand-{os.getuid()}").mkdir(parents=True)
    (runtime / f"deskhand-{os.getuid()}").chmod(0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    home = tmp_path / ("h" * (MAX_SOCKET_PATH + 10))
    assert socket_path(home, create=True) is None
    server = InstanceServer(home)
    assert not server.listening
    assert ask_running_instance(home) is False


def test_a_message_in_pieces_or_noise_is_read_right(tmp_path: Path, qtbot):
    import socket

    from app.ui.single_instance import socket_path

    home = tmp_path / "home"
    home.mkdir()
    server = InstanceServer(home)
    path = socket_path(home)
    assert path is not None
    try:
        noise = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with qtbot.assertNotEmitted(server.activationRequested, wait=300), noise:
            noise.connect(str(path))
            noise.sendall(b"x" * 200)  # longer than any message: cut off
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with qtbot.waitSignal(server.activationRequested, timeout=5_000), client:
            client.connect(str(path))
            client.sendall(b"acti")
            qtbot.wait(50)  # (the message in two pieces, as a slow writer sends it)
            client.sendall(b"vate\n")
    finally:
        server.close()
