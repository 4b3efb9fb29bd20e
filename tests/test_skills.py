"""Skills: discovery in <home>/skills and extra folders, progressive disclosure (prompt list,
skill_load), scripts run only through the approved EXECUTE tool, malformed skills skipped."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import pytest

from app.core.approval import Verdict
from app.core.runtime import Runtime
from app.core.settings import Settings
from app.core.skills import SkillLibrary
from tests.test_approval import verdict
from tools.registry import ToolRegistry
from tools.runner import ToolRunner, always_asks
from tools.spec import ToolContext


def make_skill(root: Path, folder: str, front: str, body: str = "Do the thing.") -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n", encoding="utf-8")
    return path


@pytest.fixture
def skills_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    pdf = make_skill(
        home / "skills",
        "pdf",
        "name: pdf-tools\ndescription: Fill and merge PDF forms.",
        "# PDF\nRun scripts/count.py to count pages.",
    )
    (pdf / "scripts").mkdir()
    (pdf / "scripts" / "count.py").write_text(
        "import sys\nprint('pages:', len(sys.argv) - 1)\n", encoding="utf-8"
    )
    # under test: a script that outlasts its time limit
    (pdf / "scripts" / "slow.py").write_text("import time\ntime.sleep(30)\n", encoding="utf-8")
    (pdf / "scripts" / "loud.py").write_text("print('x' * 100_000)\n", encoding="utf-8")
    (pdf / "reference.md").write_text("Field names…", encoding="utf-8")
    return home


@pytest.fixture
def runner():
    r = ToolRunner(ToolRegistry.default(None, entry_points=False))
    yield r
    r.shutdown()


def run_tool(runner: ToolRunner, name: str, args: dict, library: SkillLibrary, settings=None):
    ctx = ToolContext(home=Path("/nonexistent"), settings=settings, services={"skills": library})
    return asyncio.run(runner.run(name, args, ctx))


def test_discovers_home_and_extra_folders_and_respects_disabled(skills_home, tmp_path):
    extra = tmp_path / "extra"
    make_skill(extra, "notes", "name: notes\ndescription: Keep meeting notes tidy.")
    make_skill(extra, "old", "name: old\ndescription: Turned off.")
    make_skill(extra, "dup", "name: pdf-tools\ndescription: A second pdf-tools.")
    settings = Settings()
    settings.skills.folders = [str(extra)]
    settings.skills.disabled = ["old"]
    library = SkillLibrary.from_settings(skills_home, settings)
    skills = {s.name: s for s in library.discover()}
    assert sorted(skills) == ["notes", "pdf-tools"]
    assert skills["pdf-tools"].description == "Fill and merge PDF forms.", "home wins"
    section = library.prompt_section()
    assert "- pdf-tools: Fill and merge PDF forms." in section and "skill_load" in section
    assert "Run scripts" not in section, "bodies stay out of the prompt"


def test_malformed_skills_are_skipped_with_a_warning(skills_home, caplog):
    root = skills_home / "skills"
    (root / "nofront").mkdir()
    (root / "nofront" / "SKILL.md").write_text("just text", encoding="utf-8")
    make_skill(root, "badyaml", "name: [unclosed\ndescription: x")
    make_skill(root, "noname", "description: nameless")
    make_skill(root, "list", "- a\n- b")
    (root / "binary").mkdir()
    (root / "binary" / "SKILL.md").write_bytes(b"---\nname: \xff\xfe\n---\n")
    (root / "empty-folder").mkdir()
    with caplog.at_level(logging.WARNING, logger="app.core.skills"):
        names = [s.name for s in SkillLibrary([root]).discover()]
    assert names == ["pdf-tools"]
    warned = " ".join(r.getMessage() for r in caplog.records)
    for folder in ("nofront", "badyaml", "noname", "list", "binary"):
        assert folder in warned


def test_skill_load_returns_the_body_and_absolute_file_paths(skills_home, runner, tmp_path):
    library = SkillLibrary([skills_home / "skills"])
    settings = Settings()
    settings.files.allowed_roots = [str(tmp_path)]
    result = run_tool(runner, "skill_load", {"name": "pdf-tools"}, library, settings)
    assert result.ok, result.content
    assert "Run scripts/count.py" in result.content
    folder = (skills_home / "skills" / "pdf").resolve()
    assert result.data["folder"] == str(folder)
    assert str(folder / "scripts" / "count.py") in result.data["files"]
    assert all(Path(f).is_absolute() for f in result.data["files"])
    assert "can read" in result.content

    settings.files.allowed_roots = [str(tmp_path / "elsewhere")]
    (tmp_path / "elsewhere").mkdir()
    fenced = run_tool(runner, "skill_load", {"name": "pdf-tools"}, library, settings)
    assert fenced.ok and "cannot read" in fenced.content, "says when the sandbox would refuse"

    missing = run_tool(runner, "skill_load", {"name": "nope"}, library, settings)
    assert not missing.ok and "pdf-tools" in missing.content


def test_run_script_needs_approval_and_runs_in_the_skill_folder(skills_home, runner):
    manifest = runner.registry.get("skill_run_script")
    assert verdict(manifest) is Verdict.ASK
    assert verdict(runner.registry.get("skill_load")) is Verdict.ALLOW
    library = SkillLibrary([skills_home / "skills"])
    ok = run_tool(
        runner,
        "skill_run_script",
        {"name": "pdf-tools", "script": "scripts/count.py", "args": ["a", "b"]},
        library,
    )
    assert ok.ok and "pages: 2" in ok.content and ok.data["exit_code"] == 0
    assert ok.data["command"][0] == sys.executable
    params = manifest.params.model_validate({"name": "pdf-tools", "script": "scripts/count.py"})
    ctx = ToolContext(home=Path("/nonexistent"), services={"skills": library})
    preview = asyncio.run(runner.classify(manifest, params, ctx, asks=always_asks)).preview
    assert preview and "count.py" in preview and "60 s" in preview, "the user sees the command"


def test_run_script_timeout_cap_and_escape(skills_home, runner, tmp_path):
    library = SkillLibrary([skills_home / "skills"])
    slow = run_tool(
        runner,
        "skill_run_script",
        {"name": "pdf-tools", "script": "scripts/slow.py", "timeout": 0.5},
        library,
    )
    assert not slow.ok and slow.data["timed_out"] and "timeout" in slow.content
    loud = run_tool(
        runner, "skill_run_script", {"name": "pdf-tools", "script": "scripts/loud.py"}, library
    )
    assert loud.ok and loud.data["truncated"] and "truncated" in loud.content
    outside = tmp_path / "evil.py"
    outside.write_text("print('escaped')\n", encoding="utf-8")
    for script in ("../../evil.py", str(outside), "SKILL.md/../../../evil.py"):
        refused = run_tool(
            runner, "skill_run_script", {"name": "pdf-tools", "script": script}, library
        )
        assert not refused.ok and "escaped" not in refused.content
    noexec = run_tool(
        runner, "skill_run_script", {"name": "pdf-tools", "script": "reference.md"}, library
    )
    assert not noexec.ok and "not executable" in noexec.content


def test_runtime_offers_skills_in_the_prompt_and_as_a_service(skills_home):
    runtime = Runtime(skills_home, entry_points=False)
    try:
        prompt = runtime.system_prompt()
        assert "pdf-tools: Fill and merge PDF forms." in prompt
        assert "skill_load" in {m.name for m in runtime.new_session().visible()}
        services = runtime.services()
        assert [s.name for s in services["skills"].discover()] == ["pdf-tools"]
        assert services["memory"].list() == []
    finally:
        runtime.close()
