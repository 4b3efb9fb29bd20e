"""Finding memories by meaning and by words: each note is embedded when it is
saved, and a search fuses the notes ranked by vector similarity with the notes ranked by
their words (reciprocal rank fusion, `fuse`). Words alone when the embedder cannot load
(said once in the log) or the query embeds to nothing.

What is embedded is the note's text as the model may see it: known secrets and anything
shaped like a credential masked first (`embed_text`), never its origin or private-data
marker — so a vector can neither hold a secret nor be a way to find one. A secret the
tripwire learns after a note was saved: a search (`MemoryService.search`, what
`memory_search` and the Memory page use) re-embeds that note from its masked text before
comparing, and keeps the clean vector.

Vectors are float32 bytes in the memories table (app.core.store.memories), ranked here with
numpy: memories are few (hundreds, a few thousand). Nothing of this loads at start-up: the
embedder (app.core.knowledge.embedding) and numpy are imported on first use. Loading it,
and embedding the notes saved before this version (in batches), never happens on the
window's thread: there a search uses the vectors only once they are ready (`MemoryVectors`),
meanwhile a background thread prepares them.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any, Protocol

from app.core.threads import on_gui_thread
from tools.redact import TRIPWIRE, Redactor, Tripwire

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from app.core.knowledge.embedding import Embedder

log = logging.getLogger(__name__)

#: A note at least this close (cosine) to the query counts as found by meaning: below it,
#: the built-in embedder's similarities are noise (most nonsense words score under 0.18
#: against unrelated notes; a related note typically 0.2-0.7).
MIN_SIMILARITY = 0.2
#: Reciprocal rank fusion's constant (the usual one): 1 / (RRF_K + rank) per list.
RRF_K = 60
#: Notes embedded per batch when catching up (notes saved before vectors, or while the
#: embedder was not loaded yet).
EMBED_BATCH = 256
#: At most this many notes are ranked by meaning for one search.
MAX_BY_MEANING = 200


class VectorStore(Protocol):
    """What the vectors need of the store (app.core.store.memories.Memories)."""

    def memory_vectors(self, embedder: str) -> list[tuple[int, str, bytes]]: ...

    def memories_version(self) -> tuple[int, int]: ...

    def memories_to_embed(self, embedder: str, limit: int) -> list[tuple[int, str]]: ...

    def set_memory_vectors(
        self, embedder: str, vectors: Sequence[tuple[int, str, bytes]]
    ) -> int: ...

    def memory_rows(
        self, kind: str | None = None, limit: int = 50, ids: tuple[int, ...] = ()
    ) -> list[dict[str, Any]]: ...


def embed_text(text: str, redactor: Redactor | None = None) -> str:
    """The text a note's vector is made of: known secrets masked, then credential shapes."""
    return Tripwire.shapes((redactor or TRIPWIRE.redactor()).text(text))


def meaning_of(query: str) -> str | None:
    """The part of `query` a vector can stand for: its words. Tokens holding a digit (ids,
    codes, numbers, keys) are left to the word search — a static embedder scores runs of
    digits and hex close to any note with numbers in it — and a query with no word of three
    letters or more has nothing to go by (None)."""
    words = [w for w in query.split() if not any(c.isdigit() for c in w)]
    if not any(sum(c.isalpha() for c in w) >= 3 for w in words):
        return None
    return " ".join(words)


def may_wait() -> bool:
    """Loading the embedder or catching up may block this thread (not the window's)."""
    return not on_gui_thread()


# ---- ranking by words, on the masked text -----------------------------------------------------


_SEPARATORS = re.compile(r"[\W_]+")


def _plain(text: str) -> str:
    """Case-folded, accents removed (as FTS5's `remove_diacritics 2`)."""
    folded = text.casefold()
    if folded.isascii():
        return folded
    return "".join(
        c for c in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(c)
    )


def _tokens(text: str) -> list[str]:
    """Words as the store's FTS5 index (`unicode61 remove_diacritics 2`) splits them: runs
    of letters and digits (`_`, `-` and every other character separate), case-folded,
    accents removed."""
    return [w for w in _SEPARATORS.split(_plain(text)) if w]


