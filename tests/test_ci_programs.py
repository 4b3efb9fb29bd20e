"""CI on a machine that never saw the project: every program the tests start is installed by
the set-up scripts. The dynamic guard (tests/program_guard.py, wired in tests/conftest.py)
checks what really ran; these tests prove the guard itself can fail, and check statically
what it cannot see."""

from __future__ import annotations

import ast
import asyncio
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import conftest
from tests.conftest import service_unavailable
from tests.program_guard import (
    ProgramRecorder,
    Provenance,
    Started,
    Verdict,
    locate,
    path_names,
)
from tests.setup_packages import (
    ALWAYS_PRESENT,
    COMMON,
    PACKAGE_TEST,
    ROOT,
    TEST_SETUP,
    ScriptParseError,
    allowed_packages,
    dependency_closure,
    ensure_apt_packages,
    installed_packages,
)

VENV = Path(os.environ.get("DESKHAND_VENV", ROOT / ".venv"))


def program(name: str) -> str:
    """The path of a program the set-up scripts install (fail in CI, skip elsewhere)."""
    path = shutil.which(name)
    if path is None:
        service_unavailable(f"{name} is not installed: run ./scripts/test.sh once")
        raise AssertionError("unreachable")
    return path


def judge(path: str, allowed: dict[str, str], interpreter: str | None = None) -> Verdict:
    started = Started(os.path.basename(path), path, interpreter, "unit")
    return Provenance(allowed, VENV).judge([started])[0]


# ---- reading the set-up scripts --------------------------------------------------------------


def test_test_setup_names_every_package_the_tests_need() -> None:
    packages = ensure_apt_packages(TEST_SETUP)
    needed = {
        "libsecret-tools",  # secret-tool
        "gnome-keyring",
        "dbus",
        "docker.io",
        "busybox-static",
        "chromium",
        "desktop-file-utils",
        "libxcb-xkb1",  # from QT_RUNTIME_PACKAGES in _common.sh
    }
    assert needed <= set(packages), needed - set(packages)


def test_parser_reads_arrays_comments_and_continuations(tmp_path: Path) -> None:
    common = tmp_path / "common.sh"
    common.write_text("BASE=(a-lib # the (base) one\n  b-lib)\n")
    script = tmp_path / "setup.sh"
    script.write_text(
        "#!/bin/bash\nsource common.sh\nEXTRA=(\n  c-tool  # it's a tool\n  d-tool\n)\n"
        'ensure_apt x-pkg \\\n  "${EXTRA[@]}" "${BASE[@]}"  # trailing comment\n'
        "ensure_apt() {\n  :\n}\n"
    )
    assert ensure_apt_packages(script, common) == ["x-pkg", "c-tool", "d-tool", "a-lib", "b-lib"]


@pytest.mark.parametrize("call", ['ensure_apt "${MISSING[@]}"', "ensure_apt $PKGS"])
def test_parser_refuses_what_it_cannot_read(tmp_path: Path, call: str) -> None:
    """A list the guard cannot read must fail, not count as empty."""
    script = tmp_path / "setup.sh"
    script.write_text(call + "\n")
    with pytest.raises(ScriptParseError):
        ensure_apt_packages(script, script)


def apt_candidates(packages: list[str]) -> dict[str, str]:
    """Package -> the version apt would install, for the packages apt knows."""
    out = subprocess.run(
        ["apt-cache", "policy", *packages], capture_output=True, text=True, check=True
    ).stdout
    found: dict[str, str] = {}
    name = ""
    for line in out.splitlines():
        if line and not line[0].isspace() and line.endswith(":"):
            name = line[:-1]
        elif line.strip().startswith("Candidate:") and name:
            found[name] = line.split(":", 1)[1].strip()
    return {pkg: version for pkg, version in found.items() if version != "(none)"}


def test_every_listed_package_exists() -> None:
    """A misspelt package would make ensure_apt fail on a fresh machine."""
    listed = sorted({*ensure_apt_packages(TEST_SETUP), *ensure_apt_packages(PACKAGE_TEST)})
    installed = installed_packages()
    missing = [pkg for pkg in listed if pkg not in installed]
    if missing:  # not installed here: apt must be able to install it
        candidates = apt_candidates(missing)
        missing = [pkg for pkg in missing if pkg not in candidates]
    assert missing == [], f"neither installed nor known to apt: {missing}"


