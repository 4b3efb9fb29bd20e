"""Shared set-up for the benchmarks that talk to the scripted model (tests/fakellm.py):
a home with a provider account pointing at it, an allowed folder with files the read-only
file tools can list and read, and the scripted turns of one user turn.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.fakellm import ScriptedLLM, Turn, text, tool_calls  # noqa: E402

#: What the scripted model streams as its final answer (~600 characters, markdown).
ANSWER = (
    "Here is what I found in the folder.\n\n"
    "- **notes.md** holds the meeting notes from Monday, with three open action items.\n"
    "- **plan.txt** lists the steps for the migration; step 4 is still marked *todo*.\n\n"
    "```python\nfor step in plan:\n    run(step)\n```\n\n"
    "| file | lines | changed |\n|------|-------|---------|\n"
    "| notes.md | 40 | Monday |\n| plan.txt | 12 | Friday |\n\n"
    "Tell me if you want me to draft the missing step or summarise the action items."
)
NOTES = "# Notes\n\n" + "".join(
    f"- item {i}: follow up with the team on topic {i}\n" for i in range(40)
)
PLAN = "".join(f"{i}. step {i} of the migration\n" for i in range(12))


def no_proxy_for_loopback() -> None:
    """A proxy configured on the machine must never see the loopback traffic."""
    for name in ("NO_PROXY", "no_proxy"):
        current = os.environ.get(name, "")
        os.environ[name] = ",".join(filter(None, [current, "127.0.0.1", "localhost"]))


def make_files(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "notes.md").write_text(NOTES, "utf-8")
    (root / "plan.txt").write_text(PLAN, "utf-8")


def configure_home(home: Path, base_url: str, root: Path) -> str:
    """A provider account on the scripted server (active), `root` allowed. Returns its id."""
    from app.core.paths import settings_path
    from app.core.settings import ProviderAccount, SettingsStore

    account = ProviderAccount(kind="openai", label="Scripted", base_url=base_url, model="m")

    def change(settings: object) -> None:
        settings.providers.append(account)  # type: ignore[attr-defined]
        settings.active_provider = account.id  # type: ignore[attr-defined]
        settings.files.allowed_roots = [str(root)]  # type: ignore[attr-defined]

    SettingsStore(settings_path(home)).update(change)
    return account.id


def tool_turn(root: Path, n: int, *, calls: int = 2, chunk_size: int = 4) -> list[Turn]:
    """A user turn that lists the folder and reads files (`calls` read-only calls in one
    message), then streams the answer: two model requests."""
    wanted = [
        (f"l{n}", "fs_list_dir", {"path": str(root)}),
        (f"r{n}", "fs_read_file", {"path": str(root / "notes.md")}),
        (f"p{n}", "fs_read_file", {"path": str(root / "plan.txt")}),
    ][:calls]
    return [
        tool_calls(*wanted, text_before="Let me look at the folder."),
        text(ANSWER, chunk_size=chunk_size),
    ]


def text_turn(*, chunk_size: int = 4) -> list[Turn]:
    """A user turn answered without tools: one model request."""
    return [text(ANSWER, chunk_size=chunk_size)]


def started_llm() -> ScriptedLLM:
    no_proxy_for_loopback()
    return ScriptedLLM().start()


def rss_mib() -> float:
    """This process's resident set (VmRSS), MiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


@contextlib.contextmanager
def served(kind: str, root: Path, turns: int) -> Iterator[str]:
    """bench/llm_server.py in its own process with the `kind` script; yields its base URL."""
    with serving(Path(__file__).with_name("llm_server.py"), kind, str(root), str(turns)) as url:
        yield url


@contextlib.contextmanager
def serving(script: Path, *args: str) -> Iterator[str]:
    """A model server `script` in its own process (it prints its base URL, then serves
    until its stdin closes); yields that URL."""
    no_proxy_for_loopback()
    server = subprocess.Popen(
        [sys.executable, str(script), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None and server.stdin is not None
    try:
        yield server.stdout.readline().strip()
    finally:
        server.stdin.close()
        server.wait(timeout=10)