def _count(tokens: list[str], phrase: list[str], prefix: bool) -> int:
    """How often `phrase` occurs in `tokens` (its last word as a prefix: `prefix`)."""
    size = len(phrase)
    hits = 0
    for i in range(len(tokens) - size + 1):
        head, last = tokens[i : i + size - 1], tokens[i + size - 1]
        if head == phrase[:-1] and (
            last.startswith(phrase[-1]) if prefix else last == phrase[-1]
        ):
            hits += 1
    return hits


def by_words(texts: Sequence[tuple[int, str]], query: str) -> list[int]:
    """The ids of the (id, masked text) pairs matching `query` the way the store's FTS5
    search does: every word of the query (each a phrase of tokens, the last one a prefix)
    or, when no text has them all, any of them; best first (more query words, then more
    occurrences), then in the order given. Run on masked text, no answer (which note, in
    which order) depends on the characters of a secret."""
    words = [w for w in query.split() if any(ch.isalnum() for ch in w)]
    phrases = [(p, i == len(words) - 1) for i, w in enumerate(words) if (p := _tokens(w))]
    if not phrases:
        return []
    scored: list[tuple[int, int, int, int]] = []
    for order, (note_id, text) in enumerate(texts):
        plain = _plain(text)
        if not any(phrase[0] in plain for phrase, _ in phrases):
            continue  # no query word in it at all: no need to split it
        tokens = [w for w in _SEPARATORS.split(plain) if w]
        counts = [_count(tokens, phrase, prefix) for phrase, prefix in phrases]
        matched = sum(1 for c in counts if c)
        if matched:
            scored.append((matched, sum(counts), order, note_id))
    every = [s for s in scored if s[0] == len(phrases)]
    if not every:  # any word will do
        return [n for *_, n in sorted(scored, key=lambda s: (-s[0], -s[1], s[2]))]
    return [n for *_, n in sorted(every, key=lambda s: (-s[1], s[2]))]


