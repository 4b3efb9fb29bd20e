"""Bind mounts may not hand a container what no tool may touch.

Deskhand's own home and the credential stores of tools/fs/protected.py are out of every
tool's reach "whatever the rules say"; mounting one into a container (or a folder that holds
one, such as the whole home) would reach them another way. Checked against this machine's
catalogue, by name and by identity, before the approval question is asked.
"""

from __future__ import annotations

import os
from pathlib import Path

from tools.spec import ToolContext, ToolError


def refuse_protected_mounts(sources: list[str], ctx: ToolContext) -> None:
    """Raises ToolError naming the first bind-mount source that is, lies in, or holds a
    protected place. Named volumes (no slash) are Docker's own and are not checked."""
    from tools.fs.protected import protected_places

    places = protected_places(Path.home(), getattr(ctx, "home", None))
    for source in sources:
        if "/" not in source and not source.startswith("~"):
            continue  # a named volume
        real = Path(os.path.realpath(os.path.expanduser(source)))
        hit = places.match(real)
        if hit is None:
            inside = places.inside(real)
            hit = inside[0] if inside else None
        if hit is not None:
            raise ToolError(
                f"the volume source {source} would give the container {hit.label} "
                f"({hit.place}), which Deskhand never lets a tool read or change; mount a "
                "narrower folder"
            )
