"""Shared test set-up. Service fixtures live in their own modules, loaded as plugins."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.program_guard import ProgramRecorder, Provenance, Verdict, report
from tests.setup_packages import ROOT, allowed_packages

pytest_plugins = [
    "tests.fixtures_llm",
    "tests.fixtures_keyring",
    "tests.fixtures_notify",  # uses the keyring fixtures' private bus
    "tests.fixtures_qt",
    "tests.fixtures_docker",
    "tests.fixtures_kube",
    "tests.fixtures_browser",
    "tests.fixtures_radicale",
    "tests.fixtures_runtime",  # make_runtime / runtime: a Runtime on the scripted model
]

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def service_unavailable(why: str) -> None:
    """A fixture could not start its service: fail in CI, skip on a laptop (saying why)."""
    if IN_CI:
        pytest.fail(f"required test service unavailable in CI: {why}", pytrace=False)
    pytest.skip(why)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh DESKHAND_HOME for one test."""
    path = tmp_path / "deskhand-home"
    path.mkdir()
    monkeypatch.setenv("DESKHAND_HOME", str(path))
    return path


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    """A folder the MCP test servers (tests/mcp_servers.py) leave marker files in."""
    path = tmp_path / "markers"
    path.mkdir()
    return path


@pytest.fixture
def unused_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    """In CI a skipped test is a failed test: CI must never pass with tests left out."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped in CI (not allowed): {reason}"


# ---- the program guard: every program a test starts must come from the set-up scripts ----

PROGRAMS = ProgramRecorder()
_guard_lines: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    PROGRAMS.start()
    # blocking core work called on the window's thread fails the test (app.core.threads)
    os.environ["DESKHAND_STRICT_THREADS"] = "1"


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collecting imported (modules, their classes and functions) lives as long as the
    run: frozen, the full collection after each Qt test (tests/fixtures_qt.py) walks only
    what the tests made, not these hundreds of thousands of objects again (as the app's
    own collector does after start-up, app/ui/gc_guard.py)."""
    import gc

    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _no_gui_thread_left() -> Iterator[None]:
    """A window marks its thread as the GUI's; the next test starts without one."""
    yield
    from app.core.threads import forget_gui_thread

    forget_gui_thread()


@pytest.fixture(autouse=True)
def _no_secret_from_another_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tripwire's known secrets are the process's: each test starts knowing none (a
    value an earlier test stored, "nope", must not be masked in the next one's text)."""
    from app.core import secrets

    monkeypatch.setattr(secrets, "_known", set())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> object:
    """Programs started during set-up, call and teardown are noted under the test's id."""
    PROGRAMS.test = item.nodeid
    yield
    PROGRAMS.test = "(session teardown)"


def judge_programs() -> tuple[list[Verdict], list[str]]:
    """Where each program the tests started comes from, and the guard's own errors."""
    venv = Path(os.environ.get("DESKHAND_VENV", ROOT / ".venv"))
    provenance = Provenance(allowed_packages(), venv)
    return provenance.judge(PROGRAMS.started.values()), list(PROGRAMS.errors)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """In CI a program the set-up scripts do not install turns the run red."""
    PROGRAMS.stop()
    if not PROGRAMS.started and not PROGRAMS.errors:
        return
    try:
        verdicts, errors = judge_programs()
    except (OSError, ValueError, subprocess.CalledProcessError) as exc:  # no dpkg, bad script
        verdicts, errors = [], [f"could not check the programs the tests started: {exc}"]
    bad = [v for v in verdicts if not v.ok]
    if IN_CI or bad or errors:
        _guard_lines[:] = report(verdicts, errors)
    if (bad or errors) and IN_CI:
        _guard_lines.append(
            f"CI fails: {len(bad)} program(s) not installed by scripts/test.sh, "
            f"{len(errors)} guard error(s)"
        )
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _guard_lines:
        terminalreporter.section("programs the tests started (tests/program_guard.py)")
        for line in _guard_lines:
            terminalreporter.write_line(line, red=not line.startswith("ok "))
