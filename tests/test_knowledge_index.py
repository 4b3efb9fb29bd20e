"""The knowledge index and search over a real SQLite file with FTS5 and sqlite-vec: meaning
found without shared words, exact rare tokens found by words, their fusion, folders and
files replaced or removed without leftovers, a failure or kill mid-file leaving the previous
state, re-embedding after a switch of embedder (stoppable, resumable), queries with FTS
syntax, unicode; and documents cut into chunks that keep their place."""

from __future__ import annotations

import hashlib
import itertools
import random
import string
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np
import pytest

from app.core.documents.model import DocumentText, Section
from app.core.knowledge.chunks import Chunk, chunk_document
from app.core.knowledge.embedding import Embedder, builtin_embedder, normalise
from app.core.knowledge.index import FileState, FolderStats, KnowledgeIndex, KnowledgeIndexError
from app.core.knowledge.search import hybrid_search

REPO = Path(__file__).resolve().parent.parent
STATE = FileState(size=1_000, mtime_ns=1)


class HashEmbedder:
    """A tiny deterministic embedder: each lower-cased word hashed into one of 16 slots."""

    name = "test:hash-16"
    dim = 16

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        self.calls += 1
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                slot = hashlib.blake2b(word.encode(), digest_size=2).digest()[0] % self.dim
                rows[i, slot] += 1.0
        return normalise(rows)


def _chunks(*texts: str, location: str = "") -> list[Chunk]:
    return [Chunk(text, location or f"page {i + 1}", i) for i, text in enumerate(texts)]


def _open(path: Path, embedder: Embedder | None = None) -> KnowledgeIndex:
    embedder = embedder or builtin_embedder()
    return KnowledgeIndex(path / "knowledge.db", embedder_name=embedder.name, dim=embedder.dim)


def _add(
    index: KnowledgeIndex, folder_id: int, path: str, texts: Sequence[str], embedder: Embedder
) -> None:
    index.replace_file(folder_id, path, STATE, _chunks(*texts), embedder.embed(list(texts)))


def _texts(hits: Sequence[Any]) -> list[str]:
    return [hit.text for hit in hits]


@pytest.fixture
def index(tmp_path: Path) -> Iterator[KnowledgeIndex]:
    opened = _open(tmp_path)
    yield opened
    opened.close()


DUE = "The invoice is due within 30 days of receipt; late payment incurs a 2% fee."
DISTRACTORS = [
    "Our office cat likes sleeping on the warm keyboard.",
    "Waterproof hiking boots are best for mountain trails.",
    "The quarterly meeting moved to the large conference room.",
    "The library closes early on public holidays.",
    "A recipe for lemon cake needs eggs, flour and sugar.",
]


# ---------------------------------------------------------------------------- search


def test_vector_search_finds_the_passage_by_meaning_without_shared_words(
    index: KnowledgeIndex,
) -> None:
    embedder = builtin_embedder()
    folder = index.add_folder("/docs")
    _add(index, folder.id, "/docs/terms.txt", [*DISTRACTORS[:3], DUE, *DISTRACTORS[3:]], embedder)
    query = "when must the bill be paid"
    assert index.search_text(query, 5) == []  # no content word in common with any chunk
    hits = index.search_vector(embedder.embed([query])[0], 3)
    assert hits[0].text == DUE
    assert hits[0].path == "/docs/terms.txt" and hits[0].location == "page 4"
    assert hits[0].score > hits[1].score
    assert hybrid_search(index, embedder, query, k=3)[0].text == DUE


def test_text_search_finds_exact_numbers_the_vectors_cannot_tell_apart(
    index: KnowledgeIndex,
) -> None:
    # The tokenizer splits numbers into digits and static embeddings average tokens, so
    # 4471 and 4417 have the very same vector: only the words' index tells them apart.
    embedder = builtin_embedder()
    folder = index.add_folder("/orders")
    codes = ["4471", "4417", "7144", "1447"]
    cities = ["Leeds", "Hull", "York", "Bath"]
    texts = [
        f"Order {code} was shipped to {city}." for code, city in zip(codes, cities, strict=True)
    ]
    _add(index, folder.id, "/orders/log.txt", texts, embedder)
    vector_firsts = set()
    for code, text in zip(codes, texts, strict=True):
        assert index.search_text(code, 1)[0].text == text
        assert hybrid_search(index, embedder, code, k=1)[0].text == text
        vector_firsts.add(index.search_vector(embedder.embed([code])[0], 1)[0].text)
    assert len(vector_firsts) == 1


