"""Knowledge search: indexing, query latency, retrieval quality and
start-up, each against a floor measured in the same run. Corpora: bench/knowledge_corpus.py.

* indexing: the 1,000 mixed documents (~200 MB: PDF, DOCX, XLSX, PPTX, HTML, Markdown,
  text) added as a knowledge folder in the real window (`run_gui` as `deskhand` starts, a
  fresh process): Settings opened on the Knowledge page, then its Add folder… button (the
  folder dialog answered with the corpus), the page showing the progress as it goes.
  Throughput in MB/s (file bytes / wall time from the click until the indexer is idle)
  against reading the same files alone (`read_document`, one thread: the floor); the GUI
  loop's longest gap meanwhile (a 1 ms Qt timer, bench/stall_child.py's probe, which also
  samples the stacks of long gaps; target <= 16 ms) against its longest gap in the 2 s the
  window idled just before, the page open; RSS while indexing against those 2 s (target
  <= +150 MiB).
* start-up: nothing of app.core.knowledge, apsw, sqlite_vec or wordllama in sys.modules of
  a fresh window (run_gui) on a home that has knowledge folders, at "ready", once the window
  is whole and 2 s later; nor after `deskhand tools list` and `deskhand knowledge --help`.
* latency: an index of 100,000 chunks (~1,000 characters of generated text each; vectors by
  the built-in embedder in batches, written through `KnowledgeIndex.replace_file`), then
  queries through `hybrid_search` with the query's embedding included (targets: p50 <= 50 ms,
  p99 <= 200 ms) and through `KnowledgeService.search` (what knowledge_search calls);
  the floor: the same query's embedding plus a raw FTS5 query (its words OR'ed) and a raw
  sqlite-vec KNN query over a bare table of the same texts and vectors.
* quality: recall@5 of hybrid search, FTS alone and vectors alone over the held-out
  question set (target: hybrid >= 0.9 and better than FTS), by kind of question; every
  hybrid miss listed with why: a synonym gap (the words differ and the vectors did not
  bridge them: the answer not in the vectors' top 5), a distractor (the document written
  to share the question's words, or another of its topic, in the top 5), lost in fusion
  (the vectors alone had it in the top 5), a near miss (ranks 6-10).

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python bench/knowledge.py [--parts indexing,startup,
latency,quality] [--quick] [--fresh]
(--quick: a tenth of the mixed corpus, 10,000 chunks, fewer queries; --fresh: generate the
mixed corpus again instead of reusing the copy in the temp folder.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.knowledge_corpus import (  # noqa: E402
    STOP_WORDS,
    QualityCorpus,
    Question,
    chunk_texts,
    describe,
    mixed_corpus,
    quality_corpus,
    write_quality_corpus,
)
from bench.processes import (  # noqa: E402
    child_env,
    cli_loaded,
    descendants,
    loaded,
    status_kib,
    window_loaded,
)
from bench.pyc_cache import compile_project  # noqa: E402

PARTS = ("indexing", "startup", "latency", "quality")
FRAME_MS = 16.0
#: Modules start-up must not load.
WATCHED = ("app.core.knowledge", "apsw", "sqlite_vec", "wordllama")
RECALL_AT = 5
#: Chunks written per "file" when filling the latency index.
FILL_PER_FILE = 100
FILL_BATCH = 500


@dataclass(frozen=True)
class Sizes:
    mixed_scale: float
    chunks: int
    queries: int


FULL = Sizes(mixed_scale=1.0, chunks=100_000, queries=1_000)
QUICK = Sizes(mixed_scale=0.1, chunks=10_000, queries=200)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


# ---- homes ---------------------------------------------------------------------------------


def configure(home: Path, roots: Sequence[Path]) -> None:
    """A home whose allowed folders are `roots`."""
    from app.core.paths import settings_path
    from app.core.settings import SettingsStore

    def change(settings: Any) -> None:
        settings.files.allowed_roots = [str(r) for r in roots]

    home.mkdir(parents=True, exist_ok=True)
    SettingsStore(settings_path(home)).update(change)


def service_for(home: Path, roots: Sequence[Path]) -> Any:
    """A KnowledgeService of `home` with `roots` allowed (as Runtime.knowledge makes it)."""
    from app.core.knowledge.service import KnowledgeService
    from app.core.settings import Settings

    settings = Settings()
    settings.files.allowed_roots = [str(r) for r in roots]
    return KnowledgeService(home, settings=lambda: settings)


def run_child(args: Sequence[str], timeout: float) -> dict[str, Any]:
    """This file in a fresh process (`--child ...`); its last stdout line is JSON."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), *args],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise SystemExit(f"the measured process failed ({args[:2]}):\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ---- (a) indexing --------------------------------------------------------------------------


