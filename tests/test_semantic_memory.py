"""Semantic memory: notes are embedded when saved and found by meaning, fused with
the word search, which still finds exact tokens and takes over when the embedder cannot
load; a store of the previous schema version upgrades and its notes get embedded; origin
and private-data markers survive; a secret never reaches a vector; nonsense finds nothing;
the window's thread never waits for the embedder. Real SQLite store, real built-in
embedder, the memory tools through the real runner."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import sqlite3
import string
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.core import store as store_mod
from app.core.knowledge.embedding import EmbeddingError, builtin_embedder
from app.core.memory import MemoryService
from app.core.memory_search import MIN_SIMILARITY, MemoryVectors, embed_text
from app.core.store import Store
from app.core.threads import forget_gui_thread, mark_gui_thread
from tools.redact import REDACTED, TRIPWIRE
from tools.registry import ToolRegistry
from tools.runner import ToolRunner
from tools.spec import ToolContext

BUILTIN = "builtin:wordllama-256"
#: The schema version before memories had vectors.
BEFORE_VECTORS = 10
PAGE = "web page https://recipes.example/cake"
ALLERGY = "I am allergic to peanuts"
#: Everyday notes the searches below run against.
NOTES = [
    ALLERGY,
    "The cat is called Mia",
    "Prefers answers in British English",
    "Lives in Lyon, France",
    "Drives a blue Toyota Corolla",
    "Renew the passport before March",
    "Works as a nurse at the city hospital",
    "Plays the violin in an orchestra",
    "Pays rent on the first of each month",
    "Reads science fiction novels",
]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "deskhand.db") as s:
        yield s


@pytest.fixture
def runner() -> Iterator[ToolRunner]:
    r = ToolRunner(ToolRegistry.default(None, entry_points=False))
    yield r
    r.shutdown()


@pytest.fixture
def secret() -> Iterator[str]:
    value = f"sk-{uuid.uuid4().hex}"
    TRIPWIRE.remember([value])
    yield value
    TRIPWIRE.forget(value)


def search(runner: ToolRunner, memory: MemoryService, home: Path, query: str) -> list[str]:
    """memory_search as the model calls it (in the tool thread pool): the notes' texts."""
    ctx = ToolContext(home=home, services={"memory": memory})
    result = asyncio.run(runner.run("memory_search", {"query": query}, ctx))
    assert result.ok, result.content
    return [m["content"] for m in result.data["memories"]]


def stored_vector(store: Store, memory_id: int) -> tuple[bytes | None, str | None]:
    with contextlib.closing(sqlite3.connect(store.path)) as raw:
        row = raw.execute(
            "SELECT embedding, embedder FROM memories WHERE id = ?", (memory_id,)
        ).fetchone()
    return row[0], row[1]


def vector_of(text: str) -> bytes:
    return np.ascontiguousarray(builtin_embedder().embed([text])[0], dtype="<f4").tobytes()


def remember_all(memory: MemoryService, notes: list[str] = NOTES) -> None:
    for note in notes:
        memory.remember(note)


def first_note(context: str) -> str:
    return next(line for line in context.split("\n") if line.startswith("- ["))


def failing_load() -> Any:
    raise EmbeddingError("The built-in embedding model could not be loaded: weights missing")


# ---- found by meaning, by words -----------------------------------------------------------


def test_a_note_is_found_by_meaning_with_no_word_in_common(
    store: Store, runner: ToolRunner, tmp_path: Path
) -> None:
    memory = MemoryService(store)
    remember_all(memory)
    # "food" and "allergy" are not words of the note ("allergic", "peanuts"): words alone
    # find nothing, the meaning does
    assert store.search_memory_rows("food allergy", any_word=True) == []
    assert search(runner, memory, tmp_path, "food allergy")[0] == ALLERGY
    assert search(runner, memory, tmp_path, "what is my pet's name")[0] == "The cat is called Mia"
    assert memory.search("musical instrument")[0].content == "Plays the violin in an orchestra"


def test_the_word_search_still_finds_an_exact_token(
    store: Store, runner: ToolRunner, tmp_path: Path
) -> None:
    memory = MemoryService(store)
    remember_all(memory)
    memory.remember("The wifi network is called zorblax-5G")
    memory.remember("Invoice number INV-20931 is still unpaid", "task")
    assert search(runner, memory, tmp_path, "zorblax") == ["The wifi network is called zorblax-5G"]
    assert search(runner, memory, tmp_path, "INV-20931") == [
        "Invoice number INV-20931 is still unpaid"
    ]
    # a word match and a meaning match of one note rank it first
    assert search(runner, memory, tmp_path, "passport")[0] == "Renew the passport before March"