def test_text_search_stems_words(index: KnowledgeIndex) -> None:
    folder = index.add_folder("/docs")
    _add(index, folder.id, "/docs/a.txt", [DUE, *DISTRACTORS], builtin_embedder())
    assert _texts(index.search_text("invoices", 5)) == [DUE]
    assert _texts(index.search_text("PAID paying payments", 5)) == [DUE]


def test_words_in_most_chunks_give_way_to_rarer_ones(index: KnowledgeIndex) -> None:
    folder = index.add_folder("/reports")
    texts = [f"Weekly report number {i} on the warehouse." for i in range(20)]
    texts[7] = "Weekly report on the zebra enclosure."
    _add(index, folder.id, "/reports/all.txt", texts, builtin_embedder())
    assert _texts(index.search_text("report zebra", 10)) == [texts[7]]
    assert len(index.search_text("weekly report", 10)) == 10  # all common: still searched
    assert index.search_text("unicorn", 10) == []


def _facts() -> tuple[list[str], list[tuple[str, int]]]:
    """A generated corpus with known answers: ten facts asked about in other words and by
    their reference code, among 300 distractors that carry codes of their own."""
    rng = random.Random(3)
    facts = [
        ("The invoice is due within 30 days of receipt.", "when must the bill be paid"),
        ("Our cat Whiskers sleeps on the keyboard every afternoon.", "where does the pet nap"),
        ("Waterproof hiking boots are essential on wet mountain trails.", "footwear for rain"),
        ("The quarterly board meeting moved to conference room B.", "where do directors gather"),
        ("Backups of the database run nightly to an offsite server.", "when is data copied"),
        ("Employees may claim travel expenses with receipts.", "reimbursement for trips"),
        ("The office kitchen fridge is cleaned out every Friday.", "refrigerator emptied"),
        ("Passwords must be changed every ninety days.", "how often to rotate login secrets"),
        ("The annual marketing budget rose by ten percent.", "more money for advertising"),
        ("Visitors must sign in at the front desk and wear a badge.", "guests at reception"),
    ]
    subjects = [
        "The new intern",
        "Our supplier",
        "The city council",
        "A local bakery",
        "The IT team",
    ]
    verbs = ["repainted", "ordered", "cancelled", "photographed", "repaired", "inspected"]
    objects = ["the blue fence", "forty chairs", "a summer concert", "the old bridge", "a fair"]
    times = ["last spring", "on Monday", "after lunch", "in December", "yesterday", "at dawn"]

    def code() -> str:
        return f"{rng.choice(string.ascii_uppercase)}{rng.choice(string.ascii_uppercase)}-" + str(
            rng.randint(1000, 9999)
        )

    codes = [code() for _ in facts]
    texts = [f"{fact} Reference {c}." for (fact, _), c in zip(facts, codes, strict=True)]
    for _ in range(300):
        parts = [rng.choice(p) for p in (subjects, verbs, objects, times)]
        texts.append(f"{' '.join(parts)}. Reference {code()}.")
    questions = [(q, i) for i, (_, q) in enumerate(facts)] + [(c, i) for i, c in enumerate(codes)]
    return texts, questions


def test_hybrid_search_finds_at_least_what_each_list_finds(index: KnowledgeIndex) -> None:
    embedder = builtin_embedder()
    texts, questions = _facts()
    folder = index.add_folder("/corpus")
    _add(index, folder.id, "/corpus/all.txt", texts, embedder)

    def found(search: Any) -> int:
        return sum(texts[answer] in _texts(search(q)) for q, answer in questions)

    by_text = found(lambda q: index.search_text(q, 5))
    by_vector = found(lambda q: index.search_vector(embedder.embed([q])[0], 5))
    by_both = found(lambda q: hybrid_search(index, embedder, q, k=5))
    assert by_text == 10  # the codes, and no paraphrase
    assert by_both >= max(by_text, by_vector)
    assert by_both >= 0.9 * len(questions)


def test_hybrid_search_returns_each_chunk_once_best_first(index: KnowledgeIndex) -> None:
    embedder = builtin_embedder()
    folder = index.add_folder("/docs")
    _add(index, folder.id, "/docs/a.txt", [DUE, *DISTRACTORS], embedder)
    hits = hybrid_search(index, embedder, "invoice payment due", k=10)
    assert hits[0].text == DUE
    assert len({hit.chunk_id for hit in hits}) == len(hits) == 6
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    assert hybrid_search(index, embedder, "   ", k=5) == []


