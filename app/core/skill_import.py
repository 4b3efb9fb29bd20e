"""Importing a skill folder or a skill .zip into <home>/skills (blocking: a view runs it on a
worker thread).

An import is checked before anything lands in <home>/skills: the SKILL.md must parse, the
name must be new, and a zip may hold no absolute path, no `..`, no link and nothing too big.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from app.core.skills import SKILL_FILE, SkillError, _read, parse_skill_md

MAX_ZIP_FILES = 2000
MAX_ZIP_BYTES = 50_000_000

#: What an import raises when nothing was imported.
IMPORT_ERRORS: tuple[type[Exception], ...] = (SkillError, OSError, shutil.Error)


def _skill_name(folder: Path) -> str:
    skill_file = folder / SKILL_FILE
    if not skill_file.is_file():
        raise SkillError(f"{folder.name} has no {SKILL_FILE}")
    try:
        meta, _ = parse_skill_md(_read(skill_file))
    except UnicodeDecodeError:
        raise SkillError(f"{SKILL_FILE} is not UTF-8 text") from None
    return meta["name"]


def _skill_root(folder: Path) -> Path:
    """The folder holding SKILL.md: `folder` itself or its single subfolder."""
    if (folder / SKILL_FILE).is_file():
        return folder
    entries = [p for p in folder.iterdir() if not p.name.startswith((".", "__MACOSX"))]
    if len(entries) == 1 and entries[0].is_dir() and (entries[0] / SKILL_FILE).is_file():
        return entries[0]
    raise SkillError(f"no {SKILL_FILE} at the top of the import")


def _safe_extract(archive: Path, target: Path) -> None:
    """Extract `archive` into `target`, refusing any member that could land outside it."""
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise SkillError(f"{archive.name} is not a readable zip file: {exc}") from None
    with zf:
        members = zf.infolist()
        if len(members) > MAX_ZIP_FILES:
            raise SkillError(f"the zip holds more than {MAX_ZIP_FILES} files")
        if sum(m.file_size for m in members) > MAX_ZIP_BYTES:
            raise SkillError(f"the zip unpacks to more than {MAX_ZIP_BYTES // 1_000_000} MB")
        root = target.resolve()
        for member in members:
            name = member.filename.replace("\\", "/")
            parts = PurePosixPath(name).parts
            if (
                name.startswith("/")
                or (parts and parts[0].endswith(":"))
                or ".." in parts
                or "\0" in name
            ):
                raise SkillError(f"the zip has an unsafe path: {member.filename!r}")
            if stat.S_ISLNK(member.external_attr >> 16):
                raise SkillError(f"the zip has a link, which is not allowed: {member.filename!r}")
            dest = (root / name).resolve()
            if not dest.is_relative_to(root):
                raise SkillError(f"the zip has an unsafe path: {member.filename!r}")
        for member in members:
            dest = root / member.filename.replace("\\", "/")
            if member.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                with zf.open(member) as src, dest.open("wb") as out:
                    shutil.copyfileobj(src, out)  # never more than the declared size
            except (zipfile.BadZipFile, RuntimeError, NotImplementedError) as exc:
                # RuntimeError: encrypted; NotImplementedError: an unknown compression
                raise SkillError(f"cannot extract {member.filename!r}: {exc}") from None


def make_skills_folder(skills_dir: Path) -> None:
    """Create <home>/skills (and its parents) if missing, so it can be opened and filled."""
    skills_dir.mkdir(parents=True, exist_ok=True)


def import_skill(source: Path, skills_dir: Path) -> str:
    """Copy a skill folder, or extract a skill zip, into `skills_dir/<name>`; the name.
    SkillError (nothing written) when it is not a valid, new skill."""
    source = Path(source)
    make_skills_folder(skills_dir)
    if source.is_dir():
        name = _skill_name(source)
        dest = skills_dir / name
        if dest.exists():
            raise SkillError(f"a skill folder named {name!r} already exists")
        if dest.resolve().is_relative_to(source.resolve()):
            raise SkillError("cannot import a folder into itself")
        # links stay links: a skill script that points outside its folder is refused when run
        shutil.copytree(source, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        return name
    if not source.is_file():
        raise SkillError(f"{source} does not exist")
    with tempfile.TemporaryDirectory(dir=skills_dir, prefix=".import-") as tmp:
        content = Path(tmp) / "content"
        content.mkdir()
        _safe_extract(source, content)
        root = _skill_root(content)
        name = _skill_name(root)
        dest = skills_dir / name
        if dest.exists():
            raise SkillError(f"a skill folder named {name!r} already exists")
        os.replace(root, dest)  # same file system: the skill appears whole or not at all
        return name
