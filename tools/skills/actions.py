"""Skill tool bodies, on the skill library the app hands in as `ctx.service("skills")`."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from tools.skills.manifest import ListSkills, LoadSkill, RunScript
from tools.spec import ToolContext, ToolError, ToolResult
from tools.views import SkillLibraryView

OUTPUT_CAP = 20_000
P = ParamSpec("P")
T = TypeVar("T")


def _library(ctx: ToolContext) -> SkillLibraryView:
    return ctx.service("skills")


def _guard(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    try:
        return fn(*args, **kwargs)
    except ValueError as exc:  # SkillError: unknown skill, malformed SKILL.md, bad script
        raise ToolError(str(exc)) from None
    except OSError as exc:
        raise ToolError(f"cannot read the skill: {exc}") from None


def _readable_note(ctx: ToolContext, folder: Path) -> str:
    """Whether the file tools may read the skill's folder (they obey the fs sandbox)."""
    from tools.fs.sandbox import Sandbox

    sandbox = Sandbox.from_context(ctx)
    if sandbox.is_allowed(folder):
        return "The file tools can read these files."
    home = getattr(ctx, "home", None)
    if home is not None and (folder == Path(home) or Path(home) in folder.parents):
        return (
            "Note: these files live in Deskhand's own folder, which the file tools never "
            "read. Everything needed is above; scripts run only through skill_run_script."
        )
    return (
        f"Note: the file tools cannot read {folder}: it is outside the folders Deskhand may "
        f"touch ({sandbox.roots_text()}). Everything needed is above; or ask the user to add "
        "the folder in Settings → Files."
    )


def skill_list(args: ListSkills, ctx: ToolContext) -> ToolResult:
    skills = _guard(_library(ctx).discover)
    if not skills:
        return ToolResult(ok=True, content="No skills are installed.", data={"skills": []})
    return ToolResult(
        ok=True,
        content="\n".join(f"- {s.name}: {s.description}" for s in skills),
        data={
            "skills": [
                {"name": s.name, "description": s.description, "folder": str(s.folder)}
                for s in skills
            ]
        },
    )


def skill_load(args: LoadSkill, ctx: ToolContext) -> ToolResult:
    skill = _guard(_library(ctx).get, args.name)
    body = _guard(skill.body)
    files = [str(p) for p in skill.files()]
    listing = "\n".join(f"- {f}" for f in files)
    content = (
        f"# Skill: {skill.name}\nFolder: {skill.folder}\n\n{body}\n\n"
        f"Files in the skill folder:\n{listing}\n{_readable_note(ctx, skill.folder)}\n"
        "Scripts run only through skill_run_script."
    )
    return ToolResult(
        ok=True,
        content=content,
        data={"name": skill.name, "folder": str(skill.folder), "body": body, "files": files},
    )


def preview_run_script(args: RunScript, ctx: ToolContext) -> str:
    skill, command = _guard(_library(ctx).command, args.name, args.script, args.args)
    return f"Run in {skill.folder} (stopped after {args.timeout:g} s):\n{shlex.join(command)}"


def skill_run_script(args: RunScript, ctx: ToolContext) -> ToolResult:
    run = _guard(
        _library(ctx).run_script,
        args.name,
        args.script,
        args.args,
        timeout=args.timeout,
        output_cap=OUTPUT_CAP,
        cancel=ctx.cancel_event,
    )
    ctx.check_cancelled()
    if run.timed_out:
        status = f"stopped after the {args.timeout:g} s timeout"
    else:
        status = f"exit code {run.exit_code}"
    cap = f"\n[output truncated at {OUTPUT_CAP} characters]" if run.truncated else ""
    data = {
        "command": run.command,
        "exit_code": run.exit_code,
        "timed_out": run.timed_out,
        "seconds": run.seconds,
        "truncated": run.truncated,
    }
    content = f"{args.script} ({status}):\n{run.output}{cap}"
    if run.timed_out or run.exit_code != 0:
        return ToolResult(ok=False, content=content, data=data, error=status)
    return ToolResult(ok=True, content=content, data=data)