def fuse(*rankings: Sequence[int]) -> list[int]:
    """Reciprocal rank fusion: each list gives an id 1 / (RRF_K + rank); best total first,
    a tie in the order the ids first appear (the first list's first)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (RRF_K + rank)
    first = {item: i for i, item in enumerate(dict.fromkeys(chain(*rankings)))}
    return sorted(scores, key=lambda item: (-scores[item], first[item]))


# ---- the vectors ----------------------------------------------------------------------------


def _builtin() -> Embedder:
    from app.core.knowledge.embedding import builtin_embedder

    return builtin_embedder()


class MemoryVectors:
    """The embedder of the memories (the built-in one unless `load` gives another), loaded
    on first use, and what it does for them. Thread-safe; one per process (`VECTORS`).

    A thread that may wait (`may_wait`) loads the embedder and catches up on notes without
    a vector itself; the window's thread never does: it gets None until a background thread
    (`warm`) has loaded it, and the search goes on by words."""

    def __init__(self, load: Callable[[], Embedder] | None = None) -> None:
        self._load = load or _builtin
        self._embedder: Embedder | None = None
        self._failed = False
        self._warned = False
        self._load_lock = threading.Lock()
        self._catch_up_lock = threading.Lock()
        self._worker_lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._cache_lock = threading.Lock()
        self._cache: weakref.WeakKeyDictionary[Any, dict[str, _Matrix]] = (
            weakref.WeakKeyDictionary()
        )

    # -- the embedder --

    def embedder(self, *, wait: bool) -> Embedder | None:
        """The embedder; None when it failed to load, or is not loaded yet and `wait` is
        False."""
        if self._embedder is not None or self._failed or not wait:
            return self._embedder
        with self._load_lock:
            if self._embedder is None and not self._failed:
                try:
                    self._embedder = self._load()
                except Exception as exc:  # any failure: memories are searched by words
                    self._failed = True
                    self._warn(f"the embedding model could not be loaded ({exc})")
        return self._embedder

    def _warn(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("Memories are searched by their words only: %s.", why)

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> npt.NDArray[np.float32] | None:
        """Unit rows for `texts`, or None when the embedder fails (said once)."""
        try:
            return embedder.embed(list(texts))
        except Exception as exc:  # a broken model or server: words only, this time
            self._warn(f"embedding failed ({exc})")
            return None

    def vector(self, text: str, *, wait: bool) -> tuple[bytes, str] | None:
        """The stored form of a note's vector (of `embed_text(text)`), or None when there
        is no embedder (yet)."""
        embedder = self.embedder(wait=wait)
        if embedder is None:
            return None
        rows = self.embed(embedder, [embed_text(text)])
        return None if rows is None else (_to_bytes(rows[0]), embedder.name)

    # -- catching up --

    def catch_up(self, store: VectorStore, text_of: Callable[[str], str]) -> int:
        """Embed every memory with no vector from the embedder, in batches (`text_of`: the
        note's text from its stored content); how many were embedded. Call it only where
        waiting is fine."""
        embedder = self.embedder(wait=True)
        if embedder is None:
            return 0
        done = 0
        with self._catch_up_lock:
            while rows := store.memories_to_embed(embedder.name, EMBED_BATCH):
                vectors = self.embed(embedder, [embed_text(text_of(c)) for _, c in rows])
                if vectors is None:
                    break
                kept = store.set_memory_vectors(
                    embedder.name,
                    [(i, c, _to_bytes(v)) for (i, c), v in zip(rows, vectors, strict=True)],
                )
                done += kept
                if not kept:  # every row changed meanwhile: the next search goes on
                    break
        return done

    def warm(self, store: VectorStore, text_of: Callable[[str], str]) -> None:
        """Load the embedder and catch up on a background thread, unless that is done or
        under way. Never blocks."""
        if self._failed:
            return
        embedder = self._embedder
        if embedder is not None and not store.memories_to_embed(embedder.name, 1):
            return
        with self._worker_lock:
            if self._worker is not None and self._worker.is_alive():
                return
            self._worker = threading.Thread(
                target=self._warm, args=(store, text_of), name="memory-vectors", daemon=True
            )
            self._worker.start()

    def _warm(self, store: VectorStore, text_of: Callable[[str], str]) -> None:
        try:
            self.catch_up(store, text_of)
        except Exception:  # e.g. the store was closed meanwhile: a later search goes on
            log.debug("catching up on memory vectors stopped", exc_info=True)

    def wait_idle(self, timeout: float | None = None) -> None:
        """Wait for a background `warm` to end (tests, shutting down)."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)

    # -- ranking --

    def ready(
        self, store: VectorStore, text_of: Callable[[str], str], *, wait: bool
    ) -> Embedder | None:
        """The embedder with every note embedded, or None (then, when the caller cannot
        wait, a background thread gets it ready for a later search)."""
        if wait:
            self.catch_up(store, text_of)
            return self.embedder(wait=False)
        self.warm(store, text_of)
        return self.embedder(wait=False)

    def by_meaning(
        self,
        store: VectorStore,
        embedder: Embedder,
        query: str,
        *,
        kinds: Sequence[str] | None = None,
        texts: dict[int, str] | None = None,
        redactor: Redactor | None = None,
    ) -> list[int]:
        """Ids of the notes at least MIN_SIMILARITY close to `query` (`meaning_of` it),
        closest first (at most MAX_BY_MEANING). `texts` (id → note text): only those
        notes, and each one holding a secret `redactor` knows is embedded again from its
        masked text first."""
        import numpy as np

        words = meaning_of(query)
        rows = None if words is None else self.embed(embedder, [words])
        if rows is None:
            return []
        target = rows[0].astype(np.float32)
        if float(np.einsum("i,i->", target, target)) < 0.25:  # a zero vector: nothing to go by
            return []
        matrix = self._matrix(store, embedder)
        # einsum, not `@`: a BLAS product wakes OpenBLAS's threads, which then spin for a
        # while and take the cores from the window's thread (measured: a 2-core machine's
        # notes injection went from 25 to 120 ms); this loop is BLAS-free and takes <1 ms.
        sims = np.einsum("ij,j->i", matrix.rows, target)
        keep = sims >= MIN_SIMILARITY
        if kinds is not None:
            keep &= np.fromiter((k in kinds for k in matrix.kinds), bool, len(matrix.kinds))
        if texts is not None:
            keep &= np.fromiter((i in texts for i in matrix.ids), bool, len(matrix.ids))
        scores = {matrix.ids[k]: float(sims[k]) for k in np.flatnonzero(keep)}
        if texts is not None:
            for i, blob in self._cleaned(store, embedder, texts, matrix, redactor).items():
                scores.pop(i, None)
                vector = np.frombuffer(blob, "<f4")
                if blob and (score := float(np.einsum("i,i->", vector, target))) >= MIN_SIMILARITY:
                    scores[i] = score
        return sorted(scores, key=lambda i: -scores[i])[:MAX_BY_MEANING]

    def _matrix(self, store: VectorStore, embedder: Embedder) -> _Matrix:
        """The store's vectors from `embedder`, read again only when a memory changed."""
        import numpy as np

        version = store.memories_version()
        with self._cache_lock:
            cached = self._cache.get(store, {}).get(embedder.name)
        if cached is not None and cached.version == version:
            return cached
        size = 4 * embedder.dim
        usable = [r for r in store.memory_vectors(embedder.name) if len(r[2]) == size]
        joined = b"".join(blob for _, _, blob in usable)
        matrix = _Matrix(
            version=version,
            ids=[i for i, _, _ in usable],
            kinds=[k for _, k, _ in usable],
            rows=np.frombuffer(joined, dtype="<f4").reshape(len(usable), embedder.dim),
        )
        with self._cache_lock:
            self._cache.setdefault(store, {})[embedder.name] = matrix
        return matrix

    def _cleaned(
        self,
        store: VectorStore,
        embedder: Embedder,
        texts: dict[int, str],
        matrix: _Matrix,
        redactor: Redactor | None,
    ) -> dict[int, bytes]:
        """Fresh vectors of the notes holding a secret the tripwire knows now (it may have
        learned it after they were embedded), b"" for one that cannot be embedded (it is
        not compared rather than compared with a secret in it); kept in the store when
        they differ from the stored ones."""
        redactor = redactor or TRIPWIRE.redactor()
        holding = [(i, t) for i, t in texts.items() if redactor.text(t) != t]
        if not holding:
            return {}
        rows = self.embed(embedder, [embed_text(t, redactor) for _, t in holding])
        if rows is None:
            return {i: b"" for i, _ in holding}
        fresh = {i: _to_bytes(v) for (i, _), v in zip(holding, rows, strict=True)}
        at = {i: k for k, i in enumerate(matrix.ids)}
        changed = {
            i: b for i, b in fresh.items() if i not in at or matrix.rows[at[i]].tobytes() != b
        }
        if changed:
            contents = _stored_contents(store, changed)
            store.set_memory_vectors(
                embedder.name, [(i, contents[i], b) for i, b in changed.items() if i in contents]
            )
        return fresh


@dataclass(frozen=True)
class _Matrix:
    """A store's vectors from one embedder, as of `version` (`memories_version`)."""

    version: tuple[int, int]
    ids: list[int]
    kinds: list[str]
    rows: npt.NDArray[np.float32]


def _stored_contents(store: VectorStore, ids: dict[int, bytes]) -> dict[int, str]:
    """The content column of these memories (what `set_memory_vectors` checks against)."""
    rows = store.memory_rows(ids=tuple(ids), limit=len(ids))
    return {int(r["id"]): str(r["content"]) for r in rows}


def _to_bytes(row: npt.NDArray[np.float32]) -> bytes:
    import numpy as np

    return np.ascontiguousarray(row, dtype="<f4").tobytes()


#: The process's memory vectors (the built-in embedder).
VECTORS = MemoryVectors()
