"""Fast static checks of the installers' sources (no build: scripts/package-test.sh builds,
installs and runs the real Linux bundle)."""

from __future__ import annotations

import configparser
import importlib.metadata
import importlib.util
import re
import shutil
import struct
import subprocess
import tomllib
from pathlib import Path, PureWindowsPath

import pytest

from app import cli
from app.version import version
from tools.registry import ToolRegistry

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "packaging" / "deskhand.spec"
DESKTOP = ROOT / "packaging" / "linux" / "deskhand.desktop"
BUILD_LINUX = ROOT / "scripts" / "build-linux.sh"
ISS = ROOT / "packaging" / "windows" / "deskhand.iss"
DMG = ROOT / "packaging" / "macos" / "dmg_settings.py"
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
ICONS = ROOT / "resources" / "icons"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["version"]


def _spec_packages() -> set[str]:
    match = re.search(r"^OWN_PACKAGES = \(([^)]*)\)", SPEC.read_text("utf-8"), re.M)
    assert match, "deskhand.spec must list OWN_PACKAGES"
    return set(re.findall(r'"([\w.]+)"', match.group(1)))


def test_spec_collects_every_tool_implementation() -> None:
    collected = _spec_packages()
    assert {"tools", "integrations", "app"} <= collected
    assert "collect_submodules(package" in SPEC.read_text("utf-8")
    registry = ToolRegistry.default(None, entry_points=False)
    assert not registry.errors
    categories = {p.parent.name for p in (ROOT / "tools").glob("*/manifest.py")}
    assert categories
    seen_categories = set()
    for manifest in registry.manifests():
        for ref in (manifest.impl, manifest.preview, manifest.escalate):
            if not isinstance(ref, str):
                continue
            module = ref.partition(":")[0]
            assert module.split(".")[0] in collected, f"{manifest.name}: {module} not collected"
            assert importlib.util.find_spec(module) is not None, f"{manifest.name}: {module}"
        if isinstance(manifest.impl, str) and manifest.impl.startswith("tools."):
            seen_categories.add(manifest.impl.split(".")[1])
    assert categories <= seen_categories  # every tools/<category> has a bundled implementation


def test_collected_packages_have_no_namespace_folders() -> None:
    """collect_submodules walks packages: a folder of modules without __init__.py is skipped."""
    for package in _spec_packages():
        for folder in [ROOT / package, *(ROOT / package).rglob("*")]:
            if folder.is_dir() and folder.name != "__pycache__" and any(folder.glob("*.py")):
                assert (folder / "__init__.py").exists(), f"{folder} would not be bundled"


def test_spec_bundles_resources_and_trims_qt_plugins() -> None:
    text = SPEC.read_text("utf-8")
    assert 'collect_data_files("resources"' in text
    assert "copy_metadata(dist)" in text and '"deskhand"' in text  # --version in the bundle
    keep = text[text.index("KEEP_PLUGINS = {") : text.index("\n}\n", text.index("KEEP_PLUGINS"))]
    for dropped in ("designer", "qmltooling", "sqldrivers", "egldeviceintegrations", "tls"):
        assert f'"{dropped}"' not in keep
    for needed in ("platforms", "imageformats", "iconengines", "qxcb", "qwindows", "qcocoa"):
        assert f'"{needed}"' in keep
    assert "launcher.py" in text and (ROOT / "packaging" / "launcher.py").exists()