def indexing(sizes: Sizes, work: Path, fresh: bool) -> dict[str, Any]:
    docs, files = mixed_corpus(scale=sizes.mixed_scale, fresh=fresh)
    total = sum(f.size for f in files)
    home = work / "home-indexing"
    configure(home, [docs])
    window = run_child(["--child", "index", str(home), str(docs)], timeout=3600)
    floor = read_only(docs, [f.path for f in files])
    seconds = window["seconds"]
    idle_gaps, gaps = window["gaps"]["idle"], window["gaps"]["indexing"]
    return {
        "files": len(files),
        "mb": total / 1e6,
        "by_kind": dict(Counter(f.kind for f in files)),
        "seconds": seconds,
        "mb_per_s": total / 1e6 / seconds,
        "read_only_seconds": floor["seconds"],
        "read_only_mb_per_s": total / 1e6 / floor["seconds"],
        "indexed_files": window["stats"]["files"],
        "chunks": window["stats"]["chunks"],
        "problems": window["problems"],
        "state": window["state"],
        "gap_max_ms": max(gaps),
        "gap_p99_ms": percentile(gaps, 0.99),
        "gaps_over_16": sum(g > FRAME_MS for g in gaps),
        "idle_gap_max_ms": max(idle_gaps),
        "long_gaps": window["long"],
        "rss_idle_mib": window["rss_idle"],
        "rss_peak_mib": window["rss_peak"],
        "rss_after_mib": window["rss_after"],
        "anon_idle_mib": window["anon_idle"],
        "anon_peak_mib": window["anon_peak"],
        "anon_after_mib": window["anon_after"],
        "file_peak_mib": window["file_peak"],
        "total_idle_mib": window["total_idle"],
        "total_peak_mib": window["total_peak"],
        "total_pss_idle_mib": window["total_pss_idle"],
        "total_pss_peak_mib": window["total_pss_peak"],
        "total_after_mib": window["total_after"],
        "children_peak_mib": window["children_peak"],
        "rss_after_stats_mib": window["rss_after_stats"],
        "stats_s": window["stats_s"],
        "db_mb": window["db_mb"],
        "page": window["page"],
        "loaded_before": window["loaded_before"],
    }


def read_only(docs: Path, paths: Sequence[Path]) -> dict[str, float]:
    """The floor: every file read into text as the indexer reads it, nothing more."""
    from app.core.documents import DocumentError, read_document
    from app.core.knowledge.indexer import INDEX_MAX_CHARS

    start = time.perf_counter()
    chars = 0
    for path in paths:
        try:
            document = read_document(path, max_chars=INDEX_MAX_CHARS)
        except DocumentError:
            continue
        chars += sum(len(s.text) for s in document.sections)
    return {"seconds": time.perf_counter() - start, "chars": chars}


