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