def test_version_flag(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"deskhand {VERSION}"

    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert version() == VERSION  # read from pyproject.toml


def test_desktop_entry_is_valid() -> None:
    entry = configparser.ConfigParser(interpolation=None, strict=True)
    entry.optionxform = str  # keys are case-sensitive
    entry.read(DESKTOP, encoding="utf-8")
    assert entry.sections() == ["Desktop Entry"]
    d = entry["Desktop Entry"]
    assert d["Type"] == "Application" and d["Name"] == "Deskhand"
    assert d["Exec"].split()[0] == "deskhand" == d["TryExec"]
    assert d["Icon"] == "deskhand" and d["Terminal"] == "false"
    assert d["Categories"].endswith(";") and d["Keywords"].endswith(";")
    script = BUILD_LINUX.read_text("utf-8")
    assert '"$PKG/usr/bin/deskhand"' in script  # Exec resolves to the launcher on PATH
    assert "/opt/deskhand/deskhand" in (ROOT / "packaging/linux/deskhand-launcher.sh").read_text()
    assert "usr/share/icons/hicolor" in script and "usr/share/applications" in script
    if shutil.which("desktop-file-validate"):
        subprocess.run(["desktop-file-validate", str(DESKTOP)], check=True)


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", data[16:24])


def test_icons_at_every_platform_size() -> None:
    for size in (16, 24, 32, 48, 64, 128, 256, 512, 1024):
        assert _png_size(ICONS / f"deskhand-{size}.png") == (size, size)
    ico = (ICONS / "deskhand.ico").read_bytes()
    reserved, kind, count = struct.unpack("<HHH", ico[:6])
    assert (reserved, kind) == (0, 1) and count >= 6
    sizes = {ico[6 + 16 * i] or 256 for i in range(count)}
    assert {16, 32, 48, 256} <= sizes
    icns = (ICONS / "deskhand.icns").read_bytes()
    assert icns[:4] == b"icns" and struct.unpack(">I", icns[4:8])[0] == len(icns)
    assert b"ic10" in icns and b"ic07" in icns  # 1024 (512@2x) and 128


def test_inno_setup_script() -> None:
    text = ISS.read_text("utf-8")
    assert "PrivilegesRequired=lowest" in text  # per user
    assert 'Name: "desktopicon"' in text and "Flags: unchecked" in text  # optional shortcut
    assert '{group}\\Deskhand"' in text and "{uninstallexe}" in text  # Start menu + uninstall
    assert "[UninstallDelete]" in text
    here = ISS.parent
    for key in ("SetupIconFile=", 'Source: "'):
        raw = text.split(key, 1)[1].split('"', 1)[0].split()[0].rstrip("*").rstrip("\\")
        target = (here / Path(*PureWindowsPath(raw).parts)).resolve()
        assert target.is_relative_to(ROOT), raw
        if key == "SetupIconFile=":
            assert target.is_file(), target
        else:  # the PyInstaller onedir output: COLLECT(name="deskhand") in build/dist
            assert target == ROOT / "build" / "dist" / "deskhand"
    assert "OutputDir=..\\..\\dist" in text


def test_dmg_settings_and_app_bundle() -> None:
    text = DMG.read_text("utf-8")
    assert 'defines.get("app", "build/dist/Deskhand.app")' in text
    assert (ROOT / re.search(r'badge_icon = "([^"]+)"', text).group(1)).is_file()
    assert '"Applications": "/Applications"' in text
    spec = SPEC.read_text("utf-8")
    assert 'name="Deskhand.app"' in spec and "deskhand.icns" in spec
    assert "CFBundleShortVersionString" in spec
    assert (ROOT / "packaging" / "macos" / "SIGNING.md").is_file()


def test_release_workflow() -> None:
    yaml = pytest.importorskip("yaml")
    flow = yaml.safe_load(WORKFLOW.read_text("utf-8"))
    triggers = flow[True] if True in flow else flow["on"]  # YAML 1.1 reads `on` as True
    assert triggers["push"]["tags"] == ["v*"]
    build = flow["jobs"]["build"]
    oses = [entry["os"] for entry in build["strategy"]["matrix"]["include"]]
    assert {o.split("-")[0] for o in oses} == {"ubuntu", "windows", "macos"}
    steps = WORKFLOW.read_text("utf-8")
    assert "./scripts/build-linux.sh" in (ROOT / "scripts" / "package-test.sh").read_text("utf-8")
    for needed in (
        "./scripts/package-test.sh",
        "packaging\\deskhand.spec",
        "packaging\\windows\\deskhand.iss",
        "packaging/macos/dmg_settings.py",
        "build/dist/Deskhand.app",
        "actions/upload-artifact",
    ):
        assert needed in steps, needed
    release = flow["jobs"]["release"]
    assert "refs/tags/" in release["if"] and release["needs"] == "build"
