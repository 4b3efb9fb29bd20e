"""Hybrid search: the vector list (meaning, other words for the same thing) fused by
weighted reciprocal rank with the full-text list (exact words, codes, names, numbers).

Rank fusion needs no common scale between BM25 and cosine scores: a chunk scores
sum(weight / (RRF_K + rank)) over the lists it is in. The vector list leads. Sharing a
question's words is weak evidence (a passage on another matter often shares them, and the
answer often uses other words), so the word list counts fully only when the query holds
something a static embedder cannot know: a code, a number, a name (`looks_exact`).
Otherwise it counts a fifth, enough to order chunks the vectors find about equally near.
Measured on bench/knowledge.py's question set (recall@5): plain reciprocal rank fusion
0.341, vectors alone 0.474, this 0.455 (see docs/architecture.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from app.core.knowledge.embedding import Embedder
from app.core.knowledge.index import Hit, KnowledgeIndex

#: Reciprocal rank fusion's constant: small, so a list's first ranks stand out.
RRF_K = 10
#: How many hits of each list take part in the fusion.
CANDIDATES = 50
#: The word list's weight (the vector list's is 1) when the query holds an exact token,
#: and otherwise.
TEXT_WEIGHT_EXACT = 1.0
TEXT_WEIGHT = 0.2
#: A word with a digit ("INC-7016", "5720"), in capitals ("VPN"), with a capital inside
#: ("FortiClient"), or capitalised after the query's first word ("Pexton", "Tallinn").
_EXACT = re.compile(r"\w*\d|\b[A-Z]{2,}|\w[a-z]+[A-Z]|(?<=\w)[\s,;:()\"']+[A-Z]\w")


def looks_exact(query: str) -> bool:
    """Whether the query holds a token the vectors cannot place but its words can find."""
    return _EXACT.search(query.strip()) is not None


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
    text_weight = TEXT_WEIGHT_EXACT if looks_exact(query) else TEXT_WEIGHT
    return fuse([by_meaning, by_text], k, weights=[1.0, text_weight])


def fuse(
    lists: Sequence[Sequence[Hit]], k: int, *, weights: Sequence[float] | None = None
) -> list[Hit]:
    """Weighted reciprocal rank fusion of ranked lists (all weights 1 when not given), one
    hit per chunk; ties go to the earlier list's order."""
    scores: dict[int, float] = {}
    hits: dict[int, Hit] = {}
    for ranked, weight in zip(lists, weights or [1.0] * len(lists), strict=True):
        seen: set[int] = set()
        for rank, hit in enumerate(ranked, start=1):
            if hit.chunk_id in seen:
                continue
            seen.add(hit.chunk_id)
            scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + weight / (RRF_K + rank)
            hits.setdefault(hit.chunk_id, hit)
    order = {chunk_id: i for i, chunk_id in enumerate(hits)}
    best = sorted(scores, key=lambda chunk_id: (-scores[chunk_id], order[chunk_id]))[:k]
    return [_scored(hits[chunk_id], scores[chunk_id]) for chunk_id in best]


def _scored(hit: Hit, score: float) -> Hit:
    return Hit(hit.chunk_id, hit.folder_id, hit.path, hit.location, hit.text, score)