def test_searches_keep_to_the_folders_asked_for(index: KnowledgeIndex) -> None:
    embedder = builtin_embedder()
    home = index.add_folder("/home")
    work = index.add_folder("/work", conversation_id="c1")
    _add(index, home.id, "/home/bills.txt", ["The gas invoice is due on Friday."], embedder)
    _add(index, work.id, "/work/bills.txt", ["The client invoice is due next month."], embedder)
    vector = embedder.embed(["invoice due"])[0]
    for ids, expected in (([home.id], {"/home/bills.txt"}), ([work.id], {"/work/bills.txt"})):
        assert {h.path for h in index.search_text("invoice", 5, ids)} == expected
        assert {h.path for h in index.search_vector(vector, 5, ids)} == expected
        assert {h.path for h in hybrid_search(index, embedder, "invoice", folder_ids=ids)} == (
            expected
        )
    assert len(index.search_text("invoice", 5)) == 2
    assert index.search_text("invoice", 5, []) == []
    assert index.search_vector(vector, 5, []) == []


NASTY_QUERIES = [
    '"unbalanced quote',
    'say "hello" NEAR(world, 3)',
    "invoice AND OR NOT",
    "((invoice)",
    "inv*",
    "*",
    "^start col:value -minus +plus",
    "NEAR/2",
    "'; DROP TABLE chunks; --",
    "",
    "   ",
    "…¿¡ 🙂",
    "a" * 5_000,
    " ".join(f"word{i}" for i in range(500)),
]


@pytest.mark.parametrize("query", NASTY_QUERIES)
def test_queries_with_search_syntax_never_raise(index: KnowledgeIndex, query: str) -> None:
    embedder = builtin_embedder()
    folder = index.add_folder("/docs")
    _add(index, folder.id, "/docs/a.txt", [DUE, 'He said "hello" (twice) NEAR the door.'], embedder)
    index.search_text(query, 5)
    hybrid_search(index, embedder, query, k=5)
    assert index.stats(folder.id).chunks == 2


def test_syntax_words_in_a_query_are_searched_as_words(index: KnowledgeIndex) -> None:
    folder = index.add_folder("/docs")
    text = 'He said "hello" (twice) NEAR the door.'
    _add(index, folder.id, "/docs/a.txt", [DUE, text], builtin_embedder())
    assert _texts(index.search_text('NEAR("hello"', 5)) == [text]


def test_unicode_text_is_found_with_and_without_accents(index: KnowledgeIndex) -> None:
    embedder = builtin_embedder()
    folder = index.add_folder("/docs")
    texts = ["Herr Müller bestellt naïve Crème brûlée.", "東京タワー の 見学 は 午後 です。", DUE]
    _add(index, folder.id, "/docs/ü.txt", texts, embedder)
    assert _texts(index.search_text("muller", 5)) == [texts[0]]
    assert _texts(index.search_text("Crème BRULEE", 5)) == [texts[0]]
    assert _texts(index.search_text("東京タワー", 5)) == [texts[1]]
    assert hybrid_search(index, embedder, "Müller", k=1)[0].path == "/docs/ü.txt"


# ---------------------------------------------------------------------------- folders, files


def test_folders_are_global_or_per_conversation(index: KnowledgeIndex) -> None:
    shared = index.add_folder("/shared")
    mine = index.add_folder("/mine", conversation_id="c1")
    index.add_folder("/theirs", conversation_id="c2")
    assert index.add_folder("/shared") == shared
    assert [f.path for f in index.folders()] == ["/shared"]
    assert [f.path for f in index.folders("c1")] == ["/shared", "/mine"]
    assert [f.path for f in index.folders(all_conversations=True)] == [
        "/shared",
        "/mine",
        "/theirs",
    ]
    index.set_paused(mine.id, True)
    assert [f.paused for f in index.folders("c1")] == [False, True]


def test_replacing_a_file_swaps_its_chunks_and_state(index: KnowledgeIndex) -> None:
    embedder = builtin_embedder()
    folder = index.add_folder("/docs")
    _add(index, folder.id, "/docs/a.txt", ["Old wording about zebras.", "More zebras."], embedder)
    new_state = FileState(size=42, mtime_ns=99)
    index.replace_file(
        folder.id, "/docs/a.txt", new_state, _chunks("New text about giraffes."),
        embedder.embed(["New text about giraffes."]),
    )  # fmt: skip
    assert index.search_text("zebras", 5) == []
    assert _texts(index.search_text("giraffes", 5)) == ["New text about giraffes."]
    assert index.file_states(folder.id) == {"/docs/a.txt": new_state}
    assert index.stats(folder.id).chunks == 1
    assert _texts(index.search_vector(embedder.embed(["zebras"])[0], 5)) == [
        "New text about giraffes."
    ]


