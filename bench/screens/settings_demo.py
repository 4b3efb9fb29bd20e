"""Screenshot of the settings dialog with example data, to look at the real rendering.

A scripted model server (tests/fakellm.py) stands in for Ollama, so "Test connection"
runs its real code path before the picture is taken. Keys go to an in-memory keyring.

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python bench/screens/settings_demo.py \
         --page providers|tools|rules|sources|agents|knowledge|general [--dark] \
         [--out FILE.png] [--account OpenAI]

For the knowledge page, a temporary folder stands in for the user's home (HOME), and
three folders of generated documents are indexed there first: one up to date, one with
documents that cannot be read, one paused part-way.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from keyring.backend import KeyringBackend
from PySide6.QtWidgets import QApplication

from app.ui.settings.dialog import PAGE_KEYS as PAGES


class MemoryKeyring(KeyringBackend):
    """A keyring that forgets everything on exit: the demo must not touch the real one."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.items.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.items[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.items.pop((service, username), None)


def example_settings(runtime: object, llm_url: str) -> None:
    """Three providers (the first one active and answering), some rules and folders, and
    an agent of the user's beside Deskhand's own."""
    from app.core.runtime import Runtime
    from app.core.secrets import secret_key
    from app.core.settings import ProviderAccount, Settings

    assert isinstance(runtime, Runtime)
    local = ProviderAccount(kind="openai", label="Ollama", base_url=llm_url, model="llama3.2:3b")
    cloud = ProviderAccount(
        kind="openai", label="OpenAI", base_url="https://api.openai.com/v1", model="gpt-4.1-mini"
    )
    claude = ProviderAccount(
        kind="anthropic",
        label="Anthropic",
        base_url="https://api.anthropic.com",
        model="claude-sonnet-4-5",
    )

    def fill(s: Settings) -> None:
        s.providers = [local, cloud, claude]
        s.active_provider = local.id
        s.approvals.deny = ["fs_delete"]
        s.approvals.always_allow = ["fs_write_file"]
        s.tools.disabled = ["fs_move"]
        s.files.allowed_roots = [str(Path.home() / "Documents"), str(Path.home() / "Projects")]

    runtime.settings = runtime.settings_store.update(fill)
    from app.core.rules import Matcher, Rule, RuleDecision, Scope

    packs = Path(str(runtime.home)) / "tools"  # type: ignore[attr-defined]
    packs.mkdir(exist_ok=True)
    for name in ("weather.py", "jira_tools.py"):  # listed, never imported by the listing
        (packs / name).write_text("MANIFESTS = []\n")

    card = "“Always allow” on an approval card"
    runtime.rules.add_many(  # (the per-tool lists above become rules here, as on upgrade)
        [
            Rule(
                tool="fs_write_file",
                matcher=Matcher(kind="path", value=str(Path.home() / "Projects" / "notes")),
                decision=RuleDecision.ALLOW,
                origin=card,
            ),
            Rule(
                tool="browser_navigate",
                matcher=Matcher(kind="site", value="https://docs.python.org:443"),
                decision=RuleDecision.ALLOW,
                origin=card,
            ),
            Rule(
                tool="docker_exec",
                matcher=Matcher(kind="command", value="git status"),
                decision=RuleDecision.ALLOW,
                scope=Scope.CONVERSATION,
                conversation_id="demo",
                origin=card,
            ),
        ]
    )
    runtime.secrets.set(secret_key("provider", cloud.id, "api_key"), "sk-demo-not-a-real-key")
    runtime.agents.add(
        {
            "name": "Note taker",
            "description": "Keeps the notes folder tidy: files meeting notes and to-do lists.",
            "instructions": "Write short Markdown notes. Never delete a note; move it instead.",
            "provider": cloud.id,
            "model": "gpt-4.1-mini",
            "tools": ["read-only", "fs_write_file", "fs_move"],
            "allow": [f"fs_write_file,folder={Path.home() / 'Notes'}"],
            "max_steps": 25,
        }
    )


