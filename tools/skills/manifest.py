"""Skill tools: list skills, load one's instructions, run one of its scripts (approved)."""

from __future__ import annotations

from pydantic import Field

from tools.spec import DeferredParams, Operation, ToolManifest

IMPL = "tools.skills.actions"


class ListSkills(DeferredParams):
    pass


class LoadSkill(DeferredParams):
    name: str = Field(..., min_length=1, description="Skill name, as listed in the system prompt")


class RunScript(DeferredParams):
    name: str = Field(..., min_length=1, description="Skill name")
    script: str = Field(
        ...,
        min_length=1,
        description="Script path inside the skill folder, e.g. scripts/x.py",
    )
    args: list[str] = Field(default_factory=list, description="Command-line arguments")
    timeout: float = Field(60, gt=0, le=600, description="Seconds before the script is stopped")


MANIFESTS = [
    ToolManifest(
        name="skill_list",
        category="skills",
        description="List the installed skills with their descriptions.",
        params=ListSkills,
        operations=frozenset({Operation.READ}),
        impl=f"{IMPL}:skill_list",
        timeout=20,
    ),
    ToolManifest(
        name="skill_load",
        category="skills",
        description="Load a skill's instructions (SKILL.md body) and list its files with "
        "absolute paths, which the file tools can read.",
        params=LoadSkill,
        operations=frozenset({Operation.READ}),
        impl=f"{IMPL}:skill_load",
        timeout=20,
    ),
    ToolManifest(
        name="skill_run_script",
        category="skills",
        description="Run a script from a skill's folder with a timeout; returns its output "
        "(capped). The user approves each run.",
        params=RunScript,
        operations=frozenset({Operation.EXECUTE}),
        impl=f"{IMPL}:skill_run_script",
        preview=f"{IMPL}:preview_run_script",
        summary_line="tools.skills.approval:summary_run_script",
        timeout=630,  # the script's own timeout (≤ 600 s) governs
    ),
]
