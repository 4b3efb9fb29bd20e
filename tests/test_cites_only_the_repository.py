"""Every document the code, tests and docs cite is in the repository: no design notes,
research folders or peer lists kept elsewhere, and no numbers of a tracker a reader of the
repository cannot open ("issue 16", "review 17b", "see #11"). References to other
projects' public trackers (`block/goose#8808`) name their repository and stay allowed.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLACES = ("app", "tools", "integrations", "tests", "bench", "scripts", "docs", "packaging")
FILES = ("README.md",)
TEXT_SUFFIXES = frozenset(
    {".py", ".md", ".sh", ".txt", ".toml", ".yml", ".yaml", ".spec", ".iss", ".desktop"}
    | {".json", ".cfg", ".ini", ".ps1", ".bat", ".xml", ".html", ".css", ".qss", ".in", ".plist"}
)

#: Documents kept outside the repository, and tracker numbers without a repository.
OUTSIDE = re.compile(
    r"DESIGN\.md|\.\./shared\b|(?<![\w/.-])research/|\bpeers\.md"
    r"|(?<![\w/])(?:issue|review|ticket)s? ?#?\d+[a-z]?\b",
    re.IGNORECASE,
)
#: A bare "#11" in prose (comments, docstrings, Markdown); "UTS #46" names a standard.
BARE_NUMBER = re.compile(r"(?<![\w/&#])(?<!UTS )#\d+\b")


def prose_of_python(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of each comment and docstring: where a bare `#11` is a reference, while
    in a string it is data (a GitHub issue title in a test)."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    previous = tokenize.NEWLINE
    for token in tokens:
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
        elif token.type == tokenize.STRING and previous in {
            tokenize.NEWLINE,
            tokenize.NL,
            tokenize.INDENT,
            tokenize.DEDENT,
        }:
            yield token.start[0], token.string  # a string standing alone: a docstring
        if token.type not in {tokenize.COMMENT, tokenize.NL}:
            previous = token.type


def outside_references(name: str, text: str) -> list[str]:
    found = [
        f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for m in OUTSIDE.finditer(text)
    ]
    if name.endswith(".py"):
        prose = list(prose_of_python(text))
    elif name.endswith(".md"):
        prose = list(enumerate(text.splitlines(), start=1))
    else:
        prose = []
    for line, chunk in prose:
        for m in BARE_NUMBER.finditer(chunk):
            found.append(f"{name}:{line + chunk.count(chr(10), 0, m.start())}: {m.group(0)}")
    return found


def repository_texts() -> Iterator[Path]:
    for place in PLACES:
        for path in sorted((ROOT / place).rglob("*")):
            if path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts:
                yield path
    for name in FILES:
        yield ROOT / name


def test_nothing_cites_a_document_outside_the_repository():
    here = Path(__file__).resolve()
    found = [
        finding
        for path in repository_texts()
        if path.resolve() != here and path.is_file()
        for finding in outside_references(
            path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8", errors="replace")
        )
    ]
    assert found == []


@pytest.mark.parametrize(
    "text",
    [
        "See DESIGN.md for why.",
        "as ../shared/notes.md says",
        "from research/ui-study.md",
        "the list in peers.md",
        "(issue 16)",
        "fixed in issue #19",
        "review 17b: where keys go",
        "Issues 3",
    ],
)
def test_the_checker_sees_an_outside_document(text: str):
    assert outside_references("notes.txt", text) != []


def test_the_checker_sees_a_bare_tracker_number_in_prose_only():
    source = '''"""The protected places of #11."""

# as agreed in #12
TITLE = "Fix bug #3"  # data, not a reference
COLOR = "#123456"
'''
    assert outside_references("m.py", source) == ["m.py:1: #11", "m.py:3: #12"]
    assert outside_references("notes.md", "Done in #4.\n") == ["notes.md:1: #4"]


@pytest.mark.parametrize(
    "text",
    [
        "as block/goose#8808 reports",
        "see janhq/jan#6400",
        "https://github.com/block/goose/issues/8808",
        "https://example.com/research/paper",
        "UTS #46 ToASCII",
        "the docs/research-free layout",
    ],
)
def test_the_checker_lets_public_references_pass(text: str):
    assert outside_references("notes.md", text) == []