def child_index(home: str, docs: str) -> None:
    """(the measured process) The real window; once it is whole, Settings is opened on the
    Knowledge page and the window idles (the floor), then the folder is added with the
    page's Add button and the indexer waited for while the page shows its progress."""
    import asyncio

    from PySide6.QtWidgets import QApplication

    from bench.stall_child import Probe

    start = time.perf_counter()
    app = QApplication(sys.argv[:1])
    probe = Probe(start)
    from app.ui import startup_timeline

    async def drive(window: Any) -> None:
        try:
            await measure(window)
        except BaseException:  # the process must end, with the reason
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)

    async def measure(window: Any) -> None:
        runtime = window.runtime
        await asyncio.sleep(2.0)  # start-up's tail (the task host, MCP: none here)
        page = await open_page(window)  # its first open is not indexing's cost
        await asyncio.sleep(1.0)
        probe.enter("idle")
        idle: list[dict[str, float]] = []
        for _ in range(20):
            await asyncio.sleep(0.1)
            idle.append(await asyncio.to_thread(memory))
        probe.extra["rss_idle"] = statistics.median(m["rss"] for m in idle)
        probe.extra["anon_idle"] = statistics.median(m["anon"] for m in idle)
        probe.extra["total_idle"] = statistics.median(m["total"] for m in idle)
        probe.extra["total_pss_idle"] = statistics.median(m["total_pss"] for m in idle)
        probe.extra["loaded_before"] = loaded(WATCHED)
        probe.enter("indexing")
        began = time.perf_counter()
        folder_id = await add_folder(page, runtime, docs)
        done = threading.Event()

        def wait() -> None:
            runtime.knowledge.wait_idle()
            done.set()

        peak = dict.fromkeys(("rss", "anon", "file", "children", "total", "total_pss"), 0.0)

        def sample() -> None:
            """Off the GUI thread: reading smaps_rollup takes milliseconds."""
            while not done.wait(0.1):
                now = memory()
                for key in peak:
                    peak[key] = max(peak[key], now[key])

        threading.Thread(target=wait, daemon=True).start()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        while not done.is_set():
            await asyncio.sleep(0.1)
        sampler.join()
        seconds = time.perf_counter() - began
        probe.enter("done")
        after = memory()
        service = runtime.knowledge
        t0 = time.perf_counter()
        stats = service.stats(folder_id)
        stats_s = time.perf_counter() - t0
        progress = service.progress().get(folder_id)
        probe.extra.update(
            page="added with the Knowledge page's Add button" if page else "added from a worker",
            seconds=seconds,
            rss_peak=peak["rss"],
            anon_peak=peak["anon"],
            file_peak=peak["file"],
            children_peak=peak["children"],
            total_peak=peak["total"],
            total_pss_peak=peak["total_pss"],
            total_after=after["total"],
            rss_after=after["rss"],
            anon_after=after["anon"],
            rss_after_stats=memory()["rss"],
            stats_s=stats_s,
            db_mb=(Path(home) / "knowledge.db").stat().st_size / 1e6,
            stats={"files": stats.files, "chunks": stats.chunks, "bytes": stats.bytes},
            problems=service.problems(folder_id)[:20],
            state=progress.state if progress else "?",
        )
        service.close()
        report(probe)

    def report(probe: Any) -> None:
        result = probe.result()
        phases = result["phases"]
        probe.extra["gaps"] = {p: phases[p]["gaps"] for p in ("idle", "indexing")}
        probe.extra["long"] = [
            {k: g[k] for k in ("ms", "gui_cpu_ms", "blame", "others")}
            for g in result["long"]
            if g["phase"] == "indexing"
        ]
        print(json.dumps({k: v for k, v in probe.extra.items() if k != "driver"}))
        sys.stdout.flush()
        os._exit(0)

    def marked(name: str, _when: float) -> None:
        if name == "attached":
            window = next(w for w in app.topLevelWidgets() if hasattr(w, "controller"))
            probe.extra["driver"] = asyncio.ensure_future(drive(window))

    startup_timeline.listeners.append(marked)
    from app.ui.main import run_gui

    run_gui(home)


async def open_page(window: Any) -> Any:
    """Settings opened on the Knowledge page, as Ctrl+, then a click on "Knowledge" do, once
    it has loaded; None when it cannot be (the measure goes on without it)."""
    try:
        from app.ui.settings.dialog import SettingsDialog

        window.settingsRequested.emit("knowledge")
        dialog = window.findChild(SettingsDialog)
        page = dialog.knowledge
        if page.loading is not None:
            await page.loading
        return page
    except Exception:
        traceback.print_exc()
        return None


async def add_folder(page: Any, runtime: Any, docs: str) -> int:
    """The folder added as the user adds it: Add folder… on the page (the system's folder
    dialog answered with `docs`), which adds it on a worker and starts indexing; without
    the page, the same from a worker. Returns its id once added."""
    import asyncio

    if page is not None:
        from app.ui.settings import knowledge_page

        def chosen(parent: Any) -> str | None:
            return docs

        knowledge_page.choose_folder = chosen
        page.add_button.click()
        while not page.rows or not page.add_button.isEnabled():
            await asyncio.sleep(0.02)
        return int(next(iter(page.rows)))
    added: dict[str, Any] = {}

    def add() -> None:
        try:
            added["folder"] = runtime.knowledge.add_folder(docs)
            runtime.knowledge.start()
        except BaseException as exc:
            added["error"] = exc

    worker = threading.Thread(target=add, daemon=True)
    worker.start()
    while worker.is_alive():
        await asyncio.sleep(0.02)
    if "error" in added:
        raise added["error"]
    return int(added["folder"].id)