def test_removing_a_file_leaves_no_trace_in_either_search(index: KnowledgeIndex) -> None:
    embedder = builtin_embedder()
    folder = index.add_folder("/docs")
    _add(index, folder.id, "/docs/a.txt", ["Apples are red."], embedder)
    _add(index, folder.id, "/docs/b.txt", ["Bananas are yellow."], embedder)
    index.record_problem(folder.id, "/docs/a.txt", "it is encrypted")
    index.remove_file(folder.id, "/docs/a.txt")
    assert index.search_text("apples", 5) == []
    assert _texts(index.search_vector(embedder.embed(["apples"])[0], 5)) == ["Bananas are yellow."]
    assert list(index.file_states(folder.id)) == ["/docs/b.txt"]
    assert index.chunks_of("/docs/a.txt") == []
    assert index.problems(folder.id) == []


def test_removing_a_folder_cleans_everything_of_it(tmp_path: Path) -> None:
    embedder = builtin_embedder()
    index = _open(tmp_path)
    gone = index.add_folder("/gone")
    kept = index.add_folder("/kept")
    _add(index, gone.id, "/gone/a.txt", ["Secret plans for the picnic.", "Sandwiches."], embedder)
    _add(index, kept.id, "/kept/b.txt", ["Minutes of the picnic committee."], embedder)
    index.record_problem(gone.id, "/gone/c.pdf", "it is encrypted")
    index.remove_folder(gone.id)
    assert [f.path for f in index.folders()] == ["/kept"]
    assert index.stats(gone.id) == FolderStats(0, 0, 0, 0)
    assert index.file_states(gone.id) == {} and index.problems(gone.id) == []
    assert _texts(index.search_text("picnic sandwiches", 5)) == ["Minutes of the picnic committee."]
    index.close()
    assert _value(tmp_path, "SELECT count(*) FROM chunks") == 1
    assert _value(tmp_path, "SELECT count(*) FROM files") == 1
    assert _value(tmp_path, "SELECT count(*) FROM vectors_1") == 1
    assert _value(tmp_path, "SELECT count(*) FROM vectors_1 WHERE folder_id = 1") == 0
    assert _value(tmp_path, "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'secret'") == 0
    assert _value(tmp_path, "SELECT count(*) FROM problems") == 0


def _value(tmp_path: Path, sql: str, column: int = 0) -> Any:
    """One value from the index file, read by a connection of its own."""
    import apsw
    import sqlite_vec

    db = apsw.Connection(str(tmp_path / "knowledge.db"))
    db.enable_load_extension(True)
    db.load_extension(sqlite_vec.loadable_path())
    try:
        return db.execute(sql).fetchall()[0][column]
    finally:
        db.close()


def test_problems_are_kept_per_file_and_cleared_by_indexing_it(index: KnowledgeIndex) -> None:
    embedder = builtin_embedder()
    folder = index.add_folder("/docs")
    index.record_problem(folder.id, "/docs/a.pdf", "it is encrypted")
    index.record_problem(folder.id, "/docs/b.pdf", "it has no text (scanned?)")
    index.record_problem(folder.id, "/docs/b.pdf", "it is truncated")
    assert index.problems(folder.id) == [
        ("/docs/a.pdf", "it is encrypted"),
        ("/docs/b.pdf", "it is truncated"),
    ]
    assert index.stats(folder.id).problems == 2
    _add(index, folder.id, "/docs/a.pdf", ["Now readable."], embedder)
    index.clear_problem(folder.id, "/docs/b.pdf")
    assert index.problems(folder.id) == []
    assert index.stats(folder.id) == FolderStats(1, 1, 1_000, 0)


def test_a_documents_chunks_read_back_in_order(index: KnowledgeIndex) -> None:
    embedder = builtin_embedder()
    folder = index.add_folder("/docs")
    texts = [f"Part {i} of the story." for i in range(12)]
    _add(index, folder.id, "/docs/story.txt", texts, embedder)
    hits = index.chunks_of("/docs/story.txt")
    assert _texts(hits) == texts
    assert [h.location for h in hits] == [f"page {i + 1}" for i in range(12)]


