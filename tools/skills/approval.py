"""Approval hook of skill_run_script: one plain line saying which script of which skill runs
with which arguments. Written from the arguments only (the skill's own files are not read:
what a skill says about itself is not to be trusted on an approval card)."""

from __future__ import annotations

import shlex
from typing import Any

from tools.integrations.approval import clean, quoted
from tools.spec import ToolContext


def summary_run_script(args: Any, ctx: ToolContext) -> str:
    line = f"Run {clean(args.script, 60)} of the skill {clean(args.name, 40)}"
    if args.args:
        line += f" with {quoted(shlex.join(args.args))}"
    return line
