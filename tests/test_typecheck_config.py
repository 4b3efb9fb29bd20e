"""The type check CI runs (mypy, configured in pyproject.toml) covers the whole tree — the
core, the tools, the integrations, the CLI and the window — and nobody silences it with new
`# type: ignore` comments.

An ignore hides a real disagreement between the code and its types; the way out is to fix the
types or the code (a Protocol, a typed wrapper, a narrower annotation), never to add one.
MAX_IGNORES is how many are left (each still needed, which `warn_unused_ignores` proves): a
ratchet that may only go down.
"""

from __future__ import annotations

import io
import tokenize
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ("app", "tools", "integrations")
#: The `# type: ignore` comments left in CHECKED. Lower it when you remove one.
MAX_IGNORES = 18
#: What `mypy --strict` turns on, required below the window.
STRICT_FLAGS = (
    "warn_return_any",
    "disallow_any_generics",
    "disallow_subclassing_any",
    "disallow_untyped_calls",
    "disallow_untyped_decorators",
    "no_implicit_reexport",
)


def _mypy_config() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        config = tomllib.load(f)
    mypy = config["tool"]["mypy"]
    assert isinstance(mypy, dict)
    return mypy


def _ignore_comments(path: Path) -> list[str]:
    """`# type: ignore` comments (real comments, not text in strings) in one file."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text("utf-8")).readline)
    return [
        f"{path.relative_to(ROOT)}:{tok.start[0]}"
        for tok in tokens
        if tok.type == tokenize.COMMENT and "type:" in tok.string and "ignore" in tok.string
    ]


def test_mypy_checks_the_whole_tree_and_the_core_strictly() -> None:
    mypy = _mypy_config()
    assert sorted(mypy["files"]) == sorted(CHECKED)
    for flag in (
        "warn_unused_ignores",
        "check_untyped_defs",
        "disallow_untyped_defs",
        "disallow_incomplete_defs",
        "strict_equality",
    ):
        assert mypy[flag] is True, flag
    assert not any("follow_imports" in o for o in mypy["overrides"])  # nothing half-checked
    strict = [
        o
        for o in mypy["overrides"]
        if {"app.core.*", "tools.*", "integrations.*"} <= set(o["module"])
    ]
    assert strict and all(strict[0][flag] is True for flag in STRICT_FLAGS)


def test_no_library_is_exempted_wholesale() -> None:
    """Missing types are excused per library, so a typo in our own imports still fails."""
    assert "ignore_missing_imports" not in _mypy_config()


def test_ci_runs_mypy_after_ruff() -> None:
    script = (ROOT / "scripts/test.sh").read_text("utf-8")
    assert '"$VENV/bin/mypy"' in script
    assert script.index('"$VENV/bin/ruff" check') < script.index('"$VENV/bin/mypy"')
    with (ROOT / "pyproject.toml").open("rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]["test"]
    assert any(req.startswith("mypy") for req in extras)


def test_no_new_type_ignore_comments() -> None:
    found = [
        where
        for folder in CHECKED
        for path in sorted((ROOT / folder).rglob("*.py"))
        for where in _ignore_comments(path)
    ]
    assert len(found) <= MAX_IGNORES, (
        f"{len(found)} `# type: ignore` comments (at most {MAX_IGNORES}): fix the types or the "
        "code instead of silencing mypy:\n" + "\n".join(found)
    )
