"""The type check CI runs (mypy, configured in pyproject.toml) covers the core, the tools and
the integrations, and nobody silences it with new `# type: ignore` comments.

An ignore hides a real disagreement between the code and its types; the way out is to fix the
types or the code (a Protocol, a typed wrapper, a narrower annotation), never to add one.
MAX_IGNORES is how many were left when the check was introduced (each still needed, which
`warn_unused_ignores` proves): it may only go down.
"""

from __future__ import annotations

import io
import tokenize
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ("app/core", "tools", "integrations")
#: The `# type: ignore` comments in CHECKED when mypy joined CI. Lower it when you remove one.
MAX_IGNORES = 13


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


def test_mypy_checks_the_core_the_tools_and_the_integrations() -> None:
    mypy = _mypy_config()
    assert sorted(mypy["files"]) == sorted(CHECKED)
    assert mypy["warn_unused_ignores"] is True
    assert mypy["check_untyped_defs"] is True
    strict = [
        o
        for o in mypy["overrides"]
        if {"app.core.*", "tools.*", "integrations.*"} <= set(o["module"])
    ]
    assert strict and strict[0]["disallow_untyped_defs"] is True


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