def test_a_nonsense_query_returns_nothing(
    store: Store, runner: ToolRunner, tmp_path: Path
) -> None:
    memory = MemoryService(store)
    remember_all(memory)
    memory.remember("The staging server is at 10.0.0.7")
    for query in (
        "xqzv blorf",
        "asdkjh qwe",
        "zzzz",
        "qwertyuiop",
        "glorp snark",
        "xyzzy plugh",
        "8f7e6d5c4b3a",
        "sk-3f9a2b1c",
        "mnbvc xzlk",
    ):
        assert search(runner, memory, tmp_path, query) == [], query
    # and a query about something no note is about
    assert search(runner, memory, tmp_path, "quantum chromodynamics") == []


def test_the_injected_notes_are_chosen_by_the_same_ranking(store: Store) -> None:
    memory = MemoryService(store)
    for i in range(20):
        memory.remember(f"Fact number {i} about gardening and tomatoes")
    remember_all(memory)
    context = memory.context_message("Can you suggest a snack? Mind my food allergy", 200)
    assert ALLERGY in first_note(context), "the note closest in meaning comes first"


# ---- saving and updating embed the note --------------------------------------------------------


def test_a_note_is_embedded_when_saved_and_again_when_reworded(store: Store) -> None:
    memory = MemoryService(store)
    note = memory.remember("The cat is called Mia")
    assert stored_vector(store, note.id) == (vector_of("The cat is called Mia"), BUILTIN)
    memory.update(note.id, kind="preference")  # the text is the same: so is the vector
    assert stored_vector(store, note.id)[0] == vector_of("The cat is called Mia")
    memory.update(note.id, content="Has a dog named Rex")
    assert stored_vector(store, note.id)[0] == vector_of("Has a dog named Rex")
    assert [m.content for m in memory.search("puppy")] == ["Has a dog named Rex"]


def test_only_the_note_text_is_embedded_and_its_origin_and_private_marker_stay(
    store: Store,
) -> None:
    conv = store.create_conversation()
    memory = MemoryService(store).for_conversation(conv)
    note = memory.remember(
        "Likes carrot cake", "preference", origin=PAGE, private="the file ~/notes.txt"
    )
    blob, _ = stored_vector(store, note.id)
    assert blob == vector_of("Likes carrot cake"), "the origin is not part of the vector"
    [found] = memory.search("dessert")
    assert (found.id, found.content, found.kind) == (note.id, "Likes carrot cake", "preference")
    assert (found.origin, found.private) == (PAGE, "the file ~/notes.txt")
    assert found.source_conversation == conv
    reworded = memory.update(note.id, content="Likes lemon cake")
    assert (reworded.origin, reworded.private) == (PAGE, "the file ~/notes.txt")
    assert stored_vector(store, note.id)[0] == vector_of("Likes lemon cake")


# ---- secrets --------------------------------------------------------------------------------


def test_a_secret_in_a_note_never_reaches_its_vector(
    store: Store, runner: ToolRunner, tmp_path: Path, secret: str
) -> None:
    memory = MemoryService(store)
    note = memory.remember(f"The staging key is {secret}")
    assert note.content == f"The staging key is {secret}", "the note itself keeps its text"
    blob, _ = stored_vector(store, note.id)
    assert blob == vector_of(f"The staging key is {REDACTED}")
    assert blob != vector_of(f"The staging key is {secret}")
    assert search(runner, memory, tmp_path, secret) == []
    # (the tool's answer passes the tripwire too)
    assert search(runner, memory, tmp_path, "staging key") == [f"The staging key is {REDACTED}"]


def test_a_secret_learned_after_the_note_was_saved_is_taken_out_of_its_vector(
    store: Store, runner: ToolRunner, tmp_path: Path
) -> None:
    memory = MemoryService(store)
    key = "mauve-otter-" + "".join(random.choices(string.ascii_lowercase, k=12))
    note = memory.remember(f"The staging key is {key}")
    assert stored_vector(store, note.id)[0] == vector_of(f"The staging key is {key}")
    TRIPWIRE.remember([key])  # e.g. the user saves it as a secret afterwards
    try:
        assert search(runner, memory, tmp_path, "staging key") == [f"The staging key is {REDACTED}"]
        assert stored_vector(store, note.id)[0] == vector_of(f"The staging key is {REDACTED}")
    finally:
        TRIPWIRE.forget(key)


def test_credential_shaped_text_is_masked_before_it_is_embedded() -> None:
    text = "Deploy with GITHUB_TOKEN=ghp_0123456789abcdefghijABCDEFGHIJ012345"
    assert "ghp_" not in embed_text(text)