def test_always_present_packages_are_essential() -> None:
    """The allow-list holds only what every Debian system has, and apt (ensure_apt's tool)."""
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package}\\t${Essential}\\n", *ALWAYS_PRESENT],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    essential = dict(line.split("\t") for line in out.splitlines())
    not_essential = [pkg for pkg in ALWAYS_PRESENT if essential.get(pkg) != "yes"]
    assert not_essential == ["apt"]
    assert "apt-get install" in COMMON.read_text("utf-8")


# ---- the resolver can say no --------------------------------------------------------------------


@pytest.fixture(scope="module")
def only_dbus() -> dict[str, str]:
    """What a set-up naming only `dbus` (and nothing always present) would install."""
    return dependency_closure({"dbus": "named in a test list"}, installed_packages())


def test_listed_package_and_its_dependencies_pass(only_dbus: dict[str, str]) -> None:
    verdict = judge(program("dbus-daemon"), only_dbus)
    assert verdict.ok, verdict
    assert "dbus-daemon" in verdict.source and "needed by" in verdict.source


def test_program_from_a_package_not_in_the_lists_is_reported(only_dbus: dict[str, str]) -> None:
    verdict = judge(program("gnome-keyring-daemon"), only_dbus)
    assert not verdict.ok
    assert "gnome-keyring" in verdict.source and "do not install" in verdict.source


def test_program_from_no_package_is_reported(tmp_path: Path) -> None:
    copy = tmp_path / "true"
    shutil.copy2(program("true"), copy)  # never run: it would trip the session guard
    verdict = judge(str(copy), allowed_packages())
    assert not verdict.ok and "not from a Debian package" in verdict.source


def test_script_is_judged_by_its_interpreter(tmp_path: Path, only_dbus: dict[str, str]) -> None:
    script = tmp_path / "hello"
    script.write_text("#!/bin/sh\necho hi\n")
    assert judge(str(script), allowed_packages(), "/bin/sh").ok
    verdict = judge(str(script), only_dbus, "/bin/sh")  # dash is not pulled in by dbus
    assert not verdict.ok and "dash" in verdict.source


def test_venv_and_python_pass_without_a_package() -> None:
    assert judge(sys.executable, {}).ok
    assert judge(str(VENV / "bin" / "ruff"), {}).source == "the project's virtual environment"


def test_merged_usr_and_symlinks_reach_dpkg_s_name() -> None:
    assert "/bin/busybox" in path_names("/usr/bin/busybox")
    assert "/usr/bin/busybox" in path_names("/bin/busybox")
    verdict = judge(program("busybox"), {"busybox-static": "listed"})
    assert verdict.ok, verdict


# ---- the recorder sees every way of starting a program ----------------------------------------


def test_recorder_notes_every_way_of_starting_a_program(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "hello-script"
    script.parent.mkdir()
    script.write_text("#!/usr/bin/env sh\necho hi\n")
    script.chmod(0o755)
    recorder = ProgramRecorder()
    recorder.start()
    try:
        subprocess.run(["true"], check=True)
        subprocess.run("ldd --version >/dev/null", shell=True, check=True)
        subprocess.run(["hello-script"], env={"PATH": f"{script.parent}:/usr/bin:/bin"}, check=True)
        assert os.system("exit 0") == 0

        async def spawn() -> int:
            proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
            return await proc.wait()

        assert asyncio.run(spawn()) == 0
        pid = os.posix_spawnp("env", ["env", "true"], dict(os.environ))
        assert os.waitpid(pid, 0)[1] == 0
        with pytest.raises(FileNotFoundError):
            subprocess.run(["deskhand-no-such-program"])
    finally:
        recorder.stop()
    subprocess.run(["true"], cwd=tmp_path, check=True)  # after stop(): not noted
    assert recorder.errors == []
    found = {os.path.basename(s.path): s for s in recorder.started.values()}
    assert set(found) >= {"true", "sh", "ldd", "hello-script", "env"}
    assert os.path.realpath(sys.executable) in {
        os.path.realpath(s.path) for s in recorder.started.values()
    }
    assert "deskhand-no-such-program" not in found  # nothing by that name ran
    assert found["hello-script"].interpreter == locate("sh", os.get_exec_path())
    assert found["true"].test == "(collection or session set-up)"


def test_session_guard_records_this_test_and_follows_symlinks(tmp_path: Path) -> None:
    """The conftest's recorder notes a start under this test's id; a link to a program (here
    in a folder of its own, so no earlier test started the same path) is judged by the
    package of the file it points to."""
    link = tmp_path / "keyring-cli"
    link.symlink_to(program("secret-tool"))
    subprocess.run([str(link), "--version"], capture_output=True, check=False)
    verdicts, errors = conftest.judge_programs()
    assert errors == []
    mine = [v for v in verdicts if v.started.path == str(link)]
    assert len(mine) == 1 and mine[0].started.test.endswith(
        "::test_session_guard_records_this_test_and_follows_symlinks"
    )
    assert mine[0].ok and "libsecret-tools" in mine[0].source, mine[0]


# ---- what the audit hook cannot see --------------------------------------------------------------


def _constant_strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List):
        return [s for elt in node.elts for s in _constant_strings(elt)]
    return []


