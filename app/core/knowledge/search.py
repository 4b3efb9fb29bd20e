"""Hybrid search: the full-text list (exact words, rare names and numbers) and the vector
list (meaning, other words for the same thing) fused by reciprocal rank.

Rank fusion needs no common scale between BM25 and cosine scores: a chunk scores
sum(1 / (RRF_K + rank)) over the lists it is in, so one near the top of both wins, and one
found by a single list still ranks by how high it is there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from app.core.knowledge.embedding import Embedder
from app.core.knowledge.index import Hit, KnowledgeIndex

#: The usual constant of reciprocal rank fusion: damps the difference between top ranks.
RRF_K = 60
#: How many hits of each list take part in the fusion.
CANDIDATES = 50


def hybrid_search(
    index: KnowledgeIndex,
    embedder: Embedder,
    query: str,
    *,
    k: int = 8,
    folder_ids: Sequence[int] | None = None,
    clean: Callable[[Sequence[Hit]], bool] | None = None,
) -> list[Hit]:
    """The `k` best chunks for `query`, best first; each hit's score is its fused score.
    `clean` sees every candidate first and says whether it changed some (a secret learned
    after indexing masked): then both lists are made again from the changed index."""
    if k < 1 or not query.strip():
        return []
    depth = max(CANDIDATES, k)
    vector = embedder.embed([query])[0]
    by_text = index.search_text(query, depth, folder_ids)
    by_meaning = index.search_vector(vector, depth, folder_ids)
    if clean is not None and clean([*by_text, *by_meaning]):
        by_text = index.search_text(query, depth, folder_ids)
        by_meaning = index.search_vector(vector, depth, folder_ids)
    return fuse([by_text, by_meaning], k)


def fuse(lists: Sequence[Sequence[Hit]], k: int) -> list[Hit]:
    """Reciprocal rank fusion of ranked lists, one hit per chunk."""
    scores: dict[int, float] = {}
    hits: dict[int, Hit] = {}
    for ranked in lists:
        seen: set[int] = set()
        for rank, hit in enumerate(ranked, start=1):
            if hit.chunk_id in seen:
                continue
            seen.add(hit.chunk_id)
            scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + 1.0 / (RRF_K + rank)
            hits.setdefault(hit.chunk_id, hit)
    best = sorted(scores, key=lambda chunk_id: (-scores[chunk_id], chunk_id))[:k]
    return [_scored(hits[chunk_id], scores[chunk_id]) for chunk_id in best]


def _scored(hit: Hit, score: float) -> Hit:
    return Hit(hit.chunk_id, hit.folder_id, hit.path, hit.location, hit.text, score)