def test_an_empty_document_is_remembered_with_no_chunks(index: KnowledgeIndex) -> None:
    folder = index.add_folder("/docs")
    index.replace_file(folder.id, "/docs/empty.txt", STATE, [], np.zeros((0, 256), np.float32))
    assert index.file_states(folder.id) == {"/docs/empty.txt": STATE}
    assert index.stats(folder.id).chunks == 0


def test_vectors_of_the_wrong_shape_are_refused_in_plain_words(index: KnowledgeIndex) -> None:
    folder = index.add_folder("/docs")
    with pytest.raises(ValueError, match=r"2 chunks need 2 vectors of 256 numbers"):
        index.replace_file(
            folder.id, "/docs/a.txt", STATE, _chunks("a", "b"), np.zeros((2, 16), np.float32)
        )


# ---------------------------------------------------------------------------- failures


class FailingChunks(Sequence[Chunk]):
    """Chunks whose fourth one cannot be had: reading it raises, or kills the process."""

    def __init__(self, chunks: list[Chunk], *, kill: bool = False) -> None:
        self._chunks = chunks
        self._kill = kill

    def __len__(self) -> int:
        return len(self._chunks)

    @overload
    def __getitem__(self, i: int) -> Chunk: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Chunk]: ...
    def __getitem__(self, i: int | slice) -> Chunk | Sequence[Chunk]:
        if isinstance(i, int) and i == 3:
            if self._kill:
                import os

                os._exit(17)
            raise RuntimeError("disk went away")
        return self._chunks[i]


def test_a_failure_mid_file_leaves_the_previous_chunks(index: KnowledgeIndex) -> None:
    embedder = builtin_embedder()
    folder = index.add_folder("/docs")
    _add(index, folder.id, "/docs/a.txt", ["The old contract terms."], embedder)
    new = [f"New clause {i} about penalties." for i in range(6)]
    with pytest.raises(RuntimeError, match="disk went away"):
        index.replace_file(
            folder.id, "/docs/a.txt", FileState(2, 2), FailingChunks(_chunks(*new)),
            embedder.embed(new),
        )  # fmt: skip
    assert _texts(index.chunks_of("/docs/a.txt")) == ["The old contract terms."]
    assert index.search_text("penalties", 5) == []
    assert index.file_states(folder.id) == {"/docs/a.txt": STATE}
    _add(index, folder.id, "/docs/b.txt", ["Still writable afterwards."], embedder)
    assert index.stats(folder.id).chunks == 2


KILL_CHILD = """
import sys
from pathlib import Path
from app.core.knowledge.embedding import builtin_embedder
from app.core.knowledge.index import FileState
from tests.test_knowledge_index import FailingChunks, _chunks, _open

index = _open(Path(sys.argv[1]))
folder = index.folders()[0]
new = [f"New clause {i} about penalties." for i in range(6)]
chunks = FailingChunks(_chunks(*new), kill=True)
index.replace_file(folder.id, "/docs/a.txt", FileState(2, 2), chunks, builtin_embedder().embed(new))
print("not killed")
"""