def programs_named_in(path: Path) -> set[str]:
    """Programs a source file looks up with shutil.which (constant names, or a loop over a
    literal tuple) or starts from a literal argument list: also those a test only starts
    when found, which the dynamic guard would never see on a machine without them."""
    tree = ast.parse(path.read_text("utf-8"))
    loops: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.comprehension | ast.For) and isinstance(node.target, ast.Name):
            loops[node.target.id] = _constant_strings(node.iter)
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = ast.unparse(node.func)
        first = node.args[0]
        if func == "shutil.which":
            found.update(_constant_strings(first))
            if isinstance(first, ast.Name):
                found.update(loops.get(first.id, []))
        elif func.startswith("subprocess.") and isinstance(first, ast.List) and first.elts:
            found.update(_constant_strings(first.elts[0]))
    return found


def test_programs_the_test_sources_name_come_from_the_test_setup() -> None:
    sources = [*sorted((ROOT / "tests").glob("*.py")), *sorted((ROOT / "bench").glob("*.py"))]
    sources.remove(Path(__file__))  # this file names made-up programs on purpose
    named = set().union(*(programs_named_in(p) for p in sources))
    assert {"secret-tool", "dbus-daemon", "gnome-keyring-daemon", "dockerd"} <= named
    allowed = allowed_packages()
    bad = [v for v in (judge(program(name), allowed) for name in sorted(named)) if not v.ok]
    assert bad == []


@dataclass(frozen=True)
class Indirect:
    """A program started by another program (or only used as a file), out of the hook's view."""

    path: str
    package: str  # the package an ensure_apt list of `script` names for it
    script: Path
    why: str


INDIRECT = [
    Indirect(
        os.environ.get("DESKHAND_TEST_CHROMIUM", "/usr/bin/chromium"),
        "chromium",
        TEST_SETUP,
        "Playwright's driver starts it for the browser tests",
    ),
    Indirect("/usr/bin/containerd", "docker.io", TEST_SETUP, "dockerd starts it"),
    Indirect("/usr/sbin/runc", "docker.io", TEST_SETUP, "containerd runs the test containers"),
    Indirect("/bin/busybox", "busybox-static", TEST_SETUP, "the test image is made of it"),
    Indirect("/usr/bin/Xvfb", "xvfb", PACKAGE_TEST, "package-test.sh's display"),
    Indirect("/usr/bin/xdotool", "xdotool", PACKAGE_TEST, "packaging/check_installed.py"),
    Indirect("/usr/bin/import", "imagemagick", PACKAGE_TEST, "check_installed.py's screenshot"),
    Indirect("/usr/bin/convert", "imagemagick", PACKAGE_TEST, "check_installed.py"),
    Indirect("/usr/bin/desktop-file-validate", "desktop-file-utils", PACKAGE_TEST, "menu entry"),
    Indirect("/usr/bin/dpkg-deb", "dpkg", PACKAGE_TEST, "build-linux.sh builds the .deb"),
]


@pytest.mark.parametrize("item", INDIRECT, ids=lambda i: os.path.basename(i.path))
def test_programs_started_out_of_the_hooks_view_are_installed(item: Indirect) -> None:
    listed = {*ensure_apt_packages(item.script), *ALWAYS_PRESENT}
    assert item.package in listed, f"{item.path} ({item.why}) needs {item.package}"
    if os.path.exists(item.path):  # installed here: dpkg must agree it comes from there
        verdict = judge(item.path, allowed_packages([item.script]))
        assert verdict.ok, verdict
