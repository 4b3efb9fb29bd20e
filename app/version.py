"""Deskhand's version, below every other module (stdlib only: the window, the MCP client
and the command line all ask it, and none of them may pull the others in)."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path


def version() -> str:
    """The installed package's version, or pyproject.toml's in a plain checkout."""
    try:
        return importlib.metadata.version("deskhand")
    except importlib.metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        try:
            found = tomllib.loads(pyproject.read_text("utf-8"))["project"]["version"]
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"
        return str(found)