def memory() -> dict[str, float]:
    """This process's resident memory (MiB): all of it, anonymous (the heap: what the
    process made) and file-backed (mapped files, e.g. the index read through mmap, which
    the system can drop at any time); and its child processes' (the indexer) together."""
    found = {k: v / 1024 for k, v in status_kib("self", ("VmRSS", "RssAnon", "RssFile")).items()}
    children = children_pss = 0.0
    for pid in descendants(os.getpid()):
        children += status_kib(pid)["VmRSS"] / 1024
        children_pss += _pss(str(pid))
    return {
        "rss": found["VmRSS"],
        "anon": found["RssAnon"],
        "file": found["RssFile"],
        "children": children,
        "total": found["VmRSS"] + children,
        "total_pss": _pss("self") + children_pss,
    }


def _pss(pid: str) -> float:
    """A process's proportional set size (MiB): its resident pages, each shared page
    divided among the processes that map it, so that a sum over processes counts the
    libraries the window and its child share (Python, numpy, SQLite...) once."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# ---- start-up ------------------------------------------------------------------------------


def startup(work: Path) -> dict[str, Any]:
    """A home with a knowledge folder (indexed), then fresh processes on it."""
    docs = write_quality_corpus(quality_corpus(), work / "startup-docs")
    home = work / "home-startup"
    configure(home, [docs])
    service = service_for(home, [docs])
    try:
        service.add_folder(str(docs))
        service.start(watch=False)
        service.wait_idle(600)
    finally:
        service.close()
    window = run_child(["--child", "startup", str(home)], timeout=120)
    cli = {
        " ".join(command): cli_loaded(home, command, WATCHED)
        for command in (["tools", "list"], ["knowledge", "--help"])
    }
    return {"window": window, "cli": cli}


# ---- (b) query latency ---------------------------------------------------------------------


def latency(sizes: Sizes, work: Path, corpus: QualityCorpus) -> dict[str, Any]:
    from app.core.knowledge.embedding import BUILTIN_DIM, BUILTIN_NAME, builtin_embedder
    from app.core.knowledge.index import FileState, KnowledgeIndex

    home = work / "home-latency"
    root = work / "latency-docs"
    root.mkdir(parents=True)
    home.mkdir(parents=True)
    embedder = builtin_embedder()
    index = KnowledgeIndex(home / "knowledge.db", embedder_name=BUILTIN_NAME, dim=BUILTIN_DIM)
    folder = index.add_folder(str(root))
    raw = RawIndex(work / "raw.db", BUILTIN_DIM)
    embed_s = write_s = raw_s = 0.0
    n = 0
    texts = chunk_texts(sizes.chunks)
    for batch in batched(texts, FILL_BATCH):
        t0 = time.perf_counter()
        vectors = embedder.embed(batch)
        t1 = time.perf_counter()
        for start in range(0, len(batch), FILL_PER_FILE):
            part = batch[start : start + FILL_PER_FILE]
            chunks = [_chunk(text, i) for i, text in enumerate(part)]
            path = str(root / f"file-{n:05d}.txt")
            index.replace_file(
                folder.id, path, FileState(1, 1), chunks, vectors[start : start + len(part)]
            )
            n += 1
        t2 = time.perf_counter()
        raw.add(batch, vectors)
        embed_s, write_s, raw_s = (
            embed_s + t1 - t0,
            write_s + t2 - t1,
            raw_s + time.perf_counter() - t2,
        )
    queries = query_set(corpus, sizes.queries)
    service = service_for(home, [root])
    try:
        timings = time_queries(index, embedder, raw, folder.id, service, queries)
    finally:
        service.close()
        index.close()
        raw.close()
    return {
        "chunks": sizes.chunks,
        "queries": len(queries),
        "fill_embed_s": embed_s,
        "fill_write_s": write_s,
        "fill_raw_s": raw_s,
        "db_mb": (home / "knowledge.db").stat().st_size / 1e6,
        **timings,
    }


def _chunk(text: str, ordinal: int) -> Any:
    from app.core.knowledge.chunks import Chunk

    return Chunk(text=text, location="", ordinal=ordinal)


def batched(items: Iterator[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def query_set(corpus: QualityCorpus, count: int) -> list[str]:
    """The question set's questions, then short keyword queries from the chunks' words."""
    import random

    rng = random.Random(7)
    queries = [q.text for q in corpus.questions][:count]
    words = sorted({w for d in corpus.docs for w in re.findall(r"[a-z]{4,}", d.body.lower())})
    while len(queries) < count:
        queries.append(" ".join(rng.sample(words, rng.randint(1, 4))))
    rng.shuffle(queries)
    return queries


class RawIndex:
    """The floor: a bare FTS5 table and a bare sqlite-vec table of the same chunks."""

    def __init__(self, path: Path, dim: int) -> None:
        import apsw
        import sqlite_vec

        self.db = apsw.Connection(str(path))
        self.db.enable_load_extension(True)
        self.db.load_extension(sqlite_vec.loadable_path())
        self.db.enable_load_extension(False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA mmap_size = {1 << 30}")  # as the index's readers do
        self.db.execute(
            "CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61 "
            "remove_diacritics 2');"
            f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{dim}] distance_metric=cosine)"
        )
        self.rows = 0

    def add(self, texts: Sequence[str], vectors: Any) -> None:
        import numpy as np

        ids = range(self.rows + 1, self.rows + 1 + len(texts))
        with self.db:
            self.db.executemany(
                "INSERT INTO t(rowid, text) VALUES (?, ?)", zip(ids, texts, strict=True)
            )
            self.db.executemany(
                "INSERT INTO v(rowid, embedding) VALUES (?, ?)",
                (
                    (i, np.ascontiguousarray(v, dtype=np.float32).tobytes())
                    for i, v in zip(ids, vectors, strict=True)
                ),
            )
        self.rows += len(texts)

    def text(self, query: str, k: int = 50) -> list[int]:
        words = [w for w in re.findall(r"\w+", query.lower()) if w not in STOP_WORDS]
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in words)
        sql = "SELECT rowid FROM t WHERE t MATCH ? ORDER BY rank LIMIT ?"
        return [int(r[0]) for r in self.db.execute(sql, (match, k))]

    def vector(self, vector: Any, k: int = 50) -> list[int]:
        import numpy as np

        blob = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
        sql = "SELECT rowid, distance FROM v WHERE embedding MATCH ? AND k = ? ORDER BY distance"
        return [int(r[0]) for r in self.db.execute(sql, (blob, k))]

    def close(self) -> None:
        self.db.close()


def time_queries(
    index: Any, embedder: Any, raw: RawIndex, folder_id: int, service: Any, queries: list[str]
) -> dict[str, Any]:
    """Each query through every path in turn (after a warm-up of 20)."""
    from app.core.knowledge.search import hybrid_search

    def hybrid(q: str) -> None:
        hybrid_search(index, embedder, q, k=8, folder_ids=[folder_id])

    def floor(q: str) -> None:
        vector = embedder.embed([q])[0]
        raw.text(q)
        raw.vector(vector)

    paths: dict[str, Callable[[str], object]] = {
        "hybrid": hybrid,
        "service": lambda q: service.search(q, k=8),
        "floor": floor,
        "embed": lambda q: embedder.embed([q]),
        "index_text": lambda q: index.search_text(q, 50, [folder_id]),
        "raw_text": raw.text,
    }
    vectors = {q: embedder.embed([q])[0] for q in queries}
    paths["index_vector"] = lambda q: index.search_vector(vectors[q], 50, [folder_id])
    paths["raw_vector"] = lambda q: raw.vector(vectors[q])
    for q in queries[:20]:
        for run in paths.values():
            run(q)
    times: dict[str, list[float]] = {name: [] for name in paths}
    for q in queries:
        for name, run in paths.items():
            t0 = time.perf_counter()
            run(q)
            times[name].append(time.perf_counter() - t0)
    out: dict[str, Any] = {}
    for name, values in times.items():
        out[f"{name}_p50_ms"] = percentile(values, 0.5) * 1000
        out[f"{name}_p99_ms"] = percentile(values, 0.99) * 1000
        out[f"{name}_max_ms"] = max(values) * 1000
    slowest = sorted(zip(times["hybrid"], queries, strict=True), reverse=True)[:3]
    out["slowest_hybrid"] = [(round(t * 1000, 1), q) for t, q in slowest]
    return out


# ---- (c) retrieval quality -----------------------------------------------------------------


@dataclass(frozen=True)
class Ranked:
    """Where a question's answer came in each list (None: not in the top 50)."""

    question: Question
    hybrid: int | None
    text: int | None
    vector: int | None
    top: tuple[str, ...]  # the hybrid top 5's documents, as "role topic fact"