# ---- the embedder failing, and the window's thread ----------------------------------------


def test_words_alone_when_the_embedder_fails_to_load(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    broken = MemoryVectors(load=failing_load)
    memory = MemoryService(store, vectors=broken)
    remember_all(memory)
    with caplog.at_level(logging.WARNING, logger="app.core.memory_search"):
        assert [m.content for m in memory.search("cat")] == ["The cat is called Mia"]
        assert [m.content for m in memory.search("passport renew")] == [
            "Renew the passport before March"
        ]
        assert memory.search("food allergy") == []  # no meaning to go by
        context = memory.context_message("when must I renew my passport", 500)
    assert "Renew the passport before March" in context
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "Memories are searched by their words only: the embedding model could not be "
        "loaded (The built-in embedding model could not be loaded: weights missing)."
    ], "said once, in plain words"
    assert stored_vector(store, 1) == (None, None)


def test_the_windows_thread_never_waits_for_the_embedder(store: Store) -> None:
    remember_all(MemoryService(store))
    loaded_on: list[str] = []
    release = threading.Event()

    def slow_load() -> Any:
        loaded_on.append(threading.current_thread().name)
        assert release.wait(30)
        return builtin_embedder()

    vectors = MemoryVectors(load=slow_load)
    memory = MemoryService(store, vectors=vectors)
    mark_gui_thread()
    try:
        # the embedder is still loading: this call goes by words (none match), then recency
        cold = memory.context_message("Mind my food allergy", 500)
        assert ALLERGY not in first_note(cold)
        release.set()
        vectors.wait_idle(30)
        warm = memory.context_message("Mind my food allergy", 500)
    finally:
        forget_gui_thread()
    assert loaded_on == ["memory-vectors"], "loaded on a background thread, never here"
    assert ALLERGY in first_note(warm)


def test_a_note_saved_on_the_windows_thread_before_loading_is_embedded_later(
    store: Store,
) -> None:
    vectors = MemoryVectors()
    memory = MemoryService(store, vectors=vectors)
    mark_gui_thread()
    try:
        note = memory.remember(ALLERGY)
    finally:
        forget_gui_thread()
    vectors.wait_idle(30)
    assert stored_vector(store, note.id) == (vector_of(ALLERGY), BUILTIN)


# ---- upgrading a store of the previous version ---------------------------------------------


def test_a_store_of_the_previous_version_upgrades_and_its_notes_are_found_by_meaning(
    tmp_path: Path, runner: ToolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "deskhand.db"
    monkeypatch.setattr(store_mod, "MIGRATIONS", store_mod.MIGRATIONS[:BEFORE_VECTORS])
    with Store(path) as old:
        conv = old.create_conversation("Before vectors")
    with contextlib.closing(sqlite3.connect(path)) as raw, raw:  # rows as that version wrote them
        columns = {r[1] for r in raw.execute("PRAGMA table_info(memories)")}
        assert not {"embedding", "embedder"} & columns
        raw.executemany(
            "INSERT INTO memories (kind, content, source_conversation, created_at, updated_at)"
            " VALUES (?, ?, ?, 100.0, 200.0)",
            [
                ("fact", ALLERGY, conv),
                ("preference", f"Likes carrot cake\x1e{PAGE}\x1ethe file notes.txt", conv),
                *(("fact", note, None) for note in NOTES[1:]),
            ],
        )
    monkeypatch.undo()

    with Store(path) as upgraded:
        assert upgraded.memories_to_embed(BUILTIN, 100) != []
        memory = MemoryService(upgraded)
        assert search(runner, memory, tmp_path, "food allergy")[0] == ALLERGY
        assert upgraded.memories_to_embed(BUILTIN, 100) == [], "all embedded"
        [cake] = [m for m in memory.list() if m.kind == "preference"]
        assert stored_vector(upgraded, cake.id)[0] == vector_of("Likes carrot cake")
        assert (cake.content, cake.origin, cake.private) == (
            "Likes carrot cake",
            PAGE,
            "the file notes.txt",
        )
        assert cake.source_conversation == conv
        assert (cake.created_at.timestamp(), cake.updated_at.timestamp()) == (100.0, 200.0)
        assert search(runner, memory, tmp_path, "dessert") == ["Likes carrot cake"]
    with contextlib.closing(sqlite3.connect(path)) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == len(store_mod.MIGRATIONS)


def test_the_similarity_floor_keeps_unrelated_notes_out() -> None:
    embedder = builtin_embedder()
    notes = embedder.embed(NOTES)
    sims = notes @ embedder.embed(["food allergy"])[0]
    assert sims[0] >= MIN_SIMILARITY > max(sims[1:])