def test_a_kill_mid_file_leaves_the_previous_chunks(tmp_path: Path) -> None:
    embedder = builtin_embedder()
    index = _open(tmp_path)
    folder = index.add_folder("/docs")
    _add(index, folder.id, "/docs/a.txt", ["The old contract terms."], embedder)
    index.close()
    done = subprocess.run(
        [sys.executable, "-c", KILL_CHILD, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 17, done.stderr
    index = _open(tmp_path)
    try:
        assert _texts(index.chunks_of("/docs/a.txt")) == ["The old contract terms."]
        assert index.search_text("penalties", 5) == []
        assert index.file_states(folder.id) == {"/docs/a.txt": STATE}
        _add(index, folder.id, "/docs/a.txt", ["Rewritten after the crash."], embedder)
        assert _texts(index.chunks_of("/docs/a.txt")) == ["Rewritten after the crash."]
    finally:
        index.close()
    assert _value(tmp_path, "PRAGMA integrity_check") == "ok"


def test_an_index_from_a_newer_version_is_refused_in_plain_words(tmp_path: Path) -> None:
    _open(tmp_path).close()
    import apsw

    db = apsw.Connection(str(tmp_path / "knowledge.db"))
    db.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    db.close()
    with pytest.raises(KnowledgeIndexError, match="made by a newer Deskhand"):
        _open(tmp_path)


def test_an_index_reopens_with_its_contents(tmp_path: Path) -> None:
    embedder = builtin_embedder()
    index = _open(tmp_path)
    folder = index.add_folder("/docs")
    _add(index, folder.id, "/docs/a.txt", [DUE], embedder)
    index.close()
    index = _open(tmp_path)
    try:
        assert not index.needs_reembed()
        assert _texts(index.search_text("invoice", 5)) == [DUE]
        assert index.folders() == [folder]
    finally:
        index.close()


class BlockingChunks(FailingChunks):
    """Chunks whose fourth one waits until the test lets it go: a write held open."""

    def __init__(self, chunks: list[Chunk]) -> None:
        super().__init__(chunks)
        self.reached = threading.Event()
        self.go_on = threading.Event()

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, int) and i == 3:
            self.reached.set()
            assert self.go_on.wait(30)
        return self._chunks[i]


def test_searches_do_not_wait_for_a_file_being_written(index: KnowledgeIndex) -> None:
    embedder = builtin_embedder()
    folder = index.add_folder("/docs")
    _add(index, folder.id, "/docs/a.txt", ["The old contract terms."], embedder)
    new = [f"New clause {i} about penalties." for i in range(6)]
    chunks = BlockingChunks(_chunks(*new))
    writer = threading.Thread(
        target=index.replace_file,
        args=(folder.id, "/docs/a.txt", FileState(2, 2), chunks, embedder.embed(new)),
    )
    writer.start()
    try:
        assert chunks.reached.wait(30)
        assert _texts(index.search_text("contract penalties", 5)) == ["The old contract terms."]
        assert len(hybrid_search(index, embedder, "contract", k=5)) == 1
    finally:
        chunks.go_on.set()
        writer.join()
    assert len(index.search_text("penalties", 10)) == 6


def test_threads_index_and_search_at_once(index: KnowledgeIndex) -> None:
    embedder = builtin_embedder()
    folder = index.add_folder("/docs")
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(20):
                _add(index, folder.id, f"/docs/{n}-{i}.txt", [f"note {n} {i} about cats"], embedder)
        except BaseException as e:
            errors.append(e)

    def read() -> None:
        try:
            for _ in range(40):
                hybrid_search(index, embedder, "cats", k=5)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(3)]
    threads += [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert index.stats(folder.id).chunks == 60


# ---------------------------------------------------------------------------- re-embedding


def test_switching_embedder_reembeds_from_stored_text_stoppably(tmp_path: Path) -> None:
    builtin = builtin_embedder()
    index = _open(tmp_path)
    folder = index.add_folder("/docs")
    texts = [f"Chapter {i} talks about gardening and roses." for i in range(9)]
    _add(index, folder.id, "/docs/book.txt", texts, builtin)
    index.close()

    hashed, query = HashEmbedder(), HashEmbedder()
    index = _open(tmp_path, hashed)
    assert index.needs_reembed() and index.reembed_remaining() == 9
    assert index.search_vector(query.embed(["roses"])[0], 5) == []  # none moved yet
    assert len(index.search_text("roses", 20)) == 9  # words still find them meanwhile
    index.reembed(hashed, batch=4, should_stop=lambda: hashed.calls >= 1)
    assert hashed.calls == 1 and index.reembed_remaining() == 5
    assert len(index.search_vector(query.embed(["roses"])[0], 20)) == 4
    index.close()

    index = _open(tmp_path, hashed)  # resumes after a restart
    index.reembed(hashed, batch=4)
    assert hashed.calls == 3 and not index.needs_reembed()
    hits = index.search_vector(query.embed([texts[7]])[0], 1)
    assert hits[0].text == texts[7] and hits[0].score == pytest.approx(1.0, abs=1e-5)
    index.close()
    assert _value(tmp_path, "SELECT embedder FROM vector_tables") == hashed.name
    old_tables = "SELECT count(*) FROM sqlite_master WHERE name GLOB 'vectors_1*'"
    assert _value(tmp_path, old_tables) == 0  # the old vectors are dropped


def test_files_indexed_during_a_switch_get_the_new_embedders_vectors(tmp_path: Path) -> None:
    builtin = builtin_embedder()
    index = _open(tmp_path)
    folder = index.add_folder("/docs")
    _add(index, folder.id, "/docs/old.txt", ["Old notes about tulips."], builtin)
    index.close()
    hashed = HashEmbedder()
    index = _open(tmp_path, hashed)
    _add(index, folder.id, "/docs/new.txt", ["New notes about tulips."], hashed)
    assert index.reembed_remaining() == 1
    assert _texts(index.search_vector(hashed.embed(["tulips"])[0], 5)) == [
        "New notes about tulips."
    ]
    index.reembed(hashed)
    assert len(index.search_vector(hashed.embed(["tulips"])[0], 5)) == 2
    index.close()


def test_switching_back_redoes_only_what_was_moved(tmp_path: Path) -> None:
    builtin = builtin_embedder()
    index = _open(tmp_path)
    folder = index.add_folder("/docs")
    _add(index, folder.id, "/docs/a.txt", [f"Line {i} of notes." for i in range(6)], builtin)
    index.close()
    hashed = HashEmbedder()
    index = _open(tmp_path, hashed)
    index.reembed(hashed, batch=2, should_stop=lambda: hashed.calls >= 1)
    index.close()
    index = _open(tmp_path, builtin)
    assert index.reembed_remaining() == 2
    index.reembed(builtin)
    assert not index.needs_reembed()
    assert len(index.search_vector(builtin.embed(["notes"])[0], 10)) == 6
    index.close()


def test_reembedding_with_another_embedder_than_the_index_is_refused(
    index: KnowledgeIndex,
) -> None:
    with pytest.raises(ValueError, match=r"This index is for builtin:wordllama-256"):
        index.reembed(HashEmbedder())


# ---------------------------------------------------------------------------- chunks


def _doc(*sections: tuple[str, str]) -> DocumentText:
    return DocumentText("a.pdf", "PDF", tuple(Section(label, text) for label, text in sections))


def _prose(n: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "iota", "kappa"]
    return " ".join(
        " ".join(rng.choice(words) for _ in range(rng.randint(6, 18))).capitalize() + "."
        for _ in range(n)
    )


def test_chunks_keep_sections_apart_and_carry_their_labels() -> None:
    doc = _doc(("page 1", "Short first page."), ("page 2", _prose(40)), ("sheet Budget", "x y"))
    chunks = chunk_document(doc, size=400, overlap=60)
    assert chunks[0] == Chunk("Short first page.", "page 1", 0)
    assert {c.location for c in chunks[1:-1]} == {"page 2"}
    assert chunks[-1].location == "sheet Budget" and chunks[-1].text == "x y"
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))