def quality(work: Path, corpus: QualityCorpus) -> dict[str, Any]:
    from app.core.knowledge.embedding import BUILTIN_DIM, BUILTIN_NAME, builtin_embedder
    from app.core.knowledge.index import KnowledgeIndex
    from app.core.knowledge.search import hybrid_search

    docs = write_quality_corpus(corpus, work / "quality-docs")
    home = work / "home-quality"
    home.mkdir(parents=True)
    service = service_for(home, [docs])
    try:
        folder = service.add_folder(str(docs))
        started = time.perf_counter()
        service.start(watch=False)
        service.wait_idle(600)
        seconds = time.perf_counter() - started
        stats = service.stats(folder.id)
        problems = service.problems(folder.id)
    finally:
        service.close()
    embedder = builtin_embedder()
    index = KnowledgeIndex(home / "knowledge.db", embedder_name=BUILTIN_NAME, dim=BUILTIN_DIM)
    ranked = []
    try:
        for q in corpus.questions:
            hybrid = hybrid_search(index, embedder, q.text, k=50)
            text = index.search_text(q.text, 50)
            vector = index.search_vector(embedder.embed([q.text])[0], 50)
            top = tuple(_describe_hit(corpus, h) for h in hybrid[:RECALL_AT])
            ranked.append(Ranked(q, _rank(q, hybrid), _rank(q, text), _rank(q, vector), top))
    finally:
        index.close()
    return {
        "docs": len(corpus.docs),
        "chunks": stats.chunks,
        "problems": problems,
        "index_seconds": seconds,
        "questions": len(corpus.questions),
        "no_overlap": corpus.no_overlap(),
        "no_overlap_strict": corpus.no_overlap(strict=True),
        "recall": recall_table(ranked),
        "misses": [miss(r) for r in ranked if not _found(r.hybrid)],
    }