def example_knowledge(runtime: object) -> None:
    """Knowledge folders of generated documents under the (demo) home, indexed for real."""
    from app.core.runtime import Runtime
    from tests.test_documents import write_pdf

    assert isinstance(runtime, Runtime)
    documents, projects = Path.home() / "Documents", Path.home() / "Projects"
    handbooks, archive = documents / "Handbooks", documents / "Archive"
    research = projects / "Research"
    for folder in (handbooks, research, archive):
        folder.mkdir(parents=True, exist_ok=True)
    write_pdf(handbooks / "handbook.pdf", ["Welcome.", "Plants are watered on Thursdays."])
    (handbooks / "travel.md").write_text("# Travel\n\nTrains are booked through the portal.\n")
    for n in range(6):
        (research / f"interview-{n + 1}.md").write_text(f"# Interview {n + 1}\n\nNotes.\n")
    (research / "survey-2023.pdf").write_bytes(b"%PDF-1.7\n" + b"\x00damaged" * 40)
    write_pdf(research / "contract.pdf", ["Confidential terms."], password="s3cret")
    for n in range(400):
        (archive / f"minutes-{n:03}.md").write_text(
            f"# Minutes {n}\n\n" + "The committee discussed the budget. " * 200
        )
    service = runtime.knowledge
    for folder in (handbooks, research):
        service.add_folder(str(folder))
    service.start()
    service.wait_idle(120)
    paused = service.add_folder(str(archive))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        progress = service.progress().get(paused.id)
        if progress is not None and progress.files_done >= 120:
            break
        time.sleep(0.05)
    service.pause(paused.id)
    service.wait_idle(30)


async def wait_for(predicate: object, timeout: float = 10.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


async def shoot(
    app: QApplication, page: str, dark: bool, out: Path, account: str, size: tuple[int, int]
) -> None:
    from app.core.runtime import Runtime
    from app.core.secrets import SecretStore
    from app.ui.settings.dialog import SettingsDialog
    from app.ui.theme import apply_theme
    from tests.fakellm import ScriptedLLM, text

    apply_theme(app, "dark" if dark else "light")
    with (
        tempfile.TemporaryDirectory() as home,
        ScriptedLLM(models=("llama3.2:3b", "qwen2.5-coder:7b", "mistral-small")) as llm,
    ):
        if page == "knowledge":  # folders shown as ~/Documents/…: a demo user's home
            os.environ["HOME"] = tempfile.mkdtemp(prefix="deskhand-demo-user-")
        runtime = Runtime(home, entry_points=False)
        runtime.secrets = SecretStore(backend=MemoryKeyring())
        try:
            example_settings(runtime, llm.openai_base_url)
            if page == "knowledge":
                example_knowledge(runtime)
            dialog = SettingsDialog(runtime, page=page)
            dialog.general.theme_combo.blockSignals(True)  # keep the --dark choice
            dialog.general.theme_combo.setCurrentIndex(2 if dark else 1)
            dialog.general.theme_combo.blockSignals(False)
            dialog.resize(*size)
            dialog.show()
            await dialog.key_states
            labels = [a.label for a in dialog.providers.accounts]
            dialog.providers.account_list.setCurrentRow(labels.index(account))
            if page == "providers" and account == "Ollama":  # the only one that answers
                llm.add(text("OK"))
                done: list[bool] = []
                dialog.providers.tested.connect(lambda _id, ok: done.append(ok))
                dialog.providers.test_button.click()
                await wait_for(lambda: bool(done), timeout=15)
            if page == "knowledge" and dialog.knowledge.loading is not None:
                await dialog.knowledge.loading
                dialog.knowledge.list.setCurrentRow(1)  # the folder with problems
            await asyncio.sleep(0.2)  # let the key states and layout settle
            dialog.grab().save(str(out))
            print(f"wrote {out}")
            dialog.close()
        finally:
            runtime.close()


def main(argv: list[str] | None = None) -> int:
    import qasync

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", choices=PAGES, default="providers")
    parser.add_argument("--dark", action="store_true")
    parser.add_argument("--width", type=int, default=860)
    parser.add_argument("--height", type=int, default=620)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--account",
        choices=("Ollama", "OpenAI", "Anthropic"),
        default="Ollama",
        help="the provider account selected on the providers page",
    )
    args = parser.parse_args(argv)
    out = args.out or Path(f"settings-{args.page}{'-dark' if args.dark else ''}.png")
    for name in ("NO_PROXY", "no_proxy"):
        os.environ[name] = ",".join(filter(None, [os.environ.get(name, ""), "127.0.0.1"]))

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    with loop:
        loop.run_until_complete(
            shoot(app, args.page, args.dark, out, args.account, (args.width, args.height))
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