def test_chunks_stay_near_the_size_and_never_cut_a_word() -> None:
    text = "\n\n".join(_prose(8, seed) for seed in range(6))
    chunks = chunk_document(_doc(("page 1", text)), size=300, overlap=50)
    words = set(text.replace("\n", " ").split())
    assert len(chunks) > 5
    for chunk in chunks:
        assert len(chunk.text) <= 300 + 50
        assert set(chunk.text.split()) <= words


def test_chunks_overlap_so_a_cut_sentence_is_whole_somewhere() -> None:
    text = _prose(60)
    chunks = chunk_document(_doc(("page 1", text)), size=300, overlap=120)
    sentences = [s.strip() + "." for s in text.split(".") if s.strip()]
    for sentence in sentences:
        if len(sentence) < 100:
            assert any(sentence in chunk.text for chunk in chunks), sentence
    for before, after in itertools.pairwise(chunks):
        assert after.text[:20] in before.text


def test_tables_split_by_whole_rows_with_the_header_repeated() -> None:
    header = "| Item | Cost |\n|---|---|"
    rows = [f"| item number {i} | {i * 7} EUR |" for i in range(80)]
    doc = _doc(("sheet Costs", "Costs for the year:\n" + header + "\n" + "\n".join(rows)))
    chunks = chunk_document(doc, size=500, overlap=100)
    assert len(chunks) > 3
    seen: list[str] = []
    for chunk in chunks:
        lines = chunk.text.split("\n")
        table = [line for line in lines if line.startswith("|")]
        assert table[:2] == header.split("\n")
        seen += [line for line in table[2:] if line not in seen]
    assert seen == rows


def test_a_word_longer_than_a_chunk_is_cut_as_it_must() -> None:
    blob = "".join(random.Random(5).choice(string.ascii_letters) for _ in range(1_000))
    chunks = chunk_document(_doc(("page 1", f"Key follows. {blob} Done.")), size=300, overlap=50)
    assert max(len(c.text) for c in chunks) <= 300
    assert blob in "".join(c.text for c in chunks)


def test_empty_sections_make_no_chunks() -> None:
    assert chunk_document(_doc(("page 1", ""), ("page 2", "  \n\n "))) == []


# ---------------------------------------------------------------------------- fusion and upgrade


def _hit(chunk_id: int) -> Any:
    from app.core.knowledge.index import Hit

    return Hit(chunk_id, 1, f"/docs/{chunk_id}.txt", "page 1", f"chunk {chunk_id}", 0.0)