def _rank(q: Question, hits: Sequence[Any]) -> int | None:
    for rank, hit in enumerate(hits, start=1):
        if Path(hit.path).name == q.answer and q.key.lower() in hit.text.lower():
            return rank
    return None


def _found(rank: int | None) -> bool:
    return rank is not None and rank <= RECALL_AT


def _describe_hit(corpus: QualityCorpus, hit: Any) -> str:
    name = Path(hit.path).name
    doc = next((d for d in corpus.docs if d.name == name), None)
    if doc is None:
        return name
    fact = "" if doc.fact is None else f" {doc.fact}"
    return f"{doc.role} {doc.topic}{fact}"


def recall_table(ranked: Sequence[Ranked]) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    groups = {
        "all": list(ranked),
        "paraphrase": [r for r in ranked if r.question.kind == "paraphrase"],
        "direct": [r for r in ranked if r.question.kind == "direct"],
        "no shared word": [r for r in ranked if not r.question.shared],
    }
    for method in ("hybrid", "text", "vector"):
        table[method] = {
            group: sum(_found(getattr(r, method)) for r in rows) / len(rows)
            for group, rows in groups.items()
            if rows
        }
    return table


def miss(r: Ranked) -> dict[str, Any]:
    """Why the hybrid search missed: its top 5, where each list had the answer, and a kind."""
    q = r.question
    own_trap = f"distractor {q.topic} {q.fact}"
    kinds = []
    if own_trap in r.top:
        kinds.append("distractor (its own)")
    elif any(t.startswith(("distractor", "filler")) and f" {q.topic}" in t for t in r.top):
        kinds.append("distractor (same topic)")
    if not q.shared and not _found(r.vector):
        kinds.append("synonym gap")
    if _found(r.vector):
        kinds.append("lost in fusion (vectors alone had it in the top 5)")
    if r.hybrid is not None and r.hybrid <= 10:
        kinds.append("near miss")
    return {
        "question": q.text,
        "kind": q.kind,
        "topic": q.topic,
        "answer": q.key,
        "hybrid_rank": r.hybrid,
        "text_rank": r.text,
        "vector_rank": r.vector,
        "why": kinds or ["other documents"],
        "top": list(r.top),
    }


# ---- the report ----------------------------------------------------------------------------


