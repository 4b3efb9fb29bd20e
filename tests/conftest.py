"""Shared test set-up. Service fixtures live in their own modules, loaded as plugins."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = [
    "tests.fixtures_llm",
    "tests.fixtures_keyring",
    "tests.fixtures_qt",
    "tests.fixtures_docker",
    "tests.fixtures_kube",
    "tests.fixtures_browser",
    "tests.fixtures_radicale",
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
