"""Skills: folders with a SKILL.md (YAML front matter `name`, `description`; a markdown body)
and optional scripts or resources beside it.

Progressive disclosure: the system prompt lists names and descriptions; `skill_load` returns
a skill's body and its files when the model needs it; scripts run only through the
`skill_run_script` tool (EXECUTE, so the user approves each run).

Skills are found in `<home>/skills/` and the folders in `settings.skills.folders`; a skill
named in `settings.skills.disabled` is left out. A malformed SKILL.md is skipped with a
warning, never an error.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core.threads import off_gui_thread

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
MAX_SKILL_BYTES = 256_000
MAX_LISTED_FILES = 200
MAX_DESCRIPTION = 300
PROMPT_BUDGET = 4000
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.DOTALL)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: Environment variables a skill script does not inherit (credentials).
_SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
#: How scripts are started, by suffix; anything else must be executable itself.
_INTERPRETERS: dict[str, tuple[str, ...]] = {
    ".py": (sys.executable,),
    ".sh": ("sh",),
    ".bash": ("bash",),
    ".js": ("node",),
    ".mjs": ("node",),
    ".rb": ("ruby",),
    ".pl": ("perl",),
    ".ps1": ("powershell", "-NoProfile", "-ExecutionPolicy", "Bypass", "-File"),
    ".bat": ("cmd", "/c"),
    ".cmd": ("cmd", "/c"),
}


class SkillError(ValueError):
    """A skill that cannot be loaded or a script that cannot run; meant for the model."""


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    folder: Path  # absolute, resolved

    @property
    def skill_file(self) -> Path:
        return self.folder / SKILL_FILE

    def body(self) -> str:
        """The markdown after the front matter, read fresh (the user may edit it)."""
        _, body = parse_skill_md(_read(self.skill_file))
        return body

    def files(self) -> list[Path]:
        """Absolute paths of the files beside SKILL.md (recursively, hidden ones skipped)."""
        found: list[Path] = []
        for root, dirs, names in os.walk(self.folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
            for name in sorted(names):
                if not name.startswith(".") and len(found) < MAX_LISTED_FILES:
                    found.append(Path(root) / name)
        return found


@dataclass(frozen=True)
class ScriptRun:
    command: list[str]
    exit_code: int | None  # None: killed (timeout or cancelled)
    output: str
    truncated: bool
    timed_out: bool
    cancelled: bool
    seconds: float


def _read(path: Path) -> str:
    with path.open("rb") as fh:
        raw = fh.read(MAX_SKILL_BYTES + 1)
    if len(raw) > MAX_SKILL_BYTES:
        raise SkillError(f"{path} is larger than {MAX_SKILL_BYTES} bytes")
    return raw.decode("utf-8-sig")


def parse_skill_md(text: str) -> tuple[dict[str, str], str]:
    """The front matter (`name`, `description` checked) and the body; SkillError if malformed."""
    import yaml

    match = _FRONT_MATTER.match(text)
    if match is None:
        raise SkillError("SKILL.md must start with YAML front matter between '---' lines")
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise SkillError(f"invalid YAML front matter: {exc}") from None
    if not isinstance(meta, dict):
        raise SkillError("the front matter must be a mapping with name and description")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not _NAME.match(name.strip()):
        raise SkillError(
            f"`name` must be a short identifier (letters, digits, - _ .); got {name!r}"
        )
    if not isinstance(description, str) or not description.strip():
        raise SkillError("`description` must be a non-empty string")
    fields = {"name": name.strip(), "description": " ".join(description.split())}
    return fields, match.group(2).strip()


class SkillLibrary:
    """The skills in some folders (earlier folders win on duplicate names), rescanned on use."""

    def __init__(self, folders: list[Path], disabled: frozenset[str] = frozenset()) -> None:
        self.folders = [Path(os.path.expanduser(f)) for f in folders]
        self.disabled = disabled

    @classmethod
    def from_settings(cls, home: Path, settings: Any) -> SkillLibrary:
        skills = getattr(settings, "skills", None)
        extra = [Path(f) for f in getattr(skills, "folders", [])]
        disabled = frozenset(getattr(skills, "disabled", []))
        return cls([home / "skills", *extra], disabled)

    @off_gui_thread  # reads every skill folder's SKILL.md
    def discover(self) -> list[Skill]:
        found: dict[str, Skill] = {}
        for folder in self.folders:
            for skill in _scan(folder):
                if skill.name in self.disabled:
                    continue
                if skill.name in found:
                    log.warning(
                        "skill %s in %s ignored: %s has one by that name",
                        skill.name,
                        skill.folder,
                        found[skill.name].folder,
                    )
                    continue
                found[skill.name] = skill
        return sorted(found.values(), key=lambda s: s.name)

    def get(self, name: str) -> Skill:
        for skill in self.discover():
            if skill.name == name:
                return skill
        names = ", ".join(s.name for s in self.discover()) or "none"
        raise SkillError(f"there is no skill {name!r} (available: {names})")

    def prompt_section(self, budget: int = PROMPT_BUDGET) -> str:
        """Names and one-line descriptions for the system prompt ("" when there are none)."""
        skills = self.discover()
        if not skills:
            return ""
        lines = [
            "Skills (instructions for particular tasks; call skill_load(name) to read one "
            "before doing such a task):"
        ]
        used = len(lines[0])
        for skill in skills:
            description = skill.description
            if len(description) > MAX_DESCRIPTION:
                description = description[: MAX_DESCRIPTION - 1].rstrip() + "…"
            line = f"- {skill.name}: {description}"
            if used + len(line) + 1 > budget:
                lines.append(f"- … {len(skills) - len(lines) + 1} more (skill_list shows all)")
                break
            lines.append(line)
            used += len(line) + 1
        return "\n".join(lines)

    # ---- scripts ----------------------------------------------------------------------

    def script_path(self, name: str, script: str) -> tuple[Skill, Path]:
        """The real path of `script` inside the skill's folder; SkillError if it escapes."""
        skill = self.get(name)
        candidate = Path(script)
        if not candidate.is_absolute():
            candidate = skill.folder / candidate
        real = Path(os.path.realpath(candidate))
        if not real.is_relative_to(skill.folder) or real == skill.folder:
            raise SkillError(f"{script!r} is not inside the skill folder {skill.folder}")
        if not real.is_file():
            raise SkillError(f"the skill {name} has no file {script!r}")
        return skill, real

    def command(self, name: str, script: str, args: list[str]) -> tuple[Skill, list[str]]:
        skill, path = self.script_path(name, script)
        interpreter = _INTERPRETERS.get(path.suffix.lower())
        if interpreter is None and not os.access(path, os.X_OK):
            known = ", ".join(sorted(_INTERPRETERS))
            raise SkillError(f"{script!r} is not executable and not one of: {known}")
        return skill, [*(interpreter or ()), str(path), *args]

    def run_script(
        self,
        name: str,
        script: str,
        args: list[str] | None = None,
        *,
        timeout: float = 60.0,
        output_cap: int = 20_000,
        cancel: threading.Event | None = None,
    ) -> ScriptRun:
        """Run a script from the skill's folder (cwd = the folder), stdout and stderr
        together, killed after `timeout` seconds or on `cancel`; output capped."""
        skill, command = self.command(name, script, list(args or []))
        env = {k: v for k, v in os.environ.items() if not _SECRET_ENV.search(k)}
        env["SKILL_DIR"] = str(skill.folder)
        started = time.monotonic()
        with tempfile.TemporaryFile() as out:
            try:
                proc = subprocess.Popen(
                    command,
                    cwd=skill.folder,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=os.name == "posix",
                )
            except OSError as exc:
                raise SkillError(f"could not start {command[0]}: {exc}") from None
            timed_out = cancelled = False
            while proc.poll() is None:
                if cancel is not None and cancel.is_set():
                    cancelled = True
                elif time.monotonic() - started > timeout:
                    timed_out = True
                if timed_out or cancelled:
                    _kill(proc)
                    break
                time.sleep(0.02)
            out.seek(0)
            raw = out.read(output_cap + 1)
        text = raw[:output_cap].decode("utf-8", errors="replace")
        return ScriptRun(
            command=command,
            exit_code=None if (timed_out or cancelled) else proc.returncode,
            output=text,
            truncated=len(raw) > output_cap,
            timed_out=timed_out,
            cancelled=cancelled,
            seconds=round(time.monotonic() - started, 3),
        )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the script and whatever it started (its own process group on POSIX)."""
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except OSError:
        pass
    proc.wait()


def _scan(folder: Path) -> list[Skill]:
    """Skills directly inside `folder` (each a subfolder with SKILL.md)."""
    try:
        entries = sorted(p for p in folder.iterdir() if p.is_dir())
    except FileNotFoundError:
        return []
    except OSError as exc:
        log.warning("cannot read the skills folder %s: %s", folder, exc)
        return []
    skills = []
    for entry in entries:
        skill_file = entry / SKILL_FILE
        if not skill_file.is_file():
            continue
        try:
            meta, _ = parse_skill_md(_read(skill_file))
        except (OSError, UnicodeDecodeError, SkillError) as exc:
            log.warning("skipping the skill in %s: %s", entry, exc)
            continue
        skills.append(Skill(meta["name"], meta["description"], Path(os.path.realpath(entry))))
    return skills