def print_report(results: dict[str, Any]) -> None:
    rows: list[tuple[str, str, str]] = []
    if "indexing" in results:
        r = results["indexing"]
        rows += [
            (
                f"indexing {r['files']} mixed documents, {r['mb']:.0f} MB (window, Knowledge "
                f"page open)",
                f"{r['mb_per_s']:.2f} MB/s ({r['seconds']:.0f} s; {r['indexed_files']} files, "
                f"{r['chunks']:,} chunks, {len(r['problems'])} problems)",
                f"floor: reading alone {r['read_only_mb_per_s']:.2f} MB/s "
                f"({r['mb_per_s'] / r['read_only_mb_per_s']:.2f}x)",
            ),
            (
                "GUI loop's longest gap while indexing",
                f"{r['gap_max_ms']:.1f} ms (p99 {r['gap_p99_ms']:.1f}; {r['gaps_over_16']} "
                f"over 16 ms; target <= 16 ms)",
                f"floor: idle window {r['idle_gap_max_ms']:.1f} ms",
            ),
            (
                "RSS while indexing, the window and its indexing child together",
                f"peak {r['total_peak_mib']:.0f} MiB, "
                f"+{r['total_peak_mib'] - r['total_idle_mib']:.0f} MiB (target <= +150; the "
                f"child's own peak {r['children_peak_mib']:.0f} MiB); "
                f"{r['total_after_mib']:.0f} MiB when idle again",
                f"floor: idle window {r['total_idle_mib']:.0f} MiB",
            ),
            (
                "PSS while indexing, the window and its child together (shared pages counted once)",
                f"peak {r['total_pss_peak_mib']:.0f} MiB, "
                f"+{r['total_pss_peak_mib'] - r['total_pss_idle_mib']:.0f} MiB",
                f"floor: idle window {r['total_pss_idle_mib']:.0f} MiB",
            ),
            (
                "RSS while indexing, the window alone",
                f"peak {r['rss_peak_mib']:.0f} MiB, +{r['rss_peak_mib'] - r['rss_idle_mib']:.0f} "
                f"MiB, of which anonymous +"
                f"{r['anon_peak_mib'] - r['anon_idle_mib']:.0f} MiB (peak of mapped files "
                f"{r['file_peak_mib']:.0f} MiB); {r['rss_after_mib']:.0f} MiB when idle again "
                f"({r['anon_after_mib']:.0f} anonymous)",
                f"floor: idle window {r['rss_idle_mib']:.0f} MiB "
                f"({r['anon_idle_mib']:.0f} anonymous)",
            ),
            (
                "the folder's counts read once indexed (`stats`, the page's refresh)",
                f"{r['stats_s'] * 1000:.0f} ms; RSS then {r['rss_after_stats_mib']:.0f} MiB "
                f"(the index, {r['db_mb']:.0f} MB, read through mmap)",
                "",
            ),
        ]
    if "startup" in results:
        r = results["startup"]
        window = {k: v for k, v in r["window"].items()}
        cli = r["cli"]
        clean = not any(window.values()) and not any(cli.values())
        rows.append(
            (
                "start-up with knowledge folders: " + ", ".join(WATCHED) + " loaded?",
                "none" if clean else json.dumps({"window": window, "cli": cli}),
                "window at ready / whole / +2 s; deskhand tools list, knowledge --help",
            )
        )
    if "latency" in results:
        r = results["latency"]
        floor = r["floor_p50_ms"]
        rows += [
            (
                f"query over {r['chunks']:,} chunks, hybrid_search k=8 with the query's "
                f"embedding ({r['queries']} queries)",
                f"p50 {r['hybrid_p50_ms']:.1f} ms, p99 {r['hybrid_p99_ms']:.1f} ms, max "
                f"{r['hybrid_max_ms']:.1f} (targets 50 / 200 ms)",
                f"floor: embedding + raw FTS5 + raw KNN p50 {floor:.1f} ms, p99 "
                f"{r['floor_p99_ms']:.1f} ({r['hybrid_p50_ms'] / floor:.2f}x at p50)",
            ),
            (
                "the same through KnowledgeService.search",
                f"p50 {r['service_p50_ms']:.1f} ms, p99 {r['service_p99_ms']:.1f} ms",
                "",
            ),
            (
                "its parts (p50 / p99)",
                f"embedding {r['embed_p50_ms']:.2f} / {r['embed_p99_ms']:.2f} ms; FTS "
                f"{r['index_text_p50_ms']:.1f} / {r['index_text_p99_ms']:.1f} ms; vectors "
                f"{r['index_vector_p50_ms']:.1f} / {r['index_vector_p99_ms']:.1f} ms",
                f"raw FTS {r['raw_text_p50_ms']:.1f} / {r['raw_text_p99_ms']:.1f} ms; raw KNN "
                f"{r['raw_vector_p50_ms']:.1f} / {r['raw_vector_p99_ms']:.1f} ms",
            ),
        ]
    if "quality" in results:
        r = results["quality"]
        recall = r["recall"]
        for method in ("hybrid", "text", "vector"):
            by = recall[method]
            rows.append(
                (
                    f"recall@{RECALL_AT}, {method}"
                    + (" (target >= 0.9)" if method == "hybrid" else ""),
                    f"{by['all']:.3f} ({r['questions']} questions)",
                    f"paraphrase {by['paraphrase']:.3f}, direct {by['direct']:.3f}, sharing no "
                    f"word {by['no shared word']:.3f}",
                )
            )
    print("| measure | figure | against |")
    print("|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if "quality" in results:
        print_misses(results["quality"])
    if "indexing" in results:
        r = results["indexing"]
        print(f"\nindexing: {r['page']}; state at the end: {r['state']}")
        print_long_gaps(r["long_gaps"])
        for path, reason in r["problems"][:10]:
            print(f"  problem: {Path(path).name}: {reason}")


def print_long_gaps(gaps: list[dict[str, Any]]) -> None:
    """The longest gaps, and what the other threads ran during all of them (a gap in which
    the GUI thread was on a core for little of the time waited for the interpreter lock)."""
    if not gaps:
        return
    waiting = sum(g["ms"] for g in gaps)
    on_core = sum(g["gui_cpu_ms"] for g in gaps)
    print(
        f"{len(gaps)} gaps over 16 ms, {waiting / 1000:.2f} s in all; the GUI thread was on "
        f"a core for {on_core / waiting:.0%} of it"
    )
    for gap in sorted(gaps, key=lambda g: -g["ms"])[:5]:
        print(
            f"  {gap['ms']:.1f} ms (GUI thread on a core {gap['gui_cpu_ms']:.1f} ms): "
            f"GUI thread at {gap['blame'][:1] or '?'}; others: {gap['others'][:3]}"
        )
    others: Counter[str] = Counter()
    for gap in gaps:
        for where, count in gap["others"]:
            idle = ("wait_idle", "py:threading.py", "py:thread.py:81 _worker")
            if not any(word in where for word in idle):
                others[where] += count
    print("  other threads at work during all long gaps (stack samples, waiting ones left out):")
    for where, count in others.most_common(8):
        print(f"    {count:4d}  {where}")


def print_misses(r: dict[str, Any]) -> None:
    misses = r["misses"]
    print(
        f"\nquestion set: {r['questions']} questions over {r['docs']} documents "
        f"({r['chunks']} chunks); {r['no_overlap']:.1%} share no content word with their "
        f"answer ({r['no_overlap_strict']:.1%} by the strict prefix test)"
    )
    if not misses:
        return
    kinds = Counter(k for m in misses for k in m["why"])
    print(
        f"hybrid misses: {len(misses)}; why: "
        + ", ".join(f"{k} {n}" for k, n in kinds.most_common())
    )
    for m in misses:
        print(
            f"  [{m['kind']}] {m['question']!r} (answer: {m['answer']}; ranks hybrid "
            f"{m['hybrid_rank']}, FTS {m['text_rank']}, vectors {m['vector_rank']}): "
            f"{'; '.join(m['why'])}; top: {', '.join(m['top'])}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--parts", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS)
    )
    parser.add_argument("--quick", action="store_true", help="smaller corpora, fewer queries")
    parser.add_argument("--fresh", action="store_true", help="generate the mixed corpus again")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "index":
            child_index(*rest)
        else:
            window_loaded(*rest, WATCHED)
        return
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part {unknown[0]!r}: choose from {', '.join(PARTS)}")
    sizes = QUICK if args.quick else FULL
    compile_project()
    corpus = quality_corpus()
    print("\n".join(describe(corpus)), flush=True)
    work = Path(tempfile.mkdtemp(prefix="deskhand-knowledge-bench-"))
    results: dict[str, Any] = {}
    try:
        for part in PARTS:
            if part not in parts:
                continue
            started = time.perf_counter()
            load = os.getloadavg()[0]
            if part == "indexing":
                results[part] = indexing(sizes, work, args.fresh)
            elif part == "startup":
                results[part] = startup(work)
            elif part == "latency":
                results[part] = latency(sizes, work, corpus)
            else:
                results[part] = quality(work, corpus)
            print(
                f"[{part} done in {time.perf_counter() - started:.0f} s; load average "
                f"{load:.2f} before, {os.getloadavg()[0]:.2f} after]",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), "utf-8")


if __name__ == "__main__":
    main()