def test_fusion_lets_the_vectors_lead_over_shared_words() -> None:
    from app.core.knowledge.search import TEXT_WEIGHT, TEXT_WEIGHT_EXACT, fuse

    # 1 is the vectors' first; 2 shares the query's words (the words' first) and comes
    # fifth by meaning: plain rank fusion put 2 first, as it is in both lists.
    by_meaning = [_hit(i) for i in (1, 3, 4, 6, 2)]
    by_text = [_hit(i) for i in (2, 7, 8)]
    assert fuse([by_meaning, by_text], 3, weights=[1.0, 1.0])[0].chunk_id == 2
    led = fuse([by_meaning, by_text], 3, weights=[1.0, TEXT_WEIGHT])
    assert [h.chunk_id for h in led] == [1, 2, 3]  # the shared words still lift 2 a little
    exact = fuse([by_meaning, by_text], 3, weights=[1.0, TEXT_WEIGHT_EXACT])
    assert exact[0].chunk_id == 2  # a code or a name: the words' first hit counts fully
    only_words = fuse([[], by_text], 3, weights=[1.0, TEXT_WEIGHT])
    assert [h.chunk_id for h in only_words] == [2, 7, 8]  # vectors gone: words still rank


@pytest.mark.parametrize(
    ("query", "exact"),
    [
        ("How long did the outage in INC-7016 last?", True),
        ("What is the excess per claim on policy 5720?", True),
        ("What do transfers abroad cost at Oberline Bank?", True),
        ("How do I set up FortiClient", True),
        ("Is the VPN required at home?", True),
        ("When must the bill be paid?", False),
        ("What's the fine for bringing things back overdue?", False),
        ("how often to rotate login secrets", False),
    ],
)
def test_codes_numbers_and_names_make_a_query_exact(query: str, exact: bool) -> None:
    from app.core.knowledge.search import looks_exact

    assert looks_exact(query) is exact


def test_an_exact_code_ranks_first_among_chunks_that_share_its_other_words(
    index: KnowledgeIndex,
) -> None:
    embedder = builtin_embedder()
    folder = index.add_folder("/orders")
    texts = [f"Order XK-{n} for office chairs was shipped on Monday." for n in range(4400, 4420)]
    _add(index, folder.id, "/orders/log.txt", texts, embedder)
    for n in (4401, 4417):
        hits = hybrid_search(index, embedder, f"when was order XK-{n} for chairs shipped", k=3)
        assert hits[0].text == texts[n - 4400]


def test_an_index_of_the_first_version_is_upgraded_in_place_keeping_its_contents(
    tmp_path: Path,
) -> None:
    import apsw

    embedder = builtin_embedder()
    index = _open(tmp_path)
    folder = index.add_folder("/docs")
    _add(index, folder.id, "/docs/a.txt", [DUE, *DISTRACTORS], embedder)
    index.close()
    db = apsw.Connection(str(tmp_path / "knowledge.db"))  # as version 1 left it
    db.execute("DROP INDEX chunks_folder")
    db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    db.close()

    index = _open(tmp_path)
    try:
        assert index.stats(folder.id) == FolderStats(1, 6, 1_000, 0)
        assert _texts(index.search_text("invoice", 5)) == [DUE]
        assert hybrid_search(index, embedder, "when must the bill be paid", k=1)[0].text == DUE
    finally:
        index.close()
    assert _value(tmp_path, "SELECT value FROM meta WHERE key = 'schema_version'") == "2"
    plan = _value(
        tmp_path, "EXPLAIN QUERY PLAN SELECT count(*) FROM chunks WHERE folder_id = 1", column=3
    )
    assert "USING COVERING INDEX chunks_folder" in plan  # no longer a scan of every chunk


def test_a_problem_for_a_folder_removed_meanwhile_is_not_kept(tmp_path: Path) -> None:
    index = KnowledgeIndex(tmp_path / "knowledge.db", embedder_name="test:words", dim=8)
    try:
        kept = index.add_folder(str(tmp_path / "kept"))
        gone = index.add_folder(str(tmp_path / "gone"))
        index.remove_folder(gone.id)
        index.record_problem(gone.id, str(tmp_path / "gone" / "a.pdf"), "it is damaged")
        index.record_problem(kept.id, str(tmp_path / "kept" / "b.pdf"), "it is encrypted")
        assert index.problems(gone.id) == []
        assert index.problems(kept.id) == [(str(tmp_path / "kept" / "b.pdf"), "it is encrypted")]
        assert index.stats(kept.id).problems == 1
    finally:
        index.close()
